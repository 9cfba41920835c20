"""The input's column axis: the model that the views of attention over the input share.

The attention heatmap sets it (``AttentionHeatmap.set_columns`` / ``reset_columns``: the tab
configures the axis for its input: seconds of audio, source tokens, pixels); the beam tree's
node details read the same object (``BeamTreeView(run, axis=...)``) instead of a copy of the
heatmap's methods.
"""

from __future__ import annotations


class ColumnAxis:
    """Column labels (or None for numbers), the unit's name, source units per column, and how
    many columns the whole input has (0: unknown)."""

    def __init__(self) -> None:
        self.labels: list[str] | None = None
        self.unit = "source position"
        self.scale = 1.0
        self.count = 0

    def column_axis(self) -> tuple[list[str] | None, str, float]:
        """(column labels or None, axis unit, source units per column)."""
        return self.labels, self.unit, self.scale

    def column_count(self) -> int:
        """Columns of the whole input (0: unknown)."""
        return self.count
