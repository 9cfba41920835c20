"""A branch beside the branch it was forked from: the common prefix, then both continuations
aligned token by token.

The continuations are the tokens from the fork step on, in the segment that was decoded
again (the other segments are the same in both). They are aligned with difflib's
``SequenceMatcher`` on token ids: equal runs line up column by column, a replaced run is
paired position by position, and a token with no partner faces a gap. Each token is a
chip tinted by its probability (viridis, fixed 0..1, as in the token stream); columns
where the two differ are outlined, forced tokens have a dashed border. Above them each
sequence's total log-probability (processed distribution; forced tokens count with the
probability the model gave them) and the log-probability after the fork.

Clicking a chip selects that step in that branch (``stepClicked(branch, step)``): the
top-k chart and the heatmap then show that branch's step.

:class:`ForkDiff` takes a :class:`~gui.run_state.RunState` and follows it: it shows the
newest fork, or the branch made current in the branch tree, and redraws as the fork grows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from difflib import SequenceMatcher

from PySide6.QtCore import QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QScrollArea,
    QWidget,
)

from core.events import StepEvent

from ..run_state import RunState, plain_text, token_logprob
from .chip_canvas import CHIP_PAD, ChipCanvas, bold_font, draw_chip
from .colors import text_color_on
from .layouts import vbox
from .token_text import display_text

#: the colours that tell the two sequences apart (Okabe & Ito: blue, vermillion)
SIDE_COLORS = ("#0072B2", "#D55E00")
DIFF_COLOR = "#E69F00"
_GAP, _GUTTER = 3, 30
EMPTY = ("No fork yet. Select a token, then click an alternative in the top-k chart (or type text into "
         "“force…”): the decoder continues from there, and the new branch shows here beside the one it came from.")


@dataclass(frozen=True)
class Column:
    """One aligned position: the parent's token and the branch's (None = a gap) and the
    difflib opcode it came from ("equal", "replace", "delete", "insert")."""

    a: StepEvent | None
    b: StepEvent | None
    op: str

    @property
    def differs(self) -> bool:
        return self.op != "equal"


def align(a: list[StepEvent], b: list[StepEvent]) -> list[Column]:
    """Align two token sequences on their ids (``difflib.SequenceMatcher``, no junk
    heuristic): equal runs column by column, replaced runs position by position with gaps
    where one is longer, deleted / inserted tokens facing a gap."""
    sm = SequenceMatcher(None, [e.token_id for e in a], [e.token_id for e in b], autojunk=False)
    cols: list[Column] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        n = max(i2 - i1, j2 - j1)
        for k in range(n):
            ea = a[i1 + k] if i1 + k < i2 else None
            eb = b[j1 + k] if j1 + k < j2 else None
            cols.append(Column(ea, eb, op))
    return cols


def fmt_logprob(v: float) -> str:
    return "−∞" if v == -math.inf else f"{v:.2f}".replace("-", "−")


class AlignCanvas(ChipCanvas):
    """The aligned continuations, two chip rows per wrapped line (parent above, branch below);
    a chip's key is its side (0 parent, 1 branch)."""

    chipClicked = Signal(int, int)  # side (0 parent, 1 branch), step

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.columns: list[Column] = []
        self.sides: tuple[int, int] = (0, 0)  # branch ids (parent, branch)
        self.forced: set[int] = set()  # the branch's forced steps
        self.placed: list[tuple[QRect, int, StepEvent]] = []
        self._boxes: list[QRect] = []
        self._rows: list[int] = []

    def set_columns(self, columns: list[Column], sides: tuple[int, int], forced: set[int]) -> None:
        self.columns, self.sides, self.forced = columns, sides, forced
        self.relayout()

    def relayout(self) -> None:
        """Place the columns left to right, wrapping at the width; two chip rows per line."""
        fm = self.fontMetrics()
        h = self.chip_height()
        x, y = _GUTTER, 4
        self.placed = []
        self._boxes = []
        self._rows = [y]
        for col in self.columns:
            w = max(fm.horizontalAdvance(display_text(e.text)) if e is not None else 10 for e in (col.a, col.b))
            w += 2 * CHIP_PAD
            if x + w > self.layout_width - 4 and x > _GUTTER:
                x, y = _GUTTER, y + 2 * h + 10
                self._rows.append(y)
            self._boxes.append(QRect(x - 2, y - 2, w + 4, 2 * h + 6))
            for side, ev in ((0, col.a), (1, col.b)):
                if ev is not None:
                    self.placed.append((QRect(x, y + side * (h + 2), w, h), side, ev))
            x += w + _GAP
        height = y + 2 * h + 10
        self.set_content_height(height)

    def chips(self) -> list[tuple[QRect, int, StepEvent]]:
        """(rect, side, event) of every chip drawn."""
        return list(self.placed)

    def chip_pressed(self, side: int, ev: StepEvent) -> None:
        self.chipClicked.emit(side, ev.step)

    def chip_tip(self, side: int, ev: StepEvent) -> str:
        forced = " (forced)" if side == 1 and ev.step in self.forced else ""
        return (f"branch {self.sides[side]}, step {ev.step}{forced}: {ev.text!r}\n"
                f"p = {ev.prob:.3f} (processed)   raw p = {ev.raw_prob:.3f}\nclick: show this step")

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        h = self.chip_height()
        bold = bold_font(self)
        p.setFont(bold)
        for y in self._rows if self.columns else []:
            for side in (0, 1):
                p.setPen(QColor(SIDE_COLORS[side]))
                p.drawText(QRect(2, y + side * (h + 2), _GUTTER - 4, h), Qt.AlignmentFlag.AlignVCenter,
                           f"#{self.sides[side]}")
        # the columns where the two sequences differ: a light box behind both chips
        p.setPen(QPen(QColor(DIFF_COLOR), 2))
        p.setBrush(Qt.BrushStyle.NoBrush)
        for col, box in zip(self.columns, self._boxes):
            if col.differs:
                p.drawRoundedRect(box, 5, 5)
        for rect, side, ev in self.placed:
            forced = side == 1 and ev.step in self.forced
            bg = draw_chip(p, rect, ev, bold if forced else self.font())
            if forced:
                p.setPen(QPen(text_color_on(bg), 1.5, Qt.PenStyle.DashLine))
                p.drawRoundedRect(rect.adjusted(2, 2, -2, -2), 3, 3)
            if self.selected == (side, ev.step):
                p.setPen(QPen(QColor("#ff3b30"), 2.5))
                p.drawRoundedRect(rect.adjusted(-1, -1, 1, 1), 5, 5)
        p.end()


