"""Word boundaries moved off silence: a word's DTW span that starts or ends in quiet audio
is trimmed to the loud part (in the manner of stable-ts's ``suppress_silence``, which
adjusts Whisper's timestamps with the waveform's loudness; jianfch/stable-ts
``stable_whisper/stabilization``).

Why: DTW over cross-attention (``core.analysis.alignment``) moves to the next token as soon
as the previous word's sound ends, so a word often starts at the beginning of the pause
before it (on espeak clips with 0.15-0.4 s pauses, base's starts were 0.29 s off on
average). The audio says where the pause is: 20 ms frames whose RMS level is more than
``quiet_db`` below the clip's loudest frame count as silence, and a word's start (end)
moves forward (back) over them, never past the other end; when a span holds the edge of a
neighbouring word beyond a pause of 0.1 s or more, the word keeps its longest sound. Words
whose whole span is quiet keep their times.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np

from core.catalog import FRAME_S, SAMPLE_RATE

__all__ = ["QUIET_DB", "frame_levels_db", "snap_words"]

#: frames this far below the clip's loudest 20 ms frame (dB) are silence
QUIET_DB = -35.0
#: ... and so are frames less than this far above the noise floor (dB)
ABOVE_FLOOR_DB = 6.0
#: quiet at least this long (s) between two sounds in a word's span is a pause between words
MIN_PAUSE_S = 0.1
#: how far (s) a word ending (starting) inside a sound may grow to that sound's end (start)
REACH_S = 0.3


def frame_levels_db(audio: np.ndarray, frame: int = int(SAMPLE_RATE * FRAME_S)) -> np.ndarray:
    """RMS level in dBFS of each ``frame``-sample frame (320 = 20 ms at 16 kHz, one encoder
    frame) of float32 audio; -inf for all-zero frames. float64 (n_frames,)."""
    audio = np.asarray(audio, np.float64)
    n = math.ceil(len(audio) / frame)
    padded = np.zeros(n * frame)
    padded[: len(audio)] = audio
    rms = np.sqrt(np.mean(np.square(padded.reshape(n, frame)), axis=1))
    with np.errstate(divide="ignore"):
        return 20 * np.log10(rms)


def snap_words(words: Sequence, audio: np.ndarray, *, quiet_db: float = QUIET_DB,
               above_floor_db: float | None = ABOVE_FLOOR_DB, min_pause_s: float = MIN_PAUSE_S,
               reach_s: float = REACH_S, frame_s: float = FRAME_S,
               sample_rate: int = SAMPLE_RATE) -> list:
    """``words`` (``core.analysis.alignment.Word``) with starts and ends moved off silence.

    Args:
        words: words with ``start``/``end`` in seconds from the start of ``audio``.
        audio: float32 (n_samples,) mono at ``sample_rate`` Hz.
        quiet_db: a frame quieter than the loudest frame by more than this (dB, < 0) is silence.
        above_floor_db: so is a frame less than this far above the noise floor (the 10th
            percentile of the frame levels: pauses in a recording with steady noise); None = off.
        min_pause_s: quiet shorter than this inside a span is part of the word (a stop
            consonant's closure); a span holding sound, a pause at least this long and more
            sound keeps its longest sound (the rest is the neighbouring word's edge).
        reach_s: a span that ends (starts) inside a sound grows to that sound's end (start),
            by at most this much and never into the next (previous) word.

    Returns:
        new Word objects (same order); a word whose span holds no loud frame is unchanged.

    Raises:
        ValueError: ``quiet_db`` >= 0.
    """
    if quiet_db >= 0:
        raise ValueError(f"quiet_db must be negative (dB below the loudest frame), got {quiet_db}")
    levels = frame_levels_db(audio, int(round(sample_rate * frame_s)))
    if not len(levels) or not np.isfinite(levels.max()):
        return list(words)
    threshold = levels.max() + quiet_db
    if above_floor_db is not None:
        floor = np.percentile(np.maximum(levels, -120.0), 10)  # digital silence counts as -120 dBFS
        threshold = max(threshold, floor + above_floor_db)
    loud = levels >= threshold
    min_gap = max(1, int(round(min_pause_s / frame_s)))
    out = []
    for w in words:
        a = max(0, int(math.floor(w.start / frame_s + 1e-6)))
        b = min(len(loud), int(math.ceil(w.end / frame_s - 1e-6)))
        runs = _sounds(loud[a:b], min_gap)
        if b <= a or not runs:
            out.append(w)
            continue
        first, last = max(runs, key=lambda r: r[1] - r[0])  # the word's sound; bits of its neighbours are smaller
        start = float(max(w.start, (a + first) * frame_s))
        end = float(min(w.end, (a + last) * frame_s))
        out.append(replace(w, start=start, end=max(end, start)))
    return _extend(out, loud, min_gap, frame_s, reach_s)


def _extend(words: list, loud: np.ndarray, min_gap: int, frame_s: float, reach_s: float) -> list:
    """A word whose span ends (starts) inside a sound is extended to where that sound ends
    (starts), at most ``reach_s`` and never into its neighbour's span: DTW sometimes ends a
    word before its sound does (base: ends 0.09 s early on average)."""
    reach = int(round(reach_s / frame_s))
    out = list(words)
    for i, w in enumerate(out):
        nxt = out[i + 1].start if i + 1 < len(out) else len(loud) * frame_s
        prv = out[i - 1].end if i > 0 else 0.0
        e = int(math.ceil(w.end / frame_s - 1e-6))
        if 0 < e <= len(loud) and loud[e - 1]:
            k, quiet = e, 0
            while k < min(len(loud), e + reach) and quiet < min_gap:
                quiet = 0 if loud[k] else quiet + 1
                k += 1
            end = min(nxt, (k - quiet) * frame_s)
            out[i] = w = replace(w, end=float(max(w.end, end)))
        b = int(math.floor(w.start / frame_s + 1e-6))
        if 0 <= b < len(loud) and loud[b]:
            k, quiet = b, 0
            while k > max(0, b - reach) and quiet < min_gap:
                quiet = 0 if loud[k - 1] else quiet + 1
                k -= 1
            start = max(prv, (k + quiet) * frame_s)
            out[i] = replace(w, start=float(min(w.start, start)))
    return out


def _sounds(loud: np.ndarray, min_gap: int) -> list[tuple[int, int]]:
    """(first, end) frame index pairs of the stretches of loud frames in ``loud``, two
    stretches joined when the quiet between them is shorter than ``min_gap`` frames (a stop
    consonant's closure inside a word is not a pause)."""
    idx = np.flatnonzero(loud)
    if not len(idx):
        return []
    runs = [[int(idx[0]), int(idx[0]) + 1]]
    for i in idx[1:]:
        if i - runs[-1][1] < min_gap:
            runs[-1][1] = int(i) + 1
        else:
            runs.append([int(i), int(i) + 1])
    return [(x, y) for x, y in runs]
