"""Exploration work is user data (issue 19 §1): the branch tree is never dropped without a word.

An object of every run tab (``RunTab.explorations_keeper``), with File → Save / Open
exploration… (:meth:`KeptExplorations.save`, :meth:`KeptExplorations.open`):

- A run with the same options (F5, or only more capture: the logit lens) on the same input
  and model decodes the root again; when it gives the same tokens, the old forks and
  what-ifs come back under it (``RunState.adopt``, :meth:`KeptExplorations.settle`).
- A run with other options, another input or model, or an opened exploration file starts a
  new tree; the old one, if the user made something in it, is kept in
  :attr:`KeptExplorations.history` (``gui.exploration_history``, per input and
  model), and the status line says "previous exploration kept … Ctrl+Z brings it back".
  Edit → Previous exploration (Ctrl+Z) shows it again (not decoded again), Next exploration
  (Ctrl+Shift+Z) goes forward.
- The window asks Save / Discard / Cancel on close while trees (kept ones too) or lanes are
  unsaved (:meth:`KeptExplorations.work`, ``MainWindow.confirm_explorations``).

``DecodeRun._start`` (gui/tabs/decode_run.py) calls :meth:`~KeptExplorations.begin` before it
clears the tree, the run's end :meth:`~KeptExplorations.settle`;
``RunTab.clear_run`` (another input) and :meth:`KeptExplorations.open` call
:meth:`~KeptExplorations.leave`.
"""

from __future__ import annotations

import weakref
from typing import Any

from PySide6.QtCore import QObject

from core.events import Finished
from core.options import DecodingOptions

from ..exploration_history import ExplorationHistory, KeptExploration, describe_branches, same_options, tree_signature


