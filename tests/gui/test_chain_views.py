"""The sampler chain made visible (issue 11): the stage view, the step strip, Sample ×N and
the token stream's colouring modes, alone and in a tab driven by the fake model."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from core.events import StepEvent, TokenProb
from core.options import DecodingOptions
from gui.tabs.speech import SpeechTab
from gui.widgets.stage_view import GONE, KEPT, REMOVED, StageView
from gui.widgets.step_inspector import StepInspector
from gui.widgets.step_strip import STRIP_HEIGHT, StepStrip
from gui.widgets.token_stream import TokenStreamView
from gui.widgets.topk_chart import OTHER, TopKChart, sample_step

from .fakes import WORDS, FakeSpeechModel, make_step

CHAIN = [("repetition_penalty", 1.3), ("temperature", 0.8), ("top_k", 3), ("top_p", 0.9)]


def _stage_view(qtbot) -> StageView:
    view = StageView()
    qtbot.addWidget(view)
    view.resize(600, 300)
    view.show()
    return view


def _row(view: StageView, text: str) -> int:
    return view.candidate_texts().index(text)


# ------------------------------------------------------------------- stage view
def test_stage_view_marks_the_stage_that_removed_each_candidate(qtbot):
    ev = make_step(4, " jump", prob=0.9, chain=CHAIN)
    view = _stage_view(qtbot)
    view.set_step(ev)
    assert not view.showing_message()
    assert view.column_names() == ["raw", "repetition_penalty", "temperature", "top_k", "top_p"]
    assert view.candidate_texts() == [tp.text for tp in ev.stage_candidates]
    probs = {name: st.probs for name, st in zip(view.column_names()[1:], ev.stages)}
    # top-k (3) removes the least probable of the five candidates after temperature
    removed_by_topk = int(np.argmin(probs["temperature"]))
    r = removed_by_topk
    assert view.cell(r, 0).state == KEPT and view.cell(r, 0).prob > 0  # present in the raw column
    assert view.cell_text(r, 0) == f"{ev.stage_candidates[r].prob:.3f}"
    assert view.cell(r, 2).state == KEPT
    assert view.cell(r, 3).state == REMOVED and view.cell_text(r, 3) == "✕"
    assert view.cell(r, 4).state == GONE  # greyed out in the later stages, not "removed" again
    # exactly the candidates top-k and top-p dropped are marked in their columns
    for col, name in ((3, "top_k"), (4, "top_p")):
        before = probs["temperature"] if name == "top_k" else probs["top_k"]
        marked = {i for i in range(len(ev.stage_candidates)) if view.cell(i, col).state == REMOVED}
        assert marked == {i for i in range(len(before)) if before[i] > 0 and probs[name][i] == 0}
    assert any(view.cell(i, 4).state == REMOVED for i in range(len(ev.stage_candidates)))
    # the chosen token survives every stage
    chosen = _row(view, " jump")
    assert all(view.cell(chosen, c).state == KEPT for c in range(5))
    # headers: label, kept and the mass the kept tokens had entering the stage
    top_k = ev.stages[2]
    assert top_k.kept == 3
    assert view.header_text(3) == f"top-k\nkept 3\nmass {top_k.mass:.2f}"
    kept_mass = float(probs["temperature"][probs["top_k"] > 0].sum())
    assert top_k.mass == pytest.approx(kept_mass, abs=1e-6)
    assert "repetition penalty" in view.header_text(1) and "kept 5" in view.header_text(1)
    assert "mass 1.00" in view.header_text(1)
    assert "step 4" in view.title.text() and "jump" in view.title.text()


def test_stage_columns_follow_the_chain_order(qtbot):
    view = _stage_view(qtbot)
    view.set_step(make_step(4, " jump", prob=0.9, chain=[("top_k", 2), ("temperature", 1.5)]))
    assert view.column_names() == ["raw", "top_k", "temperature"]
    assert view.header_text(1).startswith("top-k") and view.header_text(2).startswith("temperature")
    # what top-k removed is gone (not removed again) at temperature
    n = len(view.candidate_texts())
    removed = [i for i in range(n) if view.cell(i, 1).state == REMOVED]
    assert len(removed) == n - 2 and all(view.cell(i, 2).state == GONE for i in removed)
    view.set_step(make_step(5, "s", prob=0.9, chain=[("temperature", 1.5), ("top_k", 2)]))
    assert view.column_names() == ["raw", "temperature", "top_k"]


def test_stage_view_says_so_in_one_line_when_no_stage_ran(qtbot):
    view = _stage_view(qtbot)
    assert view.showing_message() and "click a token" in view.message_text()
    view.set_step(make_step(1, " quick"))  # greedy, no penalties: no stages
    assert view.showing_message()
    assert view.message_text().startswith("No sampler stage ran at step 1")
    assert view.model.rowCount() == 0 and view.model.columnCount() == 0
    view.set_step(make_step(2, " brown", chain=[("temperature", 0.5)]))
    assert not view.showing_message() and view.column_names() == ["raw", "temperature"]


def test_stage_view_rebuilds_only_when_shown(qtbot):
    view = StageView()
    qtbot.addWidget(view)
    ev = make_step(3, " fox", chain=CHAIN)
    view.set_step(ev)  # hidden: nothing is built yet
    assert view.model.step_event() is None and view.step() == 3
    view.show()
    qtbot.waitExposed(view)
    assert view.model.step_event() is ev


# --------------------------------------------------------------------- sampling
def _tail_event() -> StepEvent:
    """A step whose reported top-k holds 0.9 of the processed mass (0.1 in the tail)."""
    topk = [TokenProb(1, " a", 0.5), TokenProb(2, " b", 0.25), TokenProb(3, " c", 0.15)]
    return StepEvent(step=7, token_id=1, text=" a", prob=0.5, raw_prob=0.4, topk=topk, raw_topk=topk, entropy=1.0)


def test_sample_n_matches_the_bars_and_is_seeded(qtbot):
    chart = TopKChart()
    qtbot.addWidget(chart)
    chart.resize(500, 300)
    chart.show()
    ev = _tail_event()
    chart.set_step(ev)
    res = chart.sample(2000, seed=0)
    assert res.n == 2000 and int(res.counts.sum()) == 2000
    assert res.ids == (1, 2, 3, OTHER)
    assert res.expected == pytest.approx([0.5, 0.25, 0.15, 0.1])
    assert np.abs(res.observed - res.expected).max() < 0.035
    # the bars carry the observed shares; the tail is one "other" bar
    rows = chart.rows()
    assert [r.token_id for r in rows][-1] == OTHER
    other = rows[-1]
    assert other.prob == pytest.approx(0.1) and other.observed == pytest.approx(res.observed_of(OTHER))
    for r in rows[:-1]:
        assert r.observed == pytest.approx(res.observed_of(r.token_id))
    chart.grab()  # paints with the outlines
    # the same seed gives the same histogram; another seed another one
    assert np.array_equal(sample_step(ev, 2000, 0).counts, res.counts)
    assert not np.array_equal(sample_step(ev, 2000, 1).counts, res.counts)
    # another step drops the samples
    chart.set_step(make_step(1, " quick"))
    assert chart.samples() is None and all(r.observed is None for r in chart.rows())


def test_sample_button_uses_the_spin_and_the_runs_seed(qtbot):
    chart = TopKChart()
    insp = StepInspector(chart)
    qtbot.addWidget(insp)
    insp.show()
    assert not insp.sample_button.isEnabled()  # nothing to sample yet
    ev = make_step(4, " jump", prob=0.9, chain=CHAIN)
    chart.set_step(ev)
    assert insp.sample_button.isEnabled()
    insp.set_mode("stages")
    assert insp.pages.currentWidget() is insp.stages and insp.stages.step() == 4
    insp.set_seed(123)
    insp.sample_spin.setValue(2000)
    qtbot.mouseClick(insp.sample_button, Qt.MouseButton.LeftButton)
    res = chart.samples()
    assert res is not None and res.n == 2000 and res.seed == 123
    assert insp.mode() == "topk"  # sampling shows the chart it draws on
    assert np.array_equal(res.counts, sample_step(ev, 2000, 123).counts)
    # the processed distribution of the fake is exactly its top-k: nothing in the tail
    assert res.expected_of(OTHER) == pytest.approx(0.0, abs=1e-6)
    for tp in ev.topk:
        assert abs(res.observed_of(tp.id) - tp.prob) < 0.035
    assert "1 − Σ top-k" in insp.sample_button.toolTip()


# ------------------------------------------------------------------------ strip
def test_strip_plots_one_point_per_step_and_marks_the_selection(qtbot):
    strip = StepStrip()
    qtbot.addWidget(strip)
    strip.resize(800, 64)
    strip.show()
    events = [make_step(i, WORDS[i], chain=CHAIN, mu=10.0 - i) for i in range(len(WORDS))]
    strip.append_steps(events[:4])  # two frames' batches
    strip.append_steps(events[4:])
    n = len(WORDS)
    assert strip.point_count() == n
    # the curves are redrawn once for both batches, a moment later (not per batch)
    x, _y = strip.curves["entropy"].getData()
    assert x is None or len(x) == 0
    qtbot.waitUntil(lambda: strip.curves["entropy"].getData()[0] is not None
                    and len(strip.curves["entropy"].getData()[0]) == n, timeout=1000)
    for name in ("entropy", "varentropy", "kept", "mu"):
        assert strip.curve_points(name) == n
    steps, h = strip.series("entropy")
    assert list(steps) == list(range(n)) and np.allclose(h, [ev.raw_entropy for ev in events])
    assert np.allclose(strip.series("kept")[1], [ev.kept for ev in events])
    assert np.allclose(strip.series("mu")[1], [ev.mu for ev in events])
    assert strip.marked_step() is None
    strip.select_step(3)
    assert strip.marked_step() == 3 and "step 3" in strip.legend_text()
    strip.select_step(8)
    assert strip.marked_step() == 8
    strip.clear()
    assert strip.point_count() == 0 and strip.curve_points("entropy") == 0 and strip.marked_step() is None


def test_strip_without_chain_or_mirostat_hides_those_curves(qtbot):
    strip = StepStrip()
    qtbot.addWidget(strip)
    strip.show()
    strip.append_steps([make_step(i, WORDS[i]) for i in range(5)])
    assert strip.point_count() == 5
    strip.flush()
    assert strip.curves["entropy"].isVisible() and not strip.curves["kept"].isVisible()
    assert not strip.curves["mu"].isVisible()
    assert "kept" not in strip.legend_text() and "μ" not in strip.legend_text()


# ----------------------------------------------------------------- colour modes
def test_colour_modes_change_chip_colours_and_the_legend(qtbot):
    view = TokenStreamView()
    qtbot.addWidget(view)
    view.show()
    view.append_steps([
        make_step(0, " The", prob=0.5, rank=1, raw_entropy=0.2),
        make_step(1, " quick", prob=0.5, rank=500, raw_entropy=0.2),
        make_step(2, " brown", prob=0.5, rank=1, raw_entropy=3.5),
    ])
    color = view.flow.chip_color
    assert view.color_mode() == "probability"
    legends = {"probability": view.legend.text()}
    assert color(0) == color(1) == color(2)  # equal probabilities
    view.set_color_mode("rank")
    legends["rank"] = view.legend.text()
    assert color(0) != color(1)  # rank 1 vs rank 500
    assert color(0) == color(2)  # same rank, whatever the entropy
    assert view.color_combo.currentData() == "rank"
    # the combo box drives the mode too
    view.color_combo.setCurrentIndex(view.color_combo.findData("entropy"))
    assert view.color_mode() == "entropy"
    legends["entropy"] = view.legend.text()
    assert color(0) != color(2)  # equal probability and rank, different entropy
    assert color(0) == color(1)
    assert len(set(legends.values())) == 3
    assert "top-1" in legends["rank"] and "nats" in legends["entropy"]
    view.grab()  # each legend paints
    with pytest.raises(ValueError):
        view.set_color_mode("loudness")


# --------------------------------------------------------------------- in a tab
@pytest.fixture
def tab(qtbot):
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.options_panel._timer.setInterval(20)
    yield t
    t.shutdown()


def _decode(qtbot, tab, action, timeout=5000):
    with qtbot.waitSignal(tab.decodeFinished, timeout=timeout) as blocker:
        action()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=timeout)
    return blocker.args[0]


def _tone(seconds=1.0):
    t = np.arange(int(16000 * seconds), dtype=np.float32) / 16000
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_tab_shows_the_chain_strip_and_samples(qtbot, tab):
    opts = DecodingOptions(strategy="sample", temperature=0.8, top_k=3, top_p=0.9, repetition_penalty=1.3, seed=7)
    tab.options_panel.setOptions(opts)
    tab.model = FakeSpeechModel()
    _decode(qtbot, tab, lambda: tab.set_audio(_tone(), "tone"))
    n = len(WORDS)
    assert tab.strip.isVisible() and tab.strip.point_count() == n and tab.strip.curve_points("kept") == n
    assert tab.strip.marked_step() is None  # following the newest step
    tab.inspector.set_mode("stages")
    assert tab.stages.step() == n - 1
    tab.select_step(4)
    assert tab.strip.marked_step() == 4 and tab.stages.step() == 4 and tab.topk.step() == 4
    assert tab.stages.column_names() == ["raw", "repetition_penalty", "temperature", "top_k", "top_p"]
    # clicking the strip selects the step under the mouse
    vb = tab.strip.plot.getPlotItem().vb
    scene = vb.mapViewToScene(QPointF(7.2, 0.5))
    pos = tab.strip.plot.mapFromScene(scene)
    qtbot.mouseClick(tab.strip.plot.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert tab.selected_step() == 7 and tab.strip.marked_step() == 7 and tab.stages.step() == 7
    assert tab.stream.flow.selected_step() == 7
    # Sample ×N uses the run's seed
    tab.inspector.sample_spin.setValue(500)
    res = tab.inspector.sample()
    assert res.seed == 7 and res.step == 7 and res.n == 500
    tab.follow_newest()
    assert tab.strip.marked_step() is None
    # the strip can be hidden, and a new run clears it before refilling it
    tab.stream.set_strip_visible(False)
    assert not tab.strip.isVisible()
    tab.stream.set_strip_visible(True)
    assert tab.strip.isVisible()


def test_reordering_the_chain_reorders_the_stage_columns(qtbot, tab):
    opts = DecodingOptions(strategy="sample", temperature=0.8, top_k=3, top_p=0.9)
    tab.options_panel.setOptions(opts)
    tab.model = FakeSpeechModel()
    _decode(qtbot, tab, lambda: tab.set_audio(_tone(), "tone"))
    tab.select_step(2)
    tab.inspector.set_mode("stages")
    assert tab.stages.column_names() == ["raw", "temperature", "top_k", "top_p"]
    order = ("top_p", "top_k", "temperature") + tuple(s for s in opts.sampler_order
                                                      if s not in ("top_p", "top_k", "temperature"))
    _decode(qtbot, tab, lambda: tab.options_panel.setOptions(opts.with_(sampler_order=order), emit=True))
    assert tab.selected_step() == 2 and tab.stages.step() == 2
    assert tab.stages.column_names() == ["raw", "top_p", "top_k", "temperature"]
    assert tab.strip.point_count() == len(WORDS)  # the new run's steps, not both runs'
    # greedy: no warper runs, the stage view says so
    _decode(qtbot, tab, lambda: tab.options_panel.setOptions(opts.with_(strategy="greedy"), emit=True))
    assert tab.stages.showing_message() and "No sampler stage ran at step 2" in tab.stages.message_text()
    assert tab.strip.point_count() == len(WORDS)


def test_moving_a_stage_in_the_panel_redecodes_and_reorders_the_stage_view(qtbot, tab):
    """The user's path: select top-k in the chain list, Alt+Up past temperature; the
    debounced re-decode runs and the selected step's stage columns follow."""
    opts = DecodingOptions(strategy="sample", temperature=0.8, top_k=3)
    tab.options_panel.setOptions(opts)
    tab.model = FakeSpeechModel()
    _decode(qtbot, tab, lambda: tab.set_audio(_tone(), "tone"))
    tab.select_step(1)
    tab.inspector.set_mode("stages")
    assert tab.stages.column_names() == ["raw", "temperature", "top_k"]
    chain = tab.options_panel.chain
    chain.list.setCurrentItem(chain.stage_item("top_k"))
    steps_up = chain.row_of("top_k") - chain.row_of("temperature")
    assert steps_up > 0

    def move_up():
        for _ in range(steps_up):
            qtbot.keyClick(chain.list, Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)

    _decode(qtbot, tab, move_up)
    assert tab.stages.column_names() == ["raw", "top_k", "temperature"]
    assert tab.stages.step() == 1


