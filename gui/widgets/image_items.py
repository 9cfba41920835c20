"""The image view's pieces (``gui.widgets.image_view``): QImage <-> numpy conversion, the
attention overlay drawn over the image and the numbered line badges.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from .colors import LUT

BOX_COLOR = QColor(0, 122, 255)
REGION_COLOR = QColor(255, 59, 48)
MASK_COLOR = QColor(213, 94, 0)  # Okabe & Ito vermillion, the what-if colour
ARGMAX_COLOR = QColor(255, 149, 0)


def qimage_from_array(rgb: np.ndarray) -> QImage:
    """A deep-copied ``QImage`` (RGB888) from uint8 (height, width, 3) RGB pixels.

    Raises:
        ValueError: ``rgb`` is not (H, W, 3) uint8 with H, W > 0.
    """
    a = np.ascontiguousarray(rgb)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"expected uint8 (height, width, 3) RGB pixels, got {a.dtype} {a.shape}")
    h, w, _ = a.shape
    return QImage(a.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()


def array_from_qimage(img: QImage) -> np.ndarray:
    """uint8 (height, width, 3) RGB pixels of ``img`` (any format; alpha is composited on white).

    Raises:
        ValueError: the image is null (empty clipboard, unreadable data).
    """
    if img.isNull() or img.width() == 0 or img.height() == 0:
        raise ValueError("the image is empty")
    if img.hasAlphaChannel():
        flat = QImage(img.size(), QImage.Format.Format_RGB888)
        flat.fill(QColor("white"))
        p = QPainter(flat)
        p.drawImage(0, 0, img)
        p.end()
        img = flat
    else:
        img = img.convertToFormat(QImage.Format.Format_RGB888)
    w, h, bpl = img.width(), img.height(), img.bytesPerLine()
    buf = np.frombuffer(img.constBits(), dtype=np.uint8, count=bpl * h).reshape(h, bpl)
    return buf[:, : 3 * w].reshape(h, w, 3).copy()


class AttentionOverlay(QGraphicsItem):
    """Viridis-tinted column bands over one line box (scene = image pixels)."""

    def __init__(self) -> None:
        super().__init__()
        self._box = QRectF()
        self._bands: list[tuple[float, float, float]] = []  # (x0, x1, value 0..1)
        self._argmax: tuple[float, float] | None = None
        self.setZValue(5)

    def set_data(self, box: QRectF, ranges: Sequence[tuple[float, float]], values: np.ndarray) -> None:
        """Bands ``ranges[i]`` (x0, x1 in pixels) with ``values[i]`` (0..1) over ``box``."""
        self.prepareGeometryChange()
        self._box = QRectF(box)
        vals = np.clip(np.nan_to_num(np.asarray(values, dtype=np.float32)), 0.0, 1.0)
        n = min(len(ranges), len(vals))
        self._bands = [(float(ranges[i][0]), float(ranges[i][1]), float(vals[i])) for i in range(n)]
        if n:
            k = int(np.argmax(vals[:n]))
            self._argmax = (float(ranges[k][0]), float(ranges[k][1]))
        else:
            self._argmax = None
        self.update()

    def bands(self) -> list[tuple[float, float, float]]:
        """(x0, x1, value) per encoder column."""
        return list(self._bands)

    def argmax_range(self) -> tuple[float, float] | None:
        """x range (pixels) of the most-attended column."""
        return self._argmax

    def box(self) -> QRectF:
        """The line box the overlay covers."""
        return QRectF(self._box)

    def boundingRect(self) -> QRectF:  # noqa: N802
        return self._box.adjusted(-3, -3, 3, 3)

    def paint(self, p: QPainter, _opt: QStyleOptionGraphicsItem, _w: QWidget | None = None) -> None:
        y0, h = self._box.top(), self._box.height()
        p.setPen(Qt.PenStyle.NoPen)
        for x0, x1, v in self._bands:
            r, g, b, _a = LUT[int(round(v * 255))]
            p.setBrush(QColor(int(r), int(g), int(b), int(35 + 175 * v)))
            p.drawRect(QRectF(x0, y0, max(x1 - x0, 0.5), h))
        if self._argmax is not None:
            pen = QPen(ARGMAX_COLOR, 2.5)
            pen.setCosmetic(True)
            p.setPen(pen)
            p.setBrush(Qt.BrushStyle.NoBrush)
            x0, x1 = self._argmax
            p.drawRect(QRectF(x0, y0 - 2, max(x1 - x0, 1.0), h + 4))


class LineBadge(QGraphicsItem):
    """A line number in a blue badge left of its box, the same size on screen at any zoom."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text = text
        self._font = QFont()
        self._font.setBold(True)
        self._font.setPixelSize(12)
        w = QFontMetricsF(self._font).horizontalAdvance(text) + 8
        self._rect = QRectF(-w - 3, -8, w, 16)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations)
        self.setZValue(6)

    def text(self) -> str:
        """The number shown."""
        return self._text

    def boundingRect(self) -> QRectF:  # noqa: N802
        return QRectF(self._rect)

    def paint(self, p: QPainter, _opt: QStyleOptionGraphicsItem, _w: QWidget | None = None) -> None:
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(BOX_COLOR)
        p.drawRoundedRect(self._rect, 3, 3)
        p.setPen(QColor("white"))
        p.setFont(self._font)
        p.drawText(self._rect, Qt.AlignmentFlag.AlignCenter, self._text)
