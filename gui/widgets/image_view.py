"""A zoomable, pannable image view with numbered line boxes, a region selection and a
cross-attention overlay (the OCR tab's input view).

``QGraphicsView`` over one ``QGraphicsPixmapItem`` whose scene coordinates are the
image's pixels, so every box, region and overlay is given in image pixels.

Mouse: the wheel zooms around the cursor; a left-button drag draws a rubber band and
reports the region (``regionSelected``); a middle-button drag (or a left drag with
Shift held, or in pan mode) pans. ``fit()`` shows the whole image; the view keeps
fitting on resize until the user zooms.

The attention overlay paints each encoder column's x range (``TextLine.column_x``)
over the line box in viridis (levels 0..1, the heatmap's colours), alpha growing with
the attention, and outlines the argmax column in orange.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QGraphicsPixmapItem, QGraphicsRectItem, QGraphicsScene, QGraphicsView, QWidget

from .image_items import (
    ARGMAX_COLOR, BOX_COLOR, MASK_COLOR, REGION_COLOR, AttentionOverlay, LineBadge, array_from_qimage, qimage_from_array,
)

# re-exported: the tabs and tests convert images through this module (the items are image_items.py)
__all__ = ["ARGMAX_COLOR", "BOX_COLOR", "ImageView", "array_from_qimage", "qimage_from_array"]

#: a drag shorter than this (view pixels) is a click, not a region
MIN_DRAG_PX = 6
ZOOM_STEP = 1.25
MIN_SCALE, MAX_SCALE = 0.02, 40.0

class ImageView(QGraphicsView):
    """The image with line boxes, region and attention overlay (see module docstring).

    Signals:
        regionSelected(object): (x, y, w, h) ints in image pixels, clipped to the image,
            after a rubber-band drag.
        zoomChanged(float): the view scale (screen pixels per image pixel).
    """

    regionSelected = Signal(object)
    zoomChanged = Signal(float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.SmoothPixmapTransform)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setBackgroundBrush(QBrush(QColor("#3a3a3a")))
        self.setAcceptDrops(False)  # drops go to the tab
        self.viewport().setAcceptDrops(False)
        self.setMinimumHeight(120)
        self._pixmap_item = QGraphicsPixmapItem()
        self._pixmap_item.setTransformationMode(Qt.TransformationMode.SmoothTransformation)
        self.scene().addItem(self._pixmap_item)
        self._size = (0, 0)
        self._line_items: list[tuple[QGraphicsRectItem, LineBadge]] = []
        self._current_line: int | None = None
        self.region_item = QGraphicsRectItem()
        pen = QPen(REGION_COLOR, 2, Qt.PenStyle.DashLine)
        pen.setCosmetic(True)
        self.region_item.setPen(pen)
        self.region_item.setBrush(QBrush(QColor(255, 59, 48, 25)))
        self.region_item.setZValue(8)
        self.region_item.hide()
        self.scene().addItem(self.region_item)
        self.mask_item = QGraphicsRectItem()  # the what-if mask: blanked when "What if?" runs
        mpen = QPen(MASK_COLOR, 2)
        mpen.setCosmetic(True)
        self.mask_item.setPen(mpen)
        self.mask_item.setBrush(QBrush(MASK_COLOR, Qt.BrushStyle.BDiagPattern))
        self.mask_item.setZValue(7)
        self.mask_item.setToolTip("masked: What if? blanks this region with the image's background colour")
        self.mask_item.hide()
        self.scene().addItem(self.mask_item)
        self.band_item = QGraphicsRectItem()  # the rubber band while dragging
        bpen = QPen(QColor("#ffffff"), 1.5, Qt.PenStyle.DashLine)
        bpen.setCosmetic(True)
        self.band_item.setPen(bpen)
        self.band_item.setBrush(QBrush(QColor(255, 255, 255, 40)))
        self.band_item.setZValue(9)
        self.band_item.hide()
        self.scene().addItem(self.band_item)
        self.overlay = AttentionOverlay()
        self.overlay.hide()
        self.scene().addItem(self.overlay)
        self._fit_mode = True
        self._pan_mode = False
        self._drag: str | None = None  # "band" | "pan"
        self._press = QPointF()
        self._press_scene = QPointF()
        self.set_pan_mode(False)

    # ---------------------------------------------------------------- API
    def set_image(self, image: QImage | None) -> None:
        """Show ``image`` (None clears); removes boxes, region and overlay; fits it to the window."""
        self.clear_lines()
        self.set_region(None)
        self.set_mask(None)
        self.clear_attention()
        if image is None or image.isNull():
            self._pixmap_item.setPixmap(QPixmap())
            self._size = (0, 0)
            self.scene().setSceneRect(QRectF(0, 0, 1, 1))
            return
        self._pixmap_item.setPixmap(QPixmap.fromImage(image))
        self._size = (image.width(), image.height())
        self.scene().setSceneRect(QRectF(0, 0, image.width(), image.height()))
        self.fit()

    def image_size(self) -> tuple[int, int]:
        """(width, height) of the shown image in pixels ((0, 0) when empty)."""
        return self._size

    def has_image(self) -> bool:
        """An image is shown."""
        return self._size[0] > 0

    def set_lines(self, boxes: Sequence[tuple[int, int, int, int]]) -> None:
        """Draw line boxes (x0, y0, x1, y1 pixels), numbered 1.. in the given (reading) order."""
        self.clear_lines()
        for i, (x0, y0, x1, y1) in enumerate(boxes):
            rect = QGraphicsRectItem(QRectF(x0, y0, x1 - x0, y1 - y0))
            pen = QPen(BOX_COLOR, 1.5)
            pen.setCosmetic(True)
            rect.setPen(pen)
            rect.setZValue(4)
            label = LineBadge(str(i + 1))
            label.setPos(x0, (y0 + y1) / 2)
            self.scene().addItem(rect)
            self.scene().addItem(label)
            self._line_items.append((rect, label))
        self._current_line = None

    def line_count(self) -> int:
        """Number of boxes drawn."""
        return len(self._line_items)

    def line_box(self, i: int) -> QRectF:
        """Box ``i`` (image pixels)."""
        return self._line_items[i][0].rect()

    def line_label(self, i: int) -> str:
        """The number drawn beside box ``i``."""
        return self._line_items[i][1].text()

    def set_current_line(self, i: int | None) -> None:
        """Draw box ``i`` thicker (the line being read / holding the selected token)."""
        if i == self._current_line:
            return
        for k, (rect, _label) in enumerate(self._line_items):
            pen = QPen(BOX_COLOR, 3.0 if k == i else 1.5)
            pen.setCosmetic(True)
            rect.setPen(pen)
        self._current_line = i

    def clear_lines(self) -> None:
        """Remove the line boxes."""
        for rect, label in self._line_items:
            self.scene().removeItem(rect)
            self.scene().removeItem(label)
        self._line_items.clear()
        self._current_line = None

    def set_region(self, region: tuple[int, int, int, int] | None) -> None:
        """Outline the region being read ((x, y, w, h) pixels; None hides it)."""
        if region is None:
            self.region_item.hide()
            return
        x, y, w, h = region
        self.region_item.setRect(QRectF(x, y, w, h))
        self.region_item.show()

    def region_rect(self) -> QRectF | None:
        """The outlined region, or None."""
        return self.region_item.rect() if self.region_item.isVisible() else None

    def set_mask(self, region: tuple[int, int, int, int] | None) -> None:
        """Hatch the what-if mask ((x, y, w, h) pixels; None hides it)."""
        if region is None:
            self.mask_item.hide()
            return
        x, y, w, h = region
        self.mask_item.setRect(QRectF(x, y, w, h))
        self.mask_item.show()

    def mask_rect(self) -> QRectF | None:
        """The hatched mask, or None."""
        return self.mask_item.rect() if self.mask_item.isVisible() else None

    def set_attention(self, box: tuple[int, int, int, int], ranges: Sequence[tuple[float, float]], values: np.ndarray) -> None:
        """Draw one token's attention over line ``box`` (x0, y0, x1, y1): column ``i`` covers
        ``ranges[i]`` (x0, x1 pixels) with strength ``values[i]`` (0..1, e.g. normalised to max 1)."""
        x0, y0, x1, y1 = box
        self.overlay.set_data(QRectF(x0, y0, x1 - x0, y1 - y0), ranges, values)
        self.overlay.show()

    def clear_attention(self) -> None:
        """Hide the attention overlay."""
        self.overlay.hide()
        self.overlay.set_data(QRectF(), [], np.zeros(0, np.float32))

    def attention_shown(self) -> bool:
        """The overlay is visible."""
        return self.overlay.isVisible()

    # ---------------------------------------------------------------- zoom
    def scale_factor(self) -> float:
        """Screen pixels per image pixel."""
        return float(self.transform().m11())

    def fit(self) -> None:
        """Show the whole image (and keep fitting on resize until the user zooms)."""
        self._fit_mode = True
        if self.has_image():
            w, h = self._size
            pad = 0.03 * max(w, h) + 2  # room for the line numbers left of the boxes
            self.fitInView(QRectF(-pad, -pad, w + 2 * pad, h + 2 * pad), Qt.AspectRatioMode.KeepAspectRatio)
            self.zoomChanged.emit(self.scale_factor())

    def zoom_by(self, factor: float) -> None:
        """Multiply the scale by ``factor`` (clamped to 0.02..40 screen pixels per image pixel)."""
        s = self.scale_factor()
        factor = min(max(factor, MIN_SCALE / s), MAX_SCALE / s) if s > 0 else factor
        self._fit_mode = False
        self.scale(factor, factor)
        self.zoomChanged.emit(self.scale_factor())

    def set_pan_mode(self, on: bool) -> None:
        """Left drag pans (True) or selects a region (False)."""
        self._pan_mode = bool(on)
        self.viewport().setCursor(Qt.CursorShape.OpenHandCursor if on else Qt.CursorShape.CrossCursor)

    def wheelEvent(self, e) -> None:  # noqa: N802
        dy = e.angleDelta().y()
        if dy:
            self.zoom_by(ZOOM_STEP ** (dy / 120.0))
        e.accept()

    def resizeEvent(self, e) -> None:  # noqa: N802
        super().resizeEvent(e)
        if self._fit_mode:
            self.fit()

    # ------------------------------------------------------------- mouse
    def mousePressEvent(self, e) -> None:  # noqa: N802
        if not self.has_image():
            return super().mousePressEvent(e)
        pan = e.button() == Qt.MouseButton.MiddleButton or (
            e.button() == Qt.MouseButton.LeftButton
            and (self._pan_mode or e.modifiers() & Qt.KeyboardModifier.ShiftModifier))
        if pan:
            self._drag = "pan"
            self._press = e.position()
            self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            e.accept()
        elif e.button() == Qt.MouseButton.LeftButton:
            self._drag = "band"
            self._press = e.position()
            self._press_scene = self.mapToScene(e.position().toPoint())
            self.band_item.setRect(QRectF(self._press_scene, self._press_scene))
            self.band_item.show()
            e.accept()
        else:
            super().mousePressEvent(e)

    def mouseMoveEvent(self, e) -> None:  # noqa: N802
        if self._drag == "pan":
            d = e.position() - self._press
            self._press = e.position()
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - int(d.x()))
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - int(d.y()))
            e.accept()
        elif self._drag == "band":
            cur = self.mapToScene(e.position().toPoint())
            self.band_item.setRect(QRectF(self._press_scene, cur).normalized())
            e.accept()
        else:
            super().mouseMoveEvent(e)

    def mouseReleaseEvent(self, e) -> None:  # noqa: N802
        drag, self._drag = self._drag, None
        if drag == "pan":
            self.set_pan_mode(self._pan_mode)
            e.accept()
        elif drag == "band":
            self.band_item.hide()
            moved = e.position() - self._press
            if abs(moved.x()) >= MIN_DRAG_PX and abs(moved.y()) >= MIN_DRAG_PX:
                cur = self.mapToScene(e.position().toPoint())
                region = self.clip_region(QRectF(self._press_scene, cur).normalized())
                if region is not None:
                    self.regionSelected.emit(region)
            e.accept()
        else:
            super().mouseReleaseEvent(e)

    def clip_region(self, rect: QRectF) -> tuple[int, int, int, int] | None:
        """``rect`` (image pixels) clipped to the image as integer (x, y, w, h); None if empty."""
        w, h = self._size
        x0 = int(max(0.0, np.floor(rect.left())))
        y0 = int(max(0.0, np.floor(rect.top())))
        x1 = int(min(float(w), np.ceil(rect.right())))
        y1 = int(min(float(h), np.ceil(rect.bottom())))
        if x1 - x0 < 2 or y1 - y0 < 2:
            return None
        return (x0, y0, x1 - x0, y1 - y0)
