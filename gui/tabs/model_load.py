"""A run tab's model load (``gui.tabs.run.RunTab.load_model``): :class:`ModelLoader` starts it
in the tab's run controller and hands the model to the tab, :class:`ModelLoad` is the
controller's client for one load, and the relay carries the loader's progress text into the
GUI thread.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Protocol

from PySide6.QtCore import QObject, Signal

from .. import preload
from ..worker import WorkerHandle


class LoadingTab(Protocol):
    """What the load tells its tab (:class:`ModelLoader` has it)."""

    def model_ready(self, model: Any) -> None: ...

    def show_error(self, message: str) -> None: ...

    def model_load_ended(self) -> None: ...


class ProgressRelay(QObject):
    """Carries progress text from a worker thread into the GUI thread (queued signal)."""

    text = Signal(str)


class ModelLoad:
    """The run controller's client for a model load: the model, or the error, then the end."""

    def __init__(self, tab: LoadingTab, name: str) -> None:
        self.tab, self.name = tab, name

    def on_event(self, model: Any) -> None:
        """The loaded model: the tab takes it (:meth:`ModelLoader.model_ready`)."""
        self.tab.model_ready(model)

    def on_error(self, message: str) -> None:
        """The load failed: the banner says which model and why."""
        self.tab.show_error(f"Could not load model {self.name!r}: {message}")

    def on_end(self, _handle: WorkerHandle) -> None:
        """The load's worker ended (loaded, failed or cancelled)."""
        self.tab.model_load_ended()


_paused = 0  # model loads running with the garbage collector paused
_was_enabled = True  # whether it was on when the first of them paused it
_paused_lock = threading.Lock()


@contextmanager
def collector_paused(freeze: bool | None = None) -> Iterator[None]:
    """Python's cyclic garbage collector paused while a model loads, where the window's
    garbage-collection policy is in force (``gui.gc_policy``; ``freeze`` defaults to whether it
    is installed): when the last of the running loads ends, however it ends, what they made
    is frozen, here in the loader's thread (``gc.freeze``, no walk), and the collector is on
    again (if it was). Without the policy (``freeze`` False) it does nothing.

    A load allocates hundreds of thousands of container objects (the first one imports
    transformers and the backend; every one parses a tokenizer), and every so many of them
    Python ran a collection, on the loader's thread but with the GIL held: the full ones
    walked everything not frozen and stalled the window for 95-110 ms (bench_gui_stall --case
    switch --cold, issue 22). Paused, and frozen at the end, no collection walks them: the
    policy's young collection once the model is ready finds nothing left to walk (paused
    without the freeze, that one collection walked them all, on the GUI thread). The load
    makes no garbage cycles to speak of; a frozen one is reclaimed at the next model switch
    that collects in full."""
    global _paused, _was_enabled
    if freeze is None:
        from .. import gc_policy

        freeze = gc_policy.installed()
    if not freeze:
        yield
        return
    with _paused_lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0:
                gc.freeze()
                if _was_enabled:
                    gc.enable()


class ModelLoader:
    """A run tab's model loads (``gui.tabs.run.RunTab``): each starts in the tab's run
    controller; the loader's progress text goes to the busy bar; the loaded model becomes the
    tab's ``model``, and a decode of the input follows."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self.relay = ProgressRelay(tab)
        self.relay.text.connect(self._on_progress)

    def load(self, name: str) -> None:
        """Load ``name`` in a worker thread (the running decode is cancelled; the tab has no
        model until it is loaded); a decode follows if there is an input. The worker
        first loads torch's shared libraries with the GIL released (:mod:`gui.preload`; once
        per process), then the model (whose import of torch then holds the GIL only briefly)."""
        tab = self.tab
        tab.controller.defer(None)
        tab.controller.abort("decode")
        tab.clear_error()
        tab.model = None
        emit = self.relay.text.emit

        def gen(cancel):
            preload.load_libraries()  # torch's libraries, loaded with the GIL released (once per process)
            with collector_paused():  # no collection with the GIL held in the middle of the load
                loaded = [tab.load_model_object(name, emit)]
            # no local names the model: an exception saved during the load's first imports keeps
            # this frame (its callers' chain) alive, and a local here kept the model after a switch
            yield loaded.pop()

        tab.busyChanged.emit(True, f"Loading model {name}…")
        tab.controller.start("load", gen, ModelLoad(self, name), name=f"load-{name}")

    def _on_progress(self, text: str) -> None:
        if self.tab.is_loading():
            self.tab.busyChanged.emit(True, text)

    def model_ready(self, model: Any) -> None:
        """A model finished loading: the tab takes it (``model_loaded``), the status bar says so."""
        tab = self.tab
        tab.model = model
        tab.model_loaded(model)
        load_s = getattr(model, "load_s", 0.0) or 0.0
        tab.statusMessage.emit(f"Loaded {getattr(model, 'name', 'model')} in {load_s:.1f} s")
        tab.statsChanged.emit(tab.stats_dict(None))
        tab.modelReady.emit(model)

    def show_error(self, message: str) -> None:
        """The load failed: the tab's banner shows ``message``."""
        self.tab.show_error(message)

    def model_load_ended(self) -> None:
        """The model load's worker ended (loaded, failed or cancelled)."""
        tab = self.tab
        if not tab.is_busy():
            tab.busyChanged.emit(False, "")
        if tab.model is not None and tab.has_input():
            tab.request_decode()
