"""The live beam tree (gui/widgets/beam_tree.py): built from BeamEvents with known nodes, in
batches, clicked; in a tab with the fake model; on the real Bergamot en-pt model."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsItem

from core.events import BeamEvent, BeamNode, BeamRowReport, SegmentEvent, TokenProb
from core.options import DecodingOptions
from gui.tabs.speech import SpeechTab
from gui.widgets import beam_tree as bt
from gui.widgets.beam_tree import BEST_COLOR, STATUS_STYLE, BeamTreeView

from .fakes import EOS_ID, VOCAB, WORDS, FakeSpeechModel, fake_beam_events


@pytest.fixture
def view(qtbot):
    v = BeamTreeView()
    qtbot.addWidget(v)
    v.resize(1000, 360)
    v.show()
    return v


def _all_nodes(events):
    out = {}
    for ev in events:
        for n in ev.nodes:
            out[(ev.segment, n.id)] = n
    return out


def _tiny_events():
    """A hand-made 2-beam search over two steps: every status, a finished node, known rows."""
    root = BeamNode(0, None, -1, 1, "", 0.0, 0.0, 0.0, "alive", 0)
    att0 = np.array([0.1, 0.7, 0.2], np.float32)
    s0 = [
        root,
        BeamNode(1, 0, 0, 10, " A", -0.1, -0.1, -0.1, "alive", 0),
        BeamNode(2, 0, 0, 11, " B", -0.5, -0.5, -0.5, "alive", 0),
        BeamNode(3, 0, 0, EOS_ID, "</s>", -2.0, -2.0, -2.0, "pruned", 0, 0, True),
        BeamNode(4, 0, 0, 12, " C", -2.5, -2.5, -2.5, "pruned", 0),
    ]
    rows0 = [BeamRowReport(0, [TokenProb(10, " A", 0.9), TokenProb(11, " B", 0.6)], 0.4, att0),
             BeamRowReport(1, [TokenProb(10, " A", 0.9)], 0.4, att0)]
    att1 = [np.array([0.0, 0.2, 0.8], np.float32), np.array([0.6, 0.3, 0.1], np.float32)]
    s1 = [
        BeamNode(5, 1, 1, EOS_ID, "</s>", -0.2, -0.3, -0.15, "finished", 0, 0, True),
        BeamNode(6, 1, 1, 13, " dog", -0.4, -0.5, -0.25, "alive", 0),
        BeamNode(7, 2, 1, 14, " cat", -0.3, -0.8, -0.4, "alive", 1),
        BeamNode(8, 2, 1, 15, " box", -1.9, -2.4, -1.2, "pruned", 1),
    ]
    rows1 = [BeamRowReport(0, [TokenProb(EOS_ID, "</s>", 0.82), TokenProb(13, " dog", 0.67)], 0.5, att1[0]),
             BeamRowReport(1, [TokenProb(14, " cat", 0.74), TokenProb(15, " box", 0.15)], 0.6, att1[1])]
    return [BeamEvent(0, [], nodes=s0, rows=rows0, best=1), BeamEvent(1, [], nodes=s1, rows=rows1, best=5)]


# ---------------------------------------------------------------------- the widget
def test_nodes_edges_and_statuses_drawn_distinctly(qtbot, view):
    events = _tiny_events()
    view.add_events(events)
    nodes = view.nodes()
    assert [n.id for n in nodes] == list(range(9)) and view.model.nodes[(0, 5)].status == "finished"
    assert view.edge_count() == 8  # one per node but the root
    looks = {}
    for n in nodes[1:]:
        item = view.node_item(n.id)
        assert item.status == n.status
        looks.setdefault(n.status, set()).add((item.shape_name, item.color.name(), item.radius))
    assert set(looks) == {"alive", "pruned", "finished"}
    assert all(len(v) == 1 for v in looks.values())  # one look per status
    alive, pruned, finished = (next(iter(looks[s])) for s in ("alive", "pruned", "finished"))
    assert len({alive[0], pruned[0], finished[0]}) == 3  # told apart by shape alone, too
    assert pruned[2] < alive[2] and QColor(pruned[1]).saturation() == 0  # pruned: small and grey
    # each node is labelled with its token; two columns right of the root
    assert view.node_item(7).text == "cat" and view.node_item(3).text == "</s>"
    xs = {n.step: view.node_item(n.id).pos().x() for n in nodes}
    assert xs[-1] < xs[0] < xs[1]
    assert view.count_label.text() == "8 nodes · 2 steps"
    view.grab()  # paints (labels at 1:1, markers only when zoomed out)
    view.fit()
    assert view.zoom_level() == 1.0  # fits already: not blown up
    view.grab()


def test_best_path_dashed_while_running_then_solid_and_equal_to_the_output(qtbot, view):
    events = fake_beam_events(WORDS, 3)
    view.add_events(events[:5])
    best_so_far = events[4].best
    assert view.highlighted_path() == view.path(0, best_so_far) and view.highlight_is_dashed()
    assert not view.is_final() and view.output_steps() == {}
    view.add_events(events[5:])
    assert view.highlight_is_dashed()  # the search may still go on until the run finishes
    view.finish()
    best = events[-1].best
    assert view.is_final() and not view.highlight_is_dashed() and view.best_node() == best
    path = view.highlighted_path()
    assert path == view.path(0, best)
    tokens = [view.model.nodes[(0, i)] for i in path[1:]]
    assert [n.token for n in tokens if not n.eos] == [VOCAB[w] for w in WORDS]  # the output
    assert tokens[-1].eos and view.node_item(best).best
    assert view.node_item(best).pen_color() == QColor(BEST_COLOR)
    assert view.output_steps() == {n.step: n.id for n in tokens if not n.eos}


def test_clicking_a_node_shows_its_text_topk_and_attention(qtbot, view):
    events = _tiny_events()
    view.add_events(events)
    view.finish()
    got = []
    view.stepSelected.connect(got.append)
    # a pruned node of the second row: its hypothesis, its row's top-k and attention
    qtbot.mouseClick(view.view.viewport(), Qt.MouseButton.LeftButton, pos=view.viewport_pos(8))
    assert view.selected_node() == (0, 8)
    assert view.hypothesis_shown() == "B box" == view.hypothesis(0, 8)
    shown = view.topk.event_shown()
    assert shown.step == 1 and shown.token_id == 15
    assert [(r.text, round(r.prob, 2), r.chosen) for r in view.topk.rows()] == [(" cat", 0.74, False),
                                                                                 (" box", 0.15, True)]
    np.testing.assert_array_equal(view.attention.row(), events[1].rows[1].attention)
    assert view.attention.peak_text().endswith("column 0")  # row 1's attention peaks at column 0
    assert "pruned" in view.info_label.text() and "score -2.400" in view.info_label.text()
    assert got == []  # not on the output path: the token stream keeps its selection
    # a node on the output path selects its step
    qtbot.mouseClick(view.view.viewport(), Qt.MouseButton.LeftButton, pos=view.viewport_pos(1))
    assert view.selected_node() == (0, 1) and got == [0]
    assert view.hypothesis_shown() == "A"
    np.testing.assert_array_equal(view.attention.row(), events[0].rows[0].attention)
    # the EOS that ended the output is on the path, but no token of the stream
    qtbot.mouseClick(view.view.viewport(), Qt.MouseButton.LeftButton, pos=view.viewport_pos(5))
    assert view.selected_node() == (0, 5) and got == [0] and "best: the output" in view.info_label.text()
    # the stream selecting a step selects the output's node there
    view.select_step(0)
    assert view.selected_node() == (0, 1)
    view.select_step(None)
    assert view.selected_node() is None and view.topk.event_shown() is None


def test_attention_peak_is_named_by_the_tabs_columns(qtbot, view):
    view.column_axis = lambda: (["▁Hello", "▁world", "</s>", "▁Bye", "</s>"], "source token", 1.0)
    view.handle_segment(SegmentEvent(segment=0, label="sentence 1", source_offset=2))
    view.add_events(_tiny_events())
    view.select_node(6)  # row 0 at step 1: peak at its column 2 = the input's column 4
    assert view.attention.peak_text().endswith("'</s>'")
    view.column_axis = lambda: (None, "time (s)", 0.02)
    view.select_node(7)
    assert view.attention.peak_text().endswith("0.04 (column 2)")  # row 1 peaks at its column 0
    # encoder positions past the input's end (a short clip in a 30 s window) are left out
    view.column_count = lambda: 4
    view.select_node(7)
    np.testing.assert_array_equal(view.attention.row(), np.float32([0.6, 0.3]))


def test_batches_add_only_their_own_nodes(qtbot, view, monkeypatch):
    """8 beams x 200 steps (3200 nodes) arriving a few steps per frame: each batch creates
    and places exactly its new nodes; nothing drawn before is laid out again."""
    words = [WORDS[i % len(WORDS)] for i in range(199)]
    events = fake_beam_events(words, 8, early_eos_step=None)
    assert len(events) == 200 and sum(len(ev.nodes) for ev in events) > 3000
    made, placed = [], []
    original_init = bt.NodeItem.__init__

    def counting_init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        made.append(args[0])

    monkeypatch.setattr(bt.NodeItem, "__init__", counting_init)
    monkeypatch.setattr(bt.NodeItem, "setPos", lambda self, *a: (placed.append(self.node_id),
                                                                 QGraphicsItem.setPos(self, *a)))
    seen = 0
    for k in range(0, len(events), 6):
        batch = events[k:k + 6]
        made.clear()
        placed.clear()
        view.add_events(batch)
        new = [n.id for ev in batch for n in ev.nodes]
        assert sorted(made) == sorted(new)
        assert set(placed) - {0} == set(new) - {0} and len(placed) <= len(new) + 1  # + the root, once
        seen += len(new)
    assert len(view.nodes()) == seen > 3000 and view.edge_count() == seen - 1  # root included in seen
    view.finish()
    path = view.highlighted_path()
    assert [view.model.nodes[(0, i)].token for i in path[1:-1]] == [VOCAB[w] for w in words]
    view.fit()
    view.grab()


def test_hidden_view_waits_and_draws_when_shown(qtbot):
    v = BeamTreeView()
    qtbot.addWidget(v)
    v.add_events(fake_beam_events(WORDS[:4], 2))
    assert v._pending and not v._layouts  # nothing computed while hidden
    v.show()
    qtbot.waitUntil(lambda: not v._pending)
    assert len(v.nodes()) == sum(len(ev.nodes) for ev in fake_beam_events(WORDS[:4], 2))


def test_segments_have_their_own_trees(qtbot, view):
    first = fake_beam_events(WORDS[:3], 2)
    second = fake_beam_events(WORDS[3:6], 2, step_offset=3, segment=1, early_eos_step=None)
    view.handle_segment(SegmentEvent(segment=0, label="sentence 1"))
    view.add_events(first)
    assert not view.segment_box.isVisible()
    view.handle_segment(SegmentEvent(segment=1, label="sentence 2"))
    view.add_events(second[:2])
    assert view.is_final(0) and not view.is_final(1)  # a later segment began: the first one ended
    assert view.shown_segment() == 1 and view.segment_box.isVisible()
    assert [view.segment_box.itemText(i) for i in range(2)] == ["sentence 1", "sentence 2"]
    view.add_events(second[2:])
    view.finish()
    assert view.output_steps(1) and min(view.output_steps(1)) == 3
    view.select_step(1)  # a step of the first sentence shows its tree
    assert view.shown_segment() == 0 and view.selected_node() == (0, view.output_steps(0)[1])
    assert view.hypothesis(0, view.best_node(0)) == "The quick brown</s>"


def test_a_finished_node_pushed_out_is_restyled(qtbot, view):
    events = _tiny_events()
    view.add_events(events)
    assert view.node_item(5).status == "finished"
    again = BeamNode(5, 1, 1, EOS_ID, "</s>", -0.2, -0.3, -0.15, "pruned", 0, 0, True)
    view.add_events([BeamEvent(2, [], nodes=[again], best=6)])
    item = view.node_item(5)
    assert item.status == "pruned" and item.radius == STATUS_STYLE["pruned"][2]
    assert view._layouts[0].edges[5].pen().color() == QColor(bt.EDGE_STYLE["pruned"][0])
    assert view.edge_count() == 8 and view.best_node() == 6


# ------------------------------------------------------------------------- a tab
def _tone(seconds=1.0):
    t = np.arange(int(16000 * seconds), dtype=np.float32) / 16000
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.fixture
def tab(qtbot):
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.options_panel._timer.setInterval(20)
    yield t
    t.shutdown()


def test_a_beam_run_fills_the_tree_live(qtbot, tab):
    tabs = tab.inspector_tabs
    assert not tabs.isTabVisible(tabs.indexOf(tab.beam_tree))  # greedy: no beam tree
    tab.options_panel.setOptions(DecodingOptions(strategy="beam", num_beams=3))
    tab.model = FakeSpeechModel(delay_s=0.03)
    finished = []
    tab.decodeFinished.connect(finished.append)
    tab.set_audio(_tone(), "tone")
    qtbot.waitUntil(lambda: len(tab.beam_tree.nodes()) > 12, timeout=5000)
    assert not finished and tab.is_decoding()  # nodes appear before the run ends
    assert tabs.currentWidget() is tab.beam_tree and tab.beam_tree.isVisible()
    assert tab.beam_tree.highlight_is_dashed()
    qtbot.waitUntil(lambda: bool(finished), timeout=10000)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    fin = finished[0]
    tree = tab.beam_tree
    assert tree.is_final() and not tree.highlight_is_dashed()
    path = [tree.model.nodes[(0, i)] for i in tree.highlighted_path()[1:]]
    assert [n.token for n in path if not n.eos] == fin.token_ids
    # clicking a node of the output selects its step in the token stream
    node = path[4]
    qtbot.mouseClick(tree.view.viewport(), Qt.MouseButton.LeftButton, pos=tree.viewport_pos(node.id))
    assert tab.selected_step() == node.step == tab.stream.flow.selected_step()
    assert tree.hypothesis_shown() == "".join(WORDS[:5]).strip()
    # selecting a token selects its node
    tab.select_step(7)
    assert tree.selected_node() == (0, path[7].id)
    tab.follow_newest()
    assert tree.selected_node() is None
    # greedy again: the tab goes away, the attention comes back
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.options_panel.setOptions(DecodingOptions(strategy="greedy"), emit=True)
    assert not tabs.isTabVisible(tabs.indexOf(tab.beam_tree)) and tabs.currentWidget() is tab.heatmap
    assert tree.nodes() == []


def test_the_window_keeps_room_for_the_tree_at_1280x800(qtbot, settings):
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    for t in (w.speech_tab, w.ocr_tab, w.translation_tab):
        w.tabs.setCurrentWidget(t)
        t.options_panel.setOptions(DecodingOptions(strategy="diverse_beam", num_beams=4), emit=True)
        qtbot.waitUntil(lambda t=t: t.beam_tree.isVisible(), timeout=3000)
        tree = t.beam_tree
        assert tree.view.height() >= 150 and tree.view.width() >= 350, (t.title, tree.view.size())
        # the chart and the strip come with a clicked node; the hint alone before (issue 19 §6)
        assert tree.hypothesis_label.isVisible() and not tree.topk.isVisible() and not tree.attention.isVisible()
        assert tree.details.topk.minimumWidth() >= 300
        assert t.inspector.height() >= t.inspector.minimumSizeHint().height()


# ------------------------------------------------------------------- a real model
@pytest.mark.e2e
def test_bergamot_beam_tree_best_path_is_the_translation(qtbot):
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
        t.options_panel.setOptions(DecodingOptions(strategy="beam", num_beams=3))
        with qtbot.waitSignal(t.decodeFinished, timeout=120_000) as blocker:
            t.set_text("The weather is nice today. Where is the train station?")
        qtbot.waitUntil(lambda: not t.is_decoding(), timeout=120_000)
        fin = blocker.args[0]
        tree = t.beam_tree
        assert tree.segments() == [0, 1] and all(tree.is_final(s) for s in (0, 1))
        ids, texts = [], []
        for seg in (0, 1):
            path = [tree.model.nodes[(seg, i)] for i in tree.highlighted_path(seg)[1:]]
            assert path[-1].eos and path[-1].status == "finished"
            ids += [n.token for n in path if not n.eos]
            texts.append(tree.hypothesis(seg, tree.best_node(seg)))
        assert ids == [ev.token_id for ev in t.run.steps()]
        assert fin.text.strip() == t.stream.text().strip()
        assert texts[0].startswith(t.run.steps()[0].text.replace("▁", " ").strip())
        # a node's top-k and attention come from its row at its step
        node = tree.model.nodes[(1, tree.highlighted_path(1)[2])]
        tree.select_node(node.id, 1)
        assert tree.topk.event_shown().token_id == node.token
        assert any(r.chosen for r in tree.topk.rows())
        assert tree.attention.row() is not None and tree.attention.row().shape == (tree.model.rows[(1, node.step)][0]
                                                                                 .attention.shape)
        assert tree.attention.peak_text()
    finally:
        t.shutdown()
