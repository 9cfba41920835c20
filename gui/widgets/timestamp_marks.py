"""Whisper's timestamp tokens drawn on the waveform and the attention heatmap (both on a
seconds axis): a dashed line at each segment start and end (``<|2.60|>`` in 30 s window ``w`` is at ``w * 30 + 2.60`` s), live as the tokens
arrive. A view over ``RunState``: it redraws from the current branch's steps."""

from __future__ import annotations

import bisect
import re

import pyqtgraph as pg
from PySide6.QtCore import Qt

from core.catalog import FRAME_S

_TIMESTAMP = re.compile(r"^<\|(\d+\.\d+)\|>$")


def timestamp_seconds(steps) -> list[float]:
    """Seconds in the whole audio of every timestamp token among ``steps`` (StepEvents), in order:
    the window's start (``source_offset`` encoder frames of 20 ms: ``segment`` x 30 s for fixed
    windows, the seek for long-form windows) plus the token's time."""
    out = []
    for ev in steps:
        m = _TIMESTAMP.match(ev.text or "")
        if m:
            out.append(round(ev.source_offset * FRAME_S, 3) + float(m.group(1)))
    return out


class TimestampMarks:
    """Vertical lines on each of ``plots`` (x in seconds) at the timestamps of ``run``'s
    current branch."""

    def __init__(self, plots, run) -> None:
        self.plots, self.run = list(plots), run
        self.lines: list[tuple[object, pg.InfiniteLine]] = []  # (plot, line)
        run.stepAdded.connect(self._step_added)
        run.cleared.connect(self.redraw)
        run.stepsRetracted.connect(lambda _b, _s: self.redraw())  # a long-form attempt taken back
        run.currentBranchChanged.connect(lambda _b: self.redraw())

    def seconds(self) -> list[float]:
        """Where the lines are (seconds), left to right (those of the first plot)."""
        return [line.value() for plot, line in self.lines if plot is self.plots[0]]

    def _step_added(self, ev) -> None:
        """A new timestamp gets its line (a segment's closing and the next one's opening
        timestamp share one); the others stay (a redraw per timestamp was O(n^2) on long-form runs)."""
        for t in timestamp_seconds([ev]):
            self._add(t)

    def redraw(self) -> None:
        for plot, line in self.lines:
            plot.removeItem(line)
        self.lines = []
        for t in timestamp_seconds(self.run.steps()):
            self._add(t)

    def _add(self, t: float) -> None:
        """A dashed line at ``t`` seconds on every plot, unless one is there already; the
        first plot's lines stay sorted left to right."""
        drawn = self.seconds()
        if t in drawn:
            return
        at = bisect.bisect(drawn, t) * len(self.plots)
        new = []
        for plot in self.plots:
            line = pg.InfiniteLine(pos=t, angle=90, movable=False,
                                   pen=pg.mkPen("#d55e00", width=1, style=Qt.PenStyle.DashLine))
            line.setToolTip(f"timestamp {t:.2f} s")
            plot.addItem(line, ignoreBounds=True)
            new.append((plot, line))
        self.lines[at:at] = new
