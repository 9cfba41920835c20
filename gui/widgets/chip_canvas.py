"""A wrapping canvas of token chips: what the fork diff's and the lanes' alignments share.

A chip is one token, tinted by its processed probability (viridis, fixed 0..1, as in the
token stream), its text in the contrasting colour. :class:`ChipCanvas` keeps the chips a
subclass placed (``self.placed``: ``(rect, key, event, ...)``, the key naming the row: a
fork side or a lane), finds the chip under the mouse, shows its tooltip
(:meth:`ChipCanvas.chip_tip`) and hands a left click to :meth:`ChipCanvas.chip_pressed`.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QPainter
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from core.events import StepEvent

from .colors import prob_color, text_color_on
from .speculation_marks import draw_mark
from .token_text import display_text
from .wrap_canvas import WrapCanvas

CHIP_PAD = 4
"""Pixels between a chip's text and its edge."""


def draw_chip(p: QPainter, rect: QRect, ev: StepEvent, font: QFont) -> QColor:
    """Paint the chip of ``ev`` in ``rect`` (rounded, tinted by ``ev.prob``, its text in
    ``font``, a speculative token's mark: ``gui.widgets.speculation_marks``) and leave the
    painter with no brush; returns the tint."""
    bg = prob_color(ev.prob)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(bg)
    p.drawRoundedRect(rect, 4, 4)
    p.setFont(font)
    p.setPen(text_color_on(bg))
    p.drawText(rect, Qt.AlignmentFlag.AlignCenter, display_text(ev.text))
    if ev.speculation:  # speculative decoding's mark, as in the token stream
        draw_mark(p, rect, ev.speculation)
    p.setBrush(Qt.BrushStyle.NoBrush)
    return bg


def bold_font(widget: QWidget) -> QFont:
    """The widget's font, bold (the gutter's row labels, forced tokens)."""
    bold = QFont(widget.font())
    bold.setBold(True)
    return bold


class ChipCanvas(WrapCanvas):
    """The chips' canvas (see the module docstring); a subclass places the chips in
    ``relayout`` and says :meth:`chip_tip` and :meth:`chip_pressed`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selected: tuple[int, int] | None = None  # (key, step) outlined
        self.placed: list[tuple] = []  # (rect, key, event, ...) of every chip, set by relayout
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)

    def chip_height(self) -> int:
        """A chip's height in pixels: the font's line height and the padding."""
        return self.fontMetrics().height() + 2 * CHIP_PAD

    def chip_at(self, pos) -> tuple[int, StepEvent] | None:
        """(key, event) of the chip at ``pos``, or None."""
        for rect, key, ev, *_rest in self.placed:
            if rect.contains(pos):
                return key, ev
        return None

    def chip_tip(self, key: int, ev: StepEvent) -> str:
        """The tooltip of the chip of ``ev`` in row ``key``."""
        raise NotImplementedError

    def chip_pressed(self, key: int, ev: StepEvent) -> None:
        """A left click on the chip of ``ev`` in row ``key``."""

    def mousePressEvent(self, e) -> None:  # noqa: N802
        hit = self.chip_at(e.position().toPoint())
        if hit is not None and e.button() == Qt.MouseButton.LeftButton:
            self.chip_pressed(*hit)
        super().mousePressEvent(e)

    def mouseMoveEvent(self, e) -> None:  # noqa: N802
        hit = self.chip_at(e.position().toPoint())
        if hit is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(e.globalPosition().toPoint(), self.chip_tip(*hit), self)
        super().mouseMoveEvent(e)
