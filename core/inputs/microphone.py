"""The microphone: PortAudio input devices and a :class:`Recorder` that records into memory.

Split from ``core.inputs.audio`` (which re-exports these names, so ``from core.inputs.audio import
Recorder`` keeps working). PortAudio is reached through python-sounddevice, imported
lazily: without the PortAudio shared library (Debian ``libportaudio2``) its import raises
``OSError``; the functions here then report the problem (:func:`microphone_status`) or
raise :class:`core.inputs.common.AudioError` (``core.inputs.audio.AudioError``).

Stream life cycle (PortAudio's ALSA host API prints "Expression ... failed" lines and can
crash when a stream is left running while its device goes away or its callback is
freed): a stream is stopped exactly once, with ``stop()`` (drain) when the recording is
kept or ``abort()`` (drop pending buffers) when it is discarded, and then closed, once.
Never leave a started stream to the garbage collector.

This module has no Qt dependency; the GUI relays :class:`Recorder` level callbacks
(called on the PortAudio thread) to its own thread.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np
import soxr

from core.inputs.common import RESAMPLE_QUALITY, SAMPLE_RATE, AudioError

# ---------------------------------------------------------------------- devices


@dataclass(frozen=True)
class InputDevice:
    """A PortAudio input device, as listed by :func:`list_input_devices`."""

    index: int
    """PortAudio device index (valid until PortAudio re-scans devices)."""
    name: str
    """Device name, e.g. "pulse", "default", "USB Audio: - (hw:1,0)"."""
    default_samplerate: float
    """The device's native rate in Hz."""
    max_input_channels: int
    """Number of input channels."""
    is_default: bool = False
    """True for the system's default input device."""


_PORTAUDIO_HINT = (
    "Install the PortAudio library (Debian/Ubuntu: `sudo apt-get install libportaudio2`; "
    "macOS: `brew install portaudio`) and restart the app."
)


def _sounddevice() -> Any:
    """Import sounddevice; a missing PortAudio library becomes :class:`AudioError`."""
    try:
        import sounddevice
    except OSError as e:  # "PortAudio library not found"
        raise AudioError(f"Microphone unavailable: the PortAudio library could not be loaded ({e}). {_PORTAUDIO_HINT}") from None
    except ImportError as e:
        raise AudioError(
            f"Microphone unavailable: the Python package sounddevice is not installed ({e}). "
            "Run `pip install sounddevice`."
        ) from None
    return sounddevice


def list_input_devices() -> list[InputDevice]:
    """The input (recording) devices PortAudio sees, in PortAudio's order.

    Never raises: returns ``[]`` when PortAudio is missing or fails (see
    :func:`microphone_status` for the reason).
    """
    try:
        sd = _sounddevice()
        devices = sd.query_devices()
        try:
            default_in = int(sd.default.device[0])
        except Exception:  # noqa: BLE001 - no default device
            default_in = -1
        out = []
        for i, d in enumerate(devices):
            if int(d.get("max_input_channels", 0)) > 0:
                out.append(
                    InputDevice(
                        index=int(d.get("index", i)),
                        name=str(d["name"]),
                        default_samplerate=float(d.get("default_samplerate", 0.0)),
                        max_input_channels=int(d["max_input_channels"]),
                        is_default=int(d.get("index", i)) == default_in,
                    )
                )
        return out
    except Exception:  # noqa: BLE001 - documented: never raises
        return []


def microphone_status() -> tuple[bool, str]:
    """Whether recording can work, and a sentence for the user.

    Returns:
        ``(True, "Default microphone: <name>")`` when an input device exists, else
        ``(False, reason)`` where the reason says what to install or plug in. Never raises.
    """
    try:
        sd = _sounddevice()
    except AudioError as e:
        return False, str(e)
    try:
        devices = sd.query_devices()
    except Exception as e:  # noqa: BLE001
        return False, f"PortAudio could not list the audio devices ({e}). Check the sound system and restart the app."
    inputs = list_input_devices()
    if not inputs:
        n = len(devices) if hasattr(devices, "__len__") else 0
        extra = f" ({n} output-only devices found)" if n else ""
        return False, (
            f"No microphone found: PortAudio lists no input device{extra}. Plug in a microphone (or start the "
            "sound server, e.g. PulseAudio/PipeWire, and install `libasound2-plugins`), then restart the app."
        )
    default = next((d for d in inputs if d.is_default), inputs[0])
    return True, f"Default microphone: {default.name}"


