"""The Speech tab and the main window, driven by a fake model (no torch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.options import DecodingOptions
from gui.main_window import MainWindow
from gui.tabs.speech import SpeechTab, first_sample, is_english_only

from .fakes import WORDS, FakeSpeechModel

ROOT = Path(__file__).resolve().parents[2]


def _tone(seconds=1.0, hz=220.0):
    t = np.arange(int(16000 * seconds), dtype=np.float32) / 16000
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.fixture
def tab(qtbot):
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1200, 800)
    t.options_panel._timer.setInterval(20)
    yield t
    t.shutdown()


def _decode(qtbot, tab, action, timeout=5000):
    with qtbot.waitSignal(tab.decodeFinished, timeout=timeout) as blocker:
        action()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=timeout)
    return blocker.args[0]


def test_decode_fills_stream_topk_and_heatmap(qtbot, tab):
    tab.model = FakeSpeechModel()
    fin = _decode(qtbot, tab, lambda: tab.set_audio(_tone(1.0), "tone"))
    assert fin.text == "".join(WORDS).strip()
    assert tab.stream.token_count() == len(WORDS)
    assert tab.stream.text() == fin.text
    assert tab.heatmap.row_count() == len(WORDS)
    assert tab.heatmap.column_count() == 50  # 1 s / 0.02 s per frame
    assert tab.topk.step() == len(WORDS) - 1  # follows the newest token when nothing is selected
    tab.select_step(2)
    assert tab.topk.step() == 2 and tab.stream.flow.selected_step() == 2


def test_option_change_redecodes_without_reencoding(qtbot, tab):
    model = FakeSpeechModel()
    tab.model = model
    _decode(qtbot, tab, lambda: tab.set_audio(_tone(1.0), "tone"))
    assert model.encode_count == 1
    fin = _decode(qtbot, tab, lambda: tab.options_panel.controls["max_new_tokens"].setValue(4))
    assert fin.stats.n_tokens == 4 and tab.stream.token_count() == 4
    assert tab.heatmap.row_count() == 4
    assert model.encode_count == 1 and model.decode_calls == 2


def test_option_change_cancels_running_decode_first(qtbot, tab):
    model = FakeSpeechModel(delay_s=0.05)
    tab.model = model
    tab.set_audio(_tone(1.0), "tone")
    qtbot.waitUntil(lambda: tab.stream.token_count() >= 2, timeout=5000)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000) as blocker:
        tab.options_panel.setOptions(DecodingOptions(max_new_tokens=3), emit=True)
    assert blocker.args[0].stats.n_tokens == 3  # the superseded run's Finished never reached the views
    assert model.cancelled_runs == 1
    assert tab.stream.token_count() == 3


def test_cancel_stops_decode(qtbot, tab):
    model = FakeSpeechModel(delay_s=0.05)
    tab.model = model
    tab.set_audio(_tone(1.0), "tone")
    qtbot.waitUntil(lambda: tab.stream.token_count() >= 1, timeout=5000)
    assert tab.cancel() is True
    assert not tab.is_decoding()  # the run's state ends at once
    qtbot.waitUntil(tab.workers_idle, timeout=5000)  # the worker thread stops after its step
    assert tab.stream.token_count() < len(WORDS)
    assert model.cancelled_runs == 1


def test_decode_error_shown_in_banner(qtbot, tab):
    tab.model = FakeSpeechModel()
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000) as blocker:
        tab.set_audio(np.zeros(100, np.float32), "blip")  # too short for the model
    assert "too short" in blocker.args[0]
    assert not tab.banner.isHidden() and "too short" in tab.banner.message()


def test_bad_audio_file_error_in_window(qtbot, tab, tmp_path):
    bad = tmp_path / "broken.wav"
    bad.write_bytes(b"RIFF not really a wave file")
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000) as blocker:
        tab.open_file(bad)
    msg = blocker.args[0]
    assert "broken.wav" in msg and "mp3" in msg.lower()  # names the file and the formats to use
    assert tab.banner.message() == msg
    assert tab.audio is None


def test_model_load_error_shown(qtbot, tab, monkeypatch):
    def boom(name, progress):
        progress("reading weights…")
        raise FileNotFoundError(f"no model named {name!r}; give a folder with config.json")

    monkeypatch.setattr(tab, "load_model_object", boom)
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000) as blocker:
        tab.load_model("nonsense")
    assert "nonsense" in blocker.args[0] and "config.json" in blocker.args[0]
    qtbot.waitUntil(lambda: not tab.is_loading(), timeout=5000)
    assert tab.model is None


def test_model_load_then_decode_automatically(qtbot, tab, monkeypatch):
    progress_seen = []
    tab.busyChanged.connect(lambda b, m: progress_seen.append(m))
    monkeypatch.setattr(tab, "load_model_object", lambda name, progress: (progress("step 1/2"), FakeSpeechModel())[1])
    tab.audio = _tone(0.5)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.load_model("tiny.en")
    assert isinstance(tab.model, FakeSpeechModel)
    assert tab.stream.token_count() == len(WORDS)
    assert any("tiny.en" in m for m in progress_seen)


def test_english_only_model_disables_language_and_task(qtbot, tab):
    assert is_english_only("tiny.en") and not is_english_only("base")
    tab._update_lang_task_enabled("tiny.en")
    assert not tab.language_combo.isEnabled() and not tab.task_combo.isEnabled()
    assert tab.language() == "en" and tab.task() == "transcribe"
    tab._update_lang_task_enabled("base")
    assert tab.language_combo.isEnabled() and tab.task_combo.isEnabled()


def test_record_disabled_without_microphone(qtbot, tab, monkeypatch):
    from core.inputs import microphone

    reason = "Nothing to record from (test). Plug in a microphone and restart the app."
    monkeypatch.setattr(microphone, "microphone_status", lambda: (False, reason))
    monkeypatch.setattr(microphone, "list_input_devices", lambda: [])
    tab.recording.refresh()
    assert not tab.record_button.isEnabled()
    assert tab.record_button.toolTip() == f"Recording unavailable: {reason}"
    assert not tab.mic_label.isHidden()
    # one line under the buttons (the first sentence), the whole reason in its tooltip
    assert tab.mic_label.text().startswith("Recording unavailable: Nothing to record from (test).")
    assert "Plug in" not in tab.mic_label.text() and "Plug in" in tab.mic_label.toolTip()


def test_main_window_settings_round_trip(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    assert w.windowTitle() == "Decoding Explorer"
    texts = [w.tabs.tabText(i) for i in range(w.tabs.count())]
    assert texts[0] == "Speech" and "Translation" in texts
    w.speech_tab.options_panel.setOptions(DecodingOptions(strategy="beam", num_beams=6, max_new_tokens=77))
    w.speech_tab.model_combo.setCurrentText("tiny.en")
    w.speech_tab.main_splitter.setSizes([300, 100, 400])
    sizes = w.speech_tab.main_splitter.sizes()
    w.close()
    w2 = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w2)
    o = w2.speech_tab.options_panel.options()
    assert (o.strategy, o.num_beams, o.max_new_tokens) == ("beam", 6, 77)
    assert w2.speech_tab.model_combo.currentText() == "tiny.en"
    assert w2.speech_tab.main_splitter.sizes() == sizes


def test_status_bar_shows_stats_and_cancel(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    tab = w.speech_tab
    tab.model = FakeSpeechModel(delay_s=0.02)
    tab.set_audio(_tone(1.0), "tone")
    qtbot.waitUntil(lambda: w.cancel_button.isEnabled(), timeout=5000)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        pass
    qtbot.waitUntil(lambda: not w.cancel_button.isEnabled(), timeout=5000)
    text = w.stats_label.text()
    assert "ms/token" in text and "RTF" in text and "tokens/s" in text
    assert w.model_label.text() == "fake-whisper"


def test_window_opens_without_torch():
    code = (
        "import os, sys\n"
        "os.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
        "from PySide6.QtCore import QSettings\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from gui.main_window import MainWindow\n"
        "import tempfile\n"
        "s = QSettings(tempfile.mktemp(suffix='.ini'), QSettings.Format.IniFormat)\n"
        "w = MainWindow(settings=s, autoload=False); w.show(); app.processEvents()\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules, w.isVisible())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["False", "False", "True"]


def test_sample_button_matches_assets():
    p = first_sample()
    wavs = sorted((ROOT / "assets" / "samples").glob("*.wav"))
    assert p == (wavs[0] if wavs else None)


def test_saved_splitter_sizes_below_the_stream_minimum_are_ignored(qtbot, settings, tmp_path):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QLabel, QSplitter

    from gui.tabs.base import splitter_state_sizes

    fresh = MainWindow(settings=QSettings(str(tmp_path / "fresh.ini"), QSettings.Format.IniFormat), autoload=False)
    qtbot.addWidget(fresh)
    defaults = fresh.speech_tab.main_splitter.sizes()
    old = QSplitter()  # a state as an older version saved it: the stream squeezed to 20 px
    for _ in range(3):
        old.addWidget(QLabel())
    old.setSizes([300, 20, 500])
    state = old.saveState()
    assert splitter_state_sizes(state) == [300, 20, 500]
    settings.setValue(f"{fresh.speech_tab.settings_key}/main_splitter", state)
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    assert w.speech_tab.main_splitter.sizes() == defaults
    assert w.speech_tab.main_splitter.sizes()[1] >= w.speech_tab.stream.minimumSizeHint().height()


# ------------------------------------------------ nothing the user made is lost

import soundfile as sf  # noqa: E402
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QTimer, QUrl  # noqa: E402
from PySide6.QtGui import QDropEvent  # noqa: E402
from PySide6.QtWidgets import QApplication, QMessageBox  # noqa: E402

import gui.tabs.speech as speech_mod  # noqa: E402

REAL_ASK_UNSAVED = speech_mod.ask_unsaved  # the autouse fixture below replaces the module's

from .fakes import FakeRecorder  # noqa: E402


@pytest.fixture(autouse=True)
def _dialogs_never_block(monkeypatch):
    """A window left with takes asks on close (qtbot closes it after the test): answer
    "discard" unless the test answers itself (``answers``). Autouse fixtures are set up
    first, so this patch outlives qtbot's teardown."""
    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative: "discard")
    monkeypatch.setattr(speech_mod, "ask_save_path", lambda parent, title, suggested: "")


