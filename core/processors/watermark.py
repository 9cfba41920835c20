"""The green-list watermark and its detector (Kirchenbauer et al. 2023, "A Watermark for
Large Language Models", Algorithm 2; transformers ``WatermarkLogitsProcessor`` and
``WatermarkDetector`` with their defaults: seeding scheme "lefthash", context width 1,
hashing key 15485863).

At each step the previous token seeds a generator (``hash_key * previous``); a permutation
of the vocabulary drawn from it gives the green list, its first ``int(gamma * vocab)``
tokens, whose scores get ``+delta``. A detector that knows the key recounts the green
tokens of a text: with T tokens scored and G green, ``z = (G - gamma T) / sqrt(T gamma (1 - gamma))``
is large for watermarked text (transformers flags z > 3) and near 0 for other text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

WATERMARK_HASH_KEY = 15485863
"""transformers' ``WatermarkLogitsProcessor`` default ``hashing_key`` (the millionth prime)."""


def green_list(previous: int, vocab_size: int, gamma: float, hash_key: int = WATERMARK_HASH_KEY) -> torch.Tensor:
    """The green token ids (int64, ``int(vocab_size * gamma)``) after token ``previous``:
    the head of ``torch.randperm(vocab_size)`` drawn from a CPU generator seeded with
    ``hash_key * previous`` (transformers ``_get_greenlist_ids``, "lefthash")."""
    rng = torch.Generator(device="cpu")
    rng.manual_seed((hash_key * int(previous)) % (2**64 - 1))
    return torch.randperm(vocab_size, generator=rng)[: int(vocab_size * gamma)]


class Watermark:
    """Add ``delta`` to the green list's scores, the list seeded by each row's last token.

    Args:
        gamma: the green list's share of the vocabulary, in (0, 1) (transformers
            ``greenlist_ratio``, default 0.25).
        delta: the bias added to green scores, > 0 (transformers ``bias``, default 2.0).
        hash_key: the key of the seed (transformers ``hashing_key``).

    The vocabulary size is the scores' last dimension. Green lists are cached per
    previous token (the draw is the expensive part).

    Raises:
        ValueError: gamma outside (0, 1) or delta <= 0.
    """

    name = "watermark"

    def __init__(self, gamma: float, delta: float, hash_key: int = WATERMARK_HASH_KEY):
        if not 0.0 < gamma < 1.0:
            raise ValueError(f"watermark_gamma must be in (0, 1), got {gamma}")
        if not delta > 0:
            raise ValueError(f"watermark_delta must be > 0 (0 = off), got {delta}")
        self.gamma, self.delta, self.hash_key = float(gamma), float(delta), int(hash_key)
        self._green: dict[tuple[int, int], torch.Tensor] = {}

    def green(self, previous: int, vocab_size: int) -> torch.Tensor:
        """The green ids after ``previous`` (cached)."""
        key = (int(previous), vocab_size)
        ids = self._green.get(key)
        if ids is None:
            if len(self._green) > 4096:
                self._green.clear()
            ids = self._green[key] = green_list(previous, vocab_size, self.gamma, self.hash_key)
        return ids

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """``scores`` (batch, vocab) with ``+delta`` on each row's green list (new tensor);
        unchanged when ``input_ids`` is empty (no previous token to seed with)."""
        if input_ids.shape[-1] < 1:
            return scores
        out = scores.clone()
        vocab = scores.shape[-1]
        for b, prev in enumerate(input_ids[:, -1].tolist()):
            ids = self.green(prev, vocab)
            out[b, ids] = out[b, ids] + self.delta
        return out


@dataclass(frozen=True)
class WatermarkScore:
    """What the detector found in a token sequence.

    Attributes:
        z: the z-score ``(green - gamma T) / sqrt(T gamma (1 - gamma))``; nan when T = 0.
        green: G, the tokens in the green list of their previous token.
        scored: T, the tokens scored (each but the first, unless ``previous`` was given).
        gamma: the green share the count was made with.
    """

    z: float
    green: int
    scored: int
    gamma: float

    def to_dict(self) -> dict:
        """For the JSON trace: ``{"z": .., "green": .., "scored": .., "gamma": ..}`` (z None when nan)."""
        return {"z": None if math.isnan(self.z) else round(self.z, 4), "green": self.green,
                "scored": self.scored, "gamma": self.gamma}


def watermark_z_score(
    token_ids: Sequence[int], vocab_size: int, gamma: float, *, previous: int | None = None,
    hash_key: int = WATERMARK_HASH_KEY,
) -> WatermarkScore:
    """The detector's z-score of ``token_ids`` (transformers ``WatermarkDetector``,
    ``ignore_repeated_ngrams=False``): every token is looked up in the green list of the
    token before it.

    Args:
        token_ids: the generated ids, prompt left out.
        vocab_size: the model's vocabulary size (the logits' last dimension).
        gamma: the green share the text was watermarked with, in (0, 1).
        previous: the token before ``token_ids[0]`` (the prompt's last), so the first token
            is scored too; None: it is not (as transformers' detector on the ids alone).
        hash_key: the watermark's key.

    Returns:
        A :class:`WatermarkScore`; ``z`` is nan when nothing could be scored.

    Raises:
        ValueError: gamma outside (0, 1) or vocab_size < 1.
    """
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"watermark_gamma must be in (0, 1), got {gamma}")
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    ids = ([int(previous)] if previous is not None else []) + [int(t) for t in token_ids]
    cache: dict[int, set[int]] = {}
    green = 0
    for prev, tok in zip(ids, ids[1:]):
        if prev not in cache:
            cache[prev] = set(green_list(prev, vocab_size, gamma, hash_key).tolist())
        green += tok in cache[prev]
    scored = max(0, len(ids) - 1)
    z = (green - gamma * scored) / math.sqrt(scored * gamma * (1 - gamma)) if scored else float("nan")
    return WatermarkScore(z=z, green=green, scored=scored, gamma=gamma)


def watermark_note(score: WatermarkScore) -> str:
    """One line for people: "watermark: z = 5.31 (30 of 40 tokens green, γ 0.25; z > 3: watermarked)"."""
    if score.scored == 0:
        return "watermark: too few tokens to score"
    verdict = "watermarked" if score.z > 3.0 else "not detected"
    return (f"watermark: z = {score.z:.2f} ({score.green} of {score.scored} tokens green, γ {score.gamma:g}; "
            f"z > 3 means watermarked: {verdict})")
