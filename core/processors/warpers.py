"""Sampling warpers: temperature and the truncation filters (transformers
``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``...). Shapes: see
``core.processors``."""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


class Temperature:
    """Divide the scores by ``temperature`` (> 0): < 1 sharpens, > 1 flattens.

    Raises:
        ValueError: if ``temperature`` <= 0 (use greedy search for argmax).
    """

    def __init__(self, temperature: float):
        if not temperature > 0:
            raise ValueError(
                f"temperature must be > 0, got {temperature}; use strategy 'greedy' for argmax"
            )
        self.temperature = float(temperature)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores / self.temperature


class TopK:
    """Keep the ``top_k`` highest scores per row, set the rest to ``-inf`` (Fan et al. 2018).

    ``top_k`` larger than the vocabulary keeps everything. Ties at the k-th score are
    all kept (the threshold is the k-th largest value), as in transformers.

    Raises:
        ValueError: if ``top_k`` < 1 or ``min_tokens_to_keep`` < 1.
    """

    def __init__(self, top_k: int, min_tokens_to_keep: int = 1):
        if not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be an int >= 1, got {top_k!r}")
        if not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
            raise ValueError(f"min_tokens_to_keep must be an int >= 1, got {min_tokens_to_keep!r}")
        self.top_k = max(top_k, min_tokens_to_keep)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        k = min(self.top_k, scores.shape[-1])
        kth_best = torch.topk(scores, k).values[..., -1:]  # (batch, 1)
        return scores.masked_fill(scores < kth_best, NEG_INF)


class TopP:
    """Nucleus filtering (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration").

    Keep the smallest set of most probable tokens whose probabilities sum to at least
    ``top_p``; at least ``min_tokens_to_keep`` are kept. Computed like transformers'
    ``TopPLogitsWarper``: sort ascending, drop the tokens whose cumulative probability
    is <= 1 - top_p.

    Raises:
        ValueError: if ``top_p`` is not in [0, 1] or ``min_tokens_to_keep`` < 1.
    """

    def __init__(self, top_p: float, min_tokens_to_keep: int = 1):
        if not 0.0 <= top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] (1 = off), got {top_p}")
        if not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
            raise ValueError(f"min_tokens_to_keep must be an int >= 1, got {min_tokens_to_keep!r}")
        self.top_p = float(top_p)
        self.min_tokens_to_keep = min_tokens_to_keep

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        sorted_scores, sorted_idx = torch.sort(scores, descending=False)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cumulative <= (1 - self.top_p)
        remove_sorted[..., -self.min_tokens_to_keep :] = False
        remove = remove_sorted.scatter(1, sorted_idx, remove_sorted)
        return scores.masked_fill(remove, NEG_INF)
