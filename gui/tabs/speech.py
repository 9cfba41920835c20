"""The Speech tab: record or open audio, pick a Whisper model, watch it transcribe.

Audio comes from the microphone (the :class:`~gui.tabs.recording.RecordingBar`), a file
(Open…, drag and drop; wav/flac/ogg/mp3) or the bundled sample in ``assets/samples/``.
Whisper models load in a worker thread (``core.tasks.speech.SpeechModel.load`` is
imported there, so the window opens before torch is imported); decoding starts as soon
as both a model and an input exist and re-runs on the cached encoder output when an
option changes.

The heatmap's columns are Whisper encoder frames of 0.02 s, shown in seconds, with
the waveform above on the same axis.

Nothing recorded is lost: each recording becomes a *take* ("take 1 (12.3 s)") in the
takes list and stays there until the user discards it (Discard removes the current take),
whatever is opened or recorded meanwhile. Files cannot be opened while recording (the
Open… button is disabled and ``open_input``/``open_file``/drops refuse with a message).
Closing the window with a recording running or a take not saved asks Save / Discard /
Cancel (:meth:`SpeechTab.confirm_close`). The two dialogs are the module functions
:func:`ask_unsaved` and :func:`ask_save_path`, which tests replace to answer them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QSizePolicy,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from core.catalog import (
    AUDIO_SUFFIXES,
    FRAME_S,
    MIN_AUDIO_S,
    SAMPLE_RATE,
    is_english_only,
)
from core.catalog import WHISPER_BUNDLED as BUNDLED
from core.catalog import WHISPER_DEFAULT as DEFAULT_MODEL
from core.catalog import WHISPER_TASKS as TASKS
from core.inputs.types import SpeechInput
from core.options import DecodingOptions

from ..widgets.attention_heatmap import no_si_prefix
from .base import SAMPLES_DIR, DecodeTab, RunFn, first_file
from .longform import LongFormMixin
from .recording import WARNING_STYLE, RecordingBar, RecordingError, Take
from .whatif_inputs import SpeechMask

#: shown before a multilingual model has loaded (then replaced by model.languages)
COMMON_LANGUAGES = ("en", "de", "es", "fr", "it", "pt", "nl", "pl", "ru", "zh", "ja", "ko")
NO_AUDIO = "No audio yet — record, open a file, drop one here, or press Sample."
COLUMN_AXIS = "time (s) — one column per 20 ms encoder frame"


def first_sample(directory: Path = SAMPLES_DIR) -> Path | None:
    """The first ``.wav`` (by name) in ``assets/samples/``, or None."""
    return first_file((".wav",), directory)


def ask_unsaved(parent: QWidget | None, text: str, informative: str, title: str = "Unsaved recording") -> str:
    """Ask Save / Discard / Cancel about unsaved recordings or explorations (a modal
    ``QMessageBox`` titled ``title``).

    Returns:
        "save", "discard" or "cancel" (also for Esc or closing the box).
    """
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle(title)
    box.setText(text)
    box.setInformativeText(informative)
    box.setStandardButtons(
        QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel
    )
    box.setDefaultButton(QMessageBox.StandardButton.Save)
    box.setEscapeButton(QMessageBox.StandardButton.Cancel)
    answer = box.exec()
    return {QMessageBox.StandardButton.Save: "save", QMessageBox.StandardButton.Discard: "discard"}.get(
        QMessageBox.StandardButton(answer), "cancel"
    )


def ask_save_path(parent: QWidget | None, title: str, suggested: str) -> str:
    """Ask where to save a wav file (``QFileDialog``); "" when the user cancels."""
    path, _ = QFileDialog.getSaveFileName(parent, title, suggested, "WAV (*.wav)")
    return path


class SpeechTab(LongFormMixin, SpeechMask, DecodeTab):
    """Speech-to-text with Whisper (see module docstring)."""

    title = "Speech"
    settings_key = "speech"
    #: more height for the input than the base default: the waveform needs ~110 px
    main_splitter_sizes = (330, 170, 350)
    file_kind, file_suffixes, open_title = "Audio", AUDIO_SUFFIXES, "Open audio"
    sample_suffixes = (".wav",)
    sample_missing = "No sample clip found: put a .wav file into {folder}."
    bundled_models, default_model = BUNDLED, DEFAULT_MODEL
    empty_model_message = "Enter a model name (e.g. base, tiny.en), a transformers model id or a local folder."
    encoder_reads = "audio (log-mel frames), not tokens"

    def __init__(self, parent: QWidget | None = None) -> None:
        self.audio: np.ndarray | None = None
        self.source_name = ""
        self._from_recording = False
        self._file_job = None
        self._warnings: tuple[str, ...] = ()  # about the input (e.g. a truncated file)
        super().__init__(parent)
        from ..widgets.timestamp_marks import TimestampMarks

        # segment bounds of timestamp tokens on the input's waveform, the heatmap's and the heatmap
        self.timestamp_marks = TimestampMarks([self.wave, self.heatmap.wave_plot, self.heatmap.plot], self.run)
        self.language_bars.follow(self.run, self.candidates_edit)  # the current window's language probabilities
        from .word_timing import WordTimingController

        # word bands on the waveform, the DTW path on the heatmap, the alignment-head picker
        self.word_timing = WordTimingController(self, self.word_timing_check)
        self.init_longform()  # long-form runs: attempts, window marks, export (gui/tabs/longform.py)
        self._update_lang_task_enabled()
        self._update_takes()

    # ------------------------------------------------------------ input area
    def build_input(self) -> QWidget:
        """Three rows (input name / microphone and takes / files and model) over the waveform."""
        from ..widgets.elided_label import ElidedLabel

        self.info_label = ElidedLabel(NO_AUDIO)  # one line, cut with "…", the whole text in its tooltip
        title = QLabel("<b>Input</b>")
        title.setToolTip("audio: record, open or drop a wav/flac/ogg/mp3 file anywhere on this tab")
        files_row = self._build_files_row()
        row_title = QHBoxLayout()  # what the input is, and how it is spoken
        row_title.addWidget(title, 0, Qt.AlignmentFlag.AlignTop)
        row_title.addWidget(self.info_label, 1)
        for widget in (QLabel("language"), self.language_combo, self.candidates_edit, QLabel("task"), self.task_combo):
            row_title.addWidget(widget)
        self.add_longform_controls(row_title)  # windows: auto | long-form | fixed 30 s (rows narrow: 1280 px)
        files_row.addWidget(self.timestamps_check)
        files_row.addWidget(self.word_timing_check)
        w = QWidget()
        lay = QVBoxLayout(w)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addLayout(row_title)
        lay.addWidget(self._build_recording_bar())
        lay.addLayout(files_row)
        from ..widgets.language_bars import LanguageBars

        wave_row = QHBoxLayout()
        wave_row.addWidget(self._build_wave(), 1)
        self.language_bars = LanguageBars()
        wave_row.addWidget(self.language_bars, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(wave_row, 1)
        return w

    def _build_recording_bar(self) -> RecordingBar:
        """The microphone row (Record, device, level, takes, Save…, Discard) and its note."""
        bar = self.recording = RecordingBar()
        bar.record_button.clicked.connect(self.toggle_record)
        bar.save_button.clicked.connect(self.save_recording)
        bar.discard_button.clicked.connect(self.discard_input)
        bar.takePicked.connect(self.select_take)
        bar.liveAudio.connect(self._show_live_audio)
        # the bar's controls are the tab's too (tests and the window's shortcuts use them)
        self.record_button, self.device_combo, self.level_meter = bar.record_button, bar.device_combo, bar.level_meter
        self.takes_combo, self.save_button, self.discard_button = bar.takes_combo, bar.save_button, bar.discard_button
        self.mic_label = bar.mic_label
        return bar

    def _build_files_row(self) -> QHBoxLayout:
        """Open…, Sample, Mask and the model picker; makes the language, task, timestamps and
        word-timing controls too (:meth:`build_input` places them)."""
        self.make_file_buttons(
            "Open an audio file: wav, flac, ogg, mp3 (Ctrl+O); or drop one here",
            f"Load the bundled sample clip from {SAMPLES_DIR}",
        )
        self.make_model_picker(
            "Whisper model: a bundled one (base, tiny.en), a transformers model id or a local folder; "
            "press Enter or Load", min_chars=8, fit_contents=True,
        )
        self.language_combo = QComboBox()
        self.language_combo.addItems(["auto", *COMMON_LANGUAGES])
        self.language_combo.setToolTip("spoken language ('auto' = detect from the first 30 s)")
        self.language_combo.currentIndexChanged.connect(lambda _i: self.request_decode())
        from ..widgets.language_bars import CandidatesEdit

        self.candidates_edit = CandidatesEdit()
        self.candidates_edit.candidatesChanged.connect(lambda _c: self.request_decode())
        self.task_combo = QComboBox()
        self.task_combo.addItems(list(TASKS))
        self.task_combo.setToolTip("transcribe in the spoken language, or translate to English")
        self.task_combo.currentIndexChanged.connect(lambda _i: self.request_decode())
        self.timestamps_check = QCheckBox("timestamps")
        self.timestamps_check.setToolTip("decode with Whisper's timestamp tokens (<|0.00|> ... <|2.60|>): timestamps in "
                                         "pairs, never decreasing, the first at most 1.0 s in")
        self.timestamps_check.toggled.connect(lambda _on: self.request_decode())
        from .word_timing import word_timing_checkbox

        self.word_timing_check = word_timing_checkbox()
        row = QHBoxLayout()
        row.addWidget(self.open_button)
        row.addWidget(self.sample_button)
        row.addWidget(self.make_mask_button())  # the what-if span (gui/tabs/whatif_inputs.py)
        row.addSpacing(8)
        row.addWidget(QLabel("model"))
        row.addWidget(self.model_combo, 1)
        row.addWidget(self.load_button)
        return row

    def _build_wave(self) -> pg.PlotWidget:
        """The input's waveform, seconds on the x axis (min/max envelope of long clips)."""
        from ..widgets.span_select import SpanViewBox

        self.wave_box = SpanViewBox()  # with Mask on, a drag selects the what-if span
        self.wave = pg.PlotWidget(viewBox=self.wave_box)
        self.wave.setBackground(None)
        self.wave.setMinimumHeight(110)
        self.wave.setMenuEnabled(False)
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
        self.install_span_mask()
        return self.wave

    def configure_heatmap(self) -> None:
        self.heatmap.set_columns(COLUMN_AXIS, FRAME_S)

    def rtf_applies(self) -> bool:
        return True

    # ---------------------------------------------------------- microphone
    @property
    def mic_ok(self) -> bool:
        """Whether recording works (the microphone bar says why not)."""
        return self.recording.mic_ok

    @mic_ok.setter
    def mic_ok(self, ok: bool) -> None:
        self.recording.mic_ok = ok

    def is_recording(self) -> bool:
        """A recording is running."""
        return self.recording.is_recording()

    def toggle_record(self) -> None:
        """Start recording, or stop and decode the recording."""
        if self.is_recording():
            self.stop_recording()
        else:
            self.start_recording()

    def start_recording(self) -> None:
        """Start the microphone for a new take (errors go to the banner). Earlier takes stay
        in the takes list."""
        try:
            self.recording.start()
        except RecordingError as exc:
            self.show_error(str(exc))
            return
        self.clear_error()
        self.info_label.setText(f"Recording take {self.recording.next_take}…")
        self.statusMessage.emit("Recording… press Stop (Ctrl+R) to decode")
        self._update_buttons()

    def stop_recording(self) -> None:
        """Stop the microphone; the recording becomes a new take, the input, and is decoded."""
        take = self._finish_recording()
        if take is not None:
            self.select_take(self.recording.takes.index(take))

    def _finish_recording(self) -> Take | None:
        """Stop the recorder and keep what it recorded as a new take (None if nothing usable)."""
        try:
            take = self.recording.finish()
        except RecordingError as exc:
            self.show_error(str(exc))
            self._show_input()
            self._update_buttons()  # Open…, Sample and Save… come back after a failed stop
            return None
        if take is not None:
            self._update_takes()
        else:
            self._update_buttons()
        return take

    def _show_live_audio(self, audio: np.ndarray) -> None:
        self._show_wave(audio)
        self.info_label.setText(f"Recording take {self.recording.next_take}… {len(audio) / SAMPLE_RATE:.1f} s")

    # --------------------------------------------------------------- takes
    def takes(self) -> list[Take]:
        """The kept recordings, oldest first."""
        return list(self.recording.takes)

    def current_take(self) -> Take | None:
        """The take that is the input, or None (the input is a file, or there is none)."""
        return self.recording.current

    def unsaved_takes(self) -> list[Take]:
        """Takes not saved to a file yet."""
        return self.recording.unsaved()

    def select_take(self, index: int) -> None:
        """Make take number ``index`` (0-based, in :meth:`takes`) the input and decode it."""
        takes = self.recording.takes
        if not 0 <= index < len(takes) or self.is_recording():
            self._update_takes()
            return
        take = takes[index]
        if self.set_audio(take.audio, take.label().split(" · ")[0], from_recording=True):
            self.recording.current = take
            self._update_takes()

    def _update_takes(self) -> None:
        self.recording.show_takes()
        self._update_buttons()

    def _update_buttons(self) -> None:
        rec = self.is_recording()
        self.recording.update_buttons(self.has_input())
        self.open_button.setEnabled(not rec)
        has_sample = first_sample() is not None
        self.sample_button.setEnabled(not rec and has_sample)
        if not has_sample:
            self.sample_button.setToolTip(f"No sample: put a .wav into {SAMPLES_DIR}")

    # --------------------------------------------------------------- input
    def has_input(self) -> bool:
        return self.audio is not None and len(self.audio) > 0

    def set_audio(self, audio: np.ndarray, name: str, from_recording: bool = False,
                  warnings: tuple[str, ...] | list[str] = ()) -> bool:
        """Use ``audio`` (float32 (n_samples,), 16 kHz mono) as the input and decode it.

        The previous run's token stream, top-k, heatmap and statistics are cleared. Audio
        shorter than 0.1 s is refused (banner; the input stays as it was). ``warnings``
        (e.g. a truncated file) are shown in the info line. Returns True if accepted.
        """
        audio = np.asarray(audio, dtype=np.float32)
        if len(audio) < MIN_AUDIO_S * SAMPLE_RATE:
            self.show_error(
                f"{name} is too short ({1000 * len(audio) / SAMPLE_RATE:.2g} ms); the speech models need at least "
                f"{MIN_AUDIO_S:g} s. Open or record a longer clip."
            )
            return False
        self.audio = audio
        self.source_name = name
        self._from_recording = from_recording
        if not from_recording:
            self.recording.current = None
            self._update_takes()
        self._warnings = tuple(warnings)
        self.clear_run()
        self._show_input()
        self.heatmap.set_columns(COLUMN_AXIS, FRAME_S, n_columns=math.ceil(len(audio) / SAMPLE_RATE / FRAME_S))
        self.heatmap.set_waveform(self.audio, SAMPLE_RATE)
        self._update_buttons()
        self.clear_error()
        if self.model is None and not self.is_loading():
            self.statusMessage.emit("Audio ready — load a model to decode it")
        self.request_decode()
        return True

    def _show_input(self) -> None:
        """Draw the current input's waveform and describe it in the info line."""
        if not self.has_input():
            self.wave_curve.setData([], [])
            self.info_label.setText(NO_AUDIO)
            self.info_label.setStyleSheet("")
            return
        self._show_wave(self.audio)
        dur = len(self.audio) / SAMPLE_RATE
        text = f"{self.source_name} · {dur:.2f} s · {SAMPLE_RATE // 1000} kHz mono"
        warnings = self._warnings
        take = self.recording.current
        if take is not None and take.saved_to is None:
            text += " · not saved yet"
        if warnings:
            text += "\n⚠ " + "\n⚠ ".join(warnings)
        self.info_label.setText(text)
        self.info_label.setStyleSheet(WARNING_STYLE if warnings else "")

    def _show_wave(self, audio: np.ndarray) -> None:
        from ..widgets.waveform import envelope

        t, y = envelope(audio, SAMPLE_RATE)  # min/max per bucket: a 10-minute clip stays cheap to draw
        self.wave_curve.setData(t, y)
        self.wave.setXRange(0.0, max(len(audio) / SAMPLE_RATE, 0.1), padding=0.01)

    # --------------------------------------------------------------- files
    def refusal(self, path: Path | None) -> str | None:
        """Files are not opened during a recording (the Open… button is disabled then too)."""
        if not self.is_recording():
            return None
        what = "a file" if path is None else path.name
        return (f"Cannot open {what} while recording: press ■ Stop (Ctrl+R) first; the recording is then kept as "
                f"take {self.recording.next_take}, and you can open {what}.")

    def read_file(self, path: Path) -> bool:
        """Load an audio file (in a worker thread); errors go to the banner. Clips under
        0.1 s are refused; a truncated wav opens with a warning."""
        from ..worker import start_worker

        def gen(cancel):
            from core.inputs.audio import open_audio

            yield open_audio(path, label=path.name)

        def done(loaded):
            if self.refused(path):  # a recording started while the file was read
                return
            self.set_audio(loaded.audio, path.name, warnings=loaded.warnings)
            if loaded.warnings:
                self.statusMessage.emit(loaded.warnings[0])

        self.statusMessage.emit(f"Opening {path.name}…")
        self._file_job = start_worker(
            gen,
            on_event=done,
            on_error=lambda m: self.show_error(_open_error(path, m)),
            name="open-audio",
        )
        return True

    def save_recording(self) -> bool:
        """Save the input (the current take, or the opened file's audio) as a 16 kHz wav
        file, asking where. True if saved."""
        if not self.has_input() or self.is_recording():
            return False
        take = self.recording.current
        stem = f"take{take.number}" if take is not None else (Path(self.source_name).stem or "audio")
        path = ask_save_path(self, f"Save {take.label() if take else self.source_name}", self._save_suggestion(stem))
        return bool(path) and self.save_to(path)

    def _save_suggestion(self, stem: str) -> str:
        folder = Path(str(QSettings().value("speech/save_dir", str(Path.home()))))
        return str(folder / f"{stem}.wav")

    def save_to(self, path: str | Path, take: Take | None = None) -> bool:
        """Write ``take`` (default: the current input) to ``path`` (wav). True on success;
        the take is then marked saved. Errors go to the banner (one sentence)."""
        audio = take.audio if take is not None else self.audio
        take = take if take is not None else self.recording.current
        path = Path(path)
        try:
            from core.inputs.audio import save_wav

            save_wav(str(path), audio)
        except Exception as exc:  # noqa: BLE001 - AudioError: a sentence for the user
            text = str(exc).strip() or type(exc).__name__
            self.show_error(text if path.name in text else f"Could not save {path.name}: {text}")
            return False
        QSettings().setValue("speech/save_dir", str(path.parent))
        if take is not None:
            take.saved_to = str(path)
            self._update_takes()
            if take is self.recording.current:
                self._show_input()
        self.statusMessage.emit(f"Saved {path.name}")
        return True

    def discard_input(self) -> None:
        """Discard: while recording, throw the running recording away (the input stays);
        otherwise forget the input: the current take is removed from the takes list."""
        if self.recording.drop():
            self._show_input()
            self._update_buttons()
            self.statusMessage.emit("Recording discarded")
            return
        self.cancel()
        take = self.recording.current
        if take is not None and take in self.recording.takes:
            self.recording.takes.remove(take)
            self.statusMessage.emit(f"Discarded {take.label()}")
        self.recording.current = None
        self.audio = None
        self._from_recording = False
        self._warnings = ()
        self.clear_run()
        self.heatmap.set_waveform(None)
        self._show_input()
        self._update_takes()

    def confirm_close(self) -> bool:
        """Before the window closes: with a recording running or takes not saved, ask
        Save / Discard / Cancel (:func:`ask_unsaved`). Save stops a running recording (it
        becomes a take) and asks where to save each unsaved take. False keeps the window
        open (Cancel, or a save dialog cancelled or failed); the takes are then all kept."""
        recording = self.is_recording()
        unsaved = self.unsaved_takes()
        if not recording and not unsaved:
            return True
        _show_tab(self)
        parts = []
        if recording:
            parts.append("A recording is running")
        if unsaved:
            names = ", ".join(t.label() for t in unsaved)
            parts.append(f"{names} {'is' if len(unsaved) == 1 else 'are'} not saved")
        text = "; ".join(parts) + "."
        answer = ask_unsaved(
            self, text, "Save the recordings as wav files, discard them, or cancel and keep the window open."
        )
        if answer == "discard":
            self.recording.drop()
            return True
        if answer != "save":
            return False
        if recording:
            self._finish_recording()  # kept as a take even if a save dialog below is cancelled
        for take in self.unsaved_takes():
            path = ask_save_path(self, f"Save {take.label()}", self._save_suggestion(f"take{take.number}"))
            if not path or not self.save_to(path, take):
                return False
        return True

    # --------------------------------------------------------------- model
    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        from core.tasks.speech import (
            SpeechModel,  # torch is imported here, off the GUI thread
        )

        return SpeechModel.load(name, progress=progress)

    def load_model(self, name: str) -> None:
        self._update_lang_task_enabled(name)
        super().load_model(name)

    def model_loaded(self, model: Any) -> None:
        langs = list(getattr(model, "languages", []) or [])
        cur = self.language_combo.currentText()
        self.language_combo.blockSignals(True)
        self.language_combo.clear()
        self.language_combo.addItems(["auto", *langs] if getattr(model, "multilingual", False) else ["en"])
        i = self.language_combo.findText(cur)
        self.language_combo.setCurrentIndex(max(0, i))
        self.language_combo.blockSignals(False)
        self.candidates_edit.set_languages(langs if getattr(model, "multilingual", False) else None)
        self._update_lang_task_enabled()

    def _update_lang_task_enabled(self, name: str | None = None) -> None:
        if self.model is not None and name is None:
            multi = bool(getattr(self.model, "multilingual", True))
        else:
            multi = not is_english_only(name if name is not None else self.model_combo.currentText())
        for c in (self.language_combo, self.task_combo, self.candidates_edit):
            c.setEnabled(multi)
            c.setToolTip(c.toolTip() if multi else "English-only model: transcribes English only")
        if not multi:
            self.task_combo.blockSignals(True)
            self.task_combo.setCurrentText("transcribe")
            self.task_combo.blockSignals(False)

    def language(self) -> str:
        """The chosen language ('auto' or a code; 'en' for English-only models)."""
        return self.language_combo.currentText() if self.language_combo.isEnabled() else "en"

    def task(self) -> str:
        """'transcribe' or 'translate'."""
        return self.task_combo.currentText() if self.task_combo.isEnabled() else "transcribe"

    def decode_extras(self) -> dict:
        """Keyword arguments every decode of the model gets beside language and task:
        ``timestamps=True`` when the box is ticked, ``candidate_languages`` when the field has
        codes and the model is multilingual (nothing otherwise)."""
        extras = {"timestamps": True} if self.timestamps_check.isChecked() else {}
        if self.candidates_edit.isEnabled() and self.candidates_edit.codes():
            extras["candidate_languages"] = self.candidates_edit.codes()
        if self.longform_run:  # fork / what-if / end rows go back to the long-form run's windows
            extras = {"longform": True, **{k: v for k, v in extras.items() if k != "timestamps"}}
        return extras

    def _on_event(self, ev: Any) -> None:
        super()._on_event(ev)
        from core.events import Finished

        if isinstance(ev, Finished) and not ev.cancelled:
            self._say_what_was_skipped(ev)

    def _say_what_was_skipped(self, fin: Any) -> None:
        """After a run: the status says how many tokens were decoded and kept, the windows skipped
        as silence ("1 window skipped as silence (no-speech 0.95, −inf dBFS)") and the first
        warning (a fixed window that loops, a kept long-form window the model thinks silent; all
        of them in the banner). Numbers only: no model call."""
        from core.tasks.longform import attempt_warning, loudest_db, silence_note
        from core.tasks.speech import SKIPPED, WINDOW_SAMPLES, window_warnings

        warns: list[str] = []
        if self.longform_run:
            attempts = self.longform_attempts
            skipped = [(a.no_speech_prob, a.loudest_db) for a in attempts if a.verdict == "silence"]
            threshold = self.longform_panel.options().no_speech_threshold
            warns = [w for w in (attempt_warning(a, threshold) for a in attempts) if w]
            what = f"Decoded: {fin.stats.n_tokens} tokens, {len(fin.token_ids)} kept ({fin.reason})"
        else:
            segs = list(self.run.segments(0))
            audio = self.audio if self.audio is not None else np.zeros(0, np.float32)
            skipped = [(s.no_speech_prob, loudest_db(audio[s.segment * WINDOW_SAMPLES:(s.segment + 1) * WINDOW_SAMPLES]))
                       for s in segs if s.label.endswith(SKIPPED)]
            decode = getattr(getattr(self.model, "backend", None), "decode", None)
            if decode is not None:
                warns = window_warnings(segs + list(self.run.branch_steps(0)), decode)
            what = f"Decoded: {fin.stats.n_tokens} tokens ({fin.reason})"
        note = silence_note(skipped)
        if warns:
            self.banner.show_message("\n".join(warns))
        if note or warns:
            self.statusMessage.emit(" · ".join(x for x in (what, note, warns[0] if warns else "") if x))

    def task_input(self, purpose: str = "decode") -> SpeechInput:
        """The audio with the chosen language, task and :meth:`decode_extras`."""
        return SpeechInput(self.audio, self.language(), self.task(), **self.decode_extras())

    def decode_fn(self, options: DecodingOptions) -> RunFn:
        if self.longform_active():
            return self.longform_fn(options)  # SpeechModel.transcribe: seek, conditioning, fallback
        return super().decode_fn(options)

    def lanes_fn(self, lanes: list[DecodingOptions]) -> RunFn:
        if self.longform_refusal("Lanes"):
            raise RuntimeError(self.longform_refusal("Lanes"))
        return super().lanes_fn(lanes)

    def input_settings(self) -> dict:
        return {"language": self.language(), "task": self.task(), "timestamps": self.timestamps_check.isChecked(),
                "language_candidates": ", ".join(self.candidates_edit.codes())}

    def apply_input_settings(self, settings: dict) -> None:
        for key, combo in (("language", self.language_combo), ("task", self.task_combo)):
            i = combo.findText(str(settings.get(key, "")))
            if i >= 0 and combo.isEnabled():
                combo.blockSignals(True)
                combo.setCurrentIndex(i)
                combo.blockSignals(False)
        self.timestamps_check.blockSignals(True)
        self.timestamps_check.setChecked(bool(settings.get("timestamps", False)))
        self.timestamps_check.blockSignals(False)
        self.candidates_edit.set_codes(str(settings.get("language_candidates", "")))

    # ------------------------------------------------------------ settings
    def save_settings(self, s: QSettings) -> None:
        super().save_settings(s)
        s.setValue("speech/language", self.language_combo.currentText())
        s.setValue("speech/task", self.task_combo.currentText())
        s.setValue("speech/device", self.device_combo.currentText())
        s.setValue("speech/timestamps", self.timestamps_check.isChecked())
        s.setValue("speech/language_candidates", ", ".join(self.candidates_edit.codes()))
        self.save_longform_settings(s)

    def restore_settings(self, s: QSettings) -> None:
        super().restore_settings(s)
        for key, combo in (("speech/language", self.language_combo), ("speech/task", self.task_combo),
                           ("speech/device", self.device_combo)):
            v = s.value(key)
            if v is not None:
                combo.blockSignals(True)
                i = combo.findText(str(v))
                if i >= 0:
                    combo.setCurrentIndex(i)
                combo.blockSignals(False)
        self.timestamps_check.blockSignals(True)
        self.timestamps_check.setChecked(str(s.value("speech/timestamps", False)).lower() == "true")
        self.timestamps_check.blockSignals(False)
        self.candidates_edit.set_codes(str(s.value("speech/language_candidates", "") or ""))
        self.restore_longform_settings(s)
        self._update_lang_task_enabled()

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Abort a running recording (stream aborted and closed), then stop the workers."""
        self.recording.drop()
        super().shutdown(wait_ms)


def _open_error(path: Path, message: str) -> str:
    """The banner text for a file that could not be opened: the loader's message (the file
    named by its name), plus what to do unless it already says it."""
    text = message.replace(str(path), path.name)
    if path.name not in text:
        text = f"Could not open {path.name}: {text}"
    if "mp3" not in text.lower() and "open" not in text.lower():
        text += "\nOpen a wav, flac, ogg or mp3 file with sound in it."
    return text


def _show_tab(widget: QWidget) -> None:
    """Make ``widget`` the current page of the QTabWidget it is in (if any)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QTabWidget) and parent.indexOf(widget) >= 0:
            parent.setCurrentWidget(widget)
            return
        parent = parent.parentWidget()
