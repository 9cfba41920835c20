"""One segment's beam tree drawn in its own scene (``gui.widgets.beam_tree``): each step's new
nodes placed in a new column, ordered by their parent's place then score (so edges rarely
cross), their edges (one path per status per step), the best path (dashed while the search
runs, solid when it ended) and the selected hypothesis' outline. A batch costs O(its nodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsLineItem, QGraphicsPathItem, QGraphicsScene

from core.analysis.beam_tree import BeamTree
from core.events import BeamEvent, BeamNode

from .beam_canvas import (
    BEST_COLOR, DX, DY, EDGE_STYLE, LABEL_W, SELECT_COLOR, Z_BEST, Z_EDGE, Z_SELECT, NodeItem, line_count, node_label,
    polyline,
)
from .beam_details import node_info


@dataclass
class SegmentTree:
    """Where one segment's tree is drawn: its scene, each node's place and item, the paths;
    it places each step's new nodes and draws their edges and the best path."""

    segment: int
    scene: QGraphicsScene
    label: str = ""
    source_offset: int = 0
    pos: dict[int, QPointF] = field(default_factory=dict)  # node id -> position
    slot: dict[int, int] = field(default_factory=dict)  # node id -> row within its column
    items: dict[int, NodeItem] = field(default_factory=dict)
    edges: dict[int, QGraphicsLineItem] = field(default_factory=dict)  # finished nodes' own edges
    first_step: int | None = None  # the step of column 1 (the root is column 0)
    last_step: int | None = None
    best: int | None = None  # the node the search returns if it ends now (``BeamEvent.best``)
    final: bool = False  # the segment's search ended: ``best`` is its output
    extent: QRectF = field(default_factory=QRectF)
    best_path: QGraphicsPathItem | None = None
    select_path: QGraphicsPathItem | None = None
    on_output: dict[int, int] = field(default_factory=dict)  # step -> node id on the final best path

    def add_event(self, ev: BeamEvent, model: BeamTree, font: QFont) -> None:
        """Place one step's new nodes in a new column, ordered by their parent's place, then
        score (so edges rarely cross), and draw their edges: one path per status (a finished
        node's own line, as it may be re-sent as pruned); re-style re-sent nodes."""
        seg = ev.segment
        new = [n for n in ev.nodes if (seg, n.id) not in model.nodes]
        model.add(ev)
        for node in ev.nodes:
            if node.id in self.items:  # sent again: its status changed
                self.restyle(node)
        if ev.best is not None:
            self.best = ev.best
        for node in new:
            if node.parent is None:  # the root: the prompt, column 0
                self.place(node, QPointF(0, 0), 0, font)
        by_step: dict[int, list] = {}
        for node in new:
            if node.parent is not None:
                by_step.setdefault(node.step, []).append(node)
        for step, nodes in sorted(by_step.items()):
            if self.first_step is None:
                self.first_step = step
            col = step - self.first_step + 1
            nodes.sort(key=lambda n: (self.slot.get(n.parent, 0), -finite(n.score)))
            if col == 1 and 0 in self.items:  # the root sits in the middle of the first column
                self.pos[0] = QPointF(0, (len(nodes) - 1) * DY / 2)
                self.items[0].setPos(self.pos[0])
            paths = {"alive": QPainterPath(), "pruned": QPainterPath()}
            x = col * DX
            for slot, node in enumerate(nodes):
                pos = QPointF(x, slot * DY)
                self.place(node, pos, slot, font)
                start = self.pos.get(node.parent)
                if start is None:
                    continue
                if node.status == "finished":
                    self.edges[node.id] = self.edge_item(start, pos, node.status)
                else:
                    path = paths.get(node.status, paths["alive"])
                    path.moveTo(start)
                    path.lineTo(pos)
            for status, path in paths.items():
                if not path.isEmpty():
                    color, width = EDGE_STYLE[status]
                    self.scene.addPath(path, QPen(QColor(color), width)).setZValue(Z_EDGE)
            self.last_step = step if self.last_step is None else max(self.last_step, step)

    def place(self, node: BeamNode, pos: QPointF, slot: int, font: QFont) -> None:
        root = node.parent is None
        item = NodeItem(node.id, node.status, "prompt" if root else node_label(node.text), font)
        if root:
            item.color = QColor("#404040")
        item.setPos(pos)
        item.setToolTip("the prompt" if root else tooltip(node))
        self.scene.addItem(item)
        self.items[node.id], self.pos[node.id], self.slot[node.id] = item, pos, slot
        self.extent = self.extent.united(QRectF(pos.x(), pos.y(), LABEL_W + 12, 1))

    def edge_item(self, a: QPointF, b: QPointF, status: str) -> QGraphicsLineItem:
        color, width = EDGE_STYLE[status]
        line = self.scene.addLine(a.x(), a.y(), b.x(), b.y(), QPen(QColor(color), width))
        line.setZValue(Z_EDGE)
        return line

    def restyle(self, node: BeamNode) -> None:
        item = self.items[node.id]
        item.set_status(node.status, item.best)
        item.setToolTip(tooltip(node))
        edge = self.edges.get(node.id)
        if edge is not None:
            color, width = EDGE_STYLE.get(node.status, EDGE_STYLE["alive"])
            edge.setPen(QPen(QColor(color), width))

    def finalise(self, model: BeamTree) -> None:
        """The segment's search ended: the solid best path replaces the dashed one."""
        self.final = True
        if self.best is None or self.best not in self.items:
            return
        item = self.items[self.best]
        item.set_status(item.status, True)
        self.on_output = {n.step: n.id for n in model.path(self.segment, self.best)[1:] if not n.eos}
        self.draw_best(model)

    def draw_best(self, model: BeamTree) -> None:
        """(Re)draw the path root -> best: dashed while the search runs, solid when it ended.
        O(its length)."""
        if self.best is None or self.best not in self.items:
            return
        path = polyline([self.pos[i] for i in [n.id for n in model.path(self.segment, self.best)]])
        pen = QPen(QColor(BEST_COLOR), 4.0 if self.final else 2.5)
        if not self.final:
            pen.setStyle(Qt.PenStyle.DashLine)
        if self.best_path is None:
            self.best_path = self.scene.addPath(path, pen)
            self.best_path.setZValue(Z_BEST)
        else:
            self.best_path.setPath(path)
            self.best_path.setPen(pen)

    def edge_count(self) -> int:
        """Edges drawn (one per node whose parent is in the tree)."""
        batched = sum(line_count(it.path()) for it in self.scene.items()
                      if isinstance(it, QGraphicsPathItem) and it.zValue() == Z_EDGE)
        return batched + len(self.edges)

    def highlighted_path(self) -> list[int]:
        """The node ids the orange path goes through (root first), read back from its drawing."""
        if self.best_path is None:
            return []
        path = self.best_path.path()
        at = {(round(p.x(), 3), round(p.y(), 3)): i for i, p in self.pos.items()}
        return [at[(round(path.elementAt(k).x, 3), round(path.elementAt(k).y, 3))] for k in range(path.elementCount())]


def mark_selection(lay: SegmentTree, ids: list[int] | None) -> None:
    """Outline the selected hypothesis (``ids`` from the root) and ring its node, or remove it."""
    item = lay.select_path
    if ids is None:
        if item is not None:
            item.hide()
        return
    path = polyline([lay.pos[i] for i in ids])
    path.addEllipse(lay.pos[ids[-1]], 10, 10)
    if item is None:
        item = lay.select_path = lay.scene.addPath(path, QPen(QColor(SELECT_COLOR), 2.0))
        item.setZValue(Z_SELECT)
    else:
        item.setPath(path)
        item.show()


def finite(x: float) -> float:
    return x if math.isfinite(x) else -1e30


def tooltip(node: BeamNode) -> str:
    return f"{node.text!r}\n" + node_info(node).replace(" · ", "\n")
