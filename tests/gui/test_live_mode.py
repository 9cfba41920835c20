"""Live mode in the Speech tab (issue 23 §1, §3, §4): Record with Live decodes while recording,
File → Play file as live input plays a file as a microphone; the Live view shows tentative
and committed tokens, the buffer, the latencies; a stream that falls behind says so.

The fake microphone here is a recorder whose recording grows with the clock (what PortAudio
delivers); where speed matters the streaming decoder is a scripted fake (words end every
0.4 s; a word not fully heard is guessed as " uh", so the guess is revised). The real-model
test plays the bundled sample at real time through whisper tiny.en.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import gui.tabs.live as live_mod
import gui.tabs.speech as speech_mod
from core.streaming import Hypothesis, StreamDriver, StreamToken, parse_policy
from gui.tabs.speech import SpeechTab
from gui.widgets.live_view import COMMITTED_STYLE, TENTATIVE_STYLE

from .fakes import FakeSpeechModel
from tests.helpers.heartbeat import Heartbeat

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"
WORD_S = 0.4  # the scripted decoder's words end every 0.4 s (not a multiple of the step: guesses)


class ScriptedDecoder:
    """A ``core.streaming.base.Decoder``: word k (" w0", " w1", ...) ends at (k + 1) * WORD_S s of
    the stream; a decode sees the words that end inside its buffer, and a word begun but not
    ended as the guess " uh" (revised once the word is heard). ``delay_s``: each decode's time."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.calls = 0

    def decode(self, audio, start_s, previous=(), forced=(), stop=None):
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        end = start_s + len(audio) / 16000
        tokens, k = [], 0
        while (k + 1) * WORD_S <= end + 1e-6:
            if (k + 1) * WORD_S > start_s:
                tokens.append(StreamToken(k, f" w{k}", (k + 1) * WORD_S, 0))
            k += 1
        if end - k * WORD_S > 0.1:  # the next word has begun: a guess
            tokens.append(StreamToken(1000 + k, " uh", end, 0))
        return Hypothesis(tuple(tokens[len(forced):]), finished=True)


class GrowingRecorder:
    """Stands in for ``core.inputs.microphone.Recorder``: records ``clip`` at real time from
    ``start()`` (``audio()`` grows with the clock); ``stop()`` keeps what was recorded."""

    clip = np.zeros(16000 * 6, np.float32)
    made: list["GrowingRecorder"] = []

    def __init__(self, device=None, on_level=None, **_kw):
        self.is_recording, self._t0, self.kept = False, None, None
        GrowingRecorder.made.append(self)

    def start(self):
        self.is_recording, self._t0 = True, time.perf_counter()

    def audio(self):
        if self.kept is not None:
            return self.kept.copy()
        n = int((time.perf_counter() - self._t0) * 16000)
        return self.clip[:n].copy()

    def stop(self):
        self.kept = self.audio()
        self.is_recording = False
        return self.kept.copy()

    def discard(self):
        self.is_recording, self.kept = False, np.zeros(0, np.float32)


class UnpluggedRecorder(GrowingRecorder):
    """A microphone unplugged ``dies_at`` seconds into the recording: no samples after it, and
    stopping its stream fails (as PortAudio does when the device is gone)."""

    dies_at = 2.0

    def audio(self):
        n = int((time.perf_counter() - self._t0) * 16000)
        return self.clip[:min(n, int(self.dies_at * 16000))].copy()

    def stop(self):
        from core.inputs.common import AudioError

        self.is_recording = False
        raise AudioError("The recording did not stop cleanly: Error stopping stream [PaErrorCode -9985] "
                         "Device unavailable.")


@pytest.fixture(autouse=True)
def _dialogs_never_block(monkeypatch):
    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative: "discard")
    monkeypatch.setattr(speech_mod, "ask_save_path", lambda parent, title, suggested: "")


@pytest.fixture
def scripted(monkeypatch):
    """Live sessions decode with a ScriptedDecoder (``decoder.delay_s`` slows it)."""
    decoder = ScriptedDecoder()
    monkeypatch.setattr(live_mod.LiveMode, "make_decoder", lambda self, model, options: decoder)
    return decoder


