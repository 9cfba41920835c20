"""Synthetic speech for tests: espeak-ng text-to-speech, resampled to 16 kHz mono.

Requires the Debian package ``espeak-ng`` (``apt-get install -y espeak-ng``).
"""

from __future__ import annotations

import io
import shutil
import subprocess

import numpy as np
import soundfile as sf
import soxr

SAMPLE_RATE = 16_000
"""Sample rate in Hz of the audio returned by :func:`synth_speech`."""


def synth_speech(text: str, voice: str = "en-us", words_per_minute: int = 150) -> np.ndarray:
    """Speak ``text`` with espeak-ng and return the waveform.

    Runs ``espeak-ng -v <voice> -s <words_per_minute> --stdout <text>``, decodes the WAV
    it writes (22 050 Hz, 16-bit) with soundfile and resamples it to 16 kHz with soxr
    (quality "HQ").

    Args:
        text: what to say (non-empty).
        voice: espeak-ng voice name, e.g. "en-us", "de".
        words_per_minute: speaking rate.

    Returns:
        float32 array (num_samples,) in [-1, 1], mono, 16 000 Hz.

    Raises:
        ValueError: ``text`` is empty.
        RuntimeError: espeak-ng is not installed or failed.
    """
    if not text.strip():
        raise ValueError("synth_speech: text is empty; pass the words to speak.")
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed: run `apt-get install -y espeak-ng`.")
    proc = subprocess.run(
        [exe, "-v", voice, "-s", str(words_per_minute), "--stdout", text],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout:
        raise RuntimeError(
            f"espeak-ng failed (exit {proc.returncode}): {proc.stderr.decode(errors='replace').strip()}"
        )
    audio, rate = sf.read(io.BytesIO(proc.stdout), dtype="float32", always_2d=True)
    audio = audio.mean(axis=1)
    if rate != SAMPLE_RATE:
        audio = soxr.resample(audio, rate, SAMPLE_RATE, quality="HQ")
    return np.ascontiguousarray(audio, dtype=np.float32)
