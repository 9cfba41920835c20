"""What every task shares: decoding an input segment by segment into one event stream.

Speech decodes 30 s windows, translation sentences, OCR text lines; each segment is
one ``Engine.run``. ``run_segment`` passes the engine's events through and returns
its ``Finished``; ``RunTotals`` adds the segments up into the single ``Finished``
that ends the task's stream, and keeps the global step counter continuous.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generator

from core.backends.base import DecoderPrompt, EncoderOutput
from core.events import Event, Finished, RunStats
from core.options import DecodingOptions


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
) -> Generator[Event, None, Finished]:
    """Yield one segment's StepEvents/BeamEvents; return (not yield) its Finished.

    Use as ``finished = yield from run_segment(...)``.

    Raises:
        RuntimeError: if the engine ended without a Finished event (a bug).
    """
    finished = None
    for event in engine.run(
        encoded, prompt, options, cancel=cancel, step_offset=step_offset, segment=segment,
        source_offset=source_offset,
    ):
        if isinstance(event, Finished):
            finished = event
        else:
            yield event
    if finished is None:
        raise RuntimeError("the engine ended without a Finished event")
    return finished


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

    def add(self, finished: Finished) -> bool:
        """Add one segment's result; True if the run was cancelled (stop decoding)."""
        self.token_ids.extend(finished.token_ids)
        self.step += len(finished.token_ids)
        self.stats.decode_s += finished.stats.decode_s
        self.stats.n_tokens += finished.stats.n_tokens
        self.reason = finished.reason
        return finished.cancelled

    def finished(self, text: str) -> Finished:
        """The Finished event that ends the whole run, with ``text`` as its text."""
        return Finished(
            text=text, token_ids=self.token_ids, stats=self.stats,
            cancelled=self.reason == "cancelled", reason=self.reason,
        )
