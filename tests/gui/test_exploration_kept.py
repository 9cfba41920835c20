"""Exploration work is user data (issue 19, section 1): a re-decode never drops the branch
tree without a word.

- A re-decode that only adds capture (the lens) or repeats the same options keeps the tree
  (the root is decoded again; the forks come back when it gives the same tokens).
- A re-decode with other options (a slider) starts a new exploration; the previous one is
  kept: Edit → Previous exploration (Ctrl+Z) brings it back, Next exploration (Ctrl+Shift+Z)
  returns.
- Closing the window with unsaved exploration work asks Save / Discard / Cancel (the
  dialog the recording takes use, ``gui.tabs.speech.ask_unsaved``, answered here).

The fake speech model (tests/gui/fakes.py) makes the runs fast and deterministic.
"""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

import gui.tabs.speech as speech_mod
from gui import main_window
from gui.main_window import MainWindow
from gui.run_state import Branch

from .fakes import VOCAB, FakeSpeechModel
from .tab_helpers import TONE, decoded, speech_tab


@pytest.fixture(autouse=True)
def _answers(monkeypatch):
    """Every Save / Discard / Cancel question is answered "discard" unless a test answers it
    (a window left with forks asks when qtbot closes it)."""
    asked: list[tuple[str, str, str]] = []

    def ask(parent, text, informative, title="Unsaved recording"):
        asked.append((title, text, informative))
        return "discard"

    monkeypatch.setattr(speech_mod, "ask_unsaved", ask)
    monkeypatch.setattr(main_window, "ask_exploration_path", lambda parent, save, suggested: "")
    return asked


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeSpeechModel())


@pytest.fixture
def window(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    t = w.speech_tab
    t.options_panel._timer.setInterval(20)
    t.model = FakeSpeechModel()
    t.messages = []
    t.statusMessage.connect(t.messages.append)
    yield w
    for i in range(w.tabs.count()):
        w.tabs.widget(i).shutdown()


def _forked(qtbot, tab, step=3, word=" cat"):
    """Decode the tone, then fork at ``step`` forcing ``word``: two branches."""
    decoded(qtbot, tab)
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        assert tab.fork(step, [VOCAB[word]], word)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    assert len(tab.run.branches()) == 2
    return tab.run.branch(1)


def _redecoded(qtbot, tab, action):
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        action()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)


# ------------------------------------------------------------------ the tree is kept
def test_ticking_lens_capture_keeps_both_branches(qtbot, tab):
    fork = _forked(qtbot, tab)
    fork_steps = [e.token_id for e in tab.run.branch_steps(1)]
    tab.inspector_tabs.setCurrentWidget(tab.lens_view)
    _redecoded(qtbot, tab, lambda: tab.lens_view.capture_box.setChecked(True))
    assert len(tab.run.branches()) == 2
    assert tab.run.branch(1) is fork and [e.token_id for e in tab.run.branch_steps(1)] == fork_steps
    root = tab.run.branch(0)
    assert root.options.capture_lens and all(ev.lens is not None for ev in root.own.values())
    # the fork's shared prefix is the new root's (with the lens)
    assert tab.run.branch_step(1, 0) is root.own[0] and root.own[0].lens is not None
    assert sorted(tab.branch_tree.branch_ids()) == [0, 1]  # the Branches view lists both again
    assert any("kept" in m and "2 branches" in m for m in tab.messages)


def test_f5_with_unchanged_options_keeps_both_branches(qtbot, window):
    tab = window.speech_tab
    _forked(qtbot, tab)
    calls = tab.model.decode_calls
    _redecoded(qtbot, tab, window.decode_action.trigger)
    assert tab.model.decode_calls == calls + 1  # decoded again ...
    assert len(tab.run.branches()) == 2  # ... and the fork is still there
    assert tab.run.branch(1).parent == 0 and tab.run.text(1) != tab.run.text(0)
    assert tab.run.branch(0).finished is not None and tab.stream.text() == tab.run.text(0)


