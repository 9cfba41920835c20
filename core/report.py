"""What the views see of one decoder step: the StepReporter.

The engine and beam search's finalize share this one object. It turns a step's
distributions into plain-data events (``core.events``): the token's display text, its
probability under the processed and the raw distribution, the top-k of both, the
entropy of the processed distribution and the cross-attention row, and it numbers the
steps of a segmented input (``step_offset``, ``segment``, ``source_offset``).

    raw distribution       softmax of the logits with only the hard rules applied
                           (suppressed tokens), temperature 1, no filter;
    processed distribution softmax of the scores the strategy chose from (after the
                           penalties and, when sampling, temperature / top-k / top-p).

Nothing here chooses a token or touches a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from core.events import BeamEvent, Hypothesis, StepEvent, TokenProb


def entropy_nats(probs: torch.Tensor) -> float:
    """Shannon entropy -sum p log p of a (vocab,) distribution, nats (0 log 0 = 0)."""
    return float(torch.special.entr(probs).sum())


@dataclass(frozen=True)
class RowReport:
    """The report of one hypothesis row at one step, kept until its token is known
    (beam search emits its StepEvents when the search ends).

    Attributes:
        topk: the processed distribution's most probable tokens (probability > 0).
        raw_topk: the raw distribution's most probable tokens.
        entropy: of the processed distribution, nats.
        attention: float32 (layers, heads, source_len) or None.
    """

    topk: list[TokenProb]
    raw_topk: list[TokenProb]
    entropy: float
    attention: np.ndarray | None


@dataclass(frozen=True)
class TokenRecord:
    """One token a hypothesis emitted: enough to build its StepEvent later.

    Attributes:
        step: local step index (0 = the first free step of this segment).
        row: the hypothesis row (beam) it was chosen from at that step.
        token_id: the token.
        prob, raw_prob: its processed and raw probabilities (0..1).
        mu: a stateful sampler's state when the token was chosen (mirostat's target
            surprise mu, bits), or None.
    """

    step: int
    row: int
    token_id: int
    prob: float
    raw_prob: float
    mu: float | None = None


class StepReporter:
    """Builds StepEvents and BeamEvents for one ``Engine.run``.

    Args:
        token_text: id -> display text (e.g. " fox").
        decode: ids -> text (special tokens skipped), for beam hypotheses.
        top_k_report: how many tokens each top-k list holds (>= 1).
        capture_attention: whether events carry the cross-attention row.
        source_len: attention columns kept (the leading real encoder positions).
        step_offset, segment, source_offset: copied into the events (segmented inputs).
    """

    def __init__(
        self,
        token_text: Callable[[int], str],
        decode: Callable[[Sequence[int]], str],
        *,
        top_k_report: int,
        capture_attention: bool,
        source_len: int,
        step_offset: int = 0,
        segment: int = 0,
        source_offset: int = 0,
    ):
        self.token_text = token_text
        self.decode = decode
        self.top_k_report = top_k_report
        self.capture_attention = capture_attention
        self.source_len = source_len
        self.step_offset = step_offset
        self.segment = segment
        self.source_offset = source_offset

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
        """float32 numpy (layers, heads, source_len) of hypothesis ``row``, or None."""
        if cross_attention is None or not self.capture_attention:
            return None
        return cross_attention[row, :, :, : self.source_len].float().numpy().copy()

    def row_report(
        self, probs: torch.Tensor, raw_probs: torch.Tensor, cross_attention: torch.Tensor | None, row: int
    ) -> RowReport:
        """The report of hypothesis ``row``; ``probs``/``raw_probs`` float32 (batch, vocab)."""
        return RowReport(
            topk=self.top_k(probs[row]),
            raw_topk=self.top_k(raw_probs[row]),
            entropy=entropy_nats(probs[row]),
            attention=self.attention_row(cross_attention, row),
        )

    def step_event(self, record: TokenRecord, report: RowReport) -> StepEvent:
        """The StepEvent of one emitted token."""
        return StepEvent(
            step=self.step_offset + record.step,
            token_id=int(record.token_id),
            text=self.token_text(int(record.token_id)),
            prob=float(record.prob),
            raw_prob=float(record.raw_prob),
            topk=report.topk,
            raw_topk=report.raw_topk,
            entropy=report.entropy,
            cross_attention=report.attention,
            segment=self.segment,
            source_offset=self.source_offset,
        )

    def beam_event(
        self,
        step: int,
        running: Sequence[tuple[Sequence[int], float]],
        finished: Sequence[tuple[Sequence[int], float]],
    ) -> BeamEvent:
        """The live beams after step ``step``: (generated ids without EOS, cumulative
        log-probability) of the running hypotheses, best first, and of the finished ones."""
        def hyp(ids: Sequence[int], score: float, done: bool) -> Hypothesis:
            return Hypothesis(list(ids), self.decode(list(ids)), float(score), done)

        return BeamEvent(
            step=self.step_offset + step,
            beams=[hyp(ids, s, False) for ids, s in running],
            finished=[hyp(ids, s, True) for ids, s in finished],
            segment=self.segment,
        )
