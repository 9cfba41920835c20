"""Fork at any token (issue 12, section 1): the branch tree in RunState, forking from the
top-k chart / the force field / the chain-stage view, the fork diff, the branch tree view,
and exploration files (save -> open, refused for another input or model).

Most tests use the fake speech model (tests/gui/fakes.py: ``fork`` re-decodes with the
forced ids; after a changed token it "skips" the next word), one the fake OCR model (a
fork of a middle line: the later lines follow, renumbered), and the last ones the real
bundled models.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import Qt

from core.events import Finished, RunStats, SegmentEvent
from core.options import DecodingOptions
from gui import exploration
from gui.run_state import RunState
from gui.tabs.speech import SpeechTab
from gui.widgets.fork_diff import align, fmt_logprob

from .fakes import VOCAB, WORDS, FakeSpeechModel, make_step
from .tab_helpers import TONE, decoded, speech_tab


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeSpeechModel())


def _fork(qtbot, tab, action):
    with qtbot.waitSignal(tab.forkFinished, timeout=5000) as blocker:
        assert action() is not False
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    return blocker.args[0]


def _click_alternative(qtbot, tab, text):
    """Click the bar of ``text`` in the top-k chart, with the mouse."""
    i = next(i for i, r in enumerate(tab.topk.rows()) if r.text == text)
    qtbot.mouseClick(tab.topk, Qt.MouseButton.LeftButton, pos=tab.topk.row_rect(i).center().toPoint())


# ------------------------------------------------------------------ the model
def test_run_state_branches_share_the_prefix_and_renumber_later_segments(qtbot):
    run = RunState()
    seen = {"added": [], "changed": [], "current": []}
    run.branchAdded.connect(seen["added"].append)
    run.branchChanged.connect(seen["changed"].append)
    run.currentBranchChanged.connect(seen["current"].append)
    run.add_segment(SegmentEvent(0, "sentence 1"))
    run.add_segment(SegmentEvent(1, "sentence 2"))
    root = [make_step(i, w) for i, w in enumerate(WORDS[:4])]
    root += [replace(make_step(4 + i, w), segment=1) for i, w in enumerate(WORDS[4:7])]
    for ev in root:
        run.add(ev)
    run.finish(Finished("x", [], RunStats()))
    b = run.fork(0, 2, [VOCAB[" cat"]], " cat")
    assert seen["added"] == [1] and run.growing_branch() == 1 and run.current_branch() == 0
    assert b.replaced_text == " brown" and b.label() == "step 2: ' brown' → ' cat'"
    with pytest.raises(ValueError):
        run.fork(0, 99, [1], "x")
    # the fork gets steps 2.. of segment 0 (a step before its fork step is ignored)
    run.add(make_step(1, " nope"))
    new = [make_step(2, " cat"), make_step(3, " box"), make_step(4, " red")]
    for ev in new:
        run.add(ev)
    assert run.complete_from_parent(1) == 3
    steps = run.branch_steps(1)
    assert steps[:2] == root[:2] and all(a is b for a, b in zip(steps[:2], root[:2]))  # shared, not copied
    assert [e.text for e in steps] == [" The", " quick", " cat", " box", " red"] + WORDS[4:7]
    assert [e.step for e in steps] == list(range(8)) and [e.segment for e in steps[5:]] == [1, 1, 1]
    assert run.branch_len(1) == 8 and [s.label for s in run.segments(1)] == ["sentence 1", "sentence 2"]
    assert run.logprob(1) == pytest.approx(sum(math.log(e.prob) for e in steps))
    assert run.logprob(1, 2, 5) == pytest.approx(sum(math.log(e.prob) for e in steps[2:5]))
    run.set_current(1)
    assert seen["current"] == [1] and len(run) == 8 and run.latest() == 7 and 7 in run
    assert run.step(2).text == " cat" and run.steps_in_segment(1) == [5, 6, 7]
    assert run.text(1) == "The quick cat box red" + "".join(WORDS[4:7])
    run.clear()
    assert [b.id for b in run.branches()] == [0] and len(run) == 0 and run.current_branch() == 0


def test_align_pairs_equal_runs_and_faces_gaps():
    a = [make_step(i, w) for i, w in enumerate([" fox", " jump", "s", " over"])]
    b = [make_step(i, w) for i, w in enumerate([" cat", "s", " over"])]
    cols = align(a, b)
    assert [(c.a and c.a.text, c.b and c.b.text, c.op) for c in cols] == [
        (" fox", " cat", "replace"), (" jump", None, "replace"), ("s", "s", "equal"), (" over", " over", "equal")]
    assert fmt_logprob(-math.inf) == "−∞" and fmt_logprob(-1.5) == "−1.50"


# ------------------------------------------------------------------ forking in the tab
def test_fork_from_the_topk_chart_makes_a_branch_that_grows_live(qtbot, tab):
    decoded(qtbot, tab)
    root = tab.run.steps()
    tab.select_step(3)  # " fox"
    bid = _fork(qtbot, tab, lambda: _click_alternative(qtbot, tab, " cat"))
    assert bid == 1 and tab.run.current_branch() == 1 and tab.errors == []
    # the worker re-decoded the segment with its tokens up to the step + the clicked one
    assert tab.model.fork_calls == [(0, tuple(VOCAB[w] for w in WORDS[:3]) + (VOCAB[" cat"],), True)]
    steps = tab.run.steps()
    assert steps[:3] == root[:3] and all(a is b for a, b in zip(steps, root[:3]))
    assert steps[3].token_id == VOCAB[" cat"] and steps[3].text == " cat"
    assert [e.text for e in steps[4:]] == WORDS[5:]  # the fake skips a word after a change
    assert [e.step for e in steps] == list(range(len(steps)))
    # the views show the branch: stream, heatmap rows, top-k of the (still selected) fork step
    assert tab.stream.text() == "The quick brown cats over the lazy dog."
    assert tab.stream.token_count() == len(steps) == tab.heatmap.row_count()
    assert tab.run.selected() == 3 and tab.topk.event_shown() is steps[3]
    assert "branch 1" in tab.stream.title.text()
    # the status bar says what the fork reused and when the first new token came
    msg = tab.messages[-1]
    assert "Fork at step 3" in msg and "KV cache reused (3 tokens)" in msg and "first new token" in msg
    assert tab.run.branch(1).note == "KV cache reused (3 tokens)" and tab.run.branch(1).finished.text == tab.stream.text()
    assert tab.inspector_tabs.currentWidget() is tab.fork_diff


def test_fork_without_cache_reuse_drops_the_rerun_prefix(qtbot, tab):
    tab.fork_reuse_cache = False
    decoded(qtbot, tab)
    root = tab.run.steps()
    tab.select_step(4)
    _fork(qtbot, tab, lambda: tab.topk.click_row(1))
    assert tab.model.fork_calls[-1][2] is False
    steps = tab.run.steps()
    assert all(a is b for a, b in zip(steps[:4], root[:4]))  # the re-run prefix's events are not kept
    assert tab.stream.token_count() == len(steps) == tab.heatmap.row_count()  # nor shown twice
    assert "prefix re-run (5 forced tokens" in tab.messages[-1]


def test_fork_is_refused_for_the_same_token_and_while_decoding(qtbot, tab):
    decoded(qtbot, tab)
    tab.select_step(2)
    chosen = next(i for i, r in enumerate(tab.topk.rows()) if r.chosen)
    assert tab.topk.click_row(chosen) is False  # the chosen token is no alternative
    assert tab.fork(2, [VOCAB[" brown"]], " brown") is False and "already has" in tab.messages[-1]
    tab.model.delay_s = 0.05
    tab.options_panel.setOptions(DecodingOptions(max_new_tokens=64), emit=True)
    qtbot.waitUntil(tab.is_decoding, timeout=3000)
    assert tab.fork(0, [VOCAB[" cat"]], " cat") is False and "still decoding" in tab.messages[-1]
    assert len(tab.run.branches()) == 1


def test_a_fork_right_after_the_run_takes_the_run_s_last_events_first(qtbot, tab):
    """The worker can be done while its last events still wait for the next frame: a fork
    then lets the run take them first (they never go into the branch)."""
    tab.set_audio(TONE, "tone")
    qtbot.waitUntil(lambda: tab.workers_idle() and not tab.is_decoding(), timeout=5000)
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        assert tab.fork(3, [VOCAB[" cat"]], " cat")
    assert [e.text for e in tab.run.branch_steps(0)] == WORDS and tab.run.branch(0).finished.text == "".join(WORDS).strip()
    assert [e.text for e in tab.run.branch_steps(1)] == WORDS[:3] + [" cat"] + WORDS[5:]


def test_the_force_field_tokenizes_typed_text(qtbot, tab):
    decoded(qtbot, tab)
    tab.select_step(3)
    tab.inspector.force_edit.setText(" red dog")
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        qtbot.keyClick(tab.inspector.force_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    b = tab.run.branch(1)
    assert b.forced_ids == (VOCAB[" red"], VOCAB[" dog"]) and b.forced_text == " red dog"
    steps = tab.run.steps()
    assert [e.text for e in steps[3:5]] == [" red", " dog"]
    assert tab.fork_diff.canvas.forced == {3, 4}


def test_chain_stage_candidate_click_forks(qtbot, tab):
    tab.options_panel.setOptions(DecodingOptions(strategy="sample", seed=1, temperature=1.2, top_k=3))
    decoded(qtbot, tab)
    tab.select_step(2)
    tab.inspector.set_mode("stages")
    texts = tab.stages.candidate_texts()
    row = texts.index(" box")
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        assert tab.stages.click_candidate(row)
    assert tab.run.step(2).text == " box" and tab.run.branch(1).options.strategy == "sample"


def test_cancelling_a_fork_keeps_its_tokens(qtbot, tab):
    decoded(qtbot, tab)
    tab.model.delay_s = 0.05
    tab.select_step(2)
    tab.fork(2, [VOCAB[" cat"]], " cat")
    qtbot.waitUntil(lambda: tab.run.branch_len(1) >= 4, timeout=5000)
    assert tab.cancel()
    qtbot.waitUntil(tab.workers_idle, timeout=5000)
    b = tab.run.branch(1)
    assert b.finished is not None and b.finished.cancelled and b.note == "cancelled"
    assert tab.run.step(2).text == " cat" and not tab.is_decoding()


# ------------------------------------------------------------------ the diff and the tree
def test_diff_shows_the_prefix_and_both_continuations_with_logprobs(qtbot, tab):
    decoded(qtbot, tab)
    tab.select_step(3)
    _fork(qtbot, tab, lambda: _click_alternative(qtbot, tab, " cat"))
    diff = tab.fork_diff
    assert diff.pair() == (0, 1)
    assert diff.prefix_text().startswith("common prefix (3 tokens): The quick brown")
    a, b = diff.continuations()
    assert [e.text for e in a] == WORDS[3:] and [e.text for e in b] == [" cat"] + WORDS[5:]
    cols = diff.columns()
    assert (cols[0].a.text, cols[0].b.text, cols[0].differs) == (" fox", " cat", True)
    assert cols[1].b is None and all(not c.differs for c in cols[2:])
    # log-probabilities: sums of ln p of each whole sequence, and of the continuation
    for bid, tail in ((0, a), (1, b)):
        total = sum(math.log(e.prob) for e in tab.run.branch_steps(bid))
        after = sum(math.log(e.prob) for e in tail)
        assert diff.logprobs(bid) == pytest.approx((total, after))
        assert f"log p <b>{fmt_logprob(total)}</b> total, {fmt_logprob(after)} after the fork" in diff.header_text()
    # every token is drawn once, tinted; the forced one is marked
    assert len(diff.canvas.chips()) == len(a) + len(b) and diff.canvas.forced == {3}


def test_clicking_a_diff_token_selects_that_step_in_that_branch(qtbot, tab):
    decoded(qtbot, tab)
    tab.select_step(3)
    _fork(qtbot, tab, lambda: _click_alternative(qtbot, tab, " cat"))
    tab.inspector_tabs.setCurrentWidget(tab.fork_diff)
    qtbot.waitUntil(lambda: tab.fork_diff.canvas.isVisible(), timeout=2000)
    rect, _side, ev = next(c for c in tab.fork_diff.canvas.chips() if c[1] == 0 and c[2].text == " jump")
    qtbot.mouseClick(tab.fork_diff.canvas, Qt.MouseButton.LeftButton, pos=rect.center())
    assert tab.run.current_branch() == 0 and tab.run.selected() == ev.step == 4
    assert tab.topk.event_shown() is tab.run.branch_step(0, 4) and tab.stream.text() == "".join(WORDS).strip()
    assert tab.heatmap.row_count() == len(WORDS)
    assert tab.fork_diff.pair() == (0, 1)  # the diff stays on the pair
    tab.fork_diff.click_token(1, 5)
    assert tab.run.current_branch() == 1 and tab.topk.event_shown() is tab.run.branch_step(1, 5)


def test_branch_tree_lists_branches_and_switches_the_stream(qtbot, tab):
    decoded(qtbot, tab)
    tab.select_step(3)
    _fork(qtbot, tab, lambda: _click_alternative(qtbot, tab, " cat"))
    tab.select_step(6)
    _fork(qtbot, tab, lambda: tab.fork(6, [VOCAB[" red"]], " red"))  # a fork of the fork
    tab.select_step(1)
    tab.show_branch(0)
    _fork(qtbot, tab, lambda: tab.fork(1, [VOCAB[" box"]], " box"))
    tree = tab.branch_tree
    assert tree.branch_ids() == [0, 1, 2, 3]
    assert tree.item(2).parent() is tree.item(1) and tree.item(3).parent() is tree.item(0)
    row = tree.row_texts(1)
    assert row[0] == "#1 step 3: ' fox' → ' cat'" and row[1] == fmt_logprob(tab.run.logprob(1))
    assert row[3] == tab.run.text(1) and tree.row_texts(0)[3] == tab.run.text(0)  # forked at step 3: all of it
    deep = tree.row_texts(2)[3]  # forked at step 6: from 3 tokens before
    assert deep.startswith("…") and tab.run.text(2).endswith(deep[1:]) and deep[1:].startswith("cats over")
    assert tab.run.text(1) in tree.item(1).toolTip(3) and tree.row_texts(0)[0] == "#0 original run (greedy)"
    for bid in (0, 2, 1):
        tree.select_branch(bid)
        assert tab.run.current_branch() == bid
        assert tab.stream.text() == tab.run.branch(bid).finished.text == tab.run.text(bid)
        assert tab.stream.token_count() == tab.run.branch_len(bid) == tab.heatmap.row_count()
        assert tab.topk.event_shown() is tab.run.branch_step(bid, tab.run.selected())
    assert tab.fork_diff.pair() == (0, 1)
    # clicking with the mouse in the tree works the same
    tree.tree.scrollToItem(tree.item(3))
    rect = tree.tree.visualItemRect(tree.item(3))
    qtbot.mouseClick(tree.tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert tab.run.current_branch() == 3 and tab.fork_diff.pair() == (0, 3)


def test_a_new_run_starts_a_new_exploration(qtbot, tab):
    decoded(qtbot, tab)
    _fork(qtbot, tab, lambda: tab.fork(2, [VOCAB[" cat"]], " cat"))
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.options_panel.setOptions(DecodingOptions(max_new_tokens=64), emit=True)
    assert [b.id for b in tab.run.branches()] == [0] and tab.branch_tree.branch_ids() == [0]
    assert tab.fork_diff.pair() is None and tab.run.branch(0).options.max_new_tokens == 64


def test_ocr_fork_of_a_middle_line_keeps_the_later_lines(qtbot):
    from gui.tabs.ocr import OCRTab

    from .fakes_ocr import LINE_TEXT, FakeOCRModel
    from .test_ocr_tab import text_image

    t = OCRTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.model = FakeOCRModel()
    with qtbot.waitSignal(t.decodeFinished, timeout=5000):
        t.set_image(text_image(("Hello world", "Price 4.99", "Third line")), "three.png")
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=5000)
    n = len(LINE_TEXT)
    root = t.run.steps()
    assert len(root) == 3 * n and t.heatmap.row_separators() == [n, 2 * n]
    step = n + 1  # the second character of line 2
    t.select_step(step)
    with qtbot.waitSignal(t.forkFinished, timeout=5000):
        assert t.topk.click_row(next(i for i, r in enumerate(t.topk.rows()) if r.text == "z"))
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=5000)
    assert t.model.fork_calls == [(1, (ord(LINE_TEXT[0]), ord("z")), n)]
    steps = t.run.steps()
    assert [e.step for e in steps] == list(range(len(steps))) and len(steps) == 3 * n - 1
    assert "".join(e.text for e in steps if e.segment == 1) == LINE_TEXT[0] + "z" + LINE_TEXT[3:]
    assert [e.text for e in steps if e.segment == 2] == [e.text for e in root if e.segment == 2]
    assert t.heatmap.row_separators() == [n, 2 * n - 1] and t.reading(1)[0] == LINE_TEXT[0] + "z" + LINE_TEXT[3:]
    assert "Only the forked segment" in t.fork_diff.prefix_text()
    t.show_branch(0)
    assert t.reading(1)[0] == LINE_TEXT and t.heatmap.row_separators() == [n, 2 * n]
    t.shutdown()


# ------------------------------------------------------------------ exploration files
def _explored(qtbot, tab):
    decoded(qtbot, tab)
    tab.select_step(3)
    _fork(qtbot, tab, lambda: _click_alternative(qtbot, tab, " cat"))
    tab.select_step(5)
    _fork(qtbot, tab, lambda: tab.fork(5, [VOCAB[" box"]], " box"))


def test_save_then_open_restores_the_same_tree(qtbot, tab, tmp_path):
    _explored(qtbot, tab)
    tab.select_step(4)
    path = tmp_path / "x.exploration.json"
    assert tab.save_exploration(str(path))
    data = json.loads(path.read_text())
    assert data["version"] == exploration.VERSION and data["model"] == "fake-whisper" and data["task"] == "speech"
    assert data["input"]["sha256"] == tab.input_identity()[1] and data["input"]["settings"]["language"] == "auto"
    assert [b["parent"] for b in data["branches"]] == [None, 0, 1]
    before = {b.id: (b.parent, b.fork_step, b.forced_ids, b.label(), [(e.step, e.token_id, e.text, e.prob, e.raw_prob,
                                                                         [t.id for t in e.topk], [t.prob for t in e.topk])
                                                                        for e in tab.run.branch_steps(b.id)],
                     b.finished.text, b.note) for b in tab.run.branches()}
    logps = {b.id: tab.run.logprob(b.id) for b in tab.run.branches()}
    # another tab on the same input (and model) opens it
    other = SpeechTab()
    qtbot.addWidget(other)
    other.resize(1280, 800)
    other.show()
    other.model = FakeSpeechModel()
    decoded(qtbot, other)
    assert other.open_exploration(str(path)), other.banner
    after = {b.id: (b.parent, b.fork_step, b.forced_ids, b.label(), [(e.step, e.token_id, e.text, e.prob, e.raw_prob,
                                                                        [t.id for t in e.topk], [t.prob for t in e.topk])
                                                                       for e in other.run.branch_steps(b.id)],
                    b.finished.text, b.note) for b in other.run.branches()}
    assert after.keys() == before.keys()
    for k in before:
        assert after[k][:4] == before[k][:4] and after[k][5:] == before[k][5:]
        for x, y in zip(after[k][4], before[k][4]):
            assert x[:3] == y[:3] and x[3:5] == pytest.approx(y[3:5]) and x[5] == y[5]
            assert x[6] == pytest.approx(y[6])
        assert other.run.logprob(k) == pytest.approx(logps[k])
    assert other.run.current_branch() == 2 and other.run.selected() == 4
    assert other.stream.text() == tab.stream.text() and other.branch_tree.branch_ids() == [0, 1, 2]
    assert other.fork_diff.pair() == (1, 2) and other.topk.event_shown().text == tab.topk.event_shown().text
    ev = other.run.step(4)  # attention: averaged over layers and heads
    assert ev.cross_attention.shape == (1, 1, tab.run.step(4).cross_attention.shape[-1])
    np.testing.assert_allclose(ev.cross_attention[0, 0], tab.run.step(4).cross_attention.mean(axis=(0, 1)), atol=1e-3)
    assert other.heatmap.row_count() == other.run.branch_len(2)
    # the restored tree forks on (from a restored branch)
    other.select_step(6)
    with qtbot.waitSignal(other.forkFinished, timeout=5000):
        assert other.fork(6, [VOCAB[" red"]], " red")
    assert other.branch_tree.branch_ids() == [0, 1, 2, 3] and other.run.branch(3).parent == 2
    other.shutdown()


def test_a_multi_token_forced_fork_survives_save_then_open(qtbot, tab, tmp_path):
    """A fork that forces several tokens (typed in the force field) keeps all of them
    through save -> open: the forced ids and text, the steps' forced marks and the fork
    diff's dashed (forced) steps; and a fork of that branch forcing three more."""
    decoded(qtbot, tab)
    tab.select_step(3)
    tab.inspector.force_edit.setText(" red dog")
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        qtbot.keyClick(tab.inspector.force_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    three = (VOCAB[" box"], VOCAB[" cat"], VOCAB[" red"])
    _fork(qtbot, tab, lambda: tab.fork(6, three, " box cat red"))
    assert tab.run.branch(1).forced_ids == (VOCAB[" red"], VOCAB[" dog"]) and tab.run.branch(2).forced_ids == three

    def tree(t):
        return {b.id: (b.parent, b.fork_step, b.forced_ids, b.forced_text, b.replaced_text, b.label(),
                       [(e.step, e.token_id, e.text, e.forced) for e in t.run.branch_steps(b.id)])
                for b in t.run.branches()}

    before = tree(tab)
    assert [e.step for e in tab.run.branch_steps(2) if e.forced] == [3, 4, 6, 7, 8]  # not vacuous
    path = tmp_path / "multi.exploration.json"
    assert tab.save_exploration(str(path))
    saved = json.loads(path.read_text())["branches"]
    assert [b["forced_ids"] for b in saved] == [[], [VOCAB[" red"], VOCAB[" dog"]], list(three)]
    other = SpeechTab()
    qtbot.addWidget(other)
    other.resize(1280, 800)
    other.show()
    other.model = FakeSpeechModel()
    decoded(qtbot, other)
    assert other.open_exploration(str(path)), other.banner
    assert tree(other) == before
    assert other.fork_diff.pair() == (1, 2)
    qtbot.waitUntil(lambda: other.fork_diff.canvas.forced == {6, 7, 8}, timeout=3000)
    other.fork_diff.set_branch(1)  # the first fork beside the root
    assert other.fork_diff.pair() == (0, 1) and other.fork_diff.canvas.forced == {3, 4}
    other.shutdown()


def test_open_refuses_another_input_or_model_and_says_what_to_do(qtbot, tab, tmp_path):
    _explored(qtbot, tab)
    path = tmp_path / "x.json"
    assert tab.save_exploration(str(path))
    decoded(qtbot, tab, audio=TONE * 0.5, name="quieter.wav")
    assert not tab.open_exploration(str(path))
    msg = tab.errors[-1]
    assert "This exploration is for tone (1.00 s audio)" in msg and "Open tone (1.00 s audio) first" in msg
    assert [b.id for b in tab.run.branches()] == [0]  # nothing changed
    decoded(qtbot, tab)
    tab.model.name = "whisper-other"
    assert not tab.open_exploration(str(path))
    assert "made with model 'fake-whisper'" in tab.errors[-1] and "Load 'fake-whisper' first" in tab.errors[-1]
    tab.model.name = "fake-whisper"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert not tab.open_exploration(str(bad)) and "not an exploration file" in tab.errors[-1]
    newer = json.loads(path.read_text())
    newer["version"] = exploration.VERSION + 1
    path.write_text(json.dumps(newer))
    assert not tab.open_exploration(str(path)) and "newer version" in tab.errors[-1]


def test_window_file_menu_saves_and_opens_in_the_right_tab(qtbot, tmp_path, monkeypatch, settings):
    from gui import main_window
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    menu = w.menuBar().actions()[0].menu()
    assert [a.text() for a in menu.actions() if a.text()] == ["Open…", "Export…", "Play file as live input…", "Open sweep…", "Save exploration…", "Open exploration…", "Quit"]
    tab = w.speech_tab
    tab.model = FakeSpeechModel()
    _explored(qtbot, tab)
    path = str(tmp_path / "w.json")
    monkeypatch.setattr(main_window, "ask_exploration_path", lambda parent, save, suggested: path)
    w.save_exploration_action.trigger()
    w.tabs.setCurrentWidget(w.translation_tab)
    tab.show_branch(0)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.request_decode()  # the same options: the tree stays (issue 19)
    assert len(tab.run.branches()) == 3
    w.open_exploration_action.trigger()
    assert w.current_tab() is tab and len(tab.run.branches()) == 3 and tab.run.current_branch() == 2
    w.close()


# ------------------------------------------------------------------ layout
def test_fork_views_fit_at_1280x800(qtbot, tab):
    _explored(qtbot, tab)
    for view in (tab.fork_diff, tab.branch_tree):
        tab.inspector_tabs.setCurrentWidget(view)
        qtbot.wait(20)
        assert view.isVisible() and view.height() >= 120 and view.width() >= 300, (view, view.size())
    assert tab.inspector.force_edit.isVisible() and tab.inspector.sample_button.isVisible()
    assert tab.inspector.width() >= tab.inspector.minimumSizeHint().width()


# ------------------------------------------------------------------ real bundled models
SLOW_MS = 240_000  # two shared CPU cores: a model load and a decode can take tens of seconds


def _needs_task_fork():
    """The real tests need the task models' segment re-decode (``SpeechModel.fork``). It
    exists: losing it is a failure, not a reason to skip the real-model fork tests."""
    from core.tasks.speech import SpeechModel

    assert callable(getattr(SpeechModel, "fork", None)), (
        "SpeechModel.fork is missing: the window's fork cannot re-decode a real model (core.tasks.base fork)"
    )


@pytest.mark.e2e
def test_real_tiny_en_fork_reuses_the_cache_and_matches_a_rerun(qtbot, tmp_path):
    """tiny.en on the bundled sample: click an alternative, the branch continues with the
    forced token marked; the same fork without cache reuse gives the same tokens; the
    exploration saves and opens again."""
    from gui.tabs.speech import first_sample

    _needs_task_fork()
    if first_sample() is None:
        pytest.skip("no bundled sample clip")
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    messages, errors = [], []
    t.statusMessage.connect(messages.append)
    t.errorOccurred.connect(errors.append)
    with qtbot.waitSignal(t.modelReady, timeout=SLOW_MS):
        t.load_model("tiny.en")
    with qtbot.waitSignal(t.decodeFinished, timeout=SLOW_MS):
        t.load_sample()
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=SLOW_MS)
    root = t.run.steps()
    step = next(e.step for e in root if e.text == " turn")
    t.select_step(step)
    rows = t.topk.rows()
    i = next(i for i, r in enumerate(rows) if not r.chosen and r.text.strip() and r.token_id >= 0)
    alt = rows[i]
    with qtbot.waitSignal(t.forkFinished, timeout=SLOW_MS):
        qtbot.mouseClick(t.topk, Qt.MouseButton.LeftButton, pos=t.topk.row_rect(i).center().toPoint())
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=SLOW_MS)
    assert errors == []
    steps = t.run.steps()
    assert all(a is b for a, b in zip(steps[:step], root[:step]))
    fork_ev = steps[step]
    assert fork_ev.token_id == alt.token_id and fork_ev.forced and not any(e.forced for e in steps[step + 1:])
    assert fork_ev.prob == pytest.approx(alt.prob, rel=1e-4)  # forced with the probability the model gave it
    assert len(steps) > step + 1 and t.stream.text() == t.run.text(1)
    assert "KV cache reused" in messages[-1] and "first new token" in messages[-1]
    assert t.fork_diff.pair() == (0, 1) and t.fork_diff.columns()[0].differs
    # the same fork, the prefix decoded again: the same tokens and probabilities
    t.fork_reuse_cache = False
    t.show_branch(0)
    with qtbot.waitSignal(t.forkFinished, timeout=SLOW_MS):
        assert t.fork(step, [alt.token_id], alt.text)
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=SLOW_MS)
    assert "prefix re-run" in messages[-1]
    again = t.run.branch_steps(2)
    assert [e.token_id for e in again] == [e.token_id for e in steps]
    np.testing.assert_allclose([e.prob for e in again], [e.prob for e in steps], rtol=1e-3, atol=1e-5)
    # save, decode again with the same options (the same tokens: the tree stays, issue 19), open again
    path = tmp_path / "tiny.json"
    assert t.save_exploration(str(path))
    with qtbot.waitSignal(t.decodeFinished, timeout=SLOW_MS):
        t.request_decode()
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=SLOW_MS)
    assert len(t.run.branches()) == 3 and [e.token_id for e in t.run.branch_steps(0)] == [e.token_id for e in root]
    assert t.open_exploration(str(path)), errors
    assert [b.label() for b in t.run.branches()] == ["original run", *[f"step {step}: {root[step].text!r} → {alt.text!r}"] * 2]
    assert t.run.current_branch() == 2 and t.stream.text() == t.run.text(2)
    assert t.run.step(step).forced and t.heatmap.row_count() == t.run.branch_len(2)
    t.shutdown()


