"""Self-speculation by early exit (LayerSkip, Elhoushi et al. 2024): the target's first L
decoder layers, its final norm and its output head draft; the full model verifies.

This is the logit lens of layer L - 1 (``StepOutput.lens_logits``), computed by the
backend's ``step(..., exit_layer=L)`` on a KV cache of its own (the draft runs ahead of the
target, and the layers above L are never filled in it). An optional shortlist head
(``core.speculative.shortlist``) makes a draft step cheaper still.

Whisper was not trained for early exit (measured on espeak speech, whisper-base: layer 5 of 6
agrees with the final token at 38-39% of steps), so on Whisper this draft is for the view,
not for speed.
"""

from __future__ import annotations

from typing import Any

import torch

from core.speculative.companion import ModelCompanion, TokenMap
from core.speculative.model_draft import ModelDraft


def decoder_layers(backend: Any) -> int | None:
    """The number of decoder layers of a bundled backend, or None when it cannot tell."""
    lean = getattr(backend, "_lean", None)
    if lean is not None:
        return len(lean.layers)
    model = getattr(backend, "model", None)
    layers = getattr(model, "layers", None)  # the OCR reader
    if isinstance(layers, torch.nn.ModuleList):
        return len(layers)
    if hasattr(model, "get_decoder"):
        dec = model.get_decoder()
        inner = getattr(dec, "layers", None)
        if inner is not None:
            return len(inner)
    if type(model).__name__ == "MarianTinyModel":
        from core.backends.marian_net import DECODER_LAYERS

        return DECODER_LAYERS
    return None


class EarlyExitDraft(ModelDraft):
    """``core.speculative.draft.Draft``: the target's first ``exit_layer`` decoder layers.

    Args:
        backend: the target's backend (it must take ``step(..., exit_layer=)``).
        encoded: the target's encoder output of the segment (shared, not recomputed).
        exit_layer: L, 1 <= L <= decoder layers (L = all layers drafts with the full model:
            every token accepted, for tests).
        head_ids: an optional shortlist (int64 (k,), ``core.speculative.shortlist``).
        sample, seed, eos_token_id: as ``ModelDraft``.

    Raises:
        ValueError: ``exit_layer`` outside ``[1, decoder layers]``.
    """

    def __init__(self, backend: Any, encoded: Any, exit_layer: int, *, head_ids: torch.Tensor | None = None,
                 sample: bool = False, seed: int | None = None, eos_token_id: int | None = None):
        exit_layer = int(exit_layer)
        n = decoder_layers(backend)
        if exit_layer < 1 or (n is not None and exit_layer > n):
            raise ValueError(f"early-exit:{exit_layer}: the layer must be in 1..{n if n is not None else 'layers'} "
                             f"({backend.name} has {n} decoder layers)")
        self.exit_layer = exit_layer
        kwargs: dict[str, Any] = {"exit_layer": exit_layer}
        if head_ids is not None:
            kwargs["head_ids"] = head_ids
        name = f"early-exit:{exit_layer}"
        companion = ModelCompanion(backend, encoded, TokenMap.same(backend), name=name, step_kwargs=kwargs)
        super().__init__(companion, name=name, sample=sample, seed=seed, eos_token_id=eos_token_id)
