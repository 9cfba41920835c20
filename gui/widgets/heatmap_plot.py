"""The attention heatmap's drawing (``gui.widgets.attention_heatmap``): the pyqtgraph plots
and items, and the rows' arithmetic without Qt.

:func:`reduce_attention` turns one token's (layers, heads, source_len) cross-attention into
the row drawn (a layer/head or their mean, divided by its maximum). :class:`HeatmapPlot`
holds the long-lived items (pyqtgraph ``examples/MatrixDisplayExample.py``): the optional
waveform strip above (x linked), the plot with its one ``ImageItem`` (viridis, levels 0..1),
the selected row's outline, the separators between sentences' columns or lines' rows and the
marked columns; both plots are registered on the input's ``ColumnAxis`` (the marks on the
input's seconds draw there too).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetrics, QPen
from PySide6.QtWidgets import QGraphicsRectItem

from core.events import StepEvent

from .colors import LUT
from .column_axis import ColumnAxis
from .waveform import envelope


def reduce_attention(att: np.ndarray, layer: int | None, head: int | None) -> np.ndarray:
    """One attention row from a (layers, heads, source_len) array.

    Args:
        att: float32 (layers, heads, source_len) cross-attention of one token.
        layer: layer index, or None for the mean over layers.
        head: head index, or None for the mean over heads.

    Returns:
        float32 (source_len,), normalised so its maximum is 1 (all-zero rows stay 0).
    """
    a = np.asarray(att, dtype=np.float32)
    a = a.mean(axis=0) if layer is None else a[min(layer, a.shape[0] - 1)]
    row = a.mean(axis=0) if head is None else a[min(head, a.shape[0] - 1)]
    m = float(np.max(row)) if row.size else 0.0
    return (row / m).astype(np.float32) if m > 0 else np.zeros_like(row, dtype=np.float32)


def as_3d(att) -> np.ndarray | None:
    """float32 (layers, heads, n) view of an attention row given as (n,), (heads, n) or
    (layers, heads, n); None stays None."""
    if att is None:
        return None
    a = np.asarray(att, dtype=np.float32)
    if a.ndim == 1:
        return a[None, None, :]
    if a.ndim == 2:
        return a[None, :, :]
    return a


def shape_3d(ev) -> tuple[int, int, int] | None:
    """(layers, heads, n) of ``ev``'s attention ((n,) counts as (1, 1, n), (heads, n) as
    (1, heads, n)); None without attention. A spilled attention is not loaded."""
    if isinstance(ev, StepEvent):
        shape = ev.attention_shape
    else:
        shape = None if ev.cross_attention is None else np.shape(ev.cross_attention)
    if shape is None:
        return None
    l, h, n = (1,) * (3 - len(shape)) + tuple(shape[-3:])
    return int(l), int(h), int(n)


def no_si_prefix(axis: pg.AxisItem) -> None:
    """Show plain numbers on ``axis`` (pyqtgraph would rescale 0..1 to "x0.001" units)."""
    axis.setSIPrefixEnableRanges(((0.0, 0.0),))
    axis.updateAutoSIPrefix()


class HeatmapPlot:
    """The plots and items of one heatmap (see the module docstring). ``view`` is the widget
    to lay out; x is in the axis' units (column index x scale), y in image rows."""

    def __init__(self, axis: ColumnAxis) -> None:
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground(None)
        self.wave_plot = self.view.addPlot(row=0, col=0, enableMenu=False)
        self.wave_plot.setMaximumHeight(70)
        self.wave_plot.hideAxis("bottom")
        self.wave_plot.getAxis("left").setWidth(90)
        no_si_prefix(self.wave_plot.getAxis("left"))
        self.wave_plot.setMouseEnabled(x=True, y=False)
        self.wave_plot.hideButtons()
        self.wave_curve = self.wave_plot.plot(pen=pg.mkPen("#4a6fa5"))
        self.wave_curve.setDownsampling(auto=True, method="peak")
        self.wave_curve.setClipToView(True)
        self.wave_plot.hide()

        self.plot = self.view.addPlot(row=1, col=0, enableMenu=False)
        self.plot.invertY(True)
        self.plot.hideButtons()
        self.plot.getAxis("left").setWidth(90)
        self.plot.setMouseEnabled(x=True, y=True)
        self.wave_plot.setXLink(self.plot)
        # the marks on the input's axis (timestamps, long-form windows) draw here too
        axis.add_plot(self.wave_plot, "input")
        axis.add_plot(self.plot, "attention")
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(LUT)
        self.image.setLevels((0.0, 1.0))
        self.plot.addItem(self.image)
        self.highlight = QGraphicsRectItem()
        pen = QPen(QColor("#ff3b30"), 2)
        pen.setCosmetic(True)
        self.highlight.setPen(pen)
        self.highlight.setZValue(10)
        self.highlight.hide()
        self.plot.addItem(self.highlight)
        # sentence / line boundaries: one item for all of them (thousands of InfiniteLines
        # would each compute a bounding rect in Python on every paint)
        self.separators = pg.PlotCurveItem(pen=pg.mkPen("w", width=1.5), connect="pairs")
        self.separators.setZValue(6)
        self.plot.addItem(self.separators)
        self.col_seps: list[int] = []
        self.row_lines: list[pg.InfiniteLine] = []  # lines between segments' rows
        self.marks: list[QGraphicsRectItem] = []  # mark_columns' bands and box
        self._drawn = False  # rows have been drawn (their columns are on the x axis)

    def set_waveform(self, audio: np.ndarray | None, sample_rate: int = 16000) -> None:
        """Show ``audio`` (float32 (n_samples,)) in the strip above (None hides it)."""
        if audio is None or len(audio) == 0:
            self.wave_curve.setData([], [])
            self.wave_plot.hide()
            return
        t, y = envelope(audio, sample_rate)  # min/max per bucket: a 10-minute clip stays cheap to draw
        self.wave_curve.setData(t, y)
        peak = float(np.max(np.abs(y))) or 1.0  # the envelope holds every sample's extremes
        self.wave_plot.setYRange(-peak, peak, padding=0.05)
        self.wave_plot.setLabel("left", "audio")
        no_si_prefix(self.wave_plot.getAxis("left"))
        self.wave_plot.show()

    def draw(self, image: np.ndarray, col0: int, scale: float, n_cols: int, selected_row: int | None) -> None:
        """Show ``image`` (float32 rows x columns, 0..1) from input column ``col0`` on; an
        empty one shows ``n_cols`` columns (at least 50) and 8 rows of nothing. An empty one
        with no columns known (``n_cols`` 0: a new run's events will size them) after rows
        were drawn keeps the columns shown: a re-decode of the same input (a slider move)
        comes back to them at its first frame, and a zoom out and back in between drew both
        plots' axes and the waveform strip twice in the frames that must be quick."""
        n_rows, width_cols = image.shape if image.ndim == 2 else (0, 0)
        x0 = col0 * scale
        if n_rows == 0 or width_cols == 0:
            self.image.clear()
            if n_cols == 0 and width_cols == 0 and self._drawn:
                self.plot.setRange(yRange=(0.0, 8.0), padding=0)
                return
            x1 = x0 + float(max(width_cols, n_cols - col0, 50)) * scale
            self.plot.setLimits(xMin=x0, xMax=x1, yMin=0.0, yMax=8.0)  # the last rows' limits would clamp a longer input
            self.plot.setRange(xRange=(x0, x1), yRange=(0.0, 8.0), padding=0)
            return
        self._drawn = True
        self.image.setImage(image, levels=(0.0, 1.0), autoLevels=False)
        width = float(width_cols) * scale
        self.image.setRect(QRectF(x0, 0.0, width, float(n_rows)))
        self.plot.setLimits(xMin=x0, xMax=x0 + width, yMin=0.0, yMax=float(max(n_rows, 8)))
        self.plot.setRange(xRange=(x0, x0 + width), yRange=(0.0, float(max(n_rows, 8))), padding=0)
        if selected_row is not None:
            self.highlight.setRect(QRectF(x0, selected_row, width, 1))

    def outline_row(self, row: int | None, x0: float, width: float) -> None:
        """Outline image row ``row`` from ``x0`` over ``width`` (None: no outline)."""
        if row is None:
            self.highlight.hide()
            return
        self.highlight.setRect(QRectF(x0, row, width, 1))
        self.highlight.show()

    def set_row_ticks(self, n: int, text_of) -> None:
        """Label the ``n`` rows with ``text_of(row)``, every k-th where they would overlap
        (only the labels drawn are asked for)."""
        h = max(1.0, self.plot.vb.height() or 200.0)
        every = max(1, int(np.ceil(n * 14 / h))) if n else 1
        self.plot.getAxis("left").setTicks([[(r + 0.5, text_of(r)) for r in range(0, n, every)]])

    def label_columns(self, labels: list[str] | None, scale: float, fm: QFontMetrics) -> None:
        """String ticks on the column axis (None: numbers): every label, or every k-th where
        all of them would overlap (zoom in to read a crowded axis)."""
        ax = self.plot.getAxis("bottom")
        if labels is None:
            ax.setTicks(None)
            return
        every = 1
        if labels:
            width = max(100.0, float(self.plot.vb.width() or 0.0) or 700.0)
            sample = labels[:: max(1, len(labels) // 500)]  # 256k labels took 1.3 s to measure
            need = float(np.mean([fm.horizontalAdvance(t) for t in sample])) + 10  # pixels per label
            every = max(1, int(np.ceil(len(labels) * need / width)))
        ax.setTicks([[((i + 0.5) * scale, labels[i]) for i in range(0, len(labels), every)]])

    def set_column_separators(self, columns: list[int], scale: float) -> None:
        """A thin white line at each input column in ``columns``, the plot's whole height."""
        self.col_seps = [int(c) for c in columns]
        if not self.col_seps:
            self.separators.setData([], [])
            return
        xs = np.repeat(np.asarray(self.col_seps, np.float64) * scale, 2)
        ys = np.tile(np.array([0.0, 1e5]), len(self.col_seps))
        self.separators.setData(xs, ys, connect="pairs")

    def set_row_separators(self, rows: list[int]) -> None:
        """A white line across the plot above each image row in ``rows``; [] removes them."""
        for line in self.row_lines:
            self.plot.removeItem(line)
        self.row_lines.clear()
        for r in rows:
            self.add_row_separator(r)

    def add_row_separator(self, row: int) -> None:
        """One more line above image row ``row``."""
        line = pg.InfiniteLine(pos=float(row), angle=0, pen=pg.mkPen("w", width=1.5))
        line.setZValue(6)
        self.plot.addItem(line)
        self.row_lines.append(line)

    def row_separators(self) -> list[int]:
        """The image rows above which a separator line is drawn."""
        return [int(line.value()) for line in self.row_lines]

    def mark_columns(self, row: int | None, columns: list[int], scale: float, n_rows: int) -> None:
        """A translucent orange band down each of ``columns`` and an orange box on row
        ``row``'s cell; None removes the marks."""
        for item in self.marks:
            self.plot.removeItem(item)
        self.marks.clear()
        if row is None:
            return
        for c in columns:
            x = c * scale
            band = QGraphicsRectItem(QRectF(x, 0, scale, max(n_rows, 8)))
            band.setPen(QPen(Qt.PenStyle.NoPen))
            band.setBrush(QBrush(QColor(255, 149, 0, 60)))
            band.setZValue(5)
            box = QGraphicsRectItem(QRectF(x, row, scale, 1))
            pen = QPen(QColor("#ff9500"), 2)
            pen.setCosmetic(True)
            box.setPen(pen)
            box.setZValue(11)
            for it in (band, box):
                self.plot.addItem(it)
                self.marks.append(it)


class RowImage:
    """The heatmap's image, float32 (rows, columns) in 0..1, grown one row at a time in
    amortised O(1): the rows live in a buffer that doubles; :attr:`image` is a view of the
    used part."""

    def __init__(self, width: int = 0) -> None:
        self.image = np.zeros((0, width), np.float32)
        self._buf = self.image

    def set(self, image: np.ndarray) -> None:
        """Replace the rows with ``image``."""
        self.image = self._buf = image

    def append(self, row: np.ndarray) -> None:
        """Add ``row`` (float32 (columns,)) below the others."""
        n = self.image.shape[0]
        if self._buf.shape[0] <= n or self._buf.shape[1] != len(row):
            buf = np.zeros((max(16, 2 * (n + 1)), len(row)), np.float32)
            buf[:n] = self.image
            self._buf = buf
        self._buf[n] = row
        self.image = self._buf[: n + 1]

    def pad_columns(self, n: int) -> None:
        """Add zero columns on the right up to ``n`` columns (none if it has as many)."""
        pad = np.zeros((self.image.shape[0], max(0, n - self.image.shape[1])), np.float32)
        self.set(np.hstack([self.image, pad]))
