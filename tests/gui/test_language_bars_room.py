"""The language bars keep their room while a re-decode starts (issue 22: the first frames
after a slider move): hidden at the clear and shown again at the new run's first frame, they
made the waveform beside them resize twice per move (a pyqtgraph resize re-lays its plot out
and redraws its axes). Now the room stays until the new run's first frame says whether it
has language probabilities; what is shown is unchanged: no bars between the clear and that
frame, the new run's bars after it, and the room goes to the waveform when the new run has
none (an English-only model) or when no run follows the clear."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QApplication, QHBoxLayout, QWidget

from core.events import SegmentEvent
from gui.run_state import RunState
from gui.widgets import language_bars
from gui.widgets.language_bars import LanguageBars
from tests.gui.fakes import make_step

PROBS = (("en", 0.9), ("de", 0.06), ("fr", 0.04))


def row(qtbot):
    """(run, bars, the widget beside them taking the rest of the row) shown at 800 px (their
    host is kept on the run: nothing else names it)."""
    run = RunState()
    host = QWidget()
    qtbot.addWidget(host)
    lay = QHBoxLayout(host)
    wave = QWidget()
    lay.addWidget(wave, 1)
    bars = LanguageBars()
    lay.addWidget(bars)
    bars.follow(run)
    host.resize(800, 200)
    host.show()
    qtbot.waitExposed(host)
    run.host = host
    return run, bars, wave


def frame(run: RunState, probs=PROBS) -> None:
    """A run's first frame: window 0 (with ``probs``, () for none) and one step."""
    run.add_segment(SegmentEvent(segment=0, label="0–30 s", language_probs=probs))
    run.add(make_step(0, " Hello"))
    run.flush()
    QApplication.processEvents()


def settle() -> None:
    for _ in range(3):
        QApplication.processEvents()


def test_a_rerun_keeps_the_bars_room_until_its_first_frame(qtbot):
    run, bars, wave = row(qtbot)
    run.clear()
    frame(run)
    settle()
    assert bars.isVisible() and bars.bars() == list(PROBS)
    width = wave.width()
    run.clear()  # a slider move: the old run goes, the new one starts
    settle()
    assert bars.isHidden() and bars.bars() == []  # nothing of the old run is shown
    assert wave.width() == width  # ... but its room stays: the waveform is not resized
    frame(run, (("de", 0.7), ("en", 0.3)))
    settle()
    assert bars.isVisible() and bars.bars()[0][0] == "de"
    assert wave.width() == width


def test_the_room_goes_to_the_waveform_when_the_new_run_has_no_languages(qtbot):
    run, bars, wave = row(qtbot)
    run.clear()
    frame(run)
    settle()
    width = wave.width()
    run.clear()
    frame(run, ())  # an English-only model: no language probabilities
    settle()
    assert bars.isHidden() and wave.width() > width


def test_the_room_goes_to_the_waveform_when_no_run_follows_the_clear(qtbot, monkeypatch):
    monkeypatch.setattr(language_bars, "KEEP_ROOM_MS", 50)
    run, bars, wave = row(qtbot)
    run.clear()
    frame(run)
    settle()
    width = wave.width()
    run.clear()
    settle()
    assert wave.width() == width
    qtbot.waitUntil(lambda: wave.width() > width, timeout=2000)
    assert bars.isHidden()


def test_the_size_hint_is_computed_once_per_title(qtbot, monkeypatch):
    bars = LanguageBars()
    qtbot.addWidget(bars)
    calls = []
    real = language_bars.QFontMetrics

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(language_bars, "QFontMetrics", counted)
    first = bars.sizeHint()
    for _ in range(5):
        assert bars.sizeHint() == first
    assert len(calls) <= 1
    bars.set_probs(PROBS, window=0, restricted=True)  # a longer title
    assert bars.sizeHint().width() >= first.width()
    assert bars.sizeHint().width() > first.width()  # the longer title's hint (150 -> 237 px), not the cached one
    assert np.isfinite(bars.sizeHint().height())