# --------------------------------------------------------------------- recorder


class Level(NamedTuple):
    """Loudness of the most recent audio block."""

    rms_dbfs: float
    """Root-mean-square level in dB relative to full scale (0 dBFS = a full-scale square wave; -inf for silence)."""
    peak: float
    """Largest absolute sample value, 0..1."""


SILENCE = Level(-math.inf, 0.0)


def _block_level(block: np.ndarray) -> Level:
    """RMS in dBFS and peak of a float block (n,)."""
    if block.size == 0:
        return SILENCE
    rms = float(np.sqrt(np.mean(np.square(block, dtype=np.float64))))
    peak = float(np.max(np.abs(block)))
    return Level(20.0 * math.log10(rms) if rms > 0 else -math.inf, min(peak, 1.0))


class _LiveBuffer:
    """The recording so far at the output rate, grown block by block while recording
    (``Recorder.audio``): float32 samples in an array that doubles when full, and a streaming
    soxr resampler when the device's rate is not the output rate. ``extend`` holds ``lock``
    (re-entrant); a caller that reads which blocks are new (``blocks``) holds it from that read
    through ``extend``, or two callers convert the same blocks twice."""

    def __init__(self) -> None:
        self.blocks = 0  # the recorder's blocks converted so far
        self.n = 0  # samples held
        self.buf = np.zeros(0, dtype=np.float32)
        self.resampler: Any = None
        self.lock = threading.RLock()

    def extend(self, new: list[np.ndarray], blocks: int, in_rate: int, out_rate: int) -> np.ndarray:
        """Convert ``new`` (the blocks after the first ``self.blocks``; ``blocks`` in all now)
        and return a read-only view of everything converted: float32 (n,)."""
        with self.lock:
            if new and blocks > self.blocks:
                raw = np.concatenate(new[: blocks - self.blocks])
                if in_rate != out_rate:
                    if self.resampler is None:
                        self.resampler = soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32",
                                                             quality=RESAMPLE_QUALITY)
                    raw = self.resampler.resample_chunk(np.ascontiguousarray(raw, dtype=np.float32))
                part = np.clip(raw, -1.0, 1.0).astype(np.float32, copy=False)
                if self.n + len(part) > len(self.buf):
                    grown = np.zeros(max(2 * len(self.buf), self.n + len(part), 16000), dtype=np.float32)
                    grown[: self.n] = self.buf[: self.n]
                    self.buf = grown
                self.buf[self.n : self.n + len(part)] = part
                self.n += len(part)
                self.blocks = blocks
            view = self.buf[: self.n]
            view.flags.writeable = False
            return view


