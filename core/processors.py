"""Logits processors: small callables ``(input_ids, scores) -> scores``.

Modelled on transformers ``generation/logits_process.py``: each processor checks
its arguments in ``__init__`` and maps

    input_ids: int64 tensor (batch, seq_len) — every token the decoder has seen,
               forced prompt included;
    scores:    float32 tensor (batch, vocab_size) — logits (or log-probabilities in
               beam search) for the next token;

to new scores of the same shape, never modifying ``scores`` in place. For the same
settings they give the same numbers as transformers' processors and warpers
(``tests/core/test_processors.py`` checks this).

Filtered-out tokens get ``-inf``. ``build_processors`` returns them in the order
transformers' ``generate()`` applies them: repetition penalty, no-repeat-n-gram,
suppress tokens, begin-suppress tokens, then the sampling warpers temperature,
top-k, top-p.
"""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence

import torch

from core.backends.base import DecoderPrompt
from core.options import DecodingOptions

NEG_INF = float("-inf")


class LogitsProcessor(Protocol):
    """``(input_ids (batch, seq) int64, scores (batch, vocab) float32) -> scores``."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor: ...


class RepetitionPenalty:
    """CTRL repetition penalty (Keskar et al. 2019, "CTRL", eq. 1).

    Every token id present in ``input_ids`` (prompt included, as transformers does for
    encoder-decoder models) gets its score divided by ``penalty`` if positive and
    multiplied by it if negative. ``penalty`` > 1 discourages repeats, < 1 rewards them.

    Raises:
        ValueError: if ``penalty`` <= 0.
    """

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

    def __init__(self, ngram_size: int):
        if not isinstance(ngram_size, int) or ngram_size < 1:
            raise ValueError(f"no-repeat n-gram size must be an int >= 1, got {ngram_size!r}")
        self.n = ngram_size

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        batch, seq_len = input_ids.shape
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


class _TokenMask:
    """A boolean (vocab,) mask of ``token_ids``, built once per vocabulary size/device."""

    def __init__(self, token_ids: Iterable[int], what: str):
        ids = [int(t) for t in token_ids]
        if any(t < 0 for t in ids):
            raise ValueError(f"{what} must be non-negative token ids, got {ids}")
        self.token_ids = tuple(ids)
        self._mask: torch.Tensor | None = None

    def mask(self, scores: torch.Tensor) -> torch.Tensor:
        vocab = scores.shape[-1]
        if self._mask is None or self._mask.shape[0] != vocab or self._mask.device != scores.device:
            mask = torch.zeros(vocab, dtype=torch.bool, device=scores.device)
            ids = [t for t in self.token_ids if t < vocab]  # ids beyond the logits cannot be chosen
            mask[ids] = True
            self._mask = mask
        return self._mask


class SuppressTokens(_TokenMask):
    """Set the scores of ``token_ids`` to ``-inf`` at every step (a hard rule of the model,
    e.g. Whisper's non-speech tokens).

    Raises:
        ValueError: on negative ids.
    """

    def __init__(self, token_ids: Iterable[int]):
        super().__init__(token_ids, "suppress_tokens")

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores.masked_fill(self.mask(scores), NEG_INF)


class BeginSuppressTokens(_TokenMask):
    """Set the scores of ``token_ids`` to ``-inf`` at the first free step only, i.e. when
    ``input_ids`` holds exactly ``begin_index`` tokens (the forced prompt). Whisper uses
    it to forbid an empty transcript (EOS and blank first).

    Raises:
        ValueError: on negative ids or a negative ``begin_index``.
    """

    def __init__(self, token_ids: Iterable[int], begin_index: int):
        super().__init__(token_ids, "begin_suppress_tokens")
        if begin_index < 0:
            raise ValueError(f"begin_index must be >= 0, got {begin_index}")
        self.begin_index = int(begin_index)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[-1] != self.begin_index:
            return scores
        return scores.masked_fill(self.mask(scores), NEG_INF)


HARD_RULES = (SuppressTokens, BeginSuppressTokens)
"""Processor types that are rules of the model, applied to the "raw" distribution too."""


class ProcessorList(list):
    """An ordered list of processors that is itself a processor: calling it applies each
    in turn (transformers' ``LogitsProcessorList``)."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """``scores`` float32 (batch, vocab) after every processor, in order (new tensor)."""
        for processor in self:
            scores = processor(input_ids, scores)
        return scores


def build_processors(options: DecodingOptions, prompt: DecoderPrompt, prompt_len: int) -> ProcessorList:
    """The processors for ``options`` in the order transformers' ``generate()`` applies them.

    Args:
        options: decoding options (validated by the caller).
        prompt: gives the hard rules (suppress / begin-suppress tokens).
        prompt_len: number of forced prompt tokens; the begin-suppress rule fires when
            ``input_ids`` has exactly this length (the first free step).

    Returns:
        ``[RepetitionPenalty?, NoRepeatNGram?, SuppressTokens?, BeginSuppressTokens?,
        Temperature?, TopK?, TopP?]`` — processors that would be no-ops are left out.
        The warpers (temperature, top-k, top-p) apply to sampling only: greedy and beam
        search are deterministic (transformers' ``do_sample=False``, whose
        ``_get_logits_processor`` adds no warper), so their probabilities are never
        touched by a temperature or filter the user set for sampling.
    """
    processors = ProcessorList()
    if options.repetition_penalty != 1.0:
        processors.append(RepetitionPenalty(options.repetition_penalty))
    if options.no_repeat_ngram_size > 0:
        processors.append(NoRepeatNGram(options.no_repeat_ngram_size))
    if prompt.suppress_tokens:
        processors.append(SuppressTokens(prompt.suppress_tokens))
    if prompt.begin_suppress_tokens:
        processors.append(BeginSuppressTokens(prompt.begin_suppress_tokens, prompt_len))
    if options.strategy == "sample":
        if options.temperature != 1.0:
            processors.append(Temperature(options.temperature))
        if options.top_k > 0:
            processors.append(TopK(options.top_k))
        if options.top_p < 1.0:
            processors.append(TopP(options.top_p))
    return processors


def split_hard_rules(processors: Sequence[LogitsProcessor]) -> tuple[ProcessorList, ProcessorList]:
    """Split into (hard rules, the rest), each keeping its order.

    Applying the rules first gives the same scores as the ``generate()`` order: the
    rules only write ``-inf``, which the penalties leave at ``-inf``.
    """
    rules = ProcessorList(p for p in processors if isinstance(p, HARD_RULES))
    rest = ProcessorList(p for p in processors if not isinstance(p, HARD_RULES))
    return rules, rest


def apply_processors(
    processors: Sequence[LogitsProcessor], input_ids: torch.Tensor, scores: torch.Tensor
) -> torch.Tensor:
    """Apply ``processors`` in order; returns new (batch, vocab) scores (same as calling a
    ``ProcessorList`` of them)."""
    return ProcessorList(processors)(input_ids, scores)
