"""A run tab's decode (``gui.tabs.run``): starting it (an option change supersedes the running
one), taking its events into the run's state, the progress of a long input, and cancelling
it; the run controller's client for a run (forks and what-ifs have their own).

:class:`DecodeRun` is an object of the tab (``tab.decode``). It talks to the tab through
public names: the task hooks ``decode_fn``, ``take_event`` (a task tab extends the handling
of an event there, and calls the base) and ``cancelled_text``; the tab's ``run``,
``controller``, ``live`` count, views, objects (``forking``, ``whatifs``, ``lanes``,
``explorations_keeper``, ``baseline``) and signals.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from core.events import BeamEvent, Finished, RunStats, SegmentEvent, SpeculationRound, StepEvent
from core.options import BEAM_STRATEGIES

from ..worker import WorkerHandle


class DecodeRun:
    """The tab's decode: request, events, progress, end, cancel (see the module docstring)."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self._progress_due: tuple[int, int, str] | None = None  # (done, total, kind) to show at the frame

    # ------------------------------------------------------------ start
    def request(self) -> None:
        """Decode the current input with the current options (cancels a running decode first)."""
        tab = self.tab
        if tab.model is None or not tab.has_input():
            return
        if tab.lanes.stop_for_decode() or tab.controller.alive("decode"):
            # one decoding thread: the run starts when the lanes (or the superseded run) stopped
            tab.controller.abort("decode")
            tab.run.drop_pending()  # the superseded run's last events never reach the views
            tab.controller.defer(self._start)
            return
        self._start()

    def stop(self) -> None:
        """Stop a running decode without a message (the input went away: nothing to show)."""
        self.tab.controller.defer(None)
        self.tab.controller.abort("decode")

    def _start(self) -> None:
        tab = self.tab
        try:
            options = tab.options_panel.options()
        except ValueError as exc:
            tab.show_error(f"Invalid decoding options: {exc}")
            return
        options = dataclasses.replace(options, capture_lens=tab.lens_view.capture)  # forks inherit it
        tab.clear_error()
        self._progress_due = None
        tab.heatmap.clear(columns=True)  # the run's events size the columns to this input
        tab.show_beam_tree(options.strategy in BEAM_STRATEGIES)
        tab.show_speculation(options.strategy == "speculative")
        tab.forking.reset()
        tab.explorations_keeper.begin(options)  # the tree is kept: taken back at the end, or for Ctrl+Z
        # the step strip keeps the other KV cache setting's last run on this input as a reference
        tab.strip.begin_run(tab.input_identity_or_none(), options.kv_cache)
        tab.run.clear(options)  # a new run (gui/run_state.py says why); the views follow
        tab.live.start(time.perf_counter())
        tab.inspector.set_seed(options.seed)
        tab.progress = None
        tab.busyChanged.emit(True, "Decoding…")
        try:
            fn = tab.decode_fn(options)
        except (ValueError, RuntimeError) as exc:
            tab.explorations_keeper.settle(None)
            tab.statusMessage.emit(tab.explorations_keeper.with_note("The run could not start"))
            tab.show_error(str(exc))
            tab.busyChanged.emit(tab.is_busy(), "")
            return
        tab.controller.start("decode", fn, self, name="decode")

    # ------------------------------------------------------------ the run controller's client
    def on_event(self, ev: Any) -> None:
        """One event of the running decode (from the controller's pump): the tab's ``take_event``."""
        self.tab.take_event(ev)

    def on_error(self, message: str) -> None:
        """The running decode failed (after the events it yielded)."""
        tab = self.tab
        tab.explorations_keeper.settle(None)
        tab.statusMessage.emit(tab.explorations_keeper.with_note("The run failed"))
        tab.show_error(message)

    def on_end(self, _handle: WorkerHandle) -> None:
        """The decode's worker ended (finished, failed, cancelled or superseded)."""
        tab = self.tab
        if tab.baseline.wanted() and tab.baseline.start():  # a short speculative run: time plain decoding
            return
        if not tab.is_busy():
            tab.busyChanged.emit(False, "")

    def take(self, ev: Any) -> None:
        """Take one event of the running decode (GUI thread). The run's state (``tab.run``)
        is updated at once; the views follow it at the end of the controller's pump turn,
        once per frame."""
        tab = self.tab
        if isinstance(ev, StepEvent):
            tab.run.add(ev)
            tab.count_live_token()
        elif isinstance(ev, SegmentEvent):
            tab.run.add_segment(ev)
            if ev.warning:
                tab.banner.show_message(ev.warning)
                tab.statusMessage.emit(ev.warning)
            if ev.total > 1:
                self._progress_due = (ev.segment, ev.total, ev.kind)
        elif isinstance(ev, BeamEvent):
            tab.run.add_beams(ev)
        elif isinstance(ev, SpeculationRound):
            tab.run.add_round(ev)
        elif isinstance(ev, Finished):
            tab.run.finish(ev)
            if self._progress_due is not None or tab.progress is not None:
                # the segments are done: no "Decoding sentence 4 of 4…" beside the end (the
                # worker's end, which clears the busy state, comes after this event)
                self._progress_due = None
                tab.progress = None
                tab.busyChanged.emit(True, "Finishing…")
            tab.baseline.record(tab.run.branch(0).options, ev)  # a plain run's ms per token
            tab.explorations_keeper.settle(ev)  # the same tokens take the old forks back
            tab.statsChanged.emit(tab.stats_dict(ev))
            tab.decodeFinished.emit(ev)
            what = "cancelled" if ev.cancelled else f"{ev.stats.n_tokens} tokens ({ev.reason})"
            tab.statusMessage.emit(tab.explorations_keeper.with_note(f"Decoded: {what}"))

    def frame(self) -> None:
        """The end of a pump turn: the progress of a long input, once."""
        progress, self._progress_due = self._progress_due, None
        if progress is not None:
            done, total, kind = progress
            self.tab.busyChanged.emit(True, f"Decoding {kind} {done + 1} of {total}…")
            self.tab.progressChanged.emit(done, total)

    # ------------------------------------------------------------ cancel
    def cancel(self) -> bool:
        """Cancel the running model load and decode (``RunTab.cancel``). True if something was running."""
        tab = self.tab
        if tab.baseline.cancel():  # measuring plain decoding: the run shown keeps its end
            tab.busyChanged.emit(False, "")
            tab.statusMessage.emit(tab.baseline.note)
            return True
        lanes = tab.lanes.cancel()  # they keep what they got
        was_loading, was_decoding = tab.is_loading(), tab.is_decoding()
        tab.controller.defer(None)
        tab.controller.abort("load")
        tab.controller.abort("decode")
        if was_decoding:
            tab.controller.frame()  # the views show every token the run got
            self._end_cancelled_run()
        if was_loading:
            tab.statusMessage.emit("Model load cancelled (the files finish loading in the background and are discarded).")
        elif was_decoding:
            n = tab.n_live
            tab.statusMessage.emit(tab.explorations_keeper.with_note(f"Cancelled after {n} token{'s' if n != 1 else ''}"))
        tab.busyChanged.emit(False, "")
        return was_loading or was_decoding or lanes

    def _end_cancelled_run(self) -> None:
        """Show the end of a run the user cancelled: the text so far marked "(cancelled)" and
        the statistics of the tokens that arrived."""
        tab = self.tab
        if tab.whatifs.cancel():  # the run shown was not touched: it keeps its end
            return
        elapsed = tab.live.elapsed()
        forked = tab.forking.cancel()  # a fork's branch keeps what it got
        if not forked:
            tab.explorations_keeper.settle(None)  # a cancelled same-options run: the old tree is kept for Ctrl+Z
        steps = tab.run.steps()
        fin = Finished(
            text=tab.cancelled_text(steps), token_ids=[ev.token_id for ev in steps],
            stats=RunStats(decode_s=elapsed, n_tokens=len(steps)), cancelled=True, reason="cancelled",
        )
        if not forked:
            tab.run.finish(fin)  # the stream shows the end (a fork's branch ended in forking.cancel)
        tab.statsChanged.emit(tab.stats_dict(fin))
