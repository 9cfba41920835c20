"""The views of a decode run and the machinery that feeds them (every task tab shares it).

::

    ┌ input area (subclass) ──────────┬ options panel ─────────┐
    ├ token stream (strip: entropy, varentropy, kept, μ) ──────┤
    ├ top-k | chain stages ───────────┬ cross-attention ───────┤

(``QSplitter``s; sizes persist.) The step strip sits above the token chips; the selected
step's distribution is shown as the top-k chart or, per stage of the sampler chain, as
the stage view (``StepInspector``), with "Sample ×N" over the chart.

A subclass supplies the input area, how to load its model and how to decode its input;
this class runs both in worker threads
(``gui.worker.start_worker``), keeps the run's steps in a :class:`~gui.run_state.RunState`,
feeds the events to the views at most once per frame, re-decodes when an option changes
(cancelling the running decode first), and reports errors inline (a banner at the top
of the tab) and through ``errorOccurred`` for the status bar.

:class:`gui.tabs.base.DecodeTab` adds what the tabs' input areas share (model picker,
samples, Open…, drops, settings).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from typing import Any, Callable, Iterator

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from core.events import BeamEvent, Finished, RunStats, SegmentEvent, StepEvent
from core.options import BEAM_STRATEGIES, DecodingOptions

from ..run_state import RunState
from ..widgets.attention_heatmap import AttentionHeatmap
from ..widgets.beam_tree import BeamTreeView
from ..widgets.error_banner import ErrorBanner
from ..widgets.logit_lens import LogitLensView
from ..widgets.options_panel import OptionsPanel
from ..widgets.stage_view import StageView, StepInspector
from ..widgets.step_strip import STRIP_HEIGHT, StepStrip
from ..widgets.token_stream import TokenStreamView
from ..widgets.topk_chart import TopKChart
from ..worker import WorkerHandle, start_worker
from .forking import ForkMixin
from .lanes import LanesController
from .whatif import WhatIfMixin

#: the views take the events of a running decode at most once per this many ms (~30 frames/s)
FRAME_MS = 33
#: at most this many events, or this many seconds of handling them, per turn of the event loop
MAX_EVENTS_PER_FRAME = 400
PUMP_BUDGET_S = 0.015


class _RunEnded:
    """Queued behind a run's last event: its worker thread has ended."""

    def __init__(self, handle: WorkerHandle) -> None:
        self.handle = handle


class _RunError:
    """Queued behind the events a run yielded before it failed: the message for the user."""

    def __init__(self, message: str) -> None:
        self.message = message


class _Relay(QObject):
    """Carries progress text from a worker thread into the GUI thread (queued signal)."""

    text = Signal(str)


