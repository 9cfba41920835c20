"""The Speech tab: record or open audio, pick a Whisper model, watch it transcribe.

Audio comes from the microphone (``core.microphone.Recorder``), a file (Open…, drag and
drop; wav/flac/ogg/mp3) or the bundled sample in ``assets/samples/``. Whisper models
load in a worker thread (``core.tasks.speech.SpeechModel.load`` is imported there, so
the window opens before torch is imported); decoding starts as soon as both a model
and an input exist and re-runs on the cached encoder output when an option changes.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QSettings, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
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
from core.options import DecodingOptions

from ..widgets.attention_heatmap import no_si_prefix
from .base import DecodeTab

#: shown before a multilingual model has loaded (then replaced by model.languages)
COMMON_LANGUAGES = ("en", "de", "es", "fr", "it", "pt", "nl", "pl", "ru", "zh", "ja", "ko")
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "samples"
NO_AUDIO = "No audio yet — record, open a file, drop one here, or press Sample."
WARNING_STYLE = "color: #8a5300;"


def first_sample(directory: Path = SAMPLES_DIR) -> Path | None:
    """The first ``.wav`` (by name) in ``assets/samples/``, or None."""
    if not directory.is_dir():
        return None
    wavs = sorted(p for p in directory.iterdir() if p.suffix.lower() == ".wav")
    return wavs[0] if wavs else None


def ask_unsaved(parent: QWidget | None, text: str, informative: str) -> str:
    """Ask Save / Discard / Cancel about unsaved recordings (a modal ``QMessageBox``).

    Returns:
        "save", "discard" or "cancel" (also for Esc or closing the box).
    """
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Unsaved recording")
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


@dataclass(eq=False)
class Take:
    """One recording, kept in the takes list until the user discards it."""

    number: int
    """1, 2, ... in the order recorded (never reused)."""
    audio: np.ndarray
    """float32 (num_samples,) at 16 kHz."""
    saved_to: str | None = None
    """The file it was last saved to, or None while it is unsaved."""

    def label(self) -> str:
        """e.g. "take 2 (12.3 s)", with " · saved" once saved."""
        text = f"take {self.number} ({len(self.audio) / SAMPLE_RATE:.1f} s)"
        return text + (" · saved" if self.saved_to else "")


class _LevelRelay(QObject):
    """Carries the recorder's level (0..1) from the audio thread to the GUI thread."""

    level = Signal(float, float)  # (rms_dbfs, peak)


