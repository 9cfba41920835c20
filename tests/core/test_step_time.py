"""Issue 22: every StepEvent carries ``time_ms``, the wall time of the decoder call that
produced its step, with the KV cache on and off (no timing is compared: the field is
present and positive; whether late steps cost more with the cache off is the bench's)."""

from __future__ import annotations

import pytest

from core.events import StepEvent
from core.options import DecodingOptions
from tests.helpers.speech import synth_speech

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("kv_cache", [True, False])
def test_step_events_carry_a_positive_decoder_time(whisper_tiny_en, kv_cache):
    audio = synth_speech("Open the door.")
    options = DecodingOptions(max_new_tokens=6, kv_cache=kv_cache)
    steps = [e for e in whisper_tiny_en.decode(audio, options, language="en") if isinstance(e, StepEvent)]
    assert steps
    assert all(isinstance(e.time_ms, float) and e.time_ms > 0 for e in steps)


def test_beam_search_step_events_carry_a_decoder_time_too(whisper_tiny_en):
    audio = synth_speech("Open the door.")
    options = DecodingOptions(strategy="beam", num_beams=2, max_new_tokens=5)
    steps = [e for e in whisper_tiny_en.decode(audio, options, language="en") if isinstance(e, StepEvent)]
    assert steps and all(e.time_ms > 0 for e in steps)


def test_time_ms_does_not_make_equal_events_unequal():
    a = StepEvent(0, 1, "a", 0.5, 0.5, [], [], 0.1, time_ms=1.0)
    b = StepEvent(0, 1, "a", 0.5, 0.5, [], [], 0.1, time_ms=2.0)
    assert a == b  # timings differ between identical runs; the events compare by content
