"""Greedy search: take the most probable token at every step.

Readability bar: karpathy/nanoGPT ``model.py::generate``. Matches transformers'
``generate(do_sample=False, num_beams=1)`` token for token: argmax of the processed
scores (ties go to the lowest id, as ``torch.argmax`` does).
"""

from __future__ import annotations

from typing import Sequence

import torch

from core.strategies import Result, StepContext, Update


class SingleHypothesis:
    """One hypothesis, one token per step; subclasses define ``choose``."""

    batch_size = 1

    def __init__(self, ctx: StepContext):
        self.ctx = ctx
        self.tokens: list[int] = []
        self.reason = "max_tokens"

    def start(self, prompt_ids: Sequence[int]) -> torch.Tensor:
        return torch.tensor([list(prompt_ids)], dtype=torch.long)

    def choose(self, scores: torch.Tensor, probs: torch.Tensor) -> int:
        """The next token id from the processed scores/probabilities, both (vocab,)."""
        raise NotImplementedError

    def update(self, input_ids, logits, cross_attention) -> Update:
        ctx = self.ctx
        # hard rules only (suppressed tokens) -> the "raw" distribution
        raw_scores = ctx.apply(ctx.rules, input_ids, logits)
        # penalties and warpers -> the processed distribution we choose from
        scores = ctx.apply(ctx.processors, input_ids, raw_scores)[0]
        raw_probs = torch.softmax(raw_scores[0], dim=-1)
        probs = torch.softmax(scores, dim=-1) if ctx.processors else raw_probs
        token = self.choose(scores, probs)
        if token == ctx.eos_token_id:  # EOS ends the run; it is not reported as a token
            self.reason = "eos"
            return Update(input_ids, done=True)
        event = ctx.step_event(
            len(self.tokens), token, probs, raw_probs, ctx.attention_row(cross_attention, 0)
        )
        self.tokens.append(token)
        next_ids = torch.cat([input_ids, input_ids.new_tensor([[token]])], dim=1)
        return Update(next_ids, [event], done=len(self.tokens) >= ctx.max_new_tokens)

    def finalize(self) -> Result:
        return Result(list(self.tokens), self.reason)


class GreedySearch(SingleHypothesis):
    """Argmax of the processed scores."""

    def choose(self, scores: torch.Tensor, probs: torch.Tensor) -> int:
        return int(torch.argmax(scores))
