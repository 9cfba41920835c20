"""A 10 ms QTimer on the GUI thread that records the gaps between its ticks (a long gap is a
GUI-thread stall). For tests that print the event loop's longest gap; no timing asserts."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer


class Heartbeat:
    """``start()`` ticks every ``interval_ms``; ``gaps`` holds the seconds between ticks;
    ``stop()`` ends it. ``longest_ms`` is the longest gap so far (0 before two ticks)."""

    def __init__(self, interval_ms: int = 10):
        self.gaps: list[float] = []
        self._last = time.perf_counter()
        self.timer = QTimer()
        self.timer.timeout.connect(self._beat)
        self.interval_ms = interval_ms

    def _beat(self) -> None:
        now = time.perf_counter()
        self.gaps.append(now - self._last)
        self._last = now

    def start(self) -> "Heartbeat":
        self._last = time.perf_counter()
        self.timer.start(self.interval_ms)
        return self

    def stop(self) -> None:
        self.timer.stop()

    @property
    def longest_ms(self) -> float:
        return 1000 * max(self.gaps, default=0.0)