@pytest.fixture
def mic_tab(qtbot, monkeypatch):
    from core.inputs import microphone

    rng = np.random.default_rng(0)
    GrowingRecorder.clip = (0.1 * rng.standard_normal(16000 * 8)).astype(np.float32)
    GrowingRecorder.made = []
    monkeypatch.setattr(microphone, "Recorder", GrowingRecorder)
    tab = SpeechTab()
    qtbot.addWidget(tab)
    tab.resize(1200, 800)
    tab.mic_ok = True
    tab.record_button.setEnabled(True)
    tab.model = FakeSpeechModel()  # the offline decode after Stop
    yield tab
    tab.shutdown()


def _noise_wav(path: Path, seconds: float) -> Path:
    rng = np.random.default_rng(1)
    sf.write(path, (0.1 * rng.standard_normal(int(16000 * seconds))).astype(np.float32), 16000)
    return path


def _history(view) -> list:
    """(heard_s, spans, committed text) at each redraw of the view."""
    seen: list = []
    view.updated.connect(lambda: seen.append((view.heard_s, view.spans(), view.committed_text())))
    return seen


# --------------------------------------------------------------------------- the microphone
def test_live_recording_commits_while_recording_and_stop_mid_utterance_commits_and_keeps_the_take(
        qtbot, mic_tab, scripted):
    tab = mic_tab
    live = tab.live_mode
    live.check.setChecked(True)
    seen = _history(live.view)
    tab.record_button.click()  # Record, as a person does (the button, not Ctrl+R)
    assert tab.is_recording() and live.running()
    # committed text appears while the recording runs
    qtbot.waitUntil(lambda: live.view.committed_text() != "", timeout=15_000)
    assert tab.is_recording()
    assert not tab.controller.alive("decode")  # one decoding thread: no offline decode meanwhile
    # Stop mid-utterance: 0.2 s or more into a word (" uh" is tentative), and at least 1.2 s of
    # audio after the first redraw that showed committed text (a loaded machine draws late)
    first_commit = min((heard for heard, _s, committed in seen if committed), default=live.view.heard_s)
    qtbot.waitUntil(lambda: live.view.heard_s >= max(4.2, first_commit + 1.2), timeout=15_000)
    while (time.perf_counter() - GrowingRecorder.made[-1]._t0) % WORD_S < 0.2:
        qtbot.wait(10)
    tentative_before = live.view.spans()
    with qtbot.waitSignal(tab.decodeFinished, timeout=20_000):  # the take's offline decode, after the live end
        tab.record_button.click()
    assert not live.running() and not tab.is_recording()
    rec = GrowingRecorder.made[-1]
    # the take is kept exactly as recorded, and is the input
    assert len(tab.takes()) == 1 and tab.current_take() is tab.takes()[0]
    assert np.array_equal(tab.takes()[0].audio, rec.kept) and np.array_equal(tab.audio, rec.kept)
    # Stop committed everything heard, the last (unfinished) word included
    heard_words = int(len(rec.kept) / 16000 / WORD_S)
    final = live.view.committed_text()
    assert final.split()[:heard_words] == [f"w{k}" for k in range(heard_words)], final
    assert final.endswith("uh"), final  # the word under way when Stop was pressed
    assert live.view.finished is not None and live.view.finished.text == final
    assert live.view.heard_s == pytest.approx(len(rec.kept) / 16000, abs=1e-3)  # all of the take was fed
    assert any(kind == "tentative" for kind, _t in tentative_before)
    # committed text was shown before the input ended
    assert any(committed and heard < len(rec.kept) / 16000 - 1.0 for heard, _s, committed in seen)


