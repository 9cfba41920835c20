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

Speculative decoding (``"speculative"``) is not a per-step strategy: a round scores several
positions in one decoder call, so ``Engine.run`` hands the whole run to
``core.speculative.loop`` (the acceptance rule of Leviathan et al. 2023 is
``core.speculative.rule``).

Each strategy takes only its own parameters (``GreedySearch()``, ``Sampling(seed)``,
``BeamSearch(num_beams, length_penalty)``, ``DiverseBeamSearch(...)``,
``ContrastiveSearch(top_k, penalty_alpha)``, ``Mirostat(tau, eta, seed)``) and sees tensors
only, never a model (DESIGN.md layering).
"""

from __future__ import annotations

from core.options import DecodingOptions
from core.strategies.base import Result, Strategy, Update

__all__ = ["Result", "Strategy", "Update", "make_strategy"]


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
    if name == "speculative":
        raise ValueError("speculative decoding is a run of its own (Engine.run dispatches it to "
                         "core.speculative.loop), not a per-step strategy; call Engine.run")
    raise ValueError(f"unknown strategy {name!r}; use one of greedy, sample, beam, diverse_beam, contrastive, mirostat, "
                     "speculative")
