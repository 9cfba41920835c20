"""The logit lens' grid (``gui.widgets.logit_lens``): layers x steps, each cell the token a
layer's hidden state decodes to (top-1) or how much the layer moved the chosen token's log-probability
(delta), painted by hand so that only the visible columns cost anything.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QAbstractScrollArea, QToolTip, QWidget

from core.analysis.lens import deltas
from core.events import StepEvent

from .colors import prob_color, text_color_on
from .token_text import display_text

#: cell width in pixels (a token of ~8 characters fits)
COL_W = 62
#: the row label gutter on the left, and the header row of emitted tokens on top
GUTTER_W = 44
HEADER_H = 22
#: rows are at least this tall (more layers than fit scroll vertically) and at most this tall
MIN_ROW_H = 16
MAX_ROW_H = 34
#: the Δ colour scale saturates at ± this many nats
DELTA_SCALE = 4.0
#: the diverging map of the Δ mode (CET-D1: blue = suppressed, white = 0, red = promoted)
DELTA_LUT = pg.colormap.get("CET-D1").getLookupTable(0.0, 1.0, 256, alpha=True)
#: what the cells show
MODES = ("top-1", "delta")
#: the selected step's outline
SELECT_COLOR = "#ff3b30"


def delta_color(d: float | None) -> QColor:
    """Diverging colour of a log-probability change ``d`` (nats), grey when there is none."""
    if d is None or not math.isfinite(d):
        return QColor(200, 200, 200)
    level = 0.5 + 0.5 * max(-1.0, min(1.0, d / DELTA_SCALE))
    r, g, b, a = DELTA_LUT[int(round(level * 255))]
    return QColor(int(r), int(g), int(b), int(a))


def cell_text(text: str) -> str:
    """A token's text as a cell shows it (SentencePiece's word mark and a leading space dropped)."""
    return display_text(" " + text[1:] if text.startswith("▁") else text)


def fmt_delta(d: float | None) -> str:
    return "–" if d is None else f"{d:+.2f}"


class LensGrid(QAbstractScrollArea):
    """The layers x steps grid; paints only the columns in view."""

    cellClicked = Signal(int)  # step

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.steps: list[StepEvent] = []
        self.col_of: dict[int, int] = {}  # step -> column
        self.n_layers = 0
        self.mode = "top-1"
        self.selected: int | None = None
        self.placeholder = ""
        self._deltas: list[list[float | None]] = []  # per column, per layer
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.viewport().setMouseTracking(True)
        self.horizontalScrollBar().setSingleStep(COL_W)
        self.painted_columns: tuple[int, int] = (0, 0)  # [first, last) painted last time (tests)

    # ---------------------------------------------------------------- data
    def clear(self) -> None:
        self.steps, self.col_of, self._deltas, self.n_layers, self.selected = [], {}, [], 0, None
        self._relayout()

    def add(self, events: list[StepEvent]) -> None:
        """Append steps (a step already shown is replaced in place: a branch replayed)."""
        follow = self._at_end()
        waiting = self.selected is not None and self.selected not in self.col_of
        for ev in events:
            col = self.col_of.get(ev.step)
            if col is None:
                self.col_of[ev.step] = len(self.steps)
                self.steps.append(ev)
                self._deltas.append(deltas(ev.lens))
            else:
                self.steps[col] = ev
                self._deltas[col] = deltas(ev.lens)
            self.n_layers = max(self.n_layers, len(ev.lens))
        self._relayout()
        if waiting and self.selected in self.col_of:  # the selected step's column just came: show it
            self.scroll_to_column(self.col_of[self.selected])
        elif follow and self.selected is None:
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().maximum())

    def showEvent(self, e) -> None:  # noqa: N802
        """Shown (its inspector tab brought forward): the selected step in view, as the
        viewport's width is known only now."""
        super().showEvent(e)
        self._relayout()
        if self.selected is not None and self.selected in self.col_of:
            self.scroll_to_column(self.col_of[self.selected])

    def _at_end(self) -> bool:
        bar = self.horizontalScrollBar()
        return bar.value() >= bar.maximum() - COL_W

    # ---------------------------------------------------------------- geometry
    def row_h(self) -> int:
        if not self.n_layers:
            return MIN_ROW_H
        fit = (self.viewport().height() - HEADER_H) // self.n_layers
        return max(MIN_ROW_H, min(MAX_ROW_H, fit))

    def _relayout(self) -> None:
        vw, vh = self.viewport().width(), self.viewport().height()
        h_bar, v_bar = self.horizontalScrollBar(), self.verticalScrollBar()
        h_bar.setPageStep(max(1, vw - GUTTER_W))
        shown = len(self.steps) if self.n_layers else 0  # no lens rows: the placeholder, nothing to scroll
        h_bar.setRange(0, max(0, shown * COL_W - (vw - GUTTER_W)))
        v_bar.setPageStep(max(1, vh))
        v_bar.setRange(0, max(0, HEADER_H + self.n_layers * self.row_h() - vh))
        self.viewport().update()

    def resizeEvent(self, e) -> None:  # noqa: N802
        super().resizeEvent(e)
        self._relayout()

    def visible_columns(self) -> tuple[int, int]:
        """[first, last) columns in view."""
        x0 = self.horizontalScrollBar().value()
        first = x0 // COL_W
        last = min(len(self.steps), (x0 + self.viewport().width() - GUTTER_W) // COL_W + 1)
        return first, max(first, last)

    def cell_rect(self, col: int, layer: int) -> QRect:
        """Where cell (column, layer) is drawn, viewport coordinates."""
        x = GUTTER_W + col * COL_W - self.horizontalScrollBar().value()
        y = HEADER_H + layer * self.row_h() - self.verticalScrollBar().value()
        return QRect(x, y, COL_W - 1, self.row_h() - 1)

    def cell_at(self, pos: QPoint) -> tuple[int, int] | None:
        """(column, layer) under viewport point ``pos``, or None."""
        x = pos.x() - GUTTER_W + self.horizontalScrollBar().value()
        y = pos.y() - HEADER_H + self.verticalScrollBar().value()
        if pos.x() < GUTTER_W or pos.y() < HEADER_H or x < 0 or y < 0:
            return None
        col, layer = x // COL_W, y // self.row_h()
        if col >= len(self.steps) or layer >= len(self.steps[col].lens):
            return None
        return col, layer

    def scroll_to_column(self, col: int) -> None:
        """Bring column ``col`` into view (centred if it is outside)."""
        first, last = self.visible_columns()
        if not first <= col < last - 1:
            bar = self.horizontalScrollBar()
            bar.setValue(col * COL_W - (self.viewport().width() - GUTTER_W) // 2)

    # ---------------------------------------------------------------- look
    def cell_color(self, col: int, layer: int) -> QColor:
        """The colour of a cell: viridis of the layer's top-1 probability, or the Δ colour."""
        if self.mode == "delta":
            return delta_color(self._deltas[col][layer])
        return prob_color(self.steps[col].lens[layer].prob)

    def cell_label(self, col: int, layer: int) -> str:
        if self.mode == "delta":
            return fmt_delta(self._deltas[col][layer])
        return cell_text(self.steps[col].lens[layer].text)

    def tooltip(self, col: int, layer: int) -> str:
        """The hover text of a cell: the layer's top-k, the emitted token there and the change."""
        ev = self.steps[col]
        e = ev.lens[layer]
        out = "output layer" if layer == len(ev.lens) - 1 else f"layer {layer}"
        lines = [f"step {ev.step} · {out}: emitted {ev.text!r}"]
        lines += [f"  {t.prob:6.3f}  {t.text!r}" for t in e.topk]
        p = math.exp(e.logprob) if math.isfinite(e.logprob) else 0.0
        lines.append(f"emitted token here: p = {p:.3g}, Δ log p = {fmt_delta(self._deltas[col][layer])}")
        if layer == len(ev.lens) - 1:
            lines.append("(the model's own raw distribution)")
        return "\n".join(lines)

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self.viewport())
        vw, vh = self.viewport().width(), self.viewport().height()
        if not self.steps or not self.n_layers:
            p.setPen(self.palette().color(self.foregroundRole()))
            p.drawText(QRect(8, 8, vw - 16, vh - 16), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                       self.placeholder)
            p.end()
            self.painted_columns = (0, 0)
            return
        bold = QFont(self.font())
        bold.setBold(True)
        fm = QFontMetrics(self.font())
        first, last = self.visible_columns()
        self.painted_columns = (first, last)
        rh = self.row_h()
        p.setClipRect(QRect(GUTTER_W, 0, vw - GUTTER_W, vh))
        for col in range(first, last):
            ev = self.steps[col]
            # the header: the emitted token
            head = QRect(GUTTER_W + col * COL_W - self.horizontalScrollBar().value(), 0, COL_W - 1, HEADER_H - 2)
            p.setPen(self.palette().color(self.foregroundRole()))
            p.setFont(bold)
            p.drawText(head, Qt.AlignmentFlag.AlignCenter, fm.elidedText(cell_text(ev.text), Qt.TextElideMode.ElideRight, COL_W - 4))
            for layer, entry in enumerate(ev.lens):
                rect = self.cell_rect(col, layer)
                if rect.bottom() < HEADER_H or rect.top() > vh:
                    continue
                bg = self.cell_color(col, layer)
                p.fillRect(rect, bg)
                p.setPen(text_color_on(bg))
                p.setFont(bold if entry.id == ev.token_id else self.font())
                p.drawText(rect.adjusted(2, 0, -2, 0), Qt.AlignmentFlag.AlignCenter,
                           fm.elidedText(self.cell_label(col, layer), Qt.TextElideMode.ElideRight, COL_W - 6))
            if ev.step == self.selected:
                p.setPen(QPen(QColor(SELECT_COLOR), 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                top = self.cell_rect(col, 0)
                p.drawRect(top.left(), 1, COL_W - 2, HEADER_H + len(ev.lens) * rh - 3)
        # the row labels: layer numbers, the last "out"
        p.setClipping(False)
        p.fillRect(QRect(0, 0, GUTTER_W, vh), self.palette().color(self.backgroundRole()))
        p.setPen(self.palette().color(self.foregroundRole()))
        p.setFont(self.font())
        for layer in range(self.n_layers):
            rect = QRect(2, HEADER_H + layer * rh - self.verticalScrollBar().value(), GUTTER_W - 6, rh)
            if rect.bottom() < HEADER_H:
                continue
            label = "out" if layer == self.n_layers - 1 else f"L{layer}"
            p.drawText(rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, label)
        p.end()

    # ---------------------------------------------------------------- mouse
    def viewportEvent(self, e) -> bool:  # noqa: N802
        if e.type() == e.Type.ToolTip:
            hit = self.cell_at(e.pos())
            if hit is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(e.globalPos(), self.tooltip(*hit), self.viewport())
            return True
        if e.type() == e.Type.MouseButtonPress and e.button() == Qt.MouseButton.LeftButton:
            pos = e.position().toPoint()
            hit = self.cell_at(pos)
            col = hit[0] if hit is not None else None
            if col is None and pos.y() < HEADER_H and pos.x() >= GUTTER_W:  # the header: that step
                c = (pos.x() - GUTTER_W + self.horizontalScrollBar().value()) // COL_W
                col = c if c < len(self.steps) else None
            if col is not None:
                self.cellClicked.emit(self.steps[col].step)
            return True
        return super().viewportEvent(e)

    def sizeHint(self) -> QSize:
        return QSize(600, HEADER_H + 6 * 24)
