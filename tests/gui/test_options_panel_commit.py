"""Issue 22 "Interactivity": a slider the user steps or lets go re-decodes at once, not after
the options panel's debounce (250 ms of the 416 ms from a slider move to the first new token
in ``tests/bench/bench_gui_latency.py``); a drag coalesces; a value set by code is debounced
as before (``test_widgets.test_options_panel_emits_validated_options_once_after_debounce``)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from core.options import DecodingOptions
from gui.widgets.options_panel import OptionsPanel

SOON_MS = 50  # one turn of the event loop, with room for a loaded machine


@pytest.fixture
def panel(qtbot, tmp_path):
    p = OptionsPanel(DecodingOptions(strategy="sample", temperature=1.0), presets_dir=tmp_path / "presets")
    qtbot.addWidget(p)
    p.show()
    assert p.debounce_ms == 250  # the default: typing and code still wait for quiet
    return p


def test_a_keyboard_step_on_a_slider_emits_at_once(qtbot, panel):
    slider = panel.controls["temperature"].slider
    with qtbot.waitSignal(panel.optionsChanged, timeout=SOON_MS) as got:
        qtbot.keyClick(slider, Qt.Key.Key_Right)
    assert got.args[0].temperature == pytest.approx(1.05)
    with qtbot.waitSignal(panel.optionsChanged, timeout=SOON_MS) as got:
        qtbot.keyClick(slider, Qt.Key.Key_PageDown)  # a page step (a click on the groove) too
    assert got.args[0].temperature < 1.05


def test_a_step_at_the_end_of_the_range_emits_nothing(qtbot, panel):
    ctl = panel.controls["temperature"]
    ctl.slider.setValue(ctl.slider.maximum())  # by code: debounced
    qtbot.waitSignal(panel.optionsChanged, timeout=2000).wait()
    seen = []
    panel.optionsChanged.connect(seen.append)
    qtbot.keyClick(ctl.slider, Qt.Key.Key_Right)  # nothing changes
    qtbot.wait(350)
    assert seen == []


def test_a_drag_coalesces_and_its_release_emits_once(qtbot, panel):
    slider = panel.controls["temperature"].slider
    seen = []
    panel.optionsChanged.connect(seen.append)
    slider.setSliderDown(True)
    start = slider.value()
    for i in range(1, 11):  # ten moves in one turn of the event loop: one decode at most
        slider.setSliderPosition(start + i)
    assert seen == []
    with qtbot.waitSignal(panel.optionsChanged, timeout=SOON_MS) as got:
        slider.setSliderDown(False)  # the release
    assert got.args[0].temperature == pytest.approx(1.5)
    qtbot.wait(350)
    assert len(seen) == 1  # no late debounced duplicate


def test_a_held_slider_emits_after_a_short_pause(qtbot, panel):
    slider = panel.controls["temperature"].slider
    slider.setSliderDown(True)
    with qtbot.waitSignal(panel.optionsChanged, timeout=150) as got:  # DRAG_MS, not the 250 ms debounce
        slider.setSliderPosition(slider.value() + 2)
    assert got.args[0].temperature == pytest.approx(1.1)
    slider.setSliderDown(False)


def test_a_number_entered_in_the_box_emits_at_once(qtbot, panel):
    spin = panel.controls["temperature"].spin
    spin.setFocus()
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin.lineEdit(), "0.7")
    with qtbot.waitSignal(panel.optionsChanged, timeout=SOON_MS) as got:
        qtbot.keyClick(spin.lineEdit(), Qt.Key.Key_Return)
    assert got.args[0].temperature == pytest.approx(0.7)
