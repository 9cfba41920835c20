"""Views built from events (napari test_qt_dims style): build, change, assert."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from core.events import SegmentEvent, StepEvent, TokenProb
from core.options import DecodingOptions
from gui.widgets.attention_heatmap import AttentionHeatmap, reduce_attention
from gui.widgets.colors import prob_color
from gui.widgets.options_panel import OptionsPanel
from gui.widgets.token_flow import format_tooltip
from gui.widgets.token_stream import TokenStreamView
from gui.widgets.token_text import display_text
from gui.widgets.topk_chart import TopKChart, rows_for

from .fakes import WORDS, make_step


# ------------------------------------------------------------------ options panel
def test_options_panel_emits_validated_options_once_after_debounce(qtbot):
    panel = OptionsPanel(debounce_ms=100)
    qtbot.addWidget(panel)
    got = []
    panel.optionsChanged.connect(got.append)
    panel.strategy_buttons["sample"].setChecked(True)
    panel.controls["temperature"].slider.setValue(panel.controls["temperature"].slider.value() + 4)  # +0.20
    panel.controls["top_k"].setValue(40)
    panel.controls["top_p"].spin.setValue(0.9)
    assert got == []  # debounced: nothing yet
    qtbot.waitUntil(lambda: len(got) == 1, timeout=2000)
    qtbot.wait(250)
    assert len(got) == 1  # one emission for a burst of changes
    opts = got[0]
    assert isinstance(opts, DecodingOptions)
    assert opts.strategy == "sample"
    assert opts.temperature == pytest.approx(1.2)
    assert opts.top_k == 40 and opts.top_p == pytest.approx(0.9)
    assert opts.validate() is opts


def test_options_panel_disables_irrelevant_controls_but_keeps_values(qtbot):
    panel = OptionsPanel(DecodingOptions(strategy="sample", temperature=0.7, top_k=5, num_beams=3))
    qtbot.addWidget(panel)
    assert panel.controls["temperature"].isEnabled()
    assert not panel.controls["num_beams"].isEnabled()
    panel.strategy_buttons["greedy"].setChecked(True)
    for f in ("temperature", "top_k", "top_p", "num_beams", "length_penalty"):
        assert not panel.controls[f].isEnabled(), f
    assert not panel.seed_spin.isEnabled()
    assert panel.controls["max_new_tokens"].isEnabled()
    panel.strategy_buttons["beam"].setChecked(True)
    assert panel.controls["num_beams"].isEnabled() and not panel.controls["temperature"].isEnabled()
    o = panel.options()
    assert (o.strategy, o.temperature, o.top_k, o.num_beams) == ("beam", 0.7, 5, 3)


def test_slider_and_spin_stay_in_sync(qtbot):
    panel = OptionsPanel()
    qtbot.addWidget(panel)
    ctl = panel.controls["top_p"]
    ctl.spin.setValue(0.5)
    assert ctl.slider.value() == round((0.5 - 0.05) / 0.01)
    ctl.slider.setValue(ctl.slider.maximum())
    assert ctl.value() == pytest.approx(1.0)


def test_set_options_rejects_invalid(qtbot):
    panel = OptionsPanel()
    qtbot.addWidget(panel)
    with pytest.raises(ValueError, match="temperature"):
        panel.setOptions(DecodingOptions(temperature=0.0))


# ------------------------------------------------------------------ token stream
def _events(n=len(WORDS), **kw):
    return [make_step(i, WORDS[i], **kw) for i in range(n)]


def test_token_stream_shows_text_and_selection_works(qtbot):
    view = TokenStreamView()
    qtbot.addWidget(view)
    view.resize(600, 200)
    view.show()
    view.handle(SegmentEvent(0, "0.0–3.0 s"))
    for ev in _events():
        view.handle(ev)
    assert view.token_count() == len(WORDS)
    assert view.text() == "".join(WORDS).strip()
    r = view.flow.chip_rect(3)
    assert r is not None and r.width() > 0
    with qtbot.waitSignal(view.stepSelected, timeout=1000) as blocker:
        qtbot.mouseClick(view.flow, Qt.MouseButton.LeftButton, pos=r.center())
    assert blocker.args == [3]
    assert view.flow.selected_step() == 3
    # chips do not overlap and wrap inside the width
    rects = [view.flow.chip_rect(i) for i in range(len(WORDS))]
    for a, b in zip(rects, rects[1:]):
        assert not a.intersects(b)
    assert all(rc.right() <= view.flow.width() for rc in rects)


def test_token_chip_colour_follows_probability():
    assert prob_color(0.0).name() != prob_color(1.0).name()
    assert prob_color(1.0).green() > 200  # viridis ends yellow
    assert prob_color(0.0).blue() > prob_color(0.0).green()  # and starts dark purple


def test_tooltip_lists_probability_and_alternatives():
    ev = make_step(2, " brown", prob=0.6)
    tip = format_tooltip(ev)
    assert "0.600" in tip and "' cat'" in tip


def test_display_text_makes_whitespace_visible():
    assert display_text(" fox") == "fox"
    assert display_text(" ") == "␣"
    assert display_text("\n") == "↵"


def test_beam_events_listed(qtbot):
    from core.events import BeamEvent, Hypothesis

    view = TokenStreamView()
    qtbot.addWidget(view)
    view.handle(BeamEvent(step=0, beams=[Hypothesis([1], " The", -0.1), Hypothesis([2], " A", -1.3)]))
    assert view.beams.count() == 2 and not view.beams.isHidden()
    assert "The" in view.beams.item(0).text()


# ------------------------------------------------------------------ top-k
def test_topk_rows_show_filtered_and_raw():
    ev = make_step(0, " The", prob=0.7)
    rows = rows_for(ev)
    chosen = [r for r in rows if r.chosen]
    assert len(chosen) == 1 and chosen[0].prob == pytest.approx(0.7)
    cut = [r for r in rows if r.text == "!"]  # in the raw top-k only: cut by the filters
    assert cut and cut[0].prob == 0.0 and cut[0].raw_prob == pytest.approx(0.1)
    assert [r.prob for r in rows if r.prob > 0] == sorted([r.prob for r in rows if r.prob > 0], reverse=True)


def test_topk_chart_paints(qtbot):
    chart = TopKChart()
    qtbot.addWidget(chart)
    chart.resize(400, 250)
    chart.set_step(make_step(1, " quick"))
    assert chart.step() == 1 and len(chart.rows()) >= 2
    img = chart.grab().toImage()
    assert not img.isNull()


# ------------------------------------------------------------------ heatmap
def test_reduce_attention_normalises_rows():
    att = np.zeros((2, 2, 5), np.float32)
    att[0, 0, 1] = 0.5
    att[1, 1, 3] = 0.25
    avg = reduce_attention(att, None, None)
    assert avg.max() == pytest.approx(1.0) and avg.argmax() == 1
    assert reduce_attention(att, 1, 1).argmax() == 3
    assert not reduce_attention(np.zeros((1, 1, 4), np.float32), None, None).any()


def test_heatmap_one_row_per_token_and_columns(qtbot):
    hm = AttentionHeatmap()
    qtbot.addWidget(hm)
    hm.set_columns("time (s)", 0.02, n_columns=40)
    hm.handle(SegmentEvent(0, "w", source_offset=0, source_len=50))
    evs = _events(6, n_frames=50)
    for i, ev in enumerate(evs):
        hm.handle(ev)
        assert hm.row_count() == i + 1  # grows one row per token
    assert hm.column_count() == 50
    m = hm.matrix()
    assert m.shape == (6, 50)
    np.testing.assert_allclose(m.max(axis=1), 1.0)
    assert m.min() >= 0
    # peaks move right (the fake's attention follows the tokens)
    assert list(m.argmax(axis=1)) == [min(49, 3 * i) for i in range(6)]
    # layer/head pickers list the model's layers and heads; choosing one changes the image
    assert hm.layer_combo.count() == 1 + 2 and hm.head_combo.count() == 1 + 3
    before = hm.matrix()
    hm.layer_combo.setCurrentIndex(2)
    hm.head_combo.setCurrentIndex(1)
    assert hm.selection() == (1, 0)
    expected = reduce_attention(evs[4].cross_attention, 1, 0)
    np.testing.assert_allclose(hm.matrix()[4], expected, rtol=1e-6)
    assert not np.allclose(before, hm.matrix())
    hm.select_step(2)
    assert hm.highlight.isVisible() and hm.highlight.rect().top() == 2


def test_heatmap_places_segments_at_their_offset(qtbot):
    hm = AttentionHeatmap()
    qtbot.addWidget(hm)
    hm.handle(make_step(0, " a", n_frames=10, offset=0))
    hm.handle(make_step(1, " b", n_frames=10, offset=1500))
    assert hm.column_count() == 1510
    assert hm.matrix()[1, :1500].max() == 0 and hm.matrix()[1, 1500:].max() == 1.0


def test_heatmap_string_columns(qtbot):
    hm = AttentionHeatmap()
    qtbot.addWidget(hm)
    hm.set_columns("source token", 1.0, labels=["▁Hello", "▁world", "</s>"])
    assert hm.column_count() == 3


def test_heatmap_reset_columns_shrinks_to_the_new_input(qtbot):
    hm = AttentionHeatmap()
    qtbot.addWidget(hm)
    hm.set_columns("source token", 1.0, labels=["a", "b", "c", "d", "e"])
    hm.handle(make_step(0, " a", n_frames=5))
    hm.layer_combo.setCurrentIndex(2)  # layer 1
    assert hm.column_count() == 5 and hm.row_count() == 1
    hm.set_columns("source token", 1.0, labels=["x", "y"])
    assert hm.column_count() == 5  # set_columns only grows
    hm.reset_columns("source token", 1.0, labels=["x", "y"])
    assert hm.column_count() == 2 and hm.row_count() == 0 and hm.matrix().shape == (0, 2)
    assert hm.selection() == (1, None)  # the layer/head choice survives
    ev = make_step(0, " x", n_frames=2)
    hm.handle(ev)
    np.testing.assert_allclose(hm.matrix()[0], reduce_attention(ev.cross_attention, 1, None), rtol=1e-6)
    assert hm.row_of(0) == 0 and hm.step_at_row(0) == 0 and hm.step_at_row(1) is None and hm.row_of(7) is None


def _many_segments(view, n_segments=6, per_segment=8):
    step = 0
    for s in range(n_segments):
        view.handle(SegmentEvent(s, f"line {s + 1}"))
        for i in range(per_segment):
            view.handle(make_step(step, WORDS[i % len(WORDS)]))
            step += 1
    return step


def test_token_stream_shows_three_rows_and_follows_the_newest_chip(qtbot):
    view = TokenStreamView()
    qtbot.addWidget(view)
    view.resize(500, 10)
    view.show()
    fm_rows = view.flow.rows_height(3)
    assert view.scroll.viewport().height() >= fm_rows  # ~3 chip rows even when squeezed
    n = _many_segments(view)
    assert view.flow.minimumHeight() > view.scroll.viewport().height()  # it does scroll
    assert view.chip_visible(n - 1) and not view.chip_visible(0)


def test_token_stream_scrolls_the_selected_chip_into_view(qtbot):
    view = TokenStreamView()
    qtbot.addWidget(view)
    view.resize(500, 160)
    view.show()
    n = _many_segments(view)
    view.select_step(0)
    assert view.chip_visible(0) and not view.chip_visible(n - 1)
    view.select_step(n - 9)
    assert view.chip_visible(n - 9)
    # with a selection, new chips do not drag the view away from it
    view.select_step(1)
    view.handle(make_step(n, " more"))
    assert view.chip_visible(1) and not view.chip_visible(n)


def test_segment_label_shares_the_row_of_its_tokens(qtbot):
    view = TokenStreamView()
    qtbot.addWidget(view)
    view.resize(600, 200)
    view.show()
    view.handle(SegmentEvent(0, "sentence 1"))
    view.handle(make_step(0, " Hello"))
    label = next(it for it in view.flow._items if it.kind == "segment")
    chip = view.flow.chip_rect(0)
    assert label.rect.top() == chip.top() and label.rect.right() < chip.left()


def test_topk_rows_skip_zero_probability_processed_entries():
    """A processed top-k padded with probability-0 ids (a filter kept one token) shows the
    real raw runners-up, not 'cut (raw 0.000)' rows of arbitrary ids."""
    from core.events import TokenProb

    ev = StepEvent(
        step=0, token_id=5, text=" yes", prob=1.0, raw_prob=0.6,
        topk=[TokenProb(5, " yes", 1.0), TokenProb(90, ",", 0.0), TokenProb(91, ".", 0.0)],
        raw_topk=[TokenProb(5, " yes", 0.6), TokenProb(6, " no", 0.3), TokenProb(7, " maybe", 0.1)],
        entropy=0.0,
    )
    rows = rows_for(ev)
    assert [r.token_id for r in rows] == [5, 6, 7]
    assert [r.raw_prob for r in rows] == pytest.approx([0.6, 0.3, 0.1])


def test_waveform_envelope_keeps_peaks_and_bounds_points():
    from gui.widgets.waveform import envelope

    audio = np.zeros(16000 * 600, np.float32)  # 10 minutes
    audio[123_457] = 0.9
    audio[5_000_001] = -0.7
    t, y = envelope(audio, 16000, max_points=4000)
    assert len(t) == len(y) <= 4000
    assert y.max() == pytest.approx(0.9) and y.min() == pytest.approx(-0.7)
    assert t[0] == 0.0 and t[-1] <= 600.0 and np.all(np.diff(t) >= 0)
    short = np.linspace(-1, 1, 100, dtype=np.float32)
    t2, y2 = envelope(short, 16000)
    assert np.array_equal(y2, short) and t2[1] == pytest.approx(1 / 16000)
    with pytest.raises(ValueError):
        envelope(np.zeros((2, 2), np.float32), 16000)


def test_heatmap_column_separators_are_one_item(qtbot):
    hm = AttentionHeatmap()
    qtbot.addWidget(hm)
    items_before = len(hm.plot.items)
    hm.set_column_separators(list(range(0, 30000, 18)))  # ~1,660 sentences
    assert hm.column_separators()[:3] == [0, 18, 36]
    assert len(hm.plot.items) == items_before  # one curve for all, not an item per line
    x, y = hm.separators.getData()
    assert len(x) == 2 * len(hm.column_separators()) and x[2] == 18.0
    hm.set_column_separators([])
    xs = hm.separators.getData()[0]
    assert hm.column_separators() == [] and (xs is None or len(xs) == 0)


# --------------------------------------------------- public API the tabs use
def test_heatmap_view_separators_marks_and_hover(qtbot):
    """What the tabs ask of the heatmap: a default view for a new model, row separators
    (OCR lines), marked columns (Translation's hover) and the row under the mouse."""
    from PySide6.QtCore import QPointF

    hm = AttentionHeatmap()
    qtbot.addWidget(hm)
    hm.resize(600, 400)
    hm.show()
    changed, hovered = [], []
    hm.viewChanged.connect(lambda: changed.append(hm.selection()))
    hm.rowHovered.connect(hovered.append)
    hm.set_view(1, 0, note="alignment view", tip="why", shape=(2, 3))  # before any row: the pickers fill first
    assert hm.layer_combo.count() == 1 + 2 and hm.head_combo.count() == 1 + 3
    assert hm.selection() == (1, 0) and changed[-1] == (1, 0)
    assert hm.info.text() == "alignment view" and hm.info.toolTip() == "why"
    hm.set_view(None, None)
    assert hm.selection() == (None, None) and hm.info.text() == "alignment view"  # note kept
    for i in range(4):
        hm.handle(make_step(i, WORDS[i], n_frames=20))
    hm.set_row_separators([2])
    hm.add_row_separator(3)
    assert hm.row_separators() == [2, 3]
    hm.set_row_separators([])
    assert hm.row_separators() == []
    n_items = len(hm.plot.items)
    hm.mark_columns(1, [4, 5])
    assert len(hm.plot.items) == n_items + 4  # a band and a box per column
    hm.mark_columns(None, [])
    assert len(hm.plot.items) == n_items
    vb = hm.plot.vb
    hm.plot.scene().sigMouseMoved.emit(vb.mapViewToScene(QPointF(3.0, 2.5)))
    assert hovered[-1] == hm.step_at_row(2) == 2
    hm.plot.scene().sigMouseMoved.emit(QPointF(-50.0, -50.0))
    assert hovered[-1] is None


def test_heatmap_thins_crowded_column_labels(qtbot):
    hm = AttentionHeatmap()
    qtbot.addWidget(hm)
    hm.resize(500, 300)
    hm.show()
    labels = [f"▁token{i}" for i in range(200)]
    hm.set_columns("source token", 1.0, labels=labels)
    ticks = hm.plot.getAxis("bottom")._tickLevels[0]
    assert 1 < len(ticks) < len(labels) and ticks[0] == (0.5, labels[0])
    hm.set_columns("source token", 1.0, labels=labels[:3])
    assert [t for _, t in hm.plot.getAxis("bottom")._tickLevels[0]] == labels[:3]


def test_token_stream_reports_the_hovered_step_and_segment_labels(qtbot):
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    view = TokenStreamView()
    qtbot.addWidget(view)
    view.resize(600, 200)
    view.show()
    view.handle(SegmentEvent(0, "sentence 1"))
    view.append_steps([make_step(i, w) for i, w in enumerate(WORDS[:4])])
    view.handle(SegmentEvent(1, "sentence 2"))
    view.handle(make_step(4, WORDS[4]))
    assert view.segment_labels() == ["sentence 1", "sentence 2"]
    hovered = []
    view.stepHovered.connect(hovered.append)
    qtbot.mouseMove(view.flow, view.flow.chip_rect(2).center())
    assert hovered[-1] == 2
    QApplication.sendEvent(view.flow, QEvent(QEvent.Type.Leave))
    assert hovered[-1] is None


def test_windowed_heatmap_redraws_when_the_shown_segment_widens(qtbot):
    """A segment whose attention rows get longer than its first ones (no SegmentEvent gave
    its length) is redrawn at the wider span instead of failing to append."""
    hm = AttentionHeatmap()
    qtbot.addWidget(hm)

    def step(i, seg, n):
        att = np.ones((1, 1, n), np.float32)
        return StepEvent(step=i, token_id=1, text="x", prob=0.5, raw_prob=0.5, topk=[], raw_topk=[], entropy=0.0,
                         cross_attention=att, segment=seg, source_offset=seg * 4000)

    hm.append_steps([step(0, 0, 3500)])  # > MAX_COLUMNS: windowed
    hm.append_steps([step(1, 1, 100)])
    hm.append_steps([step(2, 1, 300)])  # the shown segment widens
    assert hm.windowed() and hm.shown_segment() == 1
    assert hm.matrix().shape == (2, 300) and hm.column_offset() == 4000
