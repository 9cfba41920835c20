"""The Speculation inspector tab (issue 21): what speculative decoding did, per round and
over the run (Leviathan et al. 2023, Algorithm 1 and Theorem 3.8).

Left, **the round** of the selected step (or of the newest one): each drafted token with
the draft's probability q, the target's p, the acceptance probability min(1, p/q), the
random draw u (none under greedy verification: accept iff the token is the target's
argmax) and the verdict; then the target's own token (resampled or bonus). For a rejection,
the top-k of the residual distribution norm(max(0, p − q)) the token was resampled from
(greedy verification: the target's top-k there). The round's cost: the draft's steps and
the target's one verifying call, in ms. Clicking a row selects that token's step.

Right, **the run**: the acceptance rate α (accepted / drafted), tokens per target call, the
rounds and their costs; the speed-up measured against plain greedy on the same input in
the same run beside the speed-up Theorem 3.8 predicts from the measured α and c (both from
``RunStats.speculative``, once the run has finished); acceptance by position in the draft
(a histogram: drafted and accepted tokens at draft position 1, 2, …) and γ (draft tokens
asked for) over the rounds, with the tokens accepted in each.

The view follows the run's model (``gui.run_state.RunState``, :func:`follow_run`): the rounds
come once per frame (``roundsAdded``); the figures are recomputed at most every
``REFRESH_MS`` and only while the tab is shown.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.events import SpeculationRound, SpeculationSummary, StepEvent

from .follow import follow_run
from .speculation_marks import MARK_COLORS, MARK_HELP
from .token_text import display_text

#: the figures are recomputed at most this often while rounds keep coming (ms)
REFRESH_MS = 200
#: the round table's columns
COLUMNS = ("", "token", "q", "p", "min(1, p/q)", "u", "verdict")
COLUMN_TIPS = (
    "position in the draft (1 = first drafted token); ▶ the target's own token",
    "the drafted token (the target's own token in the last row)",
    "q: the draft's probability of the token (1 for a deterministic draft: n-gram lookup, a branch)",
    "p: the target's processed probability of the token at the same position",
    "min(1, p/q): the probability that the token is accepted",
    "u: the uniform draw compared with p/q (accept if u < p/q); – under greedy verification "
    "(accept iff the token is the target's argmax)",
    "accepted / rejected / not judged (after the first rejection the target looks no further)",
)


def run_figures(rounds: list[SpeculationRound]) -> dict:
    """What the rounds say over the run: ``rounds``, ``drafted``, ``accepted``, ``alpha``
    (accepted / drafted, 0 when nothing was drafted), ``tokens`` (emitted),
    ``tokens_per_call``, ``mean_gamma``, ``draft_ms`` and ``target_ms`` (sums, ms),
    ``by_position`` ((drafted, accepted) arrays by draft position), ``gammas`` and
    ``accepted_per_round`` (arrays by round)."""
    n = len(rounds)
    depth = max((len(r.drafted) for r in rounds), default=0)
    drafted_at = np.zeros(depth, np.int64)
    accepted_at = np.zeros(depth, np.int64)
    for r in rounds:
        for j, t in enumerate(r.drafted):
            drafted_at[j] += 1
            accepted_at[j] += t.accepted
    drafted, accepted = int(drafted_at.sum()), int(accepted_at.sum())
    tokens = sum(r.n_accepted + (r.emitted_id is not None) for r in rounds)
    return {
        "rounds": n, "drafted": drafted, "accepted": accepted, "alpha": accepted / drafted if drafted else 0.0,
        "tokens": tokens, "tokens_per_call": tokens / n if n else 0.0,
        "mean_gamma": float(np.mean([r.gamma for r in rounds])) if n else 0.0,
        "draft_ms": float(sum(r.draft_ms for r in rounds)), "target_ms": float(sum(r.target_ms for r in rounds)),
        "by_position": (drafted_at, accepted_at),
        "gammas": np.array([r.gamma for r in rounds], np.float64),
        "accepted_per_round": np.array([r.n_accepted for r in rounds], np.float64),
    }


def _fmt(v: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "–" if v is None else f"{v:{spec}}{unit}"


class SpeculationView(QWidget):
    """The Speculation tab (module docstring).

    Signals:
        stepSelected(int): the user clicked a row of the round table (that token's step).
        measureRequested(): the user asked to time plain decoding of this input (the
            measured speed-up; the run tab does it).

    Attributes:
        measured: a function of the run's Finished giving the measured speed-up when the core
            did not (the run tab's plain-decoding timing), or None.
    """

    stepSelected = Signal(int)
    measureRequested = Signal()

    def __init__(self, run=None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._run = run
        self._round: SpeculationRound | None = None
        self.measured = None
        self._dirty = False
        self._sized = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)

        # ---- the round
        self.round_label = QLabel("No speculative round yet: choose the strategy 'speculative'.")
        self.round_label.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        for i, tip in enumerate(COLUMN_TIPS):
            self.table.horizontalHeaderItem(i).setToolTip(tip)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setStretchLastSection(True)
        hh.setMinimumSectionSize(24)
        self.table.setMinimumWidth(300)
        self.table.cellClicked.connect(self._row_clicked)
        self.residual_label = QLabel("")
        self.residual_label.setWordWrap(True)
        self.residual_label.setToolTip(
            "At a rejection the target draws its token from the residual distribution norm(max(0, p − q)) "
            "(Leviathan et al. 2023, Algorithm 1); under greedy verification it takes its argmax: its top-k")
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 4, 0)
        lv.setSpacing(3)
        lv.addWidget(self.round_label)
        lv.addWidget(self.table, 1)
        lv.addWidget(self.residual_label)

        # ---- the run
        self.run_label = QLabel("")
        self.run_label.setWordWrap(True)
        self.run_label.setTextFormat(Qt.TextFormat.RichText)
        self._run_tip = (
            "α = accepted / drafted tokens; tokens per target call = emitted tokens / target calls (a call whose "
            "draft proposed nothing counts: it emits one token). The speed-up is "
            "measured against plain greedy on the same input in the same run; the prediction is Leviathan et "
            "al. 2023, Theorem 3.8: (1 − α^(γ+1)) / ((1 − α)(γc + 1)), from the measured α, γ and c (the cost "
            "of a draft step relative to a target step)")
        self.run_label.setToolTip(self._run_tip)
        self.position_plot = pg.PlotWidget(enableMenu=False)
        self._style_plot(self.position_plot, "position in the draft")
        self.position_plot.setToolTip(
            "Acceptance by position in the draft: grey = tokens drafted at that position, blue = of them accepted. "
            "A token is judged only when every token before it was accepted, so the bars fall off to the right")
        self.drafted_bars = pg.BarGraphItem(x=[], height=[], width=0.8, brush=pg.mkBrush(190, 190, 190),
                                            pen=pg.mkPen(120, 120, 120))
        self.accepted_bars = pg.BarGraphItem(x=[], height=[], width=0.5, brush=pg.mkBrush(MARK_COLORS["accepted"]),
                                             pen=pg.mkPen(None))
        self.position_plot.addItem(self.drafted_bars)
        self.position_plot.addItem(self.accepted_bars)
        self.gamma_plot = pg.PlotWidget(enableMenu=False)
        self._style_plot(self.gamma_plot, "round: γ, accepted")
        self.gamma_plot.setToolTip(
            "γ over the rounds: draft tokens asked for in each round (blue line; adaptive: +2 after a fully "
            "accepted round, −1 after a rejection) and the tokens the target accepted (orange dots)")
        self.gamma_curve = self.gamma_plot.plot(pen=pg.mkPen(MARK_COLORS["accepted"], width=2), stepMode=None)
        self.accepted_dots = self.gamma_plot.plot(pen=None, symbol="o", symbolSize=5,
                                                  symbolBrush=pg.mkBrush("#E69F00"), symbolPen=None)
        plots = QSplitter(Qt.Orientation.Horizontal)
        plots.addWidget(self.position_plot)
        plots.addWidget(self.gamma_plot)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(4, 0, 0, 0)
        rv.setSpacing(3)
        self.measure_button = QPushButton("Measure")
        self.measure_button.setToolTip(
            "Decode this input once with plain decoding (greedy, or sampling under sampling verification) to measure "
            "the speed-up; runs after a short speculative run by itself")
        self.measure_button.clicked.connect(self.measureRequested)
        self.measure_button.hide()
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.run_label, 1)
        top.addWidget(self.measure_button, 0, Qt.AlignmentFlag.AlignTop)
        rv.addLayout(top)
        rv.addWidget(plots, 1)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 3)  # the round's table first
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.splitter)
        self._figures: dict = run_figures([])
        if run is not None:
            follow_run(run, self, segments=False)
            run.roundsAdded.connect(lambda _branch, _rounds: self._changed())
            run.branchChanged.connect(lambda b: self._changed() if b == run.current_branch() else None)

    @staticmethod
    def _style_plot(plot: pg.PlotWidget, x: str) -> None:
        plot.setBackground(None)
        item = plot.getPlotItem()
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        item.setLabel("bottom", x)
        item.showGrid(y=True, alpha=0.2)
        plot.setMinimumSize(110, 90)

    # ------------------------------------------------------------ following the run
    def append_steps(self, _steps: list[StepEvent]) -> None:
        """New steps (once per frame): the newest step's round may have changed."""
        self._changed()

    def select_step(self, _step: int | None) -> None:
        """The selection changed: show its round (at once: one round is cheap)."""
        self._show_round()

    def clear(self) -> None:
        """A new run: nothing to show until its rounds come."""
        self._round = None
        self._changed()

    def _changed(self) -> None:
        self._dirty = True
        if self.isVisible() and not self._timer.isActive():
            self._timer.start()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        if not self._sized:  # the round's table gets the larger part
            self._sized = True
            w = max(self.width(), 400)
            self.splitter.setSizes([int(w * 0.6), w - int(w * 0.6)])
        if self._dirty:
            self.refresh()

    def refresh(self) -> None:
        """Recompute the round and run figures from the run now."""
        self._dirty = False
        self._timer.stop()
        self._show_round()
        self._show_run()

    # ------------------------------------------------------------ the round
    def shown_round(self) -> SpeculationRound | None:
        """The round the table shows."""
        return self._round

    def _show_round(self) -> None:
        run = self._run
        r = run.round_of(run.current()) if run is not None else None
        if r is None and run is not None and run.current() is not None and run.step(run.current()) is not None:
            ev = run.step(run.current())
            if not ev.speculation:
                self.round_label.setText(f"Step {ev.step} was not decoded speculatively.")
                self._set_round(None)
                return
        if r is None:
            self.round_label.setText("No speculative round yet: choose the strategy 'speculative'.")
        self._set_round(r)

    def show_round(self, r: SpeculationRound | None) -> None:
        """Show round ``r`` in the table (None: empty)."""
        self._set_round(r)

    def _set_round(self, r: SpeculationRound | None) -> None:
        if r is self._round and (r is None or self.table.rowCount()):
            return
        self._round = r
        self.table.setRowCount(0)
        self.residual_label.setText("")
        if r is None:
            return
        last = r.step + r.n_accepted - (1 if r.emitted_id is None else 0)
        steps = f"step {r.step}" if last <= r.step else f"steps {r.step}–{last}"
        cost = f"draft {r.draft_ms:.1f} ms · target {r.target_ms:.1f} ms"
        tie = " · <b>near-tie</b> (top-2 margin &lt; 1e-4: one call may pick another token than single steps)" \
            if r.near_tie else ""
        self.round_label.setText(
            f"<b>Round {r.round}</b> · {steps} · γ {r.gamma} · {len(r.drafted)} drafted, {r.n_accepted} accepted"
            f"<br>{r.draft or 'draft'} · {cost}{tie}")
        rows = []
        for j, t in enumerate(r.drafted):
            verdict = "accepted" if t.accepted else ("rejected" if t.judged else "not judged")
            p, ratio = (f"{t.p:.3f}", f"{t.ratio:.3f}") if t.judged else ("–", "–")  # the target never looked
            rows.append((str(j + 1), t.text, f"{t.q:.3f}", p, ratio, "–" if t.u is None else f"{t.u:.3f}", verdict))
        if r.emitted_kind:
            rows.append(("▶", r.emitted_text, "", "", "", "", r.emitted_kind))
        elif any(t.judged and not t.accepted for t in r.drafted):
            rows.append(("▶", "(end of text)", "", "", "", "", "end"))
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QTableWidgetItem(display_text(text) if c == 1 else text)
                if 2 <= c < 6:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if c == 6:
                    kind = text if text in MARK_HELP else ""
                    if kind:
                        item.setForeground(QColor(MARK_COLORS[kind]))
                        item.setToolTip(MARK_HELP[kind])
                    elif text == "end":
                        item.setToolTip("the target ended the text here (end of text), where the draft went on")
                    else:
                        item.setToolTip("after the first rejection the target does not judge the draft's tokens")
                self.table.setItem(i, c, item)
        rejected = any(t.judged and not t.accepted for t in r.drafted)
        if r.residual_topk:
            greedy = all(t.u is None for t in r.drafted if t.judged)
            what = "the target's top-k there (greedy verification: its argmax)" if greedy else \
                "resampled from norm(max(0, p − q))"
            tops = " · ".join(f"{display_text(tp.text)} {tp.prob:.3f}" for tp in r.residual_topk[:8])
            self.residual_label.setText(f"<b>{what}:</b> {tops}")
        elif rejected:
            self.residual_label.setText("rejected: no residual top-k reported")

    def rows(self) -> list[tuple[str, ...]]:
        """The round table's cells, row by row (as shown)."""
        return [tuple(self.table.item(i, c).text() for c in range(self.table.columnCount()))
                for i in range(self.table.rowCount())]

    def _row_clicked(self, row: int, _col: int) -> None:
        r = self._round
        if r is None:
            return
        step = r.step + min(row, r.n_accepted)  # accepted tokens, then the target's own
        if self._run is None or step in self._run:
            self.stepSelected.emit(step)

    # ------------------------------------------------------------ the run
    def figures(self) -> dict:
        """The run's figures last shown (:func:`run_figures`)."""
        return self._figures

    def summary(self) -> SpeculationSummary | None:
        """The current branch's finished run's speculation summary, or None."""
        if self._run is None:
            return None
        fin = self._run.branch(self._run.current_branch()).finished
        return getattr(getattr(fin, "stats", None), "speculative", None)

    def measured_speedup(self) -> float | None:
        """The finished run's speed-up over plain decoding on the same input: the core's, else
        :attr:`measured`'s (None until a plain run was timed)."""
        s = self.summary()
        if s is None:
            return None
        if s.speedup_measured is not None or self.measured is None or self._run is None:
            return s.speedup_measured
        return self.measured(self._run.branch(self._run.current_branch()).finished)

    def _show_run(self) -> None:
        rounds = self._run.rounds() if self._run is not None else []
        if self._run is not None:  # a fork's run: its own rounds (its summary counts those), not the parent's before it
            fork_step = self._run.branch(self._run.current_branch()).fork_step
            rounds = [r for r in rounds if r.step >= fork_step]
        f = self._figures = run_figures(rounds)
        s = self.summary()
        if s is not None:  # the summary counts every target call, rounds with no draft too
            calls = (f"<b>{s.tokens_per_target_call:.2f} tokens/call</b> · {s.rounds} calls, "
                     f"{f['rounds']} with a draft")
        else:
            calls = f"<b>{f['tokens_per_call']:.2f} tokens per drafted round</b> · {f['rounds']} rounds"
        if f["drafted"] == 0 and (s is None or s.draft_tokens == 0):  # α = 0/0: undefined
            alpha = "<b>α –</b> (nothing drafted: each call decoded one token, as plain decoding does)"
        else:
            alpha = f"<b>α {f['alpha']:.2f}</b> ({f['accepted']}/{f['drafted']})"
        lines = [
            f"{alpha} · {calls}",
            f"mean γ {f['mean_gamma']:.1f} · draft {f['draft_ms']:.0f} ms · target {f['target_ms']:.0f} ms in all",
        ]
        measured = self.measured_speedup()
        tip = self._run_tip
        if s is not None:
            lines.append(f"<b>speed-up {_fmt(measured, '.2f', '×')}</b> measured · "
                         f"{_fmt(s.speedup_predicted, '.2f', '×')} predicted (c {_fmt(s.c, '.2f')})")
            if s.switched_off:
                lines.append("<i>switched off for the rest of the segment</i> (hover: why)")
                tip += f"\n\nSwitched off: {s.switched_off}"
        elif rounds:
            lines.append("speed-up: when the run has finished")
        self.run_label.setToolTip(tip)
        self.run_label.setText("<br>".join(lines) if rounds or s is not None else "No speculative run yet.")
        self.measure_button.setVisible(s is not None and measured is None)
        drafted_at, accepted_at = f["by_position"]
        x = np.arange(1, len(drafted_at) + 1)
        self.position_plot.getPlotItem().getAxis("bottom").setTicks([[(int(i), str(int(i))) for i in x]])
        self.drafted_bars.setOpts(x=x, height=drafted_at, width=0.8)
        self.accepted_bars.setOpts(x=x, height=accepted_at, width=0.5)
        self.position_plot.getPlotItem().enableAutoRange()
        n = len(f["gammas"])
        xs = np.arange(n, dtype=np.float64)
        self.gamma_curve.setData(xs, f["gammas"])
        self.accepted_dots.setData(xs, f["accepted_per_round"])
