"""Live mode end to end (issue 23, "done when"): speech through the PulseAudio fake microphone
(tests/helpers/pulse.py: PortAudio → ALSA → PulseAudio, as a real microphone), Record with Live
on, whisper tiny.en decoding while the speech plays; Stop keeps the take."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import gui.tabs.speech as speech_mod
from core.inputs.audio import load_audio
from gui.tabs.speech import SpeechTab
from tests.helpers.heartbeat import Heartbeat

pytestmark = [pytest.mark.mic, pytest.mark.usefixtures("one_torch_thread")]

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


def _where(take: np.ndarray, clip: np.ndarray) -> int:
    """The offset of ``clip`` in ``take`` (the first loud sample of each)."""
    return int(np.argmax(np.abs(take) > 0.02)) - int(np.argmax(np.abs(clip) > 0.02))


def test_live_recording_from_the_fake_microphone_with_tiny_en(qtbot, fake_mic, whisper_tiny_en, monkeypatch):
    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative: "discard")
    tab = SpeechTab()  # after the server is up: PortAudio sees the microphone
    qtbot.addWidget(tab)
    tab.resize(1280, 800)
    assert tab.mic_ok, tab.mic_label.toolTip()
    tab.model = whisper_tiny_en
    live = tab.live_mode
    live.check.setChecked(True)
    assert live.policy() == "local-agreement:2"
    flushes: list[float] = []  # the view's redraws on the GUI thread (s)
    draw = live.view.flush

    def timed_flush():
        t = time.perf_counter()
        draw()
        flushes.append(time.perf_counter() - t)

    monkeypatch.setattr(live.view, "flush", timed_flush)
    heartbeat = Heartbeat().start()
    clip = load_audio(SAMPLE)
    tab.record_button.click()
    assert tab.is_recording() and live.running()
    fake_mic.play(clip)
    duration = len(clip) / 16000
    # the words appear while the speech plays
    qtbot.waitUntil(lambda: live.view.committed_text() != "", timeout=60_000)
    committed_while_recording = live.view.committed_text()
    heard_then = live.view.heard_s
    qtbot.waitUntil(lambda: live.view.heard_s >= duration + 0.5, timeout=60_000)  # all of it, and a little silence
    with qtbot.waitSignal(tab.decodeFinished, timeout=120_000) as offline:  # Stop: the take's offline decode
        tab.record_button.click()
    heartbeat.stop()
    assert not tab.is_recording() and not live.running()
    # the committed text is the stream's final transcript, and it says what was spoken
    final = live.view.committed_text()
    assert live.view.finished is not None and live.view.finished.text == final
    assert final.startswith(committed_while_recording) and heard_then < duration
    words = set(final.lower().replace(".", "").replace(",", "").split())
    assert {"turn", "lights", "test", "speech"} <= words, final
    offline_words = set(offline.args[0].text.lower().replace(".", "").replace(",", "").split())
    assert len(words & offline_words) >= 0.8 * len(offline_words), (final, offline.args[0].text)
    # the take is kept, and holds what was played (16-bit through PulseAudio)
    assert len(tab.takes()) == 1 and tab.current_take() is tab.takes()[0]
    take = np.asarray(tab.takes()[0].audio)
    at = _where(take, clip)
    assert at >= 0 and len(take) >= at + len(clip)
    np.testing.assert_allclose(take[at:at + len(clip)], clip, atol=2e-3)
    # the GUI thread: the live view's redraws are short (the event loop's gaps are printed: the CPU is shared)
    assert max(flushes) < 0.1
    print(f"\nlive mic tiny.en: {live.view.stats_text()}; {len(flushes)} redraws, longest "
          f"{1000 * max(flushes):.0f} ms; event loop longest gap {heartbeat.longest_ms:.0f} ms")
    tab.shutdown()
