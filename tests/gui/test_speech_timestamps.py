"""The Speech tab's "timestamps" box (issue 14 section 1) on the real bundled tiny.en:
ticking it re-decodes with Whisper's timestamp tokens (they are tokens of the stream) and
draws a line on the waveforms and the heatmap at each segment bound; unticking takes them away."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import soundfile as sf

from gui.tabs.speech import SpeechTab, first_sample
from gui.widgets.timestamp_marks import timestamp_seconds

SLOW_MS = 240_000


def test_timestamp_seconds_reads_timestamp_tokens_of_every_window():
    steps = [SimpleNamespace(text=t, segment=s, source_offset=1500 * s) for t, s in
             [("<|0.00|>", 0), (" Hi", 0), ("<|2.60|>", 0), ("<|1.20|>", 1), ("<|notimestamps|>", 1), ("<", 1)]]
    assert timestamp_seconds(steps) == [0.0, 2.6, 31.2]
    # a long-form window starts at its seek (mel frame 2468 = encoder frame 1234 = 24.68 s), not at 30 s
    assert timestamp_seconds([SimpleNamespace(text="<|1.20|>", segment=1, source_offset=1234)]) == [25.88]


def _wait_decode(qtbot, tab, action):
    with qtbot.waitSignal(tab.decodeFinished, timeout=SLOW_MS) as blocker:
        action()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=SLOW_MS)
    return blocker.args[0]


@pytest.mark.e2e
def test_timestamps_box_decodes_with_timestamp_tokens_and_marks_the_waveform(qtbot):
    tab = SpeechTab()
    qtbot.addWidget(tab)
    tab.options_panel._timer.setInterval(20)
    with qtbot.waitSignal(tab.modelReady, timeout=SLOW_MS):
        tab.load_model("tiny.en")
    audio, rate = sf.read(first_sample(), dtype="float32")
    assert rate == 16000
    fin = _wait_decode(qtbot, tab, lambda: tab.set_audio(audio, "sample"))
    assert tab.timestamp_marks.seconds() == [] and "<|" not in tab.stream.text()
    assert tab.input_settings()["timestamps"] is False

    fin = _wait_decode(qtbot, tab, lambda: tab.timestamps_check.setChecked(True))
    steps = tab.run.steps()
    assert steps[0].text == "<|0.00|>" and fin.reason == "eos"
    segments = tab.model.segments(steps)
    assert len(segments) >= 2
    bounds = sorted({x for s in segments for x in (s["start"], s["end"])})
    assert tab.timestamp_marks.seconds() == pytest.approx(bounds)
    for plot in (tab.wave.getPlotItem(), tab.heatmap.wave_plot, tab.heatmap.plot):  # waveforms and heatmap
        xs = sorted(tab.timestamp_marks.drawn(plot))  # the vertical lines its one item draws there
        assert xs == pytest.approx(bounds)
    assert tab.input_settings()["timestamps"] is True

    _wait_decode(qtbot, tab, lambda: tab.timestamps_check.setChecked(False))
    assert tab.timestamp_marks.seconds() == [] and "<|" not in tab.stream.text()
    tab.shutdown()
