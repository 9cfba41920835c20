"""Timestamp lines drawn by ONE graphics item per plot (issue 19 §3, GUI stalls): one
pyqtgraph ``InfiniteLine`` per timestamp made every x-range change recompute 834 bounding
rects per plot (~40 ms at an hour of speech). The item count stays the same however many
timestamps arrive, and the item draws a line at each of them (checked on the pixels)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF

from core.events import StepEvent, TokenProb
from gui.run_state import RunState
from gui.widgets.timestamp_marks import TimestampMarks, timestamp_seconds


def _step(i: int) -> StepEvent:
    tp = [TokenProb(7, " word", 0.9)]
    text = f"<|{(i % 25) * 1.2:.2f}|>" if i % 12 == 0 else " word"
    return StepEvent(step=i, token_id=7, text=text, prob=0.9, raw_prob=0.8, topk=tp, raw_topk=tp, entropy=0.2,
                     segment=i // 80, source_offset=(i // 80) * 1500)


def _plots(qtbot, n=2):
    plots = [pg.PlotWidget() for _ in range(n)]
    for p in plots:
        qtbot.addWidget(p)
    return plots


def _item_count(plot) -> int:
    return len(plot.getPlotItem().getViewBox().childGroup.childItems())  # what the scene draws


def test_the_plot_holds_the_same_number_of_items_however_many_timestamps(qtbot):
    run = RunState()
    plots = _plots(qtbot)
    marks = TimestampMarks([p.getPlotItem() for p in plots], run)
    run.add(_step(0))
    counts = [_item_count(p) for p in plots]
    for i in range(1, 800):
        run.add(_step(i))
    run.flush()  # the frame
    assert len(marks.seconds()) > 50
    assert [_item_count(p) for p in plots] == counts  # not one item per line
    run.clear()
    for i in range(400):
        run.add(_step(i))
    run.flush()
    assert [_item_count(p) for p in plots] == counts


def test_the_one_item_draws_a_line_at_each_timestamp_in_view(qtbot):
    run = RunState()
    (plot,) = _plots(qtbot, 1)
    plot.resize(600, 200)
    plot.setXRange(0, 65, padding=0)
    plot.setYRange(-1, 1, padding=0)
    TimestampMarks([plot.getPlotItem()], run)
    for i in range(240):  # windows 0-2: none between 0.0 and 12.0 s
        run.add(_step(i))
    run.flush()  # the frame
    plot.show()
    qtbot.waitExposed(plot)
    img = plot.grab().toImage()
    vb = plot.getPlotItem().getViewBox()
    arr = np.array([[img.pixelColor(x, y).name() for x in range(img.width())] for y in range(0, img.height(), 4)])
    orange = (arr == "#d55e00").any(axis=0)
    inside = [t for t in timestamp_seconds(run.steps()) if 0.5 < t < 64.5]
    assert len(inside) > 10
    for t in inside:  # every line inside the range
        x = int(round(plot.mapFromScene(vb.mapViewToScene(QPointF(t, 0))).x()))
        assert orange[max(0, x - 1):x + 2].any(), t
    x = int(round(plot.mapFromScene(vb.mapViewToScene(QPointF(7.0, 0))).x()))
    assert not orange[x - 3:x + 4].any()  # no line between timestamps
