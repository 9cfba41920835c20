"""Decoding strategies: how the next token is chosen, and the hypotheses kept.

Modelled on openai/whisper ``whisper/decoding.py`` (``TokenDecoder.update/finalize``):
a strategy owns the hypotheses; the engine owns the model calls, applies the logits
processors and reports what happened (``core.report.StepReporter``). Per step the engine
hands the strategy the processed scores and gets back an ``Update``: the tokens each
hypothesis has now, the token emitted (greedy, sampling) or the live beams, an optional
reordering of the KV cache, and whether decoding is finished.

    Strategy.start(prompt_ids, eos_token_id, max_new_tokens) -> input_ids (batch, prompt_len)
    Strategy.update(input_ids, scores, probs, raw_probs)      -> Update
    Strategy.finalize()                                       -> Result

Each strategy takes only its own parameters (``GreedySearch()``, ``Sampling(seed)``,
``BeamSearch(num_beams, length_penalty)``, ``DiverseBeamSearch(...)``,
``ContrastiveSearch(top_k, penalty_alpha)``, ``Mirostat(tau, eta, seed)``) and sees tensors
only, never a model (DESIGN.md layering).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch

from core.events import BeamNode
from core.options import DecodingOptions
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


def make_strategy(options: DecodingOptions) -> Strategy:
    """The strategy object for ``options.strategy``, given only its own parameters.

    ``"beam"`` with ``num_beams == 1`` is greedy search, as in transformers' ``generate()``.

    Raises:
        ValueError: for an unknown strategy name or parameters the strategy rejects.
    """
    name = options.strategy
    if name == "greedy" or (name == "beam" and options.num_beams == 1):
        from core.strategies.greedy import GreedySearch

        return GreedySearch()
    if name == "sample":
        from core.strategies.sampling import Sampling

        return Sampling(options.seed)
    if name == "beam":
        from core.strategies.beam import BeamSearch

        return BeamSearch(options.num_beams, options.length_penalty)
    if name == "diverse_beam":
        from core.strategies.diverse_beam import DiverseBeamSearch

        return DiverseBeamSearch(
            options.num_beams, options.num_beam_groups, options.diversity_penalty, options.length_penalty
        )
    if name == "contrastive":
        from core.strategies.contrastive import ContrastiveSearch

        return ContrastiveSearch(options.top_k, options.penalty_alpha)
    if name == "mirostat":
        from core.strategies.mirostat import Mirostat

        return Mirostat(options.mirostat_tau, options.mirostat_eta, options.seed)
    raise ValueError(f"unknown strategy {name!r}; use one of greedy, sample, beam, diverse_beam, contrastive, mirostat")