# ----------------------------------------------------------------------- layout
def test_strip_shrinks_before_the_chips(qtbot):
    view = TokenStreamView()
    strip = StepStrip()
    view.set_strip(strip)
    qtbot.addWidget(view)
    view.show()
    base = TokenStreamView()  # the same stream without a strip
    qtbot.addWidget(base)
    assert view.minimumSizeHint().height() == base.minimumSizeHint().height()
    rows = view.flow.rows_height(3)
    view.resize(900, view.minimumSizeHint().height())
    qtbot.wait(10)
    assert view.scroll.viewport().height() >= rows and strip.height() <= 5
    view.resize(900, view.minimumSizeHint().height() + STRIP_HEIGHT + 40)
    qtbot.wait(10)
    assert strip.height() == STRIP_HEIGHT and view.scroll.viewport().height() >= rows


def test_every_tab_has_room_for_the_strip_at_1280x800(qtbot, settings):
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    for tab in (w.speech_tab, w.ocr_tab, w.translation_tab):
        w.tabs.setCurrentWidget(tab)
        qtbot.wait(20)
        assert tab.strip.isVisible() and tab.strip.height() >= STRIP_HEIGHT - 4, (tab.title, tab.strip.height())
        assert tab.stream.scroll.viewport().height() >= tab.stream.flow.rows_height(3)
        assert tab.inspector.height() >= tab.inspector.minimumSizeHint().height()
