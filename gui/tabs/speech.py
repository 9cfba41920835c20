"""The Speech tab: record or open audio, pick a Whisper model, watch it transcribe.

Audio comes from the microphone (``core.audio.Recorder``), a file (Open…, drag and
drop; wav/flac/ogg/mp3) or the bundled sample in ``assets/samples/``. Whisper models
load in a worker thread (``core.tasks.speech.SpeechModel.load`` is imported there, so
the window opens before torch is imported); decoding starts as soon as both a model
and an input exist and re-runs on the cached encoder output when an option changes.

The heatmap's columns are Whisper encoder frames of 0.02 s, shown in seconds, with
the waveform above on the same axis.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QSettings, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from core.options import DecodingOptions

from ..widgets.attention_heatmap import no_si_prefix
from .base import DecodeTab

# Mirrors of core.tasks.speech constants: that module is imported only in the
# loader thread so the window never waits for it.
SAMPLE_RATE = 16_000
FRAME_S = 0.02  # seconds per Whisper encoder frame (one attention column)
BUNDLED = ("base", "tiny.en")
DEFAULT_MODEL = "base"
TASKS = ("transcribe", "translate")
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")
#: shown before a multilingual model has loaded (then replaced by model.languages)
COMMON_LANGUAGES = ("en", "de", "es", "fr", "it", "pt", "nl", "pl", "ru", "zh", "ja", "ko")
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "samples"


def is_english_only(name: str) -> bool:
    """Whisper naming: ``*.en`` checkpoints are English-only."""
    return name.strip().lower().endswith(".en")


def first_sample(directory: Path = SAMPLES_DIR) -> Path | None:
    """The first ``.wav`` (by name) in ``assets/samples/``, or None."""
    if not directory.is_dir():
        return None
    wavs = sorted(p for p in directory.iterdir() if p.suffix.lower() == ".wav")
    return wavs[0] if wavs else None


class _LevelRelay(QObject):
    """Carries the recorder's level (0..1) from the audio thread to the GUI thread."""

    level = Signal(float, float)  # (rms_dbfs, peak)


