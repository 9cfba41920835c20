"""The legend beside the token stream's colour combo box (``ColorLegend``): what a chip's
colour means in the current colouring mode.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QLinearGradient, QPainter
from PySide6.QtWidgets import QWidget

from .colors import ENTROPY_SCALE, LUT, RANK_BUCKETS, RANK_LEVELS, prob_color


class ColorLegend(QWidget):
    """What a chip colour means in the current colouring mode: a viridis bar "p 0 … 1"
    (probability), four swatches (rank buckets) or a bar "H 0 … 4+ nats" (entropy)."""

    _TIPS = {
        "probability": "colour = probability of the chosen token (processed distribution), fixed scale 0..1",
        "rank": "colour = rank of the chosen token in the raw distribution, in GLTR's buckets: the model's "
                "favourite (top-1), its top 10, its top 100, or further down (Gehrmann et al. 2019)",
        "entropy": f"colour = entropy of the raw distribution at the step, nats, fixed scale 0..{ENTROPY_SCALE:g}: "
                   "bright = the model was sure, dark = it hesitated",
    }

    def __init__(self, mode: str = "probability", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._mode = ""
        self.setFixedHeight(18)
        self.set_mode(mode)

    def set_mode(self, mode: str) -> None:
        """Show the legend of colouring ``mode``."""
        if mode == self._mode:
            return
        self._mode = mode
        self.setToolTip(self._TIPS.get(mode, ""))
        fm = self.fontMetrics()
        if mode == "rank":
            w = fm.horizontalAdvance("rank ") + sum(fm.horizontalAdvance(t) + 18 for t in self._rank_labels())
        else:
            w = 170 if mode == "probability" else 200
        self.setFixedWidth(w + 4)
        self.update()

    def mode(self) -> str:
        return self._mode

    @staticmethod
    def _rank_labels() -> list[str]:
        return [label for _bound, label in RANK_BUCKETS]

    def text(self) -> str:
        """The legend as text (what it says in words)."""
        if self._mode == "rank":
            return "rank " + " · ".join(self._rank_labels())
        if self._mode == "entropy":
            return f"raw entropy 0 … {ENTROPY_SCALE:g}+ nats"
        return "p 0 … 1"

    def _bar(self, p: QPainter, left: str, right: str, reverse: bool) -> None:
        fm = p.fontMetrics()
        lw = fm.horizontalAdvance(left + " ") + 2
        rw = fm.horizontalAdvance(" " + right) + 2
        bar = QRect(lw, 3, self.width() - lw - rw, self.height() - 6)
        grad = QLinearGradient(bar.left(), 0, bar.right(), 0)
        for i in list(range(0, 256, 32)) + [255]:
            r, g, b, _a = LUT[255 - i if reverse else i]
            grad.setColorAt(i / 255, QColor(int(r), int(g), int(b)))
        p.fillRect(bar, grad)
        p.setPen(self.palette().windowText().color())
        p.drawText(QRect(0, 0, lw, self.height()), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, left + " ")
        p.drawText(QRect(bar.right() + 2, 0, rw, self.height()), Qt.AlignmentFlag.AlignVCenter, " " + right)

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        if self._mode == "rank":
            fm = p.fontMetrics()
            fg = self.palette().windowText().color()
            p.setPen(fg)
            x = fm.horizontalAdvance("rank ")
            p.drawText(QRect(0, 0, x, self.height()), Qt.AlignmentFlag.AlignVCenter, "rank ")
            for (bound, label), level in zip(RANK_BUCKETS, RANK_LEVELS):
                p.fillRect(QRect(x, 3, 12, self.height() - 6), prob_color(level))
                p.setPen(fg)
                tw = fm.horizontalAdvance(label)
                p.drawText(QRect(x + 14, 0, tw + 4, self.height()), Qt.AlignmentFlag.AlignVCenter, label)
                x += tw + 18
        elif self._mode == "entropy":
            self._bar(p, "H 0", f"{ENTROPY_SCALE:g}+ nats", reverse=True)
        else:
            self._bar(p, "p 0", "1", reverse=False)
        p.end()


#: the earlier name of the legend (probability mode only)
ColorBar = ColorLegend
