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

from collections.abc import Sequence
from typing import Protocol

import torch

from core.backends.base import DecoderPrompt
from core.options import DecodingOptions

from core.processors.penalties import NoRepeatNGram, RepetitionPenalty
from core.processors.rules import HARD_RULES, BeginSuppressTokens, SuppressTokens
from core.processors.warpers import NEG_INF, Temperature, TopK, TopP

__all__ = ["NEG_INF", "NoRepeatNGram", "RepetitionPenalty", "SuppressTokens", "BeginSuppressTokens",
           "Temperature", "TopK", "TopP", "ProcessorList", "build_processors", "split_hard_rules"]


class LogitsProcessor(Protocol):
    """``(input_ids (batch, seq) int64, scores (batch, vocab) float32) -> scores``."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor: ...


class ProcessorList(list):
    """An ordered list of processors that is itself a processor: calling it applies each
    in turn (transformers' ``LogitsProcessorList``)."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """``scores`` float32 (batch, vocab) after every processor, in order (new tensor)."""
        for processor in self:
            scores = processor(input_ids, scores)
        return scores

    def trace(
        self, input_ids: torch.Tensor, scores: torch.Tensor
    ) -> tuple[torch.Tensor, list[tuple[str, torch.Tensor]]]:
        """Apply every processor in turn and keep each one's output.

        Returns:
            (final scores float32 (batch, vocab), [(stage name, scores after that stage)]).
            The stage name is the processor's ``name`` attribute (its class name if none).
        """
        stages = []
        for processor in self:
            scores = processor(input_ids, scores)
            stages.append((stage_name(processor), scores))
        return scores, stages


def stage_name(processor: LogitsProcessor) -> str:
    """The name a processor's stage is reported under ("top_k", "repetition_penalty", ...)."""
    return getattr(processor, "name", type(processor).__name__)


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
