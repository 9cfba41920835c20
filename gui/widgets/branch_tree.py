"""The exploration's branches as a tree the user can go back through (as socketteer's loom
does for text).

Each node is a branch: the original run at the top, forks under the branch they were
forked from, labelled by their fork point (``#2 step 7: ' cat' → ' dog'``), with the
total log-probability, the number of tokens and the text (a fork's from just before its
fork step, where it differs; the whole text is the tooltip). Selecting a node makes that
branch the current one: the token stream, the top-k chart and the heatmap show it.

:class:`BranchTree` takes a :class:`~gui.run_state.RunState` and follows its signals; it
changes the state only through :meth:`RunState.set_current`.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from ..run_state import RunState, plain_text
from .fork_diff import fmt_logprob
from .layouts import vbox

COLUMNS = ("branch", "log p", "tokens", "text")
#: characters of a branch's text in its tooltip (its end, after "…"): the whole transcript of a
#: long run, set as 4 tooltips on every refresh, grew with the run
TIP_CHARS = 600
#: tokens before the fork step a fork's text column starts with
CONTEXT_TOKENS = 3
HINT = ("Branches: the original run, and every fork under the branch it came from. Select one to show it; "
        "fork by clicking an alternative in the top-k chart.")


class BranchTree(QWidget):
    """The branches of ``run`` as a ``QTreeWidget`` (see the module docstring).

    Signals:
        branchPicked(int): the user selected this branch (it is the current one now).
    """

    branchPicked = Signal(int)

    def __init__(self, run: RunState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run = run
        self._items: dict[int, QTreeWidgetItem] = {}
        self._dirty: set[int] = set()
        self._syncing = False
        self.hint = QLabel(HINT)
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("color: palette(placeholder-text);")
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setUniformRowHeights(True)
        self.tree.setAllColumnsShowFocus(True)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideRight)
        hh = self.tree.header()
        hh.setStretchLastSection(True)
        for c in (0, 1, 2):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.headerItem().setToolTip(1, "total log-probability of the branch's tokens (processed distribution; "
                                             "forced tokens count with the probability the model gave them)")
        self.tree.currentItemChanged.connect(self._item_changed)
        vbox(self.hint, (self.tree, 1), margins=(4, 4, 4, 4), spacing=4, parent=self)
        self.setMinimumSize(260, 140)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(120)
        self._timer.timeout.connect(self._refresh_dirty)
        run.cleared.connect(self._rebuild)
        run.branchAdded.connect(self._add)
        run.branchChanged.connect(self._changed)
        run.currentBranchChanged.connect(self._show_current)
        self._rebuild()

    def sizeHint(self) -> QSize:
        return QSize(480, 300)

    # ---------------------------------------------------------------- API
    def item(self, branch: int) -> QTreeWidgetItem | None:
        return self._items.get(branch)

    def branch_ids(self) -> list[int]:
        """The branches listed, in tree order (depth first)."""
        out: list[int] = []

        def walk(item: QTreeWidgetItem) -> None:
            out.append(item.data(0, Qt.ItemDataRole.UserRole))
            for i in range(item.childCount()):
                walk(item.child(i))

        for i in range(self.tree.topLevelItemCount()):
            walk(self.tree.topLevelItem(i))
        return out

    def row_texts(self, branch: int) -> list[str]:
        """The cells of ``branch``'s row (after pending updates)."""
        self._refresh_dirty()
        it = self._items[branch]
        return [it.text(c) for c in range(len(COLUMNS))]

    def shown_text(self, branch: int) -> str:
        """The text column: the whole text of the root; for a fork its text from a few tokens
        before the fork step on ("…is a Test of the Speech…"), where it differs."""
        b = self.run.branch(branch)
        if b.is_root:
            return self.run.text(branch)
        start = max(0, b.fork_step - CONTEXT_TOKENS)
        steps = self.run.branch_steps(branch)
        return ("…" if start > 0 else "") + plain_text(e.text for e in steps[start:])

    def select_branch(self, branch: int) -> None:
        """Select ``branch``'s node, as a click does (it becomes the current branch)."""
        self.tree.setCurrentItem(self._items[branch])

    # ------------------------------------------------------------- internals
    def _rebuild(self) -> None:
        self._syncing = True
        self.tree.clear()
        self._items.clear()
        self._dirty.clear()
        for b in self.run.branches():
            self._add(b.id)
        self._syncing = False
        self._show_current(self.run.current_branch())

    def _add(self, branch: int) -> None:
        if branch in self._items:
            return
        b = self.run.branch(branch)
        parent = self._items.get(b.parent) if b.parent is not None else None
        item = QTreeWidgetItem()
        item.setData(0, Qt.ItemDataRole.UserRole, branch)
        if parent is None:
            self.tree.addTopLevelItem(item)
        else:
            parent.addChild(item)
            parent.setExpanded(True)
        self._items[branch] = item
        self._fill(branch)

    def _changed(self, branch: int) -> None:
        self._dirty.add(branch)
        if not self._timer.isActive():
            self._timer.start()

    def _refresh_dirty(self) -> None:
        self._timer.stop()
        dirty, self._dirty = self._dirty, set()
        for branch in dirty:
            if branch in self._items:
                self._fill(branch)

    def _fill(self, branch: int) -> None:
        b = self.run.branch(branch)
        item = self._items[branch]
        label = b.label()
        if b.is_root and b.options is not None:
            label += f" ({getattr(b.options, 'strategy', '')})"
        state = "" if b.finished is not None or not b.own else " …"
        item.setText(0, f"#{b.id} {label}{state}")
        item.setText(1, fmt_logprob(self.run.logprob(branch)))
        item.setText(2, str(self.run.branch_len(branch)))
        text = self.run.text(branch)
        item.setText(3, text if b.is_root else self.shown_text(branch))  # the root's text once, not twice
        text = text if len(text) <= TIP_CHARS else "…" + text[-TIP_CHARS:]
        tip = f"#{b.id} {label}\n{text}" + (f"\n{b.note}" if b.note else "")
        for c in range(len(COLUMNS)):
            item.setToolTip(c, tip)
        for c in (1, 2):
            item.setTextAlignment(c, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if b.finished is not None and b.finished.cancelled:
            item.setForeground(3, QBrush(QColor(140, 140, 140)))

    def _show_current(self, branch: int) -> None:
        for bid, item in self._items.items():
            f = QFont(item.font(0))
            f.setBold(bid == branch)
            item.setFont(0, f)
        item = self._items.get(branch)
        if item is not None and self.tree.currentItem() is not item:
            self._syncing = True
            self.tree.setCurrentItem(item)
            self._syncing = False

    def _item_changed(self, item: QTreeWidgetItem | None, _prev) -> None:
        if self._syncing or item is None:
            return
        branch = int(item.data(0, Qt.ItemDataRole.UserRole))
        self.run.set_current(branch)
        self.branchPicked.emit(branch)
