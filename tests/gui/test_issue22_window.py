"""Issue 22 in the window: the Speech tab's dtype picker (float32 / int8) reloads the model
in that dtype and the status bar names it; the options panel's KV cache switch sets
``DecodingOptions.kv_cache`` and is refused, with validate()'s message, under speculative
decoding; the step strip shows each step's decoder time (``StepEvent.time_ms``)."""

from __future__ import annotations

import pytest

from core.dtypes import DTYPES
from core.options import DecodingOptions
from gui.main_window import MainWindow
from gui.widgets.options_panel import OptionsPanel


def _window_at(qtbot, settings, tab_name: str):
    """(window at 1280x800, its tab ``tab_name``, the list the tab's errors go to)."""
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    tab = getattr(w, tab_name)
    errors = []
    tab.errorOccurred.connect(errors.append)
    return w, tab, errors


SLOW_MS = 240_000  # two shared CPU cores: a real load takes seconds


@pytest.fixture
def panel(qtbot):
    p = OptionsPanel(debounce_ms=10)
    qtbot.addWidget(p)
    p.resize(420, 800)
    p.show()
    return p


# ------------------------------------------------------------------ dtype picker
def test_the_speech_and_translation_tabs_have_a_dtype_picker_and_ocr_has_none(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    combo = w.speech_tab.dtype_combo
    assert combo is not None
    assert [combo.itemText(i) for i in range(combo.count())] == list(DTYPES)
    assert combo.currentText() == "float32"
    assert "int8" in combo.toolTip() and "CTranslate2" in combo.toolTip()
    assert w.ocr_tab.dtype_combo is None
    combo = w.translation_tab.dtype_combo  # bundled Bergamot directions load in int8 too (core.dtypes.INT8_TASKS)
    assert combo is not None and [combo.itemText(i) for i in range(combo.count())] == list(DTYPES)
    assert combo.currentText() == "float32" and "int8" in combo.toolTip()
    assert combo.parent() is not None and combo.isVisibleTo(w.translation_tab)


@pytest.mark.e2e
def test_dtype_picker_reloads_tiny_en_in_int8_and_the_status_bar_says_int8(qtbot, settings):
    w, tab, errors = _window_at(qtbot, settings, "speech_tab")
    tab.model_combo.setCurrentText("tiny.en")
    with qtbot.waitSignal(tab.modelReady, timeout=SLOW_MS):
        tab.dtype_combo.setCurrentText("int8")  # picking int8 reloads the model named in the picker
    assert errors == []
    assert tab.model.dtype == "int8"
    assert "int8" in w.model_label.text() and w.model_label.text().startswith(tab.model.name)
    w.close()
    w2 = MainWindow(settings=settings, autoload=False)  # the choice is kept between runs
    qtbot.addWidget(w2)
    assert w2.speech_tab.dtype_combo.currentText() == "int8"
    assert w2.speech_tab.model_dtype() == "int8"


# ------------------------------------------------------------------ KV cache switch
def test_kv_cache_checkbox_sets_the_option(qtbot, panel):
    box = panel.checks["kv_cache"]
    assert box.text() == "KV cache" and box.isChecked()
    assert "whole prefix" in box.toolTip()
    with qtbot.waitSignal(panel.optionsChanged, timeout=2000) as blocker:
        box.click()
    assert blocker.args[0].kv_cache is False
    assert panel.options().kv_cache is False
    panel.setOptions(DecodingOptions(kv_cache=True))
    assert box.isChecked()
    panel.setOptions(DecodingOptions(kv_cache=False))
    assert not box.isChecked()


def test_speculative_with_the_cache_off_shows_validates_message(qtbot, panel):
    panel.strategy_buttons["speculative"].click()
    qtbot.wait(50)
    emitted = []
    panel.optionsChanged.connect(emitted.append)
    panel.checks["kv_cache"].click()
    qtbot.waitUntil(lambda: panel.error_label.isVisible(), timeout=2000)
    text = panel.error_label.text()
    assert "speculative" in text and "kv_cache=False" in text and "Traceback" not in text
    assert emitted == []  # nothing invalid reaches the run
    assert "speculative" in panel.checks["kv_cache"].toolTip()
    panel.checks["kv_cache"].click()  # back on: valid again
    qtbot.waitUntil(lambda: not panel.error_label.isVisible(), timeout=2000)
    assert emitted and emitted[-1].kv_cache is True and emitted[-1].strategy == "speculative"


# ------------------------------------------------------------------ ms per step in the strip
def _ev(step, time_ms):
    from core.events import StepEvent

    return StepEvent(step, 1, "a", 0.5, 0.5, [], [], 0.1, raw_entropy=0.2, time_ms=time_ms)


def test_step_strip_draws_the_decoder_time_per_step(qtbot):
    from gui.widgets.step_strip import StepStrip

    strip = StepStrip()
    qtbot.addWidget(strip)
    strip.resize(600, 64)
    strip.show()
    strip.append_steps([_ev(i, 10.0 * (i + 1)) for i in range(5)])
    steps, ms = strip.series("ms")
    assert list(steps) == [0, 1, 2, 3, 4] and list(ms) == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert strip.curve_points("ms") == 5 and strip.curves["ms"].isVisible()
    strip.select_step(2)
    assert "30.0 ms" in strip.legend_text()
    assert "ms per step" in strip.plot.toolTip() and "KV cache" in strip.plot.toolTip()


def test_step_strip_hides_the_time_curve_for_events_without_one(qtbot):
    from gui.widgets.step_strip import StepStrip

    strip = StepStrip()
    qtbot.addWidget(strip)
    strip.show()
    strip.append_steps([_ev(i, 0.0) for i in range(3)])  # a fake model's or an old exploration's steps
    strip.flush()
    assert not strip.curves["ms"].isVisible() and " ms" not in strip.legend_text()


@pytest.mark.e2e
def test_the_translation_picker_loads_en_pt_in_int8_and_the_status_bar_says_so(qtbot, settings):
    w, tab, errors = _window_at(qtbot, settings, "translation_tab")
    tab.model_combo.setCurrentText(tab.model_label("en-pt"))
    with qtbot.waitSignal(tab.modelReady, timeout=SLOW_MS):
        tab.dtype_combo.setCurrentText("int8")  # picking int8 reloads the direction named in the picker
    assert errors == []
    assert tab.model.dtype == "int8"
    w.tabs.setCurrentWidget(tab) if hasattr(w, "tabs") else None
    tab.statsChanged.emit(tab.stats_dict(None))
    assert "int8" in w.model_label.text()
