"""What a long recording looks like on screen, cheaply.

A 10-minute clip has 9.6 million samples; handing them all to a plot costs the GUI thread
a second or more per redraw. A screen shows at most a few thousand columns, so the
waveform is drawn as its min/max envelope over equal buckets of samples (what audio
editors draw), which keeps every peak visible.
"""

from __future__ import annotations

import numpy as np

#: samples drawn at most (pairs of min/max per bucket)
MAX_POINTS = 16_000


def envelope(audio: np.ndarray, sample_rate: int, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(times in seconds, values) to plot for ``audio``: the samples themselves when there
    are at most ``max_points``, else the minimum and maximum of each of ``max_points // 2``
    equal buckets, interleaved (min, max, min, max, ...) at the buckets' start times.

    Args:
        audio: float32 (n_samples,) mono.
        sample_rate: Hz.
        max_points: upper bound on the points returned (>= 2).

    Returns:
        float64 (n,) seconds and float32 (n,) values, n <= max_points.

    Raises:
        ValueError: ``audio`` not 1-D, or ``max_points`` < 2, or ``sample_rate`` <= 0.
    """
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"audio must be 1-D (n_samples,), got shape {audio.shape}")
    if max_points < 2 or sample_rate <= 0:
        raise ValueError(f"need max_points >= 2 and sample_rate > 0, got {max_points}, {sample_rate}")
    n = len(audio)
    if n <= max_points:
        return np.arange(n, dtype=np.float64) / sample_rate, audio
    buckets = max_points // 2
    per = n // buckets
    body = audio[: per * buckets].reshape(buckets, per)
    values = np.empty(2 * buckets, np.float32)
    values[0::2] = body.min(axis=1)
    values[1::2] = body.max(axis=1)
    starts = np.arange(buckets, dtype=np.float64) * per / sample_rate
    times = np.repeat(starts, 2)
    times[1::2] += 0.5 * per / sample_rate
    return times, values
