"""Penalties that reshape the scores of tokens already seen: repetition penalty,
no-repeat n-gram (transformers ``RepetitionPenaltyLogitsProcessor``,
``NoRepeatNGramLogitsProcessor``). Shapes: see ``core.processors``."""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


class RepetitionPenalty:
    """CTRL repetition penalty (Keskar et al. 2019, "CTRL", eq. 1).

    Every token id present in ``input_ids`` (prompt included, as transformers does for
    encoder-decoder models) gets its score divided by ``penalty`` if positive and
    multiplied by it if negative. ``penalty`` > 1 discourages repeats, < 1 rewards them.

    Raises:
        ValueError: if ``penalty`` <= 0.
    """

    name = "repetition_penalty"

    def __init__(self, penalty: float):
        if not penalty > 0:
            raise ValueError(f"repetition penalty must be > 0 (1 = off), got {penalty}")
        self.penalty = float(penalty)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        score = torch.gather(scores, 1, input_ids)
        score = torch.where(score < 0, score * self.penalty, score / self.penalty)
        return scores.scatter(1, input_ids, score)


class NoRepeatNGram:
    """Forbid any n-gram of size ``ngram_size`` from occurring twice (Paulus et al. 2017).

    If the last ``n - 1`` tokens of a row already occurred followed by token ``t``,
    ``t`` gets ``-inf``. The whole ``input_ids`` row (prompt included) is searched,
    as in transformers' ``NoRepeatNGramLogitsProcessor``.

    Raises:
        ValueError: if ``ngram_size`` < 1.
    """

    name = "no_repeat_ngram"

    def __init__(self, ngram_size: int):
        if not isinstance(ngram_size, int) or ngram_size < 1:
            raise ValueError(f"no-repeat n-gram size must be an int >= 1, got {ngram_size!r}")
        self.n = ngram_size

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        _batch, seq_len = input_ids.shape
        if seq_len + 1 < self.n:  # not even one full n-gram can end at the next position
            return scores
        banned = torch.zeros_like(scores, dtype=torch.bool)
        rows = input_ids.tolist()
        for b, tokens in enumerate(rows):
            prefix = tokens[seq_len - self.n + 1 :] if self.n > 1 else []
            # every earlier window whose first n-1 tokens equal the current prefix bans its last token
            for start in range(seq_len - self.n + 1):
                if tokens[start : start + self.n - 1] == prefix:
                    banned[b, tokens[start + self.n - 1]] = True
        return scores.masked_fill(banned, NEG_INF)
