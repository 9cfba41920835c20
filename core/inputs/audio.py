"""Audio input: file loading, resampling and WAV writing (the microphone: ``core.inputs.microphone``).

Everything the models see is 16 kHz float32 mono in [-1, 1] (Whisper's front end,
openai/whisper ``audio.py``: ``SAMPLE_RATE = 16000``). Files are decoded with
libsndfile (python-soundfile: WAV, FLAC, OGG/Vorbis/Opus, MP3), channels are averaged
to mono and the rate is converted with libsoxr (python-soxr, quality "HQ").

:func:`open_audio` is what an app opens a file with: it also refuses clips shorter than
:data:`MIN_DURATION_S` and warns about a WAV file cut short (its header promises more
audio than the file holds). Messages name a file by ``label`` (default: its path; the
GUI passes the file name).

The microphone (PortAudio devices, ``Recorder``) lives in ``core.inputs.microphone``; its names
are re-exported here (``from core.inputs.audio import Recorder`` works) without importing
PortAudio until one of them is used. This module has no Qt dependency.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

from core.catalog import MIN_AUDIO_S
from core.inputs.common import RESAMPLE_QUALITY as _RESAMPLE_QUALITY
from core.inputs.common import SAMPLE_RATE, AudioError  # noqa: F401  (SAMPLE_RATE: 16 kHz, core.catalog)

SUPPORTED_FORMATS = ("wav", "flac", "ogg", "mp3")
"""File formats the app offers (file name extensions); libsndfile may read a few more."""

_SUPPORTED_TEXT = "WAV, FLAC, OGG (Vorbis/Opus) or MP3"
# Audio containers libsndfile cannot decode: named as "unsupported format", not "corrupt".
_UNSUPPORTED_AUDIO_EXT = {
    ".m4a", ".mp4", ".aac", ".wma", ".webm", ".mka", ".amr", ".ape", ".alac", ".3gp", ".mov", ".mkv", ".avi",
}

MIN_DURATION_S = MIN_AUDIO_S
"""Shortest clip in seconds :func:`open_audio` accepts: Whisper's minimum (``core.catalog.MIN_AUDIO_S``)."""

# Re-exported from core.inputs.microphone on first use (PEP 562), so importing core.inputs.audio never
# loads PortAudio.
_MICROPHONE_NAMES = ("InputDevice", "Level", "Recorder", "SILENCE", "list_input_devices", "microphone_status")


def __getattr__(name: str) -> Any:
    if name in _MICROPHONE_NAMES:
        from core.inputs import microphone

        return getattr(microphone, name)
    raise AttributeError(f"module 'core.inputs.audio' has no attribute {name!r}")


# --------------------------------------------------------------------------- files


def _to_mono_16k(audio: np.ndarray, rate: int, sample_rate: int, what: str) -> np.ndarray:
    """(n, channels) float array at ``rate`` Hz -> float32 (m,) mono at ``sample_rate`` Hz in [-1, 1]."""
    if audio.ndim == 2:
        audio = audio.mean(axis=1)
    audio = np.asarray(audio, dtype=np.float32)
    if audio.size == 0:
        raise AudioError(f"{what} contains no audio samples (it is empty). Record or choose a file with sound in it.")
    if not np.all(np.isfinite(audio)):
        raise AudioError(f"{what} contains invalid samples (NaN or infinity); the file is damaged. Use another file.")
    if rate != sample_rate:
        audio = soxr.resample(audio, rate, sample_rate, quality=_RESAMPLE_QUALITY)
    # Resampling may overshoot by a hair near full scale, and float files may exceed it.
    audio = np.clip(audio, -1.0, 1.0)
    return np.ascontiguousarray(audio, dtype=np.float32)


