"""The Translation tab's heatmap columns (``gui.tabs.translation``): the source tokens, the
default view of a new model, and the hover marks.

- The columns are exactly the text's source tokens (SentencePiece pieces, ``▁`` marks a word
  start, ``</s>`` ends each sentence), with a line where each sentence starts (up to
  :data:`MAX_SEPARATORS` sentences).
- The default view is the alignment view: the last decoder layer, head 0 for the bundled
  tiny11 models (their first decoder layer lags one token and is not an alignment); hub
  models start on the average over layers and heads.
- Hovering a target token (a heatmap row or a chip in the token stream) marks the source
  tokens it attends to most (every column within :data:`HOVER_THRESHOLD` of the row's maximum).

:class:`SourceColumns` is an object of the tab (``tab.columns``); it reads the tab's
``heatmap``, ``model`` and ``run``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtWidgets import QLabel

from core.events import StepEvent

from .source_text import column_label

#: hovering a token marks the source columns whose (row-normalised) attention is >= this
HOVER_THRESHOLD = 0.8
#: alignment view of the bundled tiny11 models: (last decoder layer, head 0)
TINY11_ALIGNMENT = (1, 0)
#: heatmap column axis label (pyqtgraph renders axis labels as HTML: escape "</s>")
COLUMN_AXIS = "source token (▁ = word start, &lt;/s&gt; = end of sentence)"
#: sentence separator lines are drawn for at most this many sentences
MAX_SEPARATORS = 1000


class SourceColumns:
    """The heatmap's source-token columns, default view and hover marks (module docstring).
    Builds the hover line under the heatmap (:attr:`hover_label`)."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self.tokens: list[str] = []  # the source tokens, one per column
        self.view_set_for: Any = None  # the model the default view was set for
        self._hovered: int | None = None
        self._hover_columns: list[int] = []
        self.hover_label = QLabel("")
        self.hover_label.setStyleSheet("color: #b35900;")
        self.hover_label.setToolTip("hover a target token (heatmap row or token chip) to see the source tokens it attends to")
        tab.heatmap.add_below(self.hover_label)

    def reset(self, tokens: list[str], boundaries: list[int] | None = None, labels: list[str] | None = None) -> None:
        """Make the heatmap's columns exactly ``tokens`` (the widget only ever grows them);
        draw a line at each column index in ``boundaries`` (where a sentence starts).
        ``labels``: the tokens' column labels when already made (``column_label``)."""
        heatmap = self.tab.heatmap
        self.tokens = tokens
        heatmap.reset_columns(COLUMN_AXIS, 1.0, labels=labels if labels is not None else
                              [column_label(t) for t in tokens])
        if boundaries is not None and len(boundaries) > MAX_SEPARATORS:
            boundaries = []  # sub-pixel lines (the view is windowed per sentence) that cost ~30 ms a repaint
        heatmap.set_column_separators(list(boundaries or []))  # a white line between sentences' tokens

    def step_seen(self, ev: Any) -> None:
        """A decode event arrived: the first step with attention of a new model sets its view."""
        if isinstance(ev, StepEvent) and ev.cross_attention is not None and self.view_set_for is not self.tab.model:
            self._set_alignment_view(ev.cross_attention.shape)

    def _set_alignment_view(self, shape: tuple[int, ...]) -> None:
        """Default heatmap view for a new model: the alignment head (bundled tiny11:
        last decoder layer, head 0) or the average (hub models)."""
        model, heatmap = self.tab.model, self.tab.heatmap
        self.view_set_for = model
        if getattr(model, "bundled", False):
            layer, head = shape[0] - 1, TINY11_ALIGNMENT[1]
            heatmap.set_view(
                layer, head, shape=(shape[0], shape[1]),
                note=f"alignment view: layer {layer} (last), head {head} · rows normalised to max",
                tip="The last decoder layer's head 0 aligns target and source tokens. The first decoder layer "
                    "lags one token behind, so it is not an alignment. Each row is divided by its maximum.",
            )
        else:
            heatmap.set_view(None, None, shape=(shape[0], shape[1]),
                             note="average over layers and heads · rows normalised to max")

    def hover(self, step: int | None) -> list[int]:
        """Mark the source tokens that target token ``step`` attends to most (columns within
        ``HOVER_THRESHOLD`` of its row's maximum); None clears the marks.

        Returns:
            the marked column indices (into the source tokens).
        """
        if step == self._hovered and (step is None or self._hover_columns):
            return list(self._hover_columns)
        heatmap = self.tab.heatmap
        self._hovered = step
        self._hover_columns = []
        row = heatmap.row_of(step)
        if row is None or row >= heatmap.row_count():
            heatmap.mark_columns(None, [])
            self.hover_label.setText("")
            return []
        values = heatmap.matrix()[row]
        first = heatmap.column_offset()  # a windowed heatmap (long input) draws one sentence's columns
        cols = [first + int(c) for c in np.flatnonzero(values >= HOVER_THRESHOLD * max(float(values.max()), 1e-9))]
        heatmap.mark_columns(row, cols)
        self._hover_columns = cols
        ev = self.tab.run.step(step)
        target = ev.text if ev is not None else "?"
        sources = " ".join(self.tokens[c] for c in cols if c < len(self.tokens))
        self.hover_label.setText(f"hover: target {target!r} ← source {sources}")
        return list(cols)

    def hovered(self) -> list[int]:
        """The source columns marked by the last hover."""
        return list(self._hover_columns)
