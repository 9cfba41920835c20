"""Long-form windows that fell back or were skipped, drawn on the waveform (issue 14 §3).

A tinted span over the window's seconds (``AttemptEvent.start`` .. ``end``) with a label:
orange "fell back → T=0.2" when the window needed more than one attempt (red
"repetition → T=0.4" when an attempt failed as a repetition loop), grey "silence" when it was
skipped. Windows accepted at the first try are not marked. The spans take no mouse input.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor

from core.events import AttemptEvent

from .attempts_view import attempt_kind

#: (fill, label colour) per mark kind
MARK_COLORS = {"fallback": ("#E69F00", "#8a5a00"), "repetition": ("#D55E00", "#8a3300"),
               "silence": ("#888888", "#444444")}


class WindowMarks:
    """Tinted spans with labels on each of ``plots`` (x in seconds), one per window that fell
    back or was skipped. ``plots``: a ``ColumnAxis`` (its "input" plots — the waveforms, not
    the heatmap — also those added later) or a list of plots."""

    def __init__(self, plots) -> None:
        self.plots: list = []
        self._by_window: dict[int, list[tuple[object, object]]] = {}  # window -> its (plot, item)s
        self._windows: dict[int, list[AttemptEvent]] = {}
        self._marks: dict[int, tuple[str, str, float, float]] = {}  # window -> kind, label, start, end
        if hasattr(plots, "follow_plots"):
            plots.follow_plots(self.add_plot, kinds=("input",))
        else:
            for plot in plots:
                self.add_plot(plot)

    def add_plot(self, plot) -> None:
        """Draw the marks on ``plot`` too (x in seconds), from now on."""
        self.plots.append(plot)
        for window in list(self._marks):
            self._draw(window)

    @property
    def _items(self) -> list[tuple[object, object]]:
        """Every (plot, item) drawn, all windows (for tests; O(marks))."""
        return [pair for pairs in self._by_window.values() for pair in pairs]

    def clear(self) -> None:
        for pairs in self._by_window.values():
            for plot, item in pairs:
                plot.removeItem(item)
        self._by_window = {}
        self._windows = {}
        self._marks = {}

    def add(self, ev: AttemptEvent) -> None:
        """Take one attempt; redraw its window's mark when the window is marked. Only that
        window's items are removed and added again (2 per plot): O(1) in the number of marks
        (issue 19 §3: redrawing every mark on each add was quadratic over an hour's fallbacks)."""
        tries = self._windows.setdefault(ev.segment, [])
        tries.append(ev)
        failed = [a for a in tries if attempt_kind(a) != "accepted"]
        if not failed:
            return
        if ev.verdict == "silence":
            kind, label = "silence", "silence — skipped"
        else:
            kind = "repetition" if any(attempt_kind(a) == "repetition" for a in failed) else "fallback"
            label = f"{'repetition' if kind == 'repetition' else 'fell back'} → T={ev.temperature:g}"
        mark = (kind, label, ev.start, ev.end)
        if self._marks.get(ev.segment) == mark:
            return
        self._marks[ev.segment] = mark
        self._draw(ev.segment)

    def marks(self) -> dict[int, tuple[str, str, float, float]]:
        """window -> (kind, label, start s, end s) of every marked window."""
        return dict(self._marks)

    def _draw(self, window: int) -> None:
        """Replace ``window``'s span and label on each plot (the other marks stay as they are)."""
        for plot, item in self._by_window.pop(window, []):
            plot.removeItem(item)
        kind, label, start, end = self._marks[window]
        fill, ink = MARK_COLORS[kind]
        pairs: list[tuple[object, object]] = []
        for plot in self.plots:
            color = QColor(fill)
            color.setAlpha(55)
            region = pg.LinearRegionItem((start, end), movable=False, brush=color,
                                         pen=pg.mkPen(fill, width=1))
            region.setZValue(-5)
            region.setToolTip(label)
            for line in region.lines:
                line.setToolTip(label)
            plot.addItem(region, ignoreBounds=True)
            text = pg.TextItem(label, color=ink, anchor=(0, 0))
            vb = plot.getViewBox() if hasattr(plot, "getViewBox") else plot.plotItem.getViewBox()
            y_top = vb.viewRange()[1][1]
            text.setPos(start, y_top)
            plot.addItem(text, ignoreBounds=True)
            pairs += [(plot, region), (plot, text)]
        self._by_window[window] = pairs
