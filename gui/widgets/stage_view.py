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
:class:`StepInspector` puts it beside the top-k chart ("top-k | chain stages") with the
"Sample ×N" controls of the chart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QStackedWidget,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from core.events import StepEvent
from core.options import STAGE_LABELS

from .colors import prob_color, text_color_on
from .layouts import vbox
from .stage_columns import AMATEUR, Column, Contrast, columns, contrast_of, contrast_summary, entering
from .token_text import display_text

#: cell states (:meth:`StageModel.cell`)
KEPT, REMOVED, GONE = "kept", "removed", "gone"
_GREY = QColor(226, 226, 226)
_GONE = QColor(242, 242, 242)


def stage_label(name: str) -> str:
    """The display label of a stage name ("top_k" -> "top-k"); unknown names as they are."""
    return STAGE_LABELS.get(name, name.replace("_", " "))


@dataclass(frozen=True)
class Cell:
    """One cell: the candidate's probability after a column's stage and what happened to it
    (``KEPT``; ``REMOVED``: this stage removed it; ``GONE``: an earlier stage did)."""

    prob: float
    state: str


class StageModel(QAbstractTableModel):
    """Candidates × (raw, stage 1, stage 2, …) of one StepEvent."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._ev: StepEvent | None = None
        self._probs = np.zeros((0, 0), np.float64)  # (candidates, columns)
        self._cols: list[Column] = []
        self._contrast: Contrast | None = None
        self._bold = QFont()
        self._bold.setBold(True)
        self._italic = QFont()
        self._italic.setItalic(True)

    def set_step(self, ev: StepEvent | None) -> None:
        """Show ``ev``'s chain (None or an event without stages: an empty table)."""
        self.beginResetModel()
        self._ev = ev if ev is not None and ev.stages else None
        self._cols = columns(self._ev) if self._ev is not None else []
        self._contrast = contrast_of(self._ev) if self._ev is not None else None
        if self._ev is None:
            self._probs = np.zeros((0, 0), np.float64)
        else:
            n = len(self._ev.stage_candidates)
            self._probs = (np.stack([c.probs for c in self._cols], axis=1) if n
                           else np.zeros((0, len(self._cols)), np.float64))
        self.endResetModel()

    # ---------------------------------------------------------------- queries
    def step_event(self) -> StepEvent | None:
        """The event shown (None: none, or it has no stages)."""
        return self._ev

    def cell(self, row: int, col: int) -> Cell:
        """The cell at (candidate ``row``, column ``col``; 0 = raw)."""
        p = float(self._probs[row, col])
        if p > 0.0 or col == 0 or self._cols[col].kind == AMATEUR:
            return Cell(p, KEPT)
        before = float(self._probs[row, entering(self._cols, col)])
        return Cell(p, REMOVED if before > 0.0 else GONE)

    def column_names(self) -> list[str]:
        """"raw", then the stage names in the order applied ("amateur" before a stage that
        contrasts with one)."""
        return [c.name(self._ev) for c in self._cols] if self._ev is not None else []

    def contrast(self) -> Contrast | None:
        """What contrastive decoding did at the shown step, or None (``stage_columns.contrast_of``)."""
        return self._contrast

    def mark(self, row: int, col: int) -> str:
        """"↓" (talked out of), "↑" (promoted to first) or "" for the cell at (``row``, ``col``):
        only in the column of a stage that contrasted with an amateur."""
        con = self._contrast
        if con is None or col < 1 or self._cols[col - 1].kind != AMATEUR:
            return ""
        if row in con.talked_out:
            return "↓"
        if row == con.promoted and con.talked_out:
            return "↑"
        return ""

    def header_text(self, col: int) -> str:
        """The header of column ``col``: its label, the tokens kept and the mass they had
        (the amateur's: its name)."""
        if self._ev is None:
            return ""
        if col == 0:
            return "raw\n(model)\n "
        column = self._cols[col]
        st = self._ev.stages[column.stage]
        if column.kind == AMATEUR:
            which = st.note.removeprefix("amateur ").split(" (")[0] or "model"
            return f"amateur\n{which}\n{'(auto)' if '(auto' in st.note else ' '}"
        return f"{stage_label(st.name)}\nkept {st.kept}\nmass {st.mass:.2f}"

    def header_tip(self, col: int) -> str:
        if self._ev is None:
            return ""
        if col == 0:
            return "the raw distribution: softmax of the logits, temperature 1, only the model's hard rules applied"
        column = self._cols[col]
        st = self._ev.stages[column.stage]
        if column.kind == AMATEUR:
            return (f"the amateur's distribution at this step ({st.note or 'amateur'}): softmax of its logits. "
                    "Contrastive decoding scores (1 + β)·expert − β·amateur (a layer amateur: log p_expert − "
                    "log p_layer) over the tokens the expert finds plausible; the expert is the column entering "
                    "the stage, the contrast the column after this one")
        tip = (f"{stage_label(st.name)} (stage {column.stage + 1} of {len(self._ev.stages)}): {st.kept} tokens keep a "
               f"probability > 0; entering this stage they had mass {st.mass:.4f}; the column shows each candidate's "
               "probability after the stage, renormalised")
        if col >= 1 and self._cols[col - 1].kind == AMATEUR:
            tip += ("; ↓ marks a token the amateur talked the expert out of (the expert preferred it to the "
                    "contrast's choice, ↑)")
        return tip

    def row_text(self, row: int) -> str:
        tp = self._ev.stage_candidates[row]
        return ("▶ " if tp.id == self._ev.token_id else "") + display_text(tp.text)

    # ------------------------------------------------------------------- model
    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else self._probs.shape[0]

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else self._probs.shape[1]

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or self._ev is None:
            return None
        r, c = index.row(), index.column()
        cell = self.cell(r, c)
        if role == Qt.ItemDataRole.DisplayRole:
            if cell.state == REMOVED:
                return "✕"
            if cell.state == GONE:
                return "·"
            if self._cols[c].kind == AMATEUR:
                return _fmt_small(cell.prob)  # an amateur's tiny probabilities are what DoLa divides by
            mark = self.mark(r, c)
            return _fmt(cell.prob) + (f" {mark}" if mark else "")
        if role == Qt.ItemDataRole.BackgroundRole:
            if cell.state == REMOVED:
                return QBrush(_GREY)
            if cell.state == GONE:
                return QBrush(_GONE)
            return QBrush(prob_color(cell.prob))
        if role == Qt.ItemDataRole.ForegroundRole:
            if cell.state == REMOVED:
                return QBrush(QColor(60, 60, 60))
            if cell.state == GONE:
                return QBrush(QColor(170, 170, 170))
            return QBrush(text_color_on(prob_color(cell.prob)))
        if role == Qt.ItemDataRole.FontRole:
            if cell.state == REMOVED or self._ev.stage_candidates[r].id == self._ev.token_id:
                return self._bold
            if self._cols[c].kind == AMATEUR:
                return self._italic
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            tok = repr(self._ev.stage_candidates[r].text)
            if self._cols[c].kind == AMATEUR:
                return f"{tok}: the amateur gives p {cell.prob:.3g} ({self._ev.stages[self._cols[c].stage].note})"
            what = "raw distribution" if c == 0 else stage_label(self._ev.stages[self._cols[c].stage].name)
            con, mark = self._contrast, self.mark(r, c)
            if mark and con is not None:
                verb = "talked the expert out of" if mark == "↓" else "promoted"
                return (f"{tok}: the amateur {verb} it: expert p {con.expert[r]:.4f}, amateur p {con.amateur[r]:.4f}, "
                        f"after the contrast p {con.contrast[r]:.4f}")
            if cell.state == REMOVED:
                before = self._probs[r, entering(self._cols, c)]
                return f"{tok} was removed by {what} (it had p {before:.4f} entering it)"
            if cell.state == GONE:
                return f"{tok} was removed by an earlier stage"
            return f"{tok}: p {cell.prob:.4f} after {what}"
        return None

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if self._ev is None:
            return None
        if orientation == Qt.Orientation.Horizontal:
            if role == Qt.ItemDataRole.DisplayRole:
                return self.header_text(section)
            if role == Qt.ItemDataRole.ToolTipRole:
                return self.header_tip(section)
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.row_text(section)
        if role == Qt.ItemDataRole.FontRole and self._ev.stage_candidates[section].id == self._ev.token_id:
            return self._bold
        if role == Qt.ItemDataRole.ToolTipRole:
            tp = self._ev.stage_candidates[section]
            chosen = " (the chosen token)" if tp.id == self._ev.token_id else ""
            return f"token {tp.id} {tp.text!r}{chosen}: raw p {tp.prob:.4f}"
        return None


def _fmt_small(p: float) -> str:
    """As ``_fmt``, but a probability below 0.001 in two significant digits ("3.1e-06")."""
    return f"{p:.1e}" if 0.0 < p < 0.0005 else _fmt(p)


def _fmt(p: float) -> str:
    if p <= 0.0:
        return "0"
    if p < 0.0005:
        return "<.001"
    return f"{p:.3f}"


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


class StepInspector(QWidget):
    """The selected step's distribution: the top-k chart or the chain's stages (a toggle), and
    "Sample ×N" over the top-k chart.

    Signals:
        modeChanged(str): "topk" or "stages" is shown.
        forceRequested(str): the user typed text into the "force…" field and pressed Enter
            (the tab forces its tokens at the shown step).
    """

    modeChanged = Signal(str)
    forceRequested = Signal(str)

    def __init__(self, chart, stages: StageView | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.chart = chart
        self.stages = stages if stages is not None else StageView()
        self.seed: int | None = 0
        self.topk_button = QToolButton()
        self.topk_button.setText("top-k")
        self.topk_button.setToolTip("the processed top-k over the raw distribution")
        self.stages_button = QToolButton()
        self.stages_button.setText("chain stages")
        self.stages_button.setToolTip(
            "the distribution after each stage of the sampler chain, in the order applied: "
            "which stage removed which candidate"
        )
        self._group = QButtonGroup(self)
        self._group.setExclusive(True)
        for b in (self.topk_button, self.stages_button):
            b.setCheckable(True)
            b.setAutoRaise(False)
            self._group.addButton(b)
        self.topk_button.setChecked(True)
        self.topk_button.toggled.connect(self._mode_toggled)

        tip = (
            "Draw N tokens from this step's processed distribution with numpy's Generator, seeded with "
            "the run's seed, and outline how often each was picked over its bar. The draws come from the "
            "reported top-k tokens plus one 'other' bucket holding the remaining mass 1 − Σ top-k: exactly "
            "the processed distribution with its tail lumped together. No model call."
        )
        self.sample_button = QPushButton("Sample ×")
        self.sample_button.setToolTip(tip)
        self.sample_button.clicked.connect(self.sample)
        self.sample_spin = QSpinBox()
        self.sample_spin.setRange(1, 100_000)
        self.sample_spin.setValue(100)
        self.sample_spin.setToolTip(tip)
        self.sample_spin.setAccelerated(True)
        self.sample_button.setEnabled(False)
        self.force_edit = QLineEdit()
        self.force_edit.setPlaceholderText("force…")
        self.force_edit.setMaximumWidth(110)
        self.force_edit.setClearButtonEnabled(True)
        self.force_edit.setToolTip(
            "Type text and press Enter: its tokens (as the model's tokenizer splits it) are forced at the shown "
            "step and the decoder continues from there, in a new branch. Mind the leading space of a word "
            "(' dog' and 'dog' are different tokens in most vocabularies). Or click an alternative's bar."
        )
        self.force_edit.returnPressed.connect(self._force)
        self.force_edit.setEnabled(False)

        top = QHBoxLayout()
        top.setContentsMargins(4, 2, 4, 0)
        top.setSpacing(0)
        top.addWidget(self.topk_button)
        top.addWidget(self.stages_button)
        top.addStretch(1)
        top.addWidget(self.force_edit)
        top.addSpacing(4)
        top.addWidget(self.sample_button)
        top.addSpacing(2)
        top.addWidget(self.sample_spin)

        self.pages = QStackedWidget()
        self.pages.addWidget(chart)
        self.pages.addWidget(self.stages)
        self.pages.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(top)
        lay.addWidget(self.pages, 1)
        chart.stepChanged.connect(self._step_changed)
        self._step_changed(chart.event_shown())

    # ---------------------------------------------------------------- API
    def set_mode(self, mode: str) -> None:
        """Show "topk" (the chart) or "stages" (the chain's stages)."""
        if mode not in ("topk", "stages"):
            raise ValueError(f"mode must be 'topk' or 'stages', got {mode!r}")
        (self.topk_button if mode == "topk" else self.stages_button).setChecked(True)

    def mode(self) -> str:
        return "stages" if self.stages_button.isChecked() else "topk"

    def set_seed(self, seed: int | None) -> None:
        """The seed of Sample ×N's Generator (the run's seed; None: fresh entropy)."""
        self.seed = seed

    def sample(self):
        """Draw the spin box's N samples at the shown step (switching to the top-k chart)."""
        self.set_mode("topk")
        return self.chart.sample(self.sample_spin.value(), self.seed)

    # ------------------------------------------------------------- internals
    def _mode_toggled(self, topk_on: bool) -> None:
        self.pages.setCurrentWidget(self.chart if topk_on else self.stages)
        self.modeChanged.emit("topk" if topk_on else "stages")

    def _step_changed(self, ev: StepEvent | None) -> None:
        self.stages.set_step(ev)
        self.sample_button.setEnabled(ev is not None)
        self.force_edit.setEnabled(ev is not None)

    def _force(self) -> None:
        text = self.force_edit.text()
        if text:
            self.forceRequested.emit(text)
