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
        self.lines: list[tuple[object, pg.InfiniteLine]] = []  # (plot, line), len(plots) per time, by time
        self._times: list[float] = []  # the lines' seconds, sorted (one per time)
        self._steps: list[int] = []  # the step whose timestamp drew each time
        run.stepAdded.connect(self._step_added)
        run.cleared.connect(self.redraw)
        run.stepsRetracted.connect(self._retracted)  # a long-form attempt taken back
        run.currentBranchChanged.connect(lambda _b: self.redraw())

    def seconds(self) -> list[float]:
        """Where the lines are (seconds), left to right (those of the first plot)."""
        return list(self._times)

    def _step_added(self, ev) -> None:
        """A new timestamp gets its line (a segment's closing and the next one's opening
        timestamp share one); the others stay (a redraw per timestamp was O(n^2) on long-form runs)."""
        for t in timestamp_seconds([ev]):
            self._add(t, ev.step)

    def _retracted(self, branch: int, step: int) -> None:
        """Steps from ``step`` on were taken back: only their lines go (a whole redraw took
        0.66 s of CPU per plot at 834 lines, on every failed long-form attempt)."""
        if branch != self.run.current_branch():
            return
        keep = [i for i, s in enumerate(self._steps) if s < step]
        if len(keep) == len(self._steps):
            return
        n, kept = len(self.plots), set(keep)
        gone = [pl for i in range(len(self._times)) if i not in kept for pl in self.lines[i * n:(i + 1) * n]]
        for plot, line in gone:
            plot.removeItem(line)
        self.lines = [pl for i in keep for pl in self.lines[i * n:(i + 1) * n]]
        self._times = [self._times[i] for i in keep]
        self._steps = [self._steps[i] for i in keep]

    def redraw(self) -> None:
        for plot, line in self.lines:
            plot.removeItem(line)
        self.lines, self._times, self._steps = [], [], []
        for ev in self.run.steps():
            for t in timestamp_seconds([ev]):
                self._add(t, ev.step)

    def _add(self, t: float, step: int) -> None:
        """A dashed line at ``t`` seconds on every plot, unless one is there already; the
        lines stay sorted left to right (a bisect on the times: the list of every line's
        value per timestamp made a redraw O(n^2), 1.7 of its 2.9 s at 834 lines)."""
        k = bisect.bisect_left(self._times, t)
        if k < len(self._times) and self._times[k] == t:
            return
        self._times.insert(k, t)
        self._steps.insert(k, step)
        at = k * len(self.plots)
        new = []
        for plot in self.plots:
            line = pg.InfiniteLine(pos=t, angle=90, movable=False,
                                   pen=pg.mkPen("#d55e00", width=1, style=Qt.PenStyle.DashLine))
            line.setToolTip(f"timestamp {t:.2f} s")
            plot.addItem(line, ignoreBounds=True)
            new.append((plot, line))
        self.lines[at:at] = new
