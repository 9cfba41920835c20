"""The segment loops every task runs: decode, fork, lanes and what-ifs, one segment after another.

Speech decodes 30 s windows, translation sentences, OCR text lines; each segment is one
``Engine.run``. The task gives the segments and a ``prepare`` that encodes one (cached)
and says its prompt and its ``SegmentEvent`` (:class:`Prepared`); these loops do the rest:

- :func:`decode_segments`: the segments one after another into one event stream;
  ``run_segment`` passes the engine's events through and returns its ``Finished``;
  ``RunTotals`` adds the segments up into the single ``Finished`` that ends the stream,
  and keeps the global step counter continuous.
- :func:`fork_segment`: one segment alone with forced tokens (a fork, issue 12): the same
  ``prepare`` (so the cached encoder output), the segment's original step numbering, and
  the engine's KV-cache reuse.
- :func:`decode_lanes`: every segment once per lane on one encoder output
  (``core.tasks.lanes`` holds the lane events, the tally and the agreement).
- :func:`what_if_segments`: the segments scored (and re-decoded) under another input
  (``core.tasks.whatif`` holds the masks, the scoring and its events).

``core.tasks.base.SegmentedTask`` calls them with a task's plan. Torch-free at import (the
OCR task's image loading must not load torch).
"""

from __future__ import annotations

import time
from typing import Callable, Generator, Iterator, Mapping, Sequence, TypeVar

from core.backends.base import DecoderPrompt, EncoderOutput
from core.events import Event, Finished, Placement, RunStats, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.plan import Prepared, RunTotals
from core.tasks.lanes import LaneEvent, LanesFinished, LaneTally, check_lanes, round_robin, tallied
from core.tasks.whatif import KINDS, OriginalSegment, Ready, TokenShift, WhatIfDone, WhatIfScores, score_tokens, shifts_of

S = TypeVar("S")


def decode_segments(
    engine,
    segments: Sequence[S],
    prepare: Callable[[int, S], Prepared],
    options: DecodingOptions,
    stats: RunStats,
    join: Callable[[list[tuple[S, str]]], str],
    *,
    cancel: Callable[[], bool] | None = None,
    forced: Mapping[int, Sequence[int]] | None = None,
    skip: Callable[[int, S, Prepared], SegmentEvent | None] | None = None,
) -> Iterator[Event]:
    """Decode ``segments`` one after another into one event stream.

    For each segment: ``prepare(i, segment)`` (timed as encoding), its SegmentEvent, then
    the engine's events with a step counter running across segments. ``cancel`` is
    polled between segments and, by the engine, between steps.

    Args:
        engine: the ``core.engine.Engine`` to run.
        segments: the task's segments (windows, sentence chunks, text lines).
        prepare: encodes segment ``i`` and gives its prompt and SegmentEvent.
        options: validated decoding options.
        stats: the run's stats so far (``load_s``, ``audio_s``, ``encoder_cached=True``);
            encode and decode times and token counts are added to it.
        join: the whole text from ``(segment, its stripped text)`` pairs, in order.
        cancel: returns True to stop.
        forced: segment index -> token ids forced at the start of that segment's
            generated tokens (``Engine.run``'s ``forced_ids``; the CLI's ``--prefix``
            forces segment 0). Such a segment does not reuse a kept KV cache, so every
            forced token is reported (reuse would leave out those the cache holds; a
            fork, :func:`fork_segment`, is where that is wanted).
        skip: (i, segment, prepared) -> a SegmentEvent to yield instead of decoding the
            segment (no tokens; its text ""), or None to decode it (speech: a window of
            digital silence, ``SpeechModel.decode``).

    Yields:
        per segment a SegmentEvent, then its StepEvents / BeamEvents; one Finished at
        the end (text from ``join``, every segment's token ids, the summed stats).
    """
    totals = RunTotals(stats)
    texts: list[tuple[S, str]] = []
    begun = time.perf_counter()
    for i, segment in enumerate(segments):
        if i > 0 and cancel is not None and cancel():  # stop between segments
            totals.reason = "cancelled"
            break
        t0 = time.perf_counter()
        ready = prepare(i, segment)
        stats.encode_s += time.perf_counter() - t0
        stats.encoder_cached = stats.encoder_cached and ready.cached
        skipped = skip(i, segment, ready) if skip is not None else None
        if skipped is not None:
            engine.processors(ready.encoded, ready.prompt, options)  # options the input can't take fail all the same
            yield skipped
            texts.append((segment, ""))
            continue
        yield ready.event
        run_start = time.perf_counter() - begun
        forced_ids = (forced or {}).get(i, ())
        finished = yield from run_segment(
            engine, ready.encoded, ready.prompt, options, cancel=cancel, step_offset=totals.step,
            segment=i, source_offset=ready.event.source_offset, forced_ids=forced_ids, reuse_cache=not forced_ids,
        )
        texts.append((segment, finished.text.strip()))
        if totals.add(finished, run_start):
            break
    yield totals.finished(join(texts))


