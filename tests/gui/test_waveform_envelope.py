"""The waveform envelope of a long clip (issue 19 §3: opening a 1-hour recording stalled the
GUI thread: the Speech tab drew the same 57.6 million samples twice, plus a pass for the
peak)."""

from __future__ import annotations

import numpy as np

from gui.widgets.waveform import envelope


def test_every_sample_counts_even_past_the_last_full_bucket():
    audio = np.zeros(16000 * 10 + 123, np.float32)
    audio[-5] = 0.9  # in the samples that do not fill a bucket
    audio[-60] = -0.7
    t, y = envelope(audio, 16000, max_points=1000)
    assert len(y) <= 1000 and y.max() == np.float32(0.9) and y.min() == np.float32(-0.7)


def test_the_same_clip_is_reduced_once_and_a_changed_one_again():
    audio = (np.random.default_rng(0).standard_normal(16000 * 60) * 0.1).astype(np.float32)
    first = envelope(audio, 16000)
    again = envelope(audio, 16000)
    assert again[0] is first[0] and again[1] is first[1]  # the second view of the clip costs nothing
    copy = audio.copy()
    other = envelope(copy, 16000)  # another array: computed, equal
    assert other[1] is not first[1] and np.array_equal(other[1], first[1])
    audio[0] = 5.0  # changed in place (a probed sample): computed again
    changed = envelope(audio, 16000)
    assert changed[1] is not first[1] and changed[1].max() == np.float32(5.0)


def test_heatmap_strip_peak_comes_from_the_envelope(qtbot, monkeypatch):
    """The strip above the heatmap scales to the clip's peak without another pass over the
    samples (np.abs of the whole clip was 200 ms for an hour)."""
    from gui.widgets.attention_heatmap import AttentionHeatmap

    heat = AttentionHeatmap()
    qtbot.addWidget(heat)
    audio = (np.random.default_rng(1).standard_normal(16000 * 120) * 0.1).astype(np.float32)
    audio[12345] = -0.95
    envelope(audio, 16000)  # the tab's own waveform drew it first
    calls = []
    real_abs = np.abs

    def counting_abs(x, *a, **k):
        calls.append(np.size(x))
        return real_abs(x, *a, **k)

    monkeypatch.setattr(np, "abs", counting_abs)
    heat.set_waveform(audio, 16000)
    assert max(calls, default=0) < len(audio) // 100  # no pass over every sample
    lo, hi = heat.wave_plot.vb.viewRange()[1]
    assert abs(hi - 0.95 * 1.05) < 0.1 and abs(lo + 0.95 * 1.05) < 0.1
