"""Timestamp lines on a long-form run (issue 19 §3, GUI stalls): a long-form attempt taken
back removes only its own lines. A whole redraw on every failed attempt cost 2.0 s of GUI
CPU at 830 timestamps on 3 plots (an hour of speech); the lines left are those a redraw
from the run's steps gives."""

from __future__ import annotations

import pyqtgraph as pg

from core.events import StepEvent, TokenProb
from gui.run_state import RunState
from gui.widgets.timestamp_marks import TimestampMarks, timestamp_seconds


def _step(i: int) -> StepEvent:
    tp = [TokenProb(7, " word", 0.9)]
    text = f"<|{(i % 25) * 1.2:.2f}|>" if i % 12 == 0 else " word"
    return StepEvent(step=i, token_id=7, text=text, prob=0.9, raw_prob=0.8, topk=tp, raw_topk=tp, entropy=0.2,
                     segment=i // 80, source_offset=(i // 80) * 1500)


def test_a_retracted_attempt_removes_only_its_own_lines(qtbot, monkeypatch):
    run = RunState()
    plots = [pg.PlotWidget() for _ in range(2)]
    for p in plots:
        qtbot.addWidget(p)
    marks = TimestampMarks([p.getPlotItem() for p in plots], run)
    for i in range(400):
        run.add(_step(i))
    run.flush()  # the frame
    removed = []
    for item in marks.items:  # the one item per plot that draws the lines
        real = item.remove
        monkeypatch.setattr(item, "remove", lambda lines, real=real: (removed.extend(lines), real(lines)))
    before = marks.seconds()
    run.retract(segment=4, step_offset=330)  # the last window's attempt from step 330 on
    expected = sorted(set(timestamp_seconds(run.steps())))
    assert marks.seconds() == expected
    assert len(removed) == (len(before) - len(expected)) * len(plots)  # not every line removed and drawn again
    for p in plots:
        xs = sorted(marks.drawn(p.getPlotItem()))
        assert xs == expected
