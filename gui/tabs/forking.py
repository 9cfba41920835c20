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

The tree is user data and is never dropped without a word (issue 19 §1). A run with the same
options (F5, or only more capture: the logit lens) takes the old forks and what-ifs back when
its root gives the same tokens (:meth:`ForkMixin._settle_kept_tree`). A run with other options,
another input or an opened file starts a new tree, and the old one is kept in
:attr:`ForkMixin.explorations` (``gui.exploration_history``): Edit → Previous exploration
(Ctrl+Z) brings it back onto the same input, Next exploration (Ctrl+Shift+Z) goes forward.
The window asks Save / Discard / Cancel on close while trees, kept ones included, or lanes
are unsaved (:meth:`ForkMixin.exploration_work`, ``MainWindow.closeEvent``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from PySide6.QtWidgets import QTabWidget, QWidget

from core.events import BeamEvent, Finished, RunStats, SegmentEvent, StepEvent
from core.options import DecodingOptions

from ..exploration_history import ExplorationHistory, KeptExploration, describe_branches, same_options, tree_signature
from ..widgets.branch_tree import BranchTree
from ..widgets.fork_diff import ForkDiff


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


class ForkMixin:
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
        #: explorations replaced by a new one, per input (Edit → Previous / Next exploration)
        self.explorations = ExplorationHistory()
        self._kept_tree: KeptExploration | None = None  # taken back if a same-options run gives the same tokens
        self._tree_identity: tuple[str, str, str] | None = None  # (description, hash) of the tree's input, model
        self._saved_signature: tuple | None = None  # tree_signature when last saved or opened
        self._exploration_note = ""  # what happened to the previous tree, told when the run ends
        self.run.branchAdded.connect(self._note_tree_input)

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
            branches = exploration.branches_from_json(data)
        except (exploration.ExplorationError, KeyError, TypeError, ValueError) as exc:
            self.show_error(str(exc) if isinstance(exc, exploration.ExplorationError)
                            else f"The exploration file is damaged ({type(exc).__name__}: {exc}).")
            return False
        name = name or (Path(source).name if not isinstance(source, dict) else "the exploration")
        note = self._leave_exploration(f"opened {name}")  # the tree shown so far is kept (Ctrl+Z)
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

    # ------------------------------------------------------------ kept explorations
    def _note_tree_input(self, branch: int) -> None:
        """The tree's first fork or what-if: remember which input it was made on (a later
        run may come after the input changed)."""
        if branch != 0 and self._tree_identity is None:
            ident = self._input_identity_or_none()
            if ident is not None:
                self._tree_identity = (*ident, getattr(self.model, "name", "") or "")

    def _input_identity_or_none(self) -> tuple[str, str] | None:
        """``input_identity()``, or None without an input. A large input (the ``audio`` array,
        the ``image``) is hashed once while it stays the same object: SHA-256 of an hour of
        audio takes ~1 s, and every run of a tree with forks asks."""
        import weakref

        try:
            if not self.has_input():
                return None
            objs = [getattr(self, n, None) for n in ("audio", "image")]
            extra = (repr(getattr(self, "region", None)), getattr(self, "source_name", ""))
            cache = getattr(self, "_identity_cache", None)
            if (cache is not None and cache[2] == extra
                    and all((r() if r is not None else None) is o for r, o in zip(cache[0], objs))):
                return cache[1]
            ident = self.input_identity()
            try:
                refs = [weakref.ref(o) if o is not None else None for o in objs]
                self._identity_cache = (refs, ident, extra) if any(o is not None for o in objs) else None
            except TypeError:  # an input that takes no weak reference: no cache
                self._identity_cache = None
            return ident
        except Exception:  # noqa: BLE001 - no input (yet)
            return None

    def has_exploration_work(self) -> bool:
        """The tree holds something the user made: a fork or a what-if."""
        return len(self.run.branches()) > 1

    def exploration_saved(self) -> bool:
        """The tree is as it was last saved to (or opened from) a file."""
        return self._saved_signature == tree_signature(self.run.branches())

    def snapshot_exploration(self) -> KeptExploration:
        """The tree shown now as a :class:`KeptExploration` (its Branch objects, not copies)."""
        ident = self._tree_identity or (*(self._input_identity_or_none() or ("", "")),
                                        getattr(self.model, "name", "") or "")
        return KeptExploration(
            branches=self.run.branches(), current=self.run.current_branch(), selected=self.run.selected(),
            input_hash=ident[1], input_description=ident[0], input_settings=self.input_settings(),
            model=ident[2], saved=self.exploration_saved(),
        )

    def _keep(self, entry: KeptExploration, why: str, same_input: bool = True) -> str:
        """Keep ``entry`` for Previous exploration; the sentence that tells the user (also
        the status message)."""
        dropped = self.explorations.push(entry)
        if not same_input:
            msg = (f"{why} — the previous input's exploration is kept ({entry.describe()}): "
                   "open that input again, then Ctrl+Z brings it back")
        elif entry.model != (getattr(self.model, "name", "") or ""):
            msg = (f"{why} — the previous model's exploration is kept ({entry.describe()}): "
                   f"load {entry.model or 'that model'} again, then Ctrl+Z brings it back")
        else:
            msg = f"{why} — previous exploration kept ({entry.describe()}): Ctrl+Z brings it back"
        if dropped:
            lost = ", ".join(e.describe() for e in dropped)
            msg += (f"; the oldest kept exploration{'s' if len(dropped) != 1 else ''} ({lost}) "
                    "went: save those you want to keep (File → Save exploration…)")
        self.statusMessage.emit(msg)
        return msg

    def _leave_exploration(self, why: str, same_input: bool = True) -> str:
        """A new tree replaces the one shown (another input, an opened file): keep the old
        one if the user made something in it. The message, or ""."""
        pending, self._kept_tree = self._kept_tree, None
        entry = pending if pending is not None else (
            self.snapshot_exploration() if self.has_exploration_work() else None)
        self._tree_identity = None
        return self._keep(entry, why, same_input) if entry is not None else ""

    def _begin_exploration(self, options: DecodingOptions) -> None:
        """A run with ``options`` is about to replace the tree (``RunTab._start_decode``). A
        tree with work and the same options (capture aside) on the same input waits to be
        taken back when the run ends (:meth:`_settle_kept_tree`); with other options or
        another input it is kept for Previous exploration, and the status bar says so."""
        self._exploration_note = ""
        pending, self._kept_tree = self._kept_tree, None
        if pending is None and self.has_exploration_work():
            pending = self.snapshot_exploration()
        self._tree_identity = None
        if pending is None:
            return
        ident = self._input_identity_or_none()
        same_input = ident is not None and ident[1] == pending.input_hash
        same_model = pending.model == (getattr(self.model, "name", "") or "")
        if same_input and same_model and same_options(pending.options, options):
            self._kept_tree = pending
            self.statusMessage.emit(f"Decoding again with the same options: the exploration's {pending.describe()} "
                                    "stay when the run gives the same tokens")
            return
        why = "another input" if not same_input else "another model" if not same_model else "new options"
        self._exploration_note = self._keep(pending, why, same_input)

    def _settle_kept_tree(self, fin: Finished | None) -> bool:
        """The run that may take the old tree back ended (``fin``; None: it failed or did
        not start). The same tokens at the root: the old forks and what-ifs come back under
        the new root (``RunState.adopt``); else the old tree is kept for Previous exploration.
        The outcome goes to :attr:`_exploration_note`. True if the tree was taken back."""
        kept, self._kept_tree = self._kept_tree, None
        if kept is None:
            return False
        old_root = kept.branches[0]
        old_ids = [old_root.own[k].token_id for k in sorted(old_root.own)]
        new_ids = [ev.token_id for ev in self.run.branch_steps(0)]
        if (fin is not None and not fin.cancelled and new_ids == old_ids and len(self.run.branches()) == 1):
            self._tree_identity = (kept.input_description, kept.input_hash, kept.model)
            self.run.adopt(sorted(kept.branches[1:], key=lambda b: b.id))
            if kept.saved:
                self._saved_signature = tree_signature(self.run.branches())
            self._branch_title()
            self._exploration_note = f"same tokens: the exploration's {kept.describe()} are kept"
            return True
        why = ("the run gave other tokens" if fin is not None and not fin.cancelled
               else "the run was cancelled" if fin is not None else "the run did not finish")
        self._exploration_note = self._keep(kept, why)
        return False

    def _with_exploration_note(self, message: str) -> str:
        """``message`` with what happened to the previous tree (once)."""
        note, self._exploration_note = self._exploration_note, ""
        return f"{message} · {note}" if note else message

    def previous_exploration(self) -> bool:
        """Edit → Previous exploration (Ctrl+Z): bring back the newest tree kept for this
        input (the tree shown goes to Next exploration). Shown, not decoded again. False,
        with a message, when there is none."""
        return self._step_exploration(back=True)

    def next_exploration(self) -> bool:
        """Edit → Next exploration (Ctrl+Shift+Z): go forward to the tree left by Previous
        exploration. False, with a message, when there is none."""
        return self._step_exploration(back=False)

    def _step_exploration(self, back: bool) -> bool:
        ident = self._input_identity_or_none()
        entry = None
        if back and self._kept_tree is not None:  # a same-options run is decoding: its tree is the previous one
            self._kept_tree, entry = None, self._kept_tree
        model = getattr(self.model, "name", "") or ""
        if entry is None and ident is not None:
            current = self.snapshot_exploration() if len(self.run.branch(0).own) else None
            take = self.explorations.take_previous if back else self.explorations.take_next
            entry = take(ident[1], current, model)
        if entry is None:
            where = "earlier" if back else "later"
            others = self.explorations.count(redo=not back) - (
                self.explorations.count(ident[1], redo=not back, model=model) if ident is not None else 0)
            msg = f"No {where} exploration of this input to bring back"
            if others:
                msg += f" ({others} kept for other inputs or models: open that input, load that model, then Ctrl+Z)"
            self.statusMessage.emit(msg)
            return False
        self._show_kept(entry)
        key = "Ctrl+Shift+Z goes forward again" if back else "Ctrl+Z goes back"
        self.statusMessage.emit(f"{'Previous' if back else 'Next'} exploration: {entry.describe()} "
                                f"(shown, not decoded again) · {key}")
        return True

    def _show_kept(self, entry: KeptExploration) -> None:
        """Replace the tree shown with ``entry`` (as an opened file is: the options panel and
        the task settings show its options; nothing is decoded)."""
        self.stop_decode()
        self._drop_queued_events()
        self._fork = None
        self._exploration_note = ""
        self.clear_error()
        options = entry.options
        if isinstance(options, DecodingOptions):
            try:
                self.options_panel.setOptions(options)
            except ValueError:
                pass
        self.apply_input_settings(entry.input_settings)
        self.run.select(entry.selected)
        self._tree_identity = ((entry.input_description, entry.input_hash, entry.model)
                               if entry.has_work() else None)
        self.run.restore(entry.branches, entry.current)
        self._saved_signature = tree_signature(self.run.branches()) if entry.saved else None
        self.busyChanged.emit(self.is_busy(), "")

    def unsaved_explorations(self) -> list[KeptExploration]:
        """The trees with work not saved to a file: the one shown (first), the one a running
        same-options run may take back, and the kept ones."""
        out = []
        if self.has_exploration_work() and not self.exploration_saved():
            out.append(self.snapshot_exploration())
        if self._kept_tree is not None and self._kept_tree.has_work() and not self._kept_tree.saved:
            out.append(self._kept_tree)
        return out + self.explorations.unsaved()

    def exploration_work(self) -> list[str]:
        """What would be lost if the window closed now, for the Save / Discard / Cancel
        question: unsaved trees and lanes ("the exploration shown: 2 branches (1 fork)",
        "1 earlier exploration (Edit → Previous exploration)", "3 lanes (…)"); [] if none."""
        out = []
        unsaved = self.unsaved_explorations()
        shown = self.has_exploration_work() and not self.exploration_saved()
        if shown:
            out.append(f"the exploration shown: {describe_branches(self.run.branches())}")
        n = len(unsaved) - (1 if shown else 0)
        if n:
            out.append(f"{n} earlier exploration{'s' if n != 1 else ''} (Edit → Previous exploration)")
        lanes = len(getattr(getattr(getattr(self, "lanes", None), "state", None), "lanes", ()) or ())
        if lanes:
            out.append(f"{lanes} lane{'s' if lanes != 1 else ''} (lanes are not part of an exploration file)")
        return out

    def save_kept(self, entry: KeptExploration, path: str) -> bool:
        """Write ``entry`` (from :meth:`unsaved_explorations`) to ``path`` as an exploration
        file; the tree shown is saved as File → Save exploration… does. True on success
        (errors go to the banner)."""
        from .. import exploration
        from ..run_state import RunState

        if entry.branches and entry.branches[0] is self.run.branch(0):
            return self.save_exploration(path)
        tree = RunState()
        tree.restore(entry.branches, entry.current)
        tree.select(entry.selected)
        try:
            data = exploration.to_json(tree, task=self.settings_key, model=entry.model,
                                       input_description=entry.input_description, input_hash=entry.input_hash,
                                       input_settings=entry.input_settings)
            exploration.save(path, data)
        except (OSError, ValueError) as exc:
            self.show_error(f"Could not save the exploration: {getattr(exc, 'strerror', None) or exc}")
            return False
        finally:
            tree.deleteLater()
        entry.saved = True
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
