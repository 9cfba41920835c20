"""The decoding-options panel: strategy buttons and slider + spinbox pairs.

Emits ``optionsChanged(DecodingOptions)`` debounced (a single-shot ``QTimer``, 250 ms
by default) so dragging a slider re-decodes once, not per pixel. Controls that the
chosen strategy ignores are disabled but keep their values (temperature/top-k/top-p
and the seed only matter for sampling; beam width and length penalty only for beam
search).
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QButtonGroup,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QRadioButton,
    QSlider,
    QSpinBox,
    QToolButton,
    QWidget,
)

from core.options import STRATEGIES, DecodingOptions

#: which strategies each field matters for (others: all strategies)
_ONLY_FOR = {
    "temperature": ("sample",),
    "top_k": ("sample",),
    "top_p": ("sample",),
    "seed": ("sample",),
    "num_beams": ("beam",),
    "length_penalty": ("beam",),
}


class SliderSpin(QWidget):
    """A horizontal slider coupled to a spin box (int or float).

    The slider moves in ``step`` increments between ``minimum`` and ``maximum``; the
    spin box shows ``decimals`` digits (0 = integers). ``valueChanged(float)`` fires
    on every change from either control.
    """

    valueChanged = Signal(float)

    def __init__(
        self,
        minimum: float,
        maximum: float,
        step: float,
        decimals: int = 0,
        special: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._min, self._max, self._step = float(minimum), float(maximum), float(step)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, round((self._max - self._min) / self._step))
        self.slider.setMinimumWidth(80)
        if decimals:
            self.spin: QAbstractSpinBox = QDoubleSpinBox()
            self.spin.setDecimals(decimals)
            self.spin.setSingleStep(step)
        else:
            self.spin = QSpinBox()
            self.spin.setSingleStep(max(1, int(step)))
        self.spin.setRange(minimum, maximum)
        if special:
            self.spin.setSpecialValueText(special)  # shown at the minimum, e.g. "off"
        self.spin.setKeyboardTracking(False)
        self.spin.setMinimumWidth(72)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.slider, 1)
        lay.addWidget(self.spin)
        self.slider.valueChanged.connect(self._from_slider)
        self.spin.valueChanged.connect(self._from_spin)

    def value(self) -> float:
        """The current value (as shown in the spin box)."""
        return float(self.spin.value())

    def setValue(self, value: float) -> None:
        """Set both controls (clamped to the range); emits ``valueChanged`` if it changed."""
        self.spin.setValue(value)

    def _from_slider(self, pos: int) -> None:
        v = self._min + pos * self._step
        if abs(v - self.value()) > 1e-9:
            self.spin.setValue(v)

    def _from_spin(self, v: float) -> None:
        pos = round((float(v) - self._min) / self._step)
        with QSignalBlocker(self.slider):
            self.slider.setValue(pos)
        self.valueChanged.emit(float(v))


class OptionsPanel(QWidget):
    """Edits a ``DecodingOptions``; emits ``optionsChanged`` after ``debounce_ms`` of quiet.

    Signals:
        optionsChanged(object): the new validated ``DecodingOptions``.
    """

    optionsChanged = Signal(object)

    def __init__(self, options: DecodingOptions | None = None, debounce_ms: int = 250, parent=None) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(debounce_ms)
        self._timer.timeout.connect(self._emit)
        self._base = options or DecodingOptions()

        grid = QGridLayout(self)
        grid.setContentsMargins(6, 6, 6, 6)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)

        title = QLabel("<b>Decoding options</b>")
        grid.addWidget(title, 0, 0)  # the strategy row starts in the next column (no overlap)
        strat_row = QHBoxLayout()
        strat_row.addWidget(QLabel("strategy:"))
        self.strategy_group = QButtonGroup(self)
        self.strategy_buttons: dict[str, QRadioButton] = {}
        for i, name in enumerate(STRATEGIES):
            b = QRadioButton(name)
            b.setToolTip(
                {
                    "greedy": "argmax: always take the most probable token",
                    "sample": "draw each token from the processed distribution (temperature, top-k, top-p)",
                    "beam": "beam search: keep the best N partial hypotheses",
                }.get(name, name)
            )
            self.strategy_group.addButton(b, i)
            self.strategy_buttons[name] = b
            strat_row.addWidget(b)
        strat_row.addStretch(1)
        reset = QToolButton()
        reset.setText("Reset")
        reset.setToolTip("Restore the default decoding options")
        reset.clicked.connect(lambda: self.setOptions(DecodingOptions(), emit=True))
        strat_row.addWidget(reset)
        grid.addLayout(strat_row, 0, 1, 1, 5)

        # (field, label, min, max, step, decimals, special text at minimum, tooltip)
        specs = [
            ("temperature", "temperature", 0.05, 2.0, 0.05, 2, None, "logits / T before softmax; < 1 sharper, > 1 flatter"),
            ("top_k", "top-k", 0, 100, 1, 0, "off", "keep only the k most probable tokens (0 = off)"),
            ("top_p", "top-p", 0.05, 1.0, 0.01, 2, None, "nucleus: smallest set with cumulative probability >= p (1 = off)"),
            ("num_beams", "beams", 1, 10, 1, 0, None, "beam width"),
            ("length_penalty", "length penalty", -1.0, 3.0, 0.1, 1, None, "score = sum log p / length^penalty"),
            ("repetition_penalty", "rep. penalty", 1.0, 2.0, 0.05, 2, None, "CTRL penalty on tokens already emitted (1 = off)"),
            ("no_repeat_ngram_size", "no-repeat n-gram", 0, 10, 1, 0, "off", "forbid repeating any n-gram of this size (0 = off)"),
            ("max_new_tokens", "max tokens", 1, 448, 1, 0, None, "upper bound on generated tokens per segment"),
        ]
        self.controls: dict[str, SliderSpin] = {}
        self.labels: dict[str, QLabel] = {}
        for i, (field, label, lo, hi, step, dec, special, tip) in enumerate(specs):
            row, col = 1 + i // 2, (i % 2) * 3
            lab = QLabel(label)
            lab.setToolTip(tip)
            ctl = SliderSpin(lo, hi, step, dec, special)
            ctl.setToolTip(tip)
            grid.addWidget(lab, row, col)
            grid.addWidget(ctl, row, col + 1, 1, 2)
            self.controls[field] = ctl
            self.labels[field] = lab
            ctl.valueChanged.connect(self._changed)
        seed_row = 1 + (len(specs) + 1) // 2
        self.labels["seed"] = QLabel("seed")
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setKeyboardTracking(False)
        self.seed_spin.setToolTip("random seed for sampling (same seed = same draw)")
        self.seed_spin.valueChanged.connect(self._changed)
        grid.addWidget(self.labels["seed"], seed_row, 0)
        grid.addWidget(self.seed_spin, seed_row, 1)
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #b00020;")
        self.error_label.setWordWrap(True)
        grid.addWidget(self.error_label, seed_row + 1, 0, 1, 6)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(4, 1)
        grid.setRowStretch(seed_row + 2, 1)

        self.strategy_group.idToggled.connect(lambda _id, on: on and self._changed())
        self.setOptions(self._base)

    # ------------------------------------------------------------------ API
    @property
    def debounce_ms(self) -> int:
        """Milliseconds of quiet before ``optionsChanged`` fires."""
        return self._timer.interval()

    def strategy(self) -> str:
        """The selected strategy name."""
        return STRATEGIES[max(0, self.strategy_group.checkedId())]

    def options(self) -> DecodingOptions:
        """The options the controls show, validated.

        Raises:
            ValueError: from ``DecodingOptions.validate`` (not reachable through the
                controls' ranges, but kept honest).
        """
        c = self.controls
        return self._base.with_(
            strategy=self.strategy(),
            temperature=round(c["temperature"].value(), 4),
            top_k=int(c["top_k"].value()),
            top_p=round(c["top_p"].value(), 4),
            num_beams=int(c["num_beams"].value()),
            length_penalty=round(c["length_penalty"].value(), 4),
            repetition_penalty=round(c["repetition_penalty"].value(), 4),
            no_repeat_ngram_size=int(c["no_repeat_ngram_size"].value()),
            max_new_tokens=int(c["max_new_tokens"].value()),
            seed=int(self.seed_spin.value()),
        )

    def setOptions(self, options: DecodingOptions, emit: bool = False) -> None:
        """Show ``options`` (validated first). Emits ``optionsChanged`` (debounced) only if ``emit``.

        Raises:
            ValueError: if ``options`` do not validate.
        """
        options = options.validate()
        self._base = options
        blockers = [QSignalBlocker(w) for w in (*self.controls.values(), self.seed_spin, self.strategy_group)]
        try:
            self.strategy_buttons[options.strategy].setChecked(True)
            for field, ctl in self.controls.items():
                ctl.setValue(getattr(options, field))
            self.seed_spin.setValue(options.seed if options.seed is not None else 0)
        finally:
            del blockers
        self._update_enabled()
        self.error_label.clear()
        if emit:
            self._timer.start()

    def flush(self) -> None:
        """Emit a pending debounced change now (e.g. before closing)."""
        if self._timer.isActive():
            self._timer.stop()
            self._emit()

    # ------------------------------------------------------------- internals
    def _update_enabled(self) -> None:
        strategy = self.strategy()
        for field, only in _ONLY_FOR.items():
            on = strategy in only
            widget = self.seed_spin if field == "seed" else self.controls[field]
            widget.setEnabled(on)
            self.labels[field].setEnabled(on)
            why = f"used by: {', '.join(only)}" if not on else ""
            self.labels[field].setStatusTip(why)

    def _changed(self, *_args) -> None:
        self._update_enabled()
        self._timer.start()  # restart: fires once after the last change

    def _emit(self) -> None:
        try:
            options = self.options()
        except ValueError as exc:
            self.error_label.setText(str(exc))
            return
        self.error_label.clear()
        self.optionsChanged.emit(options)