def load_audio(path: str | os.PathLike[str], sample_rate: int = SAMPLE_RATE, *, label: str | None = None) -> np.ndarray:
    """Read an audio file as float32 mono at ``sample_rate``.

    Decodes with libsndfile (WAV, FLAC, OGG/Vorbis/Opus, MP3 and the other formats it
    reads), averages all channels to mono and resamples with soxr (quality "HQ",
    libsoxr's band-limited polyphase resampler). Samples are clipped to [-1, 1].

    Args:
        path: the file.
        sample_rate: target rate in Hz (default 16 000).
        label: how messages name the file (default: the path as given).

    Returns:
        float32 array (num_samples,) in [-1, 1], mono, ``sample_rate`` Hz.

    Raises:
        AudioError: the file is missing, a folder, unreadable, 0 bytes, not audio or
            corrupt, in an unsupported format (e.g. M4A/AAC), or holds no samples. The
            message names the file and the supported formats.
    """
    audio, rate = _read(Path(path), label)
    return _to_mono_16k(audio, rate, sample_rate, label or str(path))


@dataclass(frozen=True)
class LoadedAudio:
    """An audio file opened with :func:`open_audio`."""

    audio: np.ndarray
    """float32 (num_samples,) mono in [-1, 1] at the requested rate; a clip of 5 minutes or more
    as a ``core.inputs.pcm16.Pcm16Audio`` (int16, read as float32: ``compact_audio``)."""
    warnings: tuple[str, ...] = ()
    """Sentences about problems that still left usable audio (e.g. a truncated file)."""


def open_audio(
    path: str | os.PathLike[str],
    sample_rate: int = SAMPLE_RATE,
    *,
    label: str | None = None,
    min_duration_s: float = MIN_DURATION_S,
) -> LoadedAudio:
    """Open an audio file for the app: :func:`load_audio`, plus the checks a user needs.

    Args:
        path: the file.
        sample_rate: target rate in Hz (default 16 000).
        label: how messages name the file (default: the path; the GUI passes the name).
        min_duration_s: shorter clips are refused (default :data:`MIN_DURATION_S`).

    Returns:
        the audio and ``warnings``: a WAV file whose data chunk is shorter than its header
        says (a copy or download cut short) is used as far as it goes, with a sentence
        saying how much is missing.

    Raises:
        AudioError: everything :func:`load_audio` raises, and a clip shorter than
            ``min_duration_s`` (the message gives its length and the minimum).
    """
    p = Path(path)
    label = label or str(path)
    direct = _read_pcm16(p, sample_rate)
    if direct is not None:  # a long 16-bit mono file at the rate: read as the int16 the app keeps
        return LoadedAudio(direct, tuple(_truncation_warnings(p, label)))
    raw, rate = _read(p, label)
    check_duration(len(raw), rate, label, min_duration_s)
    audio = _to_mono_16k(raw, rate, sample_rate, label)
    warnings = _truncation_warnings(p, label)
    del raw  # (the file's samples: the 16 kHz copy is what is kept)
    from core.inputs.pcm16 import compact_audio

    # a clip of 5 minutes or more kept as int16, here on the reading thread (core/inputs/pcm16.py)
    return LoadedAudio(compact_audio(audio, sample_rate), tuple(warnings))


def _truncation_warnings(p: Path, label: str) -> list[str]:
    """The sentence about a WAV file whose data chunk is shorter than its header says, or []."""
    cut = wav_truncation(p)
    if cut is None:
        return []
    declared, present = cut
    return [f"{label} is truncated: its header promises {declared:.2f} s of audio, but the file holds only "
            f"{present:.2f} s (the copy or download was probably cut short). The {present:.2f} s that are there "
            "are used; get a complete copy to use all of it."]


def _read_pcm16(p: Path, sample_rate: int):
    """A ``Pcm16Audio`` read straight from ``p`` when it is a 16-bit PCM mono file at
    ``sample_rate`` Hz of at least ``pcm16.COMPACT_MIN_S`` seconds (what the app keeps of such a
    clip, without the float32 copy, mono copy and conversion of the general path: an hour is
    115 MB at its peak instead of ~650 MB); else None (the general path reads it, and reports
    what is wrong with it)."""
    from core.inputs.pcm16 import COMPACT_MIN_S, Pcm16Audio

    try:
        if not p.is_file() or p.suffix.lower() in _UNSUPPORTED_AUDIO_EXT or not os.access(p, os.R_OK):
            return None
        info = sf.info(str(p))
        if (info.subtype != "PCM_16" or info.channels != 1 or int(info.samplerate) != sample_rate
                or info.frames < COMPACT_MIN_S * sample_rate):
            return None
        pcm, _rate = sf.read(str(p), dtype="int16", always_2d=False)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError, OSError):
        return None
    if pcm.ndim != 1 or len(pcm) < COMPACT_MIN_S * sample_rate:  # a truncated file: the general path decides
        return None
    return Pcm16Audio(np.ascontiguousarray(pcm), exact=True).hashed()


