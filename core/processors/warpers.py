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

    name = "temperature"

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

    name = "top_k"

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

    name = "top_p"

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


def _check_min_tokens_to_keep(min_tokens_to_keep: int) -> None:
    """Raise ValueError unless ``min_tokens_to_keep`` is an int >= 1."""
    if not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
        raise ValueError(f"min_tokens_to_keep must be an int >= 1, got {min_tokens_to_keep!r}")


def _categorical(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(probs (batch, n), entropy (batch,))`` of ``softmax(scores)``, float32, in nats.

    Same arithmetic as ``torch.distributions.Categorical(logits=scores)`` (which the
    transformers warpers call), so thresholds derived from it match to the last bit:
    normalise to log-probabilities, softmax them, and clamp ``-inf`` log-probabilities
    to the dtype's minimum so that a ``-inf`` score contributes ``0``, not ``nan``.
    """
    log_probs = scores - scores.logsumexp(dim=-1, keepdim=True)
    probs = log_probs.softmax(dim=-1)
    entropy = -(log_probs.clamp(min=torch.finfo(log_probs.dtype).min) * probs).sum(dim=-1)
    return probs, entropy


class MinP:
    """Min-p filtering (Nguyen et al. 2024, "Turning Up the Heat: Min-p Sampling for
    Creative and Coherent LLM Outputs", arXiv:2407.01082); transformers ``MinPLogitsWarper``.

    A token is removed when its probability is below ``min_p`` times the probability of
    the row's most likely token, so the filter tightens when the model is confident.
    A token exactly at the threshold is kept. The ``min_tokens_to_keep`` most probable
    tokens are never removed; on ties at that rank (probabilities that underflowed to 0
    included) exactly ``min_tokens_to_keep`` are spared, those ``torch.topk`` picks from
    the probabilities, as in transformers.

    Args:
        min_p: in [0, 1]; 0 removes nothing, 1 keeps only the tokens tied with the best.
        min_tokens_to_keep: >= 1.

    Call: ``input_ids`` int64 (batch, seq) (unused), ``scores`` float32 (batch, vocab)
    -> new float32 (batch, vocab) with removed tokens at ``-inf``.

    Raises:
        ValueError: if ``min_p`` is not in [0, 1] or ``min_tokens_to_keep`` < 1.
    """

    name = "min_p"

    def __init__(self, min_p: float, min_tokens_to_keep: int = 1):
        if not 0.0 <= min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1] (0 = off), got {min_p}")
        _check_min_tokens_to_keep(min_tokens_to_keep)
        self.min_p = float(min_p)
        self.min_tokens_to_keep = min_tokens_to_keep

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        probs = scores.softmax(dim=-1)
        # per-row threshold: min_p times the top probability
        threshold = self.min_p * probs.amax(dim=-1, keepdim=True)
        remove = probs < threshold
        # spare the min_tokens_to_keep most probable tokens
        k = min(self.min_tokens_to_keep, probs.shape[-1])
        remove = remove.scatter(1, probs.topk(k, dim=-1).indices, False)
        return scores.masked_fill(remove, NEG_INF)


class TypicalP:
    """Locally typical sampling (Meister et al. 2022, "Locally Typical Sampling", TACL 2023,
    arXiv:2202.00666); transformers ``TypicalLogitsWarper``.

    Tokens are ranked by how close their surprisal ``-log p`` is to the entropy ``H`` of
    the row's distribution (most "typical" first, which may put the most likely token
    last). The smallest prefix of that ranking whose probability reaches ``mass`` is
    kept, together with every token tied with its last one. ``min_tokens_to_keep``
    spares the most *typical* tokens, not the most probable (as in transformers).

    Args:
        mass: in (0, 1) exclusive.
        min_tokens_to_keep: >= 1.

    Call: ``scores`` float32 (batch, vocab) -> new float32 (batch, vocab), removed
    tokens at ``-inf``; tokens already at ``-inf`` are ranked last and stay there.

    Raises:
        ValueError: if ``mass`` is not in (0, 1) or ``min_tokens_to_keep`` < 1.
    """

    name = "typical_p"

    def __init__(self, mass: float, min_tokens_to_keep: int = 1):
        if not 0.0 < mass < 1.0:
            raise ValueError(f"typical_p mass must be in (0, 1), got {mass}")
        _check_min_tokens_to_keep(min_tokens_to_keep)
        self.mass = float(mass)
        self.min_tokens_to_keep = min_tokens_to_keep

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        log_probs = scores.log_softmax(dim=-1)
        probs = log_probs.exp()
        # entropy H per row; nansum skips the 0 * -inf of tokens already at -inf
        entropy = -(log_probs * probs).nansum(dim=-1, keepdim=True)
        # distance of each token's surprisal from H (-inf tokens: +inf, ranked last)
        distance = (-log_probs - entropy).abs()
        sorted_distance, order = distance.sort(dim=-1)
        # probability accumulated in that order (softmax of the reordered scores)
        cumulative = scores.gather(1, order).softmax(dim=-1).cumsum(dim=-1)
        # position of the token at which the mass is reached (clamped to the last one)
        last = (cumulative < self.mass).sum(dim=-1, keepdim=True).clamp(max=scores.shape[-1] - 1)
        # remove every token strictly farther than that one (ties with it are kept)
        remove_sorted = sorted_distance > sorted_distance.gather(1, last)
        remove_sorted[:, : self.min_tokens_to_keep] = False
        remove = remove_sorted.scatter(1, order, remove_sorted)
        return scores.masked_fill(remove, NEG_INF)


class EpsilonCutoff:
    """Epsilon sampling (Hewitt et al. 2022, "Truncation Sampling as Language Model
    Desmoothing", arXiv:2210.15191); transformers ``EpsilonLogitsWarper``.

    Remove every token whose probability is below the fixed ``epsilon``, except tokens
    whose score is at least the ``min_tokens_to_keep``-th best (ties there all kept).

    Args:
        epsilon: in (0, 1) exclusive; the paper suggests 3e-4 to 9e-4.
        min_tokens_to_keep: >= 1.

    Call: ``scores`` float32 (batch, vocab) -> new float32 (batch, vocab), removed
    tokens at ``-inf``.

    Raises:
        ValueError: if ``epsilon`` is not in (0, 1) or ``min_tokens_to_keep`` < 1.
    """

    name = "epsilon_cutoff"

    def __init__(self, epsilon: float, min_tokens_to_keep: int = 1):
        if not 0.0 < epsilon < 1.0:
            raise ValueError(f"epsilon_cutoff must be in (0, 1), got {epsilon}")
        _check_min_tokens_to_keep(min_tokens_to_keep)
        self.epsilon = float(epsilon)
        self.min_tokens_to_keep = min_tokens_to_keep

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        below = scores.softmax(dim=-1) < self.epsilon
        return scores.masked_fill(below & _below_kth_best(scores, self.min_tokens_to_keep), NEG_INF)


class EtaCutoff:
    """Eta sampling (Hewitt et al. 2022, "Truncation Sampling as Language Model
    Desmoothing", arXiv:2210.15191); transformers ``EtaLogitsWarper``.

    Like :class:`EpsilonCutoff` with an entropy-dependent cutoff per row,
    ``eta = min(epsilon, sqrt(epsilon) * exp(-H))`` (``H`` the entropy in nats): a
    flat distribution (high ``H``) gets a lower cutoff and keeps more tokens. Tokens
    scoring at least the ``min_tokens_to_keep``-th best are never removed.

    Args:
        epsilon: in (0, 1) exclusive; the paper suggests 3e-4 to 4e-3.
        min_tokens_to_keep: >= 1.

    Call: ``scores`` float32 (batch, vocab) -> new float32 (batch, vocab), removed
    tokens at ``-inf``.

    Raises:
        ValueError: if ``epsilon`` is not in (0, 1) or ``min_tokens_to_keep`` < 1.
    """

    name = "eta_cutoff"

    def __init__(self, epsilon: float, min_tokens_to_keep: int = 1):
        if not 0.0 < epsilon < 1.0:
            raise ValueError(f"eta_cutoff must be in (0, 1), got {epsilon}")
        _check_min_tokens_to_keep(min_tokens_to_keep)
        self.epsilon = float(epsilon)
        self.min_tokens_to_keep = min_tokens_to_keep

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        _probs, entropy = _categorical(scores)
        # the cutoff is computed in float32 like transformers (epsilon held as a tensor)
        epsilon = torch.tensor(self.epsilon, dtype=scores.dtype, device=scores.device)
        eta = torch.minimum(epsilon, epsilon.sqrt() * (-entropy).exp())[:, None]  # (batch, 1)
        below = scores.softmax(dim=-1) < eta
        return scores.masked_fill(below & _below_kth_best(scores, self.min_tokens_to_keep), NEG_INF)


def _below_kth_best(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Bool (batch, vocab): score strictly below the row's k-th best (k clamped to vocab)."""
    k = min(k, scores.shape[-1])
    return scores < scores.topk(k, dim=-1).values[:, -1:]


class TopH:
    """Top-H sampling ("Top-H Decoding: Adapting the Creativity and Coherence with Bounded
    Entropy in Text Generation", NeurIPS 2025, arXiv:2509.02510); transformers
    ``TopHLogitsWarper``.

    Only the ``top_n`` = 100 best tokens are candidates (all others are removed), and
    their distribution is renormalised. Going down that list in order of probability,
    tokens are kept while the accumulated entropy terms ``-p log p`` stay <= ``tau =
    top_h * H`` (``H`` the entropy of the renormalised top-``top_n`` distribution); the
    best token is always kept. Smaller ``top_h`` keeps fewer tokens. As in transformers,
    a candidate whose renormalised probability is 0 (``-inf`` or underflowed) gives
    ``0 * log 0 = nan`` and is removed together with every candidate after it. There
    is no ``min_tokens_to_keep``.

    Args:
        top_h: in (0, 1].

    Call: ``scores`` float32 (batch, vocab) -> new float32 (batch, vocab), removed
    tokens at ``-inf``.

    Raises:
        ValueError: if ``top_h`` is not in (0, 1].
    """

    name = "top_h"
    top_n = 100  # candidates considered, fixed in transformers

    def __init__(self, top_h: float):
        if not 0.0 < top_h <= 1.0:
            raise ValueError(f"top_h must be in (0, 1], got {top_h}")
        self.top_h = float(top_h)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        # the top_n candidates, best first, and their renormalised distribution
        top_scores, top_ids = scores.topk(min(self.top_n, scores.shape[-1]), dim=-1)
        probs, entropy = _categorical(top_scores)
        tau = (entropy * self.top_h)[:, None]  # (batch, 1)
        # entropy accumulated down the list; keep while within the budget, and always the best
        accumulated = (-probs * probs.log()).cumsum(dim=-1)
        keep_top = accumulated <= tau
        keep_top[:, 0] = True
        keep = torch.zeros_like(scores, dtype=torch.bool).scatter(1, top_ids, keep_top)
        return scores.masked_fill(~keep, NEG_INF)
