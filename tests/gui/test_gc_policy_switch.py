"""A model switch runs a full garbage collection only where one is needed (issue 22: "model
load with no stall > 100 ms"; the full collection took 280-500 ms with the GIL held on the
GUI thread at every switch). The old model freed by reference counting already, or kept by the
tab on purpose (the Translation tab's loaded directions), needs none; a model in a reference
cycle still gets one (``test_gc_policy.py::test_a_model_replaced_in_a_tab_is_reclaimed_not_frozen_for_good``)."""

from __future__ import annotations

import gc

import pytest
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QTabWidget, QWidget

from gui import gc_policy


class _Model:
    """A model without reference cycles: freed as soon as nothing refers to it."""


class _Tab(QWidget):
    modelReady = Signal(object)

    def __init__(self):
        super().__init__()
        self.model = None
        self.cache: list = []

    def kept_models(self):
        """The models the tab keeps on purpose (as the Translation tab's loaded directions)."""
        return list(self.cache)


class _Window(QObject):
    def __init__(self):
        super().__init__()
        self.tabs = QTabWidget()
        self.tab = _Tab()
        self.tabs.addTab(self.tab, "t")


@pytest.fixture
def full_collections():
    """Counts the full (generation 2) collections from now on."""
    seen = []

    def hook(phase, info):
        if phase == "start" and info.get("generation") == 2:
            seen.append(1)

    gc.callbacks.append(hook)
    yield seen
    gc.callbacks.remove(hook)
    gc_policy.uninstall()


def _with_policy(qtbot):
    """(window, its tab) with the gc policy installed."""
    win = _Window()
    qtbot.addWidget(win.tabs)
    gc_policy.install(win)
    return win, win.tab


def test_replacing_a_model_freed_by_reference_counting_runs_no_full_collection(qtbot, full_collections):
    win, tab = _with_policy(qtbot)
    tab.model = _Model()
    tab.modelReady.emit(tab.model)
    full_collections.clear()
    tab.model = _Model()  # the first is freed here, by reference counting
    tab.modelReady.emit(tab.model)
    assert full_collections == []


def test_replacing_a_model_the_tab_keeps_runs_no_full_collection(qtbot, full_collections):
    win, tab = _with_policy(qtbot)
    tab.model = _Model()
    tab.cache.append(tab.model)  # a collection would free nothing: the tab keeps it for a switch back
    tab.modelReady.emit(tab.model)
    full_collections.clear()
    tab.model = _Model()
    tab.cache.append(tab.model)
    tab.modelReady.emit(tab.model)
    assert full_collections == []


def test_replacing_a_model_something_else_still_holds_runs_one_full_collection(qtbot, full_collections):
    win, tab = _with_policy(qtbot)
    tab.model = _Model()
    held = [tab.model]  # (a reference cycle, or a holder the policy cannot tell from one)
    tab.modelReady.emit(tab.model)
    full_collections.clear()
    tab.model = _Model()
    tab.modelReady.emit(tab.model)
    assert full_collections == [1]
    assert held
