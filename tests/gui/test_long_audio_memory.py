"""The Speech tab keeps a long clip as int16 (issue 19 §3: an hour of float32 is 230 MB): the
tab's input and a take hold 2 bytes a sample, read back as the same float32 samples, and the
waveform is drawn from the int16 samples (no float32 copy of the clip)."""

from __future__ import annotations

import numpy as np
import pytest

from core.inputs.pcm16 import COMPACT_MIN_S, SCALE, Pcm16Audio
from gui.tabs.speech import SpeechTab
from gui.widgets.waveform import envelope


def sixteen_bit_clip(seconds: float) -> np.ndarray:
    rng = np.random.default_rng(3)
    return (rng.integers(-32768, 32768, int(seconds * 16000)) / SCALE).astype(np.float32)


@pytest.fixture
def tab(qtbot):
    t = SpeechTab()
    qtbot.addWidget(t)
    yield t
    t.shutdown()


def test_a_long_clip_is_kept_as_int16_by_the_speech_tab(tab):
    audio = sixteen_bit_clip(COMPACT_MIN_S + 1)
    assert tab.set_audio(audio, "long")
    assert isinstance(tab.audio, Pcm16Audio)
    assert tab.audio.nbytes == 2 * len(audio)
    assert np.array_equal(np.asarray(tab.audio), audio)
    assert "long ·" in tab.input_area.info_label.text()


def test_a_short_clip_stays_float32(tab):
    audio = sixteen_bit_clip(10)
    assert tab.set_audio(audio, "short")
    assert isinstance(tab.audio, np.ndarray) and tab.audio.dtype == np.float32


def test_the_waveform_of_an_int16_clip_equals_the_float32_one():
    audio = sixteen_bit_clip(COMPACT_MIN_S + 1.3)
    t_f, y_f = envelope(audio, 16000)
    t_p, y_p = envelope(Pcm16Audio.from_float(audio), 16000)
    assert np.array_equal(t_f, t_p) and np.array_equal(y_f, y_p) and y_p.dtype == np.float32


def test_a_long_take_is_kept_as_int16(tab):
    audio = sixteen_bit_clip(COMPACT_MIN_S + 1)

    class Rec:
        def stop(self):
            return audio

    bar = tab.recording
    bar.recorder = Rec()  # a recording that ran for 5 minutes
    take = bar.finish()
    assert isinstance(take.audio, Pcm16Audio) and take.audio.nbytes == 2 * len(audio)
    assert np.array_equal(np.asarray(take.audio), audio)
