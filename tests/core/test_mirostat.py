"""Mirostat v2 (core/strategies/mirostat.py) against a separately written reference of
llama.cpp ``llama_sampler_mirostat_v2_apply``, and its control of the surprise."""

from __future__ import annotations

import math

import pytest
import torch

from core.strategies.mirostat import Mirostat


def ref_truncate(probs: list[float], mu: float) -> list[float]:
    """llama.cpp's steps 1-2 over the candidates sorted by probability: cut at the first
    one whose surprise exceeds mu (keep at least one), renormalise. Full-vocab result."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    size = len(order)
    for rank, i in enumerate(order):
        if probs[i] <= 0 or -math.log2(probs[i]) > mu:
            size = rank
            break
    size = max(size, 1)
    kept = order[:size]
    total = sum(probs[i] for i in kept)
    out = [0.0] * len(probs)
    for i in kept:
        out[i] = probs[i] / total
    return out


def ref_run(dists: list[torch.Tensor], tau: float, eta: float, seed: int) -> tuple[list[int], list[float]]:
    """Tokens and the mu used at each step; the draw is torch.multinomial on a generator
    seeded alike (llama.cpp's mt19937 stream cannot be reproduced, the distribution can)."""
    g = torch.Generator().manual_seed(seed)
    mu = 2 * tau
    tokens, mus = [], []
    for probs in dists:
        renorm = ref_truncate(probs.double().tolist(), mu)
        token = int(torch.multinomial(torch.tensor(renorm, dtype=torch.float64), 1, generator=g))
        tokens.append(token)
        mus.append(mu)
        mu -= eta * (-math.log2(renorm[token]) - tau)
    return tokens, mus


def _dists(seed: int, steps: int, vocab: int, with_zeros: bool) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        scores = torch.randn(vocab, generator=g) * 2.5
        if with_zeros:  # an earlier filter removed some tokens
            scores[torch.rand(vocab, generator=g) < 0.3] = -math.inf
            scores[0] = 1.0
        out.append(scores.softmax(-1))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("vocab", [50, 1000])
@pytest.mark.parametrize("with_zeros", [False, True])
@pytest.mark.parametrize("tau,eta", [(3.0, 0.1), (5.0, 0.1), (1.0, 0.5), (0.05, 0.1)])
def test_matches_llama_cpp_reference(seed, vocab, with_zeros, tau, eta):
    dists = _dists(seed, 150, vocab, with_zeros)
    want_tokens, want_mus = ref_run(dists, tau, eta, seed)
    m = Mirostat(tau, eta, seed=seed)
    tokens, mus = [], []
    for probs in dists:
        renorm = m.truncated(probs)
        assert torch.allclose(renorm, torch.tensor(ref_truncate(probs.double().tolist(), m.mu), dtype=torch.float64))
        tokens.append(m.choose(probs.log(), probs))
        mus.append(m.state())
    assert tokens == want_tokens
    assert mus == pytest.approx(want_mus, abs=1e-9)


def test_kept_set_follows_the_mu_rule():
    """Every chosen token has surprise <= mu under the processed distribution, or is the
    most probable token (kept when nothing else is); the kept set is a prefix of the
    sorted order."""
    dists = _dists(3, 400, 200, True)
    m = Mirostat(3.0, 0.3, seed=3)
    for probs in dists:
        mu = m.mu
        kept = m.truncated(probs) > 0
        sorted_kept = kept[torch.argsort(probs, descending=True)]
        assert not (sorted_kept[1:] & ~sorted_kept[:-1]).any()  # a prefix
        assert torch.equal(kept, (-torch.log2(probs.double()) <= mu) | (torch.arange(200) == probs.argmax()))
        token = m.choose(probs.log(), probs)
        assert m.state() == mu
        if -math.log2(float(probs[token])) > mu:
            assert token == int(probs.argmax())
    assert int(kept.sum()) < int((probs > 0).sum())  # the truncation did cut something


def _expected_surprise(probs: torch.Tensor, mu: float) -> float:
    """Mean renormalised surprise (bits) of one step truncated at mu (the reference)."""
    renorm = [p for p in ref_truncate(probs.double().tolist(), mu) if p > 0]
    return -sum(p * math.log2(p) for p in renorm)


@pytest.mark.parametrize("tau", [2.0, 3.0, 4.0])
def test_average_surprise_approaches_tau_on_a_fixed_distribution(tau):
    ranks = torch.arange(1, 1001, dtype=torch.float64)
    probs = (ranks**-1.1 / (ranks**-1.1).sum()).float()  # Zipf over 1000 tokens, entropy ~6.5 bits
    m = Mirostat(tau, 0.1, seed=0)
    surprises, mus = [], []
    for _ in range(3000):
        renorm = m.truncated(probs)
        token = m.choose(probs.log(), probs)
        surprises.append(-math.log2(float(renorm[token])))
        mus.append(m.state())
    late = surprises[1500:]
    assert sum(surprises) / len(surprises) == pytest.approx(tau, abs=0.05)
    assert sum(late) / len(late) == pytest.approx(tau, abs=0.1)
    # mu settled where a step's expected surprise is about tau ...
    late_mu = sum(mus[1500:]) / 1500
    assert _expected_surprise(probs, late_mu) == pytest.approx(tau, abs=0.15)
    # ... moving there from 2·tau in the direction that corrects the surprise
    start_error = _expected_surprise(probs, 2 * tau) - tau
    if abs(start_error) > 0.2:
        assert (late_mu - 2 * tau) * start_error < 0


def test_mu_falls_while_the_surprise_is_above_tau():
    # 12 tokens of p = 0.08 (surprise 3.64 bits) and a long tail of tiny ones: at mu = 4
    # all 12 are kept, the renormalised surprise is log2 12 = 3.58 > tau = 2, so mu
    # falls by 0.1 * 1.58 per step; below 3.64 only the top token is kept (surprise 0)
    # and mu rises by 0.1 * 2
    probs = torch.cat([torch.full((12,), 0.08), torch.full((400,), 0.04 / 400)])
    m = Mirostat(2.0, 0.1, seed=0)
    tokens, mus = [], []
    for _ in range(6):
        tokens.append(m.choose(probs.log(), probs))
        mus.append(m.state())
    fall = 0.1 * (math.log2(12) - 2)
    assert mus == pytest.approx([4.0, 4.0 - fall, 4.0 - 2 * fall, 4.0 - 3 * fall, 4.0 - 3 * fall + 0.2, 4.0 - 4 * fall + 0.2])
    assert mus[3] < -math.log2(0.08) < mus[4] and tokens[3] == 0


def test_tiny_tau_is_greedy_and_mu_rises():
    probs = torch.tensor([0.4, 0.35, 0.25])
    m = Mirostat(0.01, 0.5, seed=0)
    for _ in range(5):
        mu = m.mu
        assert m.choose(probs.log(), probs) == 0  # surprise 1.3 bits > mu: only the top token
        assert m.state() == mu
        assert m.mu == pytest.approx(mu + 0.5 * 0.01)  # renormalised surprise 0 < tau: mu rises


def test_records_mu_per_step_through_update():
    dists = _dists(4, 6, 30, False)
    m = Mirostat(3.0, 0.2, seed=4)
    ids = m.start([7, 8], eos_token_id=29, max_new_tokens=10)
    assert m.state() is None  # nothing chosen yet
    recorded = []
    for probs in dists:
        mu = m.mu
        up = m.update(ids, probs.log()[None], probs[None], probs[None])
        if up.emitted is None:
            break
        assert up.emitted.mu == mu
        recorded.append(up.emitted.mu)
        ids = up.input_ids
    assert len(recorded) >= 2 and recorded[0] == 6.0 and recorded[1] != recorded[0]


def test_same_seed_same_tokens():
    dists = _dists(5, 100, 100, False)

    def run(seed):
        m = Mirostat(4.0, 0.1, seed=seed)
        return [m.choose(p.log(), p) for p in dists]

    assert run(1) == run(1)
    assert run(1) != run(2)


@pytest.mark.parametrize("tau,eta", [(0.0, 0.1), (-1.0, 0.1), (3.0, 0.0), (3.0, -0.1), (math.nan, 0.1), (3.0, math.inf)])
def test_bad_arguments_raise(tau, eta):
    with pytest.raises(ValueError):
        Mirostat(tau, eta)
