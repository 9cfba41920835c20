"""Contrastive decoding (core/processors/contrastive_decoding.py) against its references:
x-transformers' ``contrastive_decode_fn`` (the package, a test dependency) for a model
amateur, and DoLa for an early layer. transformers' DoLa moved to the hub
(``transformers-community/dola``, not installed here), so the DoLa reference
(tests/helpers/contrastive_reference.py) is transcribed from transformers 4.45's
``_dola_select_contrast`` / ``_relative_top_filter`` (the code of the paper's authors,
Chuang et al. 2023), checked here against the paper's equations."""

from __future__ import annotations

import math

import pytest
import torch

from core.processors.contrastive_decoding import (
    Amateur,
    ContrastiveDecoding,
    contrast,
    dola_contrast,
    jsd_dola,
    parse_amateur,
)

import x_transformers.autoregressive_wrapper as x_transformers  # the test extra (pyproject): fail, never skip, without it

from tests.helpers.contrastive_reference import dola_reference


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


class _RowCompanion:
    """A Companion that gives one fixed row of logits (in the target's vocabulary)."""

    name = "c"

    def __init__(self, row: torch.Tensor):
        self.row, self.target_vocab_size = row, row.shape[-1]

    def logits(self, ids, n_last=1):
        return self.row


def test_an_id_the_amateur_has_no_token_for_is_left_uncontrasted():
    """Expert (10, 9), amateur (8, unknown): the unknown id is left uncontrasted (the amateur's
    log-probability there := the expert's), so in log-probabilities it keeps the expert's own
    log p_e, the known id gets log p_e + beta * (log p_e - log p_a); the unknown id does not win
    (the row-minimum fill gave it (1 + beta) * 9 + beta * 20 = 23.5 against 11: it won)."""
    expert, amateur = torch.tensor([[10.0, 9.0, -5.0]]), torch.tensor([[8.0, -torch.inf, -20.0]])
    stage = ContrastiveDecoding(Amateur("model", model="c"), 0.1, 0.5, _RowCompanion(amateur))
    out = stage(torch.tensor([[1]]), expert)
    log_pe, log_pa = expert.log_softmax(-1)[0], amateur.log_softmax(-1)[0]
    assert float(out[0, 1] - out[0, 0]) == pytest.approx(float(log_pe[1] - (1.5 * log_pe[0] - 0.5 * log_pa[0])), abs=1e-5)
    assert int(out[0].argmax()) == 0 and torch.isneginf(out[0, 2])  # id 2: below the plausibility cut
    assert torch.isneginf(stage.last.amateur[0, 1])  # the view: the amateur gives it no probability


def test_an_unknown_id_does_not_depend_on_the_models_logit_offsets():
    """A constant added to the amateur's row (or the expert's) changes no probability of the contrast."""
    g = torch.Generator().manual_seed(3)
    expert, amateur = torch.randn(2, 40, generator=g) * 3, torch.randn(2, 40, generator=g) * 3
    amateur[:, ::3] = -torch.inf

    def probs(e, a):
        stage = ContrastiveDecoding(Amateur("model", model="c"), 0.05, 0.7, _RowCompanion(a))
        return stage(torch.tensor([[1], [2]]), e).softmax(-1)

    base = probs(expert, amateur)
    assert torch.allclose(probs(expert, amateur + 30.0), base, atol=1e-5)
    assert torch.allclose(probs(expert - 12.0, amateur), base, atol=1e-5)


def test_an_unknown_id_with_a_suppressed_expert_logit_stays_cut():
    stage = ContrastiveDecoding(Amateur("model", model="c"), 0.1, 0.5,
                                _RowCompanion(torch.tensor([[1.0, -torch.inf, -torch.inf]])))
    out = stage(torch.tensor([[1]]), torch.tensor([[2.0, -torch.inf, 1.9]]))
    assert torch.isneginf(out[0, 1]) and not torch.isnan(out).any()
    assert torch.isfinite(out[0, [0, 2]]).all()


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


# ------------------------------------------------------------------ through the engine, tiny random models
def _tiny_whisper(seed: int, decoder_layers: int):
    """A tiny random Whisper (the suite's tiny_whisper, with more decoder layers)."""
    from tests.core.conftest import tiny_whisper

    return tiny_whisper(seed, decoder_layers)


def _rules(tiny, ids: list[int], logits: torch.Tensor) -> torch.Tensor:
    """The prompt's hard rules on (1, vocab) logits (suppress; begin-suppress at the first step)."""
    out = logits.clone()
    out[:, list(tiny.prompt.suppress_tokens)] = -math.inf
    if len(ids) == len(tiny.prompt.prompt_ids):
        out[:, list(tiny.prompt.begin_suppress_tokens)] = -math.inf
    return out


