"""Input what-ifs in a run tab (issue 13, section 3): mask part of the input, decode again,
see which tokens depended on it; "No input": which tokens the decoder's prior alone explains.

The tab lets the user mask part of its input (``gui.tabs.whatif_inputs``: drag a span on the
waveform, a region on the image in mask mode, drop selected source words) and calls
:meth:`WhatIfMixin.set_mask`. **What if?** (the "What if" view beside the heatmap) runs the
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
from typing import Any, Callable, Iterator

from core.events import BeamEvent, Finished, RunStats, SegmentEvent, StepEvent
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


@dataclass(frozen=True)
class WhatIfResult:
    """The last what-if's result: its kind, the branch it scored (``parent``), the branch of
    its re-decode (mask; None for no input or when nothing was decoded), and the
    ``core.tasks.whatif.WhatIfDone``."""

    kind: str
    parent: int
    branch: int | None
    done: Any


class WhatIfMixin:
    """What-ifs for :class:`gui.tabs.run.RunTab` (see the module docstring).

    A tab implements :meth:`whatif_fn` and sets :attr:`mask_hint`; its mask controls call
    :meth:`set_mask` (and :meth:`mask_changed` lets it draw the mask).
    """

    #: how to mask in this tab (shown while nothing is masked)
    mask_hint = "this tab cannot mask its input yet"

    def _init_whatif(self) -> None:
        self._whatif: _WhatIfRun | None = None
        self.whatif_mask: Any = None
        self.whatif_result: WhatIfResult | None = None
        self._mask_description = ""
        self.whatif_view = WhatIfView()
        self.whatif_view.set_mask(None, self.mask_hint)
        self.add_inspector_view(self.whatif_view, "What if")
        self.inspector_tabs.setTabToolTip(self.inspector_tabs.indexOf(self.whatif_view),
                                          "mask part of the input and see which tokens depended on it; "
                                          "No input: which tokens the decoder's prior alone explains")
        self.whatif_view.whatIfRequested.connect(self.run_what_if)
        self.whatif_view.noInputRequested.connect(self.run_no_input)
        self.whatif_view.clearRequested.connect(self.clear_mask)
        self.whatif_view.stepClicked.connect(self._whatif_step_clicked)
        self.run.cleared.connect(self._whatif_cleared)
        self.run.currentBranchChanged.connect(lambda _b: self._apply_marks())
        self.run.selectionChanged.connect(self.whatif_view.select_step)

    # ------------------------------------------------------------ subclass API
    def whatif_fn(self, options: DecodingOptions, kind: str, original: list[StepEvent]
                  ) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator for a what-if of the current input (called in the GUI
        thread; it captures what it needs): ``kind`` "mask" runs the task model's
        ``what_if`` with :attr:`whatif_mask`, "prior" its ``no_input``; ``original`` is the
        scored branch's StepEvents.

        Raises:
            ValueError, RuntimeError: it cannot run (shown to the user).
        """
        raise RuntimeError(f"the {self.title} tab has no input what-ifs")

    def mask_changed(self, mask: Any) -> None:
        """The mask changed (None: cleared); the tab draws it on its input view."""

    # ------------------------------------------------------------ mask
    def set_mask(self, mask: Any, description: str = "") -> None:
        """Use ``mask`` (the tab's kind: a span, a region, source positions) for What if?; None
        clears it. The What if view comes to the front so that its button is at hand. The mask
        belongs to the current input: another input clears it."""
        self.whatif_mask = mask
        self._mask_input = self._input_hash() if mask is not None else None
        self._mask_description = description if mask is not None else ""
        self.whatif_view.set_mask(self._mask_description or None, self.mask_hint)
        if self._whatif is not None:
            self.whatif_view.set_busy(True)
        if mask is not None:
            self.inspector_tabs.setCurrentWidget(self.whatif_view)
        self.mask_changed(mask)

    def clear_mask(self) -> None:
        """Forget the mask and the what-if result (and their marks)."""
        self.set_mask(None)
        self.whatif_result = None
        self.whatif_view.clear_result()
        self._apply_marks()

    # ------------------------------------------------------------ running
    def run_what_if(self) -> bool:
        """What if? (the mask): False, with a message, when it cannot start."""
        return self._start_whatif("mask")

    def run_no_input(self) -> bool:
        """No input: False, with a message, when it cannot start."""
        return self._start_whatif("prior")

    def _whatif_refusal(self, kind: str, parent: int) -> str:
        if self.model is None or not self.has_input():
            return "Load a model and an input, decode it, then ask what if."
        if self.is_decoding():
            return "A run is still decoding: wait for it to end (or press Esc), then ask what if."
        if kind == "mask" and self.whatif_mask is None:
            return f"Mask part of the input first: {self.mask_hint}."
        if not self.run.branch_steps(parent) or self.run.branch(parent).finished is None:
            return "Decode the input first: the what-if scores the run's tokens."
        return ""

    def _start_whatif(self, kind: str) -> bool:
        t0 = time.perf_counter()
        while self._inbox:  # the last run's events that the views have not taken yet go first
            self._pump()
        parent = self.run.current_branch()
        why = self._whatif_refusal(kind, parent)
        if why:
            self.statusMessage.emit(why)
            return False
        options = self.run.branch(parent).options
        if not isinstance(options, DecodingOptions):
            options = self.options_panel.options()
        original = self.run.branch_steps(parent)
        try:
            fn = self.whatif_fn(options, kind, original)
        except (ValueError, RuntimeError) as exc:
            self.show_error(str(exc))
            return False
        self.clear_error()
        what = self._mask_description if kind == "mask" else "no input"
        self._whatif = _WhatIfRun(kind, parent, what, options, t0)
        self._n_live = 0
        self._start_whatif_worker(fn)
        self.whatif_view.set_busy(True)
        self.inspector_tabs.setCurrentWidget(self.whatif_view)
        self.busyChanged.emit(True, f"What if: {what}…" if kind == "mask" else "Scoring the tokens with no input…")
        return True

    def _start_whatif_worker(self, fn) -> None:
        from ..worker import start_worker
        from .run import _RunEnded, _RunError

        handle = start_worker(
            fn, on_event=self._receive, on_error=lambda m: self._receive(_RunError(m)),
            on_finished=lambda: self._receive(_RunEnded(handle)), name="whatif",
        )
        self._decode = handle

    def _on_whatif_event(self, ev: Any) -> None:
        """One event of the running what-if (GUI thread, from ``_pump``)."""
        from core.tasks.whatif import WhatIfDone, WhatIfScores

        w = self._whatif
        if isinstance(ev, SegmentEvent):
            if w.kind == "mask":
                self._whatif_segment(w, ev)
            return
        if isinstance(ev, StepEvent):
            if w.branch is not None:  # renumbered: the branch's steps run on without gaps
                self.run.add(replace(ev, step=w.next_step))
                w.next_step += 1
            return
        if isinstance(ev, (BeamEvent, WhatIfScores)):
            return
        if isinstance(ev, Finished):
            w.finished = ev
            return
        if isinstance(ev, WhatIfDone):
            self._whatif_done(w, ev)
            return
        if hasattr(ev, "message"):  # the worker failed
            self._whatif = None
            self.whatif_view.set_busy(False)
            self.whatif_view.clear_result()
            if w.branch is not None:
                self.run.finish(Finished("", [], RunStats(), True, "error"), w.branch,
                                note="failed: " + ev.message.splitlines()[0])
                self.run.set_growing(self.run.current_branch())
            self.show_error(f"The what-if failed: {ev.message}")

    def _whatif_segment(self, w: _WhatIfRun, ev: SegmentEvent) -> None:
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

    def _whatif_done(self, w: _WhatIfRun, done: Any) -> None:
        self._whatif = None
        self.whatif_view.set_busy(False)
        if w.branch is not None:
            if not done.cancelled:
                self._copy_parent_segments(w, lambda s: s > w.last_segment)
            fin = w.finished or Finished("", [], RunStats())
            steps = self.run.branch_steps(w.branch)
            whole = Finished(text=self.run.text(w.branch), token_ids=[e.token_id for e in steps], stats=fin.stats,
                             cancelled=done.cancelled, reason=fin.reason)
            self.run.finish(whole, w.branch, note=f"input what-if ({done.seconds:.1f} s)")
            self.run.set_growing(self.run.current_branch())
        self.whatif_result = WhatIfResult(w.kind, w.parent, w.branch, done)
        self._show_whatif_result()
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
        self.statusMessage.emit(msg + (" (cancelled)" if done.cancelled else ""))

    def _show_whatif_result(self) -> None:
        r = self.whatif_result
        if r is None:
            self.whatif_view.clear_result()
            return
        d = r.done
        original = whatif = None
        if r.kind == "mask" and r.branch is not None:
            segs = set(d.segments)
            original = [e for e in self.run.branch_steps(r.parent) if e.segment in segs]
            whatif = [e for e in self.run.branch_steps(r.branch) if e.segment in segs]
        note = f"The re-decode is branch {r.branch} (Branches tab)." if r.branch is not None else ""
        self.whatif_view.show_result(r.kind, d.description, list(d.shifts), original=original, whatif=whatif,
                                     seconds=d.seconds, note=note)
        self.whatif_view.select_step(self.run.selected())

    def _whatif_cancelled(self) -> bool:
        """The user cancelled the running what-if (if one runs: True): its branch keeps what it got."""
        w, self._whatif = self._whatif, None
        if w is None:
            return False
        self.whatif_view.set_busy(False)
        self.whatif_view.clear_result()
        if w.branch is not None:
            self.run.finish(Finished(self.run.text(w.branch), [], RunStats(), True, "cancelled"), w.branch,
                            note="cancelled")
            self.run.set_growing(self.run.current_branch())
        return True

    # ------------------------------------------------------------ marks
    def whatif_marks(self) -> dict[int, tuple[str, str]]:
        """step -> (colour, tooltip line) of the tokens the last result flags, for the branch it
        scored ({} when another branch is shown, or there is no result)."""
        r = self.whatif_result
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
        self.stream.set_marks(self.whatif_marks())

    # ------------------------------------------------------------ housekeeping
    def _input_hash(self) -> str | None:
        try:
            return self.input_identity()[1] if self.has_input() else None
        except Exception:  # noqa: BLE001 - no input (yet)
            return None

    def _whatif_cleared(self) -> None:
        """A new run: the result scored the old run's tokens. The mask stays for the same input
        (another option was chosen), another input clears it."""
        if self.whatif_mask is not None and self._input_hash() != getattr(self, "_mask_input", None):
            self.whatif_mask, self._mask_description = None, ""
            self.mask_changed(None)
        self._whatif = None
        self.whatif_result = None
        self.whatif_view.set_busy(False)
        self.whatif_view.clear_result()
        self.whatif_view.set_mask(self._mask_description or None, self.mask_hint)
        self._apply_marks()

    def _whatif_step_clicked(self, step: int) -> None:
        r = self.whatif_result
        if r is not None and self.run.current_branch() != r.parent:
            self.run.set_current(r.parent)
        self.select_step(step)
