"""The Speech tab's microphone bar: Record/Stop, the input device, the level meter, the
takes kept, Save…/Discard, and a line that says why recording is unavailable.

The bar owns the microphone (``core.inputs.microphone.Recorder``, imported when a recording
starts, so the window opens without PortAudio) and the takes: each recording becomes a
:class:`Take` ("take 1 (12.3 s)") that stays in the takes list until the user discards it.
What a take means for the input, and what Save… and Discard do, is the tab's business
(``SpeechTab.select_take``, ``save_recording``, ``discard_input``); the bar reports
through its signals and raises :class:`RecordingError` with the message for the banner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.catalog import MIN_AUDIO_S, SAMPLE_RATE
from core.inputs.pcm16 import COMPACT_MIN_S, compact_audio

from ..widgets.elided_combo import ElidedComboBox

WARNING_STYLE = "color: #8a5300;"
RECORD_TIP = "Record from the microphone; press again to stop (Ctrl+R)"


class RecordingError(Exception):
    """A recording could not start, failed or gave nothing usable; the message is for the banner."""


@dataclass(eq=False)
class Take:
    """One recording, kept in the takes list until the user discards it."""

    number: int
    """1, 2, ... in the order recorded (never reused)."""
    audio: np.ndarray
    """float32 (num_samples,) at 16 kHz; a take of 5 minutes or more as a ``Pcm16Audio`` (int16, read as
    float32: ``core.inputs.pcm16``) once it is no longer :attr:`finishing`."""
    saved_to: str | None = None
    """The file it was last saved to, or None while it is unsaved."""
    finishing: bool = False
    """A long take whose recorder is still being stopped and its audio made int16 on a worker
    (:meth:`RecordingBar.begin_finish`): until then ``audio`` is the float32 recorded up to
    Stop (read-only), and that is the take."""

    def label(self) -> str:
        """e.g. "take 2 (12.3 s)", with " · saved" once saved (" · finishing…" while
        :attr:`finishing`)."""
        text = f"take {self.number} ({len(self.audio) / SAMPLE_RATE:.1f} s)"
        return text + (" · finishing…" if self.finishing else "") + (" · saved" if self.saved_to else "")


class _LevelRelay(QObject):
    """Carries the recorder's level (0..1) from the audio thread to the GUI thread."""

    level = Signal(float, float)  # (rms_dbfs, peak)


