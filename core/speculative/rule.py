"""The acceptance rule of speculative decoding: which drafted tokens the target keeps, and
the token it adds of its own.

Leviathan, Kalman and Matias 2023, "Fast Inference from Transformers via Speculative
Decoding", Algorithm 1 (and Chen et al. 2023, "Accelerating Large Language Model Decoding
with Speculative Sampling"), in the paper's names: the draft (Mq) proposes ``gamma`` tokens
x_1..x_gamma with distributions q_1..q_gamma; the target (Mp) scores them in one call and
gives p_1..p_{gamma+1}. For i = 1..gamma draw r_i ~ U(0, 1) and accept x_i while
``r_i < p_i(x_i) / q_i(x_i)``. At the first rejection the target's token is drawn from the
residual distribution ``norm(max(0, p_i - q_i))``; when all are accepted one more token (the
"bonus") is drawn from p_{gamma+1}. The tokens emitted are then distributed exactly as the
target's own samples (the paper's Theorem 3.5 / Appendix A.1). The reference implementation
read for this one is romsto/Speculative-Decoding ``sampling/codec_speculative_decoding.py``
(its ``max_fn`` is ``residual`` here; it accepts while ``r <= p / q``, the paper ``r < p / q``:
the two differ only on a set of measure zero).

Deterministic drafts (n-gram lookup, a branch) have a one-hot q: ``q_i(x_i) = 1``, so a token
is accepted with probability ``p_i(x_i)`` and the residual is p_i with x_i removed,
renormalised.

Greedy verification (transformers' assisted generation without sampling): a drafted token is
accepted iff it is the argmax of the target's processed scores at its position; at the first
rejection, and after a fully accepted draft, the target's own argmax is emitted. The output is
then token for token the target's greedy output.

The rule is a plain object (``SamplingRule``, ``GreedyRule``) so that a test can swap it for a
deliberately wrong one (``SamplingRule(accept=lambda r, p, q: True)``) and see the
distribution test fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

NEAR_TIE = 1e-4
"""Greedy verification: a top-2 logit margin below this marks a near-tie (scoring several
positions in one call sums in another order than single steps, so the argmax may differ)."""


@dataclass
class Judgement:
    """How the target judged one drafted token.

    Attributes:
        p: the target's processed probability of the token at its position.
        q: the draft's probability of it (1.0 for a deterministic draft).
        ratio: min(1, p / q): the probability of accepting it.
        u: the uniform draw compared with p / q (None under greedy verification).
        accepted: whether it was kept.
    """

    p: float
    q: float
    ratio: float
    u: float | None
    accepted: bool


@dataclass
class Verdict:
    """The outcome of one position of a round (see ``SamplingRule.judge`` / ``GreedyRule.judge``).

    Attributes:
        accepted: the drafted token at this position was kept (``token`` is it).
        token: the token emitted at this position: the drafted one if accepted, else the
            target's own (resampled at a rejection, or the bonus after a full draft).
        judgement: how the drafted token was judged; None at the bonus position.
        residual: float32 (vocab,): the distribution the target's own token was drawn from
            (the residual at a rejection, p at the bonus position, greedy: p); None when the
            drafted token was accepted.
        near_tie: greedy only: the top-2 margin of the processed scores was < ``NEAR_TIE``.
    """

    accepted: bool
    token: int
    judgement: Judgement | None = None
    residual: torch.Tensor | None = None
    near_tie: bool = False


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) (Leviathan et al. 2023, eq. in Algorithm 1; romsto's ``max_fn``).

    Args:
        p, q: float (vocab,) distributions.

    Returns:
        float32 (vocab,) summing to 1; p itself if p <= q everywhere (p == q: a rejection
        then has probability 0, so this only guards float rounding).
    """
    diff = torch.clamp(p.float() - q.float(), min=0.0)
    total = diff.sum()
    if not total > 0:
        return p.float() / p.float().sum()
    return diff / total


def one_hot(token: int, vocab: int) -> torch.Tensor:
    """float32 (vocab,): the distribution of a deterministic draft at one position."""
    q = torch.zeros(vocab, dtype=torch.float32)
    q[token] = 1.0
    return q


def standard_accept(r: float, p: float, q: float) -> bool:
    """Algorithm 1's test: accept when r < p / q (r ~ U(0, 1))."""
    return r * q < p  # r < p / q without dividing by a q of 0


