"""Whisper's timestamp tokens drawn on the waveform and the attention heatmap (both on a
seconds axis): a dashed line at each segment start and end (``<|2.60|>`` in 30 s window ``w`` is at ``w * 30 + 2.60`` s), live as the tokens
arrive. A view over ``RunState``: it takes each frame's steps (``stepsAdded``) and redraws
from the current branch's steps. Its plots are those of the input's ``ColumnAxis`` (the
waveform, the heatmap's strip and the heatmap, also ones added later), or a list. Each plot
holds ONE item that draws all its lines (:class:`TimestampLines`)."""

from __future__ import annotations

import bisect
import re

import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF, Qt

from core.catalog import FRAME_S

_TIMESTAMP = re.compile(r"^<\|(\d+\.\d+)\|>$")


def timestamp_seconds(steps) -> list[float]:
    """Seconds in the whole audio of every timestamp token among ``steps`` (StepEvents), in order:
    the window's start (``source_offset`` encoder frames of 20 ms: ``segment`` x 30 s for fixed
    windows, the seek for long-form windows) plus the token's time."""
    out = []
    for ev in steps:
        m = _TIMESTAMP.match(ev.text or "")
        if m:
            out.append(round(ev.source_offset * FRAME_S, 3) + float(m.group(1)))
    return out


class TimestampLines(pg.GraphicsObject):
    """All the timestamp lines of one plot in ONE graphics item: a dashed vertical line at each
    of ``times`` (seconds, the plot's x), across the visible y range. One pyqtgraph
    ``InfiniteLine`` per timestamp made every x-range change recompute a bounding rect per line
    (~40 ms at 834 lines, an hour of speech); this item recomputes one, and paints only the lines
    in view. Hovering within 4 px of a line shows its time as the tooltip."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []  # sorted, seconds
        self.pen = pg.mkPen("#d55e00", width=1, style=Qt.PenStyle.DashLine)
        self.pen.setCosmetic(True)
        self._rect: QRectF | None = None
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)  # clicks go to the plot beneath
        self.setAcceptHoverEvents(True)
        self.setZValue(8)  # over the heatmap's image and separators, under its highlight

    def insert(self, k: int, t: float) -> None:
        """A line at ``t`` s, at index ``k`` of the sorted ``times``."""
        self.times.insert(k, t)
        self._changed()

    def remove(self, times) -> None:
        """Takes the lines at ``times`` (seconds, each one of ``self.times``) away."""
        gone = set(times)
        self.times = [t for t in self.times if t not in gone]
        self._changed()

    def clear(self) -> None:
        """No lines."""
        self.times = []
        self._changed()

    def _changed(self) -> None:
        self._rect = None
        self.prepareGeometryChange()
        self.update()

    def viewTransformChanged(self) -> None:
        """The view's range or size changed: the one bounding rect is computed again."""
        self._rect = None
        self.prepareGeometryChange()
        super().viewTransformChanged()

    def boundingRect(self) -> QRectF:
        if self._rect is None:
            vr = self.viewRect()
            if vr is None or not self.times:
                self._rect = QRectF()
            else:
                px = self.pixelWidth() or 0.0
                self._rect = QRectF(self.times[0] - 2 * px, vr.top(), self.times[-1] - self.times[0] + 4 * px,
                                    vr.height()).normalized()
        return self._rect

    def paint(self, painter, *args) -> None:
        vr = self.viewRect()
        if vr is None or not self.times:
            return
        lo = bisect.bisect_left(self.times, vr.left())
        hi = bisect.bisect_right(self.times, vr.right())
        if hi <= lo:
            return
        painter.setPen(self.pen)
        painter.drawLines([QLineF(t, vr.top(), t, vr.bottom()) for t in self.times[lo:hi]])

    def near(self, x: float, px: float) -> float | None:
        """The line nearest to ``x`` (seconds) if it is within ``px`` seconds, else None."""
        k = bisect.bisect_left(self.times, x)
        best = min((self.times[i] for i in (k - 1, k) if 0 <= i < len(self.times)), key=lambda t: abs(t - x),
                   default=None)
        return best if best is not None and abs(best - x) <= px else None

    def hoverEvent(self, ev) -> None:
        """pyqtgraph's hover: the tooltip names the line under the cursor (none between lines)."""
        if ev.isExit():
            self.setToolTip("")
            return
        t = self.near(ev.pos().x(), 4 * (self.pixelWidth() or 0.0))
        self.setToolTip("" if t is None else f"timestamp {t:.2f} s")


