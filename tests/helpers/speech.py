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

#: ten sentences of one story, each < 30 s spoken: long-form tests (joined) and the espeak sets of
#: bench_speech / bench_streaming (one clip each)
LIGHTHOUSE = (
    "The old lighthouse keeper climbed the stairs every evening to light the great lamp.",
    "Ships passing in the night relied on its steady beam to find their way home.",
    "One winter the storm was so strong that the windows shook and the sea rose high.",
    "He kept the flame burning through the darkness until the morning came.",
    "The village remembered his courage for many years after he was gone.",
    "Children still tell the story when the wind howls across the harbor.",
    "Today the lighthouse is a museum, and visitors climb the same stairs.",
    "From the top you can see the coastline stretching far to the north.",
    "The guide explains how the lens was made from hundreds of pieces of glass.",
    "Many people say it is the most beautiful place on the whole coast.",
)
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
