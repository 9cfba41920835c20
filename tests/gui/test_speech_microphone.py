"""Record from the (PulseAudio) fake microphone through the Speech tab's Record/Stop."""

from __future__ import annotations

import numpy as np
import pytest

from gui.tabs.speech import SpeechTab
from tests.helpers.speech import synth_speech

from .fakes import WORDS, FakeSpeechModel

pytestmark = pytest.mark.mic


def test_record_stop_decodes_the_recording(qtbot, fake_mic, tmp_path):
    tab = SpeechTab()  # created after the server is up: PortAudio sees the microphone
    qtbot.addWidget(tab)
    assert tab.mic_ok, tab.mic_label.text()
    assert tab.record_button.isEnabled() and tab.device_combo.count() >= 2
    tab.model = FakeSpeechModel()
    levels = []
    tab.recording.level_relay.level.connect(lambda rms, peak: levels.append(peak))

    speech = synth_speech("Hello world, this is a microphone test.")
    tab.toggle_record()
    assert tab.is_recording() and tab.record_button.text().startswith("■")
    assert not tab.open_button.isEnabled()
    fake_mic.play(speech)
    fake_mic.wait_played(timeout_s=60)
    qtbot.wait(300)
    assert tab.level_meter.value() >= 0 and max(levels, default=0.0) > 0.05  # the meter saw the speech
    with qtbot.waitSignal(tab.decodeFinished, timeout=30_000):
        tab.toggle_record()  # Stop -> the recording becomes the input -> decode
    assert not tab.is_recording() and tab.record_button.text().startswith("●")
    dur = len(tab.audio) / 16000
    assert dur >= len(speech) / 16000 * 0.9  # everything played was recorded
    assert np.max(np.abs(tab.audio)) > 0.05
    assert tab.stream.token_count() == len(WORDS)
    assert tab.save_button.isEnabled()
    out = tmp_path / "rec.wav"
    assert tab.save_to(out) and out.stat().st_size > 44
    tab.discard_input()
    assert tab.audio is None and not tab.save_button.isEnabled()
    tab.shutdown()


def test_discard_and_close_during_recording_print_nothing(qtbot, fake_mic, settings, capfd, monkeypatch):
    """Discard while recording, and closing the window while recording (answered "Discard"),
    stop PortAudio's stream properly: no "Expression … failed" lines on stderr, even when the
    sound server goes away afterwards."""
    import time

    import gui.tabs.speech as speech_mod
    from gui.main_window import MainWindow

    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative: "discard")
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    tab = w.speech_tab
    assert tab.mic_ok, tab.mic_label.toolTip()
    tab.toggle_record()
    fake_mic.play(np.zeros(8000, np.float32))
    fake_mic.wait_played(timeout_s=30)
    recorder = tab.recording.recorder
    tab.discard_input()  # Discard during the recording
    assert not tab.is_recording() and not recorder.is_recording
    tab.toggle_record()  # a new recording, then the window is closed during it
    fake_mic.play(np.zeros(8000, np.float32))
    fake_mic.wait_played(timeout_s=30)
    assert w.close()
    assert not tab.is_recording()
    fake_mic.stop()
    time.sleep(0.5)
    err = capfd.readouterr().err
    assert [line for line in err.splitlines() if "Expression" in line or "pa_linux_alsa" in line] == [], err
