"""The lanes aligned to lane 1, one chip row per lane, wrapped like a sequence alignment
(the canvas of :class:`gui.widgets.lanes.LanesView`).

The columns come from :meth:`gui.lanes_state.LanesState.columns` (difflib on token ids,
``core.tasks.lanes.align_lanes``). Chips are tinted by the token's processed probability
(viridis, 0..1, as in the token stream); a token that differs from lane 1's (a gap
counts) is outlined orange, as is lane 1's token where any lane differs; a gap is a dashed
box. Clicking a chip emits ``chipClicked(lane, StepEvent)``.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QWidget

from core.events import StepEvent

from ..lanes_state import LanesState
from .chip_canvas import CHIP_PAD, ChipCanvas, bold_font, draw_chip
from .token_text import display_text

#: one colour per lane (Okabe & Ito: blue, vermillion, bluish green, reddish purple)
LANE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")
#: the outline of a token that differs from lane 1's (Okabe & Ito orange)
DIFF_COLOR = "#E69F00"
_GAP, _GUTTER, _ROW_GAP = 3, 22, 2


class LanesCanvas(ChipCanvas):
    """The lanes aligned to lane 1: one chip row per lane, wrapped into blocks; a chip's key
    is its lane."""

    chipClicked = Signal(int, object)  # lane, StepEvent

    def __init__(self, state: LanesState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.placed: list[tuple[QRect, int, StepEvent, bool]] = []  # rect, lane, event, differs
        self._gaps: list[tuple[QRect, int]] = []
        self._blocks: list[int] = []  # y of each wrapped block

    def relayout(self) -> None:
        """Place the aligned columns left to right, wrapping at the width."""
        fm = self.fontMetrics()
        h = self.chip_height()
        lanes = self.state.lanes
        n = len(lanes)
        block_h = n * (h + _ROW_GAP) + 8
        x, y = _GUTTER, 4
        self.placed, self._gaps, self._blocks = [], [], [y] if n else []
        for col in self.state.columns():
            texts = [display_text(lanes[k].steps[i].text) if i is not None else "" for k, i in enumerate(col)]
            w = max(max((fm.horizontalAdvance(t) for t in texts if t), default=0), 8) + 2 * CHIP_PAD
            if x + w > self.layout_width - 4 and x > _GUTTER:
                x, y = _GUTTER, y + block_h
                self._blocks.append(y)
            for k, i in enumerate(col):
                rect = QRect(x, y + k * (h + _ROW_GAP), w, h)
                if i is None:
                    self._gaps.append((rect, k))
                else:
                    self.placed.append((rect, k, lanes[k].steps[i], self.state.differs(col, k)))
            x += w + _GAP
        height = (y + block_h) if n else 10
        self.set_content_height(height)

    def chips(self) -> list[tuple[QRect, int, StepEvent, bool]]:
        """(rect, lane, event, differs from lane 1) of every chip drawn."""
        return list(self.placed)

    def gaps(self) -> list[tuple[QRect, int]]:
        """(rect, lane) of every gap drawn."""
        return list(self._gaps)

    def chip_pressed(self, lane: int, ev: StepEvent) -> None:
        self.selected = (lane, ev.step)
        self.update()
        self.chipClicked.emit(lane, ev)

    def chip_tip(self, lane: int, ev: StepEvent) -> str:
        return (f"lane {lane + 1} ({self.state.lanes[lane].spec}), step {ev.step}: {ev.text!r}\n"
                f"p = {ev.prob:.3f} (processed)   raw p = {ev.raw_prob:.3f}\nclick: show its top-k")

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        h = self.chip_height()
        p.setFont(bold_font(self))
        for y in self._blocks:
            for k in range(len(self.state.lanes)):
                p.setPen(QColor(LANE_COLORS[k % len(LANE_COLORS)]))
                p.drawText(QRect(2, y + k * (h + _ROW_GAP), _GUTTER - 4, h), Qt.AlignmentFlag.AlignVCenter, str(k + 1))
        for rect, lane, ev, differs in self.placed:
            draw_chip(p, rect, ev, self.font())
            if differs:
                p.setPen(QPen(QColor(DIFF_COLOR), 2.5))
                p.drawRoundedRect(rect.adjusted(-1, -1, 1, 1), 5, 5)
            if self.selected == (lane, ev.step):
                p.setPen(QPen(QColor("#ff3b30"), 2.5))
                p.drawRoundedRect(rect.adjusted(-3, -3, 3, 3), 6, 6)
        p.setPen(QPen(QColor(DIFF_COLOR), 1.5, Qt.PenStyle.DashLine))
        p.setBrush(Qt.BrushStyle.NoBrush)
        for rect, _lane in self._gaps:
            p.drawRoundedRect(rect.adjusted(2, 3, -2, -3), 3, 3)
        p.end()