def test_same_options_but_other_tokens_keep_the_old_tree_reachable(qtbot, tab):
    """F5 on a sampling run without a seed (or another input setting) gives other tokens: the
    forks no longer fit the new root, so the old tree is kept for Ctrl+Z instead."""
    _forked(qtbot, tab)
    old_root = [e.token_id for e in tab.run.branch_steps(0)]
    real = tab.model.decode

    def other_tokens(audio, options, **kw):
        for ev in real(audio, options, **kw):
            if getattr(ev, "step", None) == 1 and hasattr(ev, "token_id"):
                from dataclasses import replace
                ev = replace(ev, token_id=VOCAB[" red"], text=" red")
            yield ev

    tab.model.decode = other_tokens
    _redecoded(qtbot, tab, tab.request_decode)
    assert len(tab.run.branches()) == 1 and [e.token_id for e in tab.run.branch_steps(0)] != old_root
    assert any("Ctrl+Z" in m for m in tab.messages)
    assert tab.previous_exploration()
    assert len(tab.run.branches()) == 2 and [e.token_id for e in tab.run.branch_steps(0)] == old_root


def test_slider_move_keeps_the_previous_exploration_for_undo(qtbot, window):
    tab = window.speech_tab
    _forked(qtbot, tab)
    before = {b.id: [e.token_id for e in tab.run.branch_steps(b.id)] for b in tab.run.branches()}
    old_options = tab.run.branch(0).options
    _redecoded(qtbot, tab, lambda: tab.options_panel.controls["temperature"].setValue(0.5))
    assert len(tab.run.branches()) == 1  # a new exploration with the new options ...
    assert tab.run.branch(0).options.temperature == pytest.approx(0.5)
    assert any("previous exploration kept" in m.lower() and "Ctrl+Z" in m for m in tab.messages)  # ... said
    assert "Ctrl+Z brings it back" in window.statusBar().currentMessage()  # within what the status bar shows
    # Edit → Previous exploration (Ctrl+Z) brings the two branches back, with their options
    menu = next(a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "Edit")
    assert window.previous_exploration_action in menu.actions()
    qtbot.keyClick(window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert {b.id: [e.token_id for e in tab.run.branch_steps(b.id)] for b in tab.run.branches()} == before
    assert tab.options_panel.options().temperature == pytest.approx(old_options.temperature)
    assert not tab.is_decoding()  # shown, not decoded again
    assert tab.stream.text() == tab.run.text(tab.run.current_branch())
    # Next exploration (Ctrl+Shift+Z) goes forward to the newer run again, nothing lost
    window.next_exploration_action.trigger()
    assert len(tab.run.branches()) == 1 and tab.run.branch(0).options.temperature == pytest.approx(0.5)
    window.previous_exploration_action.trigger()
    assert len(tab.run.branches()) == 2
    # nothing earlier: said, nothing changes
    assert not tab.previous_exploration() and "No earlier exploration" in tab.messages[-1]
    assert len(tab.run.branches()) == 2


def test_a_new_input_keeps_the_exploration_for_when_it_comes_back(qtbot, tab):
    _forked(qtbot, tab)
    other = (TONE[::-1] * 0.5).copy()
    decoded(qtbot, tab, other, "other")
    assert len(tab.run.branches()) == 1
    assert not tab.previous_exploration()  # kept for the first input, not this one
    assert "other input" in tab.messages[-1]
    decoded(qtbot, tab, TONE, "tone")
    assert tab.previous_exploration() and len(tab.run.branches()) == 2


def test_opening_an_exploration_keeps_the_current_tree(qtbot, tab, tmp_path):
    _forked(qtbot, tab)
    path = tmp_path / "a.json"
    assert tab.save_exploration(str(path))
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        assert tab.fork(5, [VOCAB[" box"]], " box", branch=0)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    assert len(tab.run.branches()) == 3
    assert tab.open_exploration(str(path)) and len(tab.run.branches()) == 2
    assert tab.previous_exploration() and len(tab.run.branches()) == 3


# ------------------------------------------------------------------ closing asks
def test_close_with_unsaved_forks_asks_and_cancel_keeps_the_window(qtbot, window, _answers, monkeypatch):
    tab = window.speech_tab
    _forked(qtbot, tab)
    monkeypatch.setattr(speech_mod, "ask_unsaved",
                        lambda parent, text, informative, title="": _answers.append((title, text, informative)) or "cancel")
    assert not window.close()
    assert window.isVisible() and len(tab.run.branches()) == 2
    title, text, _info = _answers[-1]
    assert title == "Unsaved exploration" and "2 branches" in text and "Speech" in text


def test_close_with_unsaved_forks_save_writes_the_file(qtbot, window, _answers, monkeypatch, tmp_path):
    tab = window.speech_tab
    _forked(qtbot, tab)
    path = tmp_path / "kept.json"
    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative, title="": "save")
    monkeypatch.setattr(main_window, "ask_exploration_path", lambda parent, save, suggested: str(path))
    assert window.close()
    data = json.loads(path.read_text())
    assert len(data["branches"]) == 2


