"""Ancestral sampling from the processed distribution (temperature, top-k, top-p).

Draws with ``torch.multinomial`` from a ``torch.Generator`` seeded with ``seed``, so the
same seed on the same input gives the same tokens. Same distribution as transformers'
``generate(do_sample=True)`` (its random stream is the global one, so individual draws
differ).
"""

from __future__ import annotations

import torch

from core.strategies.greedy import SingleHypothesis


class Sampling(SingleHypothesis):
    """Sample the next token from softmax(processed scores).

    Args:
        seed: seed of the sampler's own random stream; None = nondeterministic.
    """

    def __init__(self, seed: int | None = 0):
        super().__init__()
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()  # nondeterministic
        else:
            self.generator.manual_seed(int(seed))

    def choose(self, scores: torch.Tensor, probs: torch.Tensor) -> int:
        return int(torch.multinomial(probs, 1, generator=self.generator))
