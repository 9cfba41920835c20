"""The strategy role: the ``Strategy`` protocol and what it hands the engine (``Update``
per step, ``Result`` at the end). Every strategy module imports these from here; the
package (``core.strategies``) re-exports them with ``make_strategy``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch

from core.events import BeamNode
from core.report import TokenRecord


@dataclass
class Update:
    """What a strategy decided at one step.

    Attributes:
        input_ids: int64 (batch, seq_len): every token of every live hypothesis, prompt
            included; the engine feeds ``input_ids[:, -1:]`` next.
        emitted: the token a single-hypothesis strategy emitted now (None at EOS).
        beams: beam search's (running, finished) hypotheses after this step, each a list
            of (generated ids without EOS, cumulative log-probability), best first.
        beam_idx: int64 (batch,): reorder the KV cache rows by this, or None.
        done: no more decoder steps are needed.
        nodes: beam search's new beam-tree nodes of this step, plus re-sent nodes whose
            status changed (``core.events.BeamNode``; ``text`` is filled in and ``step``
            offset by the reporter: here ``step`` is the local step, ``text`` "").
        best_node: id of the node that is the output if the search ended now.
    """

    input_ids: torch.Tensor
    emitted: TokenRecord | None = None
    beams: tuple[list[tuple[list[int], float]], list[tuple[list[int], float]]] | None = None
    beam_idx: torch.Tensor | None = None
    done: bool = False
    nodes: list[BeamNode] | None = None
    best_node: int | None = None


@dataclass
class Result:
    """The chosen hypothesis: generated ids (no prompt, no EOS), why it ended
    ("eos" | "max_tokens"), and the records of tokens not yet reported as StepEvents
    (beam search reports its best hypothesis only at the end)."""

    token_ids: list[int]
    reason: str
    records: list[TokenRecord] = field(default_factory=list)


class Strategy(Protocol):
    """A token-selection strategy (greedy, sampling, beam search).

    Attributes:
        batch_size: hypotheses decoded side by side (rows of the KV cache).
        uses_log_probs: the processors see log-probabilities (log_softmax of the logits,
            as transformers' beam search) instead of the logits.
    """

    batch_size: int
    uses_log_probs: bool

    def start(self, prompt_ids: Sequence[int], eos_token_id: int, max_new_tokens: int) -> torch.Tensor:
        """The initial input_ids, int64 (batch_size, prompt_len)."""
        ...

    def update(
        self,
        input_ids: torch.Tensor,
        scores: torch.Tensor,
        probs: torch.Tensor,
        raw_probs: torch.Tensor,
        hidden_states: torch.Tensor | None = None,
    ) -> Update:
        """Choose the next tokens. ``scores`` float32 (batch, vocab): the processed scores;
        ``probs``/``raw_probs``: softmax of the processed / raw scores (to record them);
        ``hidden_states``: the decoder's last-layer output for the positions just fed,
        float32 (batch, new_len, d_model), or None if the backend gives none (contrastive
        search needs it).

        A ``TokenRecord``'s ``step`` names the engine step whose distribution the token
        was chosen from: the current step (greedy, sampling), the previous one
        (contrastive search looks one step ahead), or any (beam search, at the end)."""
        ...

    def finalize(self) -> Result:
        """The final hypothesis after the last ``update`` (or after a cancel)."""
        ...
