"""The window tells the truth about the run (issue 9 §4): Cancel/Esc end the run's state,
each tab has its own status bar, the first size fits the screen, the heatmap's axis fits
each input."""

from __future__ import annotations

import numpy as np
import pytest
import threading
import time

from PySide6.QtCore import QSize, Qt

from core.events import SegmentEvent
from gui.main_window import MainWindow, first_size

from .fakes import WORDS, FakeSpeechModel, make_step


def _tone(seconds=1.0):
    t = np.arange(int(16000 * seconds), dtype=np.float32) / 16000
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.fixture
def window(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.show()
    w.speech_tab.options_panel._timer.setInterval(20)
    yield w
    for i in range(w.tabs.count()):
        w.tabs.widget(i).shutdown()


def _start_slow_decode(qtbot, w):
    tab = w.speech_tab
    tab.model = FakeSpeechModel(delay_s=0.1)
    tab.set_audio(_tone(1.0), "tone")
    qtbot.waitUntil(lambda: tab.stream.token_count() >= 2, timeout=5000)
    assert w.cancel_button.isEnabled() and w.busy_bar.isVisible()
    return tab


@pytest.mark.parametrize("how", ["esc", "button"])
def test_cancel_ends_the_run_state(qtbot, window, how):
    tab = _start_slow_decode(qtbot, window)
    if how == "esc":
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    else:
        qtbot.mouseClick(window.cancel_button, Qt.MouseButton.LeftButton)
    # at once: idle controls, "(cancelled)" after the tokens so far, their statistics
    assert not window.cancel_button.isEnabled()
    assert not window.busy_bar.isVisible()
    assert not tab.is_busy()
    n = tab.stream.token_count()
    assert 2 <= n < len(WORDS)
    assert tab.stream.text().endswith("(cancelled)")
    assert "cancelled" in tab.stream.count_label.text()
    assert tab.last_stats["n_tokens"] == n and tab.last_stats["live"] is False
    assert "ms/token" in window.stats_label.text() and "– ms/token" not in window.stats_label.text()
    qtbot.waitUntil(tab.workers_idle, timeout=5000)
    qtbot.wait(150)  # events the worker sent after the cancel are dropped
    assert tab.stream.token_count() == n
    assert not window.cancel_button.isEnabled() and not window.busy_bar.isVisible()


class EndlessSpeechModel(FakeSpeechModel):
    """A model that never ends by itself and ignores the ``cancel`` it is given: only the
    worker's abort (stop pulling, close the generator) can stop it. ``steps`` counts the
    steps it has taken (each one is a yielded StepEvent); ``closed`` is set when the worker
    closes the generator. A safety cap (``SAFETY_S``) ends it so that a broken worker fails
    the test instead of hanging the session."""

    SAFETY_S = 20.0

    def __init__(self, step_s: float = 0.02):
        super().__init__()
        self.step_s = step_s
        self.steps = 0
        self.closed = threading.Event()
        self._count = threading.Lock()

    def decode(self, audio, options, *, language="auto", task="transcribe", cancel=None):
        yield SegmentEvent(segment=0, label="endless", source_offset=0, source_len=50)
        end = time.monotonic() + self.SAFETY_S
        i = 0
        try:
            while time.monotonic() < end:  # cancel() is never asked
                time.sleep(self.step_s)
                with self._count:
                    self.steps += 1
                yield make_step(i, WORDS[i % len(WORDS)])
                i += 1
        except GeneratorExit:
            self.closed.set()
            raise


@pytest.mark.parametrize("how", ["esc", "button"])
def test_cancel_stops_a_model_that_never_ends(qtbot, window, how):
    """Esc / Cancel against an endless decode that ignores its cancel flag: the worker goes
    idle in bounded time, closes the generator, and the model takes at most the step it was
    in when cancelled (none after); no token reaches the stream after the cancel."""
    tab = window.speech_tab
    tab.model = model = EndlessSpeechModel()
    tab.set_audio(_tone(1.0), "tone")
    qtbot.waitUntil(lambda: tab.stream.token_count() >= 3, timeout=5000)
    assert window.cancel_button.isEnabled()
    if how == "esc":
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    else:
        qtbot.mouseClick(window.cancel_button, Qt.MouseButton.LeftButton)
    at_cancel = model.steps  # read after the abort was asked (the click returns after it)
    shown = tab.stream.token_count()
    assert not tab.is_busy() and not window.cancel_button.isEnabled()
    qtbot.waitUntil(tab.workers_idle, timeout=5000)  # the safety cap is 20 s: an ignored abort fails here
    assert model.closed.wait(1.0), "the worker did not close the generator"
    after = model.steps
    assert after <= at_cancel + 1, (at_cancel, after)  # the step under way at the cancel, no more
    qtbot.wait(200)
    assert model.steps == after  # no further step once idle
    assert tab.stream.token_count() == shown and tab.stream.text().endswith("(cancelled)")


def test_status_bar_shows_the_current_tabs_model(qtbot, window):
    tab = window.speech_tab
    tab.model = FakeSpeechModel()
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(_tone(1.0), "tone")
    assert window.model_label.text() == "fake-whisper"
    window.tabs.setCurrentWidget(window.ocr_tab)
    assert window.model_label.text() == "no model"
    assert "RTF" not in window.stats_label.text() and "ms/token" not in window.stats_label.text()
    window.tabs.setCurrentWidget(window.speech_tab)
    assert window.model_label.text() == "fake-whisper"
    assert "RTF" in window.stats_label.text()


def test_busy_state_follows_the_tab(qtbot, window):
    tab = _start_slow_decode(qtbot, window)
    window.tabs.setCurrentWidget(window.translation_tab)
    assert not window.cancel_button.isEnabled() and not window.busy_bar.isVisible()
    window.tabs.setCurrentWidget(tab)
    assert window.cancel_button.isEnabled() and window.busy_bar.isVisible()
    tab.cancel()


def test_first_size_fits_the_screen():
    assert first_size(QSize(1280, 800)) == (1216, 760)
    assert first_size(QSize(2560, 1440)) == (1400, 900)
    assert first_size(None) == (1400, 900)


def test_window_fits_its_screen(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    avail = w.screen().availableGeometry()
    assert w.width() <= avail.width() and w.height() <= avail.height()


def test_window_is_usable_at_1280_wide(qtbot, settings):
    """No tab's controls may push the window past a 1280 px screen (the speech tab's rows
    once needed 1533 px)."""
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.show()
    assert w.minimumSizeHint().width() <= 1280
    for i in range(w.tabs.count()):
        assert w.tabs.widget(i).minimumSizeHint().width() <= 1280 - 16, w.tabs.tabText(i)


def test_heatmap_time_axis_fits_each_input(qtbot, window):
    tab = window.speech_tab
    tab.model = FakeSpeechModel(n_frames=1500)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(_tone(20.0), "long")
    assert tab.heatmap.column_count() == 1000  # 20 s / 0.02 s
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(_tone(3.0), "short")
    assert tab.heatmap.column_count() == 150  # 3 s, not the earlier 20 s
    x0, x1 = tab.heatmap.plot.vb.viewRange()[0]
    assert x1 == pytest.approx(3.0, abs=0.05)
