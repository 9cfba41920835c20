"""Explorations kept when a new one starts, so that none is thrown away silently (issue 19 §1).

An exploration is the branch tree of one input (:class:`~gui.run_state.RunState`). A re-decode
with other options, another input or an opened exploration file starts a new one; the old
tree, if the user made something in it (a fork, a what-if), is kept here as a
:class:`KeptExploration`. Edit → Previous exploration (Ctrl+Z) brings back the newest one kept
for the current input and model, Next exploration (Ctrl+Shift+Z) goes forward again
(``RunTab.previous_exploration`` / ``next_exploration``, ``gui.tabs.kept_explorations``).

:class:`ExplorationHistory` is an undo / redo pair of stacks keyed by the input's hash: an
exploration is only brought back onto the input (and model) it was made on. Nothing with work in it is
dropped by a new exploration (the redo side moves to the undo side); only the
:attr:`~ExplorationHistory.limit` drops the oldest, and :meth:`~ExplorationHistory.push`
returns what fell off so that the caller says so. No Qt here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .run_state import Branch

#: the options fields that only say what a run reports (not which tokens it chooses): a re-decode
#: that changes only these keeps the branch tree
CAPTURE_FIELDS = ("capture_lens", "capture_attention", "top_k_report")
#: explorations kept per tab (all inputs together); the oldest goes first
HISTORY_LIMIT = 20


def same_options(a: Any, b: Any) -> bool:
    """Whether decoding options ``a`` and ``b`` (``DecodingOptions``) choose the same tokens:
    equal except for :data:`CAPTURE_FIELDS`. False if either is not a dataclass (None)."""
    if not (dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b)) or type(a) is not type(b):
        return False
    strip = {f: getattr(a, f) for f in CAPTURE_FIELDS if hasattr(a, f)}
    return dataclasses.replace(b, **strip) == a


def tree_signature(branches: list[Branch]) -> tuple:
    """What identifies a tree's content for "is it saved?": per branch its id, parent, fork
    step, forced ids, input change, number of own steps and whether it ended."""
    return tuple((b.id, b.parent, b.fork_step, b.forced_ids, b.input_change, len(b.own), b.finished is not None)
                 for b in branches)


@dataclass(eq=False)
class KeptExploration:
    """One exploration taken out of the tab (a new one replaced it).

    Attributes:
        branches: its branches, the root first (ids, parents and steps as they were).
        current: the branch that was shown; selected: the selected step (None: none).
        input_hash: SHA-256 of the input it was made on (``input_identity``), "" if unknown.
        input_description: that input for people ("tone (1.00 s audio)").
        input_settings: the tab's task settings then (language, region, ...).
        model: the model's name.
        saved: it was saved to (or opened from) a file and not changed since.
    """

    branches: list[Branch]
    current: int = 0
    selected: int | None = None
    input_hash: str = ""
    input_description: str = ""
    input_settings: dict = field(default_factory=dict)
    model: str = ""
    saved: bool = False

    @property
    def options(self) -> Any:
        """The root's decoding options."""
        return self.branches[0].options if self.branches else None

    def has_work(self) -> bool:
        """The user made something in it: a fork or a what-if (more than the root)."""
        return len(self.branches) > 1

    def describe(self) -> str:
        """"2 branches (1 fork, 1 what-if)" or "the run"."""
        return describe_branches(self.branches)


def describe_branches(branches: list[Branch]) -> str:
    """How many branches, of which kinds: "3 branches (2 forks, 0 what-ifs)" / "the run"."""
    n = len(branches)
    if n <= 1:
        return "the run"
    whatifs = sum(1 for b in branches if b.input_change)
    forks = n - 1 - whatifs
    kinds = [f"{forks} fork{'s' if forks != 1 else ''}"] if forks else []
    kinds += [f"{whatifs} what-if{'s' if whatifs != 1 else ''}"] if whatifs else []
    return f"{n} branches ({', '.join(kinds)})"


class ExplorationHistory:
    """Undo / redo stacks of :class:`KeptExploration` s, per input (module docstring).

    Args:
        limit: at most this many kept on the undo side (all inputs together); more drops the
            oldest (returned by :meth:`push`).
    """

    def __init__(self, limit: int = HISTORY_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._undo: list[KeptExploration] = []  # oldest first
        self._redo: list[KeptExploration] = []  # the newest undone last

    def push(self, entry: KeptExploration) -> list[KeptExploration]:
        """A new exploration starts; keep ``entry`` (the one it replaces) for Previous. The
        redo side's explorations with work move to the undo side first (a new exploration
        does not drop them). Returns the explorations that fell off the oldest end."""
        self._undo.extend(e for e in self._redo if e.has_work())
        self._redo.clear()
        self._undo.append(entry)
        return self._trim()

    def take_previous(self, input_hash: str, current: KeptExploration | None,
                      model: str | None = None) -> KeptExploration | None:
        """The newest exploration kept for ``input_hash`` (and ``model``, if given) taken
        out, or None. ``current`` (the exploration it replaces; None: nothing to keep) goes
        to the redo side."""
        entry = _take_newest(self._undo, input_hash, model)
        if entry is not None and current is not None:
            self._redo.append(current)
        return entry

    def take_next(self, input_hash: str, current: KeptExploration | None,
                  model: str | None = None) -> KeptExploration | None:
        """The exploration undone last for ``input_hash`` (and ``model``) taken out, or None;
        ``current`` goes back to the undo side."""
        entry = _take_newest(self._redo, input_hash, model)
        if entry is not None and current is not None:
            self._undo.append(current)
            self._trim()
        return entry

    def count(self, input_hash: str | None = None, redo: bool = False, model: str | None = None) -> int:
        """How many are kept (for ``input_hash`` and ``model``; None: any) on the undo (or
        redo) side."""
        side = self._redo if redo else self._undo
        return sum(1 for e in side if _matches(e, input_hash, model))

    def unsaved(self) -> list[KeptExploration]:
        """The kept explorations with work that were not saved (both sides, oldest first)."""
        return [e for e in self._undo + self._redo if e.has_work() and not e.saved]

    def clear(self) -> None:
        self._undo.clear()
        self._redo.clear()

    def _trim(self) -> list[KeptExploration]:
        dropped = []
        while len(self._undo) > self.limit:
            dropped.append(self._undo.pop(0))
        return dropped


def _matches(e: KeptExploration, input_hash: str | None, model: str | None) -> bool:
    return (input_hash is None or e.input_hash == input_hash) and (model is None or e.model == model)


def _take_newest(stack: list[KeptExploration], input_hash: str, model: str | None) -> KeptExploration | None:
    for i in range(len(stack) - 1, -1, -1):
        if _matches(stack[i], input_hash, model):
            return stack.pop(i)
    return None
