"""The engine's per-step work above the backend, made cheaper (issue 22), gives the same
values as the plain torch calls it replaces: greedy's argmax, the hard rules' fill, the
report's fused top-k and its entropy / varentropy."""

from __future__ import annotations

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