def run_segment(
    engine,
    encoded: EncoderOutput,
    prompt: DecoderPrompt,
    options: DecodingOptions,
    *,
    cancel: Callable[[], bool] | None,
    step_offset: int,
    segment: int,
    source_offset: int = 0,
    forced_ids: Sequence[int] = (),
    reuse_cache: bool = True,
) -> Generator[Event, None, Finished]:
    """Yield one segment's StepEvents/BeamEvents; return (not yield) its Finished.

    Use as ``finished = yield from run_segment(...)``. ``forced_ids`` and ``reuse_cache``
    go to ``Engine.run``.

    Raises:
        RuntimeError: if the engine ended without a Finished event (a bug).
    """
    finished = None
    for event in engine.run(
        encoded, prompt, options, cancel=cancel, place=Placement(step_offset, segment, source_offset),
        forced_ids=forced_ids, reuse_cache=reuse_cache,
    ):
        if isinstance(event, Finished):
            finished = event
        else:
            yield event
    if finished is None:
        raise RuntimeError("the engine ended without a Finished event")
    return finished


def fork_segment(
    engine,
    segments: Sequence[S],
    index: int,
    prepare: Callable[[int, S], Prepared],
    options: DecodingOptions,
    stats: RunStats,
    *,
    forced_ids: Sequence[int],
    step_offset: int,
    cancel: Callable[[], bool] | None = None,
    reuse_cache: bool = True,
) -> Iterator[Event]:
    """Re-decode segment ``index`` alone, its first generated tokens forced (a fork).

    The other segments are not decoded: a caller showing the branch shows the original
    run with this segment replaced. The segment is prepared as in the original run (its
    encoder output comes from the task's cache), its steps are numbered from
    ``step_offset`` (the number the segment's first token had in the original run), and
    the engine reuses the KV cache of its last batch-1 run on this segment where it can
    (``Engine.run``'s ``reuse_cache``): then forced tokens inside the reused part are not
    reported again (the caller has them from the run it forks).

    Args:
        engine, segments, prepare, options: as for :func:`decode_segments`.
        index: the segment to re-decode, ``0 <= index < len(segments)``.
        stats: stats to fill (``load_s``, ``audio_s``; encode and decode times, tokens,
            ``reused_tokens`` and ``first_token_s`` are set here: ``first_token_s`` counts
            from this call, the segment's preparation included).
        forced_ids: token ids forced first (``Engine.run``'s ``forced_ids``): typically the
            original tokens of this segment up to the fork step, then the alternative.
        step_offset: the segment's first step number in the original run.
        cancel: polled between steps.
        reuse_cache: let the engine reuse its kept KV cache.

    Yields:
        the segment's SegmentEvent, its StepEvents (forced ones with ``forced=True``) and
        BeamEvents, and one Finished: the segment's text (stripped), its token ids (the
        forced ones included), the stats.

    Raises:
        ValueError: ``index`` out of range; a forced id that is EOS or outside the
            vocabulary; bad options.
    """
    if not 0 <= index < len(segments):
        raise ValueError(f"segment {index} does not exist; the input has {len(segments)} segment(s)")
    begun = time.perf_counter()
    ready = prepare(index, segments[index])
    stats.encode_s += time.perf_counter() - begun
    stats.encoder_cached = stats.encoder_cached and ready.cached
    yield ready.event
    run_start = time.perf_counter() - begun
    finished = yield from run_segment(
        engine, ready.encoded, ready.prompt, options, cancel=cancel, step_offset=step_offset, segment=index,
        source_offset=ready.event.source_offset, forced_ids=forced_ids, reuse_cache=reuse_cache,
    )
    totals = RunTotals(stats, step=step_offset)
    totals.add(finished, run_start)
    yield totals.finished(finished.text.strip())


