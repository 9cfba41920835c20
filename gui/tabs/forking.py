"""Fork at any token and continue: the part of a run tab that makes and shows branches.

Clicking an alternative in the top-k chart (or a candidate in the chain-stage view), or
typing text into the "force…" field, forks the current branch at the shown step
(:meth:`Forking.fork`): the tab re-decodes that step's segment (a 30 s window, a
sentence, an OCR line) in a worker thread with the branch's tokens of the segment up to
the step plus the new token(s) forced after the task prompt (``fork_fn``, one per tab:
the task model's segment re-decode, which reuses the encoder output and, where the
backend can cut its cache, the KV cache of the common prefix). The new branch becomes the
current one and grows live in the token stream, the heatmap and the top-k chart; the
status bar says whether the KV cache was reused (how many tokens) or the prefix re-run,
and how long the first new token took after the click.

The branches live in the tab's :class:`~gui.run_state.RunState`; the fork diff
(:class:`~gui.widgets.fork_diff.ForkDiff`) and the branch tree
(:class:`~gui.widgets.branch_tree.BranchTree`) are views of it, tabbed beside the
attention heatmap. Making another branch current (the tree, a click in the diff) replays
that branch's events into the stream, heatmap and strip (``RunTab.show_branch``; the run
tab redraws its views when ``RunState.currentBranchChanged``).

File → Save exploration… / Open exploration… (``gui.tabs.kept_explorations``) write and
read the tree as JSON (``gui.exploration``), checked against the tab's model and input.

The tree is user data and is never dropped without a word (issue 19 §1,
``gui.tabs.kept_explorations``): a run with the same options keeps it, a run with other
options keeps it for Edit → Previous exploration (Ctrl+Z), and closing asks before unsaved
trees go.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject

from core.events import BeamEvent, Finished, RunStats, SegmentEvent, SpeculationRound, StepEvent
from core.options import DecodingOptions


@dataclass
class _Fork:
    """The fork being decoded: its branch, its fork step, how many new tokens it forces and
    how many tokens it forces in all (the segment's tokens before the step too), when the
    user asked for it (perf_counter) and when its first new (unforced) token arrived."""

    branch: int
    step: int
    n_forced: int
    n_prefix: int
    t0: float
    first_new_s: float | None = None


class Forking(QObject):
    """Forking for a :class:`gui.tabs.run.RunTab` (module docstring): a client of the tab's
    run controller. The tab implements ``fork_fn`` and ``input_identity``; it may override
    ``branch_replayed`` to refresh views of its own after a branch is shown, and
    ``exploring_refusal`` to refuse forks on runs it cannot fork yet."""

    def __init__(self, tab: Any) -> None:
        super().__init__(tab)
        self.tab = tab
        self.run = tab.run
        self.current: _Fork | None = None  # the fork being decoded
        tab.topk.alternativeClicked.connect(self._alternative_clicked)
        tab.stages.candidateClicked.connect(self._alternative_clicked)
        tab.inspector.forceRequested.connect(self.force_text)
        tab.fork_diff.stepClicked.connect(self.select_branch_step)
        tab.branch_tree.branchPicked.connect(self._branch_picked)

    def growing(self, branch: int) -> bool:
        """A fork is decoding into ``branch``."""
        return self.current is not None and self.current.branch == branch

    def reset(self) -> None:
        """Forget the running fork (a new run or an opened tree replaces the branches)."""
        self.current = None

    # ------------------------------------------------------------ forking
    def tokenize_text(self, text: str) -> list[tuple[int, str]]:
        """``text`` as the decoder would write it: (token id, token text) pairs.

        Raises:
            ValueError: no model, or the text gives no token.
        """
        model = self.tab.model
        backend = getattr(model, "backend", None)
        if backend is None:
            raise ValueError("load a model first")
        ids = [int(t) for t in backend.tokenize(text)]
        if not ids:
            raise ValueError(f"{text!r} gives no token in {getattr(model, 'name', 'this model')}'s vocabulary")
        return [(t, backend.token_text(t)) for t in ids]

    def force_text(self, text: str) -> bool:
        """Fork at the shown step forcing the tokens of ``text`` (the force… field)."""
        if not text:
            return False
        try:
            pieces = self.tokenize_text(text)
        except Exception as exc:  # noqa: BLE001 - the tokenizer's message, for the user
            self.tab.show_error(f"Cannot force {text!r}: {exc}")
            return False
        return self.fork(self.run.current(), [t for t, _ in pieces], "".join(s for _, s in pieces))

    def _alternative_clicked(self, step: int, token_id: int, text: str) -> None:
        self.fork(step, [token_id], text)

    def fork(self, step: int | None, token_ids: list[int], text: str, branch: int | None = None) -> bool:
        """Fork ``branch`` (default: the current one) at ``step``, forcing ``token_ids``
        (their text ``text``), and decode the rest of the step's segment in a worker. The new
        branch becomes the current one. False (and a message) when it cannot start."""
        tab = self.tab
        t0 = time.perf_counter()
        tab.controller.drain()  # the last run's events that the views have not taken yet go first
        tab.controller.frame()
        parent = self.run.current_branch() if branch is None else branch
        ev = self.run.branch_step(parent, step)
        why = self.refusal(ev, token_ids)
        if why:
            tab.statusMessage.emit(why)
            return False
        seg = ev.segment
        prefix = [e.token_id for e in self.run.branch_steps(parent) if e.segment == seg and e.step < step]
        options = self.run.branch(parent).options
        if not isinstance(options, DecodingOptions):
            options = tab.options_panel.options()
        try:
            fn = tab.fork_fn(options, seg, tuple(prefix) + tuple(int(t) for t in token_ids), step - len(prefix))
        except (ValueError, RuntimeError) as exc:
            tab.show_error(str(exc))
            return False
        tab.clear_error()
        new = self.run.fork(parent, step, token_ids, text, options)
        self.current = _Fork(new.id, step, len(token_ids), len(prefix) + len(token_ids), t0)
        tab.start_live_count(t0)
        tab.controller.start("decode", fn, self, name="fork")  # first: the views below are redrawn while it decodes
        self.run.set_current(new.id)  # replays the shared prefix into the views
        tab.select_step(step)
        tab.fork_diff.set_branch(new.id)
        tab.inspector_tabs.bring(tab.fork_diff)
        tab.busyChanged.emit(True, f"Forking at step {step}: {ev.text!r} → {text!r}…")
        return True

    def refusal(self, ev: StepEvent | None, token_ids: list[int]) -> str:
        """Why a fork at ``ev`` cannot start now ("" if it can)."""
        tab = self.tab
        why = tab.exploring_refusal("Forks")
        if why:
            return why
        if tab.model is None or not tab.has_input():
            return "Load a model and an input, then fork at a token."
        if tab.is_decoding():
            what = "A fork" if self.current is not None else "The run"
            return f"{what} is still decoding: wait for it to end (or press Esc), then fork."
        if ev is None:
            return "Select a token first (click it in the token stream), then click an alternative."
        if list(token_ids) == [ev.token_id]:
            return f"{ev.text!r} is the token this branch already has at step {ev.step}: click another one to fork."
        return ""

    # the run controller's client
    def on_event(self, ev: Any) -> None:
        """One event of the running fork (GUI thread, from the controller's pump)."""
        fork = self.current
        if fork is None:
            return
        if isinstance(ev, SegmentEvent):
            self.run.add_segment(ev)  # the branch's own copy; its label is already shown
            return
        if isinstance(ev, StepEvent):
            if ev.step < fork.step:
                return  # the prefix was re-run (no cache reuse): the parent's steps stand
            if fork.first_new_s is None and ev.step >= fork.step + fork.n_forced:
                fork.first_new_s = time.perf_counter() - fork.t0
            self.run.add(ev)
            self.tab.count_live_token()
            return
        if isinstance(ev, BeamEvent):
            self.run.add_beams(ev)
            return
        if isinstance(ev, SpeculationRound):
            self.run.add_round(ev)  # one before the fork step is the parent's: ignored
            return
        if isinstance(ev, Finished):
            self._finished(ev)

    def on_error(self, message: str) -> None:
        """The fork's worker failed: its branch keeps what it got, marked failed."""
        fork, self.current = self.current, None
        if fork is None:
            return
        b = fork.branch
        self.run.finish(self._branch_finished(b, Finished("", [], RunStats(), True, "error")), b,
                        note="failed: " + message.splitlines()[0])
        self.tab.show_error(f"The fork at step {fork.step} failed: {message}")

    def on_end(self, _handle: Any) -> None:
        """The fork's worker ended."""
        if not self.tab.is_busy():
            self.tab.busyChanged.emit(False, "")

    def _finished(self, fin: Finished) -> None:
        tab = self.tab
        fork, self.current = self.current, None
        b = fork.branch
        n_new = sum(1 for s in self.run.branch(b).own if s >= fork.step + fork.n_forced)
        if not fin.cancelled:
            self.run.complete_from_parent(b)  # the later segments: shown with the next frame
        tab.controller.frame()
        note = _reuse_note(fin.stats, fork.n_prefix)
        whole = self._branch_finished(b, fin)
        self.run.finish(whole, b, note=note)  # the stream shows it when b is the current branch
        tab.statsChanged.emit(tab.stats_dict(fin))
        timing = (f"first new token {1000 * fork.first_new_s:.0f} ms after the click"
                  if fork.first_new_s is not None else "no new token (the forced segment ended)")
        what = "cancelled" if fin.cancelled else f"{n_new} new token{'s' if n_new != 1 else ''}"
        tab.statusMessage.emit(f"Fork at step {fork.step}: {note} · {timing} · {what}")
        tab.branch_replayed(b)
        tab.forkFinished.emit(b)

    def cancel(self) -> bool:
        """The user cancelled the running fork (if one runs: True): its branch keeps the
        tokens it got."""
        fork, self.current = self.current, None
        if fork is not None:
            self.run.finish(self._branch_finished(fork.branch, Finished("", [], RunStats(), True, "cancelled")),
                            fork.branch, note="cancelled")
        return fork is not None

    def _branch_finished(self, branch: int, fin: Finished) -> Finished:
        """The Finished of a whole branch: its text and token ids, ``fin``'s statistics and end."""
        steps = self.run.branch_steps(branch)
        return Finished(text=self.run.text(branch), token_ids=[e.token_id for e in steps], stats=fin.stats,
                        cancelled=fin.cancelled, reason=fin.reason)

    # ------------------------------------------------------------ showing branches
    def select_branch_step(self, branch: int, step: int) -> None:
        """Make ``branch`` current and select its ``step`` (a click in the fork diff)."""
        self.run.set_current(branch)
        self.tab.select_step(step)

    def _branch_picked(self, branch: int) -> None:
        """A branch picked in the tree: a fork is shown in the diff beside its parent (the root
        keeps the diff as it is)."""
        if not self.run.branch(branch).is_root:
            self.tab.fork_diff.set_branch(branch)


def _reuse_note(stats: Any, n_forced: int) -> str:
    """What the fork reused, from its Finished's statistics."""
    reused = getattr(stats, "reused_tokens", None)
    if reused:
        return f"KV cache reused ({reused} token{'s' if reused != 1 else ''})"
    if reused is None:
        return "prefix decoded again"
    return f"prefix re-run ({n_forced} forced token{'s' if n_forced != 1 else ''} after the task prompt)"
