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

The KV cache comparison: the tab tells the strip when a run starts (``begin_run``: the input
and whether the KV cache is on). The last run of the OTHER cache setting on the same input
stays as a dashed reference line of decoder ms per step ("KV cache on" / "KV cache off" in
the legend), on the same y scale as the current run's decoder ms, so the cache-off run's
linear growth per step shows against the cache-on run's flat line. It is dropped when the
input changes.
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
        #: (input key, KV cache on) of the run shown, set by begin_run
        self._run_key: tuple[object, bool] | None = None
        #: the reference: (input key, KV cache on, steps, ms) of the last run of the other
        #: cache setting on this input, or None
        self._ref: tuple[object, bool, np.ndarray, np.ndarray] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._refresh)

        self.plot = pg.PlotWidget(enableMenu=False)
        self.plot.setBackground(None)
        item = self.plot.getPlotItem()
        item.hideAxis("left")
        item.hideAxis("bottom")
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
        #: the reference run's decoder ms per step (dashed; see the module docstring)
        self.ref_curve = self.plot.plot(pen=pg.mkPen(SERIES_COLORS["ms"], width=1, style=Qt.PenStyle.DashLine),
                                        connect="finite")
        self.ref_curve.hide()
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
            "After runs with the KV cache on and off on the same input, the other setting's last run is kept as a "
            "dashed grey line on the same scale (labelled in the legend) until the input changes. "
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
    def begin_run(self, input_key: object, kv_cache: bool) -> None:
        """A new run starts on the input ``input_key`` (any comparable value; None: unknown)
        with the KV cache on or off: the run shown so far becomes the reference line if it
        had the other cache setting on the same input and step times; a reference of another
        input is dropped. Call before the run's steps arrive (the run's ``clear`` follows)."""
        old = self._run_key
        steps, ms = self.series("ms")
        if old is not None and old[0] == input_key and old[1] != kv_cache and np.isfinite(ms).any():
            self._ref = (input_key, old[1], steps, ms)
        elif self._ref is not None and (input_key is None or self._ref[0] != input_key):
            self._ref = None
        self._run_key = (input_key, bool(kv_cache))
        self._dirty = True
        if self.isVisible() and not self._timer.isActive():
            self._timer.start()

    def reference(self) -> tuple[bool, np.ndarray, np.ndarray] | None:
        """The reference line: (KV cache on, steps, decoder ms per step) of the last run of
        the other cache setting on this input, or None."""
        if self._ref is None:
            return None
        return self._ref[1], self._ref[2].copy(), self._ref[3].copy()

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
        ref = self._ref if self._ref is not None and self._run_key is not None else None
        ref_top = float(np.nanmax(ref[3])) if ref is not None else 0.0
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
            if name == "ms":
                top = max(top, ref_top)  # the reference and this run on one scale
            y = v / top if top > 0 else np.where(finite, 0.0, np.nan)
            self.curves[name].setData(x, y)
            self.curves[name].show()
        if ref is not None and ref_top > 0:
            top = max(ref_top, float(np.nanmax(self._values["ms"][:n])) if np.isfinite(self._values["ms"][:n]).any()
                      else 0.0)
            self.ref_curve.setData(ref[2].astype(np.float64), ref[3] / top)
            self.ref_curve.show()
        else:
            self.ref_curve.setData([], [])
            self.ref_curve.hide()
        if n or ref is not None:
            xs = [x] + ([ref[2].astype(np.float64)] if ref is not None else [])
            lo = min(float(a.min()) for a in xs if len(a))
            hi = max(float(a.max()) for a in xs if len(a))
            self.plot.getPlotItem().vb.setXRange(lo - 0.5, hi + 0.5, padding=0)
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
            label = _NAMES[name]
            if name == "ms" and self._ref is not None and self._run_key is not None:
                label = f"KV cache {'on' if self._run_key[1] else 'off'}"
            rows.append(
                f"<span style='color:{SERIES_COLORS[name]}'>━</span> {html.escape(label)} {value}{units[name]}"
            )
        if self._ref is not None and self._run_key is not None:
            _key, on, rsteps, rms = self._ref
            value = "–"
            if step is not None and step in set(rsteps.tolist()):
                v = rms[int(np.nonzero(rsteps == step)[0][0])]
                value = f"{v:.1f}" if np.isfinite(v) else "–"
            rows.append(f"<span style='color:{SERIES_COLORS['ms']}'>┅</span> KV cache {'on' if on else 'off'} "
                        f"{value} ms")
        # two columns keep the strip thin: step, entropy, varentropy | kept, μ, decoder ms (, reference)
        left, right = rows[:3], rows[3:]
        height = max(len(left), len(right))
        left += [""] * (height - len(left))
        right += [""] * (height - len(right))
        cells = "".join(f"<tr><td>{a}</td><td style='padding-left:8px'>{b}</td></tr>" for a, b in zip(left, right))
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
