"""The views of a decode run and the machinery that feeds them (every task tab shares it).

::

    ┌ input area (subclass) ──────────┬ options panel ─────────┐
    ├ token stream (strip: entropy, varentropy, kept, μ) ──────┤
    ├ top-k | chain stages ───────────┬ inspector tabs ────────┤

(``QSplitter``s, built by ``gui.tabs.run_layout``; sizes persist.) The step strip sits
above the token chips; the selected step's distribution is shown as the top-k chart or,
per stage of the sampler chain, as the stage view (``StepInspector``), with "Sample ×N" over the chart. The inspector tabs
(``gui.inspector``: Attention, Fork diff, Branches, What if, Beam tree, Logit lens,
Lanes, Speculation) are built here, one line per view.

A subclass supplies the input area, how to load its model and how to decode its input
(the hooks of ``gui.tabs.task_hooks.TaskHooks``). The status bar's statistics come from
``gui.tabs.run_stats``, the model load from ``gui.tabs.model_load``, and the tab's own
following of its run (statistics per frame, the branch's title) from ``gui.tabs.run_follow``.
One :class:`~gui.run_controller.RunController` runs the load and the decode (and forks,
what-ifs, lanes, refine) in worker threads and hands their events on in one time-sliced
pump; the run's steps go into a :class:`~gui.run_state.RunState`, which every view takes in
its constructor and follows (``gui.widgets.follow``): one ``stepsAdded`` per frame, the
selection, another branch, steps taken back, a branch's end, a new run. Nothing feeds a
view by hand. An option change re-decodes (the running
decode is cancelled first); errors show inline (a banner at the top of the tab) and
through ``errorOccurred`` for the status bar.

Forking (``gui.tabs.forking.Forking``), what-ifs (``gui.tabs.whatif.WhatIfs``), kept
explorations and exploration files (``gui.tabs.kept_explorations.KeptExplorations``) and
lanes (``gui.tabs.lanes.LanesController``) are objects of the tab; it offers their public
methods (``fork``, ``run_what_if``, ``save_exploration``, ...).

:class:`gui.tabs.base.DecodeTab` adds what the tabs' input areas share (model picker,
samples, Open…, drops, settings).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QSplitter, QWidget

from core.events import Finished, StepEvent
from core.options import BEAM_STRATEGIES, DecodingOptions
from core.tasks.base import Task

from ..inspector import InspectorTabs
from ..run_controller import RunController
from ..run_state import RunState
from ..widgets.attention_heatmap import AttentionHeatmap
from ..widgets.beam_tree import BeamTreeView
from ..widgets.branch_tree import BranchTree
from ..widgets.column_axis import ColumnAxis
from ..widgets.error_banner import ErrorBanner
from ..widgets.fork_diff import ForkDiff
from ..widgets.logit_lens import LogitLensView
from ..widgets.options_panel import OptionsPanel
from ..widgets.speculation_view import SpeculationView
from ..widgets.stage_view import StageView
from ..widgets.step_inspector import StepInspector
from ..widgets.step_strip import StepStrip
from ..widgets.token_stream import TokenStreamView
from ..widgets.topk_chart import TopKChart
from ..widgets.whatif_view import WhatIfView
from .decode_run import DecodeRun
from .forking import Forking
from .kept_explorations import KeptExplorations
from .lanes import LanesController
from .model_load import ModelLoader
from .run_follow import RunFollower
from .run_layout import build_splitters, lay_out
from .run_stats import LiveCount, StatusBarState
from .speedup_baseline import SpeedupBaseline
from .task_hooks import TaskHooks
from .whatif import WhatIfs


class RunTab(QWidget, TaskHooks):
    """The layout, the model load and the decode run of a task tab.

    Subclasses implement (``gui.tabs.task_hooks.TaskHooks``) :meth:`build_input`,
    :meth:`load_model_object`, :meth:`decode_fn`, :meth:`has_input` and may override :meth:`model_loaded`,
    :meth:`configure_heatmap`, :meth:`rtf_applies` and :meth:`toggle_record`; a tab that
    implements :meth:`lanes_fn` runs decoding lanes (the "Lanes" tab, ``gui.tabs.lanes``),
    one that implements :meth:`fork_fn` and :meth:`input_identity` forks
    (``gui.tabs.forking``), one that implements :meth:`whatif_fn` runs what-ifs
    (``gui.tabs.whatif``).

    The workers (model load, decode, fork, what-if, lanes) are started, superseded and
    cancelled by one :class:`~gui.run_controller.RunController` (:attr:`controller`), whose
    pump hands their events on; the run's steps go into :attr:`run` (a
    :class:`~gui.run_state.RunState`), which feeds the views once per frame.

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

    #: QSettings group for this tab
    settings_key = "task"
    #: default heights in pixels of (input + options, token stream, top-k + attention) for a
    #: 1400 x 900 window; a subclass whose input needs more height overrides it
    main_splitter_sizes: tuple[int, int, int] = (290, 190, 370)
    #: ask the model to reuse the KV cache of the forced prefix (False: always re-run it)
    fork_reuse_cache = True
    #: how to mask in this tab (shown while nothing is masked)
    mask_hint = "this tab cannot mask its input yet"

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
        self.model: Task | None = None
        #: the current run's steps, the newest and the selected step (views query it)
        self.run = RunState(self)
        #: starts, supersedes and cancels the workers; the one event pump
        self.controller = RunController(self)
        self.controller.add_frame_listener(self.run.flush)
        #: the running decode's tokens and start (the live statistics)
        self.live = LiveCount()
        #: the decode: start, events, progress, cancel; the controller's client for a run
        self.decode = DecodeRun(self)
        #: the model loads: started in the controller, their model handed to the tab
        self.loader = ModelLoader(self)
        #: the last statistics and busy state this tab reported (the window shows them when
        #: the tab becomes the current one, so each tab's status bar is its own)
        self.last_stats: dict = {}
        self.busy_message = ""
        #: (segments done, segments in all) of the running decode, or None
        self.progress: tuple[int, int] | None = None
        self.status_bar_state = StatusBarState(self)  # keeps the three above up to date

        self.banner = ErrorBanner()
        self.options_panel = OptionsPanel()
        # the views take the run (and the input's axis) and follow it, once per frame
        self.stream = TokenStreamView(self.run)
        self.strip = StepStrip(self.run)
        self.stream.set_strip(self.strip)
        self.topk = TopKChart(run=self.run)
        # partial UTF-8 tokens listed as <0xE2><0x80>: their bytes asked of the model's backend
        self.topk.token_bytes = self.stream.flow.token_bytes = self.token_bytes
        self.stages = StageView()
        self.inspector = StepInspector(self.topk, self.stages)
        #: the input's axis (labels, unit, scale; the plots on it), shared by the views over the input
        self.axis = ColumnAxis()
        self.heatmap = AttentionHeatmap(self.run, self.axis)  # the tab sets the axis (configure_heatmap)
        # the views beside the top-k chart, one line each (gui/inspector.py)
        self.inspector_tabs = tabs = InspectorTabs()
        self.fork_diff = ForkDiff(self.run)
        self.branch_tree = BranchTree(self.run)
        self.whatif_view = WhatIfView()
        self.beam_tree = BeamTreeView(self.run, axis=self.axis)  # for beam strategies (show_beam_tree)
        self.lens_view = LogitLensView(self.run)  # layers x steps; its Capture box re-decodes with the lens
        tabs.add_view(self.heatmap, "Attention")
        tabs.add_view(self.fork_diff, "Fork diff", "a branch beside the branch it was forked from: the common "
                      "prefix, then both continuations aligned token by token")
        tabs.add_view(self.branch_tree, "Branches", "every branch of this input: select one to show it")
        tabs.add_view(self.whatif_view, "What if", "mask part of the input and see which tokens depended on it; "
                      "No input: which tokens the decoder's prior alone explains")
        tabs.add_view(self.beam_tree, "Beam tree", shown=False)
        tabs.add_view(self.lens_view, "Logit lens")
        self.speculation_view = SpeculationView(self.run)  # for strategy "speculative" (show_speculation)
        tabs.add_view(self.speculation_view, "Speculation", "speculative decoding: the selected step's round "
                      "(drafted tokens, p, q, min(1, p/q), u) and the run's acceptance, γ and speed-up", shown=False)
        #: forks, exploration files and kept trees, what-ifs, lanes: clients of the controller
        self.explorations_keeper = KeptExplorations(self)
        self.forking = Forking(self)
        self.whatifs = WhatIfs(self)
        self.lanes = LanesController(self)  # strategies side by side on one encoder output
        tabs.add_view(self.lanes.view, "Lanes")
        self.input_area = self.build_input()
        self.top_splitter, self.bottom_splitter, self.main_splitter = build_splitters(
            self.input_area, self.options_panel, self.stream, self.inspector, self.inspector_tabs,
            self.main_splitter_sizes)
        lay_out(self, self.banner, self.main_splitter)

        self.options_panel.optionsChanged.connect(self._options_changed)
        self.stream.stepSelected.connect(self.select_step)
        self.strip.stepSelected.connect(self.select_step)
        self.stream.cleared.connect(self.strip.clear)
        self.heatmap.stepSelected.connect(self.select_step)
        self.beam_tree.stepSelected.connect(self.select_step)
        self.lens_view.stepSelected.connect(self.select_step)
        self.speculation_view.stepSelected.connect(self.select_step)
        #: plain decoding's ms per token on this input: speculative runs' measured speed-up
        self.baseline = SpeedupBaseline(self)
        self.speculation_view.measured = self.status_bar_state.measured_speedup
        self.speculation_view.measureRequested.connect(self.baseline.start)
        self.lens_view.captureChanged.connect(self._lens_capture_changed)
        #: the tab's own following of the run: statistics once per frame, the current branch's
        #: selection and title (the views follow the run themselves)
        self.follower = RunFollower(self)
        self.controller.add_frame_listener(self.decode.frame)
        self.configure_heatmap()

    # ------------------------------------------------------------ what the tab offers (delegated)
    @property
    def explorations(self):
        """Explorations replaced by a new one (``gui.exploration_history.ExplorationHistory``)."""
        return self.explorations_keeper.history

    def add_inspector_view(self, widget: QWidget, title: str) -> int:
        """Add a view (a beam tree, a lens) as a tab beside the heatmap; its index."""
        return self.inspector_tabs.add_view(widget, title)

    def fork(self, step: int | None, token_ids: list[int], text: str, branch: int | None = None) -> bool:
        """Fork ``branch`` (default: the current one) at ``step`` forcing ``token_ids``
        (``gui.tabs.forking.Forking.fork``)."""
        return self.forking.fork(step, token_ids, text, branch)

    def show_branch(self, branch: int) -> None:
        """Make ``branch`` the current one (the token stream, top-k and heatmap show it)."""
        self.run.set_current(branch)

    def save_exploration(self, path: str, attention: str = "mean") -> bool:
        """Write the exploration to ``path`` (JSON). True on success; errors go to the banner."""
        return self.explorations_keeper.save(path, attention)

    def open_exploration(self, source: Any, name: str | None = None) -> bool:
        """Open an exploration (a path, or data from ``gui.exploration.load``) made on this
        tab's input with its model (``gui.tabs.kept_explorations.KeptExplorations.open``)."""
        return self.explorations_keeper.open(source, name)

    def previous_exploration(self) -> bool:
        """Edit → Previous exploration (Ctrl+Z): show the tree the last new run replaced."""
        return self.explorations_keeper.previous()

    def next_exploration(self) -> bool:
        """Edit → Next exploration (Ctrl+Shift+Z)."""
        return self.explorations_keeper.next()

    def unsaved_explorations(self) -> list:
        """The kept explorations with work that was not saved."""
        return self.explorations_keeper.unsaved()

    def exploration_work(self) -> list[str]:
        """What would be lost on close, one line each (``MainWindow.confirm_explorations``)."""
        return self.explorations_keeper.work()

    def save_kept(self, entry: Any, path: str) -> bool:
        """Save a kept exploration to ``path``."""
        return self.explorations_keeper.save_kept(entry, path)

    def token_bytes(self, token_id: int) -> bytes | None:
        """The raw bytes of a token of the loaded model (its backend's ``token_bytes``: byte-level
        BPE vocabularies), or None (no model, or a tokenizer that cannot say)."""
        fn = getattr(getattr(self.model, "backend", None), "token_bytes", None)
        return fn(token_id) if fn is not None else None

    def input_identity_or_none(self) -> tuple[str, str] | None:
        """``input_identity()``, or None without an input (hashed once per input object)."""
        return self.explorations_keeper.input_identity_or_none()

    @property
    def whatif_mask(self) -> Any:
        """The mask What if? uses (the tab's kind: a span, a region, source positions), or None."""
        return self.whatifs.mask

    @property
    def whatif_result(self):
        """The last what-if's ``gui.tabs.whatif.WhatIfResult``, or None."""
        return self.whatifs.result

    @whatif_result.setter
    def whatif_result(self, value) -> None:
        self.whatifs.result = value

    def set_mask(self, mask: Any, description: str = "") -> None:
        """Use ``mask`` for What if?; None clears it (``gui.tabs.whatif.WhatIfs.set_mask``)."""
        self.whatifs.set_mask(mask, description)

    def run_what_if(self) -> bool:
        """What if? (the mask): False, with a message, when it cannot start."""
        return self.whatifs.start("mask")

    def run_no_input(self) -> bool:
        """No input: False, with a message, when it cannot start."""
        return self.whatifs.start("prior")

    def show_beam_tree(self, on: bool) -> None:
        """Offer the beam tree's tab (beam strategies), shown when it newly appears, or take it away."""
        self.inspector_tabs.offer(self.beam_tree, on, fallback=self.heatmap)

    def show_speculation(self, on: bool) -> None:
        """Offer the Speculation tab (strategy "speculative"), shown when it newly appears, or take it away."""
        self.inspector_tabs.offer(self.speculation_view, on, fallback=self.heatmap)

    def splitters(self) -> tuple[QSplitter, QSplitter, QSplitter]:
        """(top, bottom, main) splitters, whose sizes the settings keep."""
        return self.top_splitter, self.bottom_splitter, self.main_splitter

    # ---------------------------------------------------------------- state
    def is_busy(self) -> bool:
        """A model load or decode is running and was not cancelled."""
        return self.is_loading() or self.is_decoding()

    def is_loading(self) -> bool:
        """A model load is running and was not cancelled (a cancelled load may still be
        reading files in the background; its result is discarded)."""
        return self.controller.active("load")

    def is_decoding(self) -> bool:
        """A decode (a run, a fork, a what-if) is running and was not cancelled, or one waits
        to start (it replaces a run that is stopping after an option change), or lanes run."""
        return self.controller.active("decode") or self.controller.deferred() or self.lanes.running()

    def workers_idle(self) -> bool:
        """No worker thread of this tab runs, cancelled ones included (their threads end
        after the current decoder step)."""
        return self.controller.idle()

    def start_live_count(self, t0: float | None = None) -> None:
        """A run (a fork, a what-if) starts at ``t0`` (perf_counter; None keeps the last
        start): the live statistics count its tokens from 0."""
        self.live.start(t0)

    def count_live_token(self) -> None:
        """One more token of the running decode (the live statistics)."""
        self.live.n += 1

    @property
    def n_live(self) -> int:
        """Tokens of the running (or last) decode so far."""
        return self.live.n

    def stats_dict(self, fin: Finished | None) -> dict:
        """The statistics for the status bar (``statsChanged``): ``fin``'s, or live ones;
        the model's name as :meth:`status_model_name` spells it."""
        d = self.status_bar_state.stats(fin)
        if d.get("model"):
            d["model"] = self.status_model_name(d["model"])
        return d

    def status_model_name(self, name: str) -> str:
        """The model's name as the status bar shows it; a tab adds what its options change
        about the model (translation: "· shortlist"). Here: ``name`` unchanged."""
        return name

    def speedup_measured(self) -> None:
        """The plain run timing a speculative run ended: the status bar and the Speculation
        tab show the measured speed-up (``gui.tabs.speedup_baseline``)."""
        self.status_bar_state.speedup_measured()

    def show_error(self, message: str) -> None:
        """Show ``message`` in the banner and tell the window (status bar)."""
        self.banner.show_message(message)
        self.errorOccurred.emit(message)

    def clear_error(self) -> None:
        """Hide the banner."""
        self.banner.hide()

    # ---------------------------------------------------------------- model
    def load_model(self, name: str) -> None:
        """Load ``name`` in a worker thread; a decode follows if there is an input
        (``gui.tabs.model_load.ModelLoader``)."""
        self.loader.load(name)

    # --------------------------------------------------------------- decode
    def request_decode(self) -> None:
        """Decode the current input with the current options (cancels a running decode first;
        ``gui.tabs.decode_run.DecodeRun.request``)."""
        self.decode.request()

    def stop_decode(self) -> None:
        """Stop a running decode without a message (the input went away: nothing to show)."""
        self.decode.stop()

    def take_event(self, ev: Any) -> None:
        """Take one event of the running decode into the run's state (GUI thread;
        ``DecodeRun.take``); the views follow once per frame. Task tabs extend it (and call it)."""
        self.decode.take(ev)

    # ------------------------------------------------------------ the views follow the run
    def flush_views(self) -> None:
        """Show now what the run got since the last frame (the controller does it once per
        pump turn)."""
        self.controller.frame()

    def show_branch_title(self) -> None:
        """The token stream's title: which branch it shows (``RunFollower.show_branch_title``)."""
        self.follower.show_branch_title()

    def _lens_capture_changed(self, on: bool) -> None:
        """The lens view's Capture box: switched on, decode again with the lens (switched
        off, the shown run stays; later runs skip it)."""
        if on:
            self.request_decode()

    def _options_changed(self, _options: DecodingOptions) -> None:
        self.show_beam_tree(_options.strategy in BEAM_STRATEGIES)
        self.show_speculation(_options.strategy == "speculative")
        self.request_decode()

    def clear_run(self) -> None:
        """Forget the previous run (the input changed or went away): the token stream, top-k,
        heatmap rows, the run's steps and the status bar's statistics and message ("Decoded: 12
        tokens" no longer says anything of what is shown). A tree with forks or what-ifs is kept
        for that input (Edit → Previous exploration once it is back)."""
        self.statusMessage.emit("")  # an empty message clears the status bar's (MainWindow.show_message)
        self.explorations_keeper.leave("another input", same_input=False)
        self.run.clear()
        self.lanes.clear()
        self.live.reset()
        self.statsChanged.emit(self.stats_dict(None))

    # ------------------------------------------------------------ selection
    def select_step(self, step: int) -> None:
        """Select ``step`` in the run: the top-k chart and the stage view show it, the views
        that follow the run outline it."""
        self.run.select(step)

    def show_step_event(self, ev: StepEvent | None) -> None:
        """Show ``ev``'s distribution in the top-k chart (and the stage view), a step that
        is not the run's (a lane's token); the run's selection is left as it is."""
        self.topk.set_step(ev)

    def selected_step(self) -> int | None:
        """The step the user selected (None: follow the newest token)."""
        return self.run.selected()

    def follow_newest(self) -> None:
        """Drop the token selection: the views follow the newest token again."""
        self.run.select(None)

    # --------------------------------------------------------------- cancel
    def cancel(self) -> bool:
        """Cancel the running model load and decode. True if something was running.

        The run's state ends at once: the stream shows "(cancelled)" after the tokens that
        arrived, the status bar the statistics of those tokens, and the busy bar and Cancel
        button go idle (events the worker still sends are dropped; ``DecodeRun.cancel``).
        """
        return self.decode.cancel()

    def cancelled_text(self, steps: list[StepEvent]) -> str:
        """The text of a cancelled run's steps: their token texts joined (a tab whose token
        texts are pieces, as SentencePiece's "▁word", decodes them instead)."""
        return "".join(ev.text for ev in steps)

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Cancel everything and wait for the worker threads (window close)."""
        self.cancel()
        self.controller.abort_all()  # lanes, refine
        self.controller.wait(wait_ms)

