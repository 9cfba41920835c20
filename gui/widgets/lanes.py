"""Strategies side by side: the "Lanes" view (issue 13, section 1).

::

    ┌ lanes: [1 greedy ▾] [2 beam:5 ▾] [3 sample:T=0.8 ▾] [4 min-p:0.1 ▾]  [−] [+]  [Run lanes] ┐
    │ reference: [the expected text ……………………………………]  [Load…]   WER · agreement mean 0.86        │
    ├ lane        log p   time  tokens  WER ─┬ 1 │The│quick│brown│fox│ …                          │
    │ 1 greedy    −3.21  0.41 s   23    12%  │ 2 │The│quick│ red │fox│ …   (differences outlined) │
    │ 2 beam:5    …                          │ 3 │The│ ∅   │brown│fox│ …                          │
    └─────────────────────────────────────────┴──────────────────────────────────────────────────┘

Each lane box takes a lane spec (``core.tasks.lane_spec``: ``STRATEGY[:ARG,...]``, "current" for
the options panel's options); a lane is the panel's options with the spec applied. "Run
lanes" asks the tab to decode them on one encoder output (``runRequested``); they grow
live. The summary gives each lane's log-probability (processed, the raw one in the
tooltip), its own decode time, its tokens and, with a reference, its WER (speech), CER
(OCR) or chrF (translation). The canvas shows the lanes aligned to lane 1 (difflib on
token ids, ``core.tasks.lanes.align_lanes``), one chip row per lane, wrapped like a sequence
alignment; chips are tinted by probability (viridis, 0..1) and outlined where a lane
differs from lane 1 (a gap is a dashed box). Clicking a chip shows that step's top-k
(``stepClicked``).

The view takes a :class:`~gui.lanes_state.LanesState` and follows its signals; the canvas
is :class:`~gui.widgets.lanes_canvas.LanesCanvas`.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.analysis.metrics import METRICS
from core.tasks.lane_spec import SPEC_HELP, parse_lane_spec
from core.tasks.lanes import MAX_LANES, MIN_LANES

from ..lanes_state import LanesState
from .lanes_canvas import LANE_COLORS, LanesCanvas

#: the lanes a new view offers (the issue's example)
DEFAULT_SPECS = ("greedy", "beam:5", "sample:T=0.8", "min-p:0.1")
#: the choices in each lane box's list (any spec can be typed)
SPEC_CHOICES = ("greedy", "beam:5", "beam:5,lp=0.6", "sample:T=0.8", "sample:T=1.2", "min-p:0.1", "top-p:0.9",
                "top-k:40", "diverse-beam:4,groups=2", "contrastive:alpha=0.6,k=4", "mirostat:tau=5", "current")
EMPTY = ("Choose 2 to 4 lanes above and press Run lanes: each decodes this input with its own strategy, all on one "
         "encoder output, side by side. Type a reference text to score them.")


def fmt_logprob(v: float) -> str:
    return "−∞" if v == -math.inf else f"{v:.2f}".replace("-", "−")


class LanesView(QWidget):
    """The lane boxes, the reference, the summary and the aligned lanes (module docstring).

    Signals:
        runRequested(list): the specs of the lanes to run (the tab builds and checks them).
        stepClicked(int, object): (lane, StepEvent) of a clicked chip.
    """

    runRequested = Signal(list)
    stepClicked = Signal(int, object)

    def __init__(self, state: LanesState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        metric_label = METRICS[state.metric][0]
        self.spec_boxes: list[QComboBox] = []
        self.spec_row = QHBoxLayout()
        self.spec_row.setSpacing(4)
        self.spec_row.addWidget(QLabel("lanes"))
        for spec in DEFAULT_SPECS:
            self._add_box(spec)
        self.remove_button = QPushButton("−")
        self.remove_button.setToolTip(f"one lane fewer (at least {MIN_LANES})")
        self.add_button = QPushButton("+")
        self.add_button.setToolTip(f"one lane more (at most {MAX_LANES})")
        for b in (self.remove_button, self.add_button):
            b.setFixedWidth(28)
        self.run_button = QPushButton("Run lanes")
        self.run_button.setToolTip("decode every lane on this input, one encoder pass shared, all growing live")
        self.spec_row.addStretch(0)
        self.spec_row.addWidget(self.remove_button)
        self.spec_row.addWidget(self.add_button)
        self.spec_row.addWidget(self.run_button)
        self.remove_button.clicked.connect(self.remove_lane)
        self.add_button.clicked.connect(lambda: self.add_lane())
        self.run_button.clicked.connect(self.request_run)

        self.reference_edit = QLineEdit()
        self.reference_edit.setPlaceholderText(f"reference text (optional): each lane gets its {metric_label}")
        self.reference_edit.setClearButtonEnabled(True)
        self.reference_edit.setToolTip(f"The expected text (optional): each lane's output gets its {metric_label} "
                                       "against it, in the table; Load… reads it from a .txt file")
        self.reference_button = QPushButton("Load…")
        self.reference_button.setToolTip("load the reference from a UTF-8 .txt file")
        self.reference_button.clicked.connect(self._pick_reference)
        self.agreement_label = QLabel()
        self.agreement_label.setToolTip("token-level agreement between the lanes: difflib's ratio on token ids "
                                        "(2 × matched tokens / all tokens), averaged over the pairs")
        ref_row = QHBoxLayout()
        ref_row.setSpacing(4)
        ref_row.addWidget(QLabel("reference"))
        ref_row.addWidget(self.reference_edit, 1)
        ref_row.addWidget(self.reference_button)
        ref_row.addWidget(self.agreement_label)
        self._ref_timer = QTimer(self)
        self._ref_timer.setSingleShot(True)
        self._ref_timer.setInterval(250)
        self._ref_timer.timeout.connect(lambda: self.state.set_reference(self.reference_edit.text()))
        self.reference_edit.textChanged.connect(lambda _t: self._ref_timer.start())

        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(["lane", "log p", "time", "tok", metric_label, "agree"])
        self.table.horizontalHeaderItem(1).setToolTip("total log-probability of the lane's tokens under its own "
                                                      "(processed) distribution; the tooltip gives the raw one")
        self.table.horizontalHeaderItem(2).setToolTip("seconds of this lane's own decoding (the shared encoder "
                                                      "pass not counted)")
        self.table.horizontalHeaderItem(3).setToolTip("tokens the lane emitted")
        self.table.horizontalHeaderItem(5).setToolTip("token agreement with lane 1 (difflib ratio)")
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setStretchLastSection(False)
        self.canvas = LanesCanvas(state)
        self.canvas.chipClicked.connect(self.stepClicked.emit)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self.canvas)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.earlier_label = QLabel()
        self.earlier_label.setWordWrap(True)
        self.earlier_label.setStyleSheet("QLabel { background: #fff4d6; color: #5c4400; padding: 2px 4px; }")
        self.earlier_label.hide()
        self.hint = QLabel(EMPTY)
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("color: palette(placeholder-text);")
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.hint)
        rl.addWidget(self.scroll, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.table)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setSizes([300, 460])

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.setSpacing(4)
        lay.addLayout(self.spec_row)
        lay.addLayout(ref_row)
        lay.addWidget(self.earlier_label)
        lay.addWidget(self.splitter, 1)
        self.setMinimumSize(300, 160)

        self._timer = QTimer(self)  # redraws at most every 60 ms while lanes grow
        self._timer.setSingleShot(True)
        self._timer.setInterval(60)
        self._timer.timeout.connect(self.refresh)
        state.started.connect(self.refresh)
        state.cleared.connect(self.refresh)
        state.finished.connect(self.refresh)
        state.scoresChanged.connect(self._fill_table)
        state.markedEarlier.connect(lambda _what: self.refresh())
        state.grew.connect(self._grew)
        self._update_buttons()
        self.refresh()

    def sizeHint(self) -> QSize:
        return QSize(760, 300)

    # ---------------------------------------------------------------- lanes
    def _add_box(self, spec: str) -> QComboBox:
        box = QComboBox()
        box.setEditable(True)
        box.addItems(SPEC_CHOICES)
        box.setCurrentText(spec)
        box.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        box.setMinimumContentsLength(9)
        box.setToolTip(SPEC_HELP)
        k = len(self.spec_boxes)
        box.setStyleSheet(f"QComboBox {{ border-left: 4px solid {LANE_COLORS[k % len(LANE_COLORS)]}; }}")
        box.editTextChanged.connect(lambda _t, b=box: self._check_box(b))
        box.lineEdit().returnPressed.connect(self.request_run)
        self.spec_boxes.append(box)
        self.spec_row.insertWidget(len(self.spec_boxes), box)
        return box

    def specs(self) -> list[str]:
        """The lane specs as typed, in lane order."""
        return [b.currentText().strip() for b in self.spec_boxes]

    def set_specs(self, specs: list[str]) -> None:
        """Show these lanes (2 to 4 specs)."""
        specs = list(specs)[:MAX_LANES]
        while len(self.spec_boxes) < max(MIN_LANES, len(specs)):
            self._add_box("greedy")
        while len(self.spec_boxes) > max(MIN_LANES, len(specs)):
            self.spec_boxes.pop().deleteLater()
        for box, spec in zip(self.spec_boxes, specs):
            box.setCurrentText(spec)
        self._update_buttons()

    def add_lane(self, spec: str = "greedy") -> None:
        if len(self.spec_boxes) < MAX_LANES:
            self._add_box(spec)
        self._update_buttons()

    def remove_lane(self) -> None:
        if len(self.spec_boxes) > MIN_LANES:
            self.spec_boxes.pop().deleteLater()
        self._update_buttons()

    def _check_box(self, box: QComboBox) -> str:
        """Mark a box whose spec does not parse (the reason in its tooltip); the reason or ""."""
        try:
            parse_lane_spec(box.currentText())
            why = ""
        except ValueError as exc:
            why = str(exc)
        k = self.spec_boxes.index(box) if box in self.spec_boxes else 0
        edge = LANE_COLORS[k % len(LANE_COLORS)]
        box.setStyleSheet(f"QComboBox {{ border-left: 4px solid {edge}; }}" if not why else
                          f"QComboBox {{ border-left: 4px solid {edge}; background: #fde2e1; }}")
        box.setToolTip(why or SPEC_HELP)
        self._update_buttons()
        return why

    def spec_errors(self) -> list[str]:
        """Why each box that does not parse is wrong (empty when all parse)."""
        out = []
        for b in self.spec_boxes:
            try:
                parse_lane_spec(b.currentText())
            except ValueError as exc:
                out.append(str(exc))
        return out

    def _update_buttons(self) -> None:
        self.add_button.setEnabled(len(self.spec_boxes) < MAX_LANES)
        self.remove_button.setEnabled(len(self.spec_boxes) > MIN_LANES)
        self.run_button.setEnabled(not self.spec_errors())

    def request_run(self) -> None:
        """Ask for the lanes as typed (``runRequested``), unless a spec does not parse."""
        if not self.spec_errors():
            self.runRequested.emit(self.specs())

    # ---------------------------------------------------------------- reference
    def set_reference(self, text: str) -> None:
        """Type ``text`` into the reference box and score the lanes now."""
        self.reference_edit.setText(text)
        self.reference_edit.setCursorPosition(0)
        self._ref_timer.stop()
        self.state.set_reference(text)

    def load_reference(self, path: str) -> str:
        """Read a UTF-8 .txt file into the reference box; "" or why it could not."""
        from pathlib import Path

        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            return f"Could not read the reference {Path(path).name}: {getattr(exc, 'strerror', None) or exc}"
        self.set_reference(text.strip())
        return ""

    def _pick_reference(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Reference text", "", "Text (*.txt);;All files (*)")
        if path:
            why = self.load_reference(path)
            if why:
                self.agreement_label.setText(why)

    # ---------------------------------------------------------------- drawing
    def _grew(self) -> None:
        if not self._timer.isActive():
            self._timer.start()

    def refresh(self) -> None:
        """Redraw the summary and the aligned lanes from the state."""
        self._timer.stop()
        has = bool(self.state.lanes)
        self.hint.setVisible(not has)
        self.scroll.setVisible(has)
        self.canvas.selected = None if not has else self.canvas.selected
        self.canvas.relayout()
        self._show_earlier()
        self._fill_table()
        self._fit_table()

    def _show_earlier(self) -> None:
        """The note over lanes of an earlier run (``LanesState.earlier``), or none."""
        what = self.state.earlier if self.state.lanes else ""
        self.earlier_label.setVisible(bool(what))
        if what:
            self.earlier_label.setText(f"These lanes are from an earlier run ({what}); the window now decodes with "
                                       "other settings. Press Run lanes to compare on the current run.")

    def _fit_table(self) -> None:
        """Widen the summary to its columns (the lane specs readable), the lanes keeping at
        least 240 px."""
        if not self.state.lanes:
            return
        self.table.resizeColumnsToContents()
        need = self.table.horizontalHeader().length() + 2 * self.table.frameWidth() + 2
        left, right = self.splitter.sizes()
        total = left + right
        if total > 0 and left != need:
            left = min(need, max(0, total - 240))
            self.splitter.setSizes([left, total - left])

    def _fill_table(self) -> None:
        lanes = self.state.lanes
        self.table.setRowCount(len(lanes))
        agree = self.state.agreement() if lanes else None
        earlier = f" · earlier run ({self.state.earlier})" if self.state.earlier else ""
        for k, lane in enumerate(lanes):
            searching = lane.beams is not None and lane.running
            tokens = f"{len(lane.steps)}" + (f" (beam step {lane.beams.step + 1})" if searching else "")
            time_s = lane.time_s
            time_text, time_tip = (
                "…" if time_s is None else "stopped" if lane.finished.cancelled else f"{time_s:.2f} s",
                f"ended: {lane.finished.reason}" if lane.finished is not None else "decoding")
            fast = self.state.speedup(k)
            if fast is not None and not earlier:  # a speculative lane beside its plain decoding
                spec = lane.finished.stats.speculative
                time_text += f" · {fast[0]:.2f}×"
                time_tip += (f"\nspeed-up per token over lane {fast[1] + 1} ({lanes[fast[1]].spec}), measured in "
                             "this run" + (f"; α {spec.acceptance_rate:.2f}, {spec.tokens_per_target_call:.2f} "
                                           "tokens per target call" if spec is not None else ""))
            cells = [
                (f"{k + 1}  {lane.spec}{earlier}", (lane.finished.text if lane.finished else "running…")
                 + (f"\n(decoded in an earlier run: {self.state.earlier})" if earlier else "")),
                (fmt_logprob(lane.logprob), f"raw log p {fmt_logprob(lane.raw_logprob)}"),
                (time_text, time_tip),
                (tokens, ""),
                (lane.score.text().split(" ", 1)[1] if lane.score is not None else ("—" if lane.finished else "…"),
                 self.state.reference_error),
                (f"{agree[0, k]:.2f}" if agree is not None else "", ""),
            ]
            for c, (text, tip) in enumerate(cells):
                item = QTableWidgetItem(text)
                if tip:
                    item.setToolTip(tip)
                if c == 0:
                    item.setForeground(QColor(LANE_COLORS[k % len(LANE_COLORS)]))
                    font = item.font()
                    font.setBold(True)
                    font.setItalic(bool(earlier))
                    item.setFont(font)
                elif earlier:
                    item.setForeground(QColor("#8a8a8a"))
                if c != 0:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(k, c, item)
        if len(lanes) >= 2:
            best = self._best_lane()
            what = f" · best {METRICS[self.state.metric][0]}: lane {best + 1}" if best is not None else ""
            self.agreement_label.setText(f"agreement {self.state.mean_agreement():.2f}{what}")
        else:
            self.agreement_label.setText("")
        if self.state.reference_error:
            self.agreement_label.setText(self.state.reference_error)

    def _best_lane(self) -> int | None:
        scored = [(k, lane.score) for k, lane in enumerate(self.state.lanes) if lane.score is not None]
        if not scored:
            return None
        higher = scored[0][1].higher_is_better
        return max(scored, key=lambda ks: ks[1].value if higher else -ks[1].value)[0]

    # ---------------------------------------------------------------- queries (tests, screenshots)
    def summary(self) -> list[list[str]]:
        """The summary table's cells, row by row (after a pending redraw)."""
        if self._timer.isActive():
            self.refresh()
        return [[self.table.item(r, c).text() if self.table.item(r, c) else "" for c in range(self.table.columnCount())]
                for r in range(self.table.rowCount())]