def check_duration(n_samples: int, rate: int, label: str = "The audio", min_duration_s: float = MIN_DURATION_S) -> None:
    """Refuse a clip of ``n_samples`` at ``rate`` Hz that is shorter than ``min_duration_s``.

    Raises:
        AudioError: e.g. "one.wav is too short: it holds 1 sample (0.06 ms) of audio, and
            the speech models need at least 0.1 s. Open or record a longer clip."
    """
    if rate > 0 and n_samples < min_duration_s * rate:
        ms = 1000.0 * n_samples / rate
        length = f"{ms:.2g} ms" if ms < 10 else f"{ms:.0f} ms"
        what = "1 sample" if n_samples == 1 else f"{n_samples} samples"
        raise AudioError(
            f"{label} is too short: it holds {what} ({length}) of audio, and the speech models need at least "
            f"{min_duration_s:g} s. Open or record a longer clip."
        )


def wav_truncation(path: str | os.PathLike[str]) -> tuple[float, float] | None:
    """``(declared_s, present_s)`` when ``path`` is a RIFF/WAVE file whose ``data`` chunk
    header declares more audio than the file holds; None otherwise (not a WAV, complete,
    unreadable, or a streamed WAV whose sizes were never filled in).

    libsndfile silently reads such a file up to its end (its frame count is corrected to
    what is there), so the chunk sizes are compared here.
    """
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(12)
            if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
                return None
            block_align = rate = 0
            pos = 12
            while pos + 8 <= size:
                f.seek(pos)
                chunk = f.read(8)
                cid, n = chunk[:4], int.from_bytes(chunk[4:8], "little")
                if cid == b"fmt ":
                    fmt = f.read(min(n, 16))
                    if len(fmt) >= 14:
                        rate = int.from_bytes(fmt[4:8], "little")
                        block_align = int.from_bytes(fmt[12:14], "little")
                elif cid == b"data":
                    present = size - (pos + 8)
                    if not (block_align and rate) or n in (0, 0xFFFFFFFF) or present >= n:
                        return None
                    present -= present % block_align
                    return n / block_align / rate, present / block_align / rate
                pos += 8 + n + (n & 1)
    except OSError:
        return None
    return None


