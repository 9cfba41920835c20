"""Issue 20 §2: every view follows the run once per frame (``RunState.stepsAdded``), never
the per-token ``stepAdded``; the tab feeds none of them by hand (the top-k chart, the
stream's end and marks, the beam tree's end follow the run too); the marks drawn on the
input's seconds axis find their plots through the shared ``ColumnAxis``."""

from __future__ import annotations

import re
from pathlib import Path

import pyqtgraph as pg

from core.events import Finished, RunStats, SegmentEvent, StepEvent, TokenProb
from gui.run_state import RunState
from gui.widgets.column_axis import ColumnAxis
from gui.widgets.language_bars import LanguageBars
from gui.widgets.timestamp_marks import TimestampMarks
from gui.widgets.token_stream import TokenStreamView
from gui.widgets.topk_chart import TopKChart

GUI = Path(__file__).resolve().parents[2] / "gui"


def _step(i: int, segment: int = 0) -> StepEvent:
    tp = [TokenProb(7, " word", 0.9), TokenProb(8, " other", 0.05)]
    text = f"<|{(i % 25) * 1.2:.2f}|>" if i % 12 == 0 else " word"
    return StepEvent(step=i, token_id=7, text=text, prob=0.9, raw_prob=0.8, topk=tp, raw_topk=tp, entropy=0.2,
                     segment=segment, source_offset=segment * 1500)


def test_the_views_draw_a_frame_once_not_each_token(qtbot):
    run = RunState()
    bars = LanguageBars()
    qtbot.addWidget(bars)
    refreshes = []
    real = bars.refresh
    bars.refresh = lambda: (refreshes.append(1), real())
    bars.follow(run)
    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    marks = TimestampMarks([plot.getPlotItem()], run)
    run.add_segment(SegmentEvent(segment=0, label="0–30 s", language_probs=(("en", 0.9), ("de", 0.1))))
    for i in range(100):
        run.add(_step(i))
    assert refreshes == [] and marks.seconds() == []  # nothing drawn before the frame
    run.flush()
    assert len(refreshes) == 1 and bars.bars()[0][0] == "en"
    assert len(marks.seconds()) == len({(i % 25) * 1.2 for i in range(0, 100, 12)})


def test_no_view_connects_to_the_per_token_signal():
    """Only the branch tree keeps per-step sums of every growing branch (O(1) per step, its
    rows redrawn once per frame); no other file under gui/ follows ``stepAdded``."""
    users = sorted(str(p.relative_to(GUI)) for p in GUI.rglob("*.py")
                   if re.search(r"\bstepAdded\.connect\(", p.read_text(encoding="utf-8")))
    assert users == ["widgets/branch_tree.py"]


def test_the_top_k_chart_follows_the_run_by_itself(qtbot):
    run = RunState()
    chart = TopKChart(run=run)
    qtbot.addWidget(chart)
    for i in range(5):
        run.add(_step(i))
    assert chart.step() is None
    run.flush()
    assert chart.step() == 4  # the newest
    run.select(2)
    assert chart.step() == 2
    run.add(_step(5))
    run.flush()
    assert chart.step() == 2  # the selection stays
    run.select(None)
    assert chart.step() == 5
    b = run.fork(0, 3, [8], " other")  # another branch made current: its newest step
    run.add(_step(3))
    run.set_current(b.id)
    assert chart.event_shown() is run.step(3) and len(run) == 4
    run.set_current(0)
    run.set_growing(0)
    run.retract(segment=0, step_offset=4)  # steps taken back: the newest left
    assert chart.step() == 3 and chart.event_shown() is run.step(3)
    run.clear()
    assert chart.step() is None


def test_the_stream_shows_the_end_and_the_marks_from_the_run(qtbot):
    run = RunState()
    stream = TokenStreamView(run)
    qtbot.addWidget(stream)
    for i in range(1, 4):
        run.add(_step(i))
    run.flush()
    run.finish(Finished(text="word word word", token_ids=[7, 7, 7], stats=RunStats(), reason="eos"))
    assert stream.text() == "word word word" and stream.count_label.text().endswith("eos")
    run.set_marks({2: ("#aa00aa", "what if: depended on the masked part")})
    assert stream.flow.marks() == {2: ("#aa00aa", "what if: depended on the masked part")}


def test_marks_find_the_plots_of_the_input_axis_through_the_column_axis(qtbot):
    run = RunState()
    axis = ColumnAxis()
    early = pg.PlotWidget()
    qtbot.addWidget(early)
    axis.add_plot(early.getPlotItem(), "input")
    marks = TimestampMarks(axis, run)
    late = pg.PlotWidget()  # a view registered after the marks were made
    qtbot.addWidget(late)
    axis.add_plot(late.getPlotItem(), "attention")
    for i in range(30):
        run.add(_step(i))
    run.flush()
    assert marks.drawn(early.getPlotItem()) == marks.drawn(late.getPlotItem()) == marks.seconds() != []
