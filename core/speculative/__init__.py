"""Speculative decoding (Leviathan et al. 2023, "Fast Inference from Transformers via
Speculative Decoding", Algorithm 1; Chen et al. 2023): a cheap draft proposes ``gamma``
tokens, the target scores them all in one decoder call and keeps the longest prefix it
agrees with, then adds one token of its own. Reference implementation:
romsto/Speculative-Decoding ``sampling/codec_speculative_decoding.py``.

The pieces (contract shared by the loop, the drafts, the tasks and the window):

- ``core.speculative.draft``: the ``Draft`` protocol every draft kind implements and the
  ``Companion`` protocol of a second model decoding the same input (a draft model, or
  contrastive decoding's amateur).
- the loop, the acceptance rule and the drafts themselves live beside it in this package.

The events are in ``core.events``: ``StepEvent.speculation`` / ``spec_round`` per token,
``SpeculationRound`` per round, ``SpeculationSummary`` in ``RunStats.speculative``.
"""
