"""Long recordings kept as 16-bit samples (issue 19 §3: the memory a 1-hour recording takes).

The models read float32 samples in [-1, 1]; an hour of them is 230 MB. :class:`Pcm16Audio`
keeps the samples as int16 (115 MB) and gives float32 (``int16 / 32768``) wherever they
are read: slicing (``audio[a:b]``, ``audio[idx]``) returns a float32 array of just those
samples, and anything that turns it into an array (``np.asarray(audio)``, ``np.mean``,
``soundfile.write``) gets the whole clip as float32: code that does not know the class
still reads the right values, only without the saving. The decoding path reads it a
window at a time: ``core.inputs.types.check_audio`` passes it through, the long-form
log-mel (``core.tasks.longform_windows.LogMel``) reads each window's samples, its cache
key hashes the int16 bytes, and fixed windows are views (:meth:`Pcm16Audio.view`).

:func:`compact_audio` decides: a clip shorter than :data:`COMPACT_MIN_S` stays float32 as it
came. A longer one becomes int16 — losslessly when every sample is a multiple of 1/32768
(a 16-bit source: WAV/FLAC PCM16, a microphone recording at 16 kHz); a float source with
finer detail (a resampled file, 24-bit or float WAV) is rounded to the nearest 1/32768,
as openai/whisper's own front end does (ffmpeg decodes every file to 16 kHz 16-bit PCM):
the error is at most 1.5e-5 (-96 dBFS; a sample of exactly 1.0 reads 32767/32768), under the
log-mel's floor (80 dB below the clip's loudest frame).
"""

from __future__ import annotations

import numpy as np

__all__ = ["COMPACT_MIN_S", "Pcm16Audio", "compact_audio", "to_float32"]

#: clips at least this long (seconds) are kept as int16 by :func:`compact_audio` (5 minutes:
#: 19 MB as float32); shorter ones stay float32 as they came
COMPACT_MIN_S = 300.0

#: int16 full scale: sample = int16 / SCALE
SCALE = 32768.0


