"""Silence and invented text (issue 19 §4, speech): the no-speech/loudness skip on a clip of
30 s or less (exactly 30.0 s of digital silence gave "you", exit 0, no warning), what was
skipped said in words, a kept window the model thinks holds no speech warned about, and
fixed-window warnings (no speech, repetition loops) pointing to long-form mode. tiny.en."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from core.events import AttemptEvent, Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions

SR = 16_000
pytestmark = pytest.mark.usefixtures("one_torch_thread")
HINT = "long-form mode (windows: long-form) re-decodes such windows with temperature fallback"


def _cli(model, monkeypatch, path, *extra):
    from core.cli import commands as cli
    from core.tasks.speech import SpeechModel

    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="", progress=None: model))
    return cli.main(["transcribe", str(path), "--model", "tiny.en", *extra])


def test_thirty_seconds_of_digital_silence_is_skipped(whisper_tiny_en):
    """Before: " you" (one window of 30.0 s is decoded as a short clip, and the silence rules
    ran only long-form)."""
    events = list(whisper_tiny_en.decode(np.zeros(30 * SR, np.float32), DecodingOptions()))
    assert not [ev for ev in events if isinstance(ev, StepEvent)]
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.text == "" and fin.reason == "eos"
    seg = next(ev for ev in events if isinstance(ev, SegmentEvent))
    assert seg.label.endswith("skipped as silence") and "−inf dBFS" in seg.warning and "0.6" in seg.warning


def test_quiet_speechless_noise_over_the_level_is_still_decoded(whisper_tiny_en):
    """The skip needs both: a high no-speech probability and quiet audio (< -50 dBFS)."""
    rng = np.random.default_rng(0)
    noise = (0.05 * rng.standard_normal(5 * SR)).astype(np.float32)  # about -26 dBFS
    seg = next(ev for ev in whisper_tiny_en.decode(noise, DecodingOptions(max_new_tokens=5))
               if isinstance(ev, SegmentEvent))
    assert not seg.label.endswith("skipped as silence")


def test_cli_thirty_seconds_of_silence_says_it_skipped(whisper_tiny_en, tmp_path, monkeypatch, capsys):
    path = tmp_path / "silence30.wav"
    sf.write(path, np.zeros(30 * SR, np.float32), SR)
    assert _cli(whisper_tiny_en, monkeypatch, path) == 0
    out = capsys.readouterr()
    assert out.out.strip() == ""
    assert "skipped as silence" in out.err and "1 window skipped as silence (no-speech 0." in out.err


def test_cli_long_form_silence_says_what_was_skipped(whisper_tiny_en, tmp_path, monkeypatch, capsys):
    """31 s of silence: the status said "Decoded: 6 tokens" and nothing else; now stderr names
    the skipped windows."""
    path = tmp_path / "silence31.wav"
    sf.write(path, np.zeros(31 * SR, np.float32), SR)
    assert _cli(whisper_tiny_en, monkeypatch, path) == 0
    err = capsys.readouterr().err
    assert "2 windows skipped as silence (no-speech 0." in err and "−inf dBFS)" in err


def test_long_form_window_over_the_no_speech_threshold_warns(whisper_tiny_en):
    events = list(whisper_tiny_en.transcribe(np.zeros(31 * SR, np.float32), DecodingOptions()))
    seg = next(ev for ev in events if isinstance(ev, SegmentEvent))
    assert seg.no_speech_prob > 0.6 and "no-speech probability" in seg.warning


def test_a_kept_window_the_model_thinks_silent_is_warned_about():
    """40 s of tones: window 2 accepted as "." at no-speech 0.94, no warning."""
    from core.tasks.longform_verdicts import attempt_warning, silence_note

    kept = AttemptEvent(segment=1, attempt=0, temperature=0.0, step_offset=0, text=".", avg_logprob=-0.6,
                        no_speech_prob=0.94, verdict="accepted", kept_in_transcript=True, start=30.0, end=40.0)
    text = attempt_warning(kept)
    assert "30.00–40.00 s" in text and "'.'" in text and "0.94 > 0.6" in text and "invented" in text
    assert attempt_warning(kept, no_speech_threshold=None) == ""
    from dataclasses import replace

    assert attempt_warning(replace(kept, no_speech_prob=0.3)) == ""
    assert attempt_warning(replace(kept, verdict="silence", kept_in_transcript=False)) == ""
    assert silence_note([(0.9, float("-inf"))]) == "1 window skipped as silence (no-speech 0.90, −inf dBFS)"
    assert silence_note([]) == ""


def test_cli_long_form_prints_the_kept_no_speech_warning(whisper_tiny_en, tmp_path, monkeypatch, capsys):
    """The CLI's long-form path prints attempt_warning for each such window (a stand-in run)."""
    from core.events import RunStats
    from core.tasks.speech import SpeechModel

    def fake(self, audio, options, longform=None, **kw):
        yield SegmentEvent(segment=0, label="0.00–30.00 s", kind="window", no_speech_prob=0.94)
        yield AttemptEvent(segment=0, attempt=0, temperature=0.0, step_offset=0, text=".", avg_logprob=-0.5,
                           no_speech_prob=0.94, verdict="accepted", kept_in_transcript=True, start=0.0, end=30.0,
                           loudest_db=-12.0)
        yield Finished(text=".", token_ids=[], stats=RunStats())

    monkeypatch.setattr(SpeechModel, "transcribe", fake)
    path = tmp_path / "tones.wav"
    sf.write(path, (0.3 * np.sin(np.arange(31 * SR) * 0.2)).astype(np.float32), SR)
    assert _cli(whisper_tiny_en, monkeypatch, path) == 0
    assert "kept '.' although the no-speech probability is 0.94" in capsys.readouterr().err


def test_fixed_window_warnings_point_to_long_form(whisper_tiny_en):
    """A no-speech warning on a fixed window, and a window that loops, name long-form mode."""
    from core.tasks.speech import window_warnings

    t = np.arange(20 * SR) / SR
    tones = (0.3 * np.sin(2 * np.pi * 220 * 2 ** ((np.floor(t) % 12) / 12) * t)).astype(np.float32)
    seg = next(ev for ev in whisper_tiny_en.decode(tones, DecodingOptions(max_new_tokens=3))
               if isinstance(ev, SegmentEvent))
    if seg.no_speech_prob > 0.6:
        assert HINT in seg.warning
    from core.events import TokenProb

    def step(i, tok):
        return StepEvent(step=i, token_id=tok, text=" the", prob=0.9, raw_prob=0.9, topk=[TokenProb(tok, "x", 0.9)],
                         raw_topk=[], entropy=0.1)

    looping = [SegmentEvent(segment=0, label="0.0–30.0 s · no speech 3%")] + [step(i, 262) for i in range(40)]
    warns = window_warnings(looping, whisper_tiny_en.backend.decode)
    assert len(warns) == 1 and warns[0].startswith("0.0–30.0 s: the text repeats itself") and HINT in warns[0]
    fine = [SegmentEvent(segment=0, label="0.0–2.0 s")] + [step(i, t) for i, t in enumerate([383, 2068, 7586])]
    assert window_warnings(fine, whisper_tiny_en.backend.decode) == []
