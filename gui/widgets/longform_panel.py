"""The Speech tab's "windows" choice and its long-form settings (issue 14 §3).

How Whisper walks through audio longer than its 30 s window:

- **auto**: long-form when the audio is longer than 30 s (as transformers' ``generate()``
  switches to its long-form loop), plain 30 s windows otherwise;
- **long-form**: openai/whisper ``transcribe()``
  (``core.tasks.longform.transcribe``): seek, conditioning and temperature fallback;
- **fixed 30 s**: the audio cut every 30 s, each window decoded once (``SpeechModel.decode``).

The long-form settings (condition on previous text, initial prompt, temperature ladder and
the thresholds — compression ratio, log-probability, no-speech, entropy, loudness — each of
which can be switched off) sit in a popup behind the "long-form ▾" button, so they take no
height in the input area. :meth:`LongFormPanel.options`
gives a ``core.tasks.longform.LongFormOptions``; :meth:`~LongFormPanel.settings` /
:meth:`~LongFormPanel.apply_settings` are what the tab persists.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QWidget,
)

from core.catalog import WINDOW_S

from .popup_button import popup_button

#: the choices of the windows box, in order
MODES = ("auto", "long-form", "fixed 30 s")
MODE_TIPS = (
    (f"long-form when the audio is longer than {WINDOW_S:g} s (as transformers' generate() does), "
     f"plain {WINDOW_S:g} s windows otherwise"),
    ("openai/whisper transcribe(): SEEK — each window starts at the last complete timestamp pair of the previous "
     "one, so no word is cut in half; CONDITIONING — the previous windows' text is fed as a <|startofprev|> prompt; "
     "FALLBACK — a window whose text compresses too well (a repetition loop), whose average log-probability is too "
     "low or whose token entropy is too low is decoded again at the next temperature; a window that looks silent "
     "(high no-speech probability and low log-probability) is skipped"),
    (f"cut the audio every {WINDOW_S:g} s and decode each window once with the options on the right "
     "(no seek, no previous text, no fallback)"),
)
DEFAULT_TEMPERATURES = "0.0, 0.2, 0.4, 0.6, 0.8, 1.0"
#: (key, label, default, minimum, maximum, step, tooltip) of each threshold
THRESHOLDS = (
    ("compression_ratio_threshold", "compression ratio >", 2.4, 0.1, 100.0, 0.1,
     "redo a window whose text's gzip compression ratio is above this (a repetition loop)"),
    ("logprob_threshold", "avg log-prob <", -1.0, -100.0, 0.0, 0.1,
     "redo a window whose average token log-probability is below this (the model was unsure)"),
    ("no_speech_threshold", "no-speech >", 0.6, 0.0, 1.0, 0.05,
     ("skip a window as silence when its no-speech probability is above this AND its average log-probability "
      "is below the log-prob threshold (needs the log-prob threshold on)")),
    ("entropy_threshold", "token entropy <", 2.4, 0.0, 10.0, 0.1,
     ("redo a window of more than 32 tokens whose last 32 tokens' entropy (nats) is below this: a few tokens "
      "repeating (whisper.cpp --entropy-thold)")),
    ("silence_db", "loudest frame < dBFS", -50.0, -200.0, 0.0, 1.0,
     ("also skip a window as silence when its no-speech probability is above the no-speech threshold and its "
      "loudest 20 ms frame is quieter than this, whatever its log-probability (ours, after stable-ts; off = "
      "openai's rule exactly)")),
)


def parse_temperatures(text: str) -> tuple[float, ...]:
    """"0, 0.2, 0.4" -> (0.0, 0.2, 0.4).

    Raises:
        ValueError: one line saying which value is not a number >= 0 (or that none was given).
    """
    parts = [p for p in text.replace(";", ",").replace(" ", ",").split(",") if p]
    if not parts:
        raise ValueError("the temperature ladder is empty: give at least one value, e.g. 0.0")
    out = []
    for p in parts:
        try:
            t = float(p)
        except ValueError:
            raise ValueError(f"temperature {p!r} is not a number; write e.g. {DEFAULT_TEMPERATURES}") from None
        if not t >= 0:
            raise ValueError(f"temperature {p} must be >= 0")
        out.append(t)
    return tuple(out)


class LongFormPanel(QObject):
    """The windows box, the "long-form ▾" button and its popup of settings.

    Signals:
        changed(): the mode or a setting changed (the tab decodes again).
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode_combo = QComboBox()
        self.mode_combo.addItems(list(MODES))
        for i, tip in enumerate(MODE_TIPS):
            self.mode_combo.setItemData(i, tip, 3)  # Qt.ToolTipRole
        self.mode_combo.setToolTip("how audio longer than 30 s is cut into windows:\n" + "\n".join(
            f"• {m}: {t}" for m, t in zip(MODES, MODE_TIPS)))
        self.mode_combo.currentIndexChanged.connect(self._mode_changed)

        self.form = QWidget()
        form = QFormLayout(self.form)
        form.setContentsMargins(8, 8, 8, 8)
        self.condition_check = QCheckBox("condition on previous text")
        self.condition_check.setChecked(True)
        self.condition_check.setToolTip("prompt each window with the text decoded so far (<|startofprev|> + the last "
                                        "223 tokens); reset after a window decoded above temperature 0.5")
        form.addRow(self.condition_check)
        self.prompt_edit = QLineEdit()
        self.prompt_edit.setPlaceholderText("initial prompt (names, spelling, style)")
        self.prompt_edit.setToolTip("text given as the 'previous text' of the first window (openai --initial_prompt)")
        form.addRow("initial prompt", self.prompt_edit)
        self.temperatures_edit = QLineEdit(DEFAULT_TEMPERATURES)
        self.temperatures_edit.setToolTip("the fallback ladder: a window is tried at the first temperature, then "
                                          "at the next each time it fails a threshold (0 = the options' strategy)")
        form.addRow("temperatures", self.temperatures_edit)
        self.threshold_checks: dict[str, QCheckBox] = {}
        self.threshold_spins: dict[str, QDoubleSpinBox] = {}
        for key, label, default, lo, hi, step, tip in THRESHOLDS:
            check = QCheckBox(label)
            check.setChecked(True)
            check.setToolTip(tip + "; untick to switch this check off")
            spin = QDoubleSpinBox()
            spin.setRange(lo, hi)
            spin.setSingleStep(step)
            spin.setDecimals(2)
            spin.setValue(default)
            spin.setToolTip(tip)
            check.toggled.connect(spin.setEnabled)
            row = QHBoxLayout()
            row.addWidget(check)
            row.addWidget(spin, 1)
            form.addRow(row)
            self.threshold_checks[key], self.threshold_spins[key] = check, spin
            check.toggled.connect(lambda _on: self.changed.emit())
            spin.editingFinished.connect(self.changed.emit)
        self.condition_check.toggled.connect(lambda _on: self.changed.emit())
        self.prompt_edit.editingFinished.connect(self.changed.emit)
        self.temperatures_edit.editingFinished.connect(self.changed.emit)

        self.button = popup_button("long-form ▾", "long-form settings: previous-text conditioning, initial prompt, "
                                   "temperature ladder and the fallback / silence thresholds (openai/whisper "
                                   "transcribe())", self.form)
        self._mode_changed()

    # ------------------------------------------------------------ queries
    def mode(self) -> str:
        """"auto", "long-form" or "fixed"."""
        return ("auto", "long-form", "fixed")[self.mode_combo.currentIndex()]

    def uses_longform(self, duration_s: float) -> bool:
        """Whether audio of ``duration_s`` seconds is decoded long-form in the current mode."""
        return self.mode() == "long-form" or (self.mode() == "auto" and duration_s > WINDOW_S)

    def options(self):
        """The settings as ``core.tasks.longform.LongFormOptions`` (torch-free module).

        Raises:
            ValueError: a bad temperature ladder (one line).
        """
        from core.tasks.longform import LongFormOptions

        values = {key: (self.threshold_spins[key].value() if self.threshold_checks[key].isChecked() else None)
                  for key, *_ in THRESHOLDS}
        return LongFormOptions(temperatures=parse_temperatures(self.temperatures_edit.text()),
                               condition_on_previous_text=self.condition_check.isChecked(),
                               initial_prompt=self.prompt_edit.text().strip(), **values).validate()

    # ------------------------------------------------------------ settings
    def settings(self) -> dict:
        """Everything the panel shows, as plain values (for QSettings)."""
        d = {"mode": self.mode(), "condition": self.condition_check.isChecked(),
             "initial_prompt": self.prompt_edit.text(), "temperatures": self.temperatures_edit.text()}
        for key, *_ in THRESHOLDS:
            d[key] = self.threshold_spins[key].value()
            d[key + "_on"] = self.threshold_checks[key].isChecked()
        return d

    def apply_settings(self, d: dict) -> None:
        """Show ``d`` (from :meth:`settings`; QSettings may hand back strings) without
        emitting ``changed``; unknown or broken values are skipped."""
        def flag(v, default: bool) -> bool:
            return default if v is None else str(v).lower() in ("true", "1")

        self.blockSignals(True)
        try:
            modes = ("auto", "long-form", "fixed")
            if d.get("mode") in modes:
                self.mode_combo.setCurrentIndex(modes.index(d["mode"]))
            self.condition_check.setChecked(flag(d.get("condition"), True))
            if d.get("initial_prompt") is not None:
                self.prompt_edit.setText(str(d["initial_prompt"]))
            if d.get("temperatures"):
                self.temperatures_edit.setText(str(d["temperatures"]))
            for key, *_ in THRESHOLDS:
                try:
                    if d.get(key) is not None:
                        self.threshold_spins[key].setValue(float(d[key]))
                except (TypeError, ValueError):
                    pass
                self.threshold_checks[key].setChecked(flag(d.get(key + "_on"), True))
        finally:
            self.blockSignals(False)
        self._mode_changed(emit=False)

    def _mode_changed(self, _index: int | None = None, emit: bool = True) -> None:
        self.button.setEnabled(self.mode() != "fixed")
        if emit and _index is not None:
            self.changed.emit()