class Recorder:
    """Records a microphone into memory through a PortAudio input stream.

    The stream runs at 16 kHz when the device supports it, otherwise at the device's
    native rate; :meth:`audio` and :meth:`stop` resample to 16 kHz with soxr ("HQ") and
    average the channels to mono. Blocks arrive on PortAudio's audio thread and are
    appended to a list under a lock, so :meth:`audio` may be called from any thread
    while recording (e.g. to draw a live waveform).

    The recording is kept until :meth:`discard` or the next :meth:`start`. :meth:`stop`
    drains and closes the stream; :meth:`discard` aborts and closes it (see the module
    docstring on the order).

    Example::

        rec = Recorder(device="pulse", on_level=lambda rms_dbfs, peak: ...)
        rec.start(); time.sleep(3); audio = rec.stop()   # float32 (48000,) at 16 kHz
    """

    def __init__(
        self,
        device: int | str | None = None,
        sample_rate: int = SAMPLE_RATE,
        on_level: Callable[[float, float], Any] | None = None,
        blocksize: int = 0,
    ) -> None:
        """
        Args:
            device: PortAudio device index, a (sub)string of its name, or None for the
                default input device.
            sample_rate: rate in Hz of the audio returned (default 16 000).
            on_level: optional callback ``on_level(rms_dbfs, peak)`` called on the
                audio thread after each block (keep it fast; exceptions are swallowed).
            blocksize: frames per block; 0 lets PortAudio choose.
        """
        if sample_rate <= 0:
            raise AudioError(f"Recorder sample rate must be positive, got {sample_rate} Hz.")
        self.device = device
        self.sample_rate = int(sample_rate)
        self.on_level = on_level
        self.blocksize = int(blocksize)
        self._lock = threading.Lock()
        self._chunks: list[np.ndarray] = []
        self._frames = 0
        self._stream: Any = None
        self._level = SILENCE
        self._cache: tuple[int, np.ndarray] | None = None
        self._live = _LiveBuffer()
        self.stream_rate: int = self.sample_rate
        """Rate in Hz the device is actually recorded at (set by :meth:`start`)."""
        self.stream_channels: int = 1
        """Channels the device is actually recorded with (set by :meth:`start`)."""
        self.device_name: str | None = None
        """Name of the device being recorded (set by :meth:`start`)."""
        self.overflows = 0
        """Number of blocks PortAudio flagged as input overflow (samples lost)."""

    # ------------------------------------------------------------ state
    @property
    def is_recording(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._stream is not None

    @property
    def level(self) -> Level:
        """(rms_dbfs, peak) of the most recent block; ``(-inf, 0.0)`` before any audio."""
        return self._level

    @property
    def duration_s(self) -> float:
        """Seconds recorded so far."""
        with self._lock:
            return self._frames / float(self.stream_rate)

    def audio(self) -> np.ndarray:
        """Everything recorded so far: float32 (num_samples,) mono at ``sample_rate`` Hz (may be empty).

        While recording, each call converts only the blocks recorded since the previous call
        (a streaming soxr resampler when the device runs at another rate), so a live view that
        asks every 200 ms costs the same after an hour as after a second. That array is a
        read-only view of the recorder's buffer (copy it to change it); its last few
        milliseconds may still be held in the resampler. After :meth:`stop` the whole
        recording is converted once more in one pass, and a writable copy of that is returned.
        """
        if self.is_recording:
            live = self._live
            with live.lock:  # read and convert as one: two callers never convert the same blocks
                with self._lock:
                    new = self._chunks[live.blocks:]
                    blocks = len(self._chunks)
                return live.extend(new, blocks, self.stream_rate, self.sample_rate)
        with self._lock:
            frames = self._frames
            chunks = list(self._chunks)
            cache = self._cache
        if cache is not None and cache[0] == frames:
            return cache[1].copy()
        if frames == 0:
            return np.zeros(0, dtype=np.float32)
        raw = np.concatenate(chunks)
        if self.stream_rate != self.sample_rate:
            raw = soxr.resample(raw, self.stream_rate, self.sample_rate, quality=RESAMPLE_QUALITY)
        out = np.ascontiguousarray(np.clip(raw, -1.0, 1.0), dtype=np.float32)
        with self._lock:
            if self._frames == frames:
                self._cache = (frames, out)
        return out.copy()

    def discard(self) -> None:
        """Forget the recording. A running stream is aborted (its pending buffers are
        dropped) and closed first, so nothing records any more: :attr:`is_recording`
        becomes False. Safe to call at any time, any number of times."""
        self._end_stream(abort=True)
        with self._lock:
            self._chunks = []
            self._frames = 0
            self._cache = None
            self._live = _LiveBuffer()
            self._level = SILENCE

    def _end_stream(self, abort: bool) -> None:
        """Stop the running stream once (``abort()`` drops pending buffers, ``stop()`` drains
        them), then close it, once, even when stopping failed.

        Raises:
            AudioError: PortAudio reported an error while stopping or closing; the stream
                is forgotten either way.
        """
        stream, self._stream = self._stream, None
        if stream is None:
            return
        error: Exception | None = None
        try:
            if abort:
                stream.abort()
            else:
                stream.stop()
        except Exception as e:  # noqa: BLE001 - sd.PortAudioError; sd may be half-initialised
            error = e
        try:
            stream.close()
        except Exception as e:  # noqa: BLE001
            error = error or e
        if error is not None:
            raise AudioError(f"The recording did not stop cleanly: {error}.")

    def __del__(self) -> None:
        # A started stream left to the garbage collector would keep calling a freed callback.
        try:
            self._end_stream(abort=True)
        except Exception:  # noqa: BLE001 - at interpreter exit PortAudio may be gone already
            pass

    # ---------------------------------------------------------- control
    def _open_stream(self, sd: Any) -> Any:
        """Open an InputStream at 16 kHz mono if possible, else at the device's native rate/channels."""
        try:
            info = sd.query_devices(self.device, kind="input")
        except ValueError as e:
            names = ", ".join(repr(d.name) for d in list_input_devices()) or "none"
            raise AudioError(
                f"Input device {self.device!r} not found or ambiguous ({e}). Available input devices: {names}."
            ) from None
        except sd.PortAudioError as e:
            raise AudioError(f"Cannot use the input device {self.device!r}: {e}. Plug in a microphone or pick another device.") from None
        if int(info.get("max_input_channels", 0)) < 1:
            raise AudioError(f"Device {info['name']!r} has no input channels; pick a microphone.")
        index = int(info["index"])
        native = int(round(float(info.get("default_samplerate") or self.sample_rate)))
        max_ch = int(info["max_input_channels"])
        attempts = [(self.sample_rate, 1), (native, 1), (native, min(2, max_ch)), (native, max_ch)]
        last: Exception | None = None
        seen = set()
        for rate, ch in attempts:
            if (rate, ch) in seen:
                continue
            seen.add((rate, ch))
            try:
                sd.check_input_settings(device=index, samplerate=rate, channels=ch, dtype="float32")
                stream = sd.InputStream(
                    device=index,
                    samplerate=rate,
                    channels=ch,
                    dtype="float32",
                    blocksize=self.blocksize,
                    callback=self._callback,
                )
            except (sd.PortAudioError, ValueError) as e:
                last = e
                continue
            self.stream_rate, self.stream_channels, self.device_name = rate, ch, str(info["name"])
            return stream
        raise AudioError(
            f"Cannot open the input device {info['name']!r} ({last}). Close other programs using it, "
            "or pick another device."
        )

    def start(self) -> None:
        """Start recording (clears the previous recording).

        Raises:
            AudioError: PortAudio is missing, the device does not exist or cannot be
                opened, or a recording is already running.
        """
        if self.is_recording:
            raise AudioError("Already recording; stop the current recording first.")
        sd = _sounddevice()
        self.discard()
        self.overflows = 0
        stream = self._open_stream(sd)
        try:
            stream.start()
        except sd.PortAudioError as e:
            stream.close()
            raise AudioError(f"Could not start recording from {self.device_name!r}: {e}. Try another device.") from None
        self._stream = stream

    def stop(self) -> np.ndarray:
        """Stop recording and return it: float32 (num_samples,) mono at ``sample_rate`` Hz.

        Calling it when not recording returns the kept recording (possibly empty). The
        stream is stopped (drained) and then closed, each exactly once.

        Raises:
            AudioError: PortAudio reported an error while stopping or closing the stream
                (the stream is closed and forgotten anyway).
        """
        self._end_stream(abort=False)
        return self.audio()

    def __enter__(self) -> "Recorder":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------ audio thread
    def _callback(self, indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        """PortAudio callback: indata (frames, channels) float32."""
        if status and getattr(status, "input_overflow", False):
            self.overflows += 1
        block = indata[:, 0].copy() if indata.shape[1] == 1 else indata.mean(axis=1, dtype=np.float32)
        level = _block_level(block)
        with self._lock:
            self._chunks.append(block)
            self._frames += len(block)
            self._level = level
        cb = self.on_level
        if cb is not None:
            try:
                cb(level.rms_dbfs, level.peak)
            except Exception:  # noqa: BLE001 - a GUI hiccup must not kill the audio stream
                pass