def test_a_microphone_unplugged_mid_stream_ends_the_live_session_and_keeps_the_take(
        qtbot, mic_tab, scripted, monkeypatch):
    from core.inputs import microphone

    monkeypatch.setattr(microphone, "Recorder", UnpluggedRecorder)
    tab, live = mic_tab, mic_tab.live_mode
    live.check.setChecked(True)
    tab.toggle_record()
    assert live.running()
    qtbot.waitUntil(lambda: not live.running(), timeout=20_000)  # 2 s of audio, then 3 s without a sample
    assert not tab.is_recording()
    # the take keeps what arrived before the device went away
    assert len(tab.takes()) == 1 and np.array_equal(tab.takes()[0].audio, UnpluggedRecorder.clip[:32000])
    assert tab.current_take() is tab.takes()[0]
    message = tab.banner.message()
    assert "microphone stopped delivering audio" in message and "kept as take 1" in message, message
    assert "Device unavailable" in message, message
    qtbot.wait(50)  # the recording's own failure is not said again over it
    assert tab.banner.message() == message
    assert live.view.committed_text().split()[:4] == ["w0", "w1", "w2", "w3"]


def test_a_recording_whose_stream_fails_to_stop_is_kept(qtbot, mic_tab, monkeypatch):
    """Without Live too: a stop that fails (a device gone) keeps what was recorded as a take."""
    from core.inputs import microphone

    monkeypatch.setattr(microphone, "Recorder", UnpluggedRecorder)
    tab = mic_tab
    tab.toggle_record()
    qtbot.wait(2300)
    with qtbot.waitSignal(tab.decodeFinished, timeout=10_000):
        tab.toggle_record()
    assert len(tab.takes()) == 1 and np.array_equal(tab.audio, UnpluggedRecorder.clip[:32000])
    qtbot.waitUntil(lambda: "kept as take 1" in tab.banner.message(), timeout=2000)
    assert "Device unavailable" in tab.banner.message()


def test_discard_during_a_live_recording_ends_the_session(qtbot, mic_tab, scripted):
    tab = mic_tab
    tab.live_mode.check.setChecked(True)
    tab.toggle_record()  # Ctrl+R
    assert tab.live_mode.running()
    qtbot.waitUntil(lambda: tab.live_mode.view.heard_s > 1.0, timeout=10_000)
    tab.discard_input()
    qtbot.waitUntil(lambda: not tab.live_mode.running(), timeout=10_000)
    assert not tab.is_recording() and tab.takes() == []
    assert tab.live_mode.check.isEnabled()


def test_live_box_and_policy_are_kept_in_qsettings(qtbot, mic_tab):
    from PySide6.QtCore import QSettings

    live = mic_tab.live_mode
    assert live.check.toolTip().startswith("Live: with this on, Record decodes while you speak")
    live.check.setChecked(True)
    live.policy_combo.setCurrentIndex(live.policy_combo.findData("align-att:25"))
    s = QSettings()
    mic_tab.save_settings(s)
    other = SpeechTab()
    qtbot.addWidget(other)
    other.restore_settings(QSettings())
    assert other.live_mode.check.isChecked() and other.live_mode.policy() == "align-att:25"
    other.shutdown()


# --------------------------------------------------------------------------- a file as live input
def test_tentative_tokens_are_ghosted_then_committed_solid(qtbot, mic_tab, scripted, tmp_path):
    tab, live = mic_tab, mic_tab.live_mode
    seen = _history(live.view)
    assert tab.play_file_as_live(_noise_wav(tmp_path / "noise.wav", 4.0), speed=2.0)
    with qtbot.waitSignal(tab.decodeFinished, timeout=20_000):  # the file becomes the input, decoded offline
        qtbot.waitUntil(lambda: not live.running(), timeout=20_000)
    assert tab.source_name == "noise.wav"
    # " w1" was first shown tentative (ghosted), later committed (solid)
    first_tentative = next(i for i, (_h, spans, _c) in enumerate(seen)
                           if any(k == "tentative" and " w1" in t for k, t in spans))
    first_committed = next(i for i, (_h, spans, _c) in enumerate(seen)
                           if any(k == "committed" and " w1" in t for k, t in spans))
    assert first_tentative < first_committed
    # the guess " uh" was revised in place: shown tentative, never committed before the end
    assert live.view.revised > 0
    # drawn: committed solid, then the commit's audio time; tentative grey italic
    assert f'<span style="{COMMITTED_STYLE}"> w0' in live.view._html()
    live.view.tentative = " w9 uh"
    assert f'<span style="{TENTATIVE_STYLE}"> w9 uh</span>' in live.view._html()
    # per word latency: the word's end in the audio to its commit
    assert [w.text for w in live.view.words][:3] == [" w0", " w1", " w2"]
    assert all(w.latency_s == pytest.approx(w.commit_s - w.end_s, abs=1e-6) for w in live.view.words[:-1])
    assert live.view.table.rowCount() == len(live.view.words)
    assert live.view.table.item(1, 0).text() == "w1"


