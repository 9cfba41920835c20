"""The sampler chain at one step: the distribution after each stage, side by side.

Rows are the step's candidate tokens (``StepEvent.stage_candidates``: the best tokens of
the raw distribution and of every stage's output), columns the raw distribution and then
one per stage in the order the chain applied them (``StepEvent.stages``). A cell holds
the token's renormalised probability after that stage, tinted with the viridis colours of
the token chips; where a stage removed a token the cell says "✕" (bold on grey), and in
the later stages the token stays greyed out ("·"). Each stage's header gives its label, the
tokens it kept and the mass those tokens had entering it ("kept 40", "mass 0.93").

Contrastive decoding (``StageReport.amateur``) gets an "amateur" column just before its own
(``gui.widgets.stage_columns``): the expert (the column entering the stage), the amateur and
the contrast side by side. In the contrast's column a "↓" marks each candidate the amateur
talked the expert out of (the expert preferred it to the contrast's choice, the contrast ranks
it below), a "↑" the token the contrast promoted to first; a line under the title says it in words.

:class:`StageView` is a ``QTableView`` over :class:`StageModel` (only the visible cells
are ever formatted); it rebuilds only when another step is shown, and not while hidden.
:class:`~gui.widgets.step_inspector.StepInspector` puts it beside the top-k chart ("top-k | chain stages") with the
"Sample ×N" controls of the chart.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QStackedWidget, QTableView, QWidget

from core.events import StepEvent

from .layouts import vbox
from .stage_columns import contrast_summary
from .stage_model import GONE, KEPT, REMOVED, Cell, StageModel, stage_label
from .token_text import display_text

# re-exported: what tests reach through this module (the table model is stage_model.py)
__all__ = ["GONE", "KEPT", "REMOVED", "Cell", "StageModel", "StageView", "stage_label"]

class StageView(QWidget):
    """The chain's stages at one step (see the module docstring); ``set_step(ev)`` shows it.

    Signals:
        candidateClicked(int, int, str): (step, token id, text) of a clicked candidate other
            than the chosen token (the tab forks there, as from the top-k chart).
    """

    candidateClicked = Signal(int, int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._ev: StepEvent | None = None
        self._pending = False
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        f = QFont(self.title.font())
        f.setBold(True)
        self.title.setFont(f)
        self.model = StageModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.setWordWrap(False)
        self.table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        hh.setDefaultAlignment(Qt.AlignmentFlag.AlignCenter)
        vh = self.table.verticalHeader()
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setDefaultSectionSize(self.fontMetrics().height() + 4)
        vh.setDefaultAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.table.clicked.connect(lambda index: self.click_candidate(index.row()))
        self.table.verticalHeader().sectionClicked.connect(self.click_candidate)
        self.table.setToolTip("click a candidate to force it at this step and continue from there (a new branch)")
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setStyleSheet("color: palette(placeholder-text);")
        self.pages = QStackedWidget()
        self.pages.addWidget(self.table)
        self.pages.addWidget(self.message)
        self.contrast_line = QLabel()  # what contrastive decoding did, in words (hidden when it did not run)
        self.contrast_line.setTextFormat(Qt.TextFormat.PlainText)
        self.contrast_line.setWordWrap(True)
        self.contrast_line.setToolTip(
            "contrastive decoding at this step: the expert (the distribution entering the stage), the amateur "
            "(its column) and the contrast; ↓ marks the tokens the amateur talked the expert out of")
        self.contrast_line.hide()
        vbox(self.title, self.contrast_line, (self.pages, 1), margins=(4, 2, 4, 2), spacing=2, parent=self)
        self.setMinimumSize(260, 160)
        self._rebuild()

    def sizeHint(self) -> QSize:
        return QSize(420, 300)

    # ---------------------------------------------------------------- API
    def set_step(self, ev: StepEvent | None) -> None:
        """Show ``ev``'s chain. While the view is hidden the rebuild waits until it is shown."""
        if ev is self._ev and not self._pending:
            return
        self._ev = ev
        if self.isVisible():
            self._rebuild()
        else:
            self._pending = True

    def step(self) -> int | None:
        """The step shown (or waiting to be shown), or None."""
        return self._ev.step if self._ev is not None else None

    def showing_message(self) -> bool:
        """True when a one-line message stands in for the table (no step, or no stage ran)."""
        self._flush()
        return self.pages.currentWidget() is self.message

    def message_text(self) -> str:
        self._flush()
        return self.message.text()

    def column_names(self) -> list[str]:
        """"raw" and the stage names, in column order."""
        self._flush()
        return self.model.column_names()

    def header_text(self, col: int) -> str:
        """The header of column ``col`` (0 = raw)."""
        self._flush()
        return self.model.header_text(col)

    def candidate_texts(self) -> list[str]:
        """The rows' token texts (as the events give them), in row order."""
        self._flush()
        ev = self.model.step_event()
        return [tp.text for tp in ev.stage_candidates] if ev is not None else []

    def cell(self, row: int, col: int) -> Cell:
        """The cell of candidate ``row`` in column ``col`` (0 = raw)."""
        self._flush()
        return self.model.cell(row, col)

    def click_candidate(self, row: int) -> bool:
        """As a click on candidate ``row``: ask to force it (True if it is not the chosen token)."""
        self._flush()
        ev = self.model.step_event()
        if ev is None or not 0 <= row < len(ev.stage_candidates):
            return False
        tp = ev.stage_candidates[row]
        if tp.id == ev.token_id:
            return False
        self.candidateClicked.emit(ev.step, tp.id, tp.text)
        return True

    def contrast_text(self) -> str:
        """The line about contrastive decoding at the shown step ("" when it did not run)."""
        self._flush()
        return self.contrast_line.text() if not self.contrast_line.isHidden() else ""

    def contrast(self):
        """What contrastive decoding did at the shown step (``stage_columns.Contrast``), or None."""
        self._flush()
        return self.model.contrast()

    def cell_text(self, row: int, col: int) -> str:
        self._flush()
        return self.model.data(self.model.index(row, col))

    # ------------------------------------------------------------- internals
    def showEvent(self, e) -> None:  # noqa: N802
        super().showEvent(e)
        self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._rebuild()

    def _rebuild(self) -> None:
        self._pending = False
        ev = self._ev
        self.contrast_line.hide()
        if ev is None:
            self.title.setText("Chain stages at the selected step")
            self.model.set_step(None)
            self.message.setText("Decode an input, then click a token to see what each stage of the sampler chain kept.")
            self.pages.setCurrentWidget(self.message)
            return
        self.title.setText(
            f"Chain stages at step {ev.step}: chosen {display_text(ev.text)!r}"
            + (f" · kept {ev.kept} · raw entropy {ev.raw_entropy:.2f} nats" if ev.stages else "")
        )
        self.model.set_step(ev)
        summary = contrast_summary(ev, lambda row: ev.stage_candidates[row].text) if ev.stages else ""
        self.contrast_line.setText(summary)
        self.contrast_line.setVisible(bool(summary))
        if not ev.stages:
            self.message.setText(
                f"No sampler stage ran at step {ev.step} (e.g. greedy or beam search without penalties): "
                "the processed distribution is the raw one."
            )
            self.pages.setCurrentWidget(self.message)
            return
        fm = self.table.fontMetrics()
        hh = self.table.horizontalHeader()
        cell_w = fm.horizontalAdvance("0.000 ↓" if self.model.contrast() is not None else "0.000") + 14
        for c in range(self.model.columnCount()):
            lines = self.model.header_text(c).split("\n")
            hh.resizeSection(c, max(cell_w, max(fm.horizontalAdvance(t) for t in lines) + 14))
        self.pages.setCurrentWidget(self.table)
