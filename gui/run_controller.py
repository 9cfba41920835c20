"""The one owner of a run tab's worker threads and the one event pump.

A :class:`RunController` starts, supersedes and cancels the workers of a tab (the model
load, the decode — a run, a fork or a what-if: one decoding thread — and the lanes), and
hands their events to the client that started each one, in order, on the GUI thread.

The path of an event from a worker to the pixels waits in two queues only:

1. the worker's locked queue (``gui.worker.Mailbox``; the worker is started in *pull*
   mode, ``start_worker(on_ready=)``): :meth:`RunController.pump` takes the items one at a
   time straight from it, at most :data:`MAX_EVENTS_PER_FRAME` or :data:`PUMP_BUDGET_S`
   seconds' worth per turn of the event loop, the first turn :data:`FRAME_MS` after the
   first item arrived (so a fast decoder cannot flood the GUI thread);
2. the model's per-frame batch: a client puts a step into ``RunState`` (or ``LanesState``)
   at once; the frame listeners (:meth:`RunController.add_frame_listener`: the run state's
   ``flush``, the lanes' ``flush``) run once at the end of each pump turn and emit one
   signal per frame to the views.

Clients (:class:`RunClient`): the run tab's decode and model load (long-form runs are
decodes: the Speech tab's ``gui.tabs.longform`` takes their attempts first), forking
(``gui.tabs.forking``), what-ifs (``gui.tabs.whatif``), lanes (``gui.tabs.lanes``), the
word-timing bar's refine (``gui.tabs.refine_words``, slot "refine") and word timing's
alignment and end-of-text rows (``gui.tabs.word_timing``, slots "align" and "end-rows",
through :class:`Callbacks`). The sweep view (``gui.sweep_view``) has its own controller, with the
slots "sweep-read" (a sweep's results.parquet and plots) and "sweep-row" (a row's trace). They
only use the public methods here.

One model, one decoding thread: a start that must wait for the decoding workers (``decode``
and ``lanes``) to end is *deferred* (:meth:`RunController.defer`) and runs when the last of
them has ended.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Protocol

from PySide6.QtCore import QObject, QTimer

from core.events import BeamEvent, SegmentEvent, SpeculationRound, StepEvent

from .worker import NOTHING, WorkerEnded, WorkerFailed, WorkerHandle, start_worker

#: the first pump turn after events arrive waits this many ms (~30 frames/s)
FRAME_MS = 33
#: at most this many events, or this many seconds of handling them, per turn of the event loop
MAX_EVENTS_PER_FRAME = 400
PUMP_BUDGET_S = 0.015
#: the slots whose workers decode with the tab's model (one decoding thread at a time); "live":
#: the Speech tab's live session (``gui.tabs.live``), a streaming decode of the microphone
DECODING_SLOTS = ("decode", "lanes", "live")


#: events that wait for the frame's batch: before any other event the frame listeners run
#: (so a client's end handling sees every earlier token in the views); a speculation round
#: (after its steps) waits with them, else each round would cost a frame
BATCHED_EVENTS = (StepEvent, BeamEvent, SegmentEvent, SpeculationRound)


class RunClient(Protocol):
    """What a worker's events go to (all calls on the GUI thread, in the worker's order).
    A client may name more event types that wait for the frame's batch (``batched_events``,
    a tuple of types; the lanes' ``LaneEvent``)."""

    def on_event(self, ev: Any) -> None:
        """One item the worker's generator yielded."""

    def on_error(self, message: str) -> None:
        """The generator raised (after its earlier items); ``message`` is for the user."""

    def on_end(self, handle: WorkerHandle) -> None:
        """The worker's thread ended and every item was handed on (also after a cancel)."""


class Callbacks:
    """A :class:`RunClient` made of functions, for a worker whose events go to one closure
    (word timing's alignment): ``on_event(item)``, ``on_error(message)`` (default: ignored)
    and ``on_end()`` (default: nothing)."""

    def __init__(self, on_event: Callable[[Any], None], on_error: Callable[[str], None] | None = None,
                 on_end: Callable[[], None] | None = None) -> None:
        self._on_event, self._on_error, self._on_end = on_event, on_error, on_end

    def on_event(self, ev: Any) -> None:
        self._on_event(ev)

    def on_error(self, message: str) -> None:
        if self._on_error is not None:
            self._on_error(message)

    def on_end(self, _handle: WorkerHandle) -> None:
        if self._on_end is not None:
            self._on_end()


