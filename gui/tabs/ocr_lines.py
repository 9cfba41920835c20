"""The OCR tab's line views (``gui.tabs.ocr``): the detected text lines drawn as numbered
boxes on the image, one row each in the readings table (the attention decoder's text so far
beside english_g2's CTC reading), the heatmap's line separators, and the selected (or newest)
token's cross-attention drawn over its line on the image: each encoder column's x range
(``TextLine.column_x``) tinted by the attention of the heatmap's chosen layer/head.

:class:`LineViews` is an object of the tab (``tab.line_views``); it reads the tab's
``view`` (``ImageView``), ``readings`` (``ReadingsTable``), ``heatmap``, ``run``, ``model``
and ``select_step``.
"""

from __future__ import annotations

from typing import Any

from core.events import Finished, SegmentEvent, StepEvent

from ..widgets.attention_heatmap import reduce_attention


class LineViews:
    """The lines of the current detection and their views (see the module docstring).

    Attributes:
        lines: the ``TextLine``s of the current detection, in reading order.
        texts: each line's decoded text so far (the readings table's first column).
    """

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self.lines: list = []
        self.texts: list[str] = []

    def set_lines(self, lines: list, ctc: list[str] | None = None) -> None:
        """Show ``lines`` (boxes on the image, one table row each); texts start empty."""
        tab = self.tab
        self.lines = list(lines)
        self.texts = ["" for _ in self.lines]
        tab.view.set_lines([tuple(line.box) for line in self.lines])
        tab.heatmap.set_row_separators([])
        tab.readings.set_lines(self.lines, has_ctc=tab.model is None or getattr(tab.model, "has_ctc", False))
        if ctc is not None:
            tab.readings.set_ctc(ctc)

    def replay(self, branch: int) -> None:
        """The readings table, the heatmap's line separators and the overlay follow ``branch``."""
        tab = self.tab
        firsts = {}
        texts = ["" for _ in self.lines]
        for ev in tab.run.branch_steps(branch):
            firsts.setdefault(ev.segment, ev.step)
            if 0 <= ev.segment < len(texts):
                texts[ev.segment] += ev.text
        tab.heatmap.set_row_separators([firsts[s] for s in sorted(firsts) if s > 0])
        self.texts = texts
        for i, t in enumerate(texts):
            tab.readings.set_reading(i, t)
        self.show_attention(tab.run.current())

    def segment_started(self, ev: SegmentEvent) -> None:
        """Line ``ev.segment`` starts: a separator in the heatmap, the line current on the image
        and selected in the table."""
        tab = self.tab
        # the heatmap has a row per token so far (counted here: its view may catch up later)
        if ev.segment > 0 and len(tab.run):
            tab.heatmap.add_row_separator(len(tab.run))
        tab.view.set_current_line(ev.segment)
        if ev.segment < tab.readings.rowCount():
            tab.readings.selectRow(ev.segment)

    def step_added(self, ev: StepEvent) -> None:
        """A token of line ``ev.segment``: its reading grows; the overlay follows the newest token."""
        seg = ev.segment
        if 0 <= seg < len(self.texts):
            self.texts[seg] += ev.text
            self.tab.readings.set_reading(seg, self.texts[seg])
        if self.tab.run.selected() is None:
            self.show_attention(ev.step)

    def finished(self, fin: Finished) -> None:
        """The run ended: the model's final text per line (beam search, cleanup) in the table."""
        parts = fin.text.split("\n")
        if len(parts) == len(self.texts):
            self.texts = parts
            for i, t in enumerate(parts):
                self.tab.readings.set_reading(i, t)

    def clicked(self, row: int) -> None:
        """A click on table row ``row`` selects the line's first token."""
        steps = self.tab.run.steps_in_segment(row)
        if steps:
            self.tab.select_step(steps[0])

    def show_attention(self, step: int | None) -> None:
        """Draw token ``step``'s cross-attention (the heatmap's layer/head) over its line on the image."""
        tab = self.tab
        ev = tab.run.step(step)
        if ev is None or ev.cross_attention is None or not (0 <= ev.segment < len(self.lines)):
            tab.view.clear_attention()
            return
        line = self.lines[ev.segment]
        layer, head = tab.heatmap.selection()
        vals = reduce_attention(ev.cross_attention, layer, head)
        ranges = [line.column_x(c) for c in range(len(vals))]
        tab.view.set_attention(tuple(line.box), ranges, vals)
        tab.view.set_current_line(ev.segment)

    def refresh(self) -> None:
        """Draw the current token's attention again (the heatmap's layer/head changed)."""
        self.show_attention(self.tab.run.current())
