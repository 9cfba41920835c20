"""Samplers from llama.cpp, as logits processors.

    TopNSigma           llama.cpp  src/llama-sampling.cpp  llama_sampler_top_n_sigma_apply
    XTC                 llama.cpp  src/llama-sampling.cpp  llama_sample_xtc_apply
    DRY                 llama.cpp  src/llama-sampling.cpp  llama_sampler_dry_apply
    DynamicTemperature  llama.cpp  src/llama-sampling.cpp  llama_sampler_temp_ext_apply

text-generation-webui's (TopA, TailFree, QuadraticSampling) are ``core.processors.webui_samplers``.

Same contract as every processor (``core.processors``): ``input_ids`` int64 (batch,
seq_len), ``scores`` float32 (batch, vocab) -> new float32 (batch, vocab) scores, the
input never modified; filtered tokens get ``-inf``; arguments are checked in
``__init__`` (``ValueError``). Each class names its stage in ``name``.

llama.cpp works on an array of candidates that earlier samplers shrink; here the scores
keep the whole vocabulary and a filtered token is ``-inf``. So where llama.cpp counts
candidates (XTC's ``min_keep``, the maximum entropy log(n) of dynamic temperature) the
count is of the finite scores of the row: the candidates llama.cpp would still hold
after the same filters. Every row of a batch is treated on its own, as a separate
sequence with its own sampler is in llama.cpp.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

NEG_INF = float("-inf")

__all__ = ["DRY", "XTC", "DynamicTemperature", "TopNSigma", "check_finite", "check_min_keep"]


def check_finite(name: str, value: float) -> float:
    """``value`` as a float. Raises ValueError (naming ``name``) for a non-number, a bool, NaN or ±inf."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_min_keep(min_tokens_to_keep: int) -> int:
    """``min_tokens_to_keep`` itself. Raises ValueError unless it is an int >= 1 (not a bool)."""
    if not isinstance(min_tokens_to_keep, int) or isinstance(min_tokens_to_keep, bool) or min_tokens_to_keep < 1:
        raise ValueError(f"min_tokens_to_keep must be an int >= 1, got {min_tokens_to_keep!r}")
    return min_tokens_to_keep


def _generator(seed: int | None) -> torch.Generator:
    generator = torch.Generator()
    if seed is None:
        generator.seed()  # nondeterministic
    else:
        generator.manual_seed(int(seed))
    return generator


class TopNSigma:
    """Top-nσ (Tang et al. 2024, "Top-nσ: Not All Logits Are You Need").

    Keep the tokens whose logit is >= max - n·σ, where max and σ are the maximum and the
    population standard deviation (divided by the count, not count - 1) of the row's
    finite logits; the rest get ``-inf``. The max itself always survives. As llama.cpp
    ``llama_sampler_top_n_sigma_apply`` (src/llama-sampling.cpp): ``-inf`` logits are
    left out of the mean and σ, and n = 0 turns the filter off (llama.cpp: n <= 0).

    Args:
        n: σ multiplier, finite, >= 0 (0 = off).

    Raises:
        ValueError: if ``n`` is negative or not finite.
    """

    name = "top_n_sigma"

    def __init__(self, n: float):
        n = check_finite("top-n-sigma n", n)
        if n < 0:
            raise ValueError(f"top-n-sigma n must be >= 0 (0 = off), got {n}")
        self.n = n

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.n == 0:
            return scores.clone()
        logits = scores.double()
        valid = logits != NEG_INF
        count = valid.sum(dim=-1, keepdim=True).clamp(min=1)
        zeroed = logits.masked_fill(~valid, 0.0)
        mean = zeroed.sum(dim=-1, keepdim=True) / count
        std = (((zeroed - mean) ** 2).masked_fill(~valid, 0.0).sum(dim=-1, keepdim=True) / count).sqrt()
        threshold = logits.max(dim=-1, keepdim=True).values - self.n * std  # (batch, 1)
        return scores.masked_fill(logits < threshold, NEG_INF)


