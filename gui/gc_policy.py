"""The window's garbage-collection policy (issue 19 §3, GUI stalls on long runs).

With whisper-base loaded the process holds about 480,000 objects the cyclic garbage
collector tracks (torch, transformers, Qt wrappers, the model's modules); a full (generation
2) collection walks all of them and took 230-300 ms of CPU here, 2.4 s of wall time on a
loaded machine. Python runs one now and then as a long run's objects pile up, in whichever
thread allocates, and holds the GIL throughout: the GUI thread stalls for all of it.

The policy: what is alive once the window is open, and again after each model load, is
frozen (``gc.freeze``: moved to the permanent generation, which collections skip), and so
are the survivors of each full collection. A full collection then walks only the objects
made since the previous one. Objects still die by reference counting as before, but a
reference cycle among frozen objects is not reclaimed until they are unfrozen. A loaded
model is such a cycle (a SpeechModel is freed only by a full collection), so when a tab's
model is REPLACED and still alive (something holds it: a cycle, or a holder the policy cannot
tell from one), everything is unfrozen and collected once (one full collection, ~300 ms, at
the model switch the user asked for) before freezing again: the old model is reclaimed. An old
model already freed by reference counting, or kept by its tab (``kept_models()``), needs none.
A tab's first model load costs only a young-generation collection. The tests do not install
it; the app (``gui.app``) and ``tests/bench/bench_gui_stall.py`` do.
"""

from __future__ import annotations

import gc

_installed = False
_followed: list = []  # the tabs' _ModelLoads


def installed() -> bool:
    """Whether :func:`install` is in force."""
    return _installed


def settle(full: bool = False) -> None:
    """Collect the young generations (cheap; with ``full``, unfreeze and collect everything,
    ~300 ms with a model loaded) and freeze everything alive: later full collections skip it.
    A no-op unless :func:`install` ran."""
    if not _installed:
        return
    if full:
        gc.unfreeze()
        gc.collect()  # the callback below freezes the survivors
    else:
        gc.collect(1)
    gc.freeze()


def _after_collection(phase: str, info: dict) -> None:
    """``gc.callbacks`` hook: the survivors of a full collection are frozen."""
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


def install(window=None) -> None:
    """Put the policy in force: freeze what is alive now, freeze the survivors of each full
    collection, and (given the main ``window``) freeze again whenever one of its tabs' models
    has loaded (each tab's ``modelReady``)."""
    global _installed
    _installed = True
    if _after_collection not in gc.callbacks:
        gc.callbacks.append(_after_collection)
    settle()
    if window is not None:
        tabs = window.tabs
        for i in range(tabs.count()):
            ready = getattr(tabs.widget(i), "modelReady", None)
            if ready is not None:
                loads = _ModelLoads(tabs.widget(i))
                _followed.append(loads)  # Qt keeps only a weak reference to a bound method's object
                ready.connect(loads.loaded)


class _ModelLoads:
    """One tab's model loads: the first only freezes; a later one replaced a model, whose
    reference cycles only a full collection of unfrozen objects reclaims. That collection
    (280-500 ms with the GIL held, the window stalled; issue 22) runs only where it can free
    something: not when the old model is gone already (freed by reference counting: the
    loaded models have no cycles and a finished worker lets go of its closure) nor when the
    tab keeps it on purpose (its ``kept_models()``: the Translation tab's loaded directions)."""

    def __init__(self, tab=None) -> None:
        self.seen = False
        self.tab = tab
        self.previous = lambda: None  # a weak reference to the tab's current model

    def loaded(self, model) -> None:
        old = self.previous()
        kept = getattr(self.tab, "kept_models", None)
        needed = self.seen and old is not None and old is not model and not (
            kept is not None and any(m is old for m in kept()))
        del old
        self.previous = _weak(model)
        settle(full=needed)
        self.seen = True


def _weak(obj):
    """A weak reference to ``obj``, or (not weak-referenceable) a function that keeps
    answering "alive" without holding it: the next switch collects in full as before."""
    import weakref

    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: True


def uninstall() -> None:
    """Back to Python's own collection: the hook goes, the frozen objects are collectable
    again (the next full collection walks them)."""
    global _installed
    _installed = False
    _followed.clear()
    if _after_collection in gc.callbacks:
        gc.callbacks.remove(_after_collection)
    gc.unfreeze()
