"""A combo box that, when narrower than its current text, draws the text cut with "…"
instead of clipping it mid-letter ("local-ag", "Decoding Explorer default" at 1280 x 800,
H5 session 13). The list it opens shows every item in full."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QComboBox, QStyle, QStyleOptionComboBox, QStylePainter, QWidget


class ElidedComboBox(QComboBox):
    """A (not editable) ``QComboBox`` whose current text is elided to the room it has."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)

    def text_rect(self) -> QRect:
        """Where the style draws the current text (the edit field), in widget pixels."""
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        return self.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, opt,
                                           QStyle.SubControl.SC_ComboBoxEditField, self)

    def shown_text(self) -> str:
        """The current text (the placeholder when nothing is picked) as drawn: whole when it
        fits, else cut with "…"."""
        text = self.placeholderText() if self.currentIndex() < 0 else self.currentText()
        return self.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, max(0, self.text_rect().width() - 2))

    def paintEvent(self, event) -> None:  # noqa: N802
        if self.isEditable():
            super().paintEvent(event)
            return
        painter = QStylePainter(self)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, opt)
        if self.currentIndex() < 0 and self.placeholderText():  # as QComboBox draws its placeholder
            opt.palette.setBrush(QPalette.ColorRole.ButtonText, opt.palette.placeholderText())
        opt.currentText = self.shown_text()
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, opt)


__all__ = ["ElidedComboBox"]