@pytest.fixture
def fake_recorder(monkeypatch):
    """Record/Stop work without PortAudio: each recording is the next entry of FakeRecorder.takes."""
    from core.inputs import microphone

    FakeRecorder.takes = [_tone(1.0, 220.0), _tone(2.0, 330.0), _tone(1.5, 440.0), _tone(0.5, 550.0)]
    FakeRecorder.made = []
    monkeypatch.setattr(microphone, "Recorder", FakeRecorder)
    yield FakeRecorder


@pytest.fixture
def answers(monkeypatch):
    """The dialogs, answered by the test: ``answers.unsaved`` ("save"/"discard"/"cancel") and
    ``answers.paths`` (save-dialog answers, "" = cancelled); ``answers.asked`` records the questions."""

    class Answers:
        unsaved = "cancel"
        paths: list[str] = []
        asked: list[str] = []
        save_titles: list[str] = []

    a = Answers()
    a.paths, a.asked, a.save_titles = [], [], []

    def ask_unsaved(parent, text, informative):
        a.asked.append(text)
        return a.unsaved

    def ask_save_path(parent, title, suggested):
        a.save_titles.append(title)
        return a.paths.pop(0) if a.paths else ""

    monkeypatch.setattr(speech_mod, "ask_unsaved", ask_unsaved)
    monkeypatch.setattr(speech_mod, "ask_save_path", ask_save_path)
    return a