class KeptExplorations(QObject):
    """Keeps, brings back, saves and opens a run tab's explorations (module docstring).

    Args:
        tab: the ``RunTab`` (its ``run``, model, input identity, options panel, signals).
    """

    def __init__(self, tab: Any) -> None:
        super().__init__(tab)
        self.tab = tab
        self.run = tab.run
        #: explorations replaced by a new one, per input and model (Edit → Previous / Next exploration)
        self.history = ExplorationHistory()
        self._kept_tree: KeptExploration | None = None  # taken back if a same-options run gives the same tokens
        self._tree_identity: tuple[str, str, str] | None = None  # (description, hash) of the tree's input, model
        self._saved_signature: tuple | None = None  # tree_signature when last saved or opened
        self._exploration_note = ""  # what happened to the previous tree, told when the run ends
        self._identity_cache = None
        self.run.branchAdded.connect(self._note_tree_input)

    def _note_tree_input(self, branch: int) -> None:
        """The tree's first fork or what-if: remember which input it was made on (a later
        run may come after the input changed)."""
        if branch != 0 and self._tree_identity is None:
            ident = self.input_identity_or_none()
            if ident is not None:
                self._tree_identity = (*ident, getattr(self.tab.model, "name", "") or "")

    def input_identity_or_none(self) -> tuple[str, str] | None:
        """``input_identity()``, or None without an input. A large input (the ``audio`` array,
        the ``image``) is hashed once while it stays the same object: SHA-256 of an hour of
        audio takes ~1 s, and every run of a tree with forks asks."""
        try:
            if not self.tab.has_input():
                return None
            objs = [getattr(self.tab, n, None) for n in ("audio", "image")]
            extra = (repr(getattr(self.tab, "region", None)), getattr(self.tab, "source_name", ""))
            cache = self._identity_cache
            if (cache is not None and cache[2] == extra
                    and all((r() if r is not None else None) is o for r, o in zip(cache[0], objs))):
                return cache[1]
            ident = self.tab.input_identity()
            try:
                refs = [weakref.ref(o) if o is not None else None for o in objs]
                self._identity_cache = (refs, ident, extra) if any(o is not None for o in objs) else None
            except TypeError:  # an input that takes no weak reference: no cache
                self._identity_cache = None
            return ident
        except Exception:  # noqa: BLE001 - no input (yet)
            return None

    def has_work(self) -> bool:
        """The tree holds something the user made: a fork or a what-if."""
        return len(self.run.branches()) > 1

    def saved(self) -> bool:
        """The tree is as it was last saved to (or opened from) a file."""
        return self._saved_signature == tree_signature(self.run.branches())

    def snapshot(self) -> KeptExploration:
        """The tree shown now as a :class:`KeptExploration` (its Branch objects, not copies)."""
        ident = self._tree_identity or (*(self.input_identity_or_none() or ("", "")),
                                        getattr(self.tab.model, "name", "") or "")
        return KeptExploration(
            branches=self.run.branches(), current=self.run.current_branch(), selected=self.run.selected(),
            input_hash=ident[1], input_description=ident[0], input_settings=self.tab.input_settings(),
            model=ident[2], saved=self.saved(),
        )

    def _keep(self, entry: KeptExploration, why: str, same_input: bool = True) -> str:
        """Keep ``entry`` for Previous exploration; the sentence that tells the user (also
        the status message), the key to press first: the status bar shows ~90 characters."""
        dropped = self.history.push(entry)
        head = f"{why[:1].upper()}{why[1:]}: " if why else ""
        n = f"{len(entry.branches)} branches"
        if not same_input:
            msg = f"{head}the last input's exploration is kept ({n}) — open it again, then Ctrl+Z"
        elif entry.model != (getattr(self.tab.model, "name", "") or ""):
            msg = f"{head}its exploration is kept ({n}) — load {entry.model or 'that model'} again, then Ctrl+Z"
        else:
            msg = f"{head}previous exploration kept ({n}) — Ctrl+Z brings it back"
        if dropped:
            lost = ", ".join(e.describe() for e in dropped)
            msg += (f"; the oldest kept exploration{'s' if len(dropped) != 1 else ''} ({lost}) "
                    "went: save those you want to keep (File → Save exploration…)")
        self.tab.statusMessage.emit(msg)
        return msg

    def leave(self, why: str, same_input: bool = True) -> str:
        """A new tree replaces the one shown (another input, an opened file): keep the old
        one if the user made something in it. The message, or ""."""
        pending, self._kept_tree = self._kept_tree, None
        entry = pending if pending is not None else (
            self.snapshot() if self.has_work() else None)
        self._tree_identity = None
        return self._keep(entry, why, same_input) if entry is not None else ""

    def begin(self, options: DecodingOptions) -> None:
        """A run with ``options`` is about to replace the tree (``DecodeRun._start`` (gui/tabs/decode_run.py)). A
        tree with work and the same options (capture aside) on the same input waits to be
        taken back when the run ends (:meth:`settle`); with other options or
        another input it is kept for Previous exploration, and the status bar says so."""
        self._exploration_note = ""
        pending, self._kept_tree = self._kept_tree, None
        if pending is None and self.has_work():
            pending = self.snapshot()
        self._tree_identity = None
        if pending is None:
            return
        ident = self.input_identity_or_none()
        same_input = ident is not None and ident[1] == pending.input_hash
        same_model = pending.model == (getattr(self.tab.model, "name", "") or "")
        if same_input and same_model and same_options(pending.options, options):
            self._kept_tree = pending
            self.tab.statusMessage.emit(f"Decoding again with the same options: the exploration's {pending.describe()} "
                                    "stay when the run gives the same tokens")
            return
        why = "another input" if not same_input else "another model" if not same_model else "new options"
        self._exploration_note = self._keep(pending, why, same_input)

    def settle(self, fin: Finished | None) -> bool:
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
            self.tab.show_branch_title()
            self._exploration_note = f"Same tokens: the exploration's {len(kept.branches)} branches are kept"
            return True
        why = ("other tokens" if fin is not None and not fin.cancelled
               else "cancelled" if fin is not None else "the run did not finish")
        self._exploration_note = self._keep(kept, why)
        return False

    def with_note(self, message: str) -> str:
        """``message`` after what happened to the previous tree (once; first, so that the
        status bar's ~90 characters show it)."""
        note, self._exploration_note = self._exploration_note, ""
        return f"{note} · {message}" if note else message

    def previous(self) -> bool:
        """Edit → Previous exploration (Ctrl+Z): bring back the newest tree kept for this
        input (the tree shown goes to Next exploration). Shown, not decoded again. False,
        with a message, when there is none."""
        return self._step(back=True)

    def next(self) -> bool:
        """Edit → Next exploration (Ctrl+Shift+Z): go forward to the tree left by Previous
        exploration. False, with a message, when there is none."""
        return self._step(back=False)

    def _step(self, back: bool) -> bool:
        ident = self.input_identity_or_none()
        entry = None
        if back and self._kept_tree is not None:  # a same-options run is decoding: its tree is the previous one
            self._kept_tree, entry = None, self._kept_tree
        model = getattr(self.tab.model, "name", "") or ""
        if entry is None and ident is not None:
            current = self.snapshot() if len(self.run.branch(0).own) else None
            take = self.history.take_previous if back else self.history.take_next
            entry = take(ident[1], current, model)
        if entry is None:
            where = "earlier" if back else "later"
            others = self.history.count(redo=not back) - (
                self.history.count(ident[1], redo=not back, model=model) if ident is not None else 0)
            msg = f"No {where} exploration of this input to bring back"
            if others:
                msg += f" ({others} kept for other inputs or models: open that input, load that model, then Ctrl+Z)"
            self.tab.statusMessage.emit(msg)
            return False
        self._show_kept(entry)
        key = "Ctrl+Shift+Z goes forward again" if back else "Ctrl+Z goes back"
        self.tab.statusMessage.emit(f"{'Previous' if back else 'Next'} exploration back: {entry.describe()} · {key}")
        return True

    def _show_kept(self, entry: KeptExploration) -> None:
        """Replace the tree shown with ``entry`` (as an opened file is: the options panel and
        the task settings show its options; nothing is decoded)."""
        self.tab.stop_decode()
        self.run.drop_pending()
        self.tab.forking.reset()
        self._exploration_note = ""
        self.tab.clear_error()
        options = entry.options
        if isinstance(options, DecodingOptions):
            try:
                self.tab.options_panel.setOptions(options)
            except ValueError:
                pass
        self._strip_begins(options)
        self.tab.apply_input_settings(entry.input_settings)
        self.run.select(entry.selected)
        self._tree_identity = ((entry.input_description, entry.input_hash, entry.model)
                               if entry.has_work() else None)
        self.run.restore(entry.branches, entry.current)
        self._saved_signature = tree_signature(self.run.branches()) if entry.saved else None
        self.tab.busyChanged.emit(self.tab.is_busy(), "")

    def _strip_begins(self, options: Any) -> None:
        """The tree about to be shown is a run of the step strip (its KV cache setting labels the
        decoder ms curve; the run shown so far becomes the dashed reference when its setting was
        the other one): as ``DecodeRun._start`` tells it for a decoded run."""
        strip = getattr(self.tab, "strip", None)
        if strip is not None and isinstance(options, DecodingOptions):
            strip.begin_run(self.input_identity_or_none(), options.kv_cache)

    def unsaved(self) -> list[KeptExploration]:
        """The trees with work not saved to a file: the one shown (first), the one a running
        same-options run may take back, and the kept ones."""
        out = []
        if self.has_work() and not self.saved():
            out.append(self.snapshot())
        if self._kept_tree is not None and self._kept_tree.has_work() and not self._kept_tree.saved:
            out.append(self._kept_tree)
        return out + self.history.unsaved()

    def work(self) -> list[str]:
        """What would be lost if the window closed now, for the Save / Discard / Cancel
        question: unsaved trees and lanes ("the exploration shown: 2 branches (1 fork)",
        "1 earlier exploration (Edit → Previous exploration)", "3 lanes (…)"); [] if none."""
        out = []
        unsaved = self.unsaved()
        shown = self.has_work() and not self.saved()
        if shown:
            out.append(f"the exploration shown: {describe_branches(self.run.branches())}")
        n = len(unsaved) - (1 if shown else 0)
        if n:
            out.append(f"{n} earlier exploration{'s' if n != 1 else ''} (Edit → Previous exploration)")
        lanes = len(getattr(getattr(getattr(self.tab, "lanes", None), "state", None), "lanes", ()) or ())
        if lanes:
            out.append(f"{lanes} lane{'s' if lanes != 1 else ''} (lanes are not part of an exploration file)")
        return out

    def save_kept(self, entry: KeptExploration, path: str) -> bool:
        """Write ``entry`` (from :meth:`unsaved`) to ``path`` as an exploration
        file; the tree shown is saved as File → Save exploration… does. True on success
        (errors go to the banner)."""
        from .. import exploration
        from ..run_state import RunState

        if entry.branches and entry.branches[0] is self.run.branch(0):
            return self.save(path)
        tree = RunState()
        tree.restore(entry.branches, entry.current)
        tree.select(entry.selected)
        try:
            data = exploration.to_json(tree, task=self.tab.settings_key, model=entry.model,
                                       input_description=entry.input_description, input_hash=entry.input_hash,
                                       input_settings=entry.input_settings)
            exploration.save(path, data)
        except (OSError, ValueError) as exc:
            self.tab.show_error(f"Could not save the exploration: {getattr(exc, 'strerror', None) or exc}")
            return False
        finally:
            tree.deleteLater()
        entry.saved = True
        return True

    # ------------------------------------------------------------ exploration files
    def data(self, attention: str = "mean") -> dict:
        """The tab's exploration as JSON data (``gui.exploration.to_json``).

        Raises:
            ValueError: nothing to save yet.
        """
        from .. import exploration

        tab = self.tab
        if not tab.has_input() or tab.model is None or not len(self.run.branch(0).own):
            raise ValueError("Nothing to save yet: decode an input first.")
        desc, digest = tab.input_identity()
        return exploration.to_json(self.run, task=tab.settings_key, model=getattr(tab.model, "name", ""),
                                   input_description=desc, input_hash=digest, input_settings=tab.input_settings(),
                                   attention=attention)

    def save(self, path: str, attention: str = "mean") -> bool:
        """Write the exploration to ``path`` (JSON). True on success; errors go to the banner."""
        from pathlib import Path

        from .. import exploration

        try:
            exploration.save(path, self.data(attention))
        except (OSError, ValueError) as exc:
            self.tab.show_error(f"Could not save the exploration: {getattr(exc, 'strerror', None) or exc}")
            return False
        self._saved_signature = tree_signature(self.run.branches())
        n = len(self.run.branches())
        self.tab.statusMessage.emit(f"Saved the exploration ({n} branch{'es' if n != 1 else ''}) to {Path(path).name}")
        return True

    def open(self, source: Any, name: str | None = None) -> bool:
        """Open an exploration (a path, or data from ``gui.exploration.load``) made on this
        tab's input with its model: the tree, the options and the selection come back. It is
        refused, with what to do, for another input, model or tab (the banner says it)."""
        from pathlib import Path

        from .. import exploration

        tab = self.tab
        try:
            data = source if isinstance(source, dict) else exploration.load(source)
            desc, digest = tab.input_identity() if tab.has_input() else (None, None)
            exploration.check(data, task=tab.settings_key, model=getattr(tab.model, "name", None),
                              input_description=desc, input_hash=digest)
            branches = exploration.branches_from_json(
                data, vocab_size=getattr(getattr(tab.model, "backend", None), "vocab_size", None))
        except (exploration.ExplorationError, KeyError, TypeError, ValueError) as exc:
            tab.show_error(str(exc) if isinstance(exc, exploration.ExplorationError)
                           else f"The exploration file is damaged ({type(exc).__name__}: {exc}).")
            return False
        name = name or (Path(source).name if not isinstance(source, dict) else "the exploration")
        note = self.leave("")  # the tree shown so far is kept (Ctrl+Z)
        tab.stop_decode()
        self.run.drop_pending()
        tab.forking.reset()
        tab.clear_error()
        options = branches[0].options
        if isinstance(options, DecodingOptions):
            try:
                tab.options_panel.setOptions(options)  # shown, not decoded again
            except ValueError:
                pass
        self._strip_begins(options)
        tab.apply_input_settings(data.get("input", {}).get("settings", {}))
        self.run.select(data.get("selected"))
        self._tree_identity = (desc, digest, getattr(tab.model, "name", "") or "") if digest else None
        self.run.restore(branches, int(data.get("current", 0)))
        self._saved_signature = tree_signature(self.run.branches())
        tab.busyChanged.emit(tab.is_busy(), "")
        tab.statusMessage.emit(f"Opened {name}: {len(branches)} branch{'es' if len(branches) != 1 else ''}"
                               + (f" · {note}" if note else ""))
        return True