def test_close_save_cancelled_keeps_the_window(qtbot, window, monkeypatch):
    tab = window.speech_tab
    _forked(qtbot, tab)
    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative, title="": "save")
    assert not window.close() and window.isVisible()  # the path dialog was cancelled ("")


def test_close_asks_for_kept_explorations_too_and_not_after_save(qtbot, window, _answers, tmp_path):
    tab = window.speech_tab
    _forked(qtbot, tab)
    _redecoded(qtbot, tab, lambda: tab.options_panel.controls["temperature"].setValue(0.5))
    assert tab.unsaved_explorations()  # the kept one (2 branches) is not saved
    n = len(_answers)
    window.save_exploration(str(tmp_path / "new.json"))  # saves the current (plain) run only
    assert len(tab.unsaved_explorations()) == 1
    tab.previous_exploration()
    window.save_exploration(str(tmp_path / "old.json"))
    assert tab.unsaved_explorations() == []
    assert window.close() and len(_answers) == n  # nothing unsaved: not asked


def test_close_without_exploration_work_does_not_ask(qtbot, window, _answers):
    decoded(qtbot, window.speech_tab)
    assert window.close() and _answers == []


def test_lanes_count_as_exploration_work(qtbot, window):
    tab = window.speech_tab
    decoded(qtbot, tab)
    tab.lanes.state.start(["greedy", "beam:2"], [tab.run.branch(0).options] * 2)
    assert any("lanes" in what for what in tab.exploration_work())


# ------------------------------------------------------------------ the history itself
def _kept(n_branches: int, digest: str = "h", saved: bool = False):
    from gui.exploration_history import KeptExploration

    branches = [Branch(0)] + [Branch(i, parent=0, fork_step=1) for i in range(1, n_branches)]
    return KeptExploration(branches=branches, current=0, selected=None, input_hash=digest,
                           input_description="x", input_settings={}, model="m", saved=saved)


def test_history_is_per_input_and_bounded_with_what_fell_off():
    from gui.exploration_history import ExplorationHistory

    h = ExplorationHistory(limit=2)
    assert h.push(_kept(2, "a")) == [] and h.push(_kept(3, "b")) == []
    dropped = h.push(_kept(4, "a"))
    assert [len(e.branches) for e in dropped] == [2]  # the oldest, returned so the caller says so
    assert h.count("a") == 1 and h.count("b") == 1
    assert len(h.take_previous("a", None).branches) == 4 and h.take_previous("a", None) is None
    assert h.take_previous("b", None) is not None


