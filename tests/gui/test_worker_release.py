"""A finished worker lets go of its generator function (issue 22, "model load with no stall"):
a model captured by a decode's closure is freed by reference counting when the tab drops it,
so a model switch needs no full garbage collection (~300-500 ms with the GIL held) to reclaim it."""

from __future__ import annotations

import gc
import weakref

import pytest

from gui.worker import NOTHING, WorkerEnded, start_worker


class _Model:
    """Stands for a loaded model a decode closure captures."""


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _closure_over(model):
    def gen(cancel):
        yield type(model).__name__  # the closure holds the model, as a tab's decode_fn does

    return gen


def test_a_finished_worker_frees_what_its_generator_function_held(qtbot, no_gc):
    model = _Model()
    gone = weakref.ref(model)
    done = []
    handle = start_worker(_closure_over(model), on_event=lambda _x: None, on_finished=lambda: done.append(1))
    qtbot.waitUntil(lambda: bool(done), timeout=5000)
    qtbot.wait(50)  # the thread's deleteLater
    del model
    assert gone() is None, "the finished worker (or its handle) still holds the generator function's closure"
    assert not handle.running


def test_a_pulled_worker_frees_its_generator_function_once_ended(qtbot, no_gc):
    model = _Model()
    gone = weakref.ref(model)
    items = []
    handle = start_worker(_closure_over(model), on_ready=lambda: None)

    def drained():
        while (item := handle.next_item()) is not NOTHING:
            items.append(item)
        return bool(items) and isinstance(items[-1], WorkerEnded)

    qtbot.waitUntil(drained, timeout=5000)
    qtbot.wait(50)
    items.clear()
    del model
    assert gone() is None, "the ended pulled worker still holds the generator function's closure"


def test_a_frame_kept_from_inside_a_model_load_does_not_keep_the_replaced_model(qtbot, no_gc, monkeypatch):
    """An exception saved during the load's first imports keeps its frames, whose callers'
    chain reaches the loader's generator and the worker's loop: neither may name the model."""
    import sys

    from gui import preload

    from .fakes import FakeSpeechModel
    from .tab_helpers import speech_tab

    tabs = speech_tab(qtbot, None)
    tab = next(tabs)
    kept = []

    def load(name, progress):
        kept.append(sys._getframe())  # as a traceback saved by an import inside the load would
        return FakeSpeechModel()

    monkeypatch.setattr(preload, "load_libraries", lambda: [])
    monkeypatch.setattr(tab, "load_model_object", load)
    tab.load_model("first")
    qtbot.waitUntil(lambda: tab.model is not None and not tab.is_loading(), timeout=5000)
    qtbot.wait(50)
    first = weakref.ref(tab.model)
    tab.load_model("second")
    qtbot.waitUntil(lambda: tab.model is not None and not tab.is_loading(), timeout=5000)
    qtbot.wait(50)
    assert first() is None, "a kept frame of the first load still names its model"
    kept.clear()
    next(tabs, None)
