"""What a segmented run is made of: the task's :class:`Plan` (its segments and how to
prepare one), a :class:`Prepared` segment, the :class:`OtherInput` a what-if puts in the
input's place, and the :class:`RunTotals` that add the segments up.

``core.tasks.base`` (the runs) and ``core.tasks.segments`` (the loops) share them; both
re-export them. Torch-free at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from core.backends.base import DecoderPrompt, EncoderOutput
from core.events import Finished, RunStats, SegmentEvent, StepEvent


@dataclass(frozen=True)
class Prepared:
    """One segment, encoded and ready to decode.

    Attributes:
        encoded: its encoder output (from the task's encoder cache; never modified).
        prompt: the task's decoder prompt for it.
        event: the ``SegmentEvent`` announcing it (its ``source_offset`` is passed on to
            the engine's events).
        cached: True if ``encoded`` came from the cache.
    """

    encoded: EncoderOutput
    prompt: DecoderPrompt
    event: SegmentEvent
    cached: bool


@dataclass(frozen=True)
class Plan:
    """One run's segments, ready to decode.

    Attributes:
        segments: the task's segments (windows, text lines, sentence chunks).
        prepare: (i, segment) -> :class:`Prepared`: encodes segment ``i`` (cached) and gives
            its decoder prompt and SegmentEvent.
        stats: the run's starting stats (``load_s``, ``audio_s``, ``encoder_cached=True``).
        engine: the ``core.engine.Engine`` to run.
        join: the whole text from ``(segment, its stripped text)`` pairs, in order.
        skip: ``decode_segments``' skip rule (speech: a window of digital silence), or None.
    """

    segments: Sequence[Any]
    prepare: Callable[[int, Any], Prepared]
    stats: RunStats
    engine: Any
    join: Callable[[list], str]
    skip: Callable[[int, Any, Prepared], SegmentEvent | None] | None = None


@dataclass(frozen=True)
class OtherInput:
    """What a what-if puts in place of the input (a mask, or nothing).

    Attributes:
        segments: the segment indices to re-run, in order (those a mask touches; all for
            an empty input).
        encode: segment index -> the encoder output of the masked / empty input.
        description: what was changed ("silence 1.20–1.65 s", "no input: a blank image").
        adapt: applied to each StepEvent of a mask's re-decode (translation puts dropped
            source positions back into the attention columns), or None.
    """

    segments: Sequence[int]
    encode: Callable[[int], EncoderOutput]
    description: str
    adapt: Callable[[int, StepEvent], StepEvent] | None = None


@dataclass
class RunTotals:
    """Running totals of a segmented run.

    Attributes:
        stats: summed timing; the caller adds ``encode_s`` and sets ``encoder_cached``.
        token_ids: generated ids of all segments, in order.
        step: the step index the next segment's first token gets.
        reason: why the last segment ended ("eos" | "max_tokens" | "cancelled").
    """

    stats: RunStats
    token_ids: list[int] = field(default_factory=list)
    step: int = 0
    reason: str = "eos"

    def add(self, finished: Finished, run_start: float = 0.0) -> bool:
        """Add one segment's result; True if the run was cancelled (stop decoding).
        ``run_start``: seconds from the task's start to this segment's engine run (for
        ``first_token_s``)."""
        self.token_ids.extend(finished.token_ids)
        self.step += len(finished.token_ids)
        self.stats.decode_s += finished.stats.decode_s
        self.stats.n_tokens += finished.stats.n_tokens
        self.stats.reused_tokens += finished.stats.reused_tokens
        if not self.stats.first_token_s and finished.stats.first_token_s:
            self.stats.first_token_s = run_start + finished.stats.first_token_s
        if finished.stats.speculative is not None:
            from core.speculative.summary import merge_summary

            self.stats.speculative = merge_summary(self.stats.speculative, finished.stats.speculative)
        self.reason = finished.reason
        return finished.cancelled

    def finished(self, text: str) -> Finished:
        """The Finished event that ends the whole run, with ``text`` as its text."""
        return Finished(
            text=text, token_ids=self.token_ids, stats=self.stats,
            cancelled=self.reason == "cancelled", reason=self.reason,
        )
