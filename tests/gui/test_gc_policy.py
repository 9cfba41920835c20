"""The window's garbage-collection policy (issue 19 §3): a full collection walks only the
objects made since the previous one, and the model's objects are frozen once it has loaded,
so no full collection walks the ~480,000 objects of torch and the model (230-300 ms with the
GIL held, the GUI thread stalled)."""

from __future__ import annotations

import gc
import weakref

import pytest
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QTabWidget, QWidget

from gui import gc_policy


class _Node:
    pass


@pytest.fixture
def policy():
    yield gc_policy
    gc_policy.uninstall()


def test_nothing_is_frozen_until_the_policy_is_installed():
    assert not gc_policy.installed()
    before = gc.get_freeze_count()
    gc_policy.settle()
    assert gc.get_freeze_count() == before


def test_installed_it_freezes_what_is_alive_and_the_survivors_of_each_full_collection(policy):
    policy.install()
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the interpreter's and the test session's objects
    alive = [_Node() for _ in range(5000)]
    # not frozen by being made (<=: a frozen object freed meanwhile by reference counting, e.g. a
    # finished background thread's, lowers the count; the full suite once saw 2 fewer)
    assert gc.get_freeze_count() <= frozen
    gc.collect()  # a full collection: its survivors (the 5000 nodes among them) are frozen after it
    assert gc.get_freeze_count() >= frozen + 5000
    assert all(gc.is_tracked(n) for n in alive[:3])
    tracked = gc.get_objects()  # only the unfrozen objects: the nodes are not among them any more
    assert not any(o is alive[0] for o in tracked)


class _Tab(QWidget):
    modelReady = Signal(object)


class _Window(QObject):
    """What the policy sees of the main window: ``tabs``, whose task tabs signal ``modelReady``
    (``_Window(extra_tab=True)`` adds a tab without a model)."""

    def __init__(self, extra_tab: bool = False):
        super().__init__()
        self.tabs = QTabWidget()
        self.tab = _Tab()
        self.tabs.addTab(self.tab, "t")
        if extra_tab:
            self.tabs.addTab(QWidget(), "no model")


def test_a_tab_model_load_freezes_again(qtbot, policy):
    win = _Window(extra_tab=True)
    qtbot.addWidget(win.tabs)
    policy.install(win)
    frozen = gc.get_freeze_count()
    model = [_Node() for _ in range(3000)]  # "the model's objects"
    win.tab.modelReady.emit(model)
    assert gc.get_freeze_count() >= frozen + 3000


def test_uninstall_unfreezes(policy):
    policy.install()
    policy.uninstall()
    assert gc.get_freeze_count() == 0 and not policy.installed()


class _Model:
    """A model whose objects hold a reference cycle, as a loaded SpeechModel does (it is freed
    only by a full collection, not by reference counting)."""

    def __init__(self):
        self.parts = [_Node() for _ in range(100)]
        self.me = self


def test_a_model_replaced_in_a_tab_is_reclaimed_not_frozen_for_good(qtbot, policy):
    win = _Window()
    qtbot.addWidget(win.tabs)
    policy.install(win)
    tab = win.tab
    tab.model = _Model()
    first = weakref.ref(tab.model)
    tab.modelReady.emit(tab.model)  # loaded: frozen with everything else
    tab.model = _Model()  # the user picks another model: the first one is cyclic garbage now
    tab.modelReady.emit(tab.model)
    assert first() is None  # a frozen cycle would stay in memory for good (a whole model per switch)
    second = weakref.ref(tab.model)
    tab.model = _Model()
    tab.modelReady.emit(tab.model)
    assert second() is None
