"""Whisper's timestamp tokens drawn on the waveform and the attention heatmap (both on a
seconds axis): a dashed line at each segment start and end (``<|2.60|>`` in 30 s window ``w`` is at ``w * 30 + 2.60`` s), live as the tokens
arrive. A view over ``RunState``: it redraws from the current branch's steps."""

from __future__ import annotations

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
        if _TIMESTAMP.match(getattr(ev, "text", "") or ""):
            self.redraw()

    def redraw(self) -> None:
        for plot, line in self.lines:
            plot.removeItem(line)
        self.lines = []
        for t in sorted(set(timestamp_seconds(self.run.steps()))):
            for plot in self.plots:
                line = pg.InfiniteLine(pos=t, angle=90, movable=False,
                                       pen=pg.mkPen("#d55e00", width=1, style=Qt.PenStyle.DashLine))
                line.setToolTip(f"timestamp {t:.2f} s")
                plot.addItem(line, ignoreBounds=True)
                self.lines.append((plot, line))
