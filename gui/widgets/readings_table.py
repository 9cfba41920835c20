"""The OCR tab's readings table: one row per detected line, how it was found, the attention
decoder's reading (growing live) and english_g2's own CTC reading for comparison.

Signals:
    ReadingsTable.lineClicked(int): the user clicked a row (the line's index).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

CTC_HEADER = "CTC reading (english_g2)"
#: the table's columns
COL_LINE, COL_PATH, COL_ATTN, COL_CTC = range(4)
#: what the "found by" column says for each ``TextLine.path`` (``core.tasks.ocr.PATH_*``)
PATH_TIPS = {
    "detected": "a CRAFT text box",
    "detected + ink": "a CRAFT box, widened over ink beside it that CRAFT missed",
    "whole image": "the image looks like one line of text: read whole (CRAFT not run)",
    "region": "the selected region looks like one line of text: read whole (CRAFT not run)",
    "uncovered ink": "text-like ink that no CRAFT box covered",
}


def line_labels(lines: list) -> list[str]:
    """Row labels of the readings table: the image line's number, with a letter for the
    parts of a long line cut at word gaps ("1", "2a", "2b", "3")."""
    labels: list[str] = []
    n, parts = 0, []
    for line in lines:
        if not getattr(line, "continues_previous", False) or n == 0:
            n += 1
            parts = [len(labels)]
            labels.append(str(n))
        else:
            parts.append(len(labels))
            labels.append("")
            for k, row in enumerate(parts):
                labels[row] = f"{n}{chr(ord('a') + k) if k < 26 else k + 1}"
    return labels


class ReadingsTable(QTableWidget):
    """line · found by · attention decoder · CTC reading (see the module docstring)."""

    lineClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 4, parent)
        self.setHorizontalHeaderLabels(["line", "found by", "attention decoder", CTC_HEADER])
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.setMinimumHeight(92)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        hh = self.horizontalHeader()
        hh.setSectionResizeMode(COL_LINE, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(COL_PATH, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(COL_ATTN, QHeaderView.ResizeMode.Stretch)
        hh.setSectionResizeMode(COL_CTC, QHeaderView.ResizeMode.Stretch)
        self.horizontalHeaderItem(COL_PATH).setToolTip(
            "How the line was found: detected (CRAFT box) · detected + ink (widened over ink CRAFT missed) · "
            "whole image / region (one line, read whole) · uncovered ink (text CRAFT missed)")
        self.setToolTip("Each detected line read by the attention decoder (live) and by english_g2's own "
                        "CTC head, for comparison. Click a row to select the line's first token.")
        self.cellClicked.connect(lambda r, _c: self.lineClicked.emit(r))

    def set_lines(self, lines: list, has_ctc: bool = True) -> None:
        """One row per line (``core.tasks.ocr.TextLine``: its label and how it was found),
        readings empty; ``has_ctc`` False says in the header that the model has no CTC reading."""
        self.setRowCount(len(lines))
        for i, label in enumerate(line_labels(lines)):
            path = getattr(lines[i], "path", "detected")
            self._set_cell(i, COL_LINE, label)
            self._set_cell(i, COL_PATH, path, PATH_TIPS.get(path, ""))
            self._set_cell(i, COL_ATTN, "")
            self._set_cell(i, COL_CTC, "")
        self.horizontalHeaderItem(COL_CTC).setText(CTC_HEADER if has_ctc else f"{CTC_HEADER} — n/a for this model")

    def set_reading(self, row: int, text: str) -> None:
        """The attention decoder's reading of line ``row`` so far."""
        self._set_cell(row, COL_ATTN, text)

    def set_ctc(self, readings: list[str]) -> None:
        """The CTC readings of the lines, in order ("∅" where empty)."""
        for i, t in enumerate(readings[: self.rowCount()]):
            self._set_cell(i, COL_CTC, t if t else "∅")

    def reading(self, row: int) -> tuple[str, str]:
        """(attention-decoder text, CTC text) of row ``row``."""
        return tuple(self.item(row, c).text() if self.item(row, c) else "" for c in (COL_ATTN, COL_CTC))

    def line_path(self, row: int) -> str:
        """The "found by" cell of row ``row`` (``TextLine.path``)."""
        item = self.item(row, COL_PATH)
        return item.text() if item else ""

    def _set_cell(self, row: int, col: int, text: str, tip: str | None = None) -> None:
        item = self.item(row, col)
        if item is None:
            item = QTableWidgetItem()
            self.setItem(row, col, item)
        item.setText(text)
        if tip is not None:
            item.setToolTip(tip)
