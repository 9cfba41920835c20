"""Speculative sampling preserves the target's distribution (Leviathan et al. 2023, Theorem 3.5):
chi-square tests over >= 10,000 seeded draws, and a deliberately wrong rule that fails them.

Two levels:
- the rule (``core.speculative.rule.SamplingRule``) on a tiny random Marian model's real p and a
  second tiny model's q at the first drafted position (20,000 draws);
- the whole loop (``core.speculative.loop.SpeculativeRun``, the rule injected) on a table
  "model" whose next-token logits depend on the last token only, so that thousands of seeded
  runs are cheap: the first TWO emitted tokens (the first drafted position and the next one,
  accepted, resampled or bonus) follow the target's joint distribution.

Seen failing before trusted: the accept-all rule and "resample from p" (below); in the loop, q's
row taken from the wrong position (q[0] for every drafted position). Note: ignoring q altogether
(treating a sampled draft as one-hot: accept with p(x), residual p without x) is NOT a break: it
is exact too, only with a lower acceptance rate, so the test rightly passes it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from core.backends.base import DecoderPrompt, EncoderOutput, StepOutput
from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import Finished
from core.options import DecodingOptions
from core.speculative.loop import SpeculativeRun
from core.speculative.rule import SamplingRule, residual
from tests.core.conftest import tiny_marian

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ALPHA = 0.01


def chi_square_p(samples: list, probs: dict) -> float:
    """The chi-square test's p-value of ``samples`` against ``probs`` (outcome -> probability);
    outcomes expected fewer than 5 times are pooled into one bin."""
    n = len(samples)
    counts = Counter(samples)
    big = [k for k, p in probs.items() if p * n >= 5]
    small_p = sum(p for k, p in probs.items() if k not in big)
    observed = [counts.get(k, 0) for k in big]
    expected = [probs[k] * n for k in big]
    rest = n - sum(observed)
    if small_p * n >= 1 or rest:
        observed.append(rest)
        expected.append(max(small_p * n, 1e-9))
    expected = np.array(expected) * n / sum(expected)
    return float(chisquare(observed, expected).pvalue)


@pytest.fixture(scope="module")
def p_and_q():
    """The first-position processed distributions of two tiny Marian models (target p, draft q),
    temperature 1.3 and top-k 40 (the warpers apply under sampling verification)."""
    out = []
    for seed in (0, 7):
        tiny = tiny_marian(seed)
        backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind)
        engine = Engine(backend)
        encoded = backend.encode(tiny.inputs)
        options = DecodingOptions(strategy="sample", temperature=1.3, top_k=40, max_new_tokens=1, top_k_report=96)
        rules, processors = engine.processors(encoded, tiny.prompt, options)
        cache = backend.init_cache(encoded, 1)
        ids = torch.tensor([list(tiny.prompt.prompt_ids)])
        logits = backend.step(ids, cache, False).logits
        out.append(torch.softmax(processors(ids, rules(ids, logits)), dim=-1)[0])
    p, q = out
    assert float(torch.abs(p - q).sum()) > 0.5  # the draft is a poor one: the rule matters
    return p, q


def _first_tokens(rule: SamplingRule, p: torch.Tensor, q: torch.Tensor, n: int) -> list[int]:
    draws = torch.multinomial(q, n, replacement=True, generator=torch.Generator().manual_seed(99)).tolist()
    return [rule.judge(x, p, q).token for x in draws]


def test_the_rule_keeps_the_targets_distribution(p_and_q):
    p, q = p_and_q
    rule = SamplingRule(torch.Generator().manual_seed(1))
    samples = _first_tokens(rule, p, q, 20_000)
    assert chi_square_p(samples, dict(enumerate(p.tolist()))) > ALPHA
    # a deterministic draft (q one-hot) too
    x = int(torch.argmax(q))
    rule = SamplingRule(torch.Generator().manual_seed(2))
    samples = [rule.judge(x, p, None).token for _ in range(10_000)]
    assert chi_square_p(samples, dict(enumerate(p.tolist()))) > ALPHA


@pytest.mark.parametrize("wrong", ["accept every draft token", "resample from p"])
def test_a_wrong_rule_fails(p_and_q, wrong):
    p, q = p_and_q
    if wrong == "accept every draft token":
        rule = SamplingRule(torch.Generator().manual_seed(1), accept=lambda r, p_x, q_x: True)
    else:
        rule = SamplingRule(torch.Generator().manual_seed(1), resample=False)
    samples = _first_tokens(rule, p, q, 20_000)
    assert chi_square_p(samples, dict(enumerate(p.tolist()))) < 1e-6


def test_residual_is_norm_max_0_p_minus_q():
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    q = torch.tensor([0.2, 0.5, 0.1, 0.2])
    assert residual(p, q).tolist() == pytest.approx([0.75, 0.0, 0.25, 0.0])
    assert residual(p, p).tolist() == pytest.approx(p.tolist())  # guarded: p itself


# ---------------------------------------------------------------- the whole loop on a table model

V = 8
EOS = V - 1


def _table(seed: int, scale: float) -> torch.Tensor:
    t = torch.randn(V, V, generator=torch.Generator().manual_seed(seed)) * scale
    t[:, EOS] -= 2.0  # EOS is rare: most runs emit two tokens
    return t


@dataclass
class TableCache:
    ids: list


class TableBackend:
    """A "model" whose next-token logits are a table row of the last token (a Markov chain),
    with ``all_positions`` and ``truncate_cache`` as the bundled backends have them."""

    name = "table"
    vocab_size = V

    def __init__(self, table: torch.Tensor):
        self.table = table

    def encode(self, inputs: Any) -> EncoderOutput:
        return EncoderOutput(torch.zeros(1, 1, 1), 1)

    def init_cache(self, encoded, batch_size):
        return TableCache([])

    def step(self, input_ids, cache, output_attentions, *, all_positions=False):
        new = input_ids[0].tolist()
        cache.ids = cache.ids + new
        rows = self.table[torch.tensor(new)][None]  # (1, new_len, V)
        return StepOutput(logits=rows[:, -1], cross_attention=None, cache=cache,
                          position_logits=rows if all_positions else None)

    def truncate_cache(self, cache, length):
        cache.ids = cache.ids[:length]
        return cache

    def reorder_cache(self, cache, beam_idx):
        return cache

    def token_text(self, i):
        return f"t{i}"

    def decode(self, ids):
        return " ".join(f"t{i}" for i in ids)

    def tokenize(self, text):
        return []


class TableDraft:
    """A model draft over another table: samples ``gamma`` tokens from its processed
    distribution q (the run's chain applied through ``process``) and returns q."""

    name = "model:table"
    deterministic = False

    def __init__(self, table: torch.Tensor, seed: int):
        self.table, self.generator = table, torch.Generator().manual_seed(seed)

    def propose(self, ids, gamma, process):
        ids, out, qs = list(ids), [], []
        for _ in range(gamma):
            t = torch.tensor([ids])
            q = torch.softmax(process(t, self.table[ids[-1]][None]), dim=-1)[0]
            x = int(torch.multinomial(q, 1, generator=self.generator))
            out.append(x)
            qs.append(q)
            ids.append(x)
        return out, torch.stack(qs)

    def rollback(self, n_ids):
        pass


def _joint(target: torch.Tensor, start: int, temperature: float) -> dict:
    """p(x1, x2 | start) under the table target with temperature (EOS at x1 ends the run: (EOS, None))."""
    probs = torch.softmax(target / temperature, dim=-1)
    out = {}
    for a in range(V):
        if a == EOS:
            out[(EOS, None)] = float(probs[start, EOS])
            continue
        for b in range(V):
            out[(a, b if b != EOS else None)] = float(probs[start, a] * probs[a, b])
    return out


def _loop_samples(n: int, rule_for=None, gamma: int = 2) -> list:
    target, draft_table = _table(0, 1.5), _table(5, 1.5)
    backend = TableBackend(target)
    engine = Engine(backend, kept_caches=0)
    encoded = backend.encode(None)
    prompt = DecoderPrompt(prompt_ids=(3,), eos_token_id=EOS)
    base = DecodingOptions(strategy="speculative", verification="sample", draft="model:table", draft_tokens=gamma,
                           temperature=1.2, max_new_tokens=3, top_k_report=1, capture_attention=False)
    samples = []
    for seed in range(n):
        options = base.with_(seed=seed)
        rule = rule_for(seed) if rule_for else None
        run = SpeculativeRun(engine, encoded, prompt, options, draft=TableDraft(draft_table, 10_000 + seed),
                             reuse_cache=False, rule=rule)
        fin = list(run.events())[-1]
        assert isinstance(fin, Finished)
        ids = fin.token_ids
        samples.append((ids[0], ids[1]) if len(ids) >= 2 else (EOS, None) if not ids else (ids[0], None))
    return samples, _joint(target, 3, 1.2)


def test_the_loop_keeps_the_targets_joint_distribution_of_two_tokens():
    """10,000 seeded runs of two tokens, gamma 2 (rounds: both drafted tokens judged, the first
    one drafted then the bonus, or a rejection at either position): the pairs follow the
    target's joint distribution."""
    samples, joint = _loop_samples(10_000)
    assert chi_square_p(samples, joint) > ALPHA


def test_the_loop_with_an_accept_all_rule_fails():
    samples, joint = _loop_samples(
        3_000, rule_for=lambda seed: SamplingRule(torch.Generator().manual_seed(seed), accept=lambda r, p, q: True))
    assert chi_square_p(samples, joint) < 1e-6
