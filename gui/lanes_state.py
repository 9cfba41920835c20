"""The model of a decoding-lanes run (issue 13, section 1): no widgets, views subscribe.

A lanes run decodes 2 to 4 lanes, each with its own options, on one encoder output per
segment (``core.tasks.lanes``); :class:`LanesState` takes its ``LaneEvent`` s in batches (one
per frame) and keeps, per lane, its tokens, log-probabilities, the newest beam-search step
(a beam lane's tokens come when its search ends), its end; the alignment of every lane to
lane 1 (``core.tasks.lanes.align_lanes``), the pairwise agreement, and each finished lane's
score against the user's reference text (WER / CER / chrF, ``core.analysis.metrics``).

Signals:
    started(): a new lanes run (:meth:`start`); the lanes' specs and options are set.
    grew(): lanes got tokens or beam steps (once per batch).
    finished(): the run ended (every lane has its end; ``LanesFinished`` arrived).
    scoresChanged(): the reference or a lane's score changed.
    cleared(): no lanes any more (the input changed).
    markedEarlier(str): the lanes now belong to an earlier run (:attr:`LanesState.earlier`):
        the model or a setting they were decoded with changed since. They are kept (the
        user's work) and marked until lanes run again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from PySide6.QtCore import QObject, Signal

from core.analysis.metrics import Score, score
from core.events import BeamEvent, Finished, StepEvent
from core.tasks.lanes import LaneEvent, LanesFinished, agreement, align_lanes, mean_agreement
from core.options import DecodingOptions


@dataclass
class Lane:
    """One lane as the views see it.

    Attributes:
        spec: what the user typed for it ("beam:5").
        options: its decoding options.
        steps: its StepEvents, in order (all segments).
        logprob, raw_logprob: sums of the log processed / raw probabilities of ``steps``.
        beams: its newest BeamEvent when it arrived after its last token (a beam search is
            running: its tokens come at the end of the segment), else None.
        finished: its Finished (whole text, stats.decode_s = its own time), once it ended.
        score: its text against the reference, when both exist.
    """

    spec: str
    options: DecodingOptions
    steps: list[StepEvent] = field(default_factory=list)
    logprob: float = 0.0
    raw_logprob: float = 0.0
    beams: BeamEvent | None = None
    finished: Finished | None = None
    score: Score | None = None

    @property
    def token_ids(self) -> list[int]:
        return [e.token_id for e in self.steps]

    @property
    def text(self) -> str:
        """The whole text when finished, else the tokens so far."""
        return self.finished.text if self.finished is not None else "".join(e.text for e in self.steps).strip()

    @property
    def time_s(self) -> float | None:
        """Seconds of its own decoding (None while it runs)."""
        return self.finished.stats.decode_s if self.finished is not None else None

    @property
    def running(self) -> bool:
        return self.finished is None


class LanesState(QObject):
    """Lanes, their tokens, alignment, agreement and scores (module docstring).

    Args:
        metric: the reference metric of the tab ("wer" | "cer" | "chrf").
    """

    started = Signal()
    grew = Signal()
    finished = Signal()
    scoresChanged = Signal()
    cleared = Signal()
    markedEarlier = Signal(str)

    def __init__(self, metric: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.metric = metric
        self.lanes: list[Lane] = []
        self.reference = ""
        self.reference_error = ""
        self.result: LanesFinished | None = None
        #: "" while the lanes belong to the tab's current run, else what they were decoded with
        #: that has changed since ("model tiny.en", "timestamps off")
        self.earlier = ""
        self._columns: list[tuple[int | None, ...]] | None = None

    def speedup(self, k: int) -> tuple[float, int] | None:
        """A finished speculative lane ``k``'s speed-up over a finished plain lane of the same
        run whose options are its verification's plain decoding (greedy, or sampling with the
        seed; every other option the same): (plain ms per token / its ms per token, that
        lane's index); None for another lane or without such a lane."""
        lane = self.lanes[k]
        o, fin = lane.options, lane.finished
        if o.strategy != "speculative" or fin is None or fin.cancelled or fin.stats.ms_per_token <= 0:
            return None
        plain = replace(o, strategy=o.chain_strategy)
        for j, other in enumerate(self.lanes):
            f = other.finished
            if (j != k and f is not None and not f.cancelled and f.stats.n_tokens
                    and replace(other.options, draft=o.draft, draft_tokens=o.draft_tokens,
                                verification=o.verification) == plain):
                return f.stats.ms_per_token / fin.stats.ms_per_token, j
        return None

    # ---------------------------------------------------------------- run
    def start(self, specs: list[str], options: list[DecodingOptions]) -> None:
        """A new run of these lanes (the old lanes go)."""
        self.lanes = [Lane(s, o) for s, o in zip(specs, options)]
        self.result = None
        self.earlier = ""
        self._columns = None
        self.started.emit()

    def add_events(self, events: list) -> None:
        """Take a batch of ``LaneEvent`` s (and the ``LanesFinished`` that ends the run)."""
        grew = False
        done = None
        for ev in events:
            if isinstance(ev, LanesFinished):
                done = ev
                continue
            if not isinstance(ev, LaneEvent) or not 0 <= ev.lane < len(self.lanes):
                continue
            lane, e = self.lanes[ev.lane], ev.event
            if isinstance(e, StepEvent):
                lane.steps.append(e)
                lane.logprob += _log(e.prob)
                lane.raw_logprob += _log(e.raw_prob)
                lane.beams = None
                grew = True
            elif isinstance(e, BeamEvent):
                lane.beams = e
                grew = True
            elif isinstance(e, Finished):
                lane.finished = e
                lane.beams = None
                grew = True
        if grew:
            self._columns = None
            self._score_lanes(emit=False)
            self.grew.emit()
        if done is not None:
            self.finish(done)

    def finish(self, done: LanesFinished) -> None:
        """The run ended: ``done``'s results stand (lanes that got no Finished, e.g. after a
        failure, end as they are)."""
        self.result = done
        for lane, r in zip(self.lanes, done.lanes):
            if lane.finished is None:
                lane.finished = Finished(r.text, list(r.token_ids), done.stats, r.cancelled, r.reason)
        self._columns = None
        self._score_lanes(emit=False)
        self.finished.emit()
        self.scoresChanged.emit()

    def end_unfinished(self, reason: str = "cancelled") -> None:
        """Close the lanes still running (the run was cancelled or failed): they keep their
        tokens, marked ``reason``."""
        from core.events import RunStats

        changed = False
        for lane in self.lanes:
            if lane.finished is None:
                text = "".join(e.text for e in lane.steps).strip()
                lane.finished = Finished(text, lane.token_ids, RunStats(n_tokens=len(lane.steps)), True, reason)
                lane.beams = None
                changed = True
        if changed:
            self._columns = None
            self.grew.emit()
            self.finished.emit()

    def mark_earlier(self, what: str) -> None:
        """The lanes belong to an earlier run: ``what`` they were decoded with has changed
        ("model tiny.en", "timestamps off"). They stay, marked, until lanes run again;
        nothing happens without lanes or when ``what`` is already the mark."""
        if not self.lanes or not what or what == self.earlier:
            return
        self.earlier = what
        self.markedEarlier.emit(what)

    def clear(self) -> None:
        """No lanes (the input changed or went away)."""
        self.lanes = []
        self.result = None
        self.earlier = ""
        self._columns = None
        self.cleared.emit()

    def is_running(self) -> bool:
        """Some lane has not ended."""
        return any(lane.running for lane in self.lanes)

    # ---------------------------------------------------------------- reference
    def set_reference(self, text: str) -> None:
        """The text the lanes are scored against ("" = none)."""
        self.reference = text
        self._score_lanes(emit=True)

    def _score_lanes(self, emit: bool) -> None:
        self.reference_error = ""
        for lane in self.lanes:
            lane.score = None
        if self.reference.strip():
            for lane in self.lanes:
                if lane.finished is None:
                    continue
                try:
                    lane.score = score(self.metric, lane.finished.text, self.reference)
                except ValueError as exc:
                    self.reference_error = str(exc)
                    break
        if emit:
            self.scoresChanged.emit()

    # ---------------------------------------------------------------- derived
    def columns(self) -> list[tuple[int | None, ...]]:
        """Every lane aligned to lane 1 (``core.tasks.lanes.align_lanes``: per column, each lane's
        step index in :attr:`Lane.steps` or None for a gap)."""
        if self._columns is None:
            self._columns = align_lanes([lane.token_ids for lane in self.lanes]) if self.lanes else []
        return self._columns

    def differs(self, column: tuple[int | None, ...], lane: int) -> bool:
        """Whether ``lane``'s token in ``column`` differs from lane 1's (a gap differs from a
        token); for lane 1, whether any other lane differs from it there."""
        if lane == 0:
            return any(self.differs(column, k) for k in range(1, len(column)))
        a, b = column[0], column[lane]
        if a is None or b is None:
            return not (a is None and b is None)
        return self.lanes[0].steps[a].token_id != self.lanes[lane].steps[b].token_id

    def agreement(self) -> np.ndarray:
        """(n, n) token agreement of the lanes so far (``core.tasks.lanes.agreement``)."""
        return agreement([lane.token_ids for lane in self.lanes])

    def mean_agreement(self) -> float:
        return mean_agreement(self.agreement()) if self.lanes else 1.0


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf
