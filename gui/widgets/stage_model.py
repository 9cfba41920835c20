"""The table model of the sampler chain at one step (``gui.widgets.stage_view``): rows are the
step's candidate tokens, columns the raw distribution then one per stage (an "amateur" column
before a contrastive stage, ``gui.widgets.stage_columns``); a cell holds the token's
renormalised probability after that stage, or says the stage removed it ("✕") or an earlier
one did ("·"). Only the visible cells are ever formatted (``QAbstractTableModel.data``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont

from core.events import StepEvent
from core.options import STAGE_LABELS

from .colors import prob_color, text_color_on
from .stage_columns import AMATEUR, Column, Contrast, columns, contrast_of, entering
from .token_text import display_text

#: cell states (:meth:`StageModel.cell`)
KEPT, REMOVED, GONE = "kept", "removed", "gone"
GREY_CELL = QColor(226, 226, 226)
GONE_CELL = QColor(242, 242, 242)


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
                return fmt_small(cell.prob)  # an amateur's tiny probabilities are what DoLa divides by
            mark = self.mark(r, c)
            return fmt(cell.prob) + (f" {mark}" if mark else "")
        if role == Qt.ItemDataRole.BackgroundRole:
            if cell.state == REMOVED:
                return QBrush(GREY_CELL)
            if cell.state == GONE:
                return QBrush(GONE_CELL)
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


def fmt_small(p: float) -> str:
    """As ``_fmt``, but a probability below 0.001 in two significant digits ("3.1e-06")."""
    return f"{p:.1e}" if 0.0 < p < 0.0005 else fmt(p)


def fmt(p: float) -> str:
    if p <= 0.0:
        return "0"
    if p < 0.0005:
        return "<.001"
    return f"{p:.3f}"