class Pcm16Audio:
    """16 kHz mono samples kept as int16, read as float32 in [-1, 1) (module docstring).

    Args:
        pcm: int16 (n_samples,); not copied (treat it as read-only).
        exact: whether the float samples it was made from were all multiples of 1/32768
            (then reading gives them back bit for bit).

    Attributes:
        pcm: the int16 samples. exact: as given. dtype: float32 (what reading gives).
    """

    dtype = np.dtype(np.float32)
    ndim = 1

    def __init__(self, pcm: np.ndarray, exact: bool = True) -> None:
        pcm = np.asarray(pcm)
        if pcm.dtype != np.int16 or pcm.ndim != 1:
            raise ValueError(f"Pcm16Audio needs int16 (n_samples,), got {pcm.dtype} {pcm.shape}")
        self.pcm = pcm
        self.exact = bool(exact)
        self._sha256: str | None = None  # sha256_float32's digest, once computed (the samples are read-only)

    @classmethod
    def from_float(cls, audio: np.ndarray) -> "Pcm16Audio":
        """Round float samples in [-1, 1] to int16 (clipped to [-32768, 32767]).

        Raises:
            ValueError: not 1-D.
        """
        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1:
            raise ValueError(f"audio must be mono (n_samples,), got shape {audio.shape}")
        pcm = np.empty(audio.shape, np.int16)
        exact = True
        step = 1 << 16  # a chunk at a time, in two reused 256 kB buffers: no temporary of the clip's size
        scaled, rounded = np.empty(step, np.float32), np.empty(step, np.float32)
        for a in range(0, len(audio), step):
            chunk = audio[a: a + step]
            x, r = scaled[: len(chunk)], rounded[: len(chunk)]
            np.multiply(chunk, np.float32(SCALE), out=x)
            np.rint(x, out=r)
            if exact:
                exact = bool(np.array_equal(r, x)) and bool(r.max(initial=0) <= 32767) and bool(r.min(initial=0) >= -32768)
            np.clip(r, -32768, 32767, out=r)
            pcm[a: a + step] = r
        return cls(pcm, exact)

    # ------------------------------------------------------------ array-like
    @property
    def shape(self) -> tuple[int]:
        return self.pcm.shape

    @property
    def size(self) -> int:
        return int(self.pcm.size)

    @property
    def nbytes(self) -> int:
        """Bytes held (2 per sample)."""
        return int(self.pcm.nbytes)

    def __len__(self) -> int:
        return len(self.pcm)

    def __getitem__(self, index) -> np.ndarray:
        """float32 samples of ``index`` (a slice, an integer or an index array)."""
        return to_float32(self.pcm[index])

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = to_float32(self.pcm)
        return out if dtype is None else out.astype(dtype, copy=False)

    def view(self, start: int, end: int) -> "Pcm16Audio":
        """Samples [start, end) as another Pcm16Audio sharing these int16 (no copy)."""
        return Pcm16Audio(self.pcm[start:end], self.exact)

    def silenced(self, start: int, end: int) -> "Pcm16Audio":
        """A copy with samples [start, end) set to 0 (a what-if's silenced span)."""
        out = self.pcm.copy()
        out[start:end] = 0
        return Pcm16Audio(out, self.exact)

    def hashed(self) -> "Pcm16Audio":
        """This clip, its :meth:`sha256_float32` digest computed now (the input's identity,
        ``core.inputs.types``): called where a long clip is made, off the GUI thread, so the
        GUI's identity check finds it remembered (~150 ms for an hour otherwise)."""
        self.sha256_float32()
        return self

    def sha256_float32(self) -> str:
        """The SHA-256 hex digest of the float32 samples (what ``np.asarray(self).tobytes()``
        hashes, the same digest), read a chunk at a time: no float32 copy of the clip.
        Computed once (~150 ms for an hour), then remembered."""
        if self._sha256 is not None:
            return self._sha256
        import hashlib

        h, step = hashlib.sha256(), 1 << 16
        for a in range(0, len(self.pcm), step):
            h.update(to_float32(self.pcm[a: a + step]).tobytes())
        self._sha256 = h.hexdigest()
        return self._sha256

    def key_bytes(self) -> memoryview:
        """The int16 bytes, read in place (what a cache key hashes)."""
        return memoryview(np.ascontiguousarray(self.pcm)).cast("B")

    def __repr__(self) -> str:
        return f"Pcm16Audio({len(self)} samples, {'exact' if self.exact else 'rounded'})"


def to_float32(samples) -> np.ndarray:
    """float32 samples in [-1, 1]: int16 ones divided by 32768, a :class:`Pcm16Audio` read,
    float ones as float32 (no copy when they already are)."""
    if isinstance(samples, Pcm16Audio):
        samples = samples.pcm
    samples = np.asarray(samples)
    if samples.dtype == np.int16:
        return samples.astype(np.float32) * np.float32(1.0 / SCALE)
    return np.asarray(samples, dtype=np.float32)


def compact_audio(audio, sample_rate: int = 16000, min_seconds: float = COMPACT_MIN_S):
    """What the app keeps of an input clip: a :class:`Pcm16Audio` for one at least
    ``min_seconds`` long, else ``audio`` as a float32 array (module docstring).

    Args:
        audio: float32 (n_samples,) in [-1, 1], or a Pcm16Audio (returned as is).
        sample_rate: Hz (for the length).
        min_seconds: the shortest clip kept as int16.

    Raises:
        ValueError: not 1-D.
    """
    if isinstance(audio, Pcm16Audio):
        return audio
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"audio must be mono (n_samples,), got shape {audio.shape}")
    if len(audio) < min_seconds * sample_rate:
        return audio
    return Pcm16Audio.from_float(audio).hashed()
