"""Speculative decoding's figures over several engine runs (the segments of one input, a
long-form recording's windows): ``merge_summary``. Torch-free."""

from __future__ import annotations

import dataclasses

from core.events import SpeculationSummary


def merge_summary(total: SpeculationSummary | None, part: SpeculationSummary) -> SpeculationSummary:
    """``total`` with one more run's ``part`` added: counts summed; ``c`` and the predicted
    speed-up averaged weighted by tokens (over the runs that measured them); the first
    ``switched_off`` reason kept (with its count of segments when several switched off);
    the measured speed-up left to the caller (it needs a plain run's time).

    Returns:
        a new ``SpeculationSummary`` (``part`` copied when ``total`` is None); the draft's
        name is ``total``'s, joined with ``part``'s when they differ ("ngram+branch").
    """
    if total is None:
        return dataclasses.replace(part)

    def weighted(a: float | None, wa: int, b: float | None, wb: int) -> float | None:
        if a is None or not wa:
            return b
        if b is None or not wb:
            return a
        return (a * wa + b * wb) / (wa + wb)

    names = total.draft.split("+")
    draft = total.draft if part.draft in names else f"{total.draft}+{part.draft}"
    switched = total.switched_off or part.switched_off
    return SpeculationSummary(
        draft=draft, rounds=total.rounds + part.rounds, draft_tokens=total.draft_tokens + part.draft_tokens,
        accepted=total.accepted + part.accepted, tokens=total.tokens + part.tokens,
        c=weighted(total.c, total.tokens, part.c, part.tokens),
        speedup_predicted=weighted(total.speedup_predicted, total.tokens, part.speedup_predicted, part.tokens),
        speedup_measured=None, switched_off=switched, judged=total.judged + part.judged,
    )