@pytest.fixture
def mic_tab(qtbot, fake_recorder):
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1200, 800)
    t.mic_ok = True
    t.record_button.setEnabled(True)
    t.model = FakeSpeechModel()
    yield t
    t.shutdown()


def _record(qtbot, tab):
    tab.toggle_record()
    assert tab.is_recording()
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.toggle_record()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)


def _wav(path, seconds=1.0, hz=300.0):
    sf.write(path, _tone(seconds, hz), 16000)
    return path


def _open(qtbot, tab, path):
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.open_file(path)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)


def _combo_items(tab):
    return [tab.takes_combo.itemText(i) for i in range(tab.takes_combo.count())]


def test_every_take_is_kept_until_discarded(qtbot, mic_tab, tmp_path):
    tab = mic_tab
    _record(qtbot, tab)
    _record(qtbot, tab)  # Record again: the first take is kept, not replaced
    assert _combo_items(tab) == ["take 1 (1.0 s)", "take 2 (2.0 s)"]
    assert tab.current_take() is tab.takes()[1] and tab.takes_combo.currentIndex() == 1
    # opening a file or the sample keeps the takes (README: kept until you Discard it)
    _open(qtbot, tab, _wav(tmp_path / "other.wav"))
    assert tab.source_name == "other.wav" and tab.current_take() is None
    assert _combo_items(tab) == ["take 1 (1.0 s)", "take 2 (2.0 s)"] and tab.takes_combo.currentIndex() == -1
    assert tab.takes_combo.placeholderText() == "2 takes kept"
    _open(qtbot, tab, first_sample())
    assert len(tab.takes()) == 2
    # go back to take 1: it is the input again, decoded from the cached encoder output
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.takes_combo.activated.emit(0)
    np.testing.assert_array_equal(tab.audio, _tone(1.0, 220.0))
    assert tab.current_take() is tab.takes()[0] and "take 1" in tab.info_label.text()
    # Discard removes the current take only
    tab.discard_input()
    assert _combo_items(tab) == ["take 2 (2.0 s)"] and tab.audio is None and tab.current_take() is None
    assert [r.calls for r in FakeRecorder.made] == [["start", "stop"], ["start", "stop"]]


def test_discard_while_recording_drops_only_the_running_recording(qtbot, mic_tab):
    tab = mic_tab
    _record(qtbot, tab)
    tab.toggle_record()
    assert tab.is_recording() and tab.discard_button.isEnabled() and not tab.takes_combo.isEnabled()
    tab.discard_input()
    assert not tab.is_recording() and FakeRecorder.made[-1].calls == ["start", "discard"]
    assert _combo_items(tab) == ["take 1 (1.0 s)"]
    np.testing.assert_array_equal(tab.audio, _tone(1.0, 220.0))  # the input is still take 1
    assert tab.record_button.text().startswith("●")


def test_files_are_not_opened_while_recording(qtbot, mic_tab, settings, tmp_path, monkeypatch):
    """Open…, Ctrl+O (MainWindow calls open_input), Sample, open_file and drops all refuse."""
    from PySide6.QtWidgets import QFileDialog

    asked = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (asked.append(a), ("", ""))[1])
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    tab = w.speech_tab
    tab.mic_ok = True
    tab.model = FakeSpeechModel()
    tab.toggle_record()
    assert not tab.open_button.isEnabled() and not tab.sample_button.isEnabled()
    f = _wav(tmp_path / "dropped.wav")
    w.open_action.trigger()  # Ctrl+O
    assert asked == [] and "Cannot open a file while recording" in tab.banner.message()
    tab.clear_error()
    tab.open_file(f)
    assert tab.banner.message().startswith("Cannot open dropped.wav while recording: press ■ Stop (Ctrl+R) first")
    tab.clear_error()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(f))])
    tab.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                             Qt.KeyboardModifier.NoModifier))
    assert "Cannot open dropped.wav while recording" in tab.banner.message()
    qtbot.wait(200)
    assert tab.is_recording() and tab.audio is None  # nothing replaced the recording
    tab.toggle_record()
    _open(qtbot, tab, f)  # after Stop the same file opens
    assert tab.source_name == "dropped.wav" and len(tab.takes()) == 1


def _window_recording(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.speech_tab.mic_ok = True
    w.show()
    w.speech_tab.toggle_record()
    assert w.speech_tab.is_recording()
    return w


def test_close_while_recording_cancel_keeps_the_window(qtbot, settings, fake_recorder, answers):
    w = _window_recording(qtbot, settings)
    w.tabs.setCurrentWidget(w.translation_tab)
    answers.unsaved = "cancel"
    assert w.close() is False
    assert answers.asked == ["A recording is running."]
    assert w.isVisible() and w.speech_tab.is_recording()
    assert w.current_tab() is w.speech_tab  # the question is asked on the tab it is about
    w.speech_tab.discard_input()


def test_close_while_recording_save_writes_the_take(qtbot, settings, fake_recorder, answers, tmp_path):
    w = _window_recording(qtbot, settings)
    answers.unsaved = "save"
    answers.paths = [str(tmp_path / "kept.wav")]
    assert w.close() is True
    assert answers.save_titles == ["Save take 1 (1.0 s)"]
    audio, sr = sf.read(tmp_path / "kept.wav", dtype="float32")
    assert sr == 16000 and len(audio) == 16000
    assert FakeRecorder.made[0].calls == ["start", "stop"]


def test_close_while_recording_discard(qtbot, settings, fake_recorder, answers):
    w = _window_recording(qtbot, settings)
    answers.unsaved = "discard"
    assert w.close() is True
    assert FakeRecorder.made[0].calls == ["start", "discard"] and answers.save_titles == []


def test_close_with_unsaved_takes(qtbot, settings, fake_recorder, answers, tmp_path):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    tab = w.speech_tab
    tab.mic_ok = True
    w.show()
    for _ in range(2):
        tab.toggle_record()
        tab.toggle_record()
    assert w.close() is False  # "cancel": the takes stay
    assert answers.asked == ["take 1 (1.0 s), take 2 (2.0 s) are not saved."]
    answers.unsaved = "save"
    answers.paths = [str(tmp_path / "one.wav"), ""]  # the second save dialog is cancelled
    assert w.close() is False and w.isVisible()
    assert [t.saved_to for t in tab.takes()] == [str(tmp_path / "one.wav"), None]
    assert _combo_items(tab) == ["take 1 (1.0 s) · saved", "take 2 (2.0 s)"]
    answers.paths = [str(tmp_path / "no such folder" / "two.wav")]  # the save fails: stay open
    assert w.close() is False and "no such folder does not exist" in tab.banner.message()
    answers.paths = [str(tmp_path / "two.wav")]
    assert w.close() is True
    assert answers.asked[-1] == "take 2 (2.0 s) is not saved." and (tmp_path / "two.wav").exists()


def test_close_without_takes_asks_nothing(qtbot, settings, fake_recorder, answers, tmp_path):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    tab = w.speech_tab
    tab.mic_ok = True
    tab.toggle_record()
    tab.toggle_record()
    assert tab.save_to(tmp_path / "saved.wav")  # the only take is saved
    tab.set_audio(_tone(1.0), "tone.wav")  # a file's audio is not something the user made
    assert w.close() is True and answers.asked == []


@pytest.mark.parametrize("button,expected", [(QMessageBox.StandardButton.Cancel, "cancel"),
                                             (QMessageBox.StandardButton.Discard, "discard"),
                                             (QMessageBox.StandardButton.Save, "save")])
def test_ask_unsaved_is_a_save_discard_cancel_box(qtbot, button, expected):
    """The real QMessageBox, answered by clicking its button."""
    seen = []

    def click():
        box = QApplication.activeModalWidget()
        seen.append((box.windowTitle(), box.text()))
        box.button(button).click()

    QTimer.singleShot(50, click)
    assert REAL_ASK_UNSAVED(None, "A recording is running.", "Save, discard or cancel.") == expected
    assert seen == [("Unsaved recording", "A recording is running.")]


# ------------------------------------------------------------- bad input files


def test_one_sample_wav_is_refused_when_opened(qtbot, tab, tmp_path):
    tab.model = model = FakeSpeechModel()
    _open(qtbot, tab, _wav(tmp_path / "good.wav"))
    calls = model.decode_calls
    one = tmp_path / "one.wav"
    sf.write(one, np.array([0.2], np.float32), 16000)
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000) as blocker:
        tab.open_file(one)
    assert blocker.args[0] == (
        "one.wav is too short: it holds 1 sample (0.062 ms) of audio, and the speech models need at least 0.1 s. "
        "Open or record a longer clip."
    )
    assert tab.source_name == "good.wav" and model.decode_calls == calls  # never reached the model
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000) as blocker:
        tab.set_audio(np.zeros(100, np.float32), "blip")
    assert blocker.args[0].startswith("blip is too short") and tab.source_name == "good.wav"


def test_new_input_clears_the_previous_run(qtbot, tab):
    tab.model = FakeSpeechModel()
    _decode(qtbot, tab, lambda: tab.set_audio(_tone(1.0), "first"))
    assert tab.stream.token_count() and tab.heatmap.row_count() and tab.topk.step() is not None
    tab.model = None  # nothing decodes the new input: the old run must not stay on screen
    with qtbot.waitSignal(tab.statsChanged, timeout=1000) as blocker:
        tab.set_audio(_tone(2.0), "second")
    stats = blocker.args[0]
    assert stats["n_tokens"] == 0 and stats["encode_ms"] is None and stats["ms_per_token"] is None
    assert tab.stream.token_count() == 0 and tab.heatmap.row_count() == 0 and tab.topk.step() is None


def test_truncated_wav_opens_with_a_warning(qtbot, tab, tmp_path):
    full = _wav(tmp_path / "full.wav", seconds=3.0)
    data = full.read_bytes()
    cut = tmp_path / "cut.wav"
    cut.write_bytes(data[: data.index(b"data") + 8 + int(0.62 * 16000) * 2])
    messages = []
    tab.statusMessage.connect(messages.append)
    tab.open_file(cut)
    qtbot.waitUntil(lambda: tab.source_name == "cut.wav", timeout=5000)
    assert len(tab.audio) == int(0.62 * 16000)  # still usable
    info = tab.info_label.text()
    assert info.startswith("cut.wav · 0.62 s") and "⚠ cut.wav is truncated: its header promises 3.00 s" in info
    assert tab.banner.message() == "" and any("truncated" in m for m in messages)
    _open(qtbot, tab, full) if tab.model else tab.open_file(full)
    qtbot.waitUntil(lambda: tab.source_name == "full.wav", timeout=5000)
    assert "truncated" not in tab.info_label.text()


def test_save_to_a_missing_folder_is_one_sentence(qtbot, tab, tmp_path):
    tab.set_audio(_tone(1.0), "tone")
    target = tmp_path / "gone" / "x.wav"
    assert tab.save_to(target) is False
    assert tab.banner.message() == f"Could not save x.wav: the folder {target.parent} does not exist; choose an existing folder."


def test_messages_name_files_by_their_name(qtbot, tab, tmp_path):
    folder = tmp_path / "deep" / "folder"
    folder.mkdir(parents=True)
    bad = folder / "broken.wav"
    bad.write_bytes(b"RIFF not really a wave file")
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000) as blocker:
        tab.open_file(bad)
    assert "broken.wav" in blocker.args[0] and str(folder) not in blocker.args[0]
    messages = []
    tab.statusMessage.connect(messages.append)
    tab.set_audio(_tone(1.0), "tone")
    assert tab.save_to(folder / "saved.wav") and messages[-1] == "Saved saved.wav"


def test_dropping_a_non_audio_file_says_why(qtbot, tab, tmp_path):
    from PySide6.QtGui import QDragEnterEvent

    f = tmp_path / "notes.txt"
    f.write_text("hello")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(f))])
    enter = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    tab.dragEnterEvent(enter)
    assert enter.isAccepted()
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000) as blocker:
        tab.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                 Qt.KeyboardModifier.NoModifier))
    assert blocker.args[0].startswith("Could not decode notes.txt: it is not an audio file")


# ------------------------------------------------------------------- layout


def test_waveform_has_room_at_1280x800(qtbot, settings, tmp_path):
    """At 1280x800 the waveform was ~60 px with overlapping labels: now >= 110 px, rows apart."""
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    tab = w.speech_tab
    tab.set_audio(_tone(3.0), "tone.wav")
    qtbot.wait(50)
    assert tab.wave.height() >= 110, tab.wave.height()
    area = tab.input_area
    widgets = [tab.info_label, tab.record_button, tab.takes_combo, tab.save_button, tab.discard_button,
               tab.open_button, tab.model_combo, tab.task_combo, tab.wave]
    if not tab.mic_label.isHidden():
        widgets.append(tab.mic_label)
    rects = [(x, x.geometry().translated(x.parentWidget().mapTo(area, QPoint(0, 0)))) for x in widgets]
    for i, (a, ra) in enumerate(rects):
        assert area.rect().contains(ra), a
        for b, rb in rects[i + 1:]:
            assert not ra.intersects(rb), (a, b)
    w.grab().save(str(tmp_path / "speech_1280x800.png"))


def test_failed_stop_gives_back_open_sample_and_save(qtbot, mic_tab, fake_recorder):
    """A recording that yields no usable audio (here: empty) is reported, and the buttons that
    recording disabled (Open…, Sample) come back; an earlier take can still be saved."""
    _record(qtbot, mic_tab)  # take 1, kept
    FakeRecorder.takes.insert(0, np.zeros(0, np.float32))
    mic_tab.toggle_record()
    assert not mic_tab.open_button.isEnabled()
    mic_tab.toggle_record()  # stop: nothing arrived
    assert not mic_tab.is_recording()
    assert mic_tab.banner.message()
    assert mic_tab.open_button.isEnabled() and mic_tab.sample_button.isEnabled()
    assert mic_tab.save_button.isEnabled()
