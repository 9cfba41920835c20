"""Fork at any token and continue: the part of a run tab that makes and shows branches.

Clicking an alternative in the top-k chart (or a candidate in the chain-stage view), or
typing text into the "force…" field, forks the current branch at the shown step
(:meth:`ForkMixin.fork`): the tab re-decodes that step's segment (a 30 s window, a
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
that branch's events into the stream, heatmap and strip (:meth:`ForkMixin.show_branch`).

File → Save exploration… / Open exploration… (:meth:`ForkMixin.save_exploration`,
:meth:`ForkMixin.open_exploration`) write and read the tree as JSON
(``gui.exploration``), checked against the tab's model and input.

The tree is user data and is never dropped without a word (issue 19 §1,
``gui.tabs.kept_explorations``): a run with the same options keeps it, a run with other
options keeps it for Edit → Previous exploration (Ctrl+Z), and closing asks before unsaved
trees go.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from PySide6.QtWidgets import QTabWidget, QWidget

from core.events import BeamEvent, Finished, RunStats, SegmentEvent, StepEvent
from core.options import DecodingOptions

from ..exploration_history import tree_signature
from ..widgets.branch_tree import BranchTree
from ..widgets.fork_diff import ForkDiff
from .kept_explorations import KeptExplorationsMixin


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


class ForkMixin(KeptExplorationsMixin):
    """Forking, the branch views and exploration files for :class:`gui.tabs.run.RunTab`.

    A tab implements :meth:`fork_fn` (re-decode one segment with forced ids) and
    :meth:`input_identity` (what the input is, and its hash); it may override
    :meth:`branch_replayed` to refresh views of its own after a branch is shown.
    """

    #: ask the model to reuse the KV cache of the forced prefix (False: always re-run it)
    fork_reuse_cache = True

    def _init_forking(self) -> None:
        """Build the fork diff, the branch tree and the tabbed pane that holds them beside
        the heatmap; connect the top-k chart, the stage view and the force field."""
        self._fork: _Fork | None = None
        self.fork_diff = ForkDiff(self.run)
        self.branch_tree = BranchTree(self.run)
        self.inspector_tabs = QTabWidget()
        self.inspector_tabs.setDocumentMode(True)
        self.inspector_tabs.addTab(self.heatmap, "Attention")
        self.inspector_tabs.addTab(self.fork_diff, "Fork diff")
        self.inspector_tabs.addTab(self.branch_tree, "Branches")
        self.inspector_tabs.setTabToolTip(1, "a branch beside the branch it was forked from: the common prefix, "
                                             "then both continuations aligned token by token")
        self.inspector_tabs.setTabToolTip(2, "every branch of this input: select one to show it")
        self.topk.alternativeClicked.connect(self._alternative_clicked)
        self.stages.candidateClicked.connect(self._alternative_clicked)
        self.inspector.forceRequested.connect(self.force_text)
        self.fork_diff.stepClicked.connect(self.select_branch_step)
        self.branch_tree.branchPicked.connect(self._branch_picked)
        self.run.currentBranchChanged.connect(self._current_branch_changed)
        self.run.cleared.connect(self._branch_title)
        self._init_kept_explorations()

    def add_inspector_view(self, widget: QWidget, title: str) -> int:
        """Add a view (a beam tree, a lens) as a tab beside the heatmap; its index."""
        return self.inspector_tabs.addTab(widget, title)

    # ------------------------------------------------------------ subclass API
    def fork_fn(self, options: DecodingOptions, segment: int, forced_ids: tuple[int, ...],
                step_offset: int) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator that re-decodes segment ``segment`` of the current input
        with ``forced_ids`` forced after the task prompt, its steps numbered from
        ``step_offset`` (the segment's first step), asking to reuse the KV cache if
        :attr:`fork_reuse_cache` (called in the GUI thread; it captures what it needs). Its
        events: the segment's SegmentEvent, StepEvents, one Finished (the task model's
        ``fork``).

        Raises:
            ValueError, RuntimeError: the input cannot be forked (shown to the user).
        """
        raise RuntimeError(f"the {self.title} tab cannot fork yet")

    def input_identity(self) -> tuple[str, str]:
        """(a description of the current input for people, a hash of its content)."""
        raise RuntimeError("no input")

    def input_settings(self) -> dict:
        """Task settings beside the options that shaped the run (language, region, ...), saved
        with an exploration for the record."""
        return {}

    def branch_replayed(self, branch: int) -> None:
        """Called after ``branch``'s events were shown again (refresh the tab's own views)."""

    def apply_input_settings(self, settings: dict) -> None:
        """Restore what :meth:`input_settings` saved (an exploration is opened); no decode."""

    # ------------------------------------------------------------ exploration files
    def exploration_data(self, attention: str = "mean") -> dict:
        """The tab's exploration as JSON data (``gui.exploration.to_json``).

        Raises:
            ValueError: nothing to save yet.
        """
        from .. import exploration

        if not self.has_input() or self.model is None or not len(self.run.branch(0).own):
            raise ValueError("Nothing to save yet: decode an input first.")
        desc, digest = self.input_identity()
        return exploration.to_json(self.run, task=self.settings_key, model=getattr(self.model, "name", ""),
                                   input_description=desc, input_hash=digest, input_settings=self.input_settings(),
                                   attention=attention)

    def save_exploration(self, path: str, attention: str = "mean") -> bool:
        """Write the exploration to ``path`` (JSON). True on success; errors go to the banner."""
        from pathlib import Path

        from .. import exploration

        try:
            exploration.save(path, self.exploration_data(attention))
        except (OSError, ValueError) as exc:
            self.show_error(f"Could not save the exploration: {getattr(exc, 'strerror', None) or exc}")
            return False
        self._saved_signature = tree_signature(self.run.branches())
        n = len(self.run.branches())
        self.statusMessage.emit(f"Saved the exploration ({n} branch{'es' if n != 1 else ''}) to {Path(path).name}")
        return True

    def open_exploration(self, source: Any, name: str | None = None) -> bool:
        """Open an exploration (a path, or data from ``gui.exploration.load``) made on this
        tab's input with its model: the tree, the options and the selection come back. It is
        refused, with what to do, for another input, model or tab (the banner says it)."""
        from pathlib import Path

        from .. import exploration

        try:
            data = source if isinstance(source, dict) else exploration.load(source)
            desc, digest = self.input_identity() if self.has_input() else (None, None)
            exploration.check(data, task=self.settings_key, model=getattr(self.model, "name", None),
                              input_description=desc, input_hash=digest)
            branches = exploration.branches_from_json(
                data, vocab_size=getattr(getattr(self.model, "backend", None), "vocab_size", None))
        except (exploration.ExplorationError, KeyError, TypeError, ValueError) as exc:
            self.show_error(str(exc) if isinstance(exc, exploration.ExplorationError)
                            else f"The exploration file is damaged ({type(exc).__name__}: {exc}).")
            return False
        name = name or (Path(source).name if not isinstance(source, dict) else "the exploration")
        note = self._leave_exploration("")  # the tree shown so far is kept (Ctrl+Z)
        self.stop_decode()
        self._drop_queued_events()
        self._fork = None
        self.clear_error()
        options = branches[0].options
        if isinstance(options, DecodingOptions):
            try:
                self.options_panel.setOptions(options)  # shown, not decoded again
            except ValueError:
                pass
        self.apply_input_settings(data.get("input", {}).get("settings", {}))
        self.run.select(data.get("selected"))
        self._tree_identity = (desc, digest, getattr(self.model, "name", "") or "") if digest else None
        self.run.restore(branches, int(data.get("current", 0)))
        self._saved_signature = tree_signature(self.run.branches())
        self.busyChanged.emit(self.is_busy(), "")
        self.statusMessage.emit(f"Opened {name}: {len(branches)} branch{'es' if len(branches) != 1 else ''}"
                                + (f" · {note}" if note else ""))
        return True

    # ------------------------------------------------------------ forking
    def tokenize_text(self, text: str) -> list[tuple[int, str]]:
        """``text`` as the decoder would write it: (token id, token text) pairs.

        Raises:
            ValueError: no model, or the text gives no token.
        """
        backend = getattr(self.model, "backend", None)
        if backend is None:
            raise ValueError("load a model first")
        ids = [int(t) for t in backend.tokenize(text)]
        if not ids:
            raise ValueError(f"{text!r} gives no token in {getattr(self.model, 'name', 'this model')}'s vocabulary")
        return [(t, backend.token_text(t)) for t in ids]

    def force_text(self, text: str) -> bool:
        """Fork at the shown step forcing the tokens of ``text`` (the force… field)."""
        if not text:
            return False
        try:
            pieces = self.tokenize_text(text)
        except Exception as exc:  # noqa: BLE001 - the tokenizer's message, for the user
            self.show_error(f"Cannot force {text!r}: {exc}")
            return False
        return self.fork(self.run.current(), [t for t, _ in pieces], "".join(s for _, s in pieces))

    def _alternative_clicked(self, step: int, token_id: int, text: str) -> None:
        self.fork(step, [token_id], text)

    def fork(self, step: int | None, token_ids: list[int], text: str, branch: int | None = None) -> bool:
        """Fork ``branch`` (default: the current one) at ``step``, forcing ``token_ids``
        (their text ``text``), and decode the rest of the step's segment in a worker. The new
        branch becomes the current one. False (and a message) when it cannot start."""
        t0 = time.perf_counter()
        while self._inbox:  # the last run's events that the views have not taken yet go first
            self._pump()
        parent = self.run.current_branch() if branch is None else branch
        ev = self.run.branch_step(parent, step)
        why = self._fork_refusal(ev, token_ids)
        if why:
            self.statusMessage.emit(why)
            return False
        seg = ev.segment
        prefix = [e.token_id for e in self.run.branch_steps(parent) if e.segment == seg and e.step < step]
        options = self.run.branch(parent).options
        if not isinstance(options, DecodingOptions):
            options = self.options_panel.options()
        try:
            fn = self.fork_fn(options, seg, tuple(prefix) + tuple(int(t) for t in token_ids), step - len(prefix))
        except (ValueError, RuntimeError) as exc:
            self.show_error(str(exc))
            return False
        self.clear_error()
        new = self.run.fork(parent, step, token_ids, text, options)
        self._fork = _Fork(new.id, step, len(token_ids), len(prefix) + len(token_ids), t0)
        self._t_first, self._n_live = t0, 0
        self._start_fork_worker(fn)  # first: the views below are redrawn while it decodes
        self.run.set_current(new.id)  # replays the shared prefix into the views
        self.select_step(step)
        self.fork_diff.set_branch(new.id)
        self.inspector_tabs.setCurrentWidget(self.fork_diff)
        self.busyChanged.emit(True, f"Forking at step {step}: {ev.text!r} → {text!r}…")
        return True

    def _fork_refusal(self, ev: StepEvent | None, token_ids: list[int]) -> str:
        """Why a fork at ``ev`` cannot start now ("" if it can)."""
        if self.model is None or not self.has_input():
            return "Load a model and an input, then fork at a token."
        if self.is_decoding():
            what = "A fork" if self._fork is not None else "The run"
            return f"{what} is still decoding: wait for it to end (or press Esc), then fork."
        if ev is None:
            return "Select a token first (click it in the token stream), then click an alternative."
        if list(token_ids) == [ev.token_id]:
            return f"{ev.text!r} is the token this branch already has at step {ev.step}: click another one to fork."
        return ""

    def _start_fork_worker(self, fn) -> None:
        from ..worker import start_worker
        from .run import _RunEnded, _RunError

        fork = self._fork

        def receive(ev: Any) -> None:  # timed as it reaches the GUI thread, not when the views show it
            if (fork.first_new_s is None and isinstance(ev, StepEvent)
                    and ev.step >= fork.step + fork.n_forced):
                fork.first_new_s = time.perf_counter() - fork.t0
            self._receive(ev)

        handle = start_worker(
            fn, on_event=receive, on_error=lambda m: self._receive(_RunError(m)),
            on_finished=lambda: self._receive(_RunEnded(handle)), name="fork",
        )
        self._decode = handle

    def _on_fork_event(self, ev: Any) -> None:
        """One event of the running fork (GUI thread, from ``_pump``)."""
        fork = self._fork
        shown = self.run.current_branch() == fork.branch
        if isinstance(ev, SegmentEvent):
            self.run.add_segment(ev)  # the branch's own copy; its label is already shown
            return
        if isinstance(ev, StepEvent):
            if ev.step < fork.step:
                return  # the prefix was re-run (no cache reuse): the parent's steps stand
            self.run.add(ev)
            self._n_live += 1
            if shown:
                self._view_queue.append(ev)
            return
        if isinstance(ev, BeamEvent):
            if shown:
                self._pending_beams = ev
            return
        self.flush_views()
        if isinstance(ev, Finished):
            self._fork_finished(ev)
        elif hasattr(ev, "message"):  # the worker failed
            self._fork = None
            b = fork.branch
            self.run.finish(self._branch_finished(b, Finished("", [], RunStats(), True, "error")), b,
                            note="failed: " + ev.message.splitlines()[0])
            self.show_error(f"The fork at step {fork.step} failed: {ev.message}")

    def _fork_finished(self, fin: Finished) -> None:
        fork, self._fork = self._fork, None
        b = fork.branch
        n_new = sum(1 for s in self.run.branch(b).own if s >= fork.step + fork.n_forced)
        appended = self.run.complete_from_parent(b) if not fin.cancelled else 0
        if appended and self.run.current_branch() == b:
            self._replay_tail(b, len(self.run.branch_steps(b)) - appended)
        note = _reuse_note(fin.stats, fork.n_prefix)
        whole = self._branch_finished(b, fin)
        self.run.finish(whole, b, note=note)
        if self.run.current_branch() == b:
            self.stream.finish(whole)
        self.statsChanged.emit(self._stats_dict(fin))
        timing = (f"first new token {1000 * fork.first_new_s:.0f} ms after the click"
                  if fork.first_new_s is not None else "no new token (the forced segment ended)")
        what = "cancelled" if fin.cancelled else f"{n_new} new token{'s' if n_new != 1 else ''}"
        self.statusMessage.emit(f"Fork at step {fork.step}: {note} · {timing} · {what}")
        self.branch_replayed(b)
        self.forkFinished.emit(b)

    def _fork_cancelled(self) -> bool:
        """The user cancelled the running fork (if one runs: True): its branch keeps the
        tokens it got."""
        fork, self._fork = self._fork, None
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
        self.select_step(step)

    def _branch_picked(self, branch: int) -> None:
        """A branch picked in the tree: a fork is shown in the diff beside its parent (the root
        keeps the diff as it is)."""
        if not self.run.branch(branch).is_root:
            self.fork_diff.set_branch(branch)

    def show_branch(self, branch: int) -> None:
        """Make ``branch`` the current one (the token stream, top-k and heatmap show it)."""
        self.run.set_current(branch)

    def _current_branch_changed(self, branch: int) -> None:
        """Replay the current branch's segments and steps into the stream, strip and
        heatmap, then show the selection (or the newest step) in the top-k chart."""
        self._view_queue = []
        self._pending_beams = None
        self.stream.clear()
        self.heatmap.clear()
        self.topk.set_step(None)
        self._replay_tail(branch, 0)
        b = self.run.branch(branch)
        if b.finished is not None and (self._fork is None or self._fork.branch != branch):
            self.stream.finish(b.finished)
        sel = self.run.selected()
        if sel is not None and sel in self.run:
            self.select_step(sel)
        else:
            self.follow_newest()
        if b.finished is not None:  # the replay reported live statistics: this branch's are final
            self.statsChanged.emit(self._stats_dict(b.finished))
        self._branch_title()
        self.branch_replayed(branch)

    def _replay_tail(self, branch: int, start: int) -> None:
        """Show ``branch``'s steps from ``start`` on (with the SegmentEvent before each
        segment's first step) in the stream, strip and heatmap."""
        segs = {s.segment: s for s in self.run.segments(branch)}
        steps = self.run.branch_steps(branch)
        seen = {e.segment for e in steps[:start]}
        for ev in steps[start:]:
            if ev.segment not in seen:
                seen.add(ev.segment)
                if ev.segment in segs:
                    self._view_queue.append(segs[ev.segment])
            self._view_queue.append(ev)
        self.flush_views()

    def _branch_title(self) -> None:
        b = self.run.branch(self.run.current_branch())
        if b.is_root and not self.run.children(b.id):
            self.stream.title.setText("<b>Token stream</b> — click a token to inspect its step")
        else:
            what = "the original run" if b.is_root else f"branch {b.id} ({_html(b.label())})"
            self.stream.title.setText(f"<b>Token stream</b> — {what}")


def _reuse_note(stats: Any, n_forced: int) -> str:
    """What the fork reused, from its Finished's statistics."""
    reused = getattr(stats, "reused_tokens", None)
    if reused:
        return f"KV cache reused ({reused} token{'s' if reused != 1 else ''})"
    if reused is None:
        return "prefix decoded again"
    return f"prefix re-run ({n_forced} forced token{'s' if n_forced != 1 else ''} after the task prompt)"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