def test_fell_behind_shows_skipped_seconds_in_the_view_and_the_status_bar(qtbot, settings, scripted, monkeypatch,
                                                                         tmp_path):
    from gui.main_window import MainWindow

    scripted.delay_s = 0.6  # slower than the audio arrives at 4x
    monkeypatch.setattr(live_mod.LiveMode, "make_driver", lambda self, decoder, realtime: StreamDriver(
        parse_policy("local-agreement:2", step_s=0.25), decoder, max_lag_s=1.0, realtime=realtime))
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    tab = w.speech_tab
    tab.model = FakeSpeechModel()
    messages: list[str] = []
    tab.statusMessage.connect(messages.append)
    monkeypatch.setattr(live_mod, "ask_live_file", lambda parent, directory: str(_noise_wav(tmp_path / "n.wav", 8.0)))
    monkeypatch.setattr(tab.live_mode, "play_file", lambda path=None, speed=1.0, f=tab.live_mode.play_file: f(path, 4.0))
    w.play_live_action.trigger()  # File → Play file as live input (asks for the file)
    assert tab.live_mode.running()
    qtbot.waitUntil(lambda: not tab.live_mode.running(), timeout=30_000)
    text = tab.live_mode.view.message_label.text()
    assert "skipped" in text and "to keep up" in text, text
    assert not tab.live_mode.view.message_label.isHidden()
    assert any(m.startswith("Live: Decoding fell behind real time: skipped") for m in messages), messages
    assert any("skipped" in m and "to keep up" in m and m.startswith("Live · RTF") for m in messages), messages


# --------------------------------------------------------------------------- the real model
@pytest.mark.usefixtures("one_torch_thread")
def test_play_sample_as_live_with_tiny_en_commits_before_the_input_ends(qtbot, settings, whisper_tiny_en,
                                                                         monkeypatch):
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    tab = w.speech_tab
    tab.model = whisper_tiny_en
    live = tab.live_mode
    seen = _history(live.view)
    heartbeat = Heartbeat().start()
    monkeypatch.setattr(live_mod, "ask_live_file", lambda parent, directory: str(SAMPLE))
    w.play_live_action.trigger()
    assert live.running() and w.tabs.currentWidget() is tab
    duration = sf.info(str(SAMPLE)).duration
    with qtbot.waitSignal(tab.decodeFinished, timeout=120_000):  # the offline decode of the file, after the stream
        qtbot.waitUntil(lambda: not live.running(), timeout=120_000)
    heartbeat.stop()
    # committed text was on screen before the input ended
    assert live.view.first_commit_heard_s is not None and live.view.first_commit_heard_s < duration - 1.0
    assert any(c and h < duration - 1.0 for h, _s, c in seen)
    final = live.view.committed_text()
    words = set(final.lower().replace(".", "").replace(",", "").split())
    assert {"turn", "lights", "test", "speech"} <= words, final
    assert live.view.finished.text == final
    assert tab.source_name == SAMPLE.name  # the file is the input now
    assert live.view.stats()["latency_mean_s"] is not None and live.view.table.rowCount() == len(live.view.words)
    print(f"\nlive tiny.en: {live.view.stats_text()}; GUI event loop max gap {heartbeat.longest_ms:.0f} ms")