class TimestampMarks:
    """Vertical lines on each of ``plots`` (x in seconds) at the timestamps of ``run``'s
    current branch: one :class:`TimestampLines` item per plot, added once. ``plots``: a
    ``ColumnAxis`` (every plot on the input's axis, as they are added) or a list of plots."""

    def __init__(self, plots, run) -> None:
        self.plots: list = []
        self.run = run
        self.items: list[TimestampLines] = []  # one per plot, in the order of ``plots``
        self._times: list[float] = []  # the lines' seconds, sorted (one per time)
        self._steps: list[int] = []  # the step whose timestamp drew each time
        if hasattr(plots, "follow_plots"):
            plots.follow_plots(self.add_plot)
        else:
            for plot in plots:
                self.add_plot(plot)
        run.stepsAdded.connect(self._steps_added)
        run.cleared.connect(self.redraw)
        run.stepsRetracted.connect(self._retracted)  # a long-form attempt taken back
        run.currentBranchChanged.connect(lambda _b: self.redraw())

    def add_plot(self, plot) -> None:
        """Draw the lines on ``plot`` too (x in seconds), from now on."""
        item = TimestampLines()
        for k, t in enumerate(self._times):
            item.times.insert(k, t)
        plot.addItem(item, ignoreBounds=True)
        self.plots.append(plot)
        self.items.append(item)

    def seconds(self) -> list[float]:
        """Where the lines are (seconds), left to right."""
        return list(self._times)

    def drawn(self, plot) -> list[float]:
        """The seconds at which ``plot`` (one of ``plots``, or the PlotItem of a PlotWidget among
        them) draws a line, left to right. Raises ValueError for a plot not among them."""
        for own, item in zip(self.plots, self.items):
            if own is plot or (hasattr(own, "getPlotItem") and own.getPlotItem() is plot):
                return list(item.times)
        raise ValueError("not one of the plots these timestamp marks draw on")

    def _steps_added(self, _branch: int, steps) -> None:
        """A frame's steps: each new timestamp gets its line (a segment's closing and the next
        one's opening timestamp share one); the others stay (a redraw per timestamp was
        O(n^2) on long-form runs)."""
        for ev in steps:
            for t in timestamp_seconds([ev]):
                self._add(t, ev.step)

    def _retracted(self, branch: int, step: int) -> None:
        """Steps from ``step`` on were taken back: only their lines go (a whole redraw took
        0.66 s of CPU per plot at 834 lines, on every failed long-form attempt)."""
        if branch != self.run.current_branch():
            return
        keep = [i for i, s in enumerate(self._steps) if s < step]
        if len(keep) == len(self._steps):
            return
        kept = set(keep)
        gone = [t for i, t in enumerate(self._times) if i not in kept]
        for item in self.items:
            item.remove(gone)
        self._times = [self._times[i] for i in keep]
        self._steps = [self._steps[i] for i in keep]

    def redraw(self) -> None:
        """The lines again from the run's current branch."""
        for item in self.items:
            item.clear()
        self._times, self._steps = [], []
        for ev in self.run.steps():
            for t in timestamp_seconds([ev]):
                self._add(t, ev.step)

    def _add(self, t: float, step: int) -> None:
        """A dashed line at ``t`` seconds on every plot, unless one is there already; the
        lines stay sorted left to right (a bisect on the times: the list of every line's
        value per timestamp made a redraw O(n^2), 1.7 of its 2.9 s at 834 lines)."""
        k = bisect.bisect_left(self._times, t)
        if k < len(self._times) and self._times[k] == t:
            return
        self._times.insert(k, t)
        self._steps.insert(k, step)
        for item in self.items:
            item.insert(k, t)