class XTC:
    """Exclude Top Choices (XTC; by p-e-w, first in text-generation-webui).

    With chance ``probability`` per row and step, every token whose probability is
    >= ``threshold`` is removed except the least probable of them, so the choice falls
    to a less obvious but still viable token. Nothing is removed when fewer than two
    tokens reach the threshold, or when fewer than ``min_tokens_to_keep`` finite tokens
    would remain. As llama.cpp ``llama_sample_xtc_apply`` (src/llama-sampling.cpp): the
    coin is uniform in [0, 1) and the step is skipped when it is > ``probability``;
    a threshold > 0.5 is a no-op (at most one token can reach it). Probabilities are the
    softmax of the row's scores.

    The coin comes from the processor's own ``torch.Generator`` (one draw per row per
    call), so the same ``seed`` gives the same exclusions. (webui's ``XTCLogitsWarper``
    draws from Python's global ``random`` once per batch and also backs off when a
    newline or EOS token would be removed; llama.cpp has no such rule and neither has
    this class.)

    Args:
        probability: chance in [0, 1] that XTC acts at a step (0 = off).
        threshold: probability in [0, 1] a token needs to count as a top choice.
        seed: seed of the coin's random stream; None = nondeterministic.
        min_tokens_to_keep: int >= 1.

    Raises:
        ValueError: if ``probability`` or ``threshold`` is outside [0, 1] or
            ``min_tokens_to_keep`` < 1.
    """

    name = "xtc"

    def __init__(self, probability: float, threshold: float, seed: int | None, min_tokens_to_keep: int = 1):
        probability = check_finite("xtc probability", probability)
        threshold = check_finite("xtc threshold", threshold)
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"xtc probability must be in [0, 1] (0 = off), got {probability}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"xtc threshold must be in [0, 1], got {threshold}")
        self.probability = probability
        self.threshold = threshold
        self.min_tokens_to_keep = check_min_keep(min_tokens_to_keep)
        self.generator = _generator(seed)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.probability <= 0.0 or self.threshold > 0.5:
            return scores.clone()
        chance = torch.rand(scores.shape[0], generator=self.generator)  # (batch,)
        acts = chance <= self.probability
        sorted_scores, sorted_idx = torch.sort(scores, dim=-1, descending=True, stable=True)
        probs = sorted_scores.softmax(dim=-1)
        n_finite = (sorted_scores != NEG_INF).sum(dim=-1)  # (batch,)
        # tokens at or above the threshold form a prefix of the sorted row; pos_last is
        # the sorted position of its last (least probable) member
        pos_last = ((probs >= self.threshold) & (sorted_scores != NEG_INF)).sum(dim=-1) - 1  # (batch,)
        acts &= (pos_last > 0) & (n_finite - pos_last >= self.min_tokens_to_keep)
        positions = torch.arange(scores.shape[-1]).expand_as(scores)
        remove_sorted = (positions < pos_last.unsqueeze(-1)) & acts.unsqueeze(-1)
        remove = remove_sorted.scatter(1, sorted_idx, remove_sorted)
        return scores.masked_fill(remove, NEG_INF)


class DRY:
    """DRY, "Don't Repeat Yourself" (by p-e-w, first in text-generation-webui).

    For each earlier position of the context whose preceding tokens repeat the end of
    the context for ``match_len`` >= ``allowed_length`` tokens, the token that followed
    there would extend the repetition; its score is lowered by
    ``multiplier * base ** (match_len - allowed_length)`` (the longest match per token
    counts). A sequence-breaker token stops a match: no repetition reaches back across
    the most recent breaker in the context, and a breaker itself is never penalised.

    As llama.cpp ``llama_sampler_dry_apply`` (src/llama-sampling.cpp): the context is
    the last ``penalty_last_n`` tokens of ``input_ids`` (-1 = all of them; the prompt is
    included, as in the other penalties here); nothing happens when it has no more
    than ``allowed_length`` tokens; match lengths come from a Z-algorithm over the
    reversed context capped at the distance to the most recent breaker; the exponent is
    capped at 88.7228391 / ln(base) (float overflow) when base > 1.000001. Breakers are
    single token ids here (llama.cpp also takes multi-token restart sequences made from
    strings). webui's ``DRYLogitsProcessor`` gives the same penalties except that it
    caps the match length at 50.

    Args:
        multiplier: >= 0 (0 = off).
        base: >= 1.
        allowed_length: int >= 1: the longest repeat that goes unpenalised.
        sequence_breakers: token ids that stop a match.
        penalty_last_n: int, how many recent tokens to search; -1 = all, 0 = off.

    Raises:
        ValueError: for a negative multiplier, base < 1 (llama.cpp silently disables DRY
            then), allowed_length < 1, penalty_last_n < -1, or a breaker that is not a
            non-negative int.
    """

    name = "dry"

    def __init__(
        self,
        multiplier: float,
        base: float,
        allowed_length: int,
        sequence_breakers: Iterable[int] = (),
        penalty_last_n: int = -1,
    ):
        multiplier = check_finite("dry multiplier", multiplier)
        base = check_finite("dry base", base)
        if multiplier < 0:
            raise ValueError(f"dry multiplier must be >= 0 (0 = off), got {multiplier}")
        if base < 1:
            raise ValueError(f"dry base must be >= 1, got {base}")
        if not isinstance(allowed_length, int) or isinstance(allowed_length, bool) or allowed_length < 1:
            raise ValueError(f"dry allowed_length must be an int >= 1, got {allowed_length!r}")
        if not isinstance(penalty_last_n, int) or isinstance(penalty_last_n, bool) or penalty_last_n < -1:
            raise ValueError(f"dry penalty_last_n must be an int >= -1 (-1 = whole context, 0 = off), got {penalty_last_n!r}")
        breakers = frozenset(sequence_breakers)
        for token in breakers:
            if not isinstance(token, int) or isinstance(token, bool) or token < 0:
                raise ValueError(f"dry sequence breakers must be token ids (ints >= 0), got {token!r}")
        self.multiplier, self.base, self.allowed_length = multiplier, base, allowed_length
        self.sequence_breakers = breakers
        self.penalty_last_n = penalty_last_n
        self.max_exponent = int(88.7228391 / math.log(base)) if base > 1.000001 else 0

    def repeat_lengths(self, context: list[int]) -> dict[int, int]:
        """For one row's context (token ids, oldest first): each token that would extend
        a repeat of >= ``allowed_length`` tokens, mapped to the longest such repeat."""
        n = len(context)
        if n <= self.allowed_length:
            return {}
        rep_limit = n  # no match reaches back across the most recent sequence breaker
        for i in range(n):
            if context[n - 1 - i] in self.sequence_breakers:
                rep_limit = i
                break
        if rep_limit < self.allowed_length:
            return {}
        rev = context[::-1]
        z = [0] * n  # z[k]: how many tokens ending k before the last one repeat the end
        left = right = 0
        for k in range(1, n):
            if k < right:
                z[k] = min(right - k, z[k - left])
            while k + z[k] < n and rev[z[k]] == rev[k + z[k]]:
                z[k] += 1
            if k + z[k] > right:
                left, right = k, k + z[k]
        longest: dict[int, int] = {}
        for k in range(1, n):
            length = min(z[k], rep_limit)
            if length >= self.allowed_length:
                token = context[n - k]  # the token that followed the repeat
                if longest.get(token, -1) < length:
                    longest[token] = length
        return longest

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        out = scores.clone()
        if self.multiplier == 0.0 or self.penalty_last_n == 0:
            return out
        rows = input_ids if self.penalty_last_n < 0 else input_ids[:, -self.penalty_last_n :]
        vocab = scores.shape[-1]
        for b, context in enumerate(rows.tolist()):
            for token, length in self.repeat_lengths(context).items():
                if token in self.sequence_breakers or token >= vocab:
                    continue
                exponent = length - self.allowed_length
                if self.max_exponent > 0:
                    exponent = min(exponent, self.max_exponent)
                out[b, token] -= self.multiplier * self.base**exponent
        return out


