"""Horizontal bars of one step's top-k: the processed (filtered) distribution in solid
colour over the raw one (light outlined bar), so the user sees what temperature, top-k
and top-p cut away. Painted with QPainter (text labels and numbers stay crisp).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from core.events import StepEvent

from .colors import prob_color
from .token_stream import display_text


@dataclass(frozen=True)
class Row:
    """One bar: token text, processed probability, raw probability, chosen?"""

    token_id: int
    text: str
    prob: float
    raw_prob: float
    chosen: bool


def rows_for(ev: StepEvent, limit: int = 10) -> list[Row]:
    """The rows to draw for ``ev``: processed top-k first (most probable first), then the raw
    runners-up the filters removed; each with both probabilities (0 where not reported).

    Processed entries with probability 0 (cut by a filter) are not processed candidates:
    they are shown, if at all, among the raw runners-up with their real raw probability."""
    raw = {tp.id: tp for tp in ev.raw_topk}
    proc = {tp.id: tp for tp in ev.topk if tp.prob > 0.0}
    order = [tp.id for tp in sorted(proc.values(), key=lambda t: -t.prob)]
    order += [tp.id for tp in sorted(ev.raw_topk, key=lambda t: -t.prob) if tp.id not in proc]
    if ev.token_id not in order:
        order.insert(0, ev.token_id)
    rows = []
    for tid in order[:limit]:
        src = proc.get(tid) or raw.get(tid)
        text = src.text if src is not None else ev.text
        p = proc[tid].prob if tid in proc else (ev.prob if tid == ev.token_id else 0.0)
        rp = raw[tid].prob if tid in raw else (ev.raw_prob if tid == ev.token_id else 0.0)
        rows.append(Row(tid, text, float(p), float(rp), tid == ev.token_id))
    return rows


class TopKChart(QWidget):
    """Top-k bars of one StepEvent. ``set_step(ev)`` shows it; ``set_step(None)`` clears."""

    def __init__(self, limit: int = 10, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._limit = limit
        self._event: StepEvent | None = None
        self._rows: list[Row] = []
        self.setMinimumSize(260, 160)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(420, 300)

    def set_step(self, ev: StepEvent | None) -> None:
        """Show the top-k of ``ev`` (None: empty chart with a hint)."""
        self._event = ev
        self._rows = rows_for(ev, self._limit) if ev is not None else []
        self.update()

    def step(self) -> int | None:
        """The step shown, or None."""
        return self._event.step if self._event is not None else None

    def rows(self) -> list[Row]:
        """The rows drawn (for tests and tooltips)."""
        return list(self._rows)

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        fg = pal.windowText().color()
        fm = p.fontMetrics()
        lh = fm.height()
        w, h = self.width(), self.height()
        bold = QFont(p.font())
        bold.setBold(True)
        ev = self._event
        title = "Top-k at the selected step" if ev is None else (
            f"Top-k at step {ev.step}: chosen {display_text(ev.text)!r}  (entropy {ev.entropy:.2f} nats)"
        )
        p.setFont(bold)
        p.setPen(fg)
        p.drawText(QRectF(6, 2, w - 12, lh + 2), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                   fm.elidedText(title, Qt.TextElideMode.ElideRight, w - 12))
        p.setFont(self.font())
        # legend
        ly = 4 + lh
        lx = 6
        p.setPen(QPen(QColor(120, 120, 120), 1))
        p.setBrush(QColor(210, 210, 210))
        p.drawRect(QRectF(lx, ly + 3, 18, lh - 6))
        p.setPen(fg)
        p.drawText(QRectF(lx + 22, ly, 140, lh), Qt.AlignmentFlag.AlignVCenter, "raw (softmax of logits)")
        lx2 = lx + 26 + fm.horizontalAdvance("raw (softmax of logits)") + 12
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(prob_color(0.6))
        p.drawRect(QRectF(lx2, ly + 3, 18, lh - 6))
        p.setPen(fg)
        p.drawText(QRectF(lx2 + 22, ly, 220, lh), Qt.AlignmentFlag.AlignVCenter, "processed (after filters)")
        top = ly + lh + 6
        if not self._rows:
            p.setPen(pal.placeholderText().color())
            p.drawText(QRectF(0, top, w, h - top), Qt.AlignmentFlag.AlignCenter,
                       "Decode an input, then click a token to see its alternatives.")
            p.end()
            return
        label_w = min(max(fm.horizontalAdvance(display_text(r.text)) for r in self._rows) + 22, int(w * 0.35))
        num_w = fm.horizontalAdvance("0.000 (raw 0.000)") + 8
        bar_x = 6 + label_w
        bar_w = max(20, w - bar_x - num_w - 6)
        n = len(self._rows)
        row_h = max(lh + 2, min(2 * lh, (h - top - 4) / max(n, 1)))
        for i, r in enumerate(self._rows):
            y = top + i * row_h
            if y + row_h > h + 1:
                break
            text = display_text(r.text)
            p.setFont(bold if r.chosen else self.font())
            p.setPen(fg)
            mark = "▶ " if r.chosen else ""
            p.drawText(QRectF(4, y, label_w - 6, row_h), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                       fm.elidedText(mark + text, Qt.TextElideMode.ElideRight, label_w - 6))
            inner = QRectF(bar_x, y + 2, bar_w, row_h - 4)
            # raw: light grey bar with outline
            p.setPen(QPen(QColor(120, 120, 120), 1))
            p.setBrush(QColor(210, 210, 210))
            p.drawRect(QRectF(inner.x(), inner.y(), max(1.0, bar_w * r.raw_prob), inner.height()))
            # processed: solid, tinted by its probability (same colours as the token chips)
            if r.prob > 0:
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(prob_color(r.prob))
                ph = inner.height() * 0.6
                p.drawRect(QRectF(inner.x(), inner.y() + (inner.height() - ph) / 2, bar_w * r.prob, ph))
            p.setFont(self.font())
            p.setPen(fg if r.prob > 0 else pal.placeholderText().color())
            num = f"{r.prob:.3f} (raw {r.raw_prob:.3f})" if r.prob > 0 else f"cut (raw {r.raw_prob:.3f})"
            p.drawText(QRectF(bar_x + bar_w + 4, y, num_w, row_h), Qt.AlignmentFlag.AlignVCenter, num)
        p.end()
