"""The live beam tree: every candidate a beam search considered, growing while it runs.

x = step, one column of nodes per step (the 2 x beams candidates of that step), each node
joined to the node it continues (the root, left, is the prompt). Alive nodes are blue
circles, finished ones green squares, pruned ones small grey dots with thin grey edges
(Okabe & Ito colours, and the shapes differ too, so the statuses read without colour).
The best path (root -> the node marked best when the search ends) is a thick orange line;
while the search runs, the path of the best running hypothesis is a dashed one.

Clicking a node shows its hypothesis (the text of the path to it), the top-k of the row it
came from at its step and that row's cross-attention (averaged over layers and heads);
a node on the output path also selects its step in the token stream (``stepSelected``).

The view takes a run's ``BeamEvent``s in batches (once per frame, ``add_events``): each
batch adds its nodes and their edges and moves the dashed path, and nothing already drawn
is laid out again, so a batch costs O(its nodes) however big the tree is. A long input
decoded in segments (sentences, 30 s windows, lines) has one tree per segment; the segment
box picks which one is shown. Wheel (or Ctrl+wheel) zooms around the mouse, dragging pans,
"Fit" shows the whole tree, "Follow" keeps the newest step in view while the search runs.

The nodes' drawing is in ``beam_canvas.py``, one segment's tree in ``beam_layout.py``, the
clicked node's panel in ``beam_details.py``.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QPoint, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QComboBox, QGraphicsScene, QHBoxLayout, QLabel, QSizePolicy, QSplitter, QToolButton, QVBoxLayout, QWidget

from core.analysis.beam_tree import BeamTree
from core.events import BeamEvent, BeamNode, SegmentEvent

from .beam_canvas import BEST_COLOR, DX, DY, EDGE_STYLE, LABEL_W, STATUS_STYLE, NodeItem, TreeCanvas
from .beam_details import NodeDetails
from .beam_layout import SegmentTree, mark_selection
from .elided_label import ElidedLabel
from .token_text import live_text

# re-exported: what tests and tabs reach through this module
__all__ = ["BeamTreeView", "NodeItem", "STATUS_STYLE", "EDGE_STYLE", "BEST_COLOR"]


class BeamTreeView(QWidget):
    """The beam tree of the current run and the clicked node's details (see the module docstring).

    The nodes, their paths and row reports live in a :class:`core.analysis.beam_tree.BeamTree`
    (:attr:`model`); this widget keeps only where each node is drawn.

    Signals:
        nodeSelected(object): a node was clicked or selected (its ``BeamNode``), or None.
        stepSelected(int): a node on the output path was clicked: its step (for the token stream).
    """

    nodeSelected = Signal(object)
    stepSelected = Signal(int)

    def __init__(self, run=None, axis=None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = BeamTree()
        self._layouts: dict[int, SegmentTree] = {}
        self._shown: int | None = None  # segment shown
        self._pinned = False  # the user picked the segment (do not follow the newest)
        self._pending: list[BeamEvent] = []  # events that arrived while hidden
        self._segment_info: dict[int, tuple[str, int]] = {}  # segment -> (label, source offset)
        self._open: set[int] = set()  # segments whose search has not ended
        self._selected: tuple[int, int] | None = None  # (segment, node id)
        #: () -> (column labels or None, unit, units per column) of the attention's input axis
        #: (``axis``: the input's ``ColumnAxis``, shared with the heatmap)
        self.column_axis: Callable[[], tuple[list[str] | None, str, float]] = (
            axis.column_axis if axis is not None else lambda: (None, "column", 1.0))
        #: () -> how many columns the input has (0: unknown); the strip leaves out the encoder
        #: positions beyond it (Whisper's 30 s window past the end of a short clip)
        self.column_count: Callable[[], int] = axis.column_count if axis is not None else lambda: 0
        self._font = QFont(self.font())
        self._font.setPointSizeF(max(7.0, self._font.pointSizeF() - 1))
        self._empty = QGraphicsScene(self)
        self._build()
        self._update_count()
        if run is not None:  # the run's beams, segments and selection, once per frame
            run.beamsAdded.connect(self.add_events)
            run.segmentAdded.connect(lambda _branch, ev: self.handle_segment(ev))
            run.selectionChanged.connect(self.select_step)
            run.cleared.connect(self.clear)
            run.branchFinished.connect(lambda b: self.finish() if b == run.current_branch() else None)

    def _build(self) -> None:
        self.view = TreeCanvas()
        self.view.setScene(self._empty)
        self.view.nodeClicked.connect(self._clicked)
        self.view.panned.connect(lambda: self.follow_button.setChecked(False))
        self.segment_box = QComboBox()
        self.segment_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.segment_box.activated.connect(self._segment_picked)
        self.segment_box.hide()
        self.fit_button = self._tool("Fit", "show the whole tree", self.fit)
        self.zoom_in_button = self._tool("+", "zoom in (or the mouse wheel)", lambda: self.view.zoom(1.25))
        self.zoom_out_button = self._tool("−", "zoom out (or the mouse wheel)", lambda: self.view.zoom(0.8))
        self.reset_button = self._tool("1:1", "labels at their normal size", self.reset_zoom)
        self.follow_button = self._tool("Follow", "keep the newest step in view while the search runs", None)
        self.follow_button.setCheckable(True)
        self.follow_button.setChecked(True)
        self.follow_button.toggled.connect(lambda on: on and self._follow())
        # the count is cut with "…" (its tooltip in full) when the pane is narrow, and it and the
        # legend use the nodes' smaller font: a filled tree ("150 nodes · 25 steps") no longer
        # widens the inspector, which moved the window's splitter for good (H5, session 13)
        self.count_label = ElidedLabel()
        self.count_label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.count_label.setFont(self._font)
        legend = QLabel(
            f"<span style='color:{STATUS_STYLE['alive'][1]}'>●</span>alive "
            f"<span style='color:{STATUS_STYLE['finished'][1]}'>■</span>finished "
            f"<span style='color:{STATUS_STYLE['pruned'][1]}'>•</span>pruned "
            f"<span style='color:{BEST_COLOR}'><b>━</b></span>best"
        )
        legend.setToolTip(
            "Each step's candidates (2 × beams, per group for diverse beam search): alive = became a "
            "running beam, finished = ended (EOS or the length limit) and entered the finished set, "
            "pruned = dropped. The orange path is the output: dashed while the search runs (the "
            "hypothesis it would return now), solid when it has ended."
        )
        legend.setFont(self._font)
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 0)
        bar.setSpacing(2)
        for wdg in (self.segment_box, self.fit_button, self.zoom_in_button, self.zoom_out_button,
                    self.reset_button, self.follow_button):
            bar.addWidget(wdg)
        bar.addSpacing(4)
        bar.addWidget(self.count_label)
        bar.addStretch(1)
        bar.addWidget(legend)
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.setSpacing(2)
        ll.addLayout(bar)
        ll.addWidget(self.view, 1)

        self.details = NodeDetails()
        self.hypothesis_label, self.info_label = self.details.hypothesis_label, self.details.info_label
        self.topk, self.attention = self.details.topk, self.details.attention
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.details)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setSizes([600, max(340, self.details.minimumWidth())])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.splitter)

    def _tool(self, text: str, tip: str, slot) -> QToolButton:
        b = QToolButton()
        b.setText(text)
        b.setToolTip(tip)
        if slot is not None:
            b.clicked.connect(slot)
        return b

    # ---------------------------------------------------------------- input
    def clear(self) -> None:
        """Forget every tree (a new run starts)."""
        self.view.setScene(self._empty)
        for lay in self._layouts.values():
            lay.scene.deleteLater()
        self.model = BeamTree()
        self._layouts.clear()
        self._open.clear()
        self._pending.clear()
        self._segment_info.clear()
        self._shown, self._pinned, self._selected = None, False, None
        self.segment_box.clear()
        self.segment_box.hide()
        self.follow_button.setChecked(True)
        self._show_details(None)
        self._update_count()

    def handle_segment(self, ev: SegmentEvent) -> None:
        """A segment starts: its label and where its columns start in the input."""
        self._segment_info[ev.segment] = (ev.label, ev.source_offset)
        lay = self._layouts.get(ev.segment)
        if lay is not None:
            lay.label, lay.source_offset = ev.label, ev.source_offset
            self.segment_box.setItemText(self._segment_index(ev.segment), self._segment_title(lay))

    def add_events(self, events: list[BeamEvent]) -> None:
        """Add the nodes of a batch of BeamEvents (one frame's worth). Events without nodes
        (an engine that does not record candidates) are ignored. While the view is hidden the
        events wait and are drawn when it is shown."""
        self._pending.extend(ev for ev in events if ev.nodes or ev.best is not None)
        if self.isVisible():
            self._drain()

    def add_event(self, ev: BeamEvent) -> None:
        self.add_events([ev])

    def finish(self, segments: list[int] | None = None) -> None:
        """The search of ``segments`` (default: all) ended: their best node is the output; its
        path is drawn solid and its nodes map to the output's steps (:meth:`select_step`)."""
        self._drain()
        for seg in sorted(self._open) if segments is None else segments:
            lay = self._layouts.get(seg)
            if lay is not None and not lay.final:
                self._finalise(lay)

    # ---------------------------------------------------------------- layout
    def _layout(self, segment: int) -> SegmentTree:
        lay = self._layouts.get(segment)
        if lay is None:
            scene = QGraphicsScene(self)
            label, offset = self._segment_info.get(segment, ("", 0))
            lay = self._layouts[segment] = SegmentTree(segment, scene, label, offset)
            self._open.add(segment)
            self.segment_box.addItem(self._segment_title(lay), segment)
            self.segment_box.setVisible(self.segment_box.count() > 1)
        return lay

    def _segment_title(self, lay: SegmentTree) -> str:
        return lay.label or f"segment {lay.segment + 1}"

    def _segment_index(self, segment: int) -> int:
        return self.segment_box.findData(segment)

    def _drain(self) -> None:
        """Draw the waiting events: O(their nodes) (plus the dashed path, O(its length))."""
        if not self._pending:
            return
        events, self._pending = self._pending, []
        touched: dict[int, SegmentTree] = {}
        for ev in events:
            for seg in [s for s in self._open if s < ev.segment]:  # segments run one after another
                self._finalise(self._layouts[seg])
            lay = self._layout(ev.segment)
            lay.add_event(ev, self.model, self._font)
            touched[ev.segment] = lay
        for lay in touched.values():
            lay.scene.setSceneRect(lay.extent.adjusted(-30, -DY, DX, DY))
            if not lay.final:
                lay.draw_best(self.model)
        newest = events[-1].segment
        if not self._pinned and self._shown != newest:
            self._show_segment(newest)
        self._update_count()
        self._follow()

    def _finalise(self, lay: SegmentTree) -> None:
        """The segment's search ended: the solid best path replaces the dashed one."""
        self._open.discard(lay.segment)
        lay.finalise(self.model)

    # ------------------------------------------------------------- viewing
    def _show_segment(self, segment: int) -> None:
        lay = self._layouts.get(segment)
        if lay is None:
            return
        self._shown = segment
        self.view.setScene(lay.scene)
        i = self._segment_index(segment)
        if i >= 0 and self.segment_box.currentIndex() != i:
            self.segment_box.setCurrentIndex(i)
        self._update_count()

    def _segment_picked(self, index: int) -> None:
        self._pinned = True
        self._show_segment(self.segment_box.itemData(index))

    def show_segment(self, segment: int) -> None:
        """Show ``segment``'s tree (and stop following the newest segment)."""
        self._drain()
        self._pinned = True
        self._show_segment(segment)

    def fit(self) -> None:
        """Zoom out so the whole tree fits the view (never in beyond 1:1)."""
        self._drain()
        self.follow_button.setChecked(False)
        self.view.fitInView(self.view.scene().sceneRect(), Qt.AspectRatioMode.KeepAspectRatio)
        if self.zoom_level() > 1.0:  # a small tree stays at its normal size
            self.view.resetTransform()

    def reset_zoom(self) -> None:
        self.view.resetTransform()
        self._follow()

    def zoom_level(self) -> float:
        return self.view.transform().m11()

    def _follow(self) -> None:
        lay = self._layouts.get(self._shown) if self._shown is not None else None
        if lay is None or lay.best is None or not self.follow_button.isChecked() or lay.best not in lay.pos:
            return
        self.view.ensureVisible(QRectF(lay.pos[lay.best], QSize(int(LABEL_W), 1)), 40, 40)

    def showEvent(self, e) -> None:  # noqa: N802
        super().showEvent(e)
        self._drain()

    def _update_count(self) -> None:
        lay = self._layouts.get(self._shown) if self._shown is not None else None
        if lay is None:
            self.count_label.setText("no beam search yet")
            return
        n = sum(1 for i in lay.items if i)
        steps = 0 if lay.first_step is None else lay.last_step - lay.first_step + 1
        self.count_label.setText(f"{n} nodes · {steps} steps")

    # ----------------------------------------------------------- selection
    def _clicked(self, node_id: int) -> None:
        if self._shown is None:
            return
        self.select_node(node_id, self._shown)
        lay = self._layouts[self._shown]
        node = self.model.nodes.get((self._shown, node_id))
        if node is not None and node.parent is not None and lay.on_output.get(node.step) == node_id:
            self.stepSelected.emit(node.step)

    def select_node(self, node_id: int | None, segment: int | None = None) -> None:
        """Select node ``node_id`` of ``segment`` (default: the one shown): outline it and its
        path, show its hypothesis, top-k and attention. None clears the selection."""
        self._drain()
        seg = self._shown if segment is None else segment
        lay = self._layouts.get(seg) if seg is not None else None
        if node_id is None or lay is None or node_id not in lay.items:
            self._selected = None
            for other in self._layouts.values():
                mark_selection(other, None)
            self._show_details(None)
            self.nodeSelected.emit(None)
            return
        if seg != self._shown:
            self._show_segment(seg)
        for other in self._layouts.values():
            if other is not lay:
                mark_selection(other, None)
        self._selected = (seg, node_id)
        mark_selection(lay, self.path(seg, node_id))
        self.view.ensureVisible(QRectF(lay.pos[node_id], QSize(int(LABEL_W), 1)), 30, 30)
        node = self.model.nodes[(seg, node_id)]
        self._show_details((lay, node))
        self.nodeSelected.emit(node)

    def select_step(self, step: int | None) -> None:
        """The token stream selected ``step``: select the node of the output path at that step
        (once the search ended); None, or a step not on it, clears the selection."""
        self._drain()
        for seg, lay in self._layouts.items():
            if step is not None and step in lay.on_output:
                self.select_node(lay.on_output[step], seg)
                return
        if self._selected is not None:
            self.select_node(None)

    def _show_details(self, sel: tuple[SegmentTree, BeamNode] | None) -> None:
        if sel is None:
            self.details.show_node(None)
            return
        lay, node = sel
        texts = [n.text for n in self.model.path(lay.segment, node.id)[1:]]
        self.details.show_node(node, texts, self.model.row_report(lay.segment, node), self.column_axis(),
                               lay.source_offset, best=node.id == lay.best and lay.final,
                               n_columns=self.column_count())

    # ------------------------------------------------------------- queries
    def path(self, segment: int, node_id: int) -> list[int]:
        """Node ids from the root (0) to ``node_id``."""
        return [n.id for n in self.model.path(segment, node_id)]

    def hypothesis(self, segment: int, node_id: int) -> str:
        """The text of the path root -> ``node_id``."""
        self._drain()
        return live_text([n.text for n in self.model.path(segment, node_id)[1:]]).strip()

    def hypothesis_shown(self) -> str:
        """The clicked node's hypothesis as the details panel shows it (plain text)."""
        return self.details.hypothesis_shown()

    def segments(self) -> list[int]:
        self._drain()
        return sorted(self._layouts)

    def shown_segment(self) -> int | None:
        return self._shown

    def nodes(self, segment: int | None = None) -> list[BeamNode]:
        """The nodes of ``segment`` (default: the shown one), root included, by id."""
        self._drain()
        seg = self._shown if segment is None else segment
        return [self.model.nodes[k] for k in sorted(k for k in self.model.nodes if k[0] == seg)]

    def node_item(self, node_id: int, segment: int | None = None) -> NodeItem:
        self._drain()
        return self._layouts[self._shown if segment is None else segment].items[node_id]

    def edge_count(self, segment: int | None = None) -> int:
        """Edges drawn (one per node whose parent is in the tree)."""
        self._drain()
        lay = self._layouts.get(self._shown if segment is None else segment)
        if lay is None:
            return 0
        return lay.edge_count()

    def best_node(self, segment: int | None = None) -> int | None:
        """The node the search returns (if it ended now, while it runs)."""
        self._drain()
        lay = self._layouts.get(self._shown if segment is None else segment)
        return None if lay is None else lay.best

    def is_final(self, segment: int | None = None) -> bool:
        """The search of ``segment`` ended (its best path is drawn solid)."""
        self._drain()
        lay = self._layouts.get(self._shown if segment is None else segment)
        return lay is not None and lay.final

    def highlighted_path(self, segment: int | None = None) -> list[int]:
        """The node ids the orange path goes through (root first), read back from its drawing."""
        self._drain()
        lay = self._layouts.get(self._shown if segment is None else segment)
        return [] if lay is None else lay.highlighted_path()

    def highlight_is_dashed(self, segment: int | None = None) -> bool:
        lay = self._layouts.get(self._shown if segment is None else segment)
        return lay is not None and lay.best_path is not None and lay.best_path.pen().style() == Qt.PenStyle.DashLine

    def selected_node(self) -> tuple[int, int] | None:
        """(segment, node id) of the selected node, or None."""
        return self._selected

    def output_steps(self, segment: int | None = None) -> dict[int, int]:
        """step -> node id of the final best path (empty while the search runs)."""
        lay = self._layouts.get(self._shown if segment is None else segment)
        return {} if lay is None else dict(lay.on_output)

    def viewport_pos(self, node_id: int, segment: int | None = None) -> QPoint:
        """Where node ``node_id`` is drawn, in the view's viewport coordinates (to click it)."""
        item = self.node_item(node_id, segment)
        self.view.ensureVisible(item.sceneBoundingRect(), 10, 10)
        return self.view.mapFromScene(item.scenePos())

    def sizeHint(self) -> QSize:
        return QSize(900, 300)
