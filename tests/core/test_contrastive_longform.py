"""Contrastive decoding with a model amateur in long-form (core/tasks/longform.py's own window
loop): each attempt gets the amateur model's companion for its window
(``SpeechModel.companions``), as the segment runs do. tiny.en contrasted with itself changes
nothing ((1 + beta) * e - beta * e = e), so the ids equal plain greedy long-form."""

from __future__ import annotations

from pathlib import Path

import soundfile as sf

from core.events import StepEvent
from core.options import DecodingOptions
from core.tasks.longform import transcribe

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


def _ids(model, options) -> list[int]:
    audio, sr = sf.read(SAMPLE, dtype="float32")
    assert sr == 16_000
    return [ev.token_id for ev in transcribe(model, audio, options, language="en") if isinstance(ev, StepEvent)]


def test_long_form_with_a_model_amateur_gets_its_companion_per_window(whisper_tiny_en):
    plain = _ids(whisper_tiny_en, DecodingOptions(strategy="greedy"))
    contrasted = _ids(whisper_tiny_en, DecodingOptions(strategy="greedy", contrastive_amateur="tiny.en"))
    assert len(plain) > 5 and contrasted == plain
