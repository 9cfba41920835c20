"""Decoding strategies: the roles the engine loop drives.

Modelled on openai/whisper ``whisper/decoding.py`` (``TokenDecoder.update/finalize``):
a strategy owns the hypotheses; the engine owns the model calls. Per step the engine
hands the strategy the decoder's logits and gets back an ``Update`` (the tokens each
hypothesis has now, events to yield, an optional beam reordering of the KV cache, and
whether decoding is finished).

    Strategy.start(prompt_ids)                  -> input_ids (batch, prompt_len)
    Strategy.update(input_ids, logits, attn)    -> Update
    Strategy.finalize()                         -> Result

Strategies see logits and tensors only, never a model (DESIGN.md layering).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np
import torch

from core.events import Event, StepEvent, TokenProb


@dataclass
class Update:
    """What a strategy decided at one step.

    Attributes:
        input_ids: int64 (batch, seq_len): every token of every live hypothesis, prompt
            included; the engine feeds ``input_ids[:, -1:]`` next.
        events: events to yield now (StepEvent for greedy/sampling, BeamEvent for beams).
        beam_idx: int64 (batch,) — reorder the KV cache rows by this, or None.
        done: no more decoder steps are needed.
    """

    input_ids: torch.Tensor
    events: list[Event] = field(default_factory=list)
    beam_idx: torch.Tensor | None = None
    done: bool = False


@dataclass
class Result:
    """The chosen hypothesis: generated ids (no prompt, no EOS), why it ended
    ("eos" | "max_tokens") and events to yield before ``Finished``."""

    token_ids: list[int]
    reason: str
    events: list[Event] = field(default_factory=list)


class Strategy(Protocol):
    """A token-selection strategy (greedy, sampling, beam search)."""

    batch_size: int

    def start(self, prompt_ids: Sequence[int]) -> torch.Tensor:
        """The initial input_ids, int64 (batch_size, prompt_len)."""
        ...

    def update(
        self, input_ids: torch.Tensor, logits: torch.Tensor, cross_attention: torch.Tensor | None
    ) -> Update:
        """Choose the next tokens from ``logits`` float32 (batch, vocab); ``cross_attention``
        float32 (batch, layers, heads, src_total) or None."""
        ...

    def finalize(self) -> Result:
        """The final hypothesis after the last ``update`` (or after a cancel)."""
        ...


@dataclass
class StepContext:
    """Everything a strategy needs besides logits.

    Attributes:
        rules: hard-rule processors (suppress tokens), applied to the raw distribution too.
        processors: the other processors (penalties, warpers), applied after ``rules``.
        token_text: id -> display text; decode: ids -> text (special tokens skipped).
        eos_token_id, max_new_tokens, top_k_report: as in the prompt/options.
        step_offset, segment, source_offset: copied into events.
        source_len: attention columns reported (leading real encoder positions).
        seed: sampling seed (None = nondeterministic).
    """

    rules: list
    processors: list
    token_text: Any
    decode: Any
    eos_token_id: int
    max_new_tokens: int
    top_k_report: int
    capture_attention: bool
    source_len: int
    step_offset: int = 0
    segment: int = 0
    source_offset: int = 0
    seed: int | None = 0
    num_beams: int = 1
    length_penalty: float = 1.0

    def apply(self, processors: list, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        for p in processors:
            scores = p(input_ids, scores)
        return scores

    def top_k(self, probs: torch.Tensor) -> list[TokenProb]:
        """The ``top_k_report`` most probable tokens of one (vocab,) distribution.

        Tokens with probability 0 (removed by a filter or a hard rule) are left out, so a
        filter that keeps one token reports one entry, not arbitrary zero-probability ids.
        """
        values, ids = torch.topk(probs, min(self.top_k_report, probs.shape[-1]))
        return [
            TokenProb(i, self.token_text(i), p) for i, p in zip(ids.tolist(), values.tolist()) if p > 0.0
        ]

    def attention_row(self, cross_attention: torch.Tensor | None, row: int) -> np.ndarray | None:
        """float32 numpy (layers, heads, source_len) for hypothesis ``row``, or None."""
        if cross_attention is None or not self.capture_attention:
            return None
        return cross_attention[row, :, :, : self.source_len].float().numpy().copy()

    def step_event(
        self,
        step: int,
        token_id: int,
        probs: torch.Tensor,
        raw_probs: torch.Tensor,
        attention: np.ndarray | None,
        topk: list[TokenProb] | None = None,
        raw_topk: list[TokenProb] | None = None,
        entropy: float | None = None,
    ) -> StepEvent:
        """A StepEvent for one chosen token; ``probs``/``raw_probs`` are (vocab,) rows."""
        if entropy is None:
            entropy = entropy_nats(probs)
        return StepEvent(
            step=self.step_offset + step,
            token_id=int(token_id),
            text=self.token_text(int(token_id)),
            prob=float(probs[token_id]),
            raw_prob=float(raw_probs[token_id]),
            topk=topk if topk is not None else self.top_k(probs),
            raw_topk=raw_topk if raw_topk is not None else self.top_k(raw_probs),
            entropy=entropy,
            cross_attention=attention,
            segment=self.segment,
            source_offset=self.source_offset,
        )


def entropy_nats(probs: torch.Tensor) -> float:
    """Shannon entropy -sum p log p of a (vocab,) distribution, nats (0 log 0 = 0)."""
    return float(torch.special.entr(probs).sum())


def make_strategy(strategy: str, ctx: StepContext) -> Strategy:
    """The strategy object for ``options.strategy``.

    ``"beam"`` with ``num_beams == 1`` is greedy search, as in transformers' ``generate()``.

    Raises:
        ValueError: for an unknown strategy name.
    """
    from core.strategies.beam import BeamSearch
    from core.strategies.greedy import GreedySearch
    from core.strategies.sampling import Sampling

    if strategy == "greedy" or (strategy == "beam" and ctx.num_beams == 1):
        return GreedySearch(ctx)
    if strategy == "sample":
        return Sampling(ctx)
    if strategy == "beam":
        return BeamSearch(ctx)
    raise ValueError(f"unknown strategy {strategy!r}; use greedy, sample or beam")
