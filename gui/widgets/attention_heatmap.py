"""Cross-attention heatmap: rows = emitted tokens, columns = source positions.

One long-lived pyqtgraph ``ImageItem`` updated with ``setImage`` (pyqtgraph
``examples/MatrixDisplayExample.py`` / ``ImageItem.py``), viridis with fixed levels
(0, 1). Each row is the chosen layer's/head's attention (or the average over layers
and/or heads) normalised by its own maximum, so every token's focus is visible
whatever its absolute spread; the label above the plot says so. The image grows one
row per token while decoding; the selected step's row is outlined.

The column axis is set per tab (``set_columns``): speech uses seconds (one Whisper
encoder frame = 0.02 s) with an aligned waveform strip above, OCR uses pixels,
translation uses source tokens (string ticks).

The heatmap keeps the events, not copies of their attention: a row is computed from
``ev.cross_attention`` when it is drawn, so the attention of windows out of view that the
run moved to disk (``gui.run_state``, ``StepEvent.spill_attention``) is read back only for
the window shown.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from core.events import SegmentEvent, StepEvent, load_attention

from .column_axis import ColumnAxis
from .elided_label import ElidedLabel
from .earlier_run import note_label, show_note
from .follow import follow_run
from .heatmap_plot import HeatmapPlot, RowImage, as_3d, no_si_prefix, reduce_attention, shape_3d
from .layer_head_picker import AVERAGE, LayerHeadPicker
from .token_text import display_text

__all__ = ["AVERAGE", "MAX_CELLS", "MAX_COLUMNS", "AttentionHeatmap", "no_si_prefix", "reduce_attention"]

#: AlignAtt's "too close to the end" zone and the token that waited (the Live view's colour)
ZONE_COLOR = "#c77700"

#: beyond this many input columns (30 s windows of 1500 frames, source tokens), or rows x
#: columns cells, the heatmap shows one segment at a time (see AttentionHeatmap.append_steps)
MAX_COLUMNS = 3000
MAX_CELLS = 3_000_000


class AttentionHeatmap(QWidget):
    """Tokens × source cross-attention with layer/head pickers and an optional waveform strip.

    Signals:
        stepSelected(int): the user clicked a row.
        viewChanged(): the user picked another layer or head (the rows were recomputed).
        rowHovered(object): the step of the row under the mouse, or None off the rows.
    """

    stepSelected = Signal(int)
    viewChanged = Signal()
    rowHovered = Signal(object)

    def __init__(self, run=None, axis: ColumnAxis | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: the input's column axis (labels, unit, scale, column count, the plots on it), shared
        #: with other views (the tab makes it; a heatmap alone makes its own)
        self.axis = axis if axis is not None else ColumnAxis()
        self._steps: list[int] = []
        #: the columns set_columns gave the coming input (its n_columns, with no rows shown): a
        #: clear(columns=True) before that input's first row keeps them (0: none)
        self._input_columns = 0
        self._row_of: dict[int, int] = {}
        self._texts: list[str] = []
        self._atts: list[tuple[int, StepEvent | None]] = []  # (column offset, the event if it has attention)
        self._index: dict[int, int] = {}  # step -> index into _steps/_texts/_atts/_segs
        self._segs: list[int] = []  # segment of each row
        self._rows_of_seg: dict[int, list[int]] = {}
        self._seg_span: dict[int, tuple[int, int]] = {}  # segment -> (first column, columns)
        self._view_seg: int | None = None  # windowed view: the segment drawn
        self._shown: list[int] = []  # indices (into _steps) of the rows drawn, in order
        self._col0 = 0  # input column of the image's first column
        self._img = RowImage()
        self._selected: int | None = None
        self._zone: tuple[int, int, int | None] | None = None  # mark_zone's (first, end, row)
        self._zone_items: list = []

        self.picker = LayerHeadPicker()
        self.layer_combo, self.head_combo = self.picker.layer_combo, self.picker.head_combo
        for c in (self.layer_combo, self.head_combo):
            c.currentIndexChanged.connect(self._recompute)
            c.currentIndexChanged.connect(lambda _i: self.viewChanged.emit())
        # cut with "…" when narrow (the note alone is ~340 px: the Live tab's decision heatmap was
        # 685 px wide in a 489 px column at 1280x800, H5 session 13)
        self.info = ElidedLabel("each row normalised to its max · viridis 0..1")
        self.info.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.info.setToolTip(
            "Row i is the cross-attention of token i over the input; each row is divided by its own "
            "maximum so the focus of every token is visible. Colours use fixed levels 0..1."
        )
        top = QHBoxLayout()
        top.addWidget(QLabel("<b>Cross-attention</b>"))
        top.addWidget(QLabel("layer"))
        top.addWidget(self.layer_combo)
        top.addWidget(QLabel("head"))
        top.addWidget(self.head_combo)
        #: "last offline run: …" while the rows are an earlier run's (set_earlier_note)
        self.earlier_note = note_label()
        top.addWidget(self.earlier_note, 1)
        top.addStretch(1)
        top.addWidget(self.info)

        #: the plots and their items (gui/widgets/heatmap_plot.py)
        self.canvas = HeatmapPlot(self.axis)
        self.view, self.plot, self.image = self.canvas.view, self.canvas.plot, self.canvas.image
        self.wave_plot, self.wave_curve = self.canvas.wave_plot, self.canvas.wave_curve
        self.highlight, self.separators = self.canvas.highlight, self.canvas.separators
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.plot.scene().sigMouseMoved.connect(self._mouse_moved)
        self.set_columns("source position")

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.view, 1)
        if run is not None:  # the run's steps, segments and selection, once per frame
            follow_run(run, self)

    # ---------------------------------------------------------------- API
    def set_columns(self, unit: str, scale: float = 1.0, labels: list[str] | None = None, n_columns: int = 0) -> None:
        """Configure the column axis.

        Args:
            unit: axis label, e.g. "time (s)", "x (pixels)", "source token".
            scale: source units per column (0.02 for Whisper frames in seconds).
            labels: string ticks, one per column (translation), or None for numbers.
            n_columns: initial number of columns (grows if events need more). With no rows
                shown, the columns are set to exactly this (a new, shorter input gets an axis
                that fits it, not the longest earlier input's).
        """
        if not self._steps and n_columns and n_columns != self.axis.count:
            self.axis.count = 0
            self._img = RowImage()
        self._input_columns = n_columns if not self._steps else 0
        self.axis.unit, self.axis.scale, self.axis.labels = unit, float(scale), labels
        self.plot.setLabel("bottom", unit)
        ax = self.plot.getAxis("bottom")
        no_si_prefix(ax)
        if labels is not None:
            n_columns = max(n_columns, len(labels))
        self._label_columns()
        self._resize_columns(n_columns)
        self._refresh_image()

    def column_axis(self) -> tuple[list[str] | None, str, float]:
        """(column labels or None, axis unit, source units per column), as set by :meth:`set_columns`."""
        return self.axis.labels, self.axis.unit, self.axis.scale

    def reset_columns(
        self, unit: str, scale: float = 1.0, labels: list[str] | None = None, n_columns: int = 0
    ) -> None:
        """Remove all rows *and* columns, then configure the column axis as :meth:`set_columns` does.

        :meth:`set_columns` and incoming events only ever add columns; a tab whose input
        changes size between runs (translation: the source tokens, OCR: the widest line)
        calls this before each run so the columns fit exactly. Keeps the layer/head choice.

        Args:
            unit: axis label, e.g. "source token".
            scale: source units per column.
            labels: string ticks, one per column, or None for numbers.
            n_columns: initial number of columns (at least ``len(labels)``).
        """
        self.clear()
        self.axis.count = 0
        self._img = RowImage()
        self.set_columns(unit, scale, labels=labels, n_columns=n_columns)

    def set_waveform(self, audio: np.ndarray | None, sample_rate: int = 16000) -> None:
        """Show ``audio`` (float32 (n_samples,)) above the heatmap on a shared seconds axis (None hides it)."""
        self.canvas.set_waveform(audio, sample_rate)

    def set_earlier_note(self, note: str | None) -> None:
        """Say in the header that the rows are an earlier run's and dim the map; None: not."""
        show_note(self.earlier_note, note, self.view)

    def clear(self, columns: bool = False) -> None:
        """Remove all rows (keeps the column axis and the layer/head choice).

        Args:
            columns: also drop the columns beyond the string labels (if any), so the next
                run's events size them to its own input (a new run on a shorter input).
        """
        if columns:
            # a new input's columns (set_columns before its first row) stay: its run's clear then
            # shows the new input's axis, not the old input's; after rows the run's events size them
            keep = self._input_columns if not self._steps else 0
            self._input_columns = keep
            self.axis.count = max(len(self.axis.labels or []), keep)
            self._seg_span.clear()
        self._steps.clear()
        self._index.clear()
        self._row_of.clear()
        self._texts.clear()
        self._atts.clear()
        self._segs.clear()
        self._rows_of_seg.clear()
        self._view_seg = None
        self._shown = []
        self._col0 = 0
        self._img = RowImage(self.axis.count)
        self._selected = None
        self.highlight.hide()
        self.mark_zone(None)
        self._refresh_image()
        self._update_row_ticks()

    def handle(self, ev) -> None:
        """Take a StepEvent (adds a row) or SegmentEvent (extends the columns); ignore others."""
        if isinstance(ev, StepEvent):
            self.append_step(ev)
        elif isinstance(ev, SegmentEvent) and ev.source_len:
            self._seg_span[ev.segment] = (ev.source_offset, ev.source_len)
            self._resize_columns(ev.source_offset + ev.source_len)

    def append_step(self, ev: StepEvent) -> None:
        """Add one row for ``ev`` (its cross-attention placed at ``ev.source_offset``)."""
        self.append_steps([ev])

    def append_steps(self, events: list[StepEvent]) -> None:
        """Add one row per event, then redraw once (a frame's batch).

        While the whole input fits (at most ``MAX_COLUMNS`` columns and ``MAX_CELLS``
        cells), every row is shown. Beyond that (a 10-minute recording, a long text) the
        view shows one segment (30 s window, sentence, line) at a time: the newest one while
        decoding, or the selected step's, so the image stays small and each frame cheap.
        """
        if not events:
            return
        shown_span = self._shown_columns()
        for ev in events:
            shape = shape_3d(ev)  # a spilled row is not read here: only when its segment is drawn
            if shape is not None:
                self.picker.ensure(shape[0], shape[1])
                self._resize_columns(ev.source_offset + shape[2])
                lo, n = self._seg_span.get(ev.segment, (ev.source_offset, 0))
                self._seg_span[ev.segment] = (lo, max(n, ev.source_offset + shape[2] - lo))
            i = len(self._steps)
            self._index[ev.step] = i
            self._steps.append(ev.step)
            self._texts.append(display_text(ev.text))
            self._atts.append((ev.source_offset, ev if shape is not None else None))  # the row is read when drawn
            self._segs.append(ev.segment)
            self._rows_of_seg.setdefault(ev.segment, []).append(i)
        if self.windowed():
            focus = self._segment_of(self._selected)
            if focus is None:
                focus = events[-1].segment
            if focus != self._view_seg or self._shown_columns() != shown_span:
                self._show_segment(focus)  # draws the batch's rows of that segment too (at its full span)
                return
        elif self._img.image.shape[1] != self.axis.count:  # full view: the columns grew
            self._img.pad_columns(self.axis.count)
        first_new = len(self._steps) - len(events)
        for i in range(first_new, len(self._steps)):
            if self._view_seg is not None and self._segs[i] != self._view_seg:
                continue
            self._row_of[self._steps[i]] = len(self._shown)
            self._shown.append(i)
            self._img.append(self._row(i))
        self._refresh_image()
        self._update_row_ticks()

    def set_column_separators(self, columns: list[int]) -> None:
        """Draw a thin white line at each input column index in ``columns`` (e.g. where each
        sentence's source tokens start), the whole height of the plot; [] removes them."""
        self.canvas.set_column_separators(columns, self.axis.scale)

    def column_separators(self) -> list[int]:
        """The column indices where separator lines are drawn."""
        return list(self.canvas.col_seps)

    def set_row_separators(self, rows: list[int]) -> None:
        """Draw a white line across the plot above each image row in ``rows`` (where a
        segment's rows start, e.g. the next OCR line); [] removes them."""
        self.canvas.set_row_separators(rows)

    def add_row_separator(self, row: int) -> None:
        """Draw one more line above image row ``row`` (see :meth:`set_row_separators`)."""
        self.canvas.add_row_separator(row)

    def row_separators(self) -> list[int]:
        """The image rows above which a separator line is drawn."""
        return self.canvas.row_separators()

    def set_view(self, layer: int | None, head: int | None, note: str | None = None, tip: str | None = None,
                 shape: tuple[int, int] | None = None) -> None:
        """Show ``layer`` and ``head`` (None: the average over them), as if the user picked them.

        Args:
            layer, head: indices into the model's decoder layers and heads, or None.
            note: replaces the line above the plot that says what is shown (None keeps it).
            tip: replaces that line's tooltip (None keeps it).
            shape: (layers, heads) of the model, so the pickers list them before the first
                row arrives (a tab setting a default view for a new model).
        """
        if shape is not None:
            self.picker.ensure(shape[0], shape[1])
        self.picker.pick(layer, head)
        if note is not None:
            keep = self.info.toolTip()  # setText sets the tooltip of an elided label
            self.info.setText(note)
            self.info.setToolTip(keep if tip is None else tip)
        elif tip is not None:
            self.info.setToolTip(tip)

    def mark_columns(self, row: int | None, columns: list[int]) -> None:
        """Mark the input ``columns`` of image row ``row``: a translucent orange band down
        each column and an orange box on the row's cell; None (or no columns) removes the marks."""
        self.canvas.mark_columns(row, columns, self.axis.scale, self.row_count())

    def mark_zone(self, first: int | None, end: int | None = None, row: int | None = None, label: str = "") -> None:
        """Mark input columns [``first``, ``end``) the whole height of the plot (a translucent
        orange band: AlignAtt's "too close to the end" frames) and outline image row ``row``
        across the columns drawn (the token that waited), with ``label`` at its right; None
        (``first``) removes the marks. :meth:`clear` removes them too.

        Raises:
            ValueError: ``end`` <= ``first``.
        """
        for item in self._zone_items:
            self.plot.removeItem(item)
        self._zone_items.clear()
        self._zone = None
        if first is None:
            return
        if end is None or end <= first:
            raise ValueError(f"a zone needs end > first columns, got [{first}, {end})")
        scale, height = self.axis.scale, max(self.row_count(), 1)
        band = QGraphicsRectItem(QRectF(first * scale, 0, (end - first) * scale, height))
        band.setPen(QPen(Qt.PenStyle.NoPen))
        color = QColor(ZONE_COLOR)
        color.setAlpha(80)
        band.setBrush(QBrush(color))
        band.setZValue(5)
        edge = pg.InfiniteLine(first * scale, angle=90, movable=False, pen=pg.mkPen(ZONE_COLOR, width=1.5))
        edge.setZValue(6)
        items = [band, edge]
        if row is not None:
            c0, c1 = self._shown_columns()
            box = QGraphicsRectItem(QRectF(c0 * scale, row, max(c1 - c0, 1) * scale, 1))
            pen = QPen(QColor(ZONE_COLOR), 2.5)
            pen.setCosmetic(True)
            box.setPen(pen)
            box.setZValue(12)
            items.append(box)
            if label:
                text = pg.TextItem(label, color=ZONE_COLOR, anchor=(1.0, 0.5))
                text.setPos(first * scale, row + 0.5)
                text.setZValue(13)
                items.append(text)
        for item in items:
            self.plot.addItem(item)
        self._zone_items = items
        self._zone = (int(first), int(end), row)

    def zone(self) -> tuple[int, int, int | None] | None:
        """The marked zone as (first column, end column, row or None), or None (:meth:`mark_zone`)."""
        return self._zone

    def add_below(self, widget: QWidget) -> None:
        """Put ``widget`` under the plot (a tab's own line about what the heatmap shows)."""
        self.layout().addWidget(widget)

    def windowed(self) -> bool:
        """Whether the input is too large to draw whole, so one segment is shown at a time."""
        return self.axis.count > MAX_COLUMNS or len(self._steps) * max(self.axis.count, 1) > MAX_CELLS

    def shown_segment(self) -> int | None:
        """The segment shown when :meth:`windowed` (None: every row is shown)."""
        return self._view_seg

    def column_offset(self) -> int:
        """The input column that the image's first column shows (0 unless windowed)."""
        return self._col0

    def select_step(self, step: int | None) -> None:
        """Outline the row of ``step`` (None: no outline); when windowed, show its segment."""
        self._selected = step
        if step is not None and self.windowed():
            seg = self._segment_of(step)
            if seg is not None and seg != self._view_seg:
                self._show_segment(seg)
        r = self._row_of.get(step) if step is not None else None
        self.canvas.outline_row(r, self._col0 * self.axis.scale, max(self._img.image.shape[1], 1) * self.axis.scale)

    def row_of(self, step: int | None) -> int | None:
        """The image row of ``step`` (None if that step has no row shown)."""
        return None if step is None else self._row_of.get(step)

    def step_at_row(self, row: int) -> int | None:
        """The step shown in image row ``row`` (None outside the rows)."""
        return self._steps[self._shown[row]] if 0 <= row < len(self._shown) else None

    def matrix(self) -> np.ndarray:
        """The displayed image, float32 (rows shown, columns shown), values 0..1; column j
        is input column ``column_offset() + j``."""
        return self._img.image.copy()

    def row_count(self) -> int:
        """Rows shown (one per token)."""
        return self._img.image.shape[0]

    def column_count(self) -> int:
        """Columns of the whole input (source positions)."""
        return self.axis.count

    def selection(self) -> tuple[int | None, int | None]:
        """(layer, head) shown; None means averaged."""
        return self.picker.selection()

    # ------------------------------------------------------------- internals
    def _segment_of(self, step: int | None) -> int | None:
        i = None if step is None else self._index.get(step)
        return None if i is None else self._segs[i]

    def _shown_columns(self) -> tuple[int, int]:
        """[first, end) of the input columns drawn."""
        if self._view_seg is None:
            return 0, self.axis.count
        lo, n = self._seg_span.get(self._view_seg, (0, self.axis.count))
        return lo, min(self.axis.count, lo + max(n, 1))

    def _show_segment(self, seg: int) -> None:
        """Draw only segment ``seg``'s rows over its own columns (windowed view)."""
        self._view_seg = seg
        self._col0, end = self._shown_columns()
        self._shown = list(self._rows_of_seg.get(seg, []))
        self._row_of = {self._steps[i]: r for r, i in enumerate(self._shown)}
        width = end - self._col0
        self._img = RowImage(width)
        if self._shown:
            self._img.set(self._rows(self._shown))
        self._refresh_image()
        self._update_row_ticks()

    def _rows(self, indices: list[int]) -> np.ndarray:
        """float32 (len(indices), columns shown): the rows of ``indices``, their attention
        read together (a spilled window: one read from disk)."""
        srcs = [self._atts[i][1] for i in indices]
        have = [k for k, src in enumerate(srcs) if src is not None]
        atts = dict(zip(have, load_attention([srcs[k] for k in have])))
        return np.stack([self._row(i, atts.get(k)) for k, i in enumerate(indices)])

    def _row(self, i: int, att: np.ndarray | None = None) -> np.ndarray:
        offset, src = self._atts[i]
        if att is None and src is not None:
            att = src.cross_attention  # spilled: read back from disk
        att = as_3d(att)
        c0, c1 = self._shown_columns()
        row = np.zeros(c1 - c0, np.float32)
        if att is not None:
            layer, head = self.selection()
            vals = reduce_attention(att, layer, head)
            a = offset - c0
            lo, hi = max(a, 0), min(a + len(vals), len(row))
            if hi > lo:
                row[lo:hi] = vals[lo - a : hi - a]
        return row

    def _resize_columns(self, n: int) -> None:
        if n <= self.axis.count:
            return
        self.axis.count = n
        if self._view_seg is not None or self.windowed():
            return  # a windowed view draws its segment's own columns (append_steps switches)
        self._img.pad_columns(n)

    def _recompute(self) -> None:
        if self._shown:
            self._img.set(self._rows(self._shown))
        self._refresh_image()

    def _refresh_image(self) -> None:
        sel = self._row_of.get(self._selected) if self._selected is not None else None
        self.canvas.draw(self._img.image, self._col0, self.axis.scale, self.axis.count, sel)

    def _update_row_ticks(self) -> None:
        self.canvas.set_row_ticks(len(self._shown), lambda r: self._texts[self._shown[r]])

    def _label_columns(self) -> None:
        """String ticks on the column axis (when the columns have labels)."""
        self.canvas.label_columns(self.axis.labels, self.axis.scale, self.fontMetrics())

    def resizeEvent(self, e) -> None:  # noqa: N802
        super().resizeEvent(e)
        self._update_row_ticks()
        if self.axis.labels:
            QTimer.singleShot(0, self._label_columns)  # after the plot has taken its new width

    def _mouse_moved(self, scene_pos) -> None:
        vb = self.plot.vb
        if not vb.sceneBoundingRect().contains(scene_pos):
            self.rowHovered.emit(None)
            return
        self.rowHovered.emit(self.step_at_row(int(np.floor(vb.mapSceneToView(scene_pos).y()))))

    def _clicked(self, mev) -> None:
        if not self._shown:
            return
        pos = self.plot.vb.mapSceneToView(mev.scenePos())
        if not self.plot.vb.sceneBoundingRect().contains(mev.scenePos()):
            return
        step = self.step_at_row(int(np.floor(pos.y())))
        if step is not None:
            self.select_step(step)
            self.stepSelected.emit(step)
