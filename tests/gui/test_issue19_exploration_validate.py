"""Hand-edited exploration files with impossible values are refused on open, with one message
naming the bad field (issue 19 §5): a token id past the vocabulary, ``current`` not a branch,
a ``fork_step`` past the parent's steps, ``selected`` not a step, a ``task`` that does not
match the file's content (it switched tabs). The tree shown before stays. Fake speech model
with a vocabulary of 1000 ids."""

from __future__ import annotations

import json

import pytest

from gui import exploration

from .fakes import VOCAB, FakeSpeechModel
from .tab_helpers import decoded, speech_tab

VOCAB_SIZE = 1000


@pytest.fixture
def tab(qtbot):
    model = FakeSpeechModel()
    model.backend.vocab_size = VOCAB_SIZE
    yield from speech_tab(qtbot, model)


def _saved(qtbot, tab, tmp_path) -> dict:
    """A root and one fork at step 3, saved; the file's data."""
    decoded(qtbot, tab)
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        assert tab.fork(3, [VOCAB[" cat"]], " cat")
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    tab.select_step(4)
    path = tmp_path / "good.json"
    assert tab.save_exploration(str(path))
    return json.loads(path.read_text())


def _edit(data: dict, path, change) -> str:
    data = json.loads(json.dumps(data))
    change(data)
    path.write_text(json.dumps(data))
    return str(path)


def _step(data, b, k):
    return data["branches"][b]["steps"][k]


CASES = [
    ("token id", lambda d: _step(d, 1, 0).update(token_id=10 ** 9),
     ["branches[1].steps[0].token_id", "1000000000", "vocabulary", "1000"]),
    ("negative id", lambda d: _step(d, 0, 2).update(token_id=-1), ["branches[0].steps[2].token_id", "-1"]),
    ("top-k id", lambda d: _step(d, 0, 1)["topk"][1].__setitem__(0, 5000), ["branches[0].steps[1].topk", "5000"]),
    ("forced id", lambda d: d["branches"][1].update(forced_ids=[10 ** 9]), ["branches[1].forced_ids", "1000000000"]),
    ("finished id", lambda d: d["branches"][0]["finished"]["token_ids"].append(70000),
     ["branches[0].finished.token_ids", "70000"]),
    ("current", lambda d: d.update(current=42), ["'current'", "42", "0, 1"]),
    ("current type", lambda d: d.update(current="one"), ["'current'", "'one'"]),
    ("fork_step", lambda d: d["branches"][1].update(fork_step=999), ["branches[1].fork_step", "999", "branch 0"]),
    ("root fork_step", lambda d: d["branches"][0].update(fork_step=2), ["branches[0].fork_step", "root"]),
    ("selected", lambda d: d.update(selected=-5), ["'selected'", "-5"]),
    ("selected past", lambda d: d.update(selected=500), ["'selected'", "500"]),
    ("step before fork", lambda d: _step(d, 1, 0).update(step=1), ["branches[1].steps[0].step", "fork_step 3"]),
    ("duplicate id", lambda d: d["branches"][1].update(id=0), ["branches[1].id", "0"]),
    ("probability", lambda d: _step(d, 0, 0).update(prob=7.5), ["branches[0].steps[0].prob", "7.5"]),
]


@pytest.mark.parametrize("name,change,words", CASES, ids=[c[0] for c in CASES])
def test_an_impossible_value_is_refused_naming_its_field(qtbot, tab, tmp_path, name, change, words):
    data = _saved(qtbot, tab, tmp_path)
    before = [(b.id, b.parent, b.fork_step) for b in tab.run.branches()]
    n_errors = len(tab.errors)
    assert not tab.open_exploration(_edit(data, tmp_path / "bad.json", change))
    assert len(tab.errors) == n_errors + 1
    message = tab.errors[-1]
    assert "\n" not in message
    for w in words:
        assert w in message, (w, message)
    assert [(b.id, b.parent, b.fork_step) for b in tab.run.branches()] == before  # the tree shown stays


def test_the_unedited_file_still_opens(qtbot, tab, tmp_path):
    data = _saved(qtbot, tab, tmp_path)
    assert tab.open_exploration(_edit(data, tmp_path / "same.json", lambda d: None)), tab.errors[-1:]
    assert len(tab.run.branches()) == 2 and tab.run.current_branch() == 1 and tab.run.selected() == 4


def test_a_task_that_does_not_match_the_file_does_not_switch_tabs(qtbot, tmp_path, settings):
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    tab = w.speech_tab
    tab.model = FakeSpeechModel()
    errors = []
    for t in (w.speech_tab, w.ocr_tab, w.translation_tab):
        t.errorOccurred.connect(errors.append)
    w.tabs.setCurrentWidget(tab)
    data = _saved(qtbot, tab, tmp_path)
    path = _edit(data, tmp_path / "ocr.json", lambda d: d.update(task="ocr"))
    assert not w.open_exploration(path)
    assert w.current_tab() is tab
    assert "'task'" in errors[-1] and "'ocr'" in errors[-1] and "speech" in errors[-1].lower()
    w.close()


def test_validate_without_a_vocabulary_size_checks_the_rest():
    data = {"format": exploration.FORMAT, "version": 1, "task": "speech", "current": 0, "selected": None,
            "input": {"description": "x (1.00 s audio)", "sha256": "0", "settings": {"language": "en"}},
            "branches": [{"id": 0, "parent": None, "fork_step": 0, "forced_ids": [], "steps": [
                {"step": 0, "token_id": 10 ** 9, "text": "x", "prob": 0.5, "raw_prob": 0.5,
                 "topk": [], "raw_topk": [], "entropy": 0.1}]}]}
    branches = exploration.branches_from_json(data)  # no vocabulary: a huge id cannot be judged
    assert len(branches) == 1
    with pytest.raises(exploration.ExplorationError, match="token_id"):
        exploration.branches_from_json(data, vocab_size=50)


@pytest.mark.parametrize("description,settings,task", [
    ("tone (1.00 s audio)", {"language": "en", "task": "transcribe"}, "speech"),
    ("tone (1.00 s audio)", {}, "speech"),
    ("page.png (800×600 px, region 10×20 px at (1, 2))", {}, "ocr"),
    ("page.png (800×600 px)", {"region": None}, "ocr"),
    ("the text 'Olá mundo' (9 characters)", {"shortlist": True}, "translation"),
    ("something else", {}, None),
    ("tone (1.00 s audio)", {"region": None}, None),  # contradicts itself: not judged
])
def test_content_task_reads_each_tabs_inputs(description, settings, task):
    assert exploration.content_task({"input": {"description": description, "settings": settings}}) == task
