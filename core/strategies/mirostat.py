"""Mirostat v2: sampling that steers the surprise of the chosen tokens toward a target.

Basu et al. 2021, "Mirostat: A Neural Text Decoding Algorithm that Directly Controls
Perplexity" (ICLR); version 2 as llama.cpp ``llama_sampler_mirostat_v2_apply``
(src/llama-sampling.cpp). Per step, with mu the current maximum surprise (bits):

    1. keep the tokens whose surprise -log2 p is <= mu, p from the processed
       distribution (at least the most probable token);
    2. renormalise the kept probabilities and sample one token;
    3. mu <- mu - eta * (s - tau), s = -log2 of the chosen token's *renormalised*
       probability, as llama.cpp (and webui's ``MirostatLogitsWarper``) compute it.

mu starts at 2·tau. The paper's Algorithm 1 (mirostat v1) truncates to a top-k derived
from an estimated Zipf exponent instead of the surprise threshold, and the authors'
code (basusourya/mirostat ``mirostat.py``) measures the surprise with the chosen
token's original, untruncated probability; v2 and the surprise rule here follow
llama.cpp.
"""

from __future__ import annotations

import math

import torch

from core.strategies.greedy import SingleHypothesis


class Mirostat(SingleHypothesis):
    """Mirostat v2 over the processed distribution.

    Args:
        tau: target surprise, bits, > 0 (the perplexity aimed at is 2**tau).
        eta: learning rate of mu, > 0.
        seed: seed of the sampler's own random stream; None = nondeterministic.

    Attributes:
        mu: the maximum surprise the next step will use (bits).

    Raises:
        ValueError: if ``tau`` or ``eta`` is not a finite number > 0.
    """

    def __init__(self, tau: float, eta: float, seed: int | None = 0):
        super().__init__()
        for name, value in (("tau", tau), ("eta", eta)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"mirostat {name} must be a finite number > 0, got {value!r}")
        self.tau, self.eta = float(tau), float(eta)
        self.mu = 2.0 * self.tau
        self.mu_used: float | None = None
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()  # nondeterministic
        else:
            self.generator.manual_seed(int(seed))

    def truncated(self, probs: torch.Tensor) -> torch.Tensor:
        """float64 (vocab,): ``probs`` (vocab,) restricted to the tokens with surprise
        -log2 p <= mu (the most probable token if none), renormalised to sum to 1."""
        p = probs.double()
        keep = -torch.log2(p) <= self.mu  # p = 0 has surprise inf and is never kept
        if not keep.any():
            keep = torch.zeros_like(keep)
            keep[torch.argmax(p)] = True
        kept = p * keep
        return kept / kept.sum()

    def choose(self, scores: torch.Tensor, probs: torch.Tensor) -> int:
        """Sample from the truncated, renormalised ``probs`` (vocab,) and update mu."""
        renormalised = self.truncated(probs)
        token = int(torch.multinomial(renormalised, 1, generator=self.generator))
        surprise = -math.log2(float(renormalised[token]))
        self.mu_used = self.mu
        self.mu = self.mu - self.eta * (surprise - self.tau)
        return token

    def state(self) -> float | None:
        """The mu (bits) the step just chosen truncated with (before its update)."""
        return self.mu_used