class SpeechTab(DecodeTab):
    """Speech-to-text with Whisper (see module docstring)."""

    title = "Speech"
    settings_key = "speech"

    def __init__(self, parent: QWidget | None = None) -> None:
        self.audio: np.ndarray | None = None
        self.source_name = ""
        self._from_recording = False
        self._recorder: Any = None
        self._file_job = None
        self._level_relay = _LevelRelay()
        super().__init__(parent)
        self._level_relay.level.connect(self._on_level)
        self._rec_timer = QTimer(self)
        self._rec_timer.setInterval(200)
        self._rec_timer.timeout.connect(self._recording_tick)
        self.setAcceptDrops(True)
        self._refresh_mic()
        self._update_lang_task_enabled()
        self._update_buttons()

    # ------------------------------------------------------------ input area
    def build_input(self) -> QWidget:
        w = QWidget()
        self.record_button = QPushButton("● Record")
        self.record_button.setToolTip("Record from the microphone; press again to stop (Ctrl+R)")
        self.record_button.clicked.connect(self.toggle_record)
        self.device_combo = QComboBox()
        self.device_combo.setToolTip("input device")
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.device_combo.setMinimumContentsLength(14)
        self.level_meter = QProgressBar()
        self.level_meter.setRange(0, 100)
        self.level_meter.setTextVisible(False)
        self.level_meter.setFixedHeight(10)
        self.level_meter.setMaximumWidth(120)
        self.level_meter.setToolTip("input level while recording")
        self.mic_label = QLabel()
        self.mic_label.setStyleSheet("color: #8a5300;")
        self.mic_label.setWordWrap(True)

        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip("Open an audio file: wav, flac, ogg, mp3 (Ctrl+O); or drop one here")
        self.open_button.clicked.connect(self.open_input)
        self.sample_button = QPushButton("Sample")
        self.sample_button.setToolTip(f"Load the bundled sample clip from {SAMPLES_DIR}")
        self.sample_button.clicked.connect(self.load_sample)
        self.save_button = QPushButton("Save recording…")
        self.save_button.clicked.connect(self.save_recording)
        self.discard_button = QPushButton("Discard")
        self.discard_button.setToolTip("Forget the current recording / input")
        self.discard_button.clicked.connect(self.discard_input)

        self.model_combo = QComboBox()
        self.model_combo.setEditable(True)
        self.model_combo.addItems(list(BUNDLED))
        self.model_combo.setToolTip(
            "Whisper model: a bundled one (base, tiny.en), a transformers model id or a local folder; "
            "press Enter or Load"
        )
        self.model_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.model_combo.setMinimumContentsLength(10)
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

        self.info_label = QLabel("No audio yet — record, open a file, drop one here, or press Sample.")
        self.info_label.setWordWrap(True)

        self.wave = pg.PlotWidget()
        self.wave.setBackground(None)
        self.wave.setMinimumHeight(70)
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

        grid = QGridLayout()
        grid.setHorizontalSpacing(6)
        row0 = QHBoxLayout()
        row0.addWidget(self.record_button)
        row0.addWidget(self.device_combo, 1)
        row0.addWidget(self.level_meter)
        row0.addWidget(self.open_button)
        row0.addWidget(self.sample_button)
        row1 = QHBoxLayout()
        row1.addWidget(self.save_button)
        row1.addWidget(self.discard_button)
        row1.addStretch(1)
        row2 = QHBoxLayout()
        row2.addWidget(QLabel("model"))
        row2.addWidget(self.model_combo, 1)
        row2.addWidget(self.load_button)
        row2.addWidget(QLabel("language"))
        row2.addWidget(self.language_combo)
        row2.addWidget(QLabel("task"))
        row2.addWidget(self.task_combo)
        lay = QVBoxLayout(w)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        title = QLabel("<b>Input</b> — audio (drop a wav/flac/ogg/mp3 file anywhere on this tab)")
        lay.addWidget(title)
        lay.addLayout(row0)
        lay.addWidget(self.mic_label)
        lay.addLayout(row1)
        lay.addLayout(row2)
        lay.addWidget(self.info_label)
        lay.addWidget(self.wave, 1)
        del grid
        return w

    def configure_heatmap(self) -> None:
        self.heatmap.set_columns("time (s) — one column per 20 ms encoder frame", FRAME_S)

    def rtf_applies(self) -> bool:
        return True

    # ---------------------------------------------------------- microphone
    def _refresh_mic(self) -> None:
        ok, reason = False, "the audio module (core/audio.py) is not available"
        devices: list[Any] = []
        try:
            from core import audio as core_audio

            ok, reason = core_audio.microphone_status()
            if ok:
                devices = list(core_audio.list_input_devices())
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
            self.mic_label.setText(msg)
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
        """Start the microphone (errors go to the banner)."""
        if not self.mic_ok:
            self.show_error(self.mic_label.text() or "No microphone available.")
            return
        try:
            from core.audio import Recorder

            self._recorder = Recorder(device=self.device_combo.currentData(), on_level=self._level_relay.level.emit)
            self._recorder.start()
        except Exception as exc:  # noqa: BLE001
            self._recorder = None
            self.show_error(f"Could not start recording: {exc}. Check the input device and try another one.")
            return
        self.clear_error()
        self.record_button.setText("■ Stop")
        self._rec_timer.start()
        self.statusMessage.emit("Recording… press Stop (Ctrl+R) to decode")
        self._update_buttons()

    def stop_recording(self) -> None:
        """Stop the microphone and decode what was recorded."""
        rec = self._recorder
        self._rec_timer.stop()
        self.record_button.setText("● Record")
        self.level_meter.setValue(0)
        if rec is None:
            return
        try:
            audio = rec.stop()
        except Exception as exc:  # noqa: BLE001
            self.show_error(f"Recording failed: {exc}")
            self._update_buttons()
            return
        if audio is None or len(audio) == 0:
            self.show_error("The recording is empty: no samples arrived from the microphone. Check the device.")
            self._update_buttons()
            return
        self.set_audio(np.asarray(audio, dtype=np.float32), "recording", from_recording=True)

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
            self.info_label.setText(f"Recording… {len(audio) / SAMPLE_RATE:.1f} s")

    # --------------------------------------------------------------- input
    def has_input(self) -> bool:
        return self.audio is not None and len(self.audio) > 0

    def set_audio(self, audio: np.ndarray, name: str, from_recording: bool = False) -> None:
        """Use ``audio`` (float32 (n_samples,), 16 kHz mono) as the input and decode it."""
        self.audio = np.asarray(audio, dtype=np.float32)
        self.source_name = name
        self._from_recording = from_recording
        dur = len(self.audio) / SAMPLE_RATE
        self.info_label.setText(f"{name} · {dur:.2f} s · {SAMPLE_RATE // 1000} kHz mono")
        self._show_wave(self.audio)
        self.heatmap.clear()
        self.heatmap.set_columns(
            "time (s) — one column per 20 ms encoder frame", FRAME_S, n_columns=math.ceil(dur / FRAME_S)
        )
        self.heatmap.set_waveform(self.audio, SAMPLE_RATE)
        self._update_buttons()
        self.clear_error()
        if self.model is None and not self.is_loading():
            self.statusMessage.emit("Audio ready — load a model to decode it")
        self.request_decode()

    def _show_wave(self, audio: np.ndarray) -> None:
        t = np.arange(len(audio), dtype=np.float64) / SAMPLE_RATE
        self.wave_curve.setData(t, audio)
        self.wave.setXRange(0.0, max(float(t[-1]) if len(t) else 1.0, 0.1), padding=0.01)

    def open_input(self) -> None:
        """Ctrl+O: pick an audio file."""
        start = str(QSettings().value("speech/last_dir", str(Path.home())))
        path, _ = QFileDialog.getOpenFileName(
            self, "Open audio", start, "Audio (*.wav *.flac *.ogg *.mp3);;All files (*)"
        )
        if path:
            QSettings().setValue("speech/last_dir", str(Path(path).parent))
            self.open_file(path)

    def open_file(self, path: str | Path) -> None:
        """Load an audio file (in a worker thread); errors go to the banner."""
        path = Path(path)
        from ..worker import start_worker

        def gen(cancel):
            from core.audio import load_audio

            yield load_audio(path)

        def done(audio):
            self.set_audio(audio, path.name)

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

    def save_recording(self) -> None:
        """Save the recording as a 16 kHz wav file."""
        if not self.has_input():
            return
        path, _ = QFileDialog.getSaveFileName(self, "Save recording", str(Path.home() / "recording.wav"), "WAV (*.wav)")
        if path:
            self.save_to(path)

    def save_to(self, path: str | Path) -> bool:
        """Write the current audio to ``path`` (wav). True on success; errors go to the banner."""
        try:
            from core.audio import save_wav

            save_wav(str(path), self.audio)
        except Exception as exc:  # noqa: BLE001
            self.show_error(f"Could not save {path}: {exc}. Choose a writable folder.")
            return False
        self.statusMessage.emit(f"Saved {path}")
        return True

    def _drop_recorder(self) -> bool:
        """Discard a running/kept recording and forget the recorder; True if there was one."""
        if self._recorder is None:
            return False
        try:
            self._recorder.discard()
        except Exception:  # noqa: BLE001
            pass
        self._recorder = None
        return True

    def discard_input(self) -> None:
        """Forget the current audio (and a running recording)."""
        if self._drop_recorder():
            self._rec_timer.stop()
            self.record_button.setText("● Record")
        self.cancel()
        self.audio = None
        self._from_recording = False
        self.wave_curve.setData([], [])
        self.heatmap.clear()
        self.heatmap.set_waveform(None)
        self.stream.clear()
        self.topk.set_step(None)
        self.info_label.setText("No audio yet — record, open a file, drop one here, or press Sample.")
        self._update_buttons()

    def _update_buttons(self) -> None:
        rec = self.is_recording()
        self.save_button.setEnabled(self.has_input() and not rec)
        self.save_button.setToolTip("Save the audio as a 16 kHz wav file")
        self.discard_button.setEnabled(self.has_input() or rec)
        self.open_button.setEnabled(not rec)
        self.sample_button.setEnabled(not rec and first_sample() is not None)
        if first_sample() is None:
            self.sample_button.setToolTip(f"No sample: put a .wav into {SAMPLES_DIR}")

    # drag and drop
    def dragEnterEvent(self, e) -> None:  # noqa: N802
        if _audio_paths(e.mimeData()):
            e.acceptProposedAction()
        else:
            e.ignore()

    def dropEvent(self, e) -> None:  # noqa: N802
        paths = _audio_paths(e.mimeData())
        if paths:
            e.acceptProposedAction()
            self.open_file(paths[0])

    # --------------------------------------------------------------- model
    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        from core.tasks.speech import SpeechModel  # torch is imported here, off the GUI thread

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
    """The banner text for a file that could not be opened: the loader's message, plus what to do
    unless it already says it."""
    text = message if str(path.name) in message else f"Could not open {path.name}: {message}"
    if "mp3" not in text.lower():
        text += "\nOpen a wav, flac, ogg or mp3 file with sound in it."
    return text


def _audio_paths(mime) -> list[str]:
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile().lower().endswith(AUDIO_SUFFIXES)]
