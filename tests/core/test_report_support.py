"""A shortlisted row (a translation model's ~500 finite logits of 32k) is reported over its
nonzero entries, with exactly the values and ids of the whole-row computation (issue 22:
the report's top-k / entropy / varentropy over 32k were ~0.5 ms a step).

Ties: ``torch.topk`` orders equal values by the row's layout (not by index), so a top-k over
the gathered entries can order tied ids differently from the whole row's; the report then
takes the whole row. The tests below build rows with many ties and compare bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core import report as report_mod
from core.report import RANK_LIMIT, StepReporter, StepTensors

VOCAB = 32000


def _reporter(k: int = 10) -> StepReporter:
    return StepReporter(lambda i: f"t{i}", lambda ids: " ".join(map(str, ids)), top_k_report=k,
                        capture_attention=False, source_len=0)


def _shortlisted(seed: int, n: int = 500, levels: int | None = None, batch: int = 1) -> torch.Tensor:
    """float32 (batch, VOCAB) logits, -inf except ``n`` entries (``levels``: that many distinct
    values, so many ties)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.full((batch, VOCAB), float("-inf"))
    for b in range(batch):
        idx = torch.randperm(VOCAB, generator=g)[:n]
        vals = (torch.randint(0, levels, (n,), generator=g).float() if levels
                else torch.randn(n, generator=g) * 4)
        logits[b, idx] = vals
    return logits


def _step(logits: torch.Tensor, processed: torch.Tensor | None = None) -> StepTensors:
    raw = torch.softmax(logits, -1)
    probs = raw if processed is None else torch.softmax(processed, -1)
    return StepTensors(probs, raw, None, [])


def _whole_row(monkeypatch, step: StepTensors, row: int = 0, k: int = 10):
    """The report with the support path off (the whole-row computation, as before)."""
    monkeypatch.setattr(report_mod, "support", lambda probs: None)
    try:
        return _reporter(k).row_report(step, row)
    finally:
        monkeypatch.undo()


def _same(a, b) -> None:
    assert [(t.id, t.prob) for t in a.topk] == [(t.id, t.prob) for t in b.topk]
    assert [(t.id, t.prob) for t in a.raw_topk] == [(t.id, t.prob) for t in b.raw_topk]
    assert a.entropy == b.entropy
    assert a.raw_entropy == b.raw_entropy
    assert a.raw_varentropy == b.raw_varentropy
    assert a.raw_top.dtype == b.raw_top.dtype and np.array_equal(a.raw_top, b.raw_top)
    for p in [0.0, 1e-9] + [t.prob for t in b.raw_topk]:
        assert a.rank(p) == b.rank(p)


def test_a_shortlisted_row_is_reported_over_its_support():
    """Fails before: the reporter read every row whole (no ``support_reports``)."""
    reporter = _reporter()
    reporter.row_report(_step(_shortlisted(0)), 0)
    assert reporter.support_reports == 1


def test_a_dense_row_is_reported_whole():
    """Whisper's rows (a few suppressed tokens) take the whole-row path; so does a short vocabulary."""
    logits = torch.randn(1, VOCAB)
    logits[0, :50] = float("-inf")
    reporter = _reporter()
    reporter.row_report(_step(logits), 0)
    reporter.row_report(_step(_shortlisted(1, n=10)[:, :800]), 0)
    assert reporter.support_reports == 0


@pytest.mark.parametrize("levels", [None, 3, 8, 40])
@pytest.mark.parametrize("n", [5, 10, 11, 60, 500, 3000])
@pytest.mark.parametrize("k", [1, 10, 20])
def test_the_support_report_equals_the_whole_row_bit_for_bit(monkeypatch, levels, n, k):
    """Values, ids, tie order, entropies and ranks equal the whole-row computation; ``levels``
    few distinct logits make many ties (inside the top-k and at its boundary)."""
    for seed in range(4):
        step = _step(_shortlisted(seed * 31 + n, n=n, levels=levels))
        fast = _reporter(k)
        got = fast.row_report(step, 0)
        assert fast.support_reports == 1
        _same(got, _whole_row(monkeypatch, step, k=k))


def test_ties_in_the_top_k_are_ordered_as_the_whole_row_orders_them(monkeypatch):
    """torch.topk's order of equal values differs between the gathered entries and the whole
    row (checked here, so the test keeps meaning something); the report keeps the whole row's."""
    logits = _shortlisted(7, n=500, levels=2)  # 500 entries, two values: the top-10 is all ties
    raw = torch.softmax(logits, -1)[0]
    support = torch.nonzero(raw > 0).squeeze(1)
    whole = torch.topk(raw, 10).indices.tolist()
    gathered = support[torch.topk(raw[support], 10).indices].tolist()
    assert whole != gathered, "torch.topk now orders ties alike: the whole-row fallback may go"
    got = _reporter().row_report(_step(logits), 0)
    assert [t.id for t in got.raw_topk] == whole
    _same(got, _whole_row(monkeypatch, _step(logits)))


def test_a_processed_distribution_with_its_own_support(monkeypatch):
    """Processed (a filter kept fewer tokens) and raw rows each read over their own support,
    on every row of a batch."""
    logits = _shortlisted(3, n=400, batch=3)
    processed = logits.clone()
    processed[processed < 1.0] = float("-inf")
    step = _step(logits, processed)
    for row in range(3):
        fast = _reporter()
        got = fast.row_report(step, row)
        assert fast.support_reports == 2
        _same(got, _whole_row(monkeypatch, step, row))


def test_raw_top_is_padded_with_zeros_past_the_support(monkeypatch):
    step = _step(_shortlisted(5, n=30))
    got = _reporter().row_report(step, 0)
    assert got.raw_top.shape == (RANK_LIMIT,) and (got.raw_top[30:] == 0).all()
    _same(got, _whole_row(monkeypatch, step))
