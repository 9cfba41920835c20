"""A re-decode of the same input (a slider move) keeps the attention heatmap's time axis from
the clear to the new run's first frame (issue 22: the frames after a move must be quick).
The clear drops the columns so that the run's events size them to its input; the empty plot
then zoomed to 50 columns (1 s) and the first frame zoomed back out, which drew both plots'
axes and the waveform strip again. A new input still gets its own axis (test_window_state's
test_heatmap_time_axis_fits_each_input), from its run's clear on (H6, session 12)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gui.fakes import FakeSpeechModel
from tests.gui.tab_helpers import speech_tab


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(16000 * seconds), dtype=np.float32) / 16000
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeSpeechModel(n_frames=1500))


def test_a_rerun_keeps_the_heatmaps_time_axis_until_its_first_frame(qtbot, tab):
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(tone(3.0), "short")
    qtbot.waitUntil(lambda: not tab.is_decoding() and tab.workers_idle(), timeout=5000)
    before = tab.heatmap.plot.vb.viewRange()[0]
    assert before[1] == pytest.approx(3.0, abs=0.05)
    tab.request_decode()  # a slider move: the same input again (the run is cleared now, its events follow)
    assert tab.heatmap.row_count() == 0  # nothing of the old run is shown
    assert tab.heatmap.plot.vb.viewRange()[0] == pytest.approx(before)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        pass
    assert tab.heatmap.plot.vb.viewRange()[0] == pytest.approx(before, abs=0.05)


def test_a_new_input_shows_its_own_time_axis_from_its_clear(qtbot, tab):
    """H6 finding 2 (session 12): from a NEW input's clear to its run's first frame the heatmap keeps the old
    input's seconds axis, and the strip above it shows the new waveform cut to that axis (base,
    the sample then the sample twice, 15 s: a 0-7.6 s axis, after4/03_base_twice_early.png;
    77a966d zoomed to 0-1 s instead, before4/03). set_audio knows the new input's columns
    (``set_columns(n_columns=...)``); c50cff4's docstring says a new input gets its own axis."""
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(tone(3.0), "short")
    qtbot.waitUntil(lambda: not tab.is_decoding() and tab.workers_idle(), timeout=5000)
    tab.set_audio(tone(6.0), "longer")  # a new input: cleared now, its first frame comes later
    try:
        assert tab.heatmap.plot.vb.viewRange()[0] == pytest.approx([0.0, 6.0], abs=0.05)
    finally:
        with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
            pass
