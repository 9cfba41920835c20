"""References for contrastive decoding's tests (unit and end-to-end).

transformers' DoLa moved to the hub (``transformers-community/dola``, not installed here), so
``dola_reference`` is transcribed from transformers 4.45's ``_dola_select_contrast`` /
``_relative_top_filter`` (the code of the paper's authors, Chuang et al. 2023)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def dola_reference(candidate_layers: list[int], premature: dict[int, torch.Tensor], final: torch.Tensor,
                   relative_top: float = 0.1, mature: torch.Tensor | None = None) -> torch.Tensor:
    """transformers 4.45 ``_dola_select_contrast`` (with ``_relative_top_filter``), transcribed:
    the premature layer of largest JS divergence (averaged over the batch), then
    log_softmax(final) - log_softmax(premature) on the relative-top set, -inf elsewhere.

    ``mature``: the final layer's logits the layer is selected on, when ``final`` (what is
    contrasted) has the model's hard rules applied already (this chain's order; transformers
    selects and contrasts the raw logits and suppresses after); default ``final``."""
    def relative_top_filter(scores, baseline, filter_value=-float("inf"), base_filter_value=-1e-3,
                            min_tokens_to_keep=1):
        scores_normalized = scores.log_softmax(dim=-1)
        baseline_normalized = baseline.log_softmax(dim=-1)
        sorted_logits, _ = torch.sort(scores_normalized, descending=True)
        min_thresh = sorted_logits[..., min_tokens_to_keep - 1]
        probs_max = torch.max(scores_normalized, dim=-1).values
        probs_thresh = torch.min(min_thresh, probs_max + np.log(relative_top)).unsqueeze(-1)
        baseline_normalized[scores_normalized < probs_thresh] = base_filter_value
        scores_normalized[scores_normalized < probs_thresh] = filter_value
        return scores_normalized, baseline_normalized

    if len(candidate_layers) == 1:
        f, b = relative_top_filter(final, premature[candidate_layers[0]])
        return f - b
    stacked = torch.stack([premature[i] for i in candidate_layers], dim=0)
    select_on = final if mature is None else mature
    softmax_mature = F.softmax(select_on, dim=-1)
    softmax_premature = F.softmax(stacked, dim=-1)
    avg = 0.5 * (softmax_mature[None, :, :] + softmax_premature)
    kl1 = F.kl_div(F.log_softmax(select_on, dim=-1)[None, :, :], avg, reduction="none").mean(-1)
    kl2 = F.kl_div(F.log_softmax(stacked, dim=-1), avg, reduction="none").mean(-1)
    js = (0.5 * (kl1 + kl2)).mean(-1)
    layer = candidate_layers[int(js.argmax().item())]
    f, b = relative_top_filter(final, premature[layer])
    return f - b
