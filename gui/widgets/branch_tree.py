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

from bisect import bisect_left

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

from ..run_state import RunState, plain_text, token_logprob
from .fork_diff import fmt_logprob
from .layouts import vbox

COLUMNS = ("branch", "log p", "tokens", "text")
#: characters of a branch's text in its tooltip (its end, after "…"): the whole transcript of a
#: long run, set as 4 tooltips on every refresh, grew with the run
TIP_CHARS = 600
#: characters of a branch's text in its text column (its start, then "…"): the column shows the
#: start and elides the rest, so a longer string is only work (issue 19 §3)
TEXT_CHARS = 1000
#: tokens before the fork step a fork's text column starts with
CONTEXT_TOKENS = 3


class _Sums:
    """What a branch's row needs of its steps, kept as they come so a refresh reads only the
    steps added since the last one (issue 19 §3): per step in step order its number, the
    running Σ ln p and its text. ``ok`` False: rebuild from the run's steps at the next fill."""

    __slots__ = ("steps", "cum", "texts", "ok")

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.cum: list[float] = []
        self.texts: list[str] = []
        self.ok = False

    def append(self, ev) -> None:
        self.steps.append(ev.step)
        self.cum.append((self.cum[-1] if self.cum else 0) + token_logprob(ev))
        self.texts.append(ev.text)

    def rebuild(self, events) -> None:
        self.steps, self.cum, self.texts = [], [], []
        for ev in events:
            self.append(ev)
        self.ok = True

    def truncate(self, first_step: int) -> None:
        """Forget the steps from ``first_step`` on (they were taken back)."""
        k = bisect_left(self.steps, first_step)
        del self.steps[k:], self.cum[k:], self.texts[k:]

    def logprob(self) -> float:
        return self.cum[-1] if self.cum else 0

    def head(self, start: int, cap: int) -> tuple[str, bool]:
        """plain_text of the texts from index ``start`` on, at most ``cap`` characters (its
        start), and whether it was cut. Reads about ``cap`` characters of texts, not all."""
        parts, n, i = [], 0, start
        texts = self.texts
        while i < len(texts) and n <= cap + 64:
            parts.append(texts[i])
            n += len(texts[i])
            i += 1
        if i >= len(texts):
            text = plain_text(parts)
            return (text, False) if len(text) <= cap else (text[:cap], True)
        text = "".join(parts).replace("▁", " ").lstrip()
        if len(text) > cap:
            return text[:cap], True
        text = plain_text(texts[start:])  # mostly whitespace: rare, read it all
        return (text, False) if len(text) <= cap else (text[:cap], True)

    def tail(self, cap: int) -> str:
        """The whole plain text if it has at most ``cap`` characters, else "…" and its last
        ``cap``; reads about ``cap`` characters of texts, not all."""
        texts = self.texts
        want, k = cap + 64, len(texts)
        while True:
            parts, n, i = [], 0, len(texts)
            while i > 0 and n <= want:
                i -= 1
                parts.append(texts[i])
                n += len(texts[i])
            if i == 0:
                text = plain_text(reversed(parts))
                return text if len(text) <= cap else "…" + text[-cap:]
            text = "".join(reversed(parts)).replace("▁", " ").strip()
            if len(text) > cap:
                return "…" + text[-cap:]
            want *= 4  # mostly whitespace at the end: read more
            if want > 64 * k + cap:
                want = 1 << 62


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
        self._sums: dict[int, _Sums] = {}  # branch -> its steps' sums, kept as steps come
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
        run.stepAdded.connect(self._step_added)
        run.stepsRetracted.connect(self._retracted)
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
        self._sums.clear()
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

    def _step_added(self, ev) -> None:
        """Keep the growing branch's sums: O(1) per step when it comes after the last one;
        a step that replaces one or comes out of order makes the branch (and its forks) rebuild."""
        branch = self.run.growing_branch()
        sums = self._sums.get(branch)
        if sums is None or not sums.ok:
            return
        if sums.steps and ev.step <= sums.steps[-1]:
            self._invalidate(branch)
        else:
            sums.append(ev)

    def _retracted(self, branch: int, first_step: int) -> None:
        sums = self._sums.get(branch)
        if sums is not None and sums.ok:
            sums.truncate(first_step)  # a later step of another segment that stayed: the length check rebuilds
        for b in self.run.branches():  # forks of it may have read the steps that went
            if b.id != branch and self._descends(b.id, branch):
                self._invalidate(b.id)

    def _descends(self, branch: int, ancestor: int) -> bool:
        b = self.run.branch(branch)
        while b.parent is not None:
            if b.parent == ancestor:
                return True
            b = self.run.branch(b.parent)
        return False

    def _invalidate(self, branch: int) -> None:
        for b in self.run.branches():
            if b.id == branch or self._descends(b.id, branch):
                sums = self._sums.get(b.id)
                if sums is not None:
                    sums.ok = False

    def _sums_of(self, branch: int) -> _Sums:
        """``branch``'s sums, rebuilt from the run's steps (O(steps)) only when they were
        invalidated or do not count as many steps as the branch has (steps appended without a
        stepAdded, as ``RunState.complete_from_parent`` does)."""
        sums = self._sums.setdefault(branch, _Sums())
        if not sums.ok or len(sums.steps) != self.run.branch_len(branch):
            sums.rebuild(self.run.branch_steps(branch))
        return sums

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
        item.setText(2, str(self.run.branch_len(branch)))
        sums = self._sums_of(branch)
        item.setText(1, fmt_logprob(sums.logprob()))
        # the text column: the root's text, a fork's from a few tokens before its fork step (as
        # shown_text), at most TEXT_CHARS of its start; the tooltip: its end
        start = 0 if b.is_root else max(0, b.fork_step - CONTEXT_TOKENS)
        lead = "…" if start > 0 else ""
        shown, cut = sums.head(start, TEXT_CHARS - len(lead))
        item.setText(3, lead + shown + ("…" if cut else ""))
        text = sums.tail(TIP_CHARS)
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
