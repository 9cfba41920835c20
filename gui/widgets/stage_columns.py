"""The columns of the chain-stage view of one step, and what contrastive decoding did there
(Qt-free: plain numbers from a ``StepEvent``).

Columns: the raw distribution, then one per stage in the order applied. A stage that reports
an amateur (contrastive decoding, ``StageReport.amateur``) gets an extra "amateur" column just
before its own, so the expert (the column entering the stage), the amateur and the contrast
stand side by side.

"Talked out of": a candidate the expert preferred to the token the contrast ranks first, which
the contrast then ranks below it: the amateur liked it too, so contrastive decoding pushed it
down (Li et al. 2022: the amateur's mistakes are subtracted).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.events import StepEvent

RAW, AMATEUR, STAGE = "raw", "amateur", "stage"


@dataclass(frozen=True)
class Column:
    """One column: ``kind`` RAW, AMATEUR or STAGE; ``stage``: the index into ``StepEvent.stages``
    of the stage it shows (for AMATEUR: the stage whose amateur it is), -1 for RAW;
    ``probs`` float64 (n_candidates,)."""

    kind: str
    stage: int
    probs: np.ndarray

    def name(self, ev: StepEvent) -> str:
        """"raw", "amateur" or the stage's name."""
        return self.kind if self.kind != STAGE else ev.stages[self.stage].name


def columns(ev: StepEvent) -> list[Column]:
    """The view's columns for ``ev`` (see the module docstring); [] without stages."""
    if not ev.stages:
        return []
    n = len(ev.stage_candidates)
    cols = [Column(RAW, -1, np.array([tp.prob for tp in ev.stage_candidates], np.float64))]
    for i, st in enumerate(ev.stages):
        if st.amateur is not None:
            cols.append(Column(AMATEUR, i, np.asarray(st.amateur, np.float64)[:n]))
        cols.append(Column(STAGE, i, np.asarray(st.probs, np.float64)[:n]))
    return cols


def entering(cols: list[Column], c: int) -> int:
    """The column whose distribution enters column ``c``'s stage (the previous non-amateur
    column); -1 for the raw column."""
    for j in range(c - 1, -1, -1):
        if cols[j].kind != AMATEUR:
            return j
    return -1


@dataclass(frozen=True)
class Contrast:
    """What contrastive decoding did at one step, over the step's candidates.

    Attributes:
        expert, amateur, contrast: float64 (n_candidates,) probabilities: entering the stage,
            the amateur's, after the stage.
        talked_out: candidate rows the amateur talked the expert out of (see the module
            docstring), the expert's favourite first.
        promoted: the row the contrast ranks first, or -1 if no candidate kept a probability.
        note: the stage's note ("amateur layer 3 of 6 (auto, JS 0.0123)").
    """

    expert: np.ndarray
    amateur: np.ndarray
    contrast: np.ndarray
    talked_out: tuple[int, ...]
    promoted: int
    note: str


def contrast_of(ev: StepEvent) -> Contrast | None:
    """The contrast at ``ev`` (the first stage that reports an amateur), or None."""
    cols = columns(ev)
    for c, col in enumerate(cols):
        if col.kind != AMATEUR:
            continue
        expert, after = cols[entering(cols, c)].probs, cols[c + 1].probs
        best = int(np.argmax(after)) if after.size and after.max() > 0 else -1
        out: tuple[int, ...] = ()
        if best >= 0:
            rows = [r for r in range(len(expert)) if expert[r] > expert[best] and after[r] < after[best]]
            out = tuple(sorted(rows, key=lambda r: -expert[r]))
        return Contrast(expert, col.probs, after, out, best, ev.stages[col.stage].note)
    return None


def contrast_summary(ev: StepEvent, text) -> str:
    """One line: "the amateur talked the expert out of ' lights' (0.62 → 0.18), chose ' light'
    (0.30 → 0.55) · amateur layer 3 of 6"; "" when no stage contrasted. ``text(row)`` gives a
    candidate's text (shown with repr: a leading space is visible)."""
    con = contrast_of(ev)
    if con is None:
        return ""
    note = f" · {con.note}" if con.note else ""
    if con.promoted < 0:
        return "contrastive decoding kept no candidate" + note
    b = con.promoted
    if not con.talked_out:
        return f"contrastive decoding agrees with the expert: {text(b)!r} ({con.expert[b]:.2f} → {con.contrast[b]:.2f})" + note
    r = con.talked_out[0]
    more = f" and {len(con.talked_out) - 1} more" if len(con.talked_out) > 1 else ""
    return (f"the amateur talked the expert out of {text(r)!r} ({con.expert[r]:.2f} → {con.contrast[r]:.2f}){more}, "
            f"toward {text(b)!r} ({con.expert[b]:.2f} → {con.contrast[b]:.2f})" + note)