def test_history_redo_entries_with_work_are_never_dropped_by_a_new_exploration():
    from gui.exploration_history import ExplorationHistory

    h = ExplorationHistory()
    h.push(_kept(2))
    cur = _kept(3)
    prev = h.take_previous("h", cur)  # cur goes to the redo side
    assert len(prev.branches) == 2
    h.push(prev)  # a new exploration starts from prev: cur (with work) stays reachable
    assert sorted(len(e.branches) for e in h.unsaved()) == [2, 3]


def test_same_options_ignores_capture_only():
    from core.options import DecodingOptions
    from gui.exploration_history import same_options

    a = DecodingOptions()
    assert same_options(a, a.__class__(capture_lens=True))
    assert not same_options(a, DecodingOptions(temperature=0.5))
    assert not same_options(None, a)


def test_ctrl_z_in_a_text_box_still_undoes_the_text(qtbot, window):
    """The window's Ctrl+Z (Previous exploration) does not take the key from a text field."""
    tab = window.translation_tab
    window.tabs.setCurrentWidget(tab)
    calls = []
    tab.previous_exploration = lambda: calls.append(1) or False
    edit = tab.text_edit
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus, timeout=3000)
    before = edit.toPlainText()
    qtbot.keyClicks(edit, " more")
    assert edit.toPlainText() != before
    qtbot.keyClick(edit, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert calls == [] and edit.toPlainText() != before + " more"


def test_a_tree_of_another_model_comes_back_only_with_that_model(qtbot, tab):
    _forked(qtbot, tab)
    first = tab.model

    class Other(FakeSpeechModel):
        name = "other-whisper"

    tab.model = Other()
    _redecoded(qtbot, tab, tab.request_decode)  # the same options and tokens, another model: a new tree
    assert len(tab.run.branches()) == 1
    assert any("another model" in m.lower() and "load fake-whisper again" in m for m in tab.messages)
    assert not tab.previous_exploration() and "other inputs or models" in tab.messages[-1]
    tab.model = first
    assert tab.previous_exploration() and len(tab.run.branches()) == 2


def test_a_large_input_is_hashed_once_while_it_stays(qtbot, tab, monkeypatch):
    """Every run of a tree with forks asks which input it is on: the audio is hashed once."""
    _forked(qtbot, tab)
    calls = []
    real = type(tab).input_identity
    monkeypatch.setattr(type(tab), "input_identity", lambda self: calls.append(1) or real(self))
    for _ in range(3):
        _redecoded(qtbot, tab, tab.request_decode)
    assert len(tab.run.branches()) == 2 and len(calls) <= 1
    decoded(qtbot, tab, (TONE * 0.5).copy(), "quieter")  # another array: hashed again
    assert tab.input_identity_or_none()[1] != tab.explorations._undo[-1].input_hash


def test_ocr_region_change_keeps_the_tree_for_that_region(qtbot):
    """OCR: a region is part of the input; a fork tree made on the whole image comes back
    when the whole image is read again."""
    from gui.tabs.ocr import OCRTab

    from .fakes_ocr import LINE_TEXT, FakeOCRModel
    from .test_ocr_tab import text_image

    t = OCRTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    messages = []
    t.statusMessage.connect(messages.append)
    t.model = FakeOCRModel()
    image = text_image(("Hello world", "Price 4.99", "Third line"))
    _redecoded(qtbot, t, lambda: t.set_image(image, "three.png"))
    n = len(LINE_TEXT)
    t.select_step(n + 1)
    with qtbot.waitSignal(t.forkFinished, timeout=5000):
        assert t.topk.click_row(next(i for i, r in enumerate(t.topk.rows()) if r.text == "z"))
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=5000)
    assert len(t.run.branches()) == 2
    _redecoded(qtbot, t, lambda: t.set_region((0, 0, image.width, image.height // 2)))
    assert len(t.run.branches()) == 1 and any("another input" in m.lower() for m in messages)
    assert not t.previous_exploration()
    _redecoded(qtbot, t, lambda: t.set_region(None))
    assert t.previous_exploration() and len(t.run.branches()) == 2
    t.shutdown()