def _read(p: Path, label: str | None) -> tuple[np.ndarray, int]:
    """libsndfile's (frames, channels) float32 samples and rate of ``p``, or AudioError."""
    name = label or str(p)
    if not p.exists():
        raise AudioError(f"Audio file not found: {name}. Check the path and open a {_SUPPORTED_TEXT} file.")
    if p.is_dir():
        raise AudioError(f"{name} is a folder, not an audio file. Open a {_SUPPORTED_TEXT} file.")
    try:
        size = p.stat().st_size
    except OSError as e:
        raise AudioError(f"Cannot read {name}: {e.strerror}. Check the file's permissions.") from None
    if size == 0:
        raise AudioError(f"{name} is empty (0 bytes). Open a {_SUPPORTED_TEXT} file with sound in it.")
    ext = p.suffix.lower()
    if ext in _UNSUPPORTED_AUDIO_EXT:
        raise AudioError(
            f"Unsupported audio format {ext!r}: {name}. Supported formats are {_SUPPORTED_TEXT}; convert the file "
            f"first, e.g. `ffmpeg -i {p.name} {p.stem}.wav`."
        )
    if not os.access(p, os.R_OK):
        raise AudioError(f"Cannot read {name}: permission denied. Check the file's permissions.")
    try:
        audio, rate = sf.read(str(p), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as e:
        raise AudioError(
            f"Could not decode {name}: it is not an audio file, is corrupt, or is in an unsupported format "
            f"({_clean(e).replace(str(p), name)}). Supported formats are {_SUPPORTED_TEXT}."
        ) from None
    except OSError as e:
        raise AudioError(f"Cannot read {name}: {e.strerror or e}. Check the file and its permissions.") from None
    return audio, int(rate)


def decode_audio_bytes(data: bytes, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Decode an in-memory audio file (the bytes of a WAV/FLAC/OGG/MP3 file).

    Same processing as :func:`load_audio` (mono by averaging, soxr "HQ" resampling).

    Args:
        data: the file's bytes.
        sample_rate: target rate in Hz.

    Returns:
        float32 array (num_samples,) in [-1, 1], mono, ``sample_rate`` Hz.

    Raises:
        AudioError: ``data`` is empty, not audio, corrupt, or holds no samples.
    """
    if not data:
        raise AudioError(f"The audio data is empty (0 bytes). Provide a {_SUPPORTED_TEXT} file's contents.")
    try:
        audio, rate = sf.read(io.BytesIO(bytes(data)), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as e:
        raise AudioError(
            f"Could not decode the audio data: not audio, corrupt or an unsupported format ({_clean(e)}). "
            f"Supported formats are {_SUPPORTED_TEXT}."
        ) from None
    return _to_mono_16k(audio, int(rate), sample_rate, "The audio data")


def _clean(e: BaseException) -> str:
    """A one-line description of a libsndfile error."""
    msg = str(e).strip().splitlines()
    return msg[-1] if msg else type(e).__name__


def duration_s(audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> float:
    """Length of ``audio`` (num_samples,) or (num_samples, channels) in seconds at ``sample_rate`` Hz."""
    return float(np.shape(audio)[0]) / float(sample_rate) if np.ndim(audio) else 0.0


def save_wav(path: str | os.PathLike[str], audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> None:
    """Write ``audio`` as a 16-bit PCM WAV file.

    The file is written next to ``path`` under a temporary name and then renamed, so a
    failed write (disk full) never leaves a half-written file nor destroys an existing one.

    Args:
        path: destination (overwritten if it exists; the folder must exist).
        audio: float array (num_samples,) or (num_samples, channels) in [-1, 1]
            (values outside are clipped), or a ``core.inputs.pcm16.Pcm16Audio`` (its int16
            samples written as they are).
        sample_rate: rate of ``audio`` in Hz.

    Raises:
        AudioError: ``audio`` has the wrong shape, is empty or not finite, or the file
            cannot be written. The message is one sentence that names the file by its
            name, says why (missing folder, no permission, disk full) and what to do.
    """
    from core.inputs.pcm16 import Pcm16Audio

    # a long clip kept as int16 is written as it is: no float32 copy of it (~0.5 GB for an hour)
    a = audio.pcm if isinstance(audio, Pcm16Audio) else np.asarray(audio)
    if a.ndim not in (1, 2) or a.size == 0:
        raise AudioError(
            f"Cannot save audio of shape {a.shape}: expected a non-empty (num_samples,) or (num_samples, channels) array."
        )
    if a.dtype != np.int16:
        a = a.astype(np.float32, copy=False)
        if not np.all(np.isfinite(a)):
            raise AudioError("Cannot save audio that contains NaN or infinite samples.")
        a = np.clip(a, -1.0, 1.0)
    if sample_rate <= 0:
        raise AudioError(f"Cannot save audio with sample rate {sample_rate} Hz; give a positive rate.")
    p = Path(path)
    folder = p.parent
    if not folder.exists():
        raise AudioError(f"Could not save {p.name}: the folder {folder} does not exist; choose an existing folder.")
    if not folder.is_dir():
        raise AudioError(f"Could not save {p.name}: {folder} is a file, not a folder; choose a folder.")
    if p.is_dir():
        raise AudioError(f"Could not save {p.name}: a folder of that name exists there; choose another file name.")
    tmp = p.with_name(f".{p.name}.part")
    try:
        with open(tmp, "wb") as f:
            sf.write(f, a, int(sample_rate), subtype="PCM_16", format="WAV")
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        reason = (e.strerror or str(e)).rstrip(".")
        reason = reason[:1].lower() + reason[1:]
        raise AudioError(
            f"Could not save {p.name} in {folder}: {reason}; choose a folder you can write to, with free space."
        ) from None
    except (sf.LibsndfileError, RuntimeError) as e:
        tmp.unlink(missing_ok=True)
        raise AudioError(f"Could not save {p.name}: {_clean(e).rstrip('.')}; try another folder.") from None
