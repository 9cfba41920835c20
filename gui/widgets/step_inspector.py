"""The selected step's distribution beside the inspector tabs: the top-k chart or the chain's
stages (``gui.widgets.stage_view``), a toggle between them, "Sample ×N" over the chart and the
"force…" field.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QButtonGroup, QHBoxLayout, QLineEdit, QPushButton, QSizePolicy, QSpinBox, QStackedWidget, QToolButton, QVBoxLayout,
    QWidget,
)

from core.events import StepEvent

from .stage_view import StageView


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
