"""A widget that lays chips out in lines wrapped at its width (the fork diff, the lanes and
the what-if views): it keeps the width it lays out for, lays out again when that width
changes, and is as tall as its content."""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QWidget


class WrapCanvas(QWidget):
    """Base of the chip canvases. Subclasses implement :meth:`relayout` (place the chips for
    ``self.layout_width`` pixels, then call :meth:`set_content_height`)."""

    MIN_WIDTH = 120

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.layout_width = 400  # pixels laid out for, until the first resize

    def relayout(self) -> None:
        """Place the chips for ``self.layout_width`` pixels."""
        raise NotImplementedError

    def set_content_height(self, height: int) -> None:
        """Make the widget ``height`` pixels tall (its minimum) and repaint."""
        if self.minimumHeight() != height:
            self.setMinimumHeight(height)
        self.update()

    def resizeEvent(self, e) -> None:  # noqa: N802
        if e.size().width() != self.layout_width:
            self.layout_width = max(self.MIN_WIDTH, e.size().width())
            self.relayout()
        super().resizeEvent(e)

    def sizeHint(self) -> QSize:
        return QSize(self.layout_width, self.minimumHeight())
