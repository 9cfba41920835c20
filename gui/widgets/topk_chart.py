"""Horizontal bars of one step's top-k: the processed (filtered) distribution in solid
colour over the raw one (light outlined bar), so the user sees what temperature, top-k
and top-p cut away. Painted with QPainter (text labels and numbers stay crisp).

"Sample ×N" (:meth:`TopKChart.sample`) draws N tokens from the step's processed
distribution with numpy's seeded Generator and outlines the observed frequencies over the
bars. The distribution drawn from is the reported top-k plus one "other" bucket holding
the remaining mass 1 − Σ top-k: exactly the processed distribution with its tail lumped
together. No model call.

Given the run (``TopKChart(run=...)``, ``gui.run_state.RunState``) the chart follows it
(``gui.widgets.follow``): the selected step, else the newest, once per frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from core.events import StepEvent

from .colors import SAMPLE_COLOR, prob_color
from .follow import follow_run
from .token_text import display_text, readable_text


#: the token id of the "other" bucket (the processed distribution's tail beyond the top-k)
OTHER = -1


@dataclass(frozen=True)
class Row:
    """One bar: token text, processed probability, raw probability, chosen?

    ``observed`` is the share of a Sample ×N's draws that picked it (None: no sample drawn);
    ``token_id`` is ``OTHER`` for the bucket of the remaining mass (no raw bar).
    """

    token_id: int
    text: str
    prob: float
    raw_prob: float
    chosen: bool
    observed: float | None = None


@dataclass(frozen=True)
class SampleResult:
    """N draws from one step's processed distribution.

    Attributes:
        step: the step sampled.
        n: draws.
        seed: the Generator's seed (None: fresh entropy).
        ids: the buckets: the top-k token ids (processed, probability > 0), then ``OTHER``.
        texts: their texts ("other" for the tail).
        expected: float64 (buckets,): the probability of each bucket (sums to 1).
        counts: int64 (buckets,): how many draws picked each.
    """

    step: int
    n: int
    seed: int | None
    ids: tuple[int, ...]
    texts: tuple[str, ...]
    expected: np.ndarray
    counts: np.ndarray

    @property
    def observed(self) -> np.ndarray:
        """float64 (buckets,): the share of the draws in each bucket."""
        return self.counts / max(self.n, 1)

    def observed_of(self, token_id: int) -> float:
        """The share of draws that picked ``token_id`` (``OTHER``: the tail); 0 if not a bucket."""
        return float(self.observed[self.ids.index(token_id)]) if token_id in self.ids else 0.0

    def expected_of(self, token_id: int) -> float:
        """The probability of bucket ``token_id`` (0 if not a bucket)."""
        return float(self.expected[self.ids.index(token_id)]) if token_id in self.ids else 0.0


def sample_step(ev: StepEvent, n: int, seed: int | None) -> SampleResult:
    """Draw ``n`` tokens from ``ev``'s processed distribution with ``numpy.random.default_rng(seed)``.

    The buckets are the reported top-k tokens (probability > 0) and one "other" bucket with
    the remaining mass 1 − Σ top-k (the processed distribution with its tail lumped together).
    """
    if n < 1:
        raise ValueError(f"the number of samples must be >= 1, got {n}")
    tops = [tp for tp in ev.topk if tp.prob > 0.0]
    p = np.array([tp.prob for tp in tops], dtype=np.float64)
    rest = max(0.0, 1.0 - float(p.sum()))
    probs = np.append(p, rest)
    probs /= probs.sum()
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(probs), size=n, p=probs)
    counts = np.bincount(picks, minlength=len(probs)).astype(np.int64)
    return SampleResult(
        step=ev.step, n=n, seed=seed,
        ids=tuple(tp.id for tp in tops) + (OTHER,), texts=tuple(tp.text for tp in tops) + ("other",),
        expected=probs, counts=counts,
    )


def with_samples(rows: list[Row], result: SampleResult) -> list[Row]:
    """``rows`` with each one's observed share of ``result``'s draws, and a last row for the
    "other" bucket (the tail, plus top-k tokens not among ``rows``) when it has mass or draws."""
    shown = {r.token_id for r in rows}
    out = [Row(r.token_id, r.text, r.prob, r.raw_prob, r.chosen, result.observed_of(r.token_id)) for r in rows]
    hidden = [i for i, tid in enumerate(result.ids) if tid not in shown]  # OTHER and top-k beyond the rows
    expected = float(sum(result.expected[i] for i in hidden))
    observed = float(sum(result.observed[i] for i in hidden))
    if expected > 5e-4 or observed > 0:
        out.append(Row(OTHER, "other", expected, 0.0, False, observed))
    return out


def rows_for(ev: StepEvent, limit: int = 10) -> list[Row]:
    """The rows to draw for ``ev``: processed top-k first (most probable first), then the raw
    runners-up the filters removed; each with both probabilities (0 where not reported).

    Processed entries with probability 0 (cut by a filter) are not processed candidates:
    they are shown, if at all, among the raw runners-up with their real raw probability."""
    raw = {tp.id: tp for tp in ev.raw_topk}
    proc = {tp.id: tp for tp in ev.topk if tp.prob > 0.0}
    order = [tp.id for tp in sorted(proc.values(), key=lambda t: -t.prob)]
    order += [tp.id for tp in sorted(ev.raw_topk, key=lambda t: -t.prob) if tp.id not in proc]
    if ev.token_id not in order:
        order.insert(0, ev.token_id)
    rows = []
    for tid in order[:limit]:
        src = proc.get(tid) or raw.get(tid)
        text = src.text if src is not None else ev.text
        p = proc[tid].prob if tid in proc else (ev.prob if tid == ev.token_id else 0.0)
        rp = raw[tid].prob if tid in raw else (ev.raw_prob if tid == ev.token_id else 0.0)
        rows.append(Row(tid, text, float(p), float(rp), tid == ev.token_id))
    return rows


class TopKChart(QWidget):
    """Top-k bars of one StepEvent. ``set_step(ev)`` shows it; ``set_step(None)`` clears.

    Clicking a bar of another token than the chosen one asks to force it at this step
    (``alternativeClicked``; the tab forks there).

    Signals:
        stepChanged(object): another event (or None) is shown.
        alternativeClicked(int, int, str): (step, token id, token text) of a clicked
            alternative (not the chosen token, not the "other" tail).
    """

    stepChanged = Signal(object)
    alternativeClicked = Signal(int, int, str)

    def __init__(self, limit: int = 10, parent: QWidget | None = None, run=None) -> None:
        super().__init__(parent)
        self._limit = limit
        self._event: StepEvent | None = None
        self._rows: list[Row] = []
        self._samples: SampleResult | None = None
        #: token id -> its raw bytes (the tab's model's ``token_bytes``), or None: a partial UTF-8
        #: token is then listed as <0xE2><0x80> instead of "\ufffd"
        self.token_bytes = None
        #: the title's note while the chart shows an earlier run's step (set_earlier_note)
        self._earlier: str | None = None
        self.setMinimumSize(260, 160)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMouseTracking(True)
        self._run = run
        if run is not None:  # the selected (else the newest) step of the run, once per frame
            follow_run(run, self, segments=False, replay=False)  # one step shown: no replay of the branch
            run.currentBranchChanged.connect(lambda _b: self._show_current())
            run.stepsRetracted.connect(lambda b, _s: self._show_current() if b == run.current_branch() else None)

    # ---------------------------------------------------------------- following the run
    def append_steps(self, steps: list[StepEvent]) -> None:
        """A frame's new steps of the followed run: the newest is shown while no step is
        selected (a selected step that arrives comes through :meth:`select_step`)."""
        if steps and self._run is not None and self._run.selected() is None:
            self.set_step(steps[-1])

    def select_step(self, step: int | None) -> None:
        """The followed run's selection changed: show ``step``, or the newest step (None)."""
        run = self._run
        if run is not None:
            self.set_step(run.step(step if step is not None else run.latest()))

    def clear(self) -> None:
        """Show nothing (a new run, or the input went away)."""
        self.set_step(None)

    def _show_current(self) -> None:
        """Another branch is shown, or steps were taken back: the selected step if the branch
        has it, else its newest (O(1), no replay)."""
        run = self._run
        sel = run.selected()
        self.set_step(run.step(sel if sel is not None and sel in run else run.latest()))

    def sizeHint(self) -> QSize:
        return QSize(420, 300)

    def set_step(self, ev: StepEvent | None) -> None:
        """Show the top-k of ``ev`` (None: empty chart with a hint). Samples drawn for another
        event are dropped."""
        if ev is self._event:
            return
        self._event = ev
        self._samples = None
        self._rows = rows_for(ev, self._limit) if ev is not None else []
        self.update()
        self.stepChanged.emit(ev)

    def event_shown(self) -> StepEvent | None:
        """The event shown, or None."""
        return self._event

    def step(self) -> int | None:
        """The step shown, or None."""
        return self._event.step if self._event is not None else None

    def sample(self, n: int, seed: int | None) -> SampleResult | None:
        """Draw ``n`` tokens from the shown step's processed distribution (``sample_step``)
        and outline the observed shares over the bars; None when no step is shown."""
        if self._event is None:
            return None
        self._samples = sample_step(self._event, n, seed)
        self._rows = with_samples(rows_for(self._event, self._limit), self._samples)
        self.update()
        return self._samples

    def samples(self) -> SampleResult | None:
        """The draws shown over the bars, or None."""
        return self._samples

    def clear_samples(self) -> None:
        """Remove the drawn samples' outlines."""
        if self._samples is not None:
            self._samples = None
            self._rows = rows_for(self._event, self._limit) if self._event is not None else []
            self.update()

    def rows(self) -> list[Row]:
        """The rows drawn (for tests and tooltips)."""
        return list(self._rows)

    def _row_geometry(self) -> tuple[float, float]:
        """(top of the first bar row, row height) in pixels, as ``paintEvent`` lays them out."""
        lh = self.fontMetrics().height()
        top = 4 + lh + lh + 6
        return top, max(lh + 2, min(2 * lh, (self.height() - top - 4) / max(len(self._rows), 1)))

    def row_rect(self, i: int) -> QRectF:
        """The rectangle of row ``i`` (label and bars)."""
        top, row_h = self._row_geometry()
        return QRectF(0, top + i * row_h, self.width(), row_h)

    def row_at(self, y: float) -> int | None:
        """The row under widget coordinate ``y``, or None."""
        top, row_h = self._row_geometry()
        i = int((y - top) // row_h) if y >= top else -1
        return i if 0 <= i < len(self._rows) and top + (i + 1) * row_h <= self.height() + 1 else None

    def click_row(self, i: int) -> bool:
        """As a click on row ``i``: ask to force its token (True if it is an alternative)."""
        ev = self._event
        if ev is None or not 0 <= i < len(self._rows):
            return False
        r = self._rows[i]
        if r.token_id == OTHER or r.token_id == ev.token_id:
            return False
        self.alternativeClicked.emit(ev.step, r.token_id, r.text)
        return True

    def mousePressEvent(self, e) -> None:  # noqa: N802
        if e.button() == Qt.MouseButton.LeftButton:
            i = self.row_at(e.position().y())
            if i is not None:
                self.click_row(i)
        super().mousePressEvent(e)

    def mouseMoveEvent(self, e) -> None:  # noqa: N802
        i = self.row_at(e.position().y())
        alt = (i is not None and self._event is not None and self._rows[i].token_id not in (OTHER, self._event.token_id))
        self.setCursor(Qt.CursorShape.PointingHandCursor if alt else Qt.CursorShape.ArrowCursor)
        self.setToolTip(f"click: force {self.row_text(self._rows[i])!r} at step {self._event.step} and "
                        "continue decoding from there (a new branch)" if alt else "")
        super().mouseMoveEvent(e)

    def row_text(self, row: Row) -> str:
        """A row's token as listed: ``display_text``, partial UTF-8 bytes as <0xE2><0x80>."""
        return display_text(readable_text(self.token_bytes, row.token_id, row.text))

    def row_texts(self) -> list[str]:
        """The listed tokens' texts, top row first."""
        return [self.row_text(r) for r in self._rows]

    def set_earlier_note(self, note: str | None) -> None:
        """Put ``note`` (e.g. "last offline run: speech_en.wav") before the title and dim the chart
        while it shows an earlier run's step; None: the plain title."""
        self._earlier = note or None
        self.update()

    def title_text(self) -> str:
        """The title as drawn (before cutting to the width)."""
        ev = self._event
        title = "Top-k at the selected step" if ev is None else f"Top-k at step {ev.step}"
        return f"{self._earlier} · {title}" if self._earlier else title

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        fg = pal.windowText().color()
        fm = p.fontMetrics()
        lh = fm.height()
        w, h = self.width(), self.height()
        bold = QFont(p.font())
        bold.setBold(True)
        ev = self._event
        title = "Top-k at the selected step" if ev is None else (
            f"Top-k at step {ev.step}: {'forced' if getattr(ev, 'forced', False) else 'chosen'} "
            f"{display_text(readable_text(self.token_bytes, ev.token_id, ev.text))!r}  (entropy {ev.entropy:.2f} nats)"
        )
        if self._earlier:
            title = f"{self._earlier} · {title}"
            p.setOpacity(0.55)  # dimmed: not the run being decoded
        p.setFont(bold)
        p.setPen(fg)
        p.drawText(QRectF(6, 2, w - 12, lh + 2), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                   fm.elidedText(title, Qt.TextElideMode.ElideRight, w - 12))
        p.setFont(self.font())
        # legend
        ly = 4 + lh
        lx = 6
        p.setPen(QPen(QColor(120, 120, 120), 1))
        p.setBrush(QColor(210, 210, 210))
        p.drawRect(QRectF(lx, ly + 3, 18, lh - 6))
        p.setPen(fg)
        p.drawText(QRectF(lx + 22, ly, 140, lh), Qt.AlignmentFlag.AlignVCenter, "raw (softmax of logits)")
        lx2 = lx + 26 + fm.horizontalAdvance("raw (softmax of logits)") + 12
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(prob_color(0.6))
        p.drawRect(QRectF(lx2, ly + 3, 18, lh - 6))
        p.setPen(fg)
        p.drawText(QRectF(lx2 + 22, ly, 220, lh), Qt.AlignmentFlag.AlignVCenter, "processed (after filters)")
        samples = self._samples
        if samples is not None:
            lx3 = lx2 + 26 + fm.horizontalAdvance("processed (after filters)") + 12
            p.setPen(QPen(QColor(SAMPLE_COLOR), 2))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(lx3, ly + 3, 18, lh - 6))
            p.setPen(fg)
            seed = "unseeded" if samples.seed is None else f"seed {samples.seed}"
            p.drawText(QRectF(lx3 + 22, ly, max(10, w - lx3 - 24), lh), Qt.AlignmentFlag.AlignVCenter,
                       fm.elidedText(f"observed ×{samples.n} ({seed})", Qt.TextElideMode.ElideRight,
                                     max(10, int(w - lx3 - 24))))
        top = ly + lh + 6
        if not self._rows:
            p.setPen(pal.placeholderText().color())
            p.drawText(QRectF(0, top, w, h - top), Qt.AlignmentFlag.AlignCenter,
                       "Decode an input, then click a token to see its alternatives.")
            p.end()
            return
        label_w = min(max(fm.horizontalAdvance(self.row_text(r)) for r in self._rows) + 22, int(w * 0.35))
        template = "0.000 (raw 0.000)" + ("  seen 0.000" if samples is not None else "")
        num_w = fm.horizontalAdvance(template) + 8
        bar_x = 6 + label_w
        bar_w = max(20, w - bar_x - num_w - 6)
        top, row_h = self._row_geometry()  # the same rows the clicks hit
        for i, r in enumerate(self._rows):
            y = top + i * row_h
            if y + row_h > h + 1:
                break
            other = r.token_id == OTHER
            text = "other (tail)" if other else self.row_text(r)
            p.setFont(bold if r.chosen else self.font())
            p.setPen(pal.placeholderText().color() if other else fg)
            mark = "▶ " if r.chosen else ""
            p.drawText(QRectF(4, y, label_w - 6, row_h), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                       fm.elidedText(mark + text, Qt.TextElideMode.ElideRight, label_w - 6))
            inner = QRectF(bar_x, y + 2, bar_w, row_h - 4)
            if not other:
                # raw: light grey bar with outline
                p.setPen(QPen(QColor(120, 120, 120), 1))
                p.setBrush(QColor(210, 210, 210))
                p.drawRect(QRectF(inner.x(), inner.y(), max(1.0, bar_w * r.raw_prob), inner.height()))
            # processed: solid, tinted by its probability (same colours as the token chips)
            if r.prob > 0:
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(prob_color(r.prob))
                ph = inner.height() * 0.6
                p.drawRect(QRectF(inner.x(), inner.y() + (inner.height() - ph) / 2, bar_w * r.prob, ph))
            if r.observed is not None and r.observed > 0:
                # the share of the draws that picked it: an outline over the bars
                p.setPen(QPen(QColor(SAMPLE_COLOR), 2))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(QRectF(inner.x(), inner.y() + 1, max(2.0, bar_w * r.observed), inner.height() - 2))
            p.setFont(self.font())
            p.setPen(fg if r.prob > 0 else pal.placeholderText().color())
            if other:
                num = f"{r.prob:.3f} (tail)"
            else:
                num = f"{r.prob:.3f} (raw {r.raw_prob:.3f})" if r.prob > 0 else f"cut (raw {r.raw_prob:.3f})"
            if r.observed is not None:
                num += f"  seen {r.observed:.3f}"
            p.drawText(QRectF(bar_x + bar_w + 4, y, num_w, row_h), Qt.AlignmentFlag.AlignVCenter, num)
        p.end()