def decode_lanes(
    engine,
    segments: Sequence[S],
    prepare: Callable[[int, S], Prepared],
    lanes: Sequence[DecodingOptions],
    stats: RunStats,
    join: Callable[[list[tuple[S, str]]], str],
    *,
    cancel: Callable[[], bool] | None = None,
    forced: Mapping[int, Sequence[int]] | None = None,
    skip: Callable[[int, S, Prepared], SegmentEvent | None] | None = None,
) -> Iterator[LaneEvent | LanesFinished]:
    """Decode ``segments`` once per lane, every lane on the same encoder output.

    For each segment: ``prepare(i, segment)`` once (the encoder, timed as ``encode_s``),
    its SegmentEvent to every lane, then every lane's ``Engine.run`` on the prepared
    encoder output and prompt, interleaved one event per lane per turn (:func:`round_robin`).
    Each lane's steps are numbered across segments as in a run alone, and each lane's
    tokens and probabilities equal that lane's options run alone (``decode_segments``):
    the lanes share the encoder output (read only) and nothing else (no KV cache reuse
    between them; each sampler has its own seeded generator). ``cancel`` is polled
    between segments and, by the engines, between steps.

    Args:
        engine: the ``core.engine.Engine``.
        segments, prepare, join: as for ``core.tasks.base.decode_segments``.
        lanes: one validated-here ``DecodingOptions`` per lane (at least one).
        stats: the run's starting stats (``load_s``, ``audio_s``, ``encoder_cached=True``);
            each lane's stats start as a copy of it.
        cancel: returns True to stop.
        forced: segment index -> token ids forced first in that segment, in every lane
            (the CLI's ``--prefix``).
        skip: as for :func:`decode_segments`: a segment it skips (speech: digital silence)
            gets that SegmentEvent in every lane and no tokens, as in a run alone.

    Yields:
        ``LaneEvent`` s (per lane: SegmentEvents, StepEvents, BeamEvents, then its
        Finished, whose ``stats.decode_s`` is the lane's own decoding time and
        ``encode_s`` the shared encoding), then one :class:`LanesFinished`.

    Raises:
        ValueError: no lanes; invalid options (naming the lane).
    """
    lanes = check_lanes(lanes)
    n = len(lanes)
    totals = [RunTotals(RunStats(load_s=stats.load_s, audio_s=stats.audio_s, encoder_cached=True)) for _ in lanes]
    texts: list[list[tuple[S, str]]] = [[] for _ in lanes]
    tally = LaneTally(lanes)
    begun = time.perf_counter()
    stopped = False
    for i, segment in enumerate(segments):
        if i > 0 and cancel is not None and cancel():
            for t in totals:
                t.reason = "cancelled"
            break
        t0 = time.perf_counter()
        ready = prepare(i, segment)
        encode_s = time.perf_counter() - t0
        stats.encode_s += encode_s
        stats.encoder_cached = stats.encoder_cached and ready.cached
        skipped = skip(i, segment, ready) if skip is not None else None
        for k in range(n):
            totals[k].stats.encode_s += encode_s
            totals[k].stats.encoder_cached = stats.encoder_cached
            if skipped is not None:  # as decode_segments: options the input can't take fail all the same
                engine.processors(ready.encoded, ready.prompt, lanes[k])
                texts[k].append((segment, ""))
            yield LaneEvent(k, skipped if skipped is not None else ready.event)
        if skipped is not None:
            continue
        forced_ids = (forced or {}).get(i, ())
        runs = [
            run_segment(engine, ready.encoded, ready.prompt, lanes[k], cancel=cancel, step_offset=totals[k].step,
                        segment=i, source_offset=ready.event.source_offset, forced_ids=forced_ids, reuse_cache=False)
            for k in range(n)
        ]
        seconds = [0.0] * n
        ends = yield from tallied(round_robin(runs, seconds), tally)
        for k in range(n):
            fin: Finished = ends[k]
            fin.stats.decode_s = seconds[k]  # the engine's clock also ran while the other lanes stepped
            texts[k].append((segment, fin.text.strip()))
            stopped = totals[k].add(fin) or stopped
        if stopped:
            break
    measure_speedup(totals, lanes)
    for k in range(n):
        fin = totals[k].finished(join(texts[k]))
        ev = LaneEvent(k, fin)
        tally.add(ev)
        yield ev
    stats.decode_s = time.perf_counter() - begun - stats.encode_s
    stats.n_tokens = sum(r.n_tokens for r in tally.results)
    yield tally.finished(stats)


