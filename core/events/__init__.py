"""Plain-data events yielded by ``Engine.run`` and the tasks.

Events hold numpy arrays, ints, floats and strings only — never torch tensors —
so the GUI thread can keep them without touching model state.

One module per family, all re-exported here (``from core.events import StepEvent``):
``step`` (a token), ``beam`` (beam search), ``run`` (segments, attempts, timing, the end),
``speculation`` (speculative decoding's rounds and summary).
"""

from __future__ import annotations

from typing import Union

from core.events.beam import BEAM_STATUSES, BeamEvent, BeamNode, BeamRowReport, Hypothesis
from core.events.run import AttemptEvent, Finished, RunStats, SegmentEvent
from core.events.speculation import SPECULATION_KINDS, DraftToken, SpeculationRound, SpeculationSummary
from core.events.step import LensEntry, Placement, StageReport, StepEvent, TokenProb, load_attention

__all__ = [
    "BEAM_STATUSES", "SPECULATION_KINDS", "AttemptEvent", "BeamEvent", "BeamNode", "BeamRowReport", "DraftToken",
    "Event", "Finished", "Hypothesis", "LensEntry", "Placement", "RunStats", "SegmentEvent", "SpeculationRound",
    "SpeculationSummary", "StageReport", "StepEvent", "TokenProb", "load_attention",
]

Event = Union[StepEvent, BeamEvent, SegmentEvent, AttemptEvent, SpeculationRound, Finished]