class SpeechTab(DecodeTab):
    """Speech-to-text with Whisper (see module docstring)."""

    title = "Speech"
    settings_key = "speech"
    #: more height for the input than the base default: the waveform needs ~110 px
    main_splitter_sizes = (330, 170, 350)

    def __init__(self, parent: QWidget | None = None) -> None:
        self.audio: np.ndarray | None = None
        self.source_name = ""
        self._from_recording = False
        self._recorder: Any = None
        self._file_job = None
        self._takes: list[Take] = []
        self._take: Take | None = None  # the take that is the input (None: a file, or nothing)
        self._next_take = 1
        self._warnings: tuple[str, ...] = ()  # about the input (e.g. a truncated file)
        self._level_relay = _LevelRelay()
        super().__init__(parent)
        self._level_relay.level.connect(self._on_level)
        self._rec_timer = QTimer(self)
        self._rec_timer.setInterval(200)
        self._rec_timer.timeout.connect(self._recording_tick)
        self.setAcceptDrops(True)
        self._refresh_mic()
        self._update_lang_task_enabled()
        self._update_takes()
        self._update_buttons()

    # ------------------------------------------------------------ input area
    def build_input(self) -> QWidget:
        """Three rows (input name / microphone and takes / files and model) over the waveform."""
        w = QWidget()
        self.record_button = QPushButton("● Record")
        self.record_button.setToolTip("Record from the microphone; press again to stop (Ctrl+R)")
        self.record_button.clicked.connect(self.toggle_record)
        self.device_combo = QComboBox()
        self.device_combo.setToolTip("input device")
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.device_combo.setMinimumContentsLength(12)
        self.level_meter = QProgressBar()
        self.level_meter.setRange(0, 100)
        self.level_meter.setTextVisible(False)
        self.level_meter.setFixedHeight(10)
        self.level_meter.setMaximumWidth(80)
        self.level_meter.setToolTip("input level while recording")
        self.mic_label = QLabel()
        self.mic_label.setStyleSheet(WARNING_STYLE)
        self.takes_combo = QComboBox()
        self.takes_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.takes_combo.setMinimumContentsLength(13)
        self.takes_combo.setToolTip(
            "Your recordings (takes), kept until you discard them: pick one to decode it again"
        )
        self.takes_combo.activated.connect(self.select_take)
        self.save_button = QPushButton("Save…")
        self.save_button.clicked.connect(self.save_recording)
        self.discard_button = QPushButton("Discard")
        self.discard_button.clicked.connect(self.discard_input)

        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip("Open an audio file: wav, flac, ogg, mp3 (Ctrl+O); or drop one here")
        self.open_button.clicked.connect(self.open_input)
        self.sample_button = QPushButton("Sample")
        self.sample_button.setToolTip(f"Load the bundled sample clip from {SAMPLES_DIR}")
        self.sample_button.clicked.connect(self.load_sample)

        self.model_combo = QComboBox()
        self.model_combo.setEditable(True)
        self.model_combo.addItems(list(BUNDLED))
        self.model_combo.setToolTip(
            "Whisper model: a bundled one (base, tiny.en), a transformers model id or a local folder; "
            "press Enter or Load"
        )
        self.model_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_combo.setMinimumContentsLength(8)
        self.model_combo.activated.connect(lambda _i: self.load_model(self.model_combo.currentText()))
        self.model_combo.lineEdit().returnPressed.connect(lambda: self.load_model(self.model_combo.currentText()))
        self.load_button = QPushButton("Load")
        self.load_button.setToolTip("Load the model named on the left")
        self.load_button.clicked.connect(lambda: self.load_model(self.model_combo.currentText()))
        self.language_combo = QComboBox()
        self.language_combo.addItems(["auto", *COMMON_LANGUAGES])
        self.language_combo.setToolTip("spoken language ('auto' = detect from the first 30 s)")
        self.language_combo.currentIndexChanged.connect(lambda _i: self.request_decode())
        self.task_combo = QComboBox()
        self.task_combo.addItems(list(TASKS))
        self.task_combo.setToolTip("transcribe in the spoken language, or translate to English")
        self.task_combo.currentIndexChanged.connect(lambda _i: self.request_decode())

        self.info_label = QLabel(NO_AUDIO)
        self.info_label.setWordWrap(True)
        self.info_label.setTextFormat(Qt.TextFormat.PlainText)

        self.wave = pg.PlotWidget()
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

        title = QLabel("<b>Input</b>")
        title.setToolTip("audio: record, open or drop a wav/flac/ogg/mp3 file anywhere on this tab")
        row_title = QHBoxLayout()
        row_title.addWidget(title, 0, Qt.AlignmentFlag.AlignTop)
        row_title.addWidget(self.info_label, 1)
        row_mic = QHBoxLayout()  # the microphone and what it made
        row_mic.addWidget(self.record_button)
        row_mic.addWidget(self.device_combo, 1)
        row_mic.addWidget(self.level_meter)
        row_mic.addWidget(self.takes_combo, 1)
        row_mic.addWidget(self.save_button)
        row_mic.addWidget(self.discard_button)
        row_files = QHBoxLayout()  # files and the model
        row_files.addWidget(self.open_button)
        row_files.addWidget(self.sample_button)
        row_files.addSpacing(8)
        row_files.addWidget(QLabel("model"))
        row_files.addWidget(self.model_combo, 1)
        row_files.addWidget(self.load_button)
        row_files.addWidget(QLabel("language"))
        row_files.addWidget(self.language_combo)
        row_files.addWidget(QLabel("task"))
        row_files.addWidget(self.task_combo)
        lay = QVBoxLayout(w)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addLayout(row_title)
        lay.addLayout(row_mic)
        lay.addWidget(self.mic_label)
        lay.addLayout(row_files)
        lay.addWidget(self.wave, 1)
        return w

    def configure_heatmap(self) -> None:
        self.heatmap.set_columns("time (s) — one column per 20 ms encoder frame", FRAME_S)

    def rtf_applies(self) -> bool:
        return True

    # ---------------------------------------------------------- microphone
    def _refresh_mic(self) -> None:
        ok, reason = False, "the microphone module (core/microphone.py) is not available"
        devices: list[Any] = []
        try:
            from core import microphone

            ok, reason = microphone.microphone_status()
            if ok:
                devices = list(microphone.list_input_devices())
        except ImportError:
            ok = False
        except Exception as exc:  # noqa: BLE001 - any failure means: no microphone
            ok, reason = False, str(exc) or type(exc).__name__
        self.mic_ok = bool(ok)
        self.device_combo.clear()
        self.device_combo.addItem("default input", None)
        for d in devices:
            name, ident = _device_name_and_id(d)
            if getattr(d, "is_default", False):
                name += " (default)"
            self.device_combo.addItem(name, ident)
        self.record_button.setEnabled(self.mic_ok)
        self.device_combo.setEnabled(self.mic_ok)
        if self.mic_ok:
            self.mic_label.hide()
            self.record_button.setToolTip("Record from the microphone; press again to stop (Ctrl+R)")
        else:
            msg = f"Recording unavailable: {reason}"
            # one line under the buttons (the first sentence); the whole reason as its tooltip
            self.mic_label.setText(_first_sentence(msg) + ("  (hover for what to do)" if msg != _first_sentence(msg) else ""))
            self.mic_label.setToolTip(msg)
            self.mic_label.show()
            self.record_button.setToolTip(msg)

    def is_recording(self) -> bool:
        """A recording is running."""
        return self._recorder is not None and bool(getattr(self._recorder, "is_recording", False))

    def toggle_record(self) -> None:
        """Start recording, or stop and decode the recording."""
        if self.is_recording():
            self.stop_recording()
        else:
            self.start_recording()

    def start_recording(self) -> None:
        """Start the microphone for a new take (errors go to the banner). Earlier takes stay
        in the takes list."""
        if not self.mic_ok:
            self.show_error(self.mic_label.toolTip() or "No microphone available.")
            return
        try:
            from core.microphone import Recorder

            self._recorder = Recorder(device=self.device_combo.currentData(), on_level=self._level_relay.level.emit)
            self._recorder.start()
        except Exception as exc:  # noqa: BLE001
            self._recorder = None
            self.show_error(f"Could not start recording: {str(exc).rstrip('.')}. Check the input device or pick another one.")
            return
        self.clear_error()
        self.record_button.setText("■ Stop")
        self.info_label.setText(f"Recording take {self._next_take}…")
        self._rec_timer.start()
        self.statusMessage.emit("Recording… press Stop (Ctrl+R) to decode")
        self._update_buttons()

    def stop_recording(self) -> None:
        """Stop the microphone; the recording becomes a new take, the input, and is decoded."""
        take = self._finish_recording()
        if take is not None:
            self.select_take(self._takes.index(take))

    def _finish_recording(self) -> Take | None:
        """Stop the recorder and keep what it recorded as a new take (None if nothing usable)."""
        rec, self._recorder = self._recorder, None
        self._rec_timer.stop()
        self.record_button.setText("● Record")
        self.level_meter.setValue(0)
        if rec is None:
            self._update_buttons()
            return None
        try:
            audio = np.asarray(rec.stop(), dtype=np.float32)
        except Exception as exc:  # noqa: BLE001
            self.show_error(f"Recording failed: {str(exc).rstrip('.')}. Check the input device and record again.")
            self._show_input()
            return None
        if len(audio) < MIN_AUDIO_S * SAMPLE_RATE:
            self.show_error(
                "The recording is empty: no samples arrived from the microphone. Check the device."
                if len(audio) == 0 else
                f"The recording is too short ({1000 * len(audio) / SAMPLE_RATE:.0f} ms); the speech models need "
                f"at least {MIN_AUDIO_S:g} s. Record a longer clip."
            )
            self._show_input()
            return None
        take = Take(self._next_take, audio)
        self._next_take += 1
        self._takes.append(take)
        self._update_takes()
        return take

    def _on_level(self, rms_dbfs: float, peak: float = 0.0) -> None:
        """Show the RMS level on a -60..0 dBFS scale."""
        x = (float(rms_dbfs) + 60.0) / 60.0 if math.isfinite(rms_dbfs) else 0.0
        self.level_meter.setValue(int(round(100 * min(max(x, 0.0), 1.0))))
        self.level_meter.setToolTip(f"input level {rms_dbfs:.0f} dBFS, peak {peak:.2f}")

    def _recording_tick(self) -> None:
        rec = self._recorder
        if rec is None or not self.is_recording():
            return
        try:
            audio = rec.audio()
        except Exception:  # noqa: BLE001 - the next tick or stop() reports
            return
        if audio is not None and len(audio):
            self._show_wave(np.asarray(audio, dtype=np.float32))
            self.info_label.setText(f"Recording take {self._next_take}… {len(audio) / SAMPLE_RATE:.1f} s")

    # --------------------------------------------------------------- takes
    def takes(self) -> list[Take]:
        """The kept recordings, oldest first."""
        return list(self._takes)

    def current_take(self) -> Take | None:
        """The take that is the input, or None (the input is a file, or there is none)."""
        return self._take

    def unsaved_takes(self) -> list[Take]:
        """Takes not saved to a file yet."""
        return [t for t in self._takes if t.saved_to is None]

    def select_take(self, index: int) -> None:
        """Make take number ``index`` (0-based, in :meth:`takes`) the input and decode it."""
        if not 0 <= index < len(self._takes) or self.is_recording():
            self._update_takes()
            return
        take = self._takes[index]
        if self.set_audio(take.audio, take.label().split(" · ")[0], from_recording=True):
            self._take = take
            self._update_takes()

    def _update_takes(self) -> None:
        combo = self.takes_combo
        combo.blockSignals(True)
        combo.clear()
        for t in self._takes:
            combo.addItem(t.label(), t.number)
        combo.setCurrentIndex(self._takes.index(self._take) if self._take in self._takes else -1)
        n = len(self._takes)
        combo.setPlaceholderText("no takes yet" if n == 0 else f"{n} take{'s' if n != 1 else ''} kept")
        combo.blockSignals(False)
        self._update_buttons()

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
            self._take = None
            self._update_takes()
        self._warnings = tuple(warnings)
        self._clear_run_views()
        self._show_input()
        self.heatmap.set_columns(
            "time (s) — one column per 20 ms encoder frame", FRAME_S,
            n_columns=math.ceil(len(audio) / SAMPLE_RATE / FRAME_S),
        )
        self.heatmap.set_waveform(self.audio, SAMPLE_RATE)
        self._update_buttons()
        self.clear_error()
        if self.model is None and not self.is_loading():
            self.statusMessage.emit("Audio ready — load a model to decode it")
        self.request_decode()
        return True

    def _clear_run_views(self) -> None:
        """Forget the previous run: stream, top-k, heatmap and the status bar's statistics."""
        self.stream.clear()
        self.topk.set_step(None)
        self.heatmap.clear()
        self._steps.clear()
        self._latest_step = None
        self._n_live = 0
        self._t_first = None
        self.statsChanged.emit(self._stats_dict(None))

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
        if self._take is not None and self._take.saved_to is None:
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

    def _refuse_while_recording(self, what: str) -> bool:
        """True (and a banner) when recording: files are not opened during a recording."""
        if not self.is_recording():
            return False
        self.show_error(
            f"Cannot open {what} while recording: press ■ Stop (Ctrl+R) first; the recording is then kept as "
            f"take {self._next_take}, and you can open {what}."
        )
        return True

    def open_input(self) -> None:
        """Ctrl+O: pick an audio file (refused while recording, like the disabled Open… button)."""
        if self._refuse_while_recording("a file"):
            return
        start = str(QSettings().value("speech/last_dir", str(Path.home())))
        path, _ = QFileDialog.getOpenFileName(
            self, "Open audio", start, "Audio (*.wav *.flac *.ogg *.mp3);;All files (*)"
        )
        if path:
            QSettings().setValue("speech/last_dir", str(Path(path).parent))
            self.open_file(path)

    def open_file(self, path: str | Path) -> None:
        """Load an audio file (in a worker thread); errors go to the banner. Refused while
        recording. Clips under 0.1 s are refused; a truncated wav opens with a warning."""
        path = Path(path)
        if self._refuse_while_recording(path.name):
            return
        from ..worker import start_worker

        def gen(cancel):
            from core.audio import open_audio

            yield open_audio(path, label=path.name)

        def done(loaded):
            if self._refuse_while_recording(path.name):
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

    def load_sample(self) -> None:
        """Open the first .wav in assets/samples/."""
        p = first_sample()
        if p is None:
            self.show_error(f"No sample clip found: put a .wav file into {SAMPLES_DIR}.")
            return
        self.open_file(p)

    def save_recording(self) -> bool:
        """Save the input (the current take, or the opened file's audio) as a 16 kHz wav
        file, asking where. True if saved."""
        if not self.has_input() or self.is_recording():
            return False
        take = self._take
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
        take = take if take is not None else self._take
        path = Path(path)
        try:
            from core.audio import save_wav

            save_wav(str(path), audio)
        except Exception as exc:  # noqa: BLE001 - AudioError: a sentence for the user
            text = str(exc).strip() or type(exc).__name__
            self.show_error(text if path.name in text else f"Could not save {path.name}: {text}")
            return False
        QSettings().setValue("speech/save_dir", str(path.parent))
        if take is not None:
            take.saved_to = str(path)
            self._update_takes()
            if take is self._take:
                self._show_input()
        self.statusMessage.emit(f"Saved {path.name}")
        return True

    def _drop_recorder(self) -> bool:
        """Abort a running recording (its stream is aborted and closed) and forget it; True
        if there was one."""
        rec, self._recorder = self._recorder, None
        self._rec_timer.stop()
        self.record_button.setText("● Record")
        self.level_meter.setValue(0)
        if rec is None:
            return False
        try:
            rec.discard()
        except Exception:  # noqa: BLE001 - the stream is forgotten either way
            pass
        return True

    def discard_input(self) -> None:
        """Discard: while recording, throw the running recording away (the input stays);
        otherwise forget the input: the current take is removed from the takes list."""
        if self._drop_recorder():
            self._show_input()
            self._update_buttons()
            self.statusMessage.emit("Recording discarded")
            return
        self.cancel()
        take = self._take
        if take is not None and take in self._takes:
            self._takes.remove(take)
            self.statusMessage.emit(f"Discarded {take.label()}")
        self._take = None
        self.audio = None
        self._from_recording = False
        self._warnings = ()
        self._clear_run_views()
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
            self._drop_recorder()
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

    def _update_buttons(self) -> None:
        rec = self.is_recording()
        self.save_button.setEnabled(self.has_input() and not rec)
        self.save_button.setToolTip(
            "Save the current take as a 16 kHz wav file" if self._take is not None
            else "Save the audio as a 16 kHz wav file"
        )
        self.discard_button.setEnabled(self.has_input() or rec)
        self.discard_button.setToolTip(
            "Throw the running recording away" if rec
            else "Remove the current take from the takes list (it is not saved)" if self._take is not None
            and self._take.saved_to is None
            else "Remove the current take from the takes list" if self._take is not None
            else "Forget the current input"
        )
        self.takes_combo.setEnabled(not rec and bool(self._takes))
        self.open_button.setEnabled(not rec)
        self.sample_button.setEnabled(not rec and first_sample() is not None)
        if first_sample() is None:
            self.sample_button.setToolTip(f"No sample: put a .wav into {SAMPLES_DIR}")

    # drag and drop: any local file is taken (a wrong kind is explained in the banner)
    def dragEnterEvent(self, e) -> None:  # noqa: N802
        if _local_paths(e.mimeData()):
            e.acceptProposedAction()
        else:
            e.ignore()

    def dropEvent(self, e) -> None:  # noqa: N802
        paths = _local_paths(e.mimeData())
        if paths:
            e.acceptProposedAction()
            audio = [p for p in paths if p.lower().endswith(AUDIO_SUFFIXES)]
            self.open_file(audio[0] if audio else paths[0])

    # --------------------------------------------------------------- model
    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        from core.tasks.speech import (
            SpeechModel,  # torch is imported here, off the GUI thread
        )

        return SpeechModel.load(name, progress=progress)

    def load_model(self, name: str) -> None:
        self.model_combo.setCurrentText(name.strip())
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
        self._update_lang_task_enabled()

    def _update_lang_task_enabled(self, name: str | None = None) -> None:
        if self.model is not None and name is None:
            multi = bool(getattr(self.model, "multilingual", True))
        else:
            multi = not is_english_only(name if name is not None else self.model_combo.currentText())
        for c in (self.language_combo, self.task_combo):
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

    def decode_fn(self, options: DecodingOptions) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        model, audio, language, task = self.model, self.audio, self.language(), self.task()

        def gen(cancel):
            return model.decode(audio, options, language=language, task=task, cancel=cancel)

        return gen

    def decode_events(self, options: DecodingOptions, cancel: Callable[[], bool]) -> Iterator[Any]:
        return self.decode_fn(options)(cancel)

    # ------------------------------------------------------------ settings
    def save_settings(self, s: QSettings) -> None:
        super().save_settings(s)
        s.setValue("speech/model", self.model_combo.currentText())
        s.setValue("speech/language", self.language_combo.currentText())
        s.setValue("speech/task", self.task_combo.currentText())
        s.setValue("speech/device", self.device_combo.currentText())

    def restore_settings(self, s: QSettings) -> None:
        super().restore_settings(s)
        model = s.value("speech/model")
        if model:
            self.model_combo.setCurrentText(str(model))
        for key, combo in (("speech/language", self.language_combo), ("speech/task", self.task_combo),
                           ("speech/device", self.device_combo)):
            v = s.value(key)
            if v is not None:
                combo.blockSignals(True)
                i = combo.findText(str(v))
                if i >= 0:
                    combo.setCurrentIndex(i)
                combo.blockSignals(False)
        self._update_lang_task_enabled()

    def initial_model(self) -> str:
        """The model to load on start: the last one used, else the default."""
        return self.model_combo.currentText().strip() or DEFAULT_MODEL

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Abort a running recording (stream aborted and closed), then stop the workers."""
        self._drop_recorder()
        super().shutdown(wait_ms)


def _device_name_and_id(d: Any) -> tuple[str, Any]:
    """(label, id for Recorder(device=...)) from whatever list_input_devices returns."""
    if isinstance(d, dict):
        ident = d.get("index", d.get("id", d.get("name")))
        return str(d.get("name", ident)), ident
    if isinstance(d, (tuple, list)) and len(d) >= 2:
        return str(d[1]), d[0]
    name = getattr(d, "name", None)
    if name is not None:
        return str(name), getattr(d, "index", getattr(d, "id", name))
    return str(d), d


def _open_error(path: Path, message: str) -> str:
    """The banner text for a file that could not be opened: the loader's message (the file
    named by its name), plus what to do unless it already says it."""
    text = message.replace(str(path), path.name)
    if path.name not in text:
        text = f"Could not open {path.name}: {text}"
    if "mp3" not in text.lower() and "open" not in text.lower():
        text += "\nOpen a wav, flac, ogg or mp3 file with sound in it."
    return text


def _first_sentence(text: str) -> str:
    """``text`` up to the end of its first sentence."""
    for i, ch in enumerate(text):
        if ch in ".!?" and (i + 1 == len(text) or text[i + 1] == " "):
            return text[: i + 1]
    return text


def _show_tab(widget: QWidget) -> None:
    """Make ``widget`` the current page of the QTabWidget it is in (if any)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QTabWidget) and parent.indexOf(widget) >= 0:
            parent.setCurrentWidget(widget)
            return
        parent = parent.parentWidget()


def _local_paths(mime) -> list[str]:
    """The local files among the dragged URLs."""
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