class RunTab(ForkMixin, WhatIfMixin, QWidget):
    """The layout, the model load and the decode run of a task tab.

    Subclasses implement :meth:`build_input`, :meth:`load_model_object`,
    :meth:`decode_fn`, :meth:`has_input` and may override :meth:`model_loaded`,
    :meth:`configure_heatmap`, :meth:`rtf_applies` and :meth:`toggle_record`; a tab that
    implements :meth:`lanes_fn` runs decoding lanes (the "Lanes" tab, ``gui.tabs.lanes``).

    Signals:
        statusMessage(str): a transient message for the status bar.
        statsChanged(dict): run statistics for the status bar: keys ``encode_ms``,
            ``ms_per_token``, ``tokens_per_s``, ``rtf`` (None if not speech), ``model``,
            ``device``, ``n_tokens``, ``live`` (True while decoding).
        busyChanged(bool, str): a model load/decode started (True, what) or ended.
        progressChanged(int, int): (segments done, segments in all) of a long input
            (sentence i of n, 30 s window i of n); the status bar's busy bar shows it.
        errorOccurred(str): a user-facing error message.
        modelReady(object): a model finished loading.
        decodeFinished(object): the ``Finished`` event of a completed (not superseded) run.
        forkFinished(int): a fork's branch (its id) finished decoding (``gui.tabs.forking``).
    """

    title = "Task"
    #: QSettings group for this tab
    settings_key = "task"
    #: default heights in pixels of (input + options, token stream, top-k + attention) for a
    #: 1400 x 900 window; a subclass whose input needs more height overrides it
    main_splitter_sizes: tuple[int, int, int] = (290, 190, 370)

    statusMessage = Signal(str)
    statsChanged = Signal(dict)
    busyChanged = Signal(bool, str)
    progressChanged = Signal(int, int)
    errorOccurred = Signal(str)
    modelReady = Signal(object)
    decodeFinished = Signal(object)
    forkFinished = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model: Any = None
        self._load: WorkerHandle | None = None
        self._decode: WorkerHandle | None = None
        self._pending_decode = False
        #: the current run's steps, the newest and the selected step (views query it)
        self.run = RunState(self)
        self._t_first: float | None = None
        self._n_live = 0
        self._relay = _Relay(self)
        self._relay.text.connect(self._on_progress)
        #: the last statistics and busy state this tab reported (the window shows them when
        #: the tab becomes the current one, so each tab's status bar is its own)
        self.last_stats: dict = {}
        self.busy_message = ""
        #: (segments done, segments in all) of the running decode, or None
        self.progress: tuple[int, int] | None = None
        self.statsChanged.connect(self._remember_stats)
        self.busyChanged.connect(self._remember_busy)
        self.progressChanged.connect(self._remember_progress)
        # Views are updated at most once per frame: StepEvents (and the latest BeamEvent)
        # wait here until the flush timer fires, so a fast decoder cannot flood the GUI thread.
        self._view_queue: list[StepEvent | SegmentEvent] = []
        self._pending_beams: BeamEvent | None = None
        self._beam_queue: list[BeamEvent] = []  # every BeamEvent since the last frame (the beam tree's nodes)
        self._progress_due: tuple[int, int, str] | None = None  # (done, total, kind) to show
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FRAME_MS)
        self._flush_timer.timeout.connect(self._pump)
        self._inbox: deque = deque()  # worker events not yet handed to _on_event

        self.banner = ErrorBanner()
        self.options_panel = OptionsPanel()
        self.stream = TokenStreamView()
        self.strip = StepStrip()
        self.stream.set_strip(self.strip)
        self.topk = TopKChart()
        self.stages = StageView()
        self.inspector = StepInspector(self.topk, self.stages)
        self.heatmap = AttentionHeatmap()
        self._init_forking()  # the fork diff and branch tree, tabbed with the heatmap
        self._init_whatif()  # the What if view (input masks, no input), a tab beside them
        self.beam_tree = BeamTreeView()  # a tab beside them for beam strategies (show_beam_tree)
        self.beam_tree.column_axis = self.heatmap.column_axis
        self.beam_tree.column_count = self.heatmap.column_count
        self.add_inspector_view(self.beam_tree, "Beam tree")
        self.show_beam_tree(False)
        self.lens_view = LogitLensView(self.run)  # layers x steps; its Capture box re-decodes with the lens
        self.add_inspector_view(self.lens_view, "Logit lens")
        self.lanes = LanesController(self)  # strategies side by side on one encoder output
        self.add_inspector_view(self.lanes.view, "Lanes")
        self.input_area = self.build_input()
        self._build_layout()

        self.options_panel.optionsChanged.connect(self._options_changed)
        self.stream.stepSelected.connect(self.select_step)
        self.strip.stepSelected.connect(self.select_step)
        self.stream.cleared.connect(self.strip.clear)
        self.heatmap.stepSelected.connect(self.select_step)
        self.beam_tree.stepSelected.connect(self.select_step)
        self.lens_view.stepSelected.connect(self.select_step)
        self.lens_view.captureChanged.connect(self._lens_capture_changed)
        self.configure_heatmap()

    def _build_layout(self) -> None:
        """The three splitters (input | options, stream, top-k | heatmap) under the banner."""
        self.top_splitter = QSplitter(Qt.Orientation.Horizontal)
        self.top_splitter.addWidget(self.input_area)
        self.top_splitter.addWidget(self.options_panel)
        self.top_splitter.setStretchFactor(0, 3)
        self.top_splitter.setStretchFactor(1, 2)
        self.bottom_splitter = QSplitter(Qt.Orientation.Horizontal)
        self.bottom_splitter.addWidget(self.inspector)
        self.bottom_splitter.addWidget(self.inspector_tabs)
        self.bottom_splitter.setStretchFactor(0, 2)
        self.bottom_splitter.setStretchFactor(1, 3)
        self.main_splitter = QSplitter(Qt.Orientation.Vertical)
        self.main_splitter.addWidget(self.top_splitter)
        self.main_splitter.addWidget(self.stream)
        self.main_splitter.addWidget(self.bottom_splitter)
        self.main_splitter.setStretchFactor(0, 2)
        self.main_splitter.setStretchFactor(1, 1)
        self.main_splitter.setStretchFactor(2, 3)
        for s in self.splitters():
            s.setChildrenCollapsible(False)
        # defaults for a 1400 x 900 window (restore_settings replaces them). The token stream
        # pane gets room for the step strip above its chips (the strip shrinks before the chips
        # do), taken from the other two panes, with a margin: a 1280 x 800 window scales the
        # panes to ~0.86 of these sizes
        room = self.stream.minimumSizeHint().height() + STRIP_HEIGHT
        self.main_splitter.setSizes(pane_at_least(list(self.main_splitter_sizes), 1, math.ceil(room / 0.85)))
        self.top_splitter.setSizes([800, 560])
        self.bottom_splitter.setSizes([520, 840])

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.banner)
        lay.addWidget(self.main_splitter, 1)

    def show_beam_tree(self, on: bool) -> None:
        """Offer the beam tree's tab (beam strategies), shown when it newly appears, or take it away."""
        tabs = self.inspector_tabs
        i = tabs.indexOf(self.beam_tree)
        if on and not tabs.isTabVisible(i):
            tabs.setTabVisible(i, True)
            tabs.setCurrentIndex(i)
        elif not on and tabs.isTabVisible(i):
            if tabs.currentIndex() == i:
                tabs.setCurrentWidget(self.heatmap)
            tabs.setTabVisible(i, False)

    def splitters(self) -> tuple[QSplitter, QSplitter, QSplitter]:
        """(top, bottom, main) splitters, whose sizes the settings keep."""
        return self.top_splitter, self.bottom_splitter, self.main_splitter

    # ------------------------------------------------------------ subclass API
    def build_input(self) -> QWidget:
        """The input area (top left)."""
        raise NotImplementedError

    def has_input(self) -> bool:
        """True when there is something to decode."""
        raise NotImplementedError

    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        """Load model ``name``; runs in a worker thread (import torch-using modules here).

        Raises:
            Exception: with a user message; shown in the banner.
        """
        raise NotImplementedError

    def decode_fn(self, options: DecodingOptions) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator for the current input and ``options``: called in the GUI
        thread, it captures the input/model state it needs (the GUI may change them) and
        returns ``gen(cancel)``, which runs in a worker thread and yields the model's events.

        Raises:
            ValueError, RuntimeError: the input cannot be decoded; shown in the banner.
        """
        raise NotImplementedError

    def lanes_fn(self, lanes: list[DecodingOptions]) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator that decodes the current input with each of ``lanes``'
        options side by side on one encoder pass per segment (the task model's
        ``decode_lanes``: ``LaneEvent`` s, then a ``LanesFinished``); called in the GUI
        thread, it captures what it needs (``gui.tabs.lanes``).

        Raises:
            ValueError, RuntimeError: the input cannot be decoded; shown in the banner.
        """
        raise RuntimeError(f"the {self.title} tab cannot run lanes")

    def configure_heatmap(self) -> None:
        """Set the heatmap's column axis (``self.heatmap.set_columns``)."""

    def model_loaded(self, model: Any) -> None:
        """Called in the GUI thread after a successful load (update pickers)."""

    def toggle_record(self) -> None:
        """Ctrl+R (tabs without recording ignore it)."""

    def rtf_applies(self) -> bool:
        """Whether RTF (processing time / audio duration) makes sense for this tab."""
        return False

    # ---------------------------------------------------------------- state
    def is_busy(self) -> bool:
        """A model load or decode is running and was not cancelled."""
        return self.is_loading() or self.is_decoding()

    def is_loading(self) -> bool:
        """A model load is running and was not cancelled (a cancelled load may still be
        reading files in the background; its result is discarded)."""
        return _active(self._load)

    def is_decoding(self) -> bool:
        """A decode is running and was not cancelled, or one waits to start (it replaces a
        run that is stopping after an option change)."""
        return _active(self._decode) or self._pending_decode or self.lanes.running()

    def workers_idle(self) -> bool:
        """No worker thread of this tab runs, cancelled ones included (their threads end
        after the current decoder step)."""
        return not any(h is not None and h.running for h in (self._load, self._decode, self.lanes.handle))

    def _remember_stats(self, d: dict) -> None:
        self.last_stats = dict(d)

    def _remember_busy(self, busy: bool, message: str) -> None:
        self.busy_message = message if busy else ""
        if not busy:
            self.progress = None

    def _remember_progress(self, done: int, total: int) -> None:
        self.progress = (done, total)

    def show_error(self, message: str) -> None:
        """Show ``message`` in the banner and tell the window (status bar)."""
        self.banner.show_message(message)
        self.errorOccurred.emit(message)

    def clear_error(self) -> None:
        """Hide the banner."""
        self.banner.hide()

    # ---------------------------------------------------------------- model
    def load_model(self, name: str) -> None:
        """Load ``name`` in a worker thread; a decode follows if there is an input."""
        if self._load is not None and self._load.running:
            self._load.abort()
        if self._decode is not None and self._decode.running:
            self._pending_decode = False
            self._decode.abort()
        self.clear_error()
        self.model = None
        relay = self._relay

        def gen(cancel):
            yield self.load_model_object(name, relay.text.emit)

        self.busyChanged.emit(True, f"Loading model {name}…")
        handle = start_worker(
            gen,
            on_event=self._on_model,
            on_error=lambda m: self.show_error(f"Could not load model {name!r}: {m}"),
            on_finished=lambda: self._load_finished(handle),
            name=f"load-{name}",
        )
        self._load = handle

    def _on_progress(self, text: str) -> None:
        if self.is_loading():
            self.busyChanged.emit(True, text)

    def _on_model(self, model: Any) -> None:
        self.model = model
        self.model_loaded(model)
        load_s = getattr(model, "load_s", 0.0) or 0.0
        self.statusMessage.emit(f"Loaded {getattr(model, 'name', 'model')} in {load_s:.1f} s")
        self.statsChanged.emit(self._stats_dict(None))
        self.modelReady.emit(model)

    def _load_finished(self, handle: WorkerHandle) -> None:
        if self._load is handle:
            self._load = None
        if not self.is_busy():
            self.busyChanged.emit(False, "")
        if self.model is not None and self.has_input():
            self.request_decode()

    # --------------------------------------------------------------- decode
    def request_decode(self) -> None:
        """Decode the current input with the current options (cancels a running decode first)."""
        if self.model is None or not self.has_input():
            return
        if self.lanes.stop_for_decode():  # one decoding thread: the run starts when the lanes stopped
            self._pending_decode = True
            return
        if self._decode is not None and self._decode.running:
            self._pending_decode = True
            self._decode.abort()
            self._drop_queued_events()  # the superseded run's events never reach the views
            return
        self._start_decode()

    def stop_decode(self) -> None:
        """Stop a running decode without a message (the input went away: nothing to show)."""
        self._pending_decode = False
        if self._decode is not None and self._decode.running:
            self._decode.abort()

    def _start_decode(self) -> None:
        try:
            options = self.options_panel.options()
        except ValueError as exc:
            self.show_error(f"Invalid decoding options: {exc}")
            return
        options = dataclasses.replace(options, capture_lens=self.lens_view.capture)  # forks inherit it
        self.clear_error()
        self._drop_queued_events()
        self.stream.clear()
        self.heatmap.clear(columns=True)  # the run's events size the columns to this input
        self.beam_tree.clear()
        self.show_beam_tree(options.strategy in BEAM_STRATEGIES)
        self._fork = None
        self._begin_exploration(options)  # the tree is kept: taken back at the end, or for Ctrl+Z
        self.run.clear(options)  # a new run (gui/run_state.py says why)
        self._t_first = time.perf_counter()
        self._n_live = 0
        self.topk.set_step(None)
        self.inspector.set_seed(options.seed)
        self.progress = None
        self.busyChanged.emit(True, "Decoding…")
        try:
            fn = self.decode_fn(options)
        except (ValueError, RuntimeError) as exc:
            self._settle_kept_tree(None)
            self.statusMessage.emit(self._with_exploration_note("The run could not start"))
            self.show_error(str(exc))
            self.busyChanged.emit(self.is_busy(), "")
            return
        handle = start_worker(
            fn,
            on_event=self._receive,
            on_error=lambda m: self._receive(_RunError(m)),
            on_finished=lambda: self._receive(_RunEnded(handle)),
            name="decode",
        )
        self._decode = handle

    def _receive(self, ev: Any) -> None:
        """A worker event (or the end of a run): into the inbox, which :meth:`_pump` empties
        frame by frame."""
        self._inbox.append(ev)
        try:
            if not self._flush_timer.isActive():
                self._flush_timer.start(FRAME_MS)
        except RuntimeError:  # the tab is gone (its C++ timer deleted) while a worker still reported
            self._inbox.clear()

    def _pump(self) -> None:
        """Hand the inbox's events to ``_on_event`` in order, at most ``MAX_EVENTS_PER_FRAME``
        or ``PUMP_BUDGET_S`` seconds' worth, then update the views once; the rest waits for
        the next turn of the event loop (timers and paints run in between). Before any event
        other than a step, beams or a segment, the views catch up (so a subclass's
        ``_on_event`` sees every earlier token in them)."""
        deadline = time.perf_counter() + PUMP_BUDGET_S
        n = 0
        while self._inbox and n < MAX_EVENTS_PER_FRAME and time.perf_counter() < deadline:
            ev = self._inbox.popleft()
            n += 1
            if isinstance(ev, _RunEnded):
                self.flush_views()
                self._decode_finished(ev.handle)
                continue
            if not isinstance(ev, (StepEvent, BeamEvent, SegmentEvent)):
                self.flush_views()
            (self._on_fork_event if self._fork is not None
             else self._on_whatif_event if self._whatif is not None else self._on_event)(ev)
        self.flush_views()
        if self._inbox:
            self._flush_timer.start(1)  # more next turn, after timers and paints

    def _on_event(self, ev: Any) -> None:
        """Take one event of the running decode (GUI thread). The run's state (:attr:`run`)
        is updated at once; the views are updated by :meth:`flush_views`, at most once per
        ``FRAME_MS``, with every StepEvent that arrived since the last frame."""
        if isinstance(ev, (StepEvent, SegmentEvent)):
            if isinstance(ev, StepEvent):
                self.run.add(ev)
                self._n_live += 1
            else:
                self.run.add_segment(ev)
                if ev.warning:
                    self.banner.show_message(ev.warning)
                    self.statusMessage.emit(ev.warning)
                if ev.total > 1:
                    self._progress_due = (ev.segment, ev.total, ev.kind)
            self._view_queue.append(ev)
            return
        if isinstance(ev, BeamEvent):
            self._pending_beams = ev
            self._beam_queue.append(ev)
            return
        self.flush_views()
        if isinstance(ev, _RunError):
            self._settle_kept_tree(None)
            self.statusMessage.emit(self._with_exploration_note("The run failed"))
            self.show_error(ev.message)
        elif isinstance(ev, Finished):
            self.run.finish(ev)
            self._settle_kept_tree(ev)  # the same tokens take the old forks back
            self.stream.finish(ev)
            self.beam_tree.finish()
            self.statsChanged.emit(self._stats_dict(ev))
            self.decodeFinished.emit(ev)
            what = "cancelled" if ev.cancelled else f"{ev.stats.n_tokens} tokens ({ev.reason})"
            self.statusMessage.emit(self._with_exploration_note(f"Decoded: {what}"))

    def _drop_queued_events(self) -> None:
        """Forget the events of a superseded or cancelled run that were not shown yet (the
        ends of runs stay: they finish the bookkeeping of their worker)."""
        self._inbox = deque(ev for ev in self._inbox if isinstance(ev, _RunEnded))
        self._view_queue.clear()
        self._pending_beams = None
        self._beam_queue.clear()
        self._progress_due = None
        if not self._inbox:
            self._flush_timer.stop()

    def flush_views(self) -> None:
        """Show the StepEvents (and the latest beams) that arrived since the last frame:
        one batch for the token stream, the step strip and the heatmap, the top-k (and chain
        stages) of the newest (or the selected) step, one statistics update."""
        self._flush_timer.stop()
        queue, self._view_queue = self._view_queue, []
        beams, self._pending_beams = self._pending_beams, None
        if beams is not None:
            self.stream.set_beams(beams)
        beam_batch, self._beam_queue = self._beam_queue, []
        if beam_batch:
            self.beam_tree.add_events(beam_batch)
        progress, self._progress_due = self._progress_due, None
        if progress is not None:
            done, total, kind = progress
            self.busyChanged.emit(True, f"Decoding {kind} {done + 1} of {total}…")
            self.progressChanged.emit(done, total)
        if not queue:
            return
        batch: list[StepEvent] = []
        for ev in queue:  # steps in batches; a segment between them starts a new line/columns
            if isinstance(ev, StepEvent):
                batch.append(ev)
                continue
            self._show_steps(batch)
            batch = []
            self.stream.handle(ev)
            self.heatmap.handle(ev)
            self.beam_tree.handle_segment(ev)
        self._show_steps(batch)
        last = next((ev for ev in reversed(queue) if isinstance(ev, StepEvent)), None)
        if last is None:
            return
        sel = self.run.selected()
        if sel is None:
            self.topk.set_step(last)
        elif any(isinstance(ev, StepEvent) and ev.step == sel for ev in queue):
            self.topk.set_step(self.run.step(sel))
            self.stream.select_step(sel)
            self.strip.select_step(sel)
            self.heatmap.select_step(sel)
        self.statsChanged.emit(self._stats_dict(None))

    def _show_steps(self, batch: list[StepEvent]) -> None:
        if batch:
            self.stream.append_steps(batch)
            self.strip.append_steps(batch)
            self.heatmap.append_steps(batch)
            self.lens_view.append_steps(batch)

    def _decode_finished(self, handle: WorkerHandle) -> None:
        if self._decode is handle:
            self._decode = None
        if self._pending_decode:
            self._pending_decode = False
            self._start_decode()
            return
        if not self.is_busy():
            self.busyChanged.emit(False, "")

    def _lens_capture_changed(self, on: bool) -> None:
        """The lens view's Capture box: switched on, decode again with the lens (switched
        off, the shown run stays; later runs skip it)."""
        if on:
            self.request_decode()

    def _options_changed(self, _options: DecodingOptions) -> None:
        self.show_beam_tree(_options.strategy in BEAM_STRATEGIES)
        self.request_decode()

    def clear_run(self) -> None:
        """Forget the previous run (the input changed or went away): the token stream, top-k,
        heatmap rows, the run's steps and the status bar's statistics. A tree with forks or
        what-ifs is kept for that input (Edit → Previous exploration once it is back)."""
        self._leave_exploration("another input", same_input=False)
        self.stream.clear()
        self.topk.set_step(None)
        self.heatmap.clear()
        self.run.clear()
        self.beam_tree.clear()
        self.lanes.clear()
        self._n_live = 0
        self._t_first = None
        self.statsChanged.emit(self._stats_dict(None))

    # ------------------------------------------------------------ selection
    def select_step(self, step: int) -> None:
        """Show ``step`` in the top-k chart and the stage view, outline it in the stream, the
        strip and the heatmap."""
        self.run.select(step)
        self.stream.select_step(step)
        self.strip.select_step(step)
        self.heatmap.select_step(step)
        self.topk.set_step(self.run.step(step))
        self.beam_tree.select_step(step)

    def selected_step(self) -> int | None:
        """The step the user selected (None: follow the newest token)."""
        return self.run.selected()

    def follow_newest(self) -> None:
        """Drop the token selection: the views follow the newest token again."""
        self.run.select(None)
        self.stream.select_step(None)
        self.strip.select_step(None)
        self.heatmap.select_step(None)
        self.topk.set_step(self.run.step(self.run.latest()))
        self.beam_tree.select_step(None)

    # --------------------------------------------------------------- cancel
    def cancel(self) -> bool:
        """Cancel the running model load and decode. True if something was running.

        The run's state ends at once: the stream shows "(cancelled)" after the tokens that
        arrived, the status bar the statistics of those tokens, and the busy bar and Cancel
        button go idle (events the worker still sends are dropped).
        """
        lanes = self.lanes.cancel()  # they keep what they got
        was_loading, was_decoding = self.is_loading(), self.is_decoding()
        self._pending_decode = False
        for h in (self._load, self._decode):
            if h is not None and h.running:
                h.abort()
        if was_decoding:
            self._drop_queued_events()
            self._end_cancelled_run()
        if was_loading:
            self.statusMessage.emit("Model load cancelled (the files finish loading in the background and are discarded).")
        elif was_decoding:
            self.statusMessage.emit(self._with_exploration_note(
                f"Cancelled after {self._n_live} token{'s' if self._n_live != 1 else ''}"))
        self.busyChanged.emit(False, "")
        return was_loading or was_decoding or lanes

    def _end_cancelled_run(self) -> None:
        """Show the end of a run the user cancelled: the text so far marked "(cancelled)" and
        the statistics of the tokens that arrived."""
        if self._whatif_cancelled():  # the run shown was not touched: it keeps its end
            return
        elapsed = time.perf_counter() - self._t_first if self._t_first is not None else 0.0
        forked = self._fork_cancelled()  # a fork's branch keeps what it got
        if not forked:
            self._settle_kept_tree(None)  # a cancelled same-options run: the old tree is kept for Ctrl+Z
        steps = self.run.steps()
        fin = Finished(
            text=self.cancelled_text(steps), token_ids=[ev.token_id for ev in steps],
            stats=RunStats(decode_s=elapsed, n_tokens=len(steps)), cancelled=True, reason="cancelled",
        )
        if not forked:
            self.run.finish(fin)
        self.stream.finish(fin)
        self.statsChanged.emit(self._stats_dict(fin))

    def cancelled_text(self, steps: list[StepEvent]) -> str:
        """The text of a cancelled run's steps: their token texts joined (a tab whose token
        texts are pieces, as SentencePiece's "▁word", decodes them instead)."""
        return "".join(ev.text for ev in steps)

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Cancel everything and wait for the worker threads (window close)."""
        self.cancel()
        self.lanes.wait(wait_ms)
        for h in (self._load, self._decode):
            if h is not None:
                h.wait(wait_ms)

    # ---------------------------------------------------------------- stats
    def _stats_dict(self, fin: Finished | None) -> dict:
        model = self.model
        d: dict[str, Any] = {
            "model": getattr(model, "name", None) if model is not None else None,
            "device": str(getattr(model, "device", "cpu")).upper(),
            "live": fin is None,
            "encode_ms": None,
            "ms_per_token": None,
            "tokens_per_s": None,
            "rtf": None,
            "n_tokens": self._n_live,
        }
        if fin is not None:
            st = fin.stats
            d.update(
                encode_ms=1000.0 * st.encode_s,
                ms_per_token=st.ms_per_token,
                tokens_per_s=st.tokens_per_s,
                rtf=st.rtf if self.rtf_applies() else None,
                n_tokens=st.n_tokens,
                encoder_cached=st.encoder_cached,
            )
        elif self._t_first is not None and self._n_live:
            dt = time.perf_counter() - self._t_first
            d.update(ms_per_token=1000.0 * dt / self._n_live, tokens_per_s=self._n_live / dt if dt > 0 else None)
        return d


def pane_at_least(sizes: list[int], i: int, need: int) -> list[int]:
    """``sizes`` (splitter pane heights) with pane ``i`` grown to ``need`` pixels, the other
    panes giving up the difference in proportion to their sizes (the total stays)."""
    deficit = need - sizes[i]
    others = [j for j in range(len(sizes)) if j != i]
    pool = sum(sizes[j] for j in others)
    if deficit <= 0 or pool <= 0:
        return list(sizes)
    out = list(sizes)
    out[i] = need
    for j in others:
        out[j] = max(1, sizes[j] - round(deficit * sizes[j] / pool))
    return out


def _active(handle: WorkerHandle | None) -> bool:
    """A worker that runs and was not cancelled."""
    return bool(handle is not None and handle.running and not handle.abort_requested)
