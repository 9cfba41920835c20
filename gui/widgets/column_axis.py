"""The input's column axis: the model that the views of attention over the input share.

The attention heatmap sets it (``AttentionHeatmap.set_columns`` / ``reset_columns``: the tab
configures the axis for its input: seconds of audio, source tokens, pixels); the beam tree's
node details read the same object (``BeamTreeView(run, axis=...)``) instead of a copy of the
heatmap's methods.

It also lists the plots that draw the input on this axis (:meth:`ColumnAxis.add_plot`): the
input's waveform, the heatmap's waveform strip ("input") and the heatmap itself
("attention"). The marks drawn on the input's seconds (``gui.widgets.timestamp_marks``,
``gui.widgets.window_marks``) find their plots here, also those added later, instead of
reaching into another view.
"""

from __future__ import annotations

from typing import Any, Callable

#: the kinds of plot on the input's axis: a strip showing the input itself (a waveform), or
#: attention over it (the heatmap)
PLOT_KINDS = ("input", "attention")


class ColumnAxis:
    """Column labels (or None for numbers), the unit's name, source units per column, how
    many columns the whole input has (0: unknown), and the plots on this axis."""

    def __init__(self) -> None:
        self.labels: list[str] | None = None
        self.unit = "source position"
        self.scale = 1.0
        self.count = 0
        self._plots: list[tuple[Any, str]] = []
        self._plot_listeners: list[tuple[Callable[[Any], None], tuple[str, ...]]] = []

    def column_axis(self) -> tuple[list[str] | None, str, float]:
        """(column labels or None, axis unit, source units per column)."""
        return self.labels, self.unit, self.scale

    def column_count(self) -> int:
        """Columns of the whole input (0: unknown)."""
        return self.count

    # ------------------------------------------------------------ the plots on this axis
    def add_plot(self, plot: Any, kind: str = "input") -> None:
        """``plot`` (a pyqtgraph PlotItem or PlotWidget; x in this axis' units) draws the
        input ("input") or attention over it ("attention"); the marks following the axis
        draw on it from now on.

        Raises:
            ValueError: ``kind`` is not one of :data:`PLOT_KINDS`.
        """
        if kind not in PLOT_KINDS:
            raise ValueError(f"plot kind {kind!r}: use one of {', '.join(PLOT_KINDS)}")
        self._plots.append((plot, kind))
        for fn, kinds in self._plot_listeners:
            if kind in kinds:
                fn(plot)

    def plots(self, kinds: tuple[str, ...] = PLOT_KINDS) -> list[Any]:
        """The plots of ``kinds`` added so far, in order."""
        return [p for p, k in self._plots if k in kinds]

    def follow_plots(self, fn: Callable[[Any], None], kinds: tuple[str, ...] = PLOT_KINDS) -> None:
        """Call ``fn(plot)`` for each plot of ``kinds`` added so far, and for each added later."""
        self._plot_listeners.append((fn, tuple(kinds)))
        for plot in self.plots(kinds):
            fn(plot)
