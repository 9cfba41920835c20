"""Contrastive decoding (core/processors/contrastive_decoding.py) against its references:
x-transformers' ``contrastive_decode_fn`` (the package, a test dependency) for a model
amateur, and DoLa for an early layer. transformers' DoLa moved to the hub
(``transformers-community/dola``, not installed here), so the DoLa reference below is
transcribed from transformers 4.45's ``_dola_select_contrast`` / ``_relative_top_filter``
(the code of the paper's authors, Chuang et al. 2023), kept beside the paper's equations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.processors.contrastive_decoding import (
    Amateur,
    ContrastiveDecoding,
    contrast,
    dola_contrast,
    jsd_dola,
    parse_amateur,
)

x_transformers = pytest.importorskip("x_transformers.autoregressive_wrapper")


# ------------------------------------------------------------------ references
def dola_reference(candidate_layers: list[int], premature: dict[int, torch.Tensor], final: torch.Tensor,
                   relative_top: float = 0.1) -> torch.Tensor:
    """transformers 4.45 ``_dola_select_contrast`` (with ``_relative_top_filter``), transcribed:
    the premature layer of largest JS divergence (averaged over the batch), then
    log_softmax(final) - log_softmax(premature) on the relative-top set, -inf elsewhere."""
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
    softmax_mature = F.softmax(final, dim=-1)
    softmax_premature = F.softmax(stacked, dim=-1)
    avg = 0.5 * (softmax_mature[None, :, :] + softmax_premature)
    kl1 = F.kl_div(F.log_softmax(final, dim=-1)[None, :, :], avg, reduction="none").mean(-1)
    kl2 = F.kl_div(F.log_softmax(stacked, dim=-1), avg, reduction="none").mean(-1)
    js = (0.5 * (kl1 + kl2)).mean(-1)
    layer = candidate_layers[int(js.argmax().item())]
    f, b = relative_top_filter(final, premature[layer])
    return f - b


def same_contrast(ours: torch.Tensor, reference: torch.Tensor, masked: float) -> None:
    """Equal kept values (exactly) and the same cut tokens (ours -inf, the reference ``masked``)."""
    cut = reference == masked
    assert torch.equal(torch.isneginf(ours), cut)
    assert torch.equal(ours[~cut], reference[~cut])


class FakeStep:
    def __init__(self, lens):
        self.lens_logits = lens


class FakeCompanion:
    """A Companion whose logits are a fixed function of the ids (and counts its calls)."""

    name = "fake"

    def __init__(self, vocab: int, seed: int = 1):
        self.target_vocab_size = vocab
        self.table = torch.randn(97, vocab, generator=torch.Generator().manual_seed(seed))
        self.calls: list[list[int]] = []

    def logits(self, ids, n_last=1):
        self.calls.append(list(ids))
        return self.table[sum(ids) % 97][None].repeat(n_last, 1)


# ------------------------------------------------------------------ model amateur
@pytest.mark.parametrize("alpha,beta", [(0.1, 0.5), (0.5, 1.0), (1.0, 0.0), (0.01, 2.5)])
def test_contrast_equals_x_transformers(alpha, beta):
    g = torch.Generator().manual_seed(0)
    expert, amateur = torch.randn(3, 500, generator=g) * 4, torch.randn(3, 500, generator=g) * 4
    want = x_transformers.contrastive_decode_fn(expert, amateur, alpha=alpha, beta=beta)
    same_contrast(contrast(expert, amateur, alpha, beta), want, -torch.finfo(torch.float32).max)


def test_the_stage_asks_the_companion_for_each_step_and_equals_x_transformers():
    vocab = 50
    companion = FakeCompanion(vocab)
    stage = ContrastiveDecoding(Amateur("model", model="fake"), 0.1, 0.5, companion)
    ids = torch.tensor([[3, 7, 9]])
    expert = torch.randn(1, vocab, generator=torch.Generator().manual_seed(2)) * 3
    out = stage(ids, expert)
    assert companion.calls == [[3, 7, 9]]
    want = x_transformers.contrastive_decode_fn(expert, companion.logits([3, 7, 9]), alpha=0.1, beta=0.5)
    same_contrast(out, want, -torch.finfo(torch.float32).max)
    assert torch.equal(stage.last.amateur, companion.logits([3, 7, 9])) and stage.last.layer is None


def test_an_amateur_without_a_token_finds_it_least_likely():
    expert = torch.tensor([[2.0, 1.9, 0.0, -5.0]])
    amateur = torch.tensor([[1.0, -torch.inf, 0.5, -1.0]])

    class C:
        name, target_vocab_size = "c", 4

        def logits(self, ids, n_last=1):
            return amateur

    out = ContrastiveDecoding(Amateur("model", model="c"), 0.1, 0.5, C())(torch.tensor([[1]]), expert)
    assert torch.isfinite(out[0, :2]).all() and out[0, 1] > out[0, 0]  # treated as amateur logit -1.0
    assert out[0, 1] == pytest.approx(1.5 * 1.9 + 0.5 * 1.0)
    assert torch.isneginf(out[0, 3])  # below the plausibility cut


def test_a_model_amateur_without_its_companion_says_what_to_do():
    with pytest.raises(RuntimeError, match="needs that model loaded"):
        ContrastiveDecoding(Amateur("model", model="tiny.en"), 0.1, 0.5)(torch.tensor([[1]]), torch.zeros(1, 5))


# ------------------------------------------------------------------ DoLa
def _lens(n_layers=6, vocab=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, n_layers, vocab, generator=g) * torch.linspace(0.5, 4, n_layers)[None, :, None]


@pytest.mark.parametrize("layer", [1, 3, 5])
def test_a_fixed_layer_equals_dola(layer):
    lens = _lens()
    stage = ContrastiveDecoding(parse_amateur(f"layer:{layer}"), 0.1, 0.5)
    stage.see_step(FakeStep(lens))
    final = lens[:, -1]
    out = stage(torch.tensor([[1, 2]]), final)
    want = dola_reference([layer], {i + 1: lens[:, i] for i in range(5)}, final)
    same_contrast(out, want, -math.inf)
    assert stage.last.layer == [layer]


@pytest.mark.parametrize("seed", range(6))
def test_layer_auto_equals_dolas_dynamic_selection(seed):
    lens = _lens(seed=seed)
    stage = ContrastiveDecoding(parse_amateur("layer:auto"), 0.1, 0.5)
    stage.see_step(FakeStep(lens))
    out = stage(torch.tensor([[1]]), lens[:, -1])
    want = dola_reference([1, 2, 3, 4, 5], {i + 1: lens[:, i] for i in range(5)}, lens[:, -1])
    same_contrast(out, want, -math.inf)
    js = jsd_dola(lens[:, -1], lens[:, :-1].transpose(0, 1))
    assert stage.last.layer == [int(js[:, 0].argmax()) + 1]
    assert stage.last.divergence[0] == pytest.approx(float(js[:, 0].max()))


def test_dolas_divergence_is_the_papers_jensen_shannon_with_kl_from_the_mean():
    """Eq. 5 with the KL terms as DoLa's code writes them: 0.5 (KL(M||P) + KL(M||Q)), averaged
    over the vocabulary (the argmax over layers does not depend on that average)."""
    g = torch.Generator().manual_seed(5)
    final, layers = torch.randn(1, 40, generator=g), torch.randn(3, 1, 40, generator=g)
    p, q = final.softmax(-1), layers.softmax(-1)
    m = 0.5 * (p[None] + q)
    kl = lambda a, b: (a * (a.log() - b.log())).sum(-1)  # noqa: E731
    want = 0.5 * (kl(m, p[None]) + kl(m, q)) / 40
    assert torch.allclose(jsd_dola(final, layers), want, atol=1e-7)


def test_dola_contrast_cuts_as_the_plausibility_constraint():
    final = torch.tensor([[3.0, 3.0 + math.log(0.1) + 1e-3, 3.0 + math.log(0.1) - 1e-3, 0.0]])
    out = dola_contrast(final, torch.zeros(1, 4), 0.1)
    assert torch.isfinite(out[0, :2]).all() and torch.isneginf(out[0, 2:]).all()


def test_a_layer_beyond_the_model_and_a_missing_lens_are_explained():
    stage = ContrastiveDecoding(parse_amateur("layer:6"), 0.1, 0.5)
    with pytest.raises(RuntimeError, match="logit lens"):
        stage(torch.tensor([[1]]), torch.zeros(1, 300))
    stage.see_step(FakeStep(_lens()))
    with pytest.raises(ValueError, match="has 6 decoder layers; give 1 … 5"):
        stage(torch.tensor([[1]]), torch.zeros(1, 300))


def test_parse_amateur():
    assert parse_amateur("") is None and parse_amateur("  ") is None
    assert parse_amateur("layer:auto") == Amateur("layer")
    assert parse_amateur("layer:2") == Amateur("layer", layer=2)
    assert parse_amateur("tiny.en") == Amateur("model", model="tiny.en")
    for bad in ("layer:0", "layer:x", "layer:", "tiny en"):
        with pytest.raises(ValueError, match="contrastive_amateur"):
            parse_amateur(bad)
    assert [parse_amateur(t).text for t in ("tiny.en", "layer:3", "layer:auto")] == ["tiny.en", "layer:3", "layer:auto"]
