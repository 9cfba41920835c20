"""The engine's per-step work above the backend, made cheaper (issue 22), gives the same
values as the plain torch calls it replaces: greedy's argmax, the hard rules' fill, the
report's fused top-k and its entropy / varentropy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.processors.rules import BeginSuppressTokens, SuppressTokens
from core.strategies.greedy import argmax_id

NEG_INF = float("-inf")


def _rows() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    plain = torch.randn(51864, generator=g) * 3
    tied = plain.clone()
    tied[[7, 40000, 51000]] = plain.max() + 1  # three equal maxima: the lowest id wins
    with_nan = plain.clone()
    with_nan[[900, 30000]] = float("nan")  # NaN counts as the maximum in torch
    masked = torch.full((51864,), NEG_INF)
    masked[[5, 6]] = 0.25
    flat = torch.zeros(300)
    return [plain, tied, with_nan, masked, flat, plain.double(), torch.full((40,), NEG_INF)]


@pytest.mark.parametrize("i", range(7))
def test_greedy_argmax_is_torch_argmax(i):
    row = _rows()[i]
    assert argmax_id(row) == int(torch.argmax(row))
    assert argmax_id(row.half()) == int(torch.argmax(row.half()))  # torch's own path


def test_hard_rules_fill_the_same_values_as_masked_fill():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 51864, generator=g)
    ids = (50358, 50359, 1, 90, 220, 60000)  # one beyond the vocabulary
    mask = torch.zeros(51864, dtype=torch.bool)
    mask[[t for t in ids if t < 51864]] = True
    expected = scores.masked_fill(mask, NEG_INF)
    got = SuppressTokens(ids)(torch.zeros(3, 2, dtype=torch.long), scores)
    assert torch.equal(got, expected) and got is not scores
    assert torch.equal(scores, torch.randn(3, 51864, generator=torch.Generator().manual_seed(0)))  # untouched
    begin = BeginSuppressTokens(ids, begin_index=2)
    assert torch.equal(begin(torch.zeros(3, 2, dtype=torch.long), scores), expected)
    assert begin(torch.zeros(3, 3, dtype=torch.long), scores) is scores
    small = torch.randn(1, 100, generator=g)  # another vocabulary size: the index is rebuilt
    assert torch.equal(SuppressTokens((1, 200))(None, small), small.masked_fill(torch.arange(100) == 1, NEG_INF))


# -- the report: one head search per dense row instead of two whole-row top-k ----------------

from core import report as report_mod  # noqa: E402
from core.report import RANK_LIMIT, StepReporter, StepTensors, head  # noqa: E402


def _reporter(k: int = 10) -> StepReporter:
    return StepReporter(lambda i: f"t{i}", lambda ids: "", top_k_report=k, capture_attention=False, source_len=0)


def _dense_logits(seed: int, levels: int | None = None, vocab: int = 51864) -> torch.Tensor:
    """float32 (1, vocab) Whisper-like logits (a few suppressed), ``levels`` distinct values
    (many ties) or a confident random row."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randint(0, levels, (1, vocab), generator=g).float() if levels
              else torch.randn(1, vocab, generator=g) * 3)
    if not levels:
        logits[0, torch.randint(0, vocab, (3,), generator=g)] += 12.0
    logits[0, 50358:50364] = NEG_INF
    return logits


def _eager(probs: torch.Tensor, k: int):
    """What the report read before: torch.topk of the whole row, twice, and entr."""
    values, ids = torch.topk(probs, k)
    raw_top = torch.topk(probs, min(RANK_LIMIT, probs.shape[-1])).values.numpy()
    return [(i, p) for i, p in zip(ids.tolist(), values.tolist()) if p > 0.0], raw_top


@pytest.mark.parametrize("levels", [None, 2, 7, 50, 5000])
@pytest.mark.parametrize("k", [1, 10, 40])
def test_a_dense_row_reports_the_whole_row_top_k_bit_for_bit(levels, k):
    """Ids, their order (ties included), values and ranks equal torch.topk over the whole row;
    entropies equal entr's to float32 rounding."""
    for seed in range(3):
        logits = _dense_logits(seed, levels)
        probs = torch.softmax(logits, -1)
        got = _reporter(k).row_report(StepTensors(probs, probs, None, []), 0)
        topk, raw_top = _eager(probs[0], k)
        assert [(t.id, t.prob) for t in got.raw_topk] == topk
        assert [(t.id, t.prob) for t in got.topk] == topk
        assert got.raw_top.dtype == raw_top.dtype and np.array_equal(got.raw_top, raw_top)
        for p in [0.0, 1e-9] + [p for _, p in topk]:
            larger = int((torch.from_numpy(raw_top) > p).sum())
            assert got.rank(p) == (larger + 1 if larger < len(raw_top) else RANK_LIMIT + 1)
        entropy = float(torch.special.entr(probs[0].double()).sum())
        assert got.raw_entropy == pytest.approx(entropy, rel=1e-4, abs=1e-6)  # float32 sums
        log_p = probs[0].double().clamp_min(1e-300).log()
        var = float((probs[0].double() * (log_p + entropy) ** 2).sum())
        assert got.raw_varentropy == pytest.approx(var, rel=1e-4, abs=1e-6)


def test_a_dense_row_is_searched_once_not_twice_whole(monkeypatch):
    """Fails before: the report ran torch.topk over the whole 51,864-entry row twice a step
    (the top-k list, then the 100 largest values for the ranks), ~200 us each."""
    whole = []
    real = torch.topk

    def counting(t, k, *a, **kw):
        if t.shape[-1] >= 51864:
            whole.append(k)
        return real(t, k, *a, **kw)

    probs = torch.softmax(_dense_logits(5), -1)
    monkeypatch.setattr(torch, "topk", counting)
    _reporter().row_report(StepTensors(probs, probs, None, []), 0)
    assert whole == []


@pytest.mark.parametrize("k", [1, 5, 101, 512])
def test_head_equals_torch_topk(k):
    g = torch.Generator().manual_seed(k)
    for row in (torch.rand(51864, generator=g), torch.randn(2048, generator=g).double(),
                torch.softmax(torch.randn(32000, generator=g) * 6, -1)):
        values, ids = head(row, k)
        ref_v, ref_i = torch.topk(row, k)
        assert torch.equal(values, ref_v)
        unique = [j for j, v in enumerate(ref_v.tolist()) if ref_v.tolist().count(v) == 1]  # ties: any order
        assert ids[unique].tolist() == ref_i[unique].tolist()
        assert sorted(ids.tolist()) == sorted(ref_i.tolist()) or len(unique) < k


def test_head_steps_aside_where_it_does_not_apply():
    assert head(torch.rand(1000), 10) is None  # too short for the chunks
    assert head(torch.rand(51864), 513) is None  # more than the chunks give
    assert head(torch.rand(51864).half(), 10) is None
    assert head(torch.rand(2, 51864)[:, 0], 10) is None  # not a contiguous vector
    row = torch.rand(51864)
    row[51863] = float("nan")  # in the tail past the chunks
    assert head(row, 10) is None
    row[51863], row[7] = 0.5, float("nan")
    assert head(row, 10) is None
    probs = torch.softmax(torch.full((1, 51864), NEG_INF), -1)  # all NaN: the whole-row path
    got = _reporter().row_report(StepTensors(probs, probs, None, []), 0)
    nan_ids, _ = _eager(probs[0], 10)  # torch.topk of the NaN row, as before
    assert [t.id for t in got.raw_topk] == [i for i, _ in nan_ids]