class DynamicTemperature:
    """Dynamic temperature ("entropy-based temperature", by kalomaze).

    Per row, divide the scores by

        T = T_min + (T_max - T_min) * (H / log n) ** exponent,

    with T_min = max(0, temperature - range), T_max = temperature + range, H the entropy
    (nats) of softmax(scores) and n the number of finite scores: a confident
    distribution gets a low temperature, a flat one a high one. As llama.cpp
    ``llama_sampler_temp_ext_apply`` (src/llama-sampling.cpp): range 0 is plain division
    by ``temperature``; a row with at most one finite score is left as it is; when T
    comes out <= 0 (H = 0 with T_min = 0) only the row's highest score is kept (the
    first one on ties), the rest get ``-inf``, as ``llama_sampler_temp_impl`` does.
    Computed in float64. (webui's ``DynamicTemperatureLogitsWarper`` takes T_min/T_max
    directly and sums the entropy over the whole batch.)

    Args:
        temperature: the centre temperature, > 0.
        range: >= 0 (0 = plain temperature).
        exponent: >= 0.

    Raises:
        ValueError: if temperature <= 0, range < 0, exponent < 0, or any is not finite.
    """

    name = "dynatemp"

    def __init__(self, temperature: float, range: float, exponent: float):
        temperature = check_finite("dynatemp temperature", temperature)
        range = check_finite("dynatemp range", range)
        exponent = check_finite("dynatemp exponent", exponent)
        if temperature <= 0:
            raise ValueError(f"dynatemp temperature must be > 0, got {temperature}; use strategy 'greedy' for argmax")
        if range < 0:
            raise ValueError(f"dynatemp range must be >= 0 (0 = plain temperature), got {range}")
        if exponent < 0:
            raise ValueError(f"dynatemp exponent must be >= 0, got {exponent}")
        self.temperature, self.range, self.exponent = temperature, range, exponent

    def temperatures(self, scores: torch.Tensor) -> torch.Tensor:
        """float64 (batch,): the temperature each row of ``scores`` (batch, vocab) gets
        (NaN for a row with at most one finite score, which is left unchanged)."""
        logits = scores.double()
        if self.range == 0:
            return torch.full((scores.shape[0],), self.temperature, dtype=torch.float64)
        t_min = max(0.0, self.temperature - self.range)
        t_max = self.temperature + self.range
        n = (logits != NEG_INF).sum(dim=-1)
        entropy = torch.special.entr(logits.softmax(dim=-1)).sum(dim=-1)
        normalized = entropy / n.clamp(min=2).double().log()
        temps = t_min + (t_max - t_min) * normalized**self.exponent
        return temps.masked_fill(n <= 1, float("nan"))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        temps = self.temperatures(scores)
        out = scores.clone()
        for b, temp in enumerate(temps.tolist()):
            if math.isnan(temp):
                continue
            if temp <= 0:
                keep = int(torch.argmax(scores[b]))
                out[b] = NEG_INF
                out[b, keep] = scores[b, keep]
            else:
                out[b] = (scores[b].double() / temp).float()
        return out