class ForkDiff(QWidget):
    """A branch beside its parent (see the module docstring).

    Signals:
        stepClicked(int, int): (branch, step) of a clicked token.
    """

    stepClicked = Signal(int, int)

    def __init__(self, run: RunState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run = run
        self._branch: int | None = None
        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setWordWrap(True)
        self.prefix_label = QLabel()
        self.prefix_label.setTextFormat(Qt.TextFormat.PlainText)
        self.prefix_label.setWordWrap(True)
        self.prefix_label.setStyleSheet("color: palette(placeholder-text);")
        self.canvas = AlignCanvas()
        self.canvas.chipClicked.connect(self._chip_clicked)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self.canvas)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        vbox(self.header, self.prefix_label, (self.scroll, 1), margins=(6, 4, 6, 4), spacing=4, parent=self)
        self.setMinimumSize(260, 160)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(80)
        self._timer.timeout.connect(self.refresh)
        run.cleared.connect(lambda: self.set_branch(None))
        run.branchChanged.connect(self._branch_changed)
        run.currentBranchChanged.connect(self._current_changed)
        run.selectionChanged.connect(lambda _s: self._mark_selection())
        self.refresh()

    def sizeHint(self) -> QSize:
        return QSize(480, 300)

    # ---------------------------------------------------------------- API
    def set_branch(self, branch: int | None) -> None:
        """Show ``branch`` (a fork) beside its parent; None or the root: the empty hint."""
        if branch is not None and self.run.branch(branch).is_root:
            branch = None
        self._branch = branch
        self.refresh()

    def branch(self) -> int | None:
        """The fork shown (its parent is shown beside it), or None."""
        return self._branch

    def pair(self) -> tuple[int, int] | None:
        """(parent, branch) shown, or None."""
        if self._branch is None:
            return None
        return self.run.branch(self._branch).parent, self._branch

    def continuations(self) -> tuple[list[StepEvent], list[StepEvent]]:
        """The parent's and the branch's tokens from the fork step on, in the forked segment."""
        pair = self.pair()
        if pair is None:
            return [], []
        parent, branch = pair
        b = self.run.branch(branch)
        at = self.run.branch_step(parent, b.fork_step)
        seg = at.segment if at is not None else None

        def tail(bid: int) -> list[StepEvent]:
            return [e for e in self.run.branch_steps(bid) if e.step >= b.fork_step and e.segment == seg]

        return tail(parent), tail(branch)

    def common_prefix(self) -> list[StepEvent]:
        """The tokens both share before the fork step."""
        if self._branch is None:
            return []
        b = self.run.branch(self._branch)
        return [e for e in self.run.branch_steps(b.parent) if e.step < b.fork_step]

    def columns(self) -> list[Column]:
        """The aligned continuations as drawn (after a pending redraw)."""
        self._flush()
        return list(self.canvas.columns)

    def logprobs(self, branch: int) -> tuple[float, float]:
        """(total, after the fork) log-probability of ``branch`` (one of the pair)."""
        a_tail, b_tail = self.continuations()
        tail = b_tail if branch == self._branch else a_tail
        return self.run.logprob(branch), _tail_logprob(tail)

    def header_text(self) -> str:
        self._flush()
        return self.header.text()

    def prefix_text(self) -> str:
        self._flush()
        return self.prefix_label.text()

    def _flush(self) -> None:
        if self._timer.isActive():
            self.refresh()

    def click_token(self, branch: int, step: int) -> None:
        """As a click on the chip of ``branch``'s ``step`` does."""
        self.stepClicked.emit(branch, step)

    # ------------------------------------------------------------- internals
    def _branch_changed(self, branch: int) -> None:
        pair = self.pair()
        if pair is not None and branch in pair and not self._timer.isActive():
            self._timer.start()

    def _current_changed(self, branch: int) -> None:
        pair = self.pair()
        if not self.run.branch(branch).is_root and (pair is None or branch not in pair):
            self.set_branch(branch)
        else:
            self.refresh()

    def _chip_clicked(self, side: int, step: int) -> None:
        pair = self.pair()
        if pair is not None:
            self.stepClicked.emit(pair[side], step)

    def _mark_selection(self) -> None:
        pair = self.pair()
        sel = self.run.selected()
        cur = self.run.current_branch()
        self.canvas.selected = (pair.index(cur), sel) if pair is not None and cur in pair and sel is not None else None
        self.canvas.update()

    def refresh(self) -> None:
        """Recompute the alignment and the header from the run state."""
        self._timer.stop()
        pair = self.pair()
        if pair is None:
            self.header.setText("<b>Fork diff</b>")
            self.prefix_label.setText(EMPTY)
            self.canvas.set_columns([], (0, 0), set())
            return
        parent, branch = pair
        b = self.run.branch(branch)
        a_tail, b_tail = self.continuations()
        cur = self.run.current_branch()
        lines = []
        for side, (bid, tail) in enumerate(((parent, a_tail), (branch, b_tail))):
            br = self.run.branch(bid)
            total = self.run.logprob(bid)
            after = _tail_logprob(tail)
            mark = "▶ " if bid == cur else ""
            state = "" if br.finished is not None or br.is_root else " · growing…"
            note = f" · {br.note}" if br.note and not br.is_root else ""
            lines.append(
                f"<span style='color:{SIDE_COLORS[side]}'><b>{mark}#{bid}</b></span> {_html(br.label())} · "
                f"log p <b>{fmt_logprob(total)}</b> total, {fmt_logprob(after)} after the fork "
                f"({len(tail)} token{'s' if len(tail) != 1 else ''}){state}{note}"
            )
        self.header.setText("<br>".join(lines))
        prefix = self.common_prefix()
        text = plain_text(e.text for e in prefix)
        more = ""
        if len(self.run.segments(parent)) > 1:
            more = "\nOnly the forked segment was decoded again; the others are the same in both."
        shown = text if len(text) <= 160 else "…" + text[-159:]
        self.prefix_label.setText(f"common prefix ({len(prefix)} tokens): {shown or '(none)'}{more}")
        self.prefix_label.setToolTip(text)
        forced = set(range(b.fork_step, b.fork_step + len(b.forced_ids)))
        self.canvas.set_columns(align(a_tail, b_tail), (parent, branch), forced)
        self._mark_selection()


def _tail_logprob(tail: list[StepEvent]) -> float:
    return sum(token_logprob(e) for e in tail)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