class RunController(QObject):
    """Starts, supersedes and cancels a tab's workers; the one event pump (module docstring).

    Each worker lives in a named *slot* ("load", "decode", "lanes"): starting a worker in a
    slot aborts the one there (its queued events are dropped; its end still reaches its
    client).
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._slots: dict[str, WorkerHandle] = {}
        self._jobs: list[tuple[WorkerHandle, RunClient]] = []  # every live worker, oldest first
        self._frame_listeners: list[Callable[[], None]] = []
        self._deferred: Callable[[], None] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.pump)

    # ------------------------------------------------------------ workers
    def start(self, slot: str, fn: Callable, client: RunClient, name: str | None = None) -> WorkerHandle:
        """Run ``fn(cancel)`` (a generator function) in a worker thread for ``client``;
        a worker running in ``slot`` is aborted first. Returns its handle."""
        self.abort(slot)
        handle = start_worker(fn, on_ready=self._wake, name=name or slot)
        self._slots[slot] = handle
        self._jobs.append((handle, client))
        return handle

    def handle(self, slot: str) -> WorkerHandle | None:
        """The worker last started in ``slot`` while its thread runs (None after its end)."""
        return self._slots.get(slot)

    def active(self, slot: str) -> bool:
        """A worker in ``slot`` runs and was not cancelled."""
        h = self._slots.get(slot)
        return bool(h is not None and h.running and not h.abort_requested)

    def alive(self, slot: str) -> bool:
        """A worker in ``slot`` has not ended (it may be stopping after a cancel)."""
        h = self._slots.get(slot)
        return bool(h is not None and h.running)

    def abort(self, slot: str) -> bool:
        """Cancel the worker in ``slot``: it stops after its current step, the events it
        queued are dropped (its end still comes). True if one was running."""
        h = self._slots.get(slot)
        if h is None or not h.running or h.abort_requested:
            return False
        h.abort()
        return True

    def abort_all(self) -> None:
        """Cancel every worker (window close)."""
        for slot in list(self._slots):
            self.abort(slot)

    def idle(self) -> bool:
        """No worker thread runs, cancelled ones included."""
        return not any(h.running for h, _c in self._jobs)

    def defer(self, start: Callable[[], None] | None) -> None:
        """Call ``start()`` once no decoding worker (:data:`DECODING_SLOTS`) is alive (now,
        if none is); it replaces an earlier deferred start. None forgets it."""
        self._deferred = start
        if start is not None and not self.decoding_alive():
            self._run_deferred()

    def deferred(self) -> bool:
        """A start waits for the decoding workers to end."""
        return self._deferred is not None

    def decoding_alive(self) -> bool:
        return any(self.alive(s) for s in DECODING_SLOTS)

    def _run_deferred(self) -> bool:
        start, self._deferred = self._deferred, None
        if start is None:
            return False
        start()
        return True

    def wait(self, msecs: int = 10000) -> None:
        """Block until every worker thread has ended (window close; abort them first)."""
        for h, _c in list(self._jobs):
            h.wait(msecs)

    # ------------------------------------------------------------ the pump
    def add_frame_listener(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` at the end of each pump turn (and before an event other than a
        step, beams or a segment): the models' per-frame flush."""
        self._frame_listeners.append(fn)

    def frame(self) -> None:
        """Run the frame listeners now (the views catch up with the models)."""
        for fn in self._frame_listeners:
            fn()

    def _wake(self) -> None:
        try:
            if not self._timer.isActive():
                self._timer.start(FRAME_MS)
        except RuntimeError:  # the tab is gone (its C++ timer deleted) while a worker still reported
            pass

    def waiting(self) -> bool:
        """Events (or ends) of some worker wait to be handed on."""
        return any(h.waiting() for h, _c in self._jobs)

    def pump(self, max_events: int = MAX_EVENTS_PER_FRAME, budget_s: float | None = PUMP_BUDGET_S) -> None:
        """Hand the workers' events to their clients in order, at most ``max_events`` or
        ``budget_s`` seconds' worth (None: no time limit), then run the frame listeners
        once; the rest waits for the next turn of the event loop (timers and paints run in
        between)."""
        self._timer.stop()
        deadline = time.perf_counter() + budget_s if budget_s is not None else math.inf
        n = 0
        for handle, client in list(self._jobs):
            batched = BATCHED_EVENTS + tuple(getattr(client, "batched_events", ()))
            while n < max_events and time.perf_counter() < deadline:
                ev = handle.next_item()
                if ev is NOTHING:
                    break
                n += 1
                if isinstance(ev, WorkerEnded):
                    self.frame()
                    self._ended(handle, client)
                    break
                if isinstance(ev, WorkerFailed):
                    self.frame()
                    client.on_error(ev.message)
                    continue
                if not isinstance(ev, batched):
                    self.frame()
                client.on_event(ev)
        cut = n >= max_events or time.perf_counter() >= deadline  # the budget, not the events, ran out
        self.frame()
        if self.waiting():
            # cut short: more at the next turn, after timers and paints; else what arrived
            # meanwhile waits for the next frame (a pump every millisecond would take the
            # GIL from the decoding worker)
            self._timer.start(1 if cut else FRAME_MS)

    def drain(self) -> None:
        """Hand on the events waiting now (a fork or a what-if starts after the last run's
        events reached the views); events a running worker adds meanwhile wait for the pump
        (a fast worker cannot keep this loop going)."""
        n = sum(h.queued() for h, _c in self._jobs)
        if n:
            self.pump(max_events=n, budget_s=None)

    def _ended(self, handle: WorkerHandle, client: RunClient) -> None:
        self._jobs = [(h, c) for h, c in self._jobs if h is not handle]
        slot = next((s for s, h in self._slots.items() if h is handle), None)
        if slot is not None:
            del self._slots[slot]
        if self._deferred is not None and not self.decoding_alive():
            self._run_deferred()
        client.on_end(handle)
