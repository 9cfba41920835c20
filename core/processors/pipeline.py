"""The processor list: ``ProcessorList``, ``build_processors`` and friends (re-exported,
lazily, by ``core.processors``).

Logits processors: small callables ``(input_ids, scores) -> scores``.

Modelled on transformers ``generation/logits_process.py``: each processor checks
its arguments in ``__init__`` and maps

    input_ids: int64 tensor (batch, seq_len) — every token the decoder has seen,
               forced prompt included;
    scores:    float32 tensor (batch, vocab_size) — logits (or log-probabilities in
               beam search) for the next token;

to new scores of the same shape, never modifying ``scores`` in place. For the same
settings they give the same numbers as transformers' processors and warpers
(``tests/core/test_processors.py`` checks this).

Filtered-out tokens get ``-inf``. ``build_processors`` returns the model's hard rules,
then the sampler chain in the user's order (``core.processors.chain``; the default
order is transformers' ``generate()`` order). The processors live by kind in
``rules.py``, ``penalties.py``, ``constraints.py``, ``warpers.py`` and
``llama_samplers.py``; each has a ``name``: its stage in the chain.
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
from core.processors.chain import ChainContext, chain_stages, rules_for

__all__ = ["NEG_INF", "NoRepeatNGram", "RepetitionPenalty", "SuppressTokens", "BeginSuppressTokens",
           "Temperature", "TopK", "TopP", "ProcessorList", "build_processors", "split_hard_rules",
           "ChainContext", "chain_stages"]


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

    @property
    def needs_lens(self) -> bool:
        """Whether a processor reads the step's logit lens (contrastive decoding with an early
        layer): the engine then asks the backend for it (``see_step`` hands it over)."""
        return any(getattr(p, "needs_lens", False) for p in self)

    def see_step(self, out) -> None:
        """Hand the step's ``StepOutput`` to the processors that read more than the scores
        (``see_step(out)``: contrastive decoding's layer amateur reads ``out.lens_logits``);
        call it before applying the list to that step."""
        for processor in self:
            see = getattr(processor, "see_step", None)
            if see is not None:
                see(out)

    def extras(self) -> dict[str, list[tuple[torch.Tensor, str]]]:
        """What the processors that report more than their scores said at their last call
        (``stage_extras()``: contrastive decoding's amateur): {stage name: per row (the
        amateur's scores float32 (vocab,), a one-line note)}; {} when none does."""
        out = {}
        for processor in self:
            report = getattr(processor, "stage_extras", None)
            rows = report() if report is not None else None
            if rows:
                out[stage_name(processor)] = rows
        return out

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


def build_processors(
    options: DecodingOptions, prompt: DecoderPrompt, prompt_len: int, context: ChainContext | None = None
) -> ProcessorList:
    """The model's hard rules, then the sampler chain (``core.processors.chain``).

    Args:
        options: decoding options (validated by the caller).
        prompt: gives the hard rules (suppress / begin-suppress tokens) and the EOS id.
        prompt_len: number of forced prompt tokens; the begin-suppress rule fires when
            ``input_ids`` has exactly this length (the first free step).
        context: the tokenizer and source ids some stages need.

    Returns:
        The hard rules followed by the chain's processors in ``options.sampler_order``;
        stages that are off or do not apply to the strategy are left out. The warpers
        (temperature and every filter) apply to sampling only: greedy and beam search
        are deterministic (transformers' ``do_sample=False`` adds no warper), so their
        probabilities are never touched by a temperature the user set for sampling.
        With the default order and the hard rules placed where transformers puts them,
        the scores are the same (the rules only write -inf, which every stage keeps).

    Raises:
        ValueError: a stage that cannot apply here (see ``chain_stages``).
    """
    processors = ProcessorList(rules_for(prompt, prompt_len))
    processors.extend(p for _, p in chain_stages(options, prompt, prompt_len, context))
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
