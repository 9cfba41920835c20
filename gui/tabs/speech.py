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

Beside this file, objects the tab owns and talks to through their public methods: the
input area's rows and waveform (``speech_input_area.py``, :attr:`SpeechTab.input_area`), the
language and task controls (``speech_language.py``), the microphone and its takes
(``speech_takes.py``, :attr:`SpeechTab.mic`), the what-if span (``whatif_inputs.py``,
:attr:`SpeechTab.mask`), long-form runs (``longform.py``, :attr:`SpeechTab.long_form`) and
word timing (``word_timing.py``); what a finished run says is ``speech_report.py``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from core.catalog import (
    AUDIO_SUFFIXES,
    FRAME_S,
    MIN_AUDIO_S,
    SAMPLE_RATE,
    is_english_only,  # noqa: F401 - re-exported (tests)
)
from core.catalog import WHISPER_BUNDLED as BUNDLED
from core.catalog import WHISPER_DEFAULT as DEFAULT_MODEL
from core.dtypes import DTYPES
from core.inputs.pcm16 import compact_audio
from core.inputs.types import SpeechInput
from core.options import DecodingOptions

from .base import SAMPLES_DIR, DecodeTab, RunFn, first_file
from .live import LiveMode
from .longform import LongForm
from .recording import Take
from .speech_input_area import SpeechInputArea, open_error
from .speech_report import show_run_report
from .speech_takes import SpeechTakes
from .whatif_inputs import SpeechMask

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