class SamplingRule:
    """Leviathan et al. 2023's rule: accept x_i if r_i < p_i(x_i) / q_i(x_i), else resample
    from norm(max(0, p_i - q_i)); after a full draft, sample the bonus token from p.

    Args:
        generator: the random stream of the draws r_i and of the resampled tokens (seeded
            by ``DecodingOptions.seed``).
        accept: ``(r, p, q) -> bool``; ``standard_accept`` unless a test swaps it.
        resample: whether a rejection draws from the residual (True, the paper) or from p
            (False: a deliberately wrong rule for the distribution test).
    """

    greedy = False

    def __init__(self, generator: torch.Generator, accept: Callable[[float, float, float], bool] = standard_accept,
                 resample: bool = True):
        self.generator, self.accept, self.resample = generator, accept, resample

    def uniform(self) -> float:
        """One draw r ~ U(0, 1) from the rule's stream."""
        return float(torch.rand((), generator=self.generator))

    def sample(self, dist: torch.Tensor) -> int:
        """One token id drawn from ``dist`` float (vocab,)."""
        return int(torch.multinomial(dist.float(), 1, generator=self.generator))

    def judge(self, x: int | None, p: torch.Tensor, q: torch.Tensor | None, scores: torch.Tensor | None = None) -> Verdict:
        """Judge drafted token ``x`` at one position (or draw the bonus token when ``x`` is None).

        Args:
            x: the drafted token id, or None at the position after the last drafted token.
            p: float32 (vocab,): the target's processed distribution at this position.
            q: float32 (vocab,): the draft's distribution here, or None for a deterministic
                draft (one-hot at ``x``).
            scores: unused (greedy verification's argument).
        """
        if x is None:
            return Verdict(False, self.sample(p), residual=p)
        q_x = 1.0 if q is None else float(q[x])
        p_x = float(p[x])
        r = self.uniform()
        ratio = min(1.0, p_x / q_x) if q_x > 0 else 1.0
        ok = self.accept(r, p_x, q_x)
        judgement = Judgement(p_x, q_x, ratio, r, ok)
        if ok:
            return Verdict(True, int(x), judgement)
        dist = residual(p, one_hot(x, p.shape[-1]) if q is None else q) if self.resample else p
        return Verdict(False, self.sample(dist), judgement, residual=dist)


class GreedyRule:
    """Greedy verification: accept x_i iff it is the argmax of the target's processed scores
    at its position (ties go to the lowest id, as ``torch.argmax`` and greedy search); the
    emitted token at a rejection, and the bonus, is the target's argmax."""

    greedy = True

    def judge(self, x: int | None, p: torch.Tensor, q: torch.Tensor | None, scores: torch.Tensor | None = None) -> Verdict:
        """As ``SamplingRule.judge``; ``scores`` float32 (vocab,): the processed scores
        (argmax and the near-tie margin are taken on them; ``p`` is their softmax)."""
        scores = p if scores is None else scores
        top2 = torch.topk(scores, min(2, scores.shape[-1]))
        best = int(top2.indices[0])
        near_tie = bool(len(top2.values) > 1 and float(top2.values[0] - top2.values[1]) < NEAR_TIE)
        if x is None:
            return Verdict(False, best, residual=p, near_tie=near_tie)
        q_x = 1.0 if q is None else float(q[x])
        p_x = float(p[x])
        ok = int(x) == best
        judgement = Judgement(p_x, q_x, min(1.0, p_x / q_x) if q_x > 0 else 1.0, None, ok)
        return Verdict(ok, int(x) if ok else best, judgement, residual=None if ok else p, near_tie=near_tie)


def adapt_gamma(gamma: int, n_drafted: int, n_accepted: int, lowest: int = 1, highest: int = 16) -> int:
    """The next draft length under transformers' "heuristic" schedule
    (``AssistedCandidateGenerator.update_candidate_strategy``: +2 when ``num_matches`` equals
    the scheduled ``num_assistant_tokens``, else -1): +2 only after a round whose draft
    proposed the full scheduled ``gamma`` and was accepted in full; -1 (never below
    ``lowest``) otherwise, a short draft accepted in full included (the draft ran out or
    stopped unsure: a longer one would not be used); unchanged when the draft proposed
    nothing. Capped at ``highest``."""
    if n_drafted == 0:
        return gamma
    if n_accepted == n_drafted and n_drafted >= gamma:
        return min(highest, gamma + 2)
    return max(lowest, gamma - 1)


def predicted_speedup(alpha: float, gamma: float, draft_ms_per_token: float, verify_ms: float,
                      plain_ms: float) -> float | None:
    """Leviathan et al. 2023 Theorem 3.8 with the verify call's measured cost: the expected
    tokens of a round, (1 - alpha^(gamma+1)) / (1 - alpha), times the plain step's time,
    over the round's time (gamma draft steps + one verify call). With verify_ms = plain_ms
    and draft_ms_per_token = c * plain_ms it is the theorem's (1 - a^(g+1)) / ((1 - a)(g c + 1)).

    Returns:
        the speed-up over plain decoding, or None when the times are not known (<= 0).
    """
    if plain_ms <= 0 or verify_ms <= 0:
        return None
    tokens = gamma + 1.0 if alpha >= 1.0 else (1.0 - alpha ** (gamma + 1.0)) / (1.0 - alpha)
    return tokens * plain_ms / (gamma * draft_ms_per_token + verify_ms)


@dataclass
class GammaSchedule:
    """The draft length per round: fixed (``fixed`` > 0, ``--draft-tokens N``) or adaptive
    (``adapt_gamma`` from ``start``)."""

    fixed: int = 0
    start: int = 2
    history: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gamma = self.fixed or self.start

    def update(self, n_drafted: int, n_accepted: int) -> None:
        """After a round: adapt (unless fixed)."""
        self.history.append(self.gamma)
        if not self.fixed:
            self.gamma = adapt_gamma(self.gamma, n_drafted, n_accepted)


def top_tokens(dist: torch.Tensor, k: int) -> list[tuple[int, float]]:
    """The ``k`` most probable (id, probability) of a (vocab,) distribution, probability > 0."""
    values, ids = torch.topk(dist, min(k, dist.shape[-1]))
    return [(int(i), float(v)) for i, v in zip(ids.tolist(), values.tolist()) if v > 0.0]


def first_rejection(verdicts: Sequence[Verdict]) -> int:
    """How many leading verdicts accepted their drafted token."""
    n = 0
    for v in verdicts:
        if not v.accepted:
            break
        n += 1
    return n