@torch.no_grad()
def _full(tiny, ids: list[int]):
    """transformers' forward on the whole prefix: (final logits (1, V), per-layer lens logits
    (layers - 1, 1, V): the final norm and output projection on each earlier layer's output)."""
    out = tiny.model(**tiny.inputs, decoder_input_ids=torch.tensor([ids]), output_hidden_states=True)
    dec = tiny.model.model.decoder
    hidden = out.decoder_hidden_states  # embeddings, layer 1 .. N-1 outputs, the normed last
    lens = torch.stack([tiny.model.proj_out(dec.layer_norm(h[:, -1])) for h in hidden[1:-1]])
    return out.logits[:, -1], lens


def _reference_run(tiny, step_fn, max_new: int) -> list[int]:
    """Greedy decoding with ``step_fn(ids, expert (1, V) with the rules, lens, raw final logits) -> scores``."""
    ids = list(tiny.prompt.prompt_ids)
    generated = []
    for _ in range(max_new):
        final, lens = _full(tiny, ids)
        token = int(step_fn(ids, _rules(tiny, ids, final), lens, final).argmax())
        if token == tiny.prompt.eos_token_id:
            break
        generated.append(token)
        ids.append(token)
    return generated


def _engine_run(tiny, options, amateur=None):
    from core.backends.hf import HFSeq2SeqBackend
    from core.engine import Engine
    from core.events import Finished, StepEvent

    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind)
    events = list(Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, options, amateur=amateur))
    assert isinstance(events[-1], Finished)
    return [e for e in events if isinstance(e, StepEvent)], events[-1]


class FullForwardCompanion:
    """A Companion over a second tiny model of the same vocabulary: a full forward per call
    (the reference has no cache to get wrong)."""

    def __init__(self, tiny):
        self.tiny, self.name, self.target_vocab_size = tiny, "amateur", tiny.model.config.vocab_size

    @torch.no_grad()
    def logits(self, ids, n_last=1):
        out = self.tiny.model(**self.tiny.inputs, decoder_input_ids=torch.tensor([list(ids)]))
        return out.logits[0, -n_last:]


@pytest.mark.parametrize("amateur", ["layer:1", "layer:2", "layer:auto"])
def test_engine_with_a_layer_amateur_equals_dola_on_a_tiny_model(amateur):
    from core.options import DecodingOptions

    tiny = _tiny_whisper(3, decoder_layers=4)
    options = DecodingOptions(strategy="greedy", contrastive_amateur=amateur, max_new_tokens=12)
    steps, fin = _engine_run(tiny, options)
    layers = [1, 2, 3] if amateur == "layer:auto" else [int(amateur.split(":")[1])]

    def dola(ids, expert, lens, raw):
        return dola_reference(layers, {i + 1: lens[i] for i in range(3)}, expert, mature=raw)

    want = _reference_run(tiny, dola, 12)
    plain = _reference_run(tiny, lambda ids, expert, lens, raw: expert, 12)
    assert fin.token_ids == want and len(want) >= 5
    assert amateur != "layer:auto" or want != plain  # the contrast changed the output
    assert steps and all(not e.lens for e in steps)  # the lens was read, not reported (capture_lens off)


def test_engine_with_a_model_amateur_equals_x_transformers_on_tiny_models():
    from core.options import DecodingOptions

    expert, amateur = _tiny_whisper(3, decoder_layers=2), _tiny_whisper(11, decoder_layers=2)
    companion = FullForwardCompanion(amateur)
    options = DecodingOptions(strategy="greedy", contrastive_amateur="tiny-amateur", cd_alpha=0.1, cd_beta=0.5,
                              max_new_tokens=12)
    steps, fin = _engine_run(expert, options, amateur=companion)

    def cd(ids, scores, lens, raw):
        return x_transformers.contrastive_decode_fn(scores, companion.logits(ids)[-1:], alpha=0.1, beta=0.5)

    want = _reference_run(expert, cd, 12)
    assert fin.token_ids == want and len(want) >= 5
    assert want != _reference_run(expert, lambda ids, s, lens, raw: s, 12)


def test_sampling_with_a_layer_amateur_samples_from_the_contrast():
    """The sampling strategy draws from softmax of the contrast (its processed distribution):
    the reported probabilities are the contrast's."""
    from core.options import DecodingOptions

    tiny = _tiny_whisper(3, decoder_layers=4)
    steps, _ = _engine_run(tiny, DecodingOptions(strategy="sample", seed=1, contrastive_amateur="layer:2",
                                                 max_new_tokens=6))
    ids = list(tiny.prompt.prompt_ids)
    for e in steps:
        final, lens = _full(tiny, ids)
        want = torch.softmax(dola_reference([2], {2: lens[1]}, _rules(tiny, ids, final)), -1)[0]
        assert e.prob == pytest.approx(float(want[e.token_id]), abs=1e-4)
        ids.append(e.token_id)