class SpeechTab(DecodeTab):
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
    mask_hint = SpeechMask.mask_hint
    dtypes = DTYPES
    dtype_tooltip = (
        "Compute type of the model's weights. float32: the default, the same ids as transformers' generate(). "
        "int8: every linear layer with int8 weights (one scale per output row) and the activations quantised "
        "per call, as CTranslate2's int8 (faster-whisper): faster, with slightly different ids. "
        "Changing it reloads the model."
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        self.audio: np.ndarray | None = None
        self.source_name = ""
        self._from_recording = False
        self._warnings: tuple[str, ...] = ()  # about the input (e.g. a truncated file)
        self._load_dtype = "float32"  # the dtype picked when the running load started
        self.mask = SpeechMask(self)  # the what-if's silenced span on the waveform
        self.long_form = LongForm(self)  # long-form runs: attempts, window marks, export
        self.mic = SpeechTakes(self, dialogs=sys.modules[__name__])  # the microphone and its takes
        self.live_mode = LiveMode(self)  # Live: decode while recording, or a file played as live (gui/tabs/live.py)
        super().__init__(parent)
        from ..widgets.timestamp_marks import TimestampMarks

        # segment bounds of timestamp tokens on the input's waveform, the heatmap's and the heatmap
        self.axis.add_plot(self.wave, "input")  # the input's waveform is on the axis' seconds too
        self.timestamp_marks = TimestampMarks(self.axis, self.run)
        self.language_bars.follow(self.run, self.candidates_edit)  # the current window's language probabilities
        from .word_timing import WordTimingController

        # word bands on the waveform, the DTW path on the heatmap, the alignment-head picker
        self.word_timing = WordTimingController(self, self.word_timing_check)
        self.long_form.attach()
        self.live_mode.attach()
        self._recording_failure = ""  # a recording failed while stopping: said once its take is the input
        self.recording.failed.connect(self._recording_failed)
        self.attempts_view, self.window_marks = self.long_form.attempts_view, self.long_form.window_marks
        self._update_lang_task_enabled()
        self.mic.update_takes()

    def build_input(self) -> QWidget:
        area = SpeechInputArea(self)  # its controls, the microphone's and the mask's are the tab's too
        self.info_label, self.wave, self.wave_box = area.info_label, area.wave, area.wave_box
        self.language_task, self.language_bars, self.word_timing_check = (
            area.language_task, area.language_bars, area.word_timing_check)
        self.language_combo, self.candidates_edit = area.language_combo, area.candidates_edit
        self.task_combo, self.timestamps_check = area.task_combo, area.timestamps_check
        bar = self.recording = self.mic.recording
        self.record_button, self.device_combo, self.level_meter = bar.record_button, bar.device_combo, bar.level_meter
        self.takes_combo, self.save_button, self.discard_button = bar.takes_combo, bar.save_button, bar.discard_button
        self.mic_label, self.mask_button, self.mask_span = bar.mic_label, self.mask.mask_button, self.mask.mask_span
        self.longform_panel = self.long_form.panel
        return area

    def configure_heatmap(self) -> None:
        self.heatmap.set_columns(COLUMN_AXIS, FRAME_S)

    def rtf_applies(self) -> bool:
        return True

    def update_buttons(self) -> None:
        """Enable the recording row's buttons, Open… and Sample for the state (recording or not, an input or not)."""
        rec = self.mic.is_recording()
        self.recording.update_buttons(self.has_input())
        self.open_button.setEnabled(not rec)
        has_sample = first_sample() is not None
        self.sample_button.setEnabled(not rec and has_sample)
        if not has_sample:
            self.sample_button.setToolTip(f"No sample: put a .wav into {SAMPLES_DIR}")

    # ------------------------------------------------------------ what the objects offer (delegated)
    def toggle_record(self) -> None:
        """Start recording, or stop and decode the recording (``SpeechTakes.toggle_record``);
        with Live ticked the recording is decoded while it runs (``LiveMode.sync``)."""
        self.mic.toggle_record()
        self.live_mode.sync()

    def _recording_failed(self, message: str) -> None:
        self._recording_failure = message
        QTimer.singleShot(0, lambda: self.show_error(self.pop_recording_failure()) if self._recording_failure else None)

    def pop_recording_failure(self) -> str:
        """The last recording's failure while stopping ("" if none), said no more afterwards."""
        message, self._recording_failure = self._recording_failure, ""
        return message

    def play_file_as_live(self, path: str | Path | None = None, speed: float = 1.0) -> bool:
        """File → Play file as live input (``LiveMode.play_file``; None asks for the file)."""
        return self.live_mode.play_file(path, speed)

    def request_decode(self) -> None:
        """Decode the input; while a live session decodes with the model, once it has ended."""
        if not self.live_mode.holds_model():
            super().request_decode()

    def is_busy(self) -> bool:
        return super().is_busy() or self.live_mode.running()

    def cancel(self) -> bool:
        """Esc: end a live session's input (what is tentative is committed), then the base cancel."""
        stopped = self.live_mode.stop()
        return super().cancel() or stopped

    def is_recording(self) -> bool:
        """A recording is running."""
        return self.mic.is_recording()

    def takes(self) -> list[Take]:
        """The kept recordings, oldest first."""
        return self.mic.takes()

    def current_take(self) -> Take | None:
        """The take that is the input, or None (the input is a file, or there is none)."""
        return self.mic.current_take()

    def save_to(self, path: str | Path, take: Take | None = None) -> bool:
        """Write ``take`` (default: the input) to ``path`` (wav; ``SpeechTakes.save_to``). True on success."""
        return self.mic.save_to(path, take)

    @property
    def mic_ok(self) -> bool:
        """Whether recording works (``SpeechTakes.mic_ok``)."""
        return self.mic.mic_ok

    @mic_ok.setter
    def mic_ok(self, ok: bool) -> None:
        self.mic.mic_ok = ok

    def mask_span_seconds(self, t0: float, t1: float) -> bool:
        """Mask ``t0``..``t1`` seconds for What if? (``SpeechMask``); False for an empty span."""
        return self.mask.mask_span_seconds(t0, t1)

    def exploring_refusal(self, what: str) -> str:
        """Why a fork, what-if or lanes cannot follow the current run ("" if they can; ``LongForm.refusal``,
        ``LiveMode.refusal``)."""
        return self.live_mode.refusal(what) or self.long_form.refusal(what)

    def show_attempts(self) -> None:
        """Bring the long-form run's Attempts tab to the front."""
        self.long_form.show_attempts()

    def alignment_input(self, steps: list) -> tuple[list, dict | None]:
        """(steps, end rows or None) for word timing (``LongForm.alignment_input``)."""
        return self.long_form.alignment_input(steps)

    def export_transcript(self, path: str | None = None) -> bool:
        """File → Export…: the last run as txt/srt/vtt/tsv/json (``LongForm.export_transcript``)."""
        return self.long_form.export_transcript(path)

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
        audio = compact_audio(audio)  # a clip of 5 minutes or more kept as int16 (core/inputs/pcm16.py)
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
            self.mic.update_takes()
        self._warnings = tuple(warnings)
        self.clear_run()
        self.show_input()
        self.heatmap.set_columns(COLUMN_AXIS, FRAME_S, n_columns=math.ceil(len(audio) / SAMPLE_RATE / FRAME_S))
        self.heatmap.set_waveform(self.audio, SAMPLE_RATE)
        self.update_buttons()
        self.clear_error()
        if self.model is None and not self.is_loading():
            self.statusMessage.emit("Audio ready — load a model to decode it")
        self.request_decode()
        return True

    def show_input(self) -> None:
        """Draw the current input's waveform and describe it in the info line."""
        take = self.recording.current
        unsaved = take is not None and take.saved_to is None
        self.input_area.show_input(self.audio if self.has_input() else None, self.source_name, self._warnings, unsaved)

    # --------------------------------------------------------------- files
    def refusal(self, path: Path | None) -> str | None:
        """Files are not opened during a recording (the Open… button is disabled then too)."""
        if not self.mic.is_recording():
            return None
        what = "a file" if path is None else path.name
        return (f"Cannot open {what} while recording: press ■ Stop (Ctrl+R) first; the recording is then kept as "
                f"take {self.recording.next_take}, and you can open {what}.")

    def read_file(self, path: Path) -> bool:
        """Load an audio file (in a worker thread, the run controller's slot "open": a later
        open supersedes it); errors go to the banner. Clips under 0.1 s are refused; a
        truncated wav opens with a warning."""
        from ..run_controller import Callbacks

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
        self.controller.start("open", gen, Callbacks(done, lambda m: self.show_error(open_error(path, m))),
                              name="open-audio")
        return True

    def discard_input(self) -> None:
        """Discard: while recording, throw the running recording away (the input stays);
        otherwise forget the input: the current take is removed from the takes list."""
        if self.mic.is_recording():
            self.live_mode.abort()  # its live session goes with it
        if self.mic.discard_recording():  # a running recording is thrown away; the input stays
            return
        self.cancel()
        self.mic.discard_current()  # the current take leaves the takes list
        self.audio, self._from_recording, self._warnings = None, False, ()
        self.clear_run()
        self.heatmap.set_waveform(None)
        self.show_input()
        self.mic.update_takes()

    def confirm_close(self) -> bool:
        """Before the window closes: Save / Discard / Cancel unsaved takes (``SpeechTakes.confirm_close``).
        False keeps the window open."""
        return self.mic.confirm_close()

    # --------------------------------------------------------------- model
    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        from core.tasks.speech import (
            SpeechModel,  # torch is imported here, off the GUI thread
        )

        return SpeechModel.load(name, progress=progress, dtype=self._load_dtype)

    def load_model(self, name: str) -> None:
        self._load_dtype = self.model_dtype()  # read here, in the GUI thread; the worker loads with it
        self._update_lang_task_enabled(name)
        super().load_model(name)

    def model_loaded(self, model: Any) -> None:
        self.language_task.show_model(model)
        self._update_lang_task_enabled()

    def _update_lang_task_enabled(self, name: str | None = None) -> None:
        model = self.model if name is None else None  # before a load: the name being loaded
        self.language_task.follow_model(model, name if name is not None else self.model_combo.currentText())

    def language(self) -> str:
        """The chosen language ('auto' or a code; 'en' for English-only models)."""
        return self.language_task.language()

    def task(self) -> str:
        """'transcribe' or 'translate'."""
        return self.language_task.task()

    def decode_extras(self) -> dict:
        """Keyword arguments every decode of the model gets beside language and task:
        ``timestamps=True`` when the box is ticked, ``candidate_languages`` when the field has
        codes and the model is multilingual (nothing otherwise)."""
        extras = self.language_task.extras()
        if self.long_form.is_run:  # fork / what-if / end rows go back to the long-form run's windows
            extras = {"longform": True, **{k: v for k, v in extras.items() if k != "timestamps"}}
        return extras

    def take_event(self, ev: Any) -> None:
        if not self.long_form.on_event(ev):  # an attempt of a long-form run
            return
        super().take_event(ev)
        from core.events import Finished

        if isinstance(ev, Finished) and not ev.cancelled:
            show_run_report(self, ev)  # the banner: its warnings; the status: what it skipped

    def task_input(self, purpose: str = "decode") -> SpeechInput:
        """The audio with the chosen language, task and :meth:`decode_extras`."""
        return SpeechInput(self.audio, self.language(), self.task(), **self.decode_extras())

    def decode_fn(self, options: DecodingOptions) -> RunFn:
        if self.long_form.active():
            return self.long_form.decode_fn(options)  # SpeechModel.transcribe: seek, conditioning, fallback
        return super().decode_fn(options)

    def lanes_fn(self, lanes: list[DecodingOptions]) -> RunFn:
        if self.exploring_refusal("Lanes"):
            raise RuntimeError(self.exploring_refusal("Lanes"))
        return super().lanes_fn(lanes)

    def input_settings(self) -> dict:
        return self.language_task.settings()

    def apply_input_settings(self, settings: dict) -> None:
        self.language_task.apply_settings(settings)

    # ------------------------------------------------------------ settings
    def save_settings(self, s: QSettings) -> None:
        super().save_settings(s)
        self.language_task.save(s)
        s.setValue("speech/device", self.device_combo.currentText())
        self.long_form.save_settings(s)
        self.live_mode.save_settings(s)

    def restore_settings(self, s: QSettings) -> None:
        super().restore_settings(s)
        v = s.value("speech/device")
        if v is not None:
            self.device_combo.blockSignals(True)
            i = self.device_combo.findText(str(v))
            if i >= 0:
                self.device_combo.setCurrentIndex(i)
            self.device_combo.blockSignals(False)
        self.language_task.restore(s)
        self.long_form.restore_settings(s)
        self.live_mode.restore_settings(s)
        self._update_lang_task_enabled()

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Abort a running recording (stream aborted and closed) and a live session, then stop the workers."""
        self.live_mode.abort()
        self.recording.drop()
        super().shutdown(wait_ms)