class RecordingBar(QWidget):
    """The microphone row and the takes (see the module docstring).

    Signals:
        liveAudio(object): the audio recorded so far (float32, 16 kHz), every 200 ms while recording.
        takePicked(int): the user picked take ``i`` (0-based, in :attr:`takes`) in the takes box.
        failed(str): the recording failed while stopping (a device unplugged); what it had
            recorded is kept as the take all the same; the message is for the banner.
    """

    liveAudio = Signal(object)
    takePicked = Signal(int)
    failed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mic_ok = False
        #: the running ``core.inputs.microphone.Recorder``, or None
        self.recorder: Any = None
        #: the kept recordings, oldest first; ``current`` is the one that is the tab's input
        self.takes: list[Take] = []
        self.current: Take | None = None
        self.next_take = 1
        #: the recorder's level, carried from the audio thread (``level(rms_dbfs, peak)``)
        self.level_relay = _LevelRelay()
        self.level_relay.level.connect(self._on_level)
        self._timer = QTimer(self)
        self._timer.setInterval(200)
        self._timer.timeout.connect(self._tick)
        self._build()
        self.refresh()

    def _build(self) -> None:
        self.record_button = QPushButton("● Record")
        self.record_button.setToolTip(RECORD_TIP)
        self.device_combo = ElidedComboBox()  # a long name is cut with "…"
        self.device_combo.setToolTip("input device")
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.device_combo.setMinimumContentsLength(12)
        self.level_meter = QProgressBar()
        self.level_meter.setRange(0, 100)
        self.level_meter.setTextVisible(False)
        self.level_meter.setFixedHeight(10)
        self.level_meter.setMaximumWidth(48)  # narrow: the row fits 1280 px with the Live box and its picker
        self.level_meter.setToolTip("input level while recording")
        self.mic_label = QLabel()
        self.mic_label.setStyleSheet(WARNING_STYLE)
        self.mic_label.setWordWrap(True)  # a long "no microphone" note must not widen the window
        self.takes_combo = ElidedComboBox()  # a long name is cut with "…"
        self.takes_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.takes_combo.setMinimumContentsLength(13)
        self.takes_combo.setToolTip(
            "Your recordings (takes), kept until you discard them: pick one to decode it again"
        )
        self.takes_combo.activated.connect(self.takePicked)
        self.save_button = QPushButton("Save…")
        self.discard_button = QPushButton("Discard")
        for b in (self.record_button, self.save_button, self.discard_button):  # not the style's 80 px:
            b.setMinimumWidth(b.fontMetrics().horizontalAdvance(b.text()) + 20)  # room for the Live picker
        row = self._row = QHBoxLayout()
        for widget, stretch in ((self.record_button, 0), (self.device_combo, 1), (self.level_meter, 0),
                                (self.takes_combo, 1), (self.save_button, 0), (self.discard_button, 0)):
            row.addWidget(widget, stretch)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        lay.addLayout(row)
        lay.addWidget(self.mic_label)

    def add_beside_record(self, *widgets: QWidget) -> None:
        """Put ``widgets`` right after the Record button (the Live box and its policy picker)."""
        for i, widget in enumerate(widgets, start=self._row.indexOf(self.record_button) + 1):
            self._row.insertWidget(i, widget)

    # ---------------------------------------------------------- microphone
    def refresh(self) -> None:
        """Ask ``core.inputs.microphone`` whether recording works and list the input devices; without
        a microphone, Record is disabled and the line under the row says why."""
        ok, reason = False, "the microphone module (core/inputs/microphone.py) is not available"
        devices: list[Any] = []
        try:
            from core.inputs import microphone

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
            self.record_button.setToolTip(RECORD_TIP)
        else:
            msg = f"Recording unavailable: {reason}"
            # one line under the buttons (the first sentence); the whole reason as its tooltip
            self.mic_label.setText(_first_sentence(msg) + ("  (hover for what to do)" if msg != _first_sentence(msg) else ""))
            self.mic_label.setToolTip(msg)
            self.mic_label.show()
            self.record_button.setToolTip(msg)

    def is_recording(self) -> bool:
        """A recording is running."""
        return self.recorder is not None and bool(getattr(self.recorder, "is_recording", False))

    def start(self) -> None:
        """Start the microphone for take :attr:`next_take`.

        Raises:
            RecordingError: no microphone, or the input device would not start.
        """
        if not self.mic_ok:
            raise RecordingError(self.mic_label.toolTip() or "No microphone available.")
        try:
            from core.inputs.microphone import Recorder

            self.recorder = Recorder(device=self.device_combo.currentData(), on_level=self.level_relay.level.emit)
            self.recorder.start()
        except Exception as exc:  # noqa: BLE001
            self.recorder = None
            raise RecordingError(
                f"Could not start recording: {str(exc).rstrip('.')}. Check the input device or pick another one."
            ) from None
        self.record_button.setText("■ Stop")
        self._timer.start()

    def finish(self) -> Take | None:
        """Stop the microphone and keep what it recorded as a new take (None: no recording ran).

        Raises:
            RecordingError: the recording failed, is empty or shorter than the models need.
        """
        rec = self._forget_recorder()
        if rec is None:
            return None
        try:
            audio = np.asarray(rec.stop(), dtype=np.float32)
        except Exception as exc:  # noqa: BLE001 - e.g. the device was unplugged: keep what arrived before
            audio = self._recorded_before(rec, exc)
        if len(audio) < MIN_AUDIO_S * SAMPLE_RATE:
            raise RecordingError(
                "The recording is empty: no samples arrived from the microphone. Check the device."
                if len(audio) == 0 else
                f"The recording is too short ({1000 * len(audio) / SAMPLE_RATE:.0f} ms); the speech models need "
                f"at least {MIN_AUDIO_S:g} s. Record a longer clip."
            )
        take = Take(self.next_take, compact_audio(audio))  # an hour's take as int16 (core/inputs/pcm16.py)
        self.next_take += 1
        self.takes.append(take)
        return take

    def recorded_s(self) -> float:
        """Seconds the running recording holds so far (0 when none runs, or the recorder
        cannot tell without converting its audio)."""
        rec = self.recorder
        try:
            return float(getattr(rec, "duration_s", 0.0) or 0.0) if rec is not None else 0.0
        except Exception:  # noqa: BLE001 - unknown: the synchronous path
            return 0.0

    def finishes_later(self) -> bool:
        """Stop should end this recording on a worker (:meth:`begin_finish`): it runs and is
        :data:`~core.inputs.pcm16.COMPACT_MIN_S` or longer, so stopping it (the recorder
        converts the whole take once) and keeping it as int16 would hold the GUI thread."""
        return self.is_recording() and self.recorded_s() >= COMPACT_MIN_S

    def begin_finish(self) -> tuple[Take, Any] | None:
        """Stop, on the GUI thread, only what is cheap: the recorder is forgotten here (Record
        can start a new one) and the audio it converted up to now (``Recorder.audio()``
        while recording: the blocks since the last live tick only) becomes a new take
        at once, marked :attr:`Take.finishing`: nothing recorded is lost whatever happens
        next. The caller then runs :meth:`complete` on a worker with the recorder returned
        and hands its result to :meth:`settle` on the GUI thread.

        Returns:
            (the take, the recorder), or None when no recording runs or it gave less than
            the models need (then call :meth:`finish`, which says why).
        """
        rec = self.recorder
        if rec is None:
            return None
        try:
            audio = np.asarray(rec.audio(), dtype=np.float32)  # a read-only view, no copy
        except Exception:  # noqa: BLE001 - finish() stops it and reports
            return None
        if len(audio) < MIN_AUDIO_S * SAMPLE_RATE:
            return None
        self._forget_recorder()
        take = Take(self.next_take, audio, finishing=True)
        self.next_take += 1
        self.takes.append(take)
        return take, rec

    @staticmethod
    def complete(rec: Any) -> tuple[Any, str | None]:
        """On a worker: stop ``rec`` (its stream ends and it converts the whole take) and
        keep the audio as :func:`~core.inputs.pcm16.compact_audio` does (int16 for 5 minutes
        or more). A recorder that fails to stop gives what it had recorded, with the
        message for the banner.

        Returns:
            (the take's audio, None or the failure message).

        Raises:
            Exception: whatever stopping and reading the recorder raised when nothing could be
                read (the take keeps the audio it got at Stop).
        """
        message = None
        try:
            audio = np.asarray(rec.stop(), dtype=np.float32)
        except Exception as exc:  # noqa: BLE001 - e.g. the device was unplugged: what arrived before
            reason = str(exc).rstrip(".") or type(exc).__name__
            audio = np.asarray(rec.audio(), dtype=np.float32)
            message = f"The recording ended with an error ({reason}); the {{seconds}} s recorded before it are kept"
        return compact_audio(audio), message

    def settle(self, take: Take, audio: Any = None, message: str | None = None) -> None:
        """On the GUI thread: :meth:`complete`'s result becomes ``take``'s audio (None, or
        shorter than what the take got at Stop, keeps that: the worker failed or had less),
        and the take is finished. ``message`` (the recorder failed while stopping; its
        ``{seconds}`` is replaced by the take's length) goes to :attr:`failed`."""
        if audio is not None and len(audio) >= len(take.audio):
            take.audio = audio
        take.finishing = False
        if message is not None:
            seconds = f"{len(take.audio) / SAMPLE_RATE:.1f}"
            self.failed.emit(message.replace("{seconds}", seconds) + f" as take {take.number}. Check the input device.")

    def _recorded_before(self, rec: Any, exc: Exception) -> np.ndarray:
        """The audio a recorder that failed to stop had recorded (the take keeps it; ``failed``
        says what happened).

        Raises:
            RecordingError: nothing usable was recorded before the failure.
        """
        reason = str(exc).rstrip(".") or type(exc).__name__
        try:
            audio = np.asarray(rec.audio(), dtype=np.float32)
        except Exception:  # noqa: BLE001 - nothing to keep
            audio = np.zeros(0, np.float32)
        if len(audio) < MIN_AUDIO_S * SAMPLE_RATE:
            raise RecordingError(f"Recording failed: {reason}. Check the input device and record again.") from None
        self.failed.emit(f"The recording ended with an error ({reason}); the {len(audio) / SAMPLE_RATE:.1f} s "
                         f"recorded before it are kept as take {self.next_take}. Check the input device.")
        return audio

    def drop(self) -> bool:
        """Abort a running recording (its stream is aborted and closed) and forget it; True
        if there was one."""
        rec = self._forget_recorder()
        if rec is None:
            return False
        try:
            rec.discard()
        except Exception:  # noqa: BLE001 - the stream is forgotten either way
            pass
        return True

    def _forget_recorder(self) -> Any:
        rec, self.recorder = self.recorder, None
        self._timer.stop()
        self.record_button.setText("● Record")
        self.level_meter.setValue(0)
        return rec

    def _on_level(self, rms_dbfs: float, peak: float = 0.0) -> None:
        """Show the RMS level on a -60..0 dBFS scale."""
        x = (float(rms_dbfs) + 60.0) / 60.0 if math.isfinite(rms_dbfs) else 0.0
        self.level_meter.setValue(int(round(100 * min(max(x, 0.0), 1.0))))
        self.level_meter.setToolTip(f"input level {rms_dbfs:.0f} dBFS, peak {peak:.2f}")

    def _tick(self) -> None:
        rec = self.recorder
        if rec is None or not self.is_recording():
            return
        try:
            audio = rec.audio()
        except Exception:  # noqa: BLE001 - the next tick or stop() reports
            return
        if audio is not None and len(audio):
            self.liveAudio.emit(np.asarray(audio, dtype=np.float32))

    # --------------------------------------------------------------- takes
    def unsaved(self) -> list[Take]:
        """Takes not saved to a file yet."""
        return [t for t in self.takes if t.saved_to is None]

    def show_takes(self) -> None:
        """List the takes in the takes box, the current one selected."""
        combo = self.takes_combo
        combo.blockSignals(True)
        combo.clear()
        for t in self.takes:
            combo.addItem(t.label(), t.number)
        combo.setCurrentIndex(self.takes.index(self.current) if self.current in self.takes else -1)
        n = len(self.takes)
        combo.setPlaceholderText("no takes yet" if n == 0 else f"{n} take{'s' if n != 1 else ''} kept")
        combo.blockSignals(False)

    def update_buttons(self, has_input: bool) -> None:
        """Enable Save…, Discard and the takes box for the state (recording, an input, a take)."""
        rec = self.is_recording()
        take = self.current
        self.save_button.setEnabled(has_input and not rec)
        self.save_button.setToolTip(
            "Save the current take as a 16 kHz wav file" if take is not None
            else "Save the audio as a 16 kHz wav file"
        )
        self.discard_button.setEnabled(has_input or rec)
        self.discard_button.setToolTip(
            "Throw the running recording away" if rec
            else "Remove the current take from the takes list (it is not saved)" if take is not None
            and take.saved_to is None
            else "Remove the current take from the takes list" if take is not None
            else "Forget the current input"
        )
        self.takes_combo.setEnabled(not rec and bool(self.takes))


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


def _first_sentence(text: str) -> str:
    """``text`` up to the end of its first sentence."""
    for i, ch in enumerate(text):
        if ch in ".!?" and (i + 1 == len(text) or text[i + 1] == " "):
            return text[: i + 1]
    return text
