"""A pyqtgraph ViewBox on which a left drag selects a span of x (the waveform's mask span).

With :attr:`SpanViewBox.selecting` off it is a plain ViewBox (a left drag pans); on, a left
drag reports the span it covers, in data coordinates, while it moves (``spanChanging``) and
when it ends (``spanSelected``). Other buttons keep the ViewBox's behaviour.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal


class SpanViewBox(pg.ViewBox):
    """See the module docstring.

    Signals:
        spanChanging(float, float): (x0, x1), x0 <= x1, while a selecting drag moves.
        spanSelected(float, float): (x0, x1) when it ends.
    """

    spanChanging = Signal(float, float)
    spanSelected = Signal(float, float)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.selecting = False

    def mouseDragEvent(self, ev, axis=None) -> None:  # noqa: N802 - pyqtgraph API
        if not self.selecting or ev.button() != Qt.MouseButton.LeftButton:
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        a = self.mapSceneToView(ev.buttonDownScenePos()).x()
        b = self.mapSceneToView(ev.scenePos()).x()
        x0, x1 = min(a, b), max(a, b)
        if ev.isFinish():
            self.spanSelected.emit(x0, x1)
        else:
            self.spanChanging.emit(x0, x1)