@pytest.mark.e2e
def test_real_bergamot_fork_in_the_first_sentence_keeps_the_second(qtbot):
    """Bergamot en-pt, two sentences: a fork in the first re-translates it alone; the
    second sentence's tokens follow, renumbered."""
    from gui.tabs.translation import TranslationTab

    _needs_task_fork()
    t = TranslationTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t._text_timer.setInterval(20)
    with qtbot.waitSignal(t.modelReady, timeout=SLOW_MS):
        t.load_model("en-pt")
    qtbot.waitUntil(lambda: not t.is_busy(), timeout=SLOW_MS)
    with qtbot.waitSignal(t.decodeFinished, timeout=SLOW_MS):
        t.set_text("The weather is nice today. Where is the train station?")
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=SLOW_MS)
    root = t.run.steps()
    second = [e for e in root if e.segment == 1]
    assert second and any(e.segment == 0 for e in root)
    step = 1
    t.select_step(step)
    alt = next(r for r in t.topk.rows() if not r.chosen and r.token_id >= 0)
    with qtbot.waitSignal(t.forkFinished, timeout=SLOW_MS):
        assert t.fork(step, [alt.token_id], alt.text)
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=SLOW_MS)
    steps = t.run.steps()
    assert steps[0] is root[0] and steps[step].token_id == alt.token_id and steps[step].forced
    assert [e.step for e in steps] == list(range(len(steps)))
    tail = [e for e in steps if e.segment == 1]
    assert [e.token_id for e in tail] == [e.token_id for e in second]
    assert [s.segment for s in t.run.segments(1)] == [0, 1]
    assert t.stream.token_count() == len(steps) == t.heatmap.row_count()
    assert "Only the forked segment" in t.fork_diff.prefix_text()
    t.shutdown()
