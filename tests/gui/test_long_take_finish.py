"""Stop on a take of 5 minutes or more (issue 19 §3: the GUI thread never blocks > 100 ms): the
recorder's last conversion of the whole take and its int16 copy (``compact_audio``, ~150 ms
for an hour) run on a worker, not the GUI thread; the take is in the takes list from Stop on
(its float32 audio up to Stop), and its finished int16 audio then becomes the take and the
input. No timings: the test records which thread did the work."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from core.inputs import pcm16
from core.inputs.pcm16 import COMPACT_MIN_S, SCALE, Pcm16Audio
from gui.tabs import speech as speech_mod
from gui.tabs.speech import SpeechTab

from .fakes import FakeSpeechModel


def sixteen_bit_clip(seconds: float) -> np.ndarray:
    rng = np.random.default_rng(5)
    return (rng.integers(-32768, 32768, int(seconds * 16000)) / SCALE).astype(np.float32)


class LongRecorder:
    """A recorder that ran for ``audio``'s length: ``audio()`` while recording gives what was
    converted by the last live tick (all but the last 0.1 s, a read-only view, as
    ``core.inputs.microphone.Recorder`` does); ``stop()`` converts the whole take (a copy) and
    notes the thread it ran on."""

    audio_: np.ndarray = np.zeros(0, np.float32)

    def __init__(self, device=None, on_level=None, **_kwargs):
        self.is_recording = False
        self.stop_threads: list[threading.Thread] = []
        self._audio = LongRecorder.audio_

    @property
    def duration_s(self) -> float:
        return len(self._audio) / 16000

    def start(self) -> None:
        self.is_recording = True

    def audio(self) -> np.ndarray:
        if self.is_recording:
            view = self._audio[: len(self._audio) - 1600]
            view.flags.writeable = False
            return view
        return self._audio.copy()

    def stop(self) -> np.ndarray:
        self.stop_threads.append(threading.current_thread())
        self.is_recording = False
        return self._audio.copy()

    def discard(self) -> None:
        self.is_recording = False


@pytest.fixture
def long_take(monkeypatch):
    """A 5-minute recording; every int16 conversion notes the thread it ran on."""
    from core.inputs import microphone

    LongRecorder.audio_ = sixteen_bit_clip(COMPACT_MIN_S + 2)
    monkeypatch.setattr(microphone, "Recorder", LongRecorder)
    threads: list[threading.Thread] = []
    from_float = Pcm16Audio.from_float.__func__

    def noting(cls, audio):
        threads.append(threading.current_thread())
        return from_float(cls, audio)

    monkeypatch.setattr(pcm16.Pcm16Audio, "from_float", classmethod(noting))
    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative: "discard")
    return LongRecorder.audio_, threads


@pytest.fixture
def tab(qtbot, long_take):
    t = SpeechTab()
    qtbot.addWidget(t)
    t.mic_ok = True
    t.record_button.setEnabled(True)
    t.model = FakeSpeechModel()
    yield t
    t.shutdown()


def test_stop_on_a_long_take_converts_it_on_a_worker_and_the_take_is_kept_from_stop_on(qtbot, tab, long_take):
    audio, threads = long_take
    tab.toggle_record()
    rec = tab.recording.recorder
    tab.toggle_record()  # Stop
    assert not tab.is_recording()
    takes = tab.mic.takes()
    assert len(takes) == 1  # in the takes list at once: nothing is lost while it finishes
    take = takes[0]
    assert len(take.audio) >= len(audio) - 1600  # its audio up to Stop, until the finished one arrives
    qtbot.waitUntil(lambda: not getattr(take, "finishing", False), timeout=10000)
    qtbot.waitUntil(lambda: isinstance(tab.audio, Pcm16Audio), timeout=10000)
    main = threading.main_thread()
    assert threads and main not in threads  # the int16 conversion ran on a worker
    assert rec.stop_threads and main not in rec.stop_threads  # and the recorder's last conversion
    assert isinstance(take.audio, Pcm16Audio) and np.array_equal(np.asarray(take.audio), audio)  # the whole take
    assert tab.audio is take.audio and tab.mic.current_take() is take  # the take became the input
    assert tab.mic.takes() == [take]


def test_a_file_opened_while_the_take_finishes_stays_the_input(qtbot, tab, long_take):
    audio, _threads = long_take
    tab.toggle_record()
    tab.toggle_record()  # Stop: the take finishes on a worker
    take = tab.mic.takes()[0]
    short = sixteen_bit_clip(3)
    assert tab.set_audio(short, "other.wav")  # the user opened another input meanwhile
    qtbot.waitUntil(lambda: not getattr(take, "finishing", False), timeout=10000)
    qtbot.wait(50)
    assert tab.source_name == "other.wav" and tab.mic.current_take() is None
    assert isinstance(take.audio, Pcm16Audio) and np.array_equal(np.asarray(take.audio), audio)
    assert tab.mic.takes() == [take]  # kept, and can still be picked


def test_closing_while_the_take_finishes_saves_the_whole_take(qtbot, tab, long_take, monkeypatch, tmp_path):
    import soundfile as sf

    audio, _threads = long_take
    path = tmp_path / "take1.wav"
    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative: "save")
    monkeypatch.setattr(speech_mod, "ask_save_path", lambda parent, title, suggested: str(path))
    tab.toggle_record()
    tab.toggle_record()  # Stop, and the window closes at once
    assert tab.mic.confirm_close()
    saved, rate = sf.read(path, dtype="float32")
    assert rate == 16000 and np.array_equal(saved, audio)  # not the audio up to Stop: the whole take
