"""The Speech tab's input area (gui/tabs/speech.py): three rows over the waveform.

1. "Input", what the input is (its name, length, warnings; :data:`NO_AUDIO` before there
   is one), the language, candidate languages and task (:class:`~gui.tabs.speech_language.LanguageTask`)
   and the long-form windows choice;
2. the microphone row (:meth:`~gui.tabs.speech_takes.SpeechTakes.build_recording_bar`);
3. Open…, Sample, Mask, the model picker, timestamps and word timing;

then the waveform (seconds on the x axis; a drag selects the what-if span when Mask is on)
beside the language-probability bars.

:class:`SpeechInputArea` is the widget the tab's ``build_input`` returns (``RunTab.input_area``);
it builds the rows with the tab's public pieces: ``make_file_buttons`` / ``make_model_picker``
(``DecodeTab``), ``request_decode``, and the tab's objects ``mask`` (``SpeechMask``),
``long_form`` (``LongForm``) and ``mic`` (``SpeechTakes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from core.catalog import SAMPLE_RATE

from ..widgets.attention_heatmap import no_si_prefix
from .base import SAMPLES_DIR
from .recording import WARNING_STYLE
from .speech_language import LanguageTask

NO_AUDIO = "No audio yet — record, open a file, drop one here, or press Sample."


def open_error(path: Path, message: str) -> str:
    """The banner text for an audio file that could not be opened: the loader's ``message``
    (the file named by its name), plus what to do unless it already says it."""
    text = message.replace(str(path), path.name)
    if path.name not in text:
        text = f"Could not open {path.name}: {text}"
    if "mp3" not in text.lower() and "open" not in text.lower():
        text += "\nOpen a wav, flac, ogg or mp3 file with sound in it."
    return text


class SpeechInputArea(QWidget):
    """The Speech tab's input area (see module docstring); draws the waveform.

    Attributes (the tab shares them): ``info_label``, ``language_task`` (and its
    ``language_combo``, ``candidates_edit``, ``task_combo``, ``timestamps_check``),
    ``word_timing_check``, ``wave`` / ``wave_box`` / ``wave_curve``, ``language_bars``.
    """

    def __init__(self, tab: Any) -> None:
        """Three rows (input name / microphone and takes / files and model) over the waveform."""
        super().__init__()
        from ..widgets.elided_label import ElidedLabel

        self.tab = tab
        self.info_label = ElidedLabel(NO_AUDIO)  # one line, cut with "…", the whole text in its tooltip
        title = QLabel("<b>Input</b>")
        title.setToolTip("audio: record, open or drop a wav/flac/ogg/mp3 file anywhere on this tab")
        files_row = self._build_files_row(tab)
        row_title = QHBoxLayout()  # what the input is, and how it is spoken
        row_title.addWidget(title, 0, Qt.AlignmentFlag.AlignTop)
        row_title.addWidget(self.info_label, 1)
        for widget in (QLabel("language"), self.language_combo, self.candidates_edit, QLabel("task"), self.task_combo):
            row_title.addWidget(widget)
        tab.long_form.add_controls(row_title)  # windows: auto | long-form | fixed 30 s (rows narrow: 1280 px)
        files_row.addWidget(self.timestamps_check)
        files_row.addWidget(self.word_timing_check)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addLayout(row_title)
        lay.addWidget(tab.mic.build_recording_bar())
        lay.addLayout(files_row)
        from ..widgets.language_bars import LanguageBars

        wave_row = QHBoxLayout()
        wave_row.addWidget(self._build_wave(tab), 1)
        self.language_bars = LanguageBars()
        wave_row.addWidget(self.language_bars, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(wave_row, 1)

    def _build_files_row(self, tab: Any) -> QHBoxLayout:
        """Open…, Sample, Mask and the model picker; makes the language, task, timestamps and
        word-timing controls too (:meth:`build_input` places them)."""
        tab.make_file_buttons(
            "Open an audio file: wav, flac, ogg, mp3 (Ctrl+O); or drop one here",
            f"Load the bundled sample clip from {SAMPLES_DIR}",
        )
        tab.make_model_picker(
            "Whisper model: a bundled one (base, tiny.en), a transformers model id or a local folder; "
            "press Enter or Load", min_chars=8, fit_contents=True,
        )
        lt = self.language_task = LanguageTask(lambda: tab.request_decode())
        self.language_combo, self.candidates_edit = lt.language_combo, lt.candidates_edit
        self.task_combo, self.timestamps_check = lt.task_combo, lt.timestamps_check
        from .word_timing import word_timing_checkbox

        self.word_timing_check = word_timing_checkbox()
        row = QHBoxLayout()
        row.addWidget(tab.open_button)
        row.addWidget(tab.sample_button)
        row.addWidget(tab.mask.make_mask_button())  # the what-if span (gui/tabs/whatif_inputs.py)
        row.addSpacing(8)
        row.addWidget(QLabel("model"))
        row.addWidget(tab.model_combo, 1)
        row.addWidget(tab.dtype_combo)  # float32 / int8 (core.dtypes.DTYPES)
        row.addWidget(tab.load_button)
        return row

    def _build_wave(self, tab: Any) -> pg.PlotWidget:
        """The input's waveform, seconds on the x axis (min/max envelope of long clips)."""
        from ..widgets.span_select import SpanViewBox

        self.wave_box = SpanViewBox(enableMenu=False)  # with Mask on, a drag selects the what-if span
        self.wave = pg.PlotWidget(viewBox=self.wave_box, enableMenu=False)
        self.wave.setBackground(None)
        self.wave.setMinimumHeight(110)
        self.wave.hideButtons()
        self.wave.setMouseEnabled(x=True, y=False)
        self.wave.setLabel("bottom", "time (s)")
        self.wave.getAxis("left").setWidth(40)
        no_si_prefix(self.wave.getAxis("left"))
        no_si_prefix(self.wave.getAxis("bottom"))
        self.wave_curve = self.wave.plot(pen=pg.mkPen("#4a6fa5"))
        self.wave_curve.setDownsampling(auto=True, method="peak")
        self.wave_curve.setClipToView(True)
        self.wave.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        tab.mask.install_span_mask(self.wave, self.wave_box)
        return self.wave

    def show_input(self, audio: np.ndarray | None, name: str, warnings: tuple[str, ...], unsaved: bool) -> None:
        """Draw ``audio`` (None: no input) and describe it in the info line: ``name``, its
        length, "not saved yet" for an ``unsaved`` take, and ``warnings`` (one line each)."""
        if audio is None:
            self.wave_curve.setData([], [])
            self.info_label.setText(NO_AUDIO)
            self.info_label.setStyleSheet("")
            return
        self.show_wave(audio)
        text = f"{name} · {len(audio) / SAMPLE_RATE:.2f} s · {SAMPLE_RATE // 1000} kHz mono"
        if unsaved:
            text += " · not saved yet"
        if warnings:
            text += "\n⚠ " + "\n⚠ ".join(warnings)
        self.info_label.setText(text)
        self.info_label.setStyleSheet(WARNING_STYLE if warnings else "")

    def show_wave(self, audio: np.ndarray) -> None:
        """Draw ``audio`` (float32, 16 kHz) on the input's waveform, the whole clip in view."""
        from ..widgets.waveform import envelope

        t, y = envelope(audio, SAMPLE_RATE)  # min/max per bucket: a 10-minute clip stays cheap to draw
        self.wave_curve.setData(t, y)
        self.wave.setXRange(0.0, max(len(audio) / SAMPLE_RATE, 0.1), padding=0.01)
