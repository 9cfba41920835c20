"""Samplers from text-generation-webui, as logits processors.

    TopA                webui      modules/sampler_hijack.py  TopALogitsWarper
    TailFree            webui      modules/sampler_hijack.py  TailFreeLogitsWarper
    QuadraticSampling   webui      modules/sampler_hijack.py  QuadraticSamplingLogitsWarper

The contract is ``core.processors.llama_samplers``' (the llama.cpp samplers beside them):
``input_ids`` int64 (batch, seq_len), ``scores`` float32 (batch, vocab) -> new float32
(batch, vocab) scores, the input never modified; filtered tokens get ``-inf``; arguments are
checked in ``__init__`` (``ValueError``); each row of a batch on its own.
"""

from __future__ import annotations

import torch

from core.processors.llama_samplers import NEG_INF, check_finite, check_min_keep

__all__ = ["QuadraticSampling", "TailFree", "TopA"]


class TopA:
    """Top-a (BlinkDL, RWKV; no paper): remove tokens with p < top_a · p_max², where p is
    softmax(scores) per row, keeping at least ``min_tokens_to_keep`` (the best ones; among
    tied scores the lower token ids). As webui ``TopALogitsWarper``
    (modules/sampler_hijack.py). top_a = 0 removes nothing; a flat row is kept whole.

    Args:
        top_a: in [0, 1] (0 = off).
        min_tokens_to_keep: int >= 1.

    Raises:
        ValueError: if ``top_a`` is outside [0, 1] or ``min_tokens_to_keep`` < 1.
    """

    name = "top_a"

    def __init__(self, top_a: float, min_tokens_to_keep: int = 1):
        top_a = check_finite("top_a", top_a)
        if not 0.0 <= top_a <= 1.0:
            raise ValueError(f"top_a must be in [0, 1] (0 = off), got {top_a}")
        self.top_a = top_a
        self.min_tokens_to_keep = check_min_keep(min_tokens_to_keep)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        probs = scores.softmax(dim=-1)
        p_max = probs.max(dim=-1, keepdim=True).values
        remove = probs < p_max * p_max * self.top_a
        if self.min_tokens_to_keep > 1:
            # spare the min_tokens_to_keep best in webui's sorted order; a stable sort breaks
            # ties by token id (torch.topk's pick among tied scores is arbitrary)
            order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
            remove = remove.scatter(1, order[:, : self.min_tokens_to_keep], False)
        return scores.masked_fill(remove, NEG_INF)


class TailFree:
    """Tail-free sampling (Phillips 2019, "Tail Free Sampling", trentbrick.com).

    Sort the row's probabilities descending, take the absolute second differences
    |p_i - 2 p_{i+1} + p_{i+2}|, normalise them to sum to 1 and accumulate; the tail
    past the point where this sum exceeds ``z`` is cut. As webui ``TailFreeLogitsWarper``
    (modules/sampler_hijack.py), which centres the cut as Phillips' implementation
    does: second difference i decides about sorted token i + 1, the top token is always
    kept and the least probable one of the whole row always removed (a ``-inf`` token
    when there is one); at least ``min_tokens_to_keep`` are kept. It works on the whole
    row, ``-inf`` (p = 0) tokens included. When every second difference is 0 (a flat or
    linear distribution) the normalised sum is NaN and only the last token goes, as in
    webui. z = 1 is off (webui applies TFS only for z < 1), and rows of at most two
    tokens are left alone (llama.cpp's former ``llama_sample_tail_free``). The removed
    llama.cpp version kept one token fewer at the same z (it cut at sorted position i,
    webui at i + 1); this class follows webui.

    Args:
        z: in [0, 1] (1 = off).
        min_tokens_to_keep: int >= 1.

    Raises:
        ValueError: if ``z`` is outside [0, 1] or ``min_tokens_to_keep`` < 1.
    """

    name = "tfs"

    def __init__(self, z: float, min_tokens_to_keep: int = 1):
        z = check_finite("tfs z", z)
        if not 0.0 <= z <= 1.0:
            raise ValueError(f"tfs z must be in [0, 1] (1 = off), got {z}")
        self.z = z
        self.min_tokens_to_keep = check_min_keep(min_tokens_to_keep)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.z >= 1.0 or scores.shape[-1] <= 2:
            return scores.clone()
        sorted_scores, sorted_idx = torch.sort(scores, dim=-1, descending=True, stable=True)
        probs = sorted_scores.softmax(dim=-1)
        d2 = probs.diff(dim=-1).diff(dim=-1).abs()  # (batch, vocab - 2)
        cdf = (d2 / d2.sum(dim=-1, keepdim=True)).cumsum(dim=-1)
        batch = scores.shape[0]
        remove_sorted = torch.cat(
            [torch.zeros(batch, 1, dtype=torch.bool), cdf > self.z, torch.ones(batch, 1, dtype=torch.bool)], dim=-1
        )
        remove_sorted[:, : self.min_tokens_to_keep] = False
        remove = remove_sorted.scatter(1, sorted_idx, remove_sorted)
        return scores.masked_fill(remove, NEG_INF)


class QuadraticSampling:
    """Quadratic / cubic sampling ("smoothing factor", by kalomaze).

    With d = score - max score of the row (<= 0), every finite score becomes

        max - k·f·d² + s·f·d³,   k = (3 - curve) / 2,  s = (curve - 1) / 2,

    f = ``smoothing_factor``: an inverted parabola around the top token (curve 1), made
    cubic by the curve. Scores within 1/f of the top move closer to it (flatter near
    the top), those further away drop faster (the tail is cut harder); the order of the
    tokens is kept for curves in [1, 3]. ``-inf`` stays ``-inf``. As webui
    ``QuadraticSamplingLogitsWarper`` (modules/sampler_hijack.py), except that the max
    is taken per row (webui takes one max over the whole batch). f = 0 is off (webui
    adds the warper only for f > 0; the formula itself would make every token equal).

    Args:
        smoothing_factor: >= 0 (0 = off).
        smoothing_curve: finite (1 = purely quadratic).

    Raises:
        ValueError: if ``smoothing_factor`` < 0 or either is not finite.
    """

    name = "quadratic"

    def __init__(self, smoothing_factor: float, smoothing_curve: float = 1.0):
        smoothing_factor = check_finite("smoothing_factor", smoothing_factor)
        smoothing_curve = check_finite("smoothing_curve", smoothing_curve)
        if smoothing_factor < 0:
            raise ValueError(f"smoothing_factor must be >= 0 (0 = off), got {smoothing_factor}")
        self.smoothing_factor, self.smoothing_curve = smoothing_factor, smoothing_curve

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.smoothing_factor == 0:
            return scores.clone()
        max_logit = scores.max(dim=-1, keepdim=True).values
        diff = scores - max_logit
        k = (3 - self.smoothing_curve) / 2
        s = (self.smoothing_curve - 1) / 2
        f = self.smoothing_factor
        transformed = -(k * f * diff**2) + (s * f * diff**3) + max_logit
        return torch.where(scores != NEG_INF, transformed, scores)
