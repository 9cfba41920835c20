"""Strategies side by side on one encoder output: decoding lanes (issue 13, section 1).

A *lane* is one decoding run with its own ``DecodingOptions`` (greedy | beam 5 |
sample T=0.8 | min-p 0.1, ...). The segment loop (``core.tasks.segments.decode_lanes``,
a task's ``decode_lanes``) decodes 2 to 4 lanes on the same input: per segment (30 s window, sentence, text line) the task's ``prepare`` encodes once
and every lane's ``Engine.run`` decodes from that one ``EncoderOutput``. The runs are
interleaved round-robin, one engine event (a token, a beam step) per lane per turn, so
all lanes grow live; a lane that finishes a segment early waits for the others before
the next segment is encoded.

Every event of a lane comes wrapped as ``LaneEvent(lane, event)`` (its SegmentEvents,
StepEvents, BeamEvents and, last, its own ``Finished`` with the lane's whole text); the
stream ends with one :class:`LanesFinished`: per lane its text, total log-probability
(sum of the log processed probabilities of its tokens), decode time (the seconds spent in
that lane's own steps, not the other lanes'), token count, and the agreement between the
lanes (:func:`agreement`). :func:`interleave` does the same over any event streams (whole
task runs, a fake model's), for models without a per-segment lane loop.

The lane-spec grammar (the CLI's ``--compare``, the GUI's lane boxes) is in
:mod:`core.tasks.lane_spec`; reference metrics (WER/CER/chrF) in :mod:`core.analysis.metrics`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any, Generator, Iterable, Iterator, Sequence

import numpy as np

from core.events import Event, Finished, RunStats, StepEvent
from core.options import DecodingOptions

#: how many lanes the views and the CLI offer
MIN_LANES, MAX_LANES = 2, 4


@dataclass(frozen=True)
class LaneEvent:
    """One event of one lane.

    Attributes:
        lane: the lane's index (0-based, in the order the options were given).
        event: a SegmentEvent, StepEvent, BeamEvent, or the lane's final Finished.
    """

    lane: int
    event: Event


@dataclass
class LaneResult:
    """What one lane decoded.

    Attributes:
        lane: the lane's index.
        options: its decoding options.
        text: its whole text (segments joined as the task joins them).
        token_ids: its generated ids, all segments.
        logprob: sum over its tokens of log(processed probability): what its own strategy's
            distribution gave the tokens (-inf if one had probability 0).
        raw_logprob: the same under the raw distribution (the model's softmax with its hard
            rules only; comparable between lanes whatever their filters).
        time_s: seconds spent decoding this lane (its engine steps only; the shared
            encoding is in ``LanesFinished.stats.encode_s``).
        n_tokens: tokens it emitted (StepEvents).
        cancelled: the run was cancelled.
        reason: why it ended ("eos" | "max_tokens" | "cancelled").
        speculative: a speculative lane's ``SpeculationSummary`` (its Finished's
            ``stats.speculative``, all segments), None for other lanes.
    """

    lane: int
    options: DecodingOptions
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprob: float = 0.0
    raw_logprob: float = 0.0
    time_s: float = 0.0
    n_tokens: int = 0
    cancelled: bool = False
    reason: str = "eos"
    speculative: Any = None


@dataclass(frozen=True)
class LanesFinished:
    """The end of a lanes run.

    Attributes:
        lanes: one result per lane, in lane order.
        agreement: float (n, n): token-level agreement of each pair of lanes
            (:func:`agreement`; 1 on the diagonal).
        stats: the run as a whole: ``encode_s`` (the shared encoder passes, once per
            segment), ``decode_s`` (wall-clock seconds of all lanes' decoding, interleaved),
            ``n_tokens`` (all lanes), ``load_s``, ``audio_s``, ``encoder_cached``.
        cancelled: the run was cancelled.
    """

    lanes: tuple[LaneResult, ...]
    agreement: np.ndarray
    stats: RunStats
    cancelled: bool = False

    @property
    def mean_agreement(self) -> float:
        """The mean agreement over all pairs of lanes (1.0 for a single lane)."""
        return mean_agreement(self.agreement)


class LaneTally:
    """Adds up lane events into :class:`LaneResult` s as they pass (the CLI, the GUI's
    lanes model and :func:`interleave` use it).

    Args:
        options: each lane's options, in lane order.
    """

    def __init__(self, options: Sequence[DecodingOptions]):
        self.results = [LaneResult(lane=i, options=o) for i, o in enumerate(options)]

    def add(self, ev: LaneEvent) -> None:
        """Count one lane event (a StepEvent's probabilities, a Finished's text and end)."""
        r = self.results[ev.lane]
        e = ev.event
        if isinstance(e, StepEvent):
            r.n_tokens += 1
            r.logprob += _log(e.prob)
            r.raw_logprob += _log(e.raw_prob)
        elif isinstance(e, Finished):
            r.text, r.token_ids = e.text, list(e.token_ids)
            r.cancelled, r.reason = e.cancelled, e.reason
            r.time_s = e.stats.decode_s
            r.speculative = getattr(e.stats, "speculative", None)

    def finished(self, stats: RunStats) -> LanesFinished:
        """The :class:`LanesFinished` of what was counted."""
        lanes = tuple(self.results)
        return LanesFinished(lanes, agreement([r.token_ids for r in lanes]), stats,
                             cancelled=any(r.cancelled for r in lanes))


def interleave(
    streams: Sequence[Iterable[Event]],
    options: Sequence[DecodingOptions],
    stats: RunStats | None = None,
) -> Iterator[LaneEvent | LanesFinished]:
    """Interleave whole event streams (one per lane, each ending with its Finished) as lanes.

    For a model whose decode cannot share the encoder per segment (a fake model in tests, a
    decoder-only comparison): the streams are stepped round-robin, one event each per turn,
    each wrapped as a ``LaneEvent``; each lane's time is the seconds spent inside its own
    stream (its Finished's ``stats.decode_s`` is set to it). Ends with a ``LanesFinished``.

    Raises:
        ValueError: the numbers of streams and options differ, or no lane.
    """
    if len(streams) != len(options) or not streams:
        raise ValueError(f"give one options per stream (got {len(streams)} streams, {len(options)} options)")
    tally = LaneTally(options)
    seconds = [0.0] * len(streams)
    begun = time.perf_counter()
    for ev in round_robin([_until_finished(s) for s in streams], seconds):
        if isinstance(ev.event, Finished):
            ev.event.stats.decode_s = seconds[ev.lane]
        tally.add(ev)
        yield ev
    stats = stats or RunStats()
    stats.decode_s = time.perf_counter() - begun
    stats.n_tokens = sum(r.n_tokens for r in tally.results)
    yield tally.finished(stats)


def round_robin(runs: Sequence[Iterator[Any]], seconds: list[float]) -> Generator[LaneEvent, None, list[Any]]:
    """Step ``runs`` in turn, one item each per turn, yielding ``LaneEvent(k, item)``; a run
    that ends leaves the rotation. ``seconds[k]`` grows by the time spent inside run ``k``.

    Returns (``yield from``): each run's return value (``StopIteration.value``), in order.
    """
    ends: list[Any] = [None] * len(runs)
    live = list(range(len(runs)))
    while live:
        for k in list(live):
            t0 = time.perf_counter()
            try:
                item = next(runs[k])
            except StopIteration as stop:
                seconds[k] += time.perf_counter() - t0
                ends[k] = stop.value
                live.remove(k)
                continue
            seconds[k] += time.perf_counter() - t0
            yield LaneEvent(k, item)
    return ends


def check_lanes(lanes: Sequence[DecodingOptions]) -> list[DecodingOptions]:
    """The lanes' options, validated; ValueError naming the lane otherwise."""
    if not lanes:
        raise ValueError("give at least one lane")
    out = []
    for k, o in enumerate(lanes):
        try:
            out.append(o.validate())
        except ValueError as exc:
            raise ValueError(f"lane {k + 1}: {exc}") from None
    return out


def agreement(token_lists: Sequence[Sequence[int]]) -> np.ndarray:
    """Token-level agreement of every pair of sequences: difflib's ``SequenceMatcher``
    ratio on the token ids (2 x matched tokens / total tokens, no junk heuristic), so 1.0
    = identical, 0.0 = nothing in common; two empty sequences agree (1.0).

    Returns:
        float64 (n, n), symmetric, ones on the diagonal.
    """
    n = len(token_lists)
    out = np.ones((n, n))
    for a in range(n):
        for b in range(a + 1, n):
            x, y = list(token_lists[a]), list(token_lists[b])
            r = 1.0 if not x and not y else SequenceMatcher(None, x, y, autojunk=False).ratio()
            out[a, b] = out[b, a] = r
    return out


def mean_agreement(matrix: np.ndarray) -> float:
    """The mean of the pairwise agreements above the diagonal (1.0 for fewer than two lanes)."""
    n = matrix.shape[0]
    if n < 2:
        return 1.0
    return float(matrix[np.triu_indices(n, 1)].mean())


def align_lanes(token_lists: Sequence[Sequence[int]]) -> list[tuple[int | None, ...]]:
    """Align every lane to lane 0 (``difflib.SequenceMatcher`` on token ids) for display.

    Lane 0 is the pivot: each of its tokens is a column; another lane's token is put in the
    column of the lane-0 token it matches (an "equal" run) or pairs with (a "replace" run,
    position by position); its tokens without a partner (the longer part of a replaced run,
    an insertion) get columns of their own just before the lane-0 token they precede, shared
    by all lanes that insert there. A lane with no token in a column has a gap (None).

    Returns:
        the columns in order, each a tuple with one entry per lane: the index of that lane's
        token in its sequence, or None (a gap). Every lane's indices appear in order, each once.
    """
    n0 = len(token_lists[0]) if token_lists else 0
    matches: list[list[int | None]] = []
    inserts: list[list[list[int]]] = []
    for seq in token_lists[1:]:
        match: list[int | None] = [None] * n0
        extra: list[list[int]] = [[] for _ in range(n0 + 1)]
        sm = SequenceMatcher(None, list(token_lists[0]), list(seq), autojunk=False)
        for op, i1, i2, j1, j2 in sm.get_opcodes():
            m = min(i2 - i1, j2 - j1)
            for t in range(m):
                match[i1 + t] = j1 + t
            extra[i2].extend(range(j1 + m, j2))  # the unpaired rest of a replace / an insertion
        matches.append(match)
        inserts.append(extra)
    cols: list[tuple[int | None, ...]] = []
    for i in range(n0 + 1):
        width = max((len(e[i]) for e in inserts), default=0)
        for t in range(width):
            cols.append((None, *(e[i][t] if t < len(e[i]) else None for e in inserts)))
        if i < n0:
            cols.append((i, *(m[i] for m in matches)))
    return cols


def tallied(events: Generator[LaneEvent, None, Any], tally: LaneTally) -> Generator[LaneEvent, None, Any]:
    """Pass ``events`` on, counting each in ``tally``; return what ``events`` returns."""
    while True:
        try:
            ev = next(events)
        except StopIteration as stop:
            return stop.value
        tally.add(ev)
        yield ev


def _until_finished(stream: Iterable[Event]) -> Iterator[Event]:
    """``stream``'s events, closing it after its Finished."""
    it = iter(stream)
    for ev in it:
        yield ev
        if isinstance(ev, Finished):
            return


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf
