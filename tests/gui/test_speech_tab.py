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
    import core

    fake_audio = type(sys)("core.audio")
    fake_audio.microphone_status = lambda: (False, "no input device found (PortAudio lists none)")
    fake_audio.list_input_devices = lambda: []
    monkeypatch.setitem(sys.modules, "core.audio", fake_audio)
    monkeypatch.setattr(core, "audio", fake_audio, raising=False)
    tab._refresh_mic()
    assert not tab.record_button.isEnabled()
    assert "no input device" in tab.record_button.toolTip()
    assert not tab.mic_label.isHidden()


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
