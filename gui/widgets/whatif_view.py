"""The input what-if view: which output tokens depended on a masked part of the input, and
which ones the decoder's prior alone explains (issue 13, section 3).

A toolbar says what is masked (the tab's mask: a silenced span of the waveform, a blanked
image region, dropped source words) with **What if?** (re-decode the touched segments without
it and score the original tokens under it) and **No input** (score every original token under
an empty input: the language prior). The result is drawn as one cell per original token:

- mask: the chip is tinted by Δp = p(masked) − p(input) on a diverging scale (vermillion:
  the token lost probability without that part of the input; blue: it gained; light: no
  change), ``0.99→0.01`` under it; tokens that depended on the masked part
  (``core.tasks.whatif.TokenShift.depends``) are outlined. Below, the what-if output beside the
  original: tokens the what-if no longer writes struck through, tokens it writes instead in
  bold;
- no input: the chip is tinted by the prior's probability (viridis, fixed 0..1 as everywhere),
  ``in 0.99 · prior 0.58`` under it; hallucination-prone tokens
  (``core.tasks.whatif.TokenShift.prior_explained``) are outlined and marked ⚠.

Clicking a cell selects that step (``stepClicked``). The view holds no model state: the tab
(``gui.tabs.whatif.WhatIfs``) gives it the result.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from core.events import StepEvent

from .colors import prob_color, text_color_on
from .fork_diff import align
from .token_text import display_text
from .wrap_canvas import WrapCanvas

#: the marks in the token stream and the outlines here (Okabe & Ito: vermillion, reddish purple)
DEPEND_COLOR = "#D55E00"
PRIOR_COLOR = "#CC79A7"
#: the diverging scale of Δp: lost (−1) … no change (0) … gained (+1)
LOST, SAME, GAINED = QColor("#b2182b"), QColor("#f2f2f2"), QColor("#2166ac")
EMPTY = ("Mask part of the input, then press What if?: the segments it touches are decoded again without it, "
         "and each token of the run shows how its probability changed. No input: each token's probability "
         "under an empty input (the decoder's language prior); tokens the prior explains as well as the input "
         "are marked as hallucination-prone.")
_PAD, _GAP = 4, 4


def delta_color(delta: float) -> QColor:
    """The diverging colour of a probability change ``delta`` (clipped to −1..1)."""
    d = max(-1.0, min(1.0, float(delta)))
    end = LOST if d < 0 else GAINED
    t = abs(d) ** 0.7  # small changes stay visible

    def mix(a: int, b: int) -> int:
        return int(round(a + (b - a) * t))

    return QColor(mix(SAME.red(), end.red()), mix(SAME.green(), end.green()), mix(SAME.blue(), end.blue()))


@dataclass(frozen=True)
class Cell:
    """One drawn token: its rect, the shift it shows, its chip colour, its second line, whether
    it is flagged (depended / hallucination-prone)."""

    rect: QRect
    shift: object
    color: QColor
    note: str
    flagged: bool


class _ShiftCanvas(WrapCanvas):
    """The cells, wrapping like text (chip over a small line of numbers)."""

    cellClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = "mask"
        self.shifts: list = []
        self.selected: int | None = None
        self._cells: list[Cell] = []
        self._small = QFont(self.font())
        self._small.setPointSizeF(max(6.5, self.font().pointSizeF() - 2))
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)

    def set_shifts(self, kind: str, shifts: list) -> None:
        self.kind, self.shifts = kind, list(shifts)
        self.relayout()

    def relayout(self) -> None:
        fm, sm = self.fontMetrics(), QFontMetrics(self._small)
        chip_h = fm.height() + 2 * _PAD
        cell_h = chip_h + sm.height() + 2
        x, y = _GAP, _GAP
        self._cells = []
        prev_seg = None
        for s in self.shifts:
            if self.kind == "mask":
                color, note, flagged = delta_color(s.delta), f"{s.p_input:.2f}→{s.p_other:.2f}", s.depends
            else:
                color, flagged = prob_color(s.p_other), s.prior_explained
                note = f"{s.p_input:.2f} · {s.p_other:.2f}" + (" ⚠" if flagged else "")
            w = max(fm.horizontalAdvance(display_text(s.text)), sm.horizontalAdvance(note)) + 2 * _PAD
            newline = prev_seg is not None and s.segment != prev_seg
            if (x + w > self.layout_width - _GAP and x > _GAP) or newline:
                x, y = _GAP, y + cell_h + 6
            self._cells.append(Cell(QRect(x, y, w, cell_h), s, color, note, flagged))
            x += w + _GAP
            prev_seg = s.segment
        height = y + cell_h + _GAP if self.shifts else 10
        self.set_content_height(height)

    def cells(self) -> list[Cell]:
        return list(self._cells)

    def cell_at(self, pos) -> Cell | None:
        return next((c for c in self._cells if c.rect.contains(pos)), None)

    def mousePressEvent(self, e) -> None:  # noqa: N802
        c = self.cell_at(e.position().toPoint())
        if c is not None and e.button() == Qt.MouseButton.LeftButton:
            self.cellClicked.emit(c.shift.step)
        super().mousePressEvent(e)

    def mouseMoveEvent(self, e) -> None:  # noqa: N802
        c = self.cell_at(e.position().toPoint())
        if c is None:
            QToolTip.hideText()
        else:
            QToolTip.showText(e.globalPosition().toPoint(), shift_tooltip(self.kind, c.shift), self)
        super().mouseMoveEvent(e)

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        chip_h = self.fontMetrics().height() + 2 * _PAD
        flag_pen = QPen(QColor(DEPEND_COLOR if self.kind == "mask" else PRIOR_COLOR), 2.5)
        for c in self._cells:
            chip = QRect(c.rect.left(), c.rect.top(), c.rect.width(), chip_h)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(c.color)
            p.drawRoundedRect(chip, 4, 4)
            p.setFont(self.font())
            p.setPen(text_color_on(c.color))
            p.drawText(chip, Qt.AlignmentFlag.AlignCenter, display_text(c.shift.text))
            p.setBrush(Qt.BrushStyle.NoBrush)
            if c.flagged:
                p.setPen(flag_pen)
                p.drawRoundedRect(chip.adjusted(-1, -1, 1, 1), 5, 5)
            if self.selected == c.shift.step:
                p.setPen(QPen(QColor("#ff3b30"), 2.0, Qt.PenStyle.DashLine))
                p.drawRoundedRect(chip.adjusted(-3, -3, 3, 3), 6, 6)
            p.setFont(self._small)
            p.setPen(self.palette().text().color())
            p.drawText(QRect(c.rect.left(), chip.bottom() + 1, c.rect.width(), c.rect.height() - chip_h),
                       Qt.AlignmentFlag.AlignCenter, c.note)
        p.end()


def shift_tooltip(kind: str, s) -> str:
    """A cell's tooltip: the numbers and what the masked / empty input's model prefers there."""
    head = f"step {s.step}: {s.text!r}"
    if kind == "mask":
        verdict = "depended on the masked part" if s.depends else "did not depend much on the masked part"
        return (f"{head}\np = {s.p_input:.3f} with the input, {s.p_other:.3f} without the masked part "
                f"(Δp {s.delta:+.3f})\n{verdict}\nwithout it the model puts {s.other_top!r} first here")
    verdict = ("hallucination-prone: the decoder's prior alone explains it about as well as the input"
               if s.prior_explained else "the input explains it")
    return (f"{head}\np = {s.p_input:.3f} with the input, {s.p_other:.3f} with no input (prior); "
            f"ln ratio {s.pmi:+.2f}\n{verdict}\nwith no input the model puts {s.other_top!r} first here")


def diff_html(original: list[StepEvent], whatif: list[StepEvent]) -> str:
    """The what-if's tokens against the original's, as HTML: equal tokens plain, the
    original's tokens the what-if lost struck through (grey), the what-if's new tokens bold."""
    out = []
    for col in align(original, whatif):
        if col.op == "equal":
            out.append(html.escape(col.b.text.replace("▁", " ")))
            continue
        if col.a is not None:
            out.append(f"<s style='color:#888'>{html.escape(col.a.text.replace('▁', ' '))}</s>")
        if col.b is not None:
            out.append(f"<b style='color:{DEPEND_COLOR}'>{html.escape(col.b.text.replace('▁', ' '))}</b>")
    return "".join(out).strip() or "(nothing)"


class WhatIfView(QWidget):
    """The what-if toolbar and result (see the module docstring).

    Signals:
        whatIfRequested(): What if? was pressed.
        noInputRequested(): No input was pressed.
        clearRequested(): Clear was pressed (forget the mask and the result).
        stepClicked(int): a token cell was clicked (its step in the original run).
    """

    whatIfRequested = Signal()
    noInputRequested = Signal()
    clearRequested = Signal()
    stepClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind: str | None = None
        self.mask_label = QLabel()
        self.mask_label.setWordWrap(True)
        self.whatif_button = QPushButton("What if?")
        self.whatif_button.setToolTip("Decode the segments the mask touches again without the masked part, and "
                                      "score every token of the run under the masked input")
        self.whatif_button.clicked.connect(self.whatIfRequested)
        self.noinput_button = QPushButton("No input")
        self.noinput_button.setToolTip(
            "Score every token of the run under an empty input (silence / a blank image / an empty source): the "
            "probability the decoder's language prior alone gives it. Tokens the prior explains about as well "
            "as the input are marked as hallucination-prone.")
        self.noinput_button.clicked.connect(self.noInputRequested)
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Forget the mask and the result")
        self.clear_button.clicked.connect(self.clearRequested)
        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.mask_label, 1)
        for b in (self.whatif_button, self.noinput_button, self.clear_button):
            bar.addWidget(b)
        self.summary = QLabel(EMPTY)
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.canvas = _ShiftCanvas()
        self.canvas.cellClicked.connect(self.stepClicked)
        self.diff_label = QLabel()
        self.diff_label.setWordWrap(True)
        self.diff_label.setTextFormat(Qt.TextFormat.RichText)
        self.diff_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        body = QWidget()
        blay = QVBoxLayout(body)
        blay.setContentsMargins(0, 0, 0, 0)
        blay.setSpacing(4)
        blay.addWidget(self.canvas)
        blay.addWidget(self.diff_label)
        blay.addStretch(1)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(body)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.setSpacing(4)
        lay.addLayout(bar)
        lay.addWidget(self.summary)
        lay.addWidget(self.scroll, 1)
        self.setMinimumSize(260, 160)
        self.set_mask(None, "")
        self.diff_label.hide()

    def sizeHint(self) -> QSize:
        return QSize(480, 300)

    # ---------------------------------------------------------------- API
    def set_mask(self, description: str | None, hint: str) -> None:
        """Say what is masked (None: nothing yet, ``hint`` says how to mask); What if? needs a mask."""
        self._mask_plain = f"Mask: {description}" if description else f"Mask: none — {hint}"
        if description:
            self.mask_label.setText(f"<b>Mask:</b> {html.escape(description)}")
        else:
            self.mask_label.setText(f"<b>Mask:</b> none — {html.escape(hint)}")
        self.whatif_button.setEnabled(bool(description))

    def mask_text(self) -> str:
        """What the mask line says, as plain text."""
        return self._mask_plain

    def set_busy(self, busy: bool) -> None:
        """Disable the buttons while a what-if runs."""
        for b in (self.noinput_button, self.clear_button):
            b.setEnabled(not busy)
        self.whatif_button.setEnabled(not busy and "none —" not in self._mask_plain)
        if busy:
            self.summary.setText("<i>computing…</i>")

    def show_result(self, kind: str, description: str, shifts: list, *, original: list[StepEvent] | None = None,
                    whatif: list[StepEvent] | None = None, seconds: float = 0.0, note: str = "") -> None:
        """Show a what-if's (``kind`` "mask") or the prior's (``kind`` "prior") per-token result."""
        self.kind = kind
        self.canvas.set_shifts(kind, shifts)
        took = f" · {seconds:.1f} s" if seconds else ""
        if kind == "mask":
            segs = sorted({s.segment for s in shifts})
            n_dep = sum(1 for s in shifts if s.depends)
            self.summary.setText(
                f"<b>What if: {html.escape(description)}</b> — segment{'s' if len(segs) != 1 else ''} "
                f"{', '.join(str(s + 1) for s in segs) or '–'} decoded again{took}. "
                f"<span style='color:{DEPEND_COLOR}'><b>{n_dep}</b> of {len(shifts)} tokens depended on it</span> "
                f"(p at least halved and down ≥ 0.1, outlined). Chip colour: Δp, "
                f"<span style='color:{LOST.name()}'>lost</span> … <span style='color:{GAINED.name()}'>gained</span>."
                + (f" {html.escape(note)}" if note else ""))
            if original is not None and whatif is not None:
                self.diff_label.setText(f"<b>original:</b> {html.escape(_plain(original))}<br>"
                                        f"<b>what if:</b> {diff_html(original, whatif)}")
                self.diff_label.show()
            else:
                self.diff_label.hide()
        else:
            n = sum(1 for s in shifts if s.prior_explained)
            self.summary.setText(
                f"<b>No input</b> ({html.escape(description.removeprefix('no input: '))}){took}: under each token "
                f"p with the input · p with no input (the decoder's prior; chip colour). "
                f"<span style='color:{PRIOR_COLOR}'><b>{n}</b> of {len(shifts)} tokens are hallucination-prone</span>"
                f" (⚠: the prior gives ≥ 0.1 and the input less than doubles it).")
            self.diff_label.hide()

    def clear_result(self) -> None:
        self.kind = None
        self.canvas.set_shifts("mask", [])
        self.summary.setText(EMPTY)
        self.diff_label.hide()

    def select_step(self, step: int | None) -> None:
        """Outline the cell of ``step`` (the selected token)."""
        self.canvas.selected = step
        self.canvas.update()

    def cells(self) -> list[Cell]:
        """The drawn cells (tests)."""
        return self.canvas.cells()

    def summary_text(self) -> str:
        return self.summary.text()

    def diff_text(self) -> str:
        return self.diff_label.text() if not self.diff_label.isHidden() else ""


def _plain(steps: list[StepEvent]) -> str:
    return "".join(e.text for e in steps).replace("▁", " ").strip()
