"""WindowMarks (gui/widgets/window_marks.py, issue 19 §3): adding a window's mark touches only
that window's items, so a recording where many windows fall back costs the same per new mark
at the 120th window as at the 10th (it redrew every mark on each add: quadratic)."""

from __future__ import annotations

import pyqtgraph as pg

from core.events import AttemptEvent
from gui.widgets.window_marks import WindowMarks


def _failed(window: int, temperature: float = 0.0) -> AttemptEvent:
    return AttemptEvent(segment=window, attempt=0, temperature=temperature, step_offset=0,
                        verdict="fallback", reasons=("avg logprob -1.2 < -1.0",),
                        kept_in_transcript=False, start=30.0 * window, end=30.0 * window + 30.0)


class _Counting:
    """Counts addItem / removeItem calls on a real PlotItem."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.calls = 0
        for name in ("addItem", "removeItem"):
            real = getattr(plot, name)

            def counted(*a, _real=real, **k):
                self.calls += 1
                return _real(*a, **k)

            setattr(plot, name, counted)


def _calls_per_add(marks: WindowMarks, counters: list[_Counting], window: int) -> int:
    before = sum(c.calls for c in counters)
    marks.add(_failed(window))
    return sum(c.calls for c in counters) - before


def test_adding_a_mark_touches_the_same_number_of_items_however_many_windows_are_marked(qtbot):
    widgets = [pg.PlotWidget(), pg.PlotWidget()]
    for w in widgets:
        qtbot.addWidget(w)
    plots = [w.getPlotItem() for w in widgets]
    counters = [_Counting(p) for p in plots]
    marks = WindowMarks(plots)
    for window in range(9):
        marks.add(_failed(window))
    at_10 = _calls_per_add(marks, counters, 9)
    for window in range(10, 119):
        marks.add(_failed(window))
    at_120 = _calls_per_add(marks, counters, 119)
    assert at_10 == at_120 == 2 * 2  # (span + label) x 2 plots, nothing else redrawn
    assert len(marks.marks()) == 120 and len(marks._items) == 120 * 2 * 2
    # a later attempt of a marked window replaces only its own mark
    marks.add(_failed(5, temperature=0.4))
    assert marks.marks()[5][1] == "fell back → T=0.4" and len(marks._items) == 120 * 2 * 2
    shown = [it for p in plots for it in p.items if isinstance(it, pg.TextItem)]
    assert sorted(t.toPlainText() for t in shown).count("fell back → T=0.4") == 2
    assert len(shown) == 2 * 120
    marks.clear()
    assert marks.marks() == {} and len(marks._items) == 0
    assert not [it for p in plots for it in p.items if isinstance(it, (pg.TextItem, pg.LinearRegionItem))]