@pytest.mark.parametrize("strategy", ["beam", "diverse_beam", "contrastive"])
def test_an_amateur_with_beam_or_contrastive_search_is_refused(strategy):
    """The stage shapes one path token by token (greedy, sample, mirostat); with beams or contrastive
    search it would change nothing, so validate() refuses it, naming the field and the strategies."""
    from core.options import DecodingOptions

    with pytest.raises(ValueError, match=r"contrastive_amateur .*greedy, sample or mirostat") as exc:
        DecodingOptions(strategy=strategy, num_beams=4, num_beam_groups=2, top_k=4,
                        contrastive_amateur="layer:auto").validate()
    assert strategy.replace("_", " ") in str(exc.value) or strategy in str(exc.value)
    DecodingOptions(strategy=strategy, num_beams=4, num_beam_groups=2, top_k=4).validate()  # off: fine


def test_a_beam_lane_with_an_amateur_is_refused():
    from core.tasks.lane_spec import parse_lane_spec

    with pytest.raises(ValueError, match="contrastive_amateur"):
        parse_lane_spec("beam:amateur=layer:2")
    assert parse_lane_spec("greedy:amateur=layer:2").contrastive_amateur == "layer:2"


def test_a_lane_whose_strategy_takes_no_amateur_leaves_the_base_amateur_out():
    """--compare greedy beam with --contrastive-amateur (or the window's amateur box): the beam lane runs
    without it (the amateur is the base's, not the lane's), the greedy lane keeps it."""
    from core.options import DecodingOptions
    from core.tasks.lane_spec import parse_lane_spec

    base = DecodingOptions(contrastive_amateur="layer:auto")
    assert parse_lane_spec("greedy", base).contrastive_amateur == "layer:auto"
    for spec in ("beam:4", "contrastive:k=4", "speculative:ngram", "diverse-beam:beams=4,groups=2"):
        assert parse_lane_spec(spec, base).contrastive_amateur == "", spec


def test_speculative_decoding_refuses_an_amateur():
    from core.options import STRATEGIES, DecodingOptions

    if "speculative" not in STRATEGIES:
        pytest.skip("no speculative strategy yet")

    with pytest.raises(ValueError, match="does not combine with speculative"):
        DecodingOptions(strategy="speculative", contrastive_amateur="layer:auto").validate()


def test_the_stage_report_carries_the_amateur_and_which_layer():
    """Each StepEvent's contrastive stage reports the amateur's probabilities of the stage
    candidates (softmax of the premature layer's lens) and which layer it was."""
    from core.options import DecodingOptions

    tiny = _tiny_whisper(3, decoder_layers=4)
    steps, _ = _engine_run(tiny, DecodingOptions(strategy="greedy", contrastive_amateur="layer:auto",
                                                 max_new_tokens=6, top_k_report=5))
    ids = list(tiny.prompt.prompt_ids)
    for e in steps:
        report = e.stages[0]
        assert report.name == "contrastive_decoding" and report.amateur is not None
        final, lens = _full(tiny, ids)
        js = jsd_dola(final, lens)[:, 0]
        layer = int(js.argmax()) + 1
        assert report.note.startswith(f"amateur layer {layer} of 4 (auto, JS ")
        want = torch.softmax(lens[layer - 1, 0], -1)[[c.id for c in e.stage_candidates]]
        assert report.amateur == pytest.approx(want.numpy(), abs=1e-5)
        assert report.probs.sum() <= 1.0 + 1e-5 and len(report.amateur) == len(e.stage_candidates)
        ids.append(e.token_id)
    plain, _ = _engine_run(tiny, DecodingOptions(strategy="greedy", max_new_tokens=3, repetition_penalty=1.2))
    assert plain[0].stages[0].amateur is None and plain[0].stages[0].note == ""


def test_a_lane_spec_sets_the_amateur_and_its_label_says_so():
    from core.tasks.lane_spec import describe, parse_lane_spec

    for spec in ("greedy:amateur=layer:auto", "sample:T=0.8,amateur=tiny.en", "greedy:contrastive_amateur=layer:2"):
        o = parse_lane_spec(spec)
        assert o.contrastive_amateur in ("layer:auto", "tiny.en", "layer:2")
        assert "amateur=" + o.contrastive_amateur in describe(o) and parse_lane_spec(describe(o)) == o
    assert describe(parse_lane_spec("greedy")) == "greedy"
    with pytest.raises(ValueError, match="contrastive_amateur 'layer:x'"):
        parse_lane_spec("greedy:amateur=layer:x")
