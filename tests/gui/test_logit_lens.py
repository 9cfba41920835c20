"""The logit-lens view (gui/widgets/logit_lens.py): built from StepEvents with known lenses,
in batches; colours, hover text, the Δ mode, clicks; in the tabs with the fake models
(the Capture box re-decodes with ``capture_lens``), at 1280x800 in all three tabs, and on
the real Bergamot en-pt model."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QHelpEvent, QMouseEvent
from PySide6.QtWidgets import QApplication, QToolTip

from core.events import LensEntry, StepEvent, TokenProb
from core.options import DecodingOptions
from gui.run_state import RunState
from gui.tabs.speech import SpeechTab
from gui.widgets import logit_lens as ll
from gui.widgets.colors import prob_color
from gui.widgets.logit_lens import COL_W, GUTTER_W, HEADER_H, LogitLensView, delta_color

from .fakes import LENS_LAYERS, WORDS, FakeSpeechModel, fake_lens, make_step

TONE = (0.1 * np.sin(np.arange(16000) / 16000 * 2 * np.pi * 220)).astype(np.float32)


def lens_step(step: int, text: str = " fox", layers: int = LENS_LAYERS) -> StepEvent:
    ev = make_step(step, text)
    return dataclasses.replace(ev, lens=fake_lens(ev, layers))


@pytest.fixture
def view(qtbot):
    run = RunState()
    v = LogitLensView(run)
    v.set_capture(True)
    qtbot.addWidget(v)
    v.resize(900, 300)
    v.show()
    qtbot.waitExposed(v)
    return v


def _paint(v: LogitLensView) -> None:
    v.grid.viewport().repaint()


# ---------------------------------------------------------------------- the widget
def test_grid_fills_as_batches_arrive(qtbot, view):
    assert view.column_count() == 0 and "fills in" in view.grid.placeholder
    view.append_steps([lens_step(i, WORDS[i]) for i in range(3)])
    assert (view.column_count(), view.layer_count()) == (3, LENS_LAYERS)
    view.append_steps([lens_step(i, WORDS[i]) for i in range(3, 7)])
    assert view.column_count() == 7
    # each cell shows its layer's top-1 token; the last row is the output layer
    ev = lens_step(5, WORDS[5])
    for layer, e in enumerate(ev.lens):
        assert view.cell(5, layer)[0] == ll.cell_text(e.text)
    _paint(view)
    assert view.grid.painted_columns == (0, 7)
    # a step already shown comes again (a branch replayed): replaced, not appended
    view.append_steps([lens_step(6, " cat")])
    assert view.column_count() == 7 and view.grid.steps[6].text == " cat"
    view.clear()
    assert view.column_count() == 0 and view.layer_count() == 0


def test_colours_follow_the_probability(view):
    view.append_steps([lens_step(0, " The")])
    ev = view.grid.steps[0]
    colours = [view.cell(0, layer)[1] for layer in range(LENS_LAYERS)]
    assert [c.name() for c in colours] == [prob_color(e.prob).name() for e in ev.lens]
    # viridis, fixed levels: a more probable top-1 is a brighter cell; 0 and 1 are the map's ends
    probs = [e.prob for e in ev.lens]
    order = np.argsort(probs)
    lum = [colours[i].lightnessF() for i in order]
    assert lum == sorted(lum) and len(set(probs)) > 1
    assert prob_color(0.0).name() == "#440154" and prob_color(1.0).name() == "#fde725"


def test_hover_shows_the_layers_top_k(qtbot, view):
    view.append_steps([lens_step(0, " The"), lens_step(1, " quick")])
    ev = view.grid.steps[1]
    for layer, e in enumerate(ev.lens):
        tip = view.tooltip(1, layer)
        for tp in e.topk:
            assert repr(tp.text) in tip and f"{tp.prob:6.3f}" in tip
        assert f"emitted {ev.text!r}" in tip and f"p = {math.exp(e.logprob):.3g}" in tip
    assert "output layer" in view.tooltip(1, LENS_LAYERS - 1) and "layer 0" in view.tooltip(1, 0)
    # the real hover: a tool-tip event over the cell (step 1, layer 2) shows that text
    rect = view.grid.cell_rect(1, 2)
    vp = view.grid.viewport()
    QApplication.sendEvent(vp, QHelpEvent(QEvent.Type.ToolTip, rect.center(), vp.mapToGlobal(rect.center())))
    qtbot.waitUntil(lambda: QToolTip.isVisible(), timeout=2000)
    assert QToolTip.text() == view.tooltip(1, 2)


def test_delta_mode_shows_what_each_layer_did_to_the_emitted_token(view):
    view.append_steps([lens_step(0, " The")])
    ev = view.grid.steps[0]
    view.set_mode("delta")
    assert view.mode_box.currentData() == "delta" and "suppressed" in view.legend.text()
    lp = [e.logprob for e in ev.lens]
    for layer in range(LENS_LAYERS):
        label, colour = view.cell(0, layer)
        if layer == 0:
            assert label == "–" and colour.name() == delta_color(None).name()
        else:
            d = lp[layer] - lp[layer - 1]
            assert label == f"{d:+.2f}" and colour.name() == delta_color(d).name()
    # the diverging scale: promoted red, suppressed blue, zero white-ish
    assert delta_color(3.0).red() > delta_color(3.0).blue() and delta_color(-3.0).blue() > delta_color(-3.0).red()
    assert min(delta_color(0.0).getRgb()[:3]) > 200
    view.set_mode("top-1")
    assert view.cell(0, 0)[0] == ll.cell_text(ev.lens[0].text)
    with pytest.raises(ValueError):
        view.set_mode("nope")


def test_clicking_a_cell_selects_its_step_and_the_run_selection_outlines_it(qtbot, view):
    view.append_steps([lens_step(i, WORDS[i]) for i in range(5)])
    rect = view.grid.cell_rect(3, 1)
    with qtbot.waitSignal(view.stepSelected) as blocker:
        qtbot.mouseClick(view.grid.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args == [3]
    view.run.add(lens_step(0))  # the run's selection drives the outline
    view.run.select(2)
    assert view.grid.selected == 2
    view.run.clear()
    assert view.column_count() == 0


def test_thousands_of_steps_paint_only_the_visible_columns(qtbot, view):
    n = 3000
    t0 = time.perf_counter()
    for start in range(0, n, 100):  # batches, as the tab's frames give them
        view.append_steps([lens_step(i, WORDS[i % len(WORDS)]) for i in range(start, start + 100)])
    add_s = time.perf_counter() - t0
    assert view.column_count() == n
    _paint(view)
    first, last = view.grid.painted_columns
    visible = (view.grid.viewport().width() - GUTTER_W) // COL_W + 1
    assert last == n and last - first <= visible  # following the newest step, and no more than fit
    view.grid.horizontalScrollBar().setValue(0)
    _paint(view)
    assert view.grid.painted_columns[0] == 0 and view.grid.painted_columns[1] <= visible
    # the time is printed, not asserted (the machine is shared)
    print(f"3000 steps in 30 batches: {1000 * add_s:.0f} ms")


def test_placeholder_says_what_to_do():
    v = LogitLensView()
    assert "Capture" in v.grid.placeholder
    v.set_capture(True)
    assert "fills in" in v.grid.placeholder
    v.append_steps([make_step(0, " The")])  # a run without a lens
    assert "no lens" in v.grid.placeholder


# ---------------------------------------------------------------------- in the tabs
@pytest.fixture
def tab(qtbot):
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.options_panel._timer.setInterval(20)
    t.model = FakeSpeechModel()
    yield t
    t.shutdown()


def _decoded(qtbot, tab, action):
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000) as blocker:
        action()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    return blocker.args[0]


def test_capture_box_re_decodes_with_the_lens_and_the_grid_fills(qtbot, tab):
    tabs = tab.inspector_tabs
    assert tabs.tabText(tabs.indexOf(tab.lens_view)) == "Logit lens"
    _decoded(qtbot, tab, lambda: tab.set_audio(TONE, "tone"))
    model = tab.model
    assert model.decode_calls == 1 and not model.decode_options[-1].capture_lens
    assert tab.lens_view.column_count() == len(WORDS) and tab.lens_view.layer_count() == 0
    tabs.setCurrentWidget(tab.lens_view)
    _decoded(qtbot, tab, lambda: tab.lens_view.capture_box.setChecked(True))
    assert model.decode_calls == 2 and model.decode_options[-1].capture_lens
    v = tab.lens_view
    assert (v.column_count(), v.layer_count()) == (len(WORDS), LENS_LAYERS)
    for step, ev in enumerate(tab.run.steps()):
        assert v.cell(step, LENS_LAYERS - 1)[0] == ll.cell_text(ev.raw_topk[0].text)  # the output row
    # an option change keeps capturing; switching it off keeps the shown run and decodes nothing
    _decoded(qtbot, tab, lambda: tab.options_panel.setOptions(DecodingOptions(strategy="beam", num_beams=2),
                                                               emit=True))
    assert model.decode_options[-1].capture_lens and v.layer_count() == LENS_LAYERS
    tab.lens_view.capture_box.setChecked(False)
    qtbot.wait(100)
    assert model.decode_calls == 3 and v.column_count() == len(WORDS)
    _decoded(qtbot, tab, lambda: tab.options_panel.setOptions(DecodingOptions(strategy="greedy"), emit=True))
    assert not model.decode_options[-1].capture_lens and v.layer_count() == 0


def test_grid_grows_live_and_clicks_select_the_step(qtbot, tab):
    tab.model = FakeSpeechModel(delay_s=0.05)
    tab.lens_view.set_capture(True)
    tab.inspector_tabs.setCurrentWidget(tab.lens_view)
    seen = []
    with qtbot.waitSignal(tab.decodeFinished, timeout=10_000):
        tab.set_audio(TONE, "tone")
        while tab.is_decoding():
            qtbot.wait(20)
            seen.append(tab.lens_view.column_count())
    assert len(set(seen)) > 3 and seen == sorted(seen)  # filled in as tokens arrived
    rect = tab.lens_view.grid.cell_rect(4, 0)
    qtbot.mouseClick(tab.lens_view.grid.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert tab.selected_step() == 4 and tab.lens_view.grid.selected == 4
    assert tab.topk.step() == 4  # the top-k chart shows that step


def test_a_fork_keeps_capturing_and_the_grid_shows_the_branch(qtbot, tab):
    tab.lens_view.set_capture(True)
    _decoded(qtbot, tab, lambda: tab.set_audio(TONE, "tone"))
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        assert tab.fork(3, [tab.model.backend.tokenize(" cat")[0]], " cat") is not False
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    steps = tab.run.steps()
    v = tab.lens_view
    assert v.column_count() == len(steps) and v.grid.steps[3].text == " cat"
    assert all(len(ev.lens) == LENS_LAYERS for ev in v.grid.steps)
    tab.show_branch(0)  # the original run again
    assert [e.text for e in v.grid.steps] == [e.text for e in tab.run.steps()] and v.grid.steps[3].text == WORDS[3]


def test_every_tab_has_the_lens_with_room_at_1280x800(qtbot, settings):
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    for t in (w.speech_tab, w.ocr_tab, w.translation_tab):
        w.tabs.setCurrentWidget(t)
        tabs = t.inspector_tabs
        assert tabs.tabText(tabs.indexOf(t.lens_view)) == "Logit lens"
        tabs.setCurrentWidget(t.lens_view)
        qtbot.waitUntil(lambda t=t: t.lens_view.isVisible(), timeout=3000)
        t.lens_view.append_steps([lens_step(i, WORDS[i], layers=6) for i in range(8)])
        grid = t.lens_view.grid
        assert grid.row_h() >= ll.MIN_ROW_H and grid.viewport().width() >= 350, (t.title, grid.viewport().size())
        assert (grid.viewport().width() - GUTTER_W) // COL_W >= 5  # several steps side by side


def test_ocr_tab_fake_reader_fills_the_lens(qtbot):
    from gui.tabs.ocr import OCRTab

    from .fakes_ocr import LINE_TEXT, FakeOCRModel

    t = OCRTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    try:
        t.model = FakeOCRModel()
        t.lens_view.set_capture(True)
        with qtbot.waitSignal(t.decodeFinished, timeout=10_000):
            t.load_sample()
        qtbot.waitUntil(lambda: not t.is_decoding(), timeout=10_000)
        assert t.lens_view.column_count() == len(t.run.steps()) > 0 and t.lens_view.layer_count() == LENS_LAYERS
        assert t.lens_view.grid.steps[0].text == LINE_TEXT[0]
    finally:
        t.shutdown()


# ------------------------------------------------------------------- a real model
@pytest.mark.e2e
def test_bergamot_lens_in_the_translation_tab(qtbot):
    from gui.tabs.translation import TranslationTab

    t = TranslationTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.options_panel._timer.setInterval(20)
    t._text_timer.setInterval(50)
    try:
        with qtbot.waitSignal(t.modelReady, timeout=120_000):
            t.load_model("en-pt")
        qtbot.waitUntil(lambda: not t.is_busy(), timeout=120_000)
        t.lens_view.set_capture(True)
        with qtbot.waitSignal(t.decodeFinished, timeout=120_000):
            t.set_text("The weather is nice today.")
        qtbot.waitUntil(lambda: not t.is_decoding(), timeout=120_000)
        v = t.lens_view
        steps = t.run.steps()
        assert v.column_count() == len(steps) > 3 and v.layer_count() == 2  # tiny11: two decoder layers
        for ev in steps:
            assert ev.lens[-1].topk == ev.raw_topk
            assert v.cell(ev.step, 1)[1].name() == prob_color(ev.raw_topk[0].prob).name()
    finally:
        t.shutdown()
