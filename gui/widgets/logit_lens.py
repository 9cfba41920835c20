"""The logit lens, live: decoder layers x steps (nostalgebraist 2020, "interpreting GPT:
the logit lens").

Each column is a decoded step, each row a decoder layer (layer 0 on top, the output layer
at the bottom, labelled "out"): the cell shows the token the model's final norm and output
projection make of that layer's output, the layer's top-1, with its probability as the
cell colour (viridis, fixed levels 0..1, as every probability in the app). A cell whose
top-1 is the token the step emitted is drawn in bold: the column shows at which layer the
output emerged. The header row above the grid holds the emitted tokens.

"Δ chosen" switches the cells to what each layer did to the emitted token: the change of
its log-probability from the layer before (nats; > 0 promoted, < 0 suppressed, as the
llm-transparency-tool shows per layer), on a diverging colour scale fixed at
±``DELTA_SCALE`` nats. Hovering a cell shows the layer's top-k, the emitted token's
probability there and the change; clicking selects the step (``stepSelected``).

The lens costs a projection per layer and step, so it is computed only when asked: the
"Capture" box (``captureChanged``) makes the tab decode again with
``DecodingOptions.capture_lens``. Columns arrive in batches (``append_steps``, once per
frame from the tab); only the visible columns are painted, so thousands of steps scroll
as fast as ten. The view follows the newest step unless the user scrolled away.

The view takes the tab's :class:`~gui.run_state.RunState`: a new run clears it, another
branch made current rebuilds it, the run's selection outlines a column.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from core.events import StepEvent

from .colors import prob_color
from .lens_grid import (
    COL_W, DELTA_LUT, DELTA_SCALE, GUTTER_W, HEADER_H, MAX_ROW_H, MIN_ROW_H, MODES, SELECT_COLOR, LensGrid, cell_text,
    delta_color, fmt_delta,
)

# re-exported: what tests reach through this module (the grid is lens_grid.py)
__all__ = ["COL_W", "DELTA_LUT", "DELTA_SCALE", "GUTTER_W", "HEADER_H", "MAX_ROW_H", "MIN_ROW_H", "MODES",
           "SELECT_COLOR", "LensGrid", "LogitLensView", "cell_text", "delta_color", "fmt_delta"]

class LogitLensView(QWidget):
    """The logit-lens tab: capture switch, mode, legend and the grid.

    Args:
        run: the tab's :class:`~gui.run_state.RunState` (optional: a view fed by hand in tests).

    Signals:
        stepSelected(int): a cell (or a header token) was clicked.
        captureChanged(bool): the user switched capturing the lens on or off.
    """

    stepSelected = Signal(int)
    captureChanged = Signal(bool)

    def __init__(self, run=None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run = run
        self.capture_box = QCheckBox("Capture")
        self.capture_box.setToolTip("compute the logit lens while decoding: the run is decoded again with it "
                                    "(a projection per decoder layer and step, about 1.5-2.5x the step time)")
        self.mode_box = QComboBox()
        self.mode_box.addItem("top-1 token", "top-1")
        self.mode_box.addItem("Δ chosen", "delta")
        self.mode_box.setToolTip("top-1 token: each layer's most probable token, coloured by its probability\n"
                                 "Δ chosen: how much each layer raised (red) or lowered (blue) the log-probability "
                                 "of the emitted token, from the layer before")
        self.legend = QLabel()
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.grid = LensGrid()
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        title = QLabel("<b>Logit lens</b>")
        title.setToolTip("each decoder layer's output through the model's final norm and output projection "
                         "(nostalgebraist 2020); bottom row = the model's own raw distribution")
        top.addWidget(title)
        top.addWidget(self.capture_box)
        top.addWidget(self.mode_box)
        top.addWidget(self.legend, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.grid, 1)
        self.capture_box.toggled.connect(self._capture_toggled)
        self.mode_box.currentIndexChanged.connect(lambda _i: self.set_mode(self.mode_box.currentData()))
        self.grid.cellClicked.connect(self.stepSelected)
        if run is not None:
            run.cleared.connect(self.clear)
            run.currentBranchChanged.connect(lambda _b: self.set_steps(run.steps()))
            run.selectionChanged.connect(self.select_step)
            run.stepsAdded.connect(self._steps_added)  # once per frame
            run.stepsRetracted.connect(lambda _b, _s: self.set_steps(run.steps()))
        self._update_legend()
        self._update_placeholder()

    # ---------------------------------------------------------------- state
    @property
    def capture(self) -> bool:
        """Whether the next runs capture the lens."""
        return self.capture_box.isChecked()

    def set_capture(self, on: bool) -> None:
        """Tick or clear the capture box without telling anyone (restoring settings)."""
        self.capture_box.blockSignals(True)
        self.capture_box.setChecked(on)
        self.capture_box.blockSignals(False)
        self._update_placeholder()

    def _capture_toggled(self, on: bool) -> None:
        self._update_placeholder()
        self.captureChanged.emit(on)

    def set_mode(self, mode: str) -> None:
        """"top-1" (tokens coloured by probability) or "delta" (the emitted token's change per layer)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.grid.mode = mode
        i = self.mode_box.findData(mode)
        if self.mode_box.currentIndex() != i:
            self.mode_box.setCurrentIndex(i)
        self._update_legend()
        self.grid.viewport().update()

    def _update_legend(self) -> None:
        if self.grid.mode == "delta":
            lo, hi = delta_color(-DELTA_SCALE).name(), delta_color(DELTA_SCALE).name()
            self.legend.setText(f"<span style='background:{lo};color:white'>&nbsp;−{DELTA_SCALE:g}&nbsp;</span> "
                                f"suppressed · promoted <span style='background:{hi};color:white'>"
                                f"&nbsp;+{DELTA_SCALE:g}&nbsp;</span> nats")
        else:
            lo, hi = prob_color(0.0).name(), prob_color(1.0).name()
            self.legend.setText(f"p <span style='background:{lo};color:white'>&nbsp;0&nbsp;</span>"
                                f"<span style='background:{hi}'>&nbsp;1&nbsp;</span> · <b>bold</b> = the emitted token")

    def _update_placeholder(self) -> None:
        if not self.capture:
            text = "Tick “Capture” to see what each decoder layer would predict (the run is decoded again with it)."
        elif self.grid.steps:
            text = "This run has no lens (its model cannot give one)."
        else:
            text = "The lens fills in as tokens arrive."
        self.grid.placeholder = text
        self.grid.viewport().update()

    # ---------------------------------------------------------------- feeding
    def clear(self) -> None:
        self.grid.clear()
        self._update_placeholder()

    def set_steps(self, steps: list[StepEvent]) -> None:
        """Show exactly ``steps`` (another branch made current)."""
        self.grid.clear()
        self.append_steps(steps)
        if self.run is not None:
            self.select_step(self.run.selected())

    def _steps_added(self, _branch: int, steps: list[StepEvent]) -> None:
        """The run's new steps; the selected step among them is outlined (the selection outlives
        a run: Capture decodes the run again with the step still selected), as ``follow_run`` does."""
        self.append_steps(steps)
        sel = self.run.selected() if self.run is not None else None
        if sel is not None and any(ev.step == sel for ev in steps):
            self.select_step(sel)

    def append_steps(self, steps: list[StepEvent]) -> None:
        """A batch of new steps (one frame's)."""
        if steps:
            self.grid.add(steps)
            self._update_placeholder()

    def select_step(self, step: int | None) -> None:
        """Outline ``step``'s column and scroll it into view (None: follow the newest)."""
        self.grid.selected = step
        col = self.grid.col_of.get(step) if step is not None else None
        if col is not None:
            self.grid.scroll_to_column(col)
        self.grid.viewport().update()

    # ---------------------------------------------------------------- queries (tests)
    def column_count(self) -> int:
        return len(self.grid.steps)

    def layer_count(self) -> int:
        return self.grid.n_layers

    def cell(self, step: int, layer: int) -> tuple[str, QColor]:
        """(label, colour) of the cell of ``step`` and ``layer`` as drawn in the current mode."""
        col = self.grid.col_of[step]
        return self.grid.cell_label(col, layer), self.grid.cell_color(col, layer)

    def tooltip(self, step: int, layer: int) -> str:
        return self.grid.tooltip(self.grid.col_of[step], layer)