def test_the_view_draws_once_per_frame_not_once_per_event(qtbot, mic_tab, scripted, tmp_path):
    """A burst of stream items (a file fed as fast as the scripted decoder takes it) is drawn in
    a few redraws: the items wait for the frame's batch."""
    tab, live = mic_tab, mic_tab.live_mode
    items, redraws = [], []
    take = live.view.take
    live.view.take = lambda ev: (items.append(ev), take(ev))
    live.view.updated.connect(lambda: redraws.append(1))
    assert tab.play_file_as_live(_noise_wav(tmp_path / "burst.wav", 6.0), speed=None)
    qtbot.waitUntil(lambda: not live.running(), timeout=20_000)
    assert len(items) >= 60 and live.view.finished is not None
    assert len(redraws) <= 6, (len(redraws), len(items))


def test_a_file_opened_while_another_plays_as_live_stays_the_input(qtbot, mic_tab, scripted, tmp_path):
    tab, live = mic_tab, mic_tab.live_mode
    assert tab.play_file_as_live(_noise_wav(tmp_path / "played.wav", 4.0), speed=2.0)
    qtbot.waitUntil(lambda: live.view.heard_s > 0.5, timeout=10_000)
    opened = _noise_wav(tmp_path / "opened.wav", 1.0)
    tab.open_file(opened)  # the user opens another file meanwhile: its decode waits for the model
    qtbot.waitUntil(lambda: tab.source_name == "opened.wav", timeout=10_000)
    assert not tab.controller.alive("decode")
    with qtbot.waitSignal(tab.decodeFinished, timeout=20_000):  # decoded once the live session ended
        qtbot.waitUntil(lambda: not live.running(), timeout=20_000)
    assert tab.source_name == "opened.wav" and len(tab.audio) == 16000
    assert live.view.finished is not None


def test_a_take_stopped_before_its_deferred_live_session_started_is_still_decoded(qtbot, mic_tab, scripted):
    """Record with Live while a decode runs: the live session waits for the decode's worker (one
    decoding thread). Stopped before it started, the take's decode (held for the session) runs."""
    tab, live = mic_tab, mic_tab.live_mode

    def slow_decode(cancel):  # a decode step that does not end at once when cancelled
        time.sleep(1.5)
        return
        yield

    tab.controller.start("decode", slow_decode, tab.decode, name="decode")
    live.check.setChecked(True)
    tab.toggle_record()
    assert live.running() and not live.session.started  # deferred: the decode's worker is still alive
    qtbot.wait(300)
    assert not live.session.started
    finished: list = []
    tab.decodeFinished.connect(lambda ev: finished.append(ev))
    tab.toggle_record()  # Stop: the take is the input; its decode waited for the session
    assert len(tab.takes()) == 1 and tab.current_take() is tab.takes()[0]
    qtbot.waitUntil(lambda: any(not ev.cancelled for ev in finished), timeout=15_000)
    assert not live.running()


def test_a_live_session_whose_deferred_start_was_dropped_holds_no_decode_back(qtbot, mic_tab, scripted):
    """A model load forgets the run controller's deferred start (``defer(None)``) while a live
    session waits for the decoding worker: the session can never start, so it is not left
    'running' (Live box disabled, every later decode held back for ever)."""
    tab, live = mic_tab, mic_tab.live_mode

    def slow_decode(cancel):
        time.sleep(1.0)
        return
        yield

    tab.controller.start("decode", slow_decode, tab.decode, name="decode")
    assert tab.play_file_as_live(SAMPLE, speed=4.0)
    assert live.running() and not live.session.started
    tab.controller.defer(None)  # what ModelLoader.load does first
    qtbot.waitUntil(lambda: not tab.controller.alive("decode"), timeout=5_000)
    assert not live.running() and live.check.isEnabled()
    finished: list = []
    tab.decodeFinished.connect(lambda ev: finished.append(ev))
    tab.set_audio(np.zeros(16000, np.float32) + 0.01, "after.wav")
    qtbot.waitUntil(lambda: any(not ev.cancelled for ev in finished), timeout=10_000)
