"""A thin strip above the token stream: per step, the raw distribution's entropy and
varentropy (as entropix plots them), the tokens the sampler chain kept, for mirostat
its target surprise μ, and the decoder's ms per step (``StepEvent.time_ms``: it grows with
the step when the KV cache is off; hidden where the steps carry no time). The selected step is marked; clicking selects a step.

One long-lived pyqtgraph curve per series, x = step; the tab appends a frame's batch of
steps at once (``append_steps``), which grows numpy buffers; the curves get the buffers
(one ``setData`` per curve) at most every ``REFRESH_MS`` while steps keep coming, and not
at all while the strip is hidden (nothing is done per event). The series
have different units, so each curve is scaled to its own maximum over the run (kept
tokens on a log scale); the legend beside the plot gives the values of the marked step.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget

from core.events import StepEvent

from .colors import SERIES_COLORS
from .follow import follow_run

#: the strip's height in pixels (plot and legend) when it has room; it shrinks (to nothing)
#: before the token chips below it do
STRIP_HEIGHT = 64
#: while a run streams steps, the curves are redrawn at most this often (ms)
REFRESH_MS = 100
SERIES = ("entropy", "varentropy", "kept", "mu", "ms")
_NAMES = {"entropy": "entropy", "varentropy": "varentropy", "kept": "kept", "mu": "μ", "ms": "decoder"}


class StepStrip(QWidget):
    """Per-step curves of one run (see the module docstring).

    Signals:
        stepSelected(int): the user clicked the strip at that step.
    """

    stepSelected = Signal(int)

    def __init__(self, run=None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._n = 0
        self._steps = np.zeros(0, np.int64)
        self._values = {name: np.zeros(0, np.float64) for name in SERIES}
        self._index: dict[int, int] = {}  # step -> position in the buffers
        self._selected: int | None = None
        self._dirty = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._refresh)

        self.plot = pg.PlotWidget()
        self.plot.setBackground(None)
        item = self.plot.getPlotItem()
        item.hideAxis("left")
        item.hideAxis("bottom")
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        item.layout.setContentsMargins(0, 2, 0, 2)
        item.vb.disableAutoRange()
        item.vb.setYRange(-0.04, 1.06, padding=0)
        self.curves: dict[str, pg.PlotDataItem] = {}
        for name in SERIES:
            curve = self.plot.plot(pen=pg.mkPen(SERIES_COLORS[name], width=1), connect="finite")
            curve.setDownsampling(auto=True, method="peak")
            curve.setClipToView(True)
            self.curves[name] = curve
        self.marker = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#ff3b30", width=2))
        self.marker.setZValue(10)
        self.marker.hide()
        self.plot.addItem(self.marker)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.plot.setToolTip(
            "Per step: entropy (nats) and varentropy (nats², the variance of the surprise) of the raw "
            "distribution, as entropix plots them; the tokens kept after the sampler chain (log scale); "
            "mirostat's target surprise μ (bits); the decoder's ms per step (grey: the wall time of the step's "
            "decoder call; with the KV cache off it grows with the step, as every step re-runs the whole prefix). "
            "Each curve is scaled to its own maximum over the run. Click to select a step."
        )
        self.plot.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Maximum)

        self.legend = QLabel()
        f = QFont(self.legend.font())
        f.setPointSizeF(max(6.5, f.pointSizeF() - 1.5))
        self.legend.setFont(f)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self.legend.setFixedWidth(250)
        self.legend.setToolTip(self.plot.toolTip())

        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        lay.addWidget(self.plot, 1)
        lay.addWidget(self.legend)
        for w in (self, self.plot, self.legend):
            w.setMinimumHeight(0)
            w.setMaximumHeight(STRIP_HEIGHT)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self._update_legend()
        if run is not None:  # the run's steps and selection, once per frame
            follow_run(run, self, segments=False)

    def sizeHint(self) -> QSize:
        return QSize(400, STRIP_HEIGHT)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(0, 0)  # squeezed, the strip gives its height to the token chips

    # ---------------------------------------------------------------- API
    def clear(self) -> None:
        """Forget the run's steps and the selection."""
        self._n = 0
        self._index.clear()
        self._selected = None
        self.marker.hide()
        self._dirty = True
        self._refresh()

    def append_steps(self, events: list[StepEvent]) -> None:
        """Add a frame's batch of steps (an event for a step already shown replaces it); the
        curves are redrawn once."""
        if not events:
            return
        need = self._n + len(events)
        if need > len(self._steps):
            cap = max(256, 2 * need)
            self._steps = _grow(self._steps, cap)
            for name in SERIES:
                self._values[name] = _grow(self._values[name], cap, np.nan)
        for ev in events:
            i = self._index.get(ev.step)
            if i is None:
                i = self._n
                self._n += 1
                self._index[ev.step] = i
            self._steps[i] = ev.step
            self._values["entropy"][i] = ev.raw_entropy
            self._values["varentropy"][i] = ev.raw_varentropy
            self._values["kept"][i] = ev.kept if ev.kept > 0 else np.nan
            self._values["mu"][i] = np.nan if ev.mu is None else ev.mu
            ms = getattr(ev, "time_ms", 0.0)
            self._values["ms"][i] = ms if ms > 0 else np.nan  # 0: not measured
        self._dirty = True
        if self.isVisible() and not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Redraw the curves now if steps arrived since the last redraw."""
        if self._dirty:
            self._refresh()

    def select_step(self, step: int | None) -> None:
        """Mark ``step`` (None: no mark; the legend then gives the newest step's values)."""
        self._selected = step
        if step is None or step not in self._index:
            self.marker.hide()
        else:
            self.marker.setValue(float(step))
            self.marker.show()
        self._update_legend()

    def point_count(self) -> int:
        """Steps plotted."""
        return self._n

    def marked_step(self) -> int | None:
        """The step the marker stands on, or None when it is hidden."""
        return int(round(self.marker.value())) if self.marker.isVisible() else None

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of series ``name`` ("entropy", "varentropy", "kept", "mu", "ms") in its own
        unit (NaN where a step has no value)."""
        return self._steps[: self._n].copy(), self._values[name][: self._n].copy()

    def curve_points(self, name: str) -> int:
        """Points the curve of ``name`` holds (NaN gaps included), after a pending redraw."""
        self.flush()
        x, _y = self.curves[name].getData()
        return 0 if x is None else len(x)

    def step_at_x(self, x: float) -> int | None:
        """The plotted step nearest to ``x`` (data coordinates), or None with no steps."""
        if not self._n:
            return None
        steps = self._steps[: self._n]
        return int(steps[int(np.argmin(np.abs(steps - x)))])

    # ------------------------------------------------------------- drawing
    def showEvent(self, e) -> None:  # noqa: N802
        super().showEvent(e)
        if self._dirty:
            self._refresh()

    def _refresh(self) -> None:
        """Hand the buffers to the curves (each scaled to its maximum), set the x range."""
        self._timer.stop()
        self._dirty = False
        n = self._n
        x = self._steps[:n].astype(np.float64)
        for name in SERIES:
            v = self._values[name][:n]
            finite = np.isfinite(v)
            if not finite.any():
                self.curves[name].setData([], [])
                self.curves[name].hide()
                continue
            if name == "kept":
                v = np.log10(np.maximum(v, 1.0))
            top = float(np.nanmax(v)) if finite.any() else 0.0
            y = v / top if top > 0 else np.where(finite, 0.0, np.nan)
            self.curves[name].setData(x, y)
            self.curves[name].show()
        if n:
            self.plot.getPlotItem().vb.setXRange(float(x.min()) - 0.5, float(x.max()) + 0.5, padding=0)
        if self._selected is not None and self._selected in self._index and not self.marker.isVisible():
            self.marker.setValue(float(self._selected))
            self.marker.show()
        self._update_legend()

    def _update_legend(self) -> None:
        step = self._selected if self._selected in self._index else None
        if step is None and self._n:
            step = int(self._steps[self._n - 1])
        i = self._index.get(step) if step is not None else None
        rows = [f"<b>step {step}</b>" if i is not None else "<b>per step</b>"]
        units = {"entropy": " nats", "varentropy": " nats²", "kept": "", "mu": " bits", "ms": " ms"}
        for name in SERIES:
            vals = self._values[name][: self._n]
            if name in ("kept", "mu", "ms") and not np.isfinite(vals).any():
                continue  # no chain ran / not mirostat / no step times
            value = "–"
            if i is not None and np.isfinite(self._values[name][i]):
                v = self._values[name][i]
                value = f"{int(v)}" if name == "kept" else (f"{v:.1f}" if name == "ms" else f"{v:.2f}")
            rows.append(
                f"<span style='color:{SERIES_COLORS[name]}'>━</span> {html.escape(_NAMES[name])} {value}{units[name]}"
            )
        # two columns keep the strip thin: step, entropy, varentropy | kept, μ, decoder ms
        left, right = rows[:3], rows[3:]
        cells = "".join(
            f"<tr><td>{a}</td><td style='padding-left:8px'>{b}</td></tr>"
            for a, b in zip(left, right + [""] * (len(left) - len(right)))
        )
        self.legend.setText(f"<table cellspacing='0' cellpadding='0'>{cells}</table>")

    def legend_text(self) -> str:
        """The legend as plain text."""
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", self.legend.text())).split())

    def _clicked(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton or not self._n:
            return
        vb = self.plot.getPlotItem().vb
        pos = ev.scenePos()
        if not vb.sceneBoundingRect().contains(pos):
            return
        step = self.step_at_x(vb.mapSceneToView(pos).x())
        if step is not None:
            self.select_step(step)
            self.stepSelected.emit(step)


def _grow(a: np.ndarray, cap: int, fill: float = 0) -> np.ndarray:
    out = np.full(cap, fill, dtype=a.dtype)
    out[: len(a)] = a
    return out
