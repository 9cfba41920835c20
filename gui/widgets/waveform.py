"""What a long recording looks like on screen, cheaply.

A 10-minute clip has 9.6 million samples, an hour 57.6 million; handing them all to a
plot costs the GUI thread a second or more per redraw. A screen shows at most a few
thousand columns, so the waveform is drawn as its min/max envelope over equal buckets of
samples (what audio editors draw), which keeps every peak visible.

The envelope of an hour still reads 230 MB of samples (~50 ms). The Speech tab draws the
same clip twice (its waveform, and the strip above the heatmap), so the last few
envelopes are remembered per array (by identity, length and a sample of its values): the
second view of the same clip costs nothing.
"""

from __future__ import annotations

import weakref

import numpy as np

#: samples drawn at most (pairs of min/max per bucket)
MAX_POINTS = 16_000
#: buckets reduced at a time (their samples stay in the CPU cache between min and max)
_BLOCK = 64
#: envelopes remembered (see the module docstring)
_MEMO_SIZE = 2
_memo: list[tuple[weakref.ref, tuple, tuple[np.ndarray, np.ndarray]]] = []


def _fingerprint(audio: np.ndarray, sample_rate: int, max_points: int) -> tuple:
    """What must be equal for a remembered envelope of the same array object to be reused."""
    probe = audio[:: max(1, len(audio) // 257)]
    return (len(audio), audio.__array_interface__["data"][0], sample_rate, max_points, probe.tobytes())


def envelope(audio: np.ndarray, sample_rate: int, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(times in seconds, values) to plot for ``audio``: the samples themselves when there
    are at most ``max_points``, else the minimum and maximum of each of ``max_points // 2``
    equal buckets, interleaved (min, max, min, max, ...) at the buckets' start times (the
    last bucket also takes the samples that do not fill a bucket, so every sample counts).

    Args:
        audio: float32 (n_samples,) mono, or a ``core.inputs.pcm16.Pcm16Audio`` (a long clip
            kept as int16: reduced in int16, then scaled).
        sample_rate: Hz.
        max_points: upper bound on the points returned (>= 2).

    Returns:
        float64 (n,) seconds and float32 (n,) values, n <= max_points. Treat them as
        read-only: the same arrays are returned for the same clip again.

    Raises:
        ValueError: ``audio`` not 1-D, or ``max_points`` < 2, or ``sample_rate`` <= 0.
    """
    from core.inputs.pcm16 import SCALE, Pcm16Audio

    owner = audio  # what the memo remembers (a long clip kept as int16: its Pcm16Audio)
    scale = None
    if isinstance(audio, Pcm16Audio):  # the envelope of its int16 samples, scaled: no float32 copy of the clip
        audio, scale = audio.pcm, np.float32(1.0 / SCALE)
    else:
        audio = owner = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"audio must be 1-D (n_samples,), got shape {audio.shape}")
    if max_points < 2 or sample_rate <= 0:
        raise ValueError(f"need max_points >= 2 and sample_rate > 0, got {max_points}, {sample_rate}")
    n = len(audio)
    if n <= max_points:
        return np.arange(n, dtype=np.float64) / sample_rate, audio if scale is None else audio * scale
    key = _fingerprint(audio, sample_rate, max_points)
    for ref, k, out in _memo:
        if ref() is owner and k == key:
            return out
    buckets = max_points // 2
    per = n // buckets
    body = audio[: per * buckets].reshape(buckets, per)
    lo, hi = np.empty(buckets, audio.dtype), np.empty(buckets, audio.dtype)
    for i in range(0, buckets, _BLOCK):  # min and max of a block while it is in the cache
        block = body[i : i + _BLOCK]
        block.min(axis=1, out=lo[i : i + _BLOCK])
        block.max(axis=1, out=hi[i : i + _BLOCK])
    tail = audio[per * buckets :]
    if len(tail):
        lo[-1], hi[-1] = min(lo[-1], tail.min()), max(hi[-1], tail.max())
    values = np.empty(2 * buckets, np.float32)
    values[0::2], values[1::2] = lo, hi
    if scale is not None:
        values *= scale
    starts = np.arange(buckets, dtype=np.float64) * per / sample_rate
    times = np.repeat(starts, 2)
    times[1::2] += 0.5 * per / sample_rate
    out = (times, values)
    try:
        _memo.insert(0, (weakref.ref(owner), key, out))
        del _memo[_MEMO_SIZE:]
    except TypeError:  # an array that takes no weak reference: not remembered
        pass
    return out

