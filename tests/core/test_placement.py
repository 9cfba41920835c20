"""``Engine.run(place=Placement(...))``: the run's placement in a segmented input (step_offset,
segment, source_offset) as one argument; the three keywords still work (issue 20 §5)."""

from __future__ import annotations

import pytest

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import BeamEvent, Placement, StepEvent
from core.options import DecodingOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _placed(events):
    return [(e.step, e.segment, getattr(e, "source_offset", None), getattr(e, "token_id", None))
            for e in events if isinstance(e, (StepEvent, BeamEvent))]


@pytest.mark.parametrize("options", [DecodingOptions(max_new_tokens=8),
                                     DecodingOptions(strategy="beam", num_beams=3, max_new_tokens=6),
                                     DecodingOptions(strategy="speculative", draft="ngram", max_new_tokens=8)])
def test_place_gives_the_events_the_keywords_give(tiny_models, options):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    encoded = backend.encode({**tiny.inputs, "source_len": 30})
    by_place = list(Engine(backend).run(encoded, tiny.prompt, options, place=Placement(7, 2, 40)))
    by_keywords = list(Engine(backend).run(encoded, tiny.prompt, options, step_offset=7, segment=2, source_offset=40))
    assert _placed(by_place) == _placed(by_keywords)
    steps = [e for e in by_place if isinstance(e, StepEvent)]
    assert steps and steps[0].step == 7 and {(e.segment, e.source_offset) for e in steps} == {(2, 40)}
    alone = [e for e in Engine(backend).run(encoded, tiny.prompt, options, segment=3) if isinstance(e, StepEvent)]
    assert alone[0].step == 0 and {(e.segment, e.source_offset) for e in alone} == {(3, 0)}


def test_a_run_refuses_an_unknown_keyword_and_both_spellings(tiny_models):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    encoded = backend.encode({**tiny.inputs, "source_len": 30})
    options = DecodingOptions(max_new_tokens=4)
    with pytest.raises(TypeError, match="step_ofset"):
        list(Engine(backend).run(encoded, tiny.prompt, options, step_ofset=3))
    with pytest.raises(TypeError, match="not both"):
        list(Engine(backend).run(encoded, tiny.prompt, options, place=Placement(1), segment=2))


def test_placement_of():
    assert Placement.of(None, {}) == Placement(0, 0, 0)
    assert Placement.of(None, {"segment": 4}) == Placement(segment=4)
    assert Placement.of(Placement(1, 2, 3), {}) == Placement(1, 2, 3)
