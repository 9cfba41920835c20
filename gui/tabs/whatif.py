"""Input what-ifs in a run tab (issue 13, section 3): mask part of the input, decode again,
see which tokens depended on it; "No input": which tokens the decoder's prior alone explains.

The tab lets the user mask part of its input (``gui.tabs.whatif_inputs``: drag a span on the
waveform, a region on the image in mask mode, drop selected source words) and calls
:meth:`WhatIfs.set_mask` (through ``RunTab.set_mask``). **What if?** (the "What if" view beside the heatmap) runs the
task model's ``what_if`` in a worker thread (``core.tasks.whatif``): the segments the mask touches
are encoded and decoded again without it, and the current branch's tokens are scored under
the masked input. The re-decode becomes a branch of the current one (``RunState.add_what_if``:
the touched segments from the masked input, the others the parent's, renumbered), listed in
the branch tree and comparable in the fork diff; the current branch stays shown. **No input**
runs ``no_input``: each token's probability under an empty input (the language prior).

The result is shown in the :class:`~gui.widgets.whatif_view.WhatIfView` (a cell per token with
its probability change or its prior) and as marks in the token stream: tokens that depended
on the masked part (vermillion bars), or that the prior explains as well as the input
(hallucination-prone; purple bars). The marks belong to the branch the what-if was run on and
show while that branch is the current one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from PySide6.QtCore import QObject

from core.events import BeamEvent, Finished, RunStats, SegmentEvent, SpeculationRound, StepEvent
from core.options import DecodingOptions

from ..widgets.whatif_view import DEPEND_COLOR, PRIOR_COLOR, WhatIfView


@dataclass
class _WhatIfRun:
    """The what-if being computed: its kind, the branch it scores, its description, when it
    was asked for, the branch its re-decode grows (created at its first segment) and the
    step and segment that branch is at."""

    kind: str
    parent: int
    description: str
    options: Any
    t0: float
    branch: int | None = None
    next_step: int = 0
    last_segment: int = -1
    finished: Finished | None = None
    segments: list[int] = field(default_factory=list)
    renumbered: dict[int, int] = field(default_factory=dict)  # the current round's steps: decoded -> branch step


@dataclass(frozen=True)
class WhatIfResult:
    """The last what-if's result: its kind, the branch it scored (``parent``), the branch of
    its re-decode (mask; None for no input or when nothing was decoded), and the
    ``core.tasks.whatif.WhatIfDone``."""

    kind: str
    parent: int
    branch: int | None
    done: Any


class WhatIfs(QObject):
    """What-ifs for :class:`gui.tabs.run.RunTab` (see the module docstring): a client of the
    tab's run controller.

    The tab implements ``whatif_fn`` and sets ``mask_hint``; its mask controls call
    ``set_mask`` (and ``mask_changed`` lets it draw the mask). The tab's ``whatif_view``
    shows the result.
    """

    def __init__(self, tab: Any) -> None:
        super().__init__(tab)
        self.tab = tab
        self.run = tab.run
        self.view: WhatIfView = tab.whatif_view
        self.current: _WhatIfRun | None = None  # the what-if being computed
        self.mask: Any = None
        self.result: WhatIfResult | None = None
        self._mask_description = ""
        self._mask_input: str | None = None
        self.view.set_mask(None, tab.mask_hint)
        self.view.whatIfRequested.connect(lambda: self.start("mask"))
        self.view.noInputRequested.connect(lambda: self.start("prior"))
        self.view.clearRequested.connect(self.clear_mask)
        self.view.stepClicked.connect(self._step_clicked)
        self.run.cleared.connect(self._cleared)
        self.run.currentBranchChanged.connect(lambda _b: self._apply_marks())
        self.run.selectionChanged.connect(self.view.select_step)

    # ------------------------------------------------------------ mask
    def set_mask(self, mask: Any, description: str = "") -> None:
        """Use ``mask`` (the tab's kind: a span, a region, source positions) for What if?; None
        clears it. The What if view comes to the front so that its button is at hand. The mask
        belongs to the current input: another input clears it."""
        self.mask = mask
        self._mask_input = self._input_hash() if mask is not None else None
        self._mask_description = description if mask is not None else ""
        self.view.set_mask(self._mask_description or None, self.tab.mask_hint)
        if self.current is not None:
            self.view.set_busy(True)
        if mask is not None:
            self.tab.inspector_tabs.bring(self.view)
        self.tab.mask_changed(mask)

    def clear_mask(self) -> None:
        """Forget the mask and the what-if result (and their marks)."""
        self.set_mask(None)
        self.result = None
        self.view.clear_result()
        self._apply_marks()

    # ------------------------------------------------------------ running
    def refusal(self, kind: str, parent: int) -> str:
        """Why a what-if of ``kind`` on branch ``parent`` cannot start now ("" if it can)."""
        why = self.tab.exploring_refusal("What-ifs")
        if why:
            return why
        if self.tab.model is None or not self.tab.has_input():
            return "Load a model and an input, decode it, then ask what if."
        if self.tab.is_decoding():
            return "A run is still decoding: wait for it to end (or press Esc), then ask what if."
        if kind == "mask" and self.mask is None:
            return f"Mask part of the input first: {self.tab.mask_hint}."
        if not self.run.branch_steps(parent) or self.run.branch(parent).finished is None:
            return "Decode the input first: the what-if scores the run's tokens."
        return ""

    def start(self, kind: str) -> bool:
        """Run a what-if: ``kind`` "mask" (What if?, the mask) or "prior" (No input). False,
        with a message, when it cannot start."""
        t0 = time.perf_counter()
        self.tab.controller.drain()  # the last run's events that the views have not taken yet go first
        self.tab.controller.frame()
        parent = self.run.current_branch()
        why = self.refusal(kind, parent)
        if why:
            self.tab.statusMessage.emit(why)
            return False
        options = self.run.branch(parent).options
        if not isinstance(options, DecodingOptions):
            options = self.tab.options_panel.options()
        original = self.run.branch_steps(parent)
        try:
            fn = self.tab.whatif_fn(options, kind, original)
        except (ValueError, RuntimeError) as exc:
            self.tab.show_error(str(exc))
            return False
        self.tab.clear_error()
        what = self._mask_description if kind == "mask" else "no input"
        self.current = _WhatIfRun(kind, parent, what, options, t0)
        self.tab.start_live_count()
        self.tab.controller.start("decode", fn, self, name="whatif")
        self.view.set_busy(True)
        self.tab.inspector_tabs.bring(self.view)
        self.tab.busyChanged.emit(True, f"What if: {what}…" if kind == "mask" else "Scoring the tokens with no input…")
        return True

    # the run controller's client
    def on_event(self, ev: Any) -> None:
        """One event of the running what-if (GUI thread, from the controller's pump)."""
        from core.tasks.whatif import WhatIfDone, WhatIfScores

        w = self.current
        if w is None:
            return
        if isinstance(ev, SegmentEvent):
            if w.kind == "mask":
                self._segment(w, ev)
            return
        if isinstance(ev, StepEvent):
            if w.branch is not None:  # renumbered: the branch's steps run on without gaps
                self.run.add(replace(ev, step=w.next_step))
                if ev.spec_round >= 0:
                    w.renumbered[ev.step] = w.next_step
                w.next_step += 1
            return
        if isinstance(ev, SpeculationRound):  # after its steps: numbered as they were
            step = w.renumbered.get(ev.step)
            w.renumbered.clear()
            if w.branch is not None and step is not None:
                self.run.add_round(replace(ev, step=step))
            return
        if isinstance(ev, (BeamEvent, WhatIfScores)):
            return
        if isinstance(ev, Finished):
            w.finished = ev
            return
        if isinstance(ev, WhatIfDone):
            self._done(w, ev)

    def on_error(self, message: str) -> None:
        """The what-if's worker failed: its branch keeps what it got, marked failed."""
        w, self.current = self.current, None
        if w is None:
            return
        self.view.set_busy(False)
        self.view.clear_result()
        if w.branch is not None:
            self.run.finish(Finished("", [], RunStats(), True, "error"), w.branch,
                            note="failed: " + message.splitlines()[0])
            self.run.set_growing(self.run.current_branch())
        self.tab.show_error(f"The what-if failed: {message}")

    def on_end(self, _handle: Any) -> None:
        """The what-if's worker ended."""
        if not self.tab.is_busy():
            self.tab.busyChanged.emit(False, "")

    def _segment(self, w: _WhatIfRun, ev: SegmentEvent) -> None:
        """A touched segment starts: the branch is made at the first one; the parent's
        untouched segments before this one are copied in between."""
        if w.branch is None:
            steps = self.run.branch_steps(w.parent)
            first = next((e.step for e in steps if e.segment >= ev.segment), len(steps))
            b = self.run.add_what_if(w.parent, first, ev.segment, w.description, w.options)
            w.branch, w.next_step = b.id, first
        else:
            self._copy_parent_segments(w, lambda s: w.last_segment < s < ev.segment)
        w.last_segment = ev.segment
        w.segments.append(ev.segment)
        self.run.add_segment(ev)

    def _copy_parent_segments(self, w: _WhatIfRun, which: Callable[[int], bool]) -> None:
        """Add the parent's steps and SegmentEvents of the segments ``which`` picks to the
        what-if branch, renumbered."""
        segs = {s.segment: s for s in self.run.segments(w.parent)}
        for k in sorted(k for k in segs if which(k)):
            self.run.add_segment(segs[k])
        for e in self.run.branch_steps(w.parent):
            if which(e.segment):
                self.run.add(replace(e, step=w.next_step) if e.step != w.next_step else e)
                w.next_step += 1

    def _done(self, w: _WhatIfRun, done: Any) -> None:
        self.current = None
        self.view.set_busy(False)
        if w.branch is not None:
            if not done.cancelled:
                self._copy_parent_segments(w, lambda s: s > w.last_segment)
            fin = w.finished or Finished("", [], RunStats())
            steps = self.run.branch_steps(w.branch)
            whole = Finished(text=self.run.text(w.branch), token_ids=[e.token_id for e in steps], stats=fin.stats,
                             cancelled=done.cancelled, reason=fin.reason)
            self.run.finish(whole, w.branch, note=f"input what-if ({done.seconds:.1f} s)")
            self.run.set_growing(self.run.current_branch())
        self.result = WhatIfResult(w.kind, w.parent, w.branch, done)
        self._show_result()
        self._apply_marks()
        if w.kind == "mask":
            if not done.segments:
                msg = f"What if ({done.description}): the mask touches no segment; nothing was decoded again."
            else:
                msg = (f"What if ({done.description}): {len(done.depending())} of {len(done.shifts)} tokens "
                       f"depended on it · {done.seconds:.1f} s")
        else:
            msg = (f"No input: {len(done.prior_explained())} of {len(done.shifts)} tokens are hallucination-prone "
                   f"(the prior explains them) · {done.seconds:.1f} s")
        self.tab.statusMessage.emit(msg + (" (cancelled)" if done.cancelled else ""))

    def _show_result(self) -> None:
        r = self.result
        if r is None:
            self.view.clear_result()
            return
        d = r.done
        original = whatif = None
        if r.kind == "mask" and r.branch is not None:
            segs = set(d.segments)
            original = [e for e in self.run.branch_steps(r.parent) if e.segment in segs]
            whatif = [e for e in self.run.branch_steps(r.branch) if e.segment in segs]
        note = f"The re-decode is branch {r.branch} (Branches tab)." if r.branch is not None else ""
        self.view.show_result(r.kind, d.description, list(d.shifts), original=original, whatif=whatif,
                                     seconds=d.seconds, note=note)
        self.view.select_step(self.run.selected())

    def cancel(self) -> bool:
        """The user cancelled the running what-if (if one runs: True): its branch keeps what it got."""
        w, self.current = self.current, None
        if w is None:
            return False
        self.view.set_busy(False)
        self.view.clear_result()
        if w.branch is not None:
            self.run.finish(Finished(self.run.text(w.branch), [], RunStats(), True, "cancelled"), w.branch,
                            note="cancelled")
            self.run.set_growing(self.run.current_branch())
        return True

    # ------------------------------------------------------------ marks
    def marks(self) -> dict[int, tuple[str, str]]:
        """step -> (colour, tooltip line) of the tokens the last result flags, for the branch it
        scored ({} when another branch is shown, or there is no result)."""
        r = self.result
        if r is None or self.run.current_branch() != r.parent:
            return {}
        out = {}
        for s in r.done.shifts:
            if r.kind == "mask" and s.depends:
                out[s.step] = (DEPEND_COLOR, f"what if ({r.done.description}): p {s.p_input:.2f} → {s.p_other:.2f} "
                                             "— depended on the masked part")
            elif r.kind == "prior" and s.prior_explained:
                out[s.step] = (PRIOR_COLOR, f"no input: prior p {s.p_other:.2f} vs {s.p_input:.2f} with the input "
                                            "— hallucination-prone")
        return out

    def _apply_marks(self) -> None:
        self.run.set_marks(self.marks())  # the token stream follows

    # ------------------------------------------------------------ housekeeping
    def _input_hash(self) -> str | None:
        try:
            return self.tab.input_identity()[1] if self.tab.has_input() else None
        except Exception:  # noqa: BLE001 - no input (yet)
            return None

    def _cleared(self) -> None:
        """A new run: the result scored the old run's tokens. The mask stays for the same input
        (another option was chosen), another input clears it."""
        if self.mask is not None and self._input_hash() != self._mask_input:
            self.mask, self._mask_description = None, ""
            self.tab.mask_changed(None)
        self.current = None
        self.result = None
        self.view.set_busy(False)
        self.view.clear_result()
        self.view.set_mask(self._mask_description or None, self.tab.mask_hint)
        self._apply_marks()

    def _step_clicked(self, step: int) -> None:
        r = self.result
        if r is not None and self.run.current_branch() != r.parent:
            self.run.set_current(r.parent)
        self.tab.select_step(step)
