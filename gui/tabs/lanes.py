"""Decoding lanes in a run tab: the worker that decodes them and its bookkeeping.

:class:`LanesController` belongs to a :class:`gui.tabs.run.RunTab`. It owns the lanes'
model (:class:`~gui.lanes_state.LanesState`) and view (:class:`~gui.widgets.lanes.LanesView`,
the "Lanes" tab beside the heatmap). "Run lanes" builds each lane's options from the
options panel's (``core.tasks.lane_spec.parse_lane_spec``) and decodes them in a worker thread
with the tab's ``lanes_fn`` (the task model's ``decode_lanes``: one encoder pass per
segment, the lanes interleaved), started by the tab's run controller (slot "lanes",
``gui.run_controller``) whose pump hands the events on; they reach the model in one batch
per frame (:meth:`LanesController.flush`, a frame listener), as the run's events do.

One model, one decoding thread: lanes asked for while the tab decodes (a run, a fork, a
what-if) start when it ends; a new run of the tab (an option changed, another input)
stops the lanes first (``RunTab.request_decode``), and the tab counts the lanes as
decoding (forks wait for them). Cancel (Esc) stops them; the lanes keep what they got.

Lanes are decoded with the tab's model and settings beside the options (language, task,
timestamps: :meth:`LanesController.run_context`). When these change (a model switch,
ticking timestamps) the lanes are kept but marked as an earlier run
(``LanesState.mark_earlier``), checked when a model is ready and when the tab decodes again.
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QObject, QTimer

from core.analysis.metrics import metric_for
from core.tasks.lane_spec import parse_lane_spec
from core.tasks.lanes import LaneEvent, LanesFinished

from ..lanes_state import LanesState
from ..widgets.lanes import LanesView
from ..worker import WorkerHandle


class LanesController(QObject):
    """Runs a tab's lanes (module docstring); a client of the tab's run controller.

    Args:
        tab: the ``RunTab`` (its model, options panel, ``lanes_fn``, signals).

    Attributes:
        state: the lanes' model; view: the Lanes view (added to the tab's inspector tabs).
        handle: the running lanes worker, or None.
    """

    #: lane events wait for the frame's batch (``RunController.pump``)
    batched_events = (LaneEvent,)

    def __init__(self, tab: Any) -> None:
        super().__init__(tab)
        self.tab = tab
        self.state = LanesState(metric_for(tab.settings_key))
        self.view = LanesView(self.state)
        self.controller = tab.controller
        self._pending: list[str] | None = None  # specs waiting for the tab's decode to end
        self._context: dict[str, str] | None = None  # run_context() of the lanes shown
        self._batch: list = []  # lane events since the last frame
        self._t0 = 0.0
        self.controller.add_frame_listener(self.flush)
        self.view.runRequested.connect(self.run)
        self.view.stepClicked.connect(self._step_clicked)
        tab.busyChanged.connect(self._busy_changed)
        tab.modelReady.connect(lambda _model: self.check_context())

    # ---------------------------------------------------------------- state
    @property
    def handle(self) -> WorkerHandle | None:
        """The running lanes worker, or None."""
        return self.controller.handle("lanes")

    def running(self) -> bool:
        """A lanes run is decoding and was not cancelled."""
        return self.controller.active("lanes")

    def alive(self) -> bool:
        """The lanes worker thread has not ended (it may be stopping after a cancel)."""
        return self.controller.alive("lanes")

    def pending(self) -> bool:
        """Lanes wait for the tab's decode to end."""
        return self._pending is not None

    # ---------------------------------------------------------------- run
    def run(self, specs: list[str]) -> bool:
        """Decode the lanes ``specs`` (the options panel's options with each spec applied) on
        the current input. While the tab decodes, they wait and start when it ends. False
        (and a message) when they cannot start."""
        tab = self.tab
        try:
            base = tab.options_panel.options()
            lanes = [parse_lane_spec(s, base) for s in specs]
        except ValueError as exc:
            tab.show_error(f"Cannot run the lanes: {exc}")
            return False
        if tab.model is None or not tab.has_input():
            tab.statusMessage.emit("Load a model and an input, then run the lanes.")
            return False
        if getattr(tab, "lanes_fn", None) is None:
            tab.show_error(f"The {tab.title} tab cannot run lanes.")
            return False
        self.controller.abort("lanes")
        if tab.is_busy() or self.alive():  # one decoding thread per model
            self._pending = list(specs)
            tab.statusMessage.emit("The lanes start when the current run ends.")
            return True
        self._start(list(specs), lanes)
        return True

    def _start(self, specs: list[str], lanes: list) -> None:
        tab = self.tab
        try:
            fn = tab.lanes_fn(lanes)
        except (ValueError, RuntimeError) as exc:
            tab.show_error(str(exc))
            return
        tab.clear_error()
        self._pending = None
        self._batch.clear()
        self.state.start(specs, lanes)
        self._context = self.run_context()
        tab.inspector_tabs.setCurrentWidget(self.view)
        self._t0 = time.perf_counter()
        self.controller.start("lanes", fn, self, name="lanes")
        tab.busyChanged.emit(True, f"Decoding {len(lanes)} lanes on one encoder output…")

    def _busy_changed(self, busy: bool, _message: str) -> None:
        """The tab went idle: start the lanes that waited."""
        if not busy and self._pending is not None and not self.alive():
            specs, self._pending = self._pending, None
            QTimer.singleShot(0, lambda: self.run(specs))

    # ---------------------------------------------------------------- events (the controller's client)
    def on_event(self, ev: Any) -> None:
        """One lane event (from the controller's pump): kept for the frame's batch."""
        if isinstance(ev, (LaneEvent, LanesFinished)):
            self._batch.append(ev)

    def flush(self) -> None:
        """Hand the frame's lane events to the model (one ``grew`` per frame)."""
        events, self._batch = self._batch, []
        if events:
            self.state.add_events(events)
        done = next((e for e in events if isinstance(e, LanesFinished)), None)
        if done is not None:
            self._finished(done)

    def _finished(self, done: LanesFinished) -> None:
        st = done.stats
        what = "cancelled" if done.cancelled else f"{len(done.lanes)} lanes, {st.n_tokens} tokens"
        encoder = ("the encoder output of the run (cached)" if st.encoder_cached
                   else f"one encoder pass {1000 * st.encode_s:.0f} ms")
        self.tab.statusMessage.emit(f"Lanes: {what} · {encoder} · lanes {st.decode_s:.2f} s · "
                                    f"agreement {done.mean_agreement:.2f}")

    def on_error(self, message: str) -> None:
        """The lanes' worker failed: they keep what they got."""
        self.flush()
        self.state.end_unfinished("error")
        self.tab.show_error(f"The lanes failed: {message}")

    def on_end(self, _handle: WorkerHandle) -> None:
        """The lanes' worker ended (a run that stopped them has started already: the
        controller's deferred start)."""
        self.flush()
        if self.state.is_running():  # cancelled: the lanes keep what they got
            self.state.end_unfinished("cancelled")
        tab = self.tab
        if self._pending is not None and not tab.is_busy():
            specs, self._pending = self._pending, None
            self.run(specs)  # lanes asked for while these were stopping
        elif not tab.is_busy():
            tab.busyChanged.emit(False, "")

    def _step_clicked(self, lane: int, ev) -> None:
        """A lane's token clicked: its distribution in the top-k chart."""
        self.tab.show_step_event(ev)  # the run tab's public way; the chart is its view
        self.tab.statusMessage.emit(f"Lane {lane + 1} ({self.state.lanes[lane].spec}), step {ev.step}: {ev.text!r}")

    # ---------------------------------------------------------------- earlier runs
    def run_context(self) -> dict[str, str]:
        """What lanes decode with besides their options: the model's name and the tab's
        language, task and ``decode_extras()`` (timestamps, candidate languages), as text.
        A key a tab does not have is left out; a flag that is off is absent."""
        tab = self.tab
        ctx = {"model": str(getattr(tab.model, "name", "") or "?")}
        for key in ("language", "task"):
            fn = getattr(tab, key, None)
            if callable(fn):
                ctx[key] = str(fn())
        extras = getattr(tab, "decode_extras", None)
        for key, value in (extras() if callable(extras) else {}).items():
            if value not in (False, None, (), []):
                ctx[key] = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        return ctx

    def check_context(self) -> str:
        """Mark the lanes as an earlier run when what they were decoded with changed; the
        mark ("model tiny.en, timestamps off") or ""."""
        if self._context is None or not self.state.lanes or self.tab.model is None:
            return ""
        now, was = self.run_context(), self._context
        changed = [k for k in dict.fromkeys([*was, *now]) if was.get(k) != now.get(k)]
        what = ", ".join(_describe(k, was.get(k)) for k in changed)
        self.state.mark_earlier(what)
        return what

    # ---------------------------------------------------------------- tab hooks
    def stop_for_decode(self) -> bool:
        """The tab starts a run: stop the lanes first (and mark them as an earlier run when
        the model or a setting changed, :meth:`check_context`). True if lanes were running
        (the tab then starts its run when their thread ends: ``RunController.defer``)."""
        self._pending = None
        self.check_context()
        if not self.alive():
            return False
        self.cancel()
        return True

    def cancel(self) -> bool:
        """Cancel the lanes (Esc); they keep what they got. True if some were running or waiting."""
        was = self.running() or self._pending is not None
        self._pending = None
        if self.controller.abort("lanes"):
            self._batch.clear()
            self.state.end_unfinished("cancelled")
            self.tab.statusMessage.emit("Lanes cancelled")
        return was

    def clear(self) -> None:
        """The input changed: stop and forget the lanes."""
        self.cancel()
        self.state.clear()
        self._context = None

    def wait(self, msecs: int = 10000) -> None:
        """Cancel and wait for the lanes thread (window close)."""
        self.cancel()
        h = self.handle
        if h is not None:
            h.wait(msecs)


def _describe(key: str, value: str | None) -> str:
    """One changed setting as the lanes had it: "model tiny.en", "timestamps off"."""
    if value is None or value == "False":
        return f"{key.replace('_', ' ')} off"
    if value == "True":
        return f"{key.replace('_', ' ')} on"
    return f"{key.replace('_', ' ')} {value}"
