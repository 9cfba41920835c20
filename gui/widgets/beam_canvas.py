"""The beam tree's canvas: how a node is drawn (marker by status, token label), the styles,
and a QGraphicsView where the wheel zooms, dragging pans and a click on a node is reported.

Statuses are told apart by colour (Okabe & Ito 2008, colour-blind safe) *and* by shape and
size: alive = blue circle, finished = green square, pruned = small grey dot.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsView, QWidget

from .token_text import display_text

#: how each status is drawn: (shape, fill colour, marker radius in pixels); colour-blind safe
#: (Okabe & Ito 2008) and told apart by shape and size as well
STATUS_STYLE = {
    "alive": ("circle", "#0072B2", 5.0),  # blue
    "finished": ("square", "#009E73", 6.0),  # bluish green
    "pruned": ("dot", "#A0A0A0", 2.5),  # grey, small
}
#: edge pens per status of the child: (colour, width)
EDGE_STYLE = {"alive": ("#5A6B7A", 1.2), "finished": ("#009E73", 1.4), "pruned": ("#C8C8C8", 0.8)}
BEST_COLOR = "#E69F00"  # orange: the best path (solid when the search ended, dashed while running)
SELECT_COLOR = "#CC79A7"  # reddish purple: the clicked node and its hypothesis
#: layout: pixels between step columns and between the nodes of a column
DX, DY = 92.0, 24.0
#: label width in pixels (longer tokens are elided); labels are drawn from this zoom level up
LABEL_W, LABEL_LOD = DX - 16.0, 0.45
Z_EDGE, Z_BEST, Z_SELECT, Z_NODE = 0.0, 1.0, 2.0, 3.0  # stacking: edges, paths, selection, nodes


class NodeItem(QGraphicsItem):
    """One node: its marker (shape/colour by status) and, when zoomed in enough, its token text."""

    def __init__(self, node_id: int, status: str, text: str, font: QFont) -> None:
        super().__init__()
        self.node_id = node_id
        self.text = text
        self._font = font
        self.status = ""
        self.best = False
        self.set_status(status)
        self.setZValue(Z_NODE)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)  # the view handles clicks

    def set_status(self, status: str, best: bool = False) -> None:
        self.prepareGeometryChange()
        self.status, self.best = status, best
        self.shape_name, color, self.radius = STATUS_STYLE.get(status, STATUS_STYLE["alive"])
        self.color = QColor(color)
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802
        r = max(self.radius, 6.0) + 2
        return QRectF(-r, -DY / 2, r + LABEL_W + 4, DY)

    def pen_color(self) -> QColor:
        """The marker's outline: orange on the best node."""
        return QColor(BEST_COLOR) if self.best else self.color.darker(140)

    def paint(self, p: QPainter, option, _widget=None) -> None:
        r = self.radius
        p.setPen(QPen(self.pen_color(), 2.5 if self.best else 1.0))
        p.setBrush(self.color)
        if self.shape_name == "square":
            p.drawRect(QRectF(-r, -r, 2 * r, 2 * r))
        else:
            p.drawEllipse(QPointF(0, 0), r, r)
        if option.levelOfDetailFromTransform(p.worldTransform()) < LABEL_LOD:
            return
        p.setFont(self._font)
        p.setPen(QColor("#8A8A8A") if self.status == "pruned" else QColor("#202020"))
        p.drawText(QRectF(r + 3, -DY / 2, LABEL_W, DY), Qt.AlignmentFlag.AlignVCenter, self.text)


class TreeCanvas(QGraphicsView):
    """The canvas: wheel zooms around the mouse, drag pans, a click on a node is reported."""

    nodeClicked = Signal(int)
    panned = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)

    def zoom(self, factor: float) -> None:
        """Scale by ``factor`` (the total scale stays within 0.02..4)."""
        s = self.transform().m11()
        factor = min(max(factor, 0.02 / s), 4.0 / s)
        self.scale(factor, factor)

    def wheelEvent(self, e) -> None:  # noqa: N802
        dy = e.angleDelta().y()
        if e.modifiers() & Qt.KeyboardModifier.ShiftModifier or dy == 0:
            super().wheelEvent(e)  # Shift+wheel / horizontal wheel scrolls
            return
        self.zoom(1.15 ** (dy / 120.0))
        e.accept()

    def mousePressEvent(self, e) -> None:  # noqa: N802
        if e.button() == Qt.MouseButton.LeftButton:
            for it in self.items(e.position().toPoint()):
                if isinstance(it, NodeItem):
                    self.nodeClicked.emit(it.node_id)
                    e.accept()
                    return
            self.panned.emit()
        super().mousePressEvent(e)


def polyline(points: list[QPointF]) -> QPainterPath:
    """A path through ``points`` (the first is where it starts)."""
    path = QPainterPath()
    path.moveTo(points[0])
    for p in points[1:]:
        path.lineTo(p)
    return path


def line_count(path: QPainterPath) -> int:
    """The straight segments of ``path`` (each edge of a batch is one)."""
    return sum(1 for i in range(path.elementCount()) if path.elementAt(i).isLineTo())


def node_label(text: str) -> str:
    shown = display_text(text.replace("▁", " "))
    return shown if len(shown) <= 12 else shown[:11] + "…"