def measure_speedup(totals: Sequence[RunTotals], lanes: Sequence[DecodingOptions]) -> None:
    """A speculative lane beside a plain greedy lane: its ``SpeculationSummary.speedup_measured``
    = the greedy lane's ms per token / its own (each lane's own decoding time, same input)."""
    plain = next((t for t, o in zip(totals, lanes) if o.strategy == "greedy" and t.stats.n_tokens), None)
    if plain is None:
        return
    for t, o in zip(totals, lanes):
        s = t.stats.speculative
        if o.strategy == "speculative" and s is not None and t.stats.n_tokens and t.stats.decode_s > 0:
            s.speedup_measured = plain.stats.ms_per_token / t.stats.ms_per_token


def what_if_segments(
    engine,
    segments: Sequence[int],
    prepare: Callable[[int], Ready],
    encode_other: Callable[[int], EncoderOutput],
    original: Mapping[int, OriginalSegment],
    options: DecodingOptions,
    *,
    kind: str = "mask",
    description: str = "",
    cancel: Callable[[], bool] | None = None,
    adapt: Callable[[int, StepEvent], StepEvent] | None = None,
) -> Iterator[object]:
    """Score (and for a mask, re-decode) ``segments`` under another input; see the module docstring.

    Args:
        engine: the task's ``core.engine.Engine``.
        segments: the segment indices to do, in order (those a mask touches; all for "prior").
        prepare: segment index -> :class:`Ready` as the original run had it (its cached
            encoder output, its prompt: the what-if keeps the prompt, e.g. the language the
            original detected, so the tokens' probabilities are comparable).
        encode_other: segment index -> the encoder output of the masked / empty input.
        original: the original run's tokens per segment (:func:`original_segments`).
        options: the run's decoding options (the mask's re-decode uses them).
        kind: "mask" (re-decode and score) or "prior" (score only).
        description: what was changed, for :class:`WhatIfDone`.
        cancel: polled between segments and by the engine between steps.
        adapt: applied to each StepEvent of a re-decode (the translation task puts dropped
            source positions back into the attention columns).

    Yields:
        see the module docstring.

    Raises:
        ValueError: an unknown kind; bad options.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    options = options.validate()
    t0 = time.perf_counter()
    stats = RunStats(encoder_cached=False)
    done: list[int] = []
    every: list[TokenShift] = []
    all_ids: list[int] = []
    texts: list[str] = []
    cancelled = False
    for i in segments:
        if cancel is not None and cancel():
            cancelled = True
            break
        ready = prepare(i)
        t_enc = time.perf_counter()
        other = encode_other(i)
        stats.encode_s += time.perf_counter() - t_enc
        orig = original.get(i, OriginalSegment(0, ()))
        text, ids = "", ()
        if kind == "mask":
            yield ready.event
            run = run_segment(engine, other, ready.prompt, options, cancel=cancel, step_offset=orig.step_offset,
                              segment=i, source_offset=ready.event.source_offset, reuse_cache=False)
            fin = yield from (run if adapt is None else _adapted(run, lambda ev: adapt(i, ev)))
            stats.decode_s += fin.stats.decode_s
            stats.n_tokens += fin.stats.n_tokens
            text, ids = fin.text.strip(), tuple(fin.token_ids)
            all_ids.extend(ids)
            texts.append(text)
            if fin.cancelled:
                cancelled = True
                break
        real = score_tokens(engine, ready.encoded, ready.prompt, orig.token_ids, step_offset=orig.step_offset,
                            segment=i, cancel=cancel)
        alt = score_tokens(engine, other, ready.prompt, orig.token_ids, step_offset=orig.step_offset,
                           segment=i, cancel=cancel)
        shifts = shifts_of(real, alt)
        if len(shifts) < len(orig.token_ids) and cancel is not None and cancel():
            cancelled = True
            break
        every.extend(shifts)
        done.append(i)
        yield WhatIfScores(kind, i, shifts, text, ids)
    if kind == "mask":
        yield Finished(text=" ".join(t for t in texts if t), token_ids=all_ids, stats=stats, cancelled=cancelled,
                       reason="cancelled" if cancelled else "eos")
    yield WhatIfDone(kind, description, tuple(done), tuple(every), cancelled, time.perf_counter() - t0)


def _adapted(run: Generator[Event, None, Finished], adapt: Callable[[StepEvent], StepEvent]
             ) -> Generator[Event, None, Finished]:
    """``run``'s events with ``adapt`` applied to each StepEvent; returns what ``run`` returns."""
    while True:
        try:
            ev = next(run)
        except StopIteration as stop:
            return stop.value
        yield adapt(ev) if isinstance(ev, StepEvent) else ev
