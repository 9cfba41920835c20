"""The logit lens (nostalgebraist 2020) per decoder layer: backends, engine, report, CLI.

* every backend (transformers Whisper on both step paths, Marian and T5; Bergamot tiny11
  with and without the shortlist; the bundled OCR reader's decoder): with
  ``capture_lens`` the last row of ``StepOutput.lens_logits`` is the step's logits, bit
  for bit, and nothing else changes; without it there is no lens;
* a middle layer's lens equals a direct computation: the final layer norm and the output
  head written out by hand, applied to transformers' ``decoder_hidden_states[i]`` of an
  uncached forward with ``output_hidden_states=True`` (Bergamot and the OCR reader: the
  same model cut after that layer gives it as its logits);
* the engine's ``StepEvent.lens``: one entry per decoder layer; the last one is the
  model's own raw distribution (its top-k *is* ``raw_topk``, its top-1 and probability
  the raw distribution's, the emitted token's log-probability ``log raw_prob``); every
  layer's top-k and the emitted token's log-probability equal a teacher-forced
  reference (the hard rules applied to every layer), for greedy, sampling with
  penalties and filters, beam search (the row the token came from) and the other
  strategies; capture off gives no lens and the same tokens and probabilities;
* ``core.analysis.lens``: deltas, grid, the JSON entries; the CLI's ``--logit-lens``
  trace on Bergamot en-pt and Whisper tiny.en (e2e).

Raw, not processed: a layer's lens is a raw distribution (softmax of the layer's logits
with the model's hard rules, temperature 1, no penalty nor filter): the lens asks what the
network computes at a layer; penalties and filters are the strategy's, and applying them
to a layer's guess would mix the two.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from core.analysis.lens import deltas, grid, lens_json
from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import LensEntry, StepEvent, TokenProb
from core.options import DecodingOptions
from tests.core.conftest import MAKERS, V

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HF = [("whisper", True), ("whisper", False), ("marian", False), ("t5", False)]
STRATEGIES = [
    DecodingOptions(strategy="greedy", max_new_tokens=8),
    DecodingOptions(strategy="sample", temperature=0.7, top_k=20, top_p=0.9, repetition_penalty=1.3,
                    max_new_tokens=8, seed=3),
    DecodingOptions(strategy="beam", num_beams=3, max_new_tokens=8),
]


def deep(kind: str, layers: int = 4, seed: int = 5):
    """The tiny model of ``kind`` (tests/core/conftest.py) with ``layers`` decoder layers."""
    tiny = MAKERS[kind]()
    cfg = copy.deepcopy(tiny.model.config)
    setattr(cfg, "num_decoder_layers" if kind == "t5" else "decoder_layers", layers)
    if kind == "t5":  # conftest's factor 8 gives activations in the thousands; cached and uncached
        cfg.initializer_factor = 2.0  # forwards then differ by ~0.03 in the logits themselves
    torch.manual_seed(seed)
    model = type(tiny.model)(cfg).eval()
    if kind == "marian":  # a logits bias the lens must add too (zero when built from a config)
        with torch.no_grad():
            model.final_logits_bias.normal_(0.0, 0.5)
    return dataclasses.replace(tiny, model=model)


@pytest.fixture(scope="module")
def deep_models():
    return {kind: deep(kind) for kind in MAKERS}


@pytest.fixture(scope="module")
def bergamot():
    from core.backends.marian_tiny import load_bergamot

    return load_bergamot("en-pt")


def tiny_ocr(layers: int = 3):
    from core.backends.ocr_attn import OCRAttnConfig, OCRAttnModel, OCRVocab
    from core.backends.ocr_backend import OCRAttnBackend

    torch.manual_seed(0)
    cfg = OCRAttnConfig(d_model=32, n_layers=layers, n_heads=4, d_ff=64, dropout=0.0)
    model = OCRAttnModel(cfg).eval()
    with torch.no_grad():  # a less uniform random reader: varied top tokens per layer
        model.lm_head.weight.mul_(30.0)
    return OCRAttnBackend(model, OCRVocab(cfg.characters), "tiny ocr")


def _ocr_input():
    return {"pixel_values": torch.randn(1, 1, 64, 96, generator=torch.Generator().manual_seed(0))}


def backends(deep_models, bergamot):
    """(name, backend, encoded, prompt, decoder layers) of every backend kind."""
    out = []
    for kind, lean in HF:
        tiny = deep_models[kind]
        be = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind, lean=lean)
        out.append((f"{kind}{'-lean' if lean else ''}", be, be.encode(tiny.inputs), tiny.prompt, 4))
    enc = bergamot.encode({"input_ids": torch.tensor([bergamot.source_ids("The cat sat on the mat.")])})
    out.append(("bergamot", bergamot, enc, bergamot.decoder_prompt(enc), 2))
    short = bergamot.with_shortlist(True)
    out.append(("bergamot-shortlist", short, enc, short.decoder_prompt(enc), 2))
    ocr = tiny_ocr()
    enc = ocr.encode(_ocr_input())
    out.append(("ocr", ocr, enc, ocr.decoder_prompt(enc), 3))
    return out


NAMES = ["whisper-lean", "whisper", "marian", "t5", "bergamot", "bergamot-shortlist", "ocr"]


@pytest.fixture(scope="module")
def all_backends(deep_models, bergamot):
    return {b[0]: b for b in backends(deep_models, bergamot)}


# ------------------------------------------------------------------------------- backends


@pytest.mark.parametrize("name", NAMES)
def test_backend_lens_last_row_is_the_logits_and_capture_changes_nothing(all_backends, name):
    """Two rows, the prompt then three single tokens: (batch, layers, vocab) float32, the
    last row equal to the logits bit for bit; the logits, hidden states and attention of a
    step with the lens equal those of the same step without it; no lens unless asked."""
    _, be, enc, prompt, n_layers = all_backends[name]
    ids = torch.tensor([list(prompt.prompt_ids)] * 2)
    on, off = be.init_cache(enc, 2), be.init_cache(enc, 2)
    for t in range(4):
        a = be.step(ids, on, True, capture_lens=True)
        b = be.step(ids, off, True)
        assert b.lens_logits is None
        lens = a.lens_logits
        assert lens.dtype == torch.float32 and lens.shape == (2, n_layers, be.vocab_size)
        assert torch.equal(lens[:, -1], a.logits)
        assert torch.equal(a.logits, b.logits) and torch.equal(a.cross_attention, b.cross_attention)
        assert torch.equal(a.hidden_states, b.hidden_states)
        assert not torch.equal(lens[:, 0], lens[:, -1])  # an inner layer says something else
        on, off = a.cache, b.cache
        ids = torch.tensor([[10 + t], [20 + t]])


def reference_head(kind: str, model, h: torch.Tensor) -> torch.Tensor:
    """The model's final norm and output head, written out (for an inner layer's output ``h``)."""
    if kind == "whisper":
        return model.proj_out(model.model.decoder.layer_norm(h))
    if kind == "marian":  # post-norm: no final norm; a logits bias after the projection
        return model.lm_head(h) + model.final_logits_bias[0]
    if kind == "t5":  # RMS norm, then the tied embeddings scaled by d_model ** -0.5
        return model.lm_head(model.decoder.final_layer_norm(h) * model.config.d_model ** -0.5)
    raise ValueError(kind)


def reference_lens(kind: str, tiny, seq: list[int]) -> torch.Tensor:
    """float32 (layers, vocab): the lens of the last position of ``seq`` from one uncached
    forward with ``output_hidden_states=True``: ``reference_head`` of
    ``decoder_hidden_states[i]`` (the output of decoder layer i - 1, checked with a hook)
    for the inner layers, then the model's logits."""
    model = tiny.model
    dec = model.get_decoder()
    layers = getattr(dec, "layers", None) or dec.block
    outs = []
    hooks = [m.register_forward_hook(lambda _m, _i, o: outs.append(o[0] if isinstance(o, tuple) else o))
             for m in layers]
    try:
        with torch.no_grad():
            out = model(**tiny.inputs, decoder_input_ids=torch.tensor([seq]), output_hidden_states=True,
                        use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    hs = out.decoder_hidden_states
    assert len(hs) == len(layers) + 1
    rows = []
    with torch.no_grad():
        # the hand-written head gives the model's own logits from the (normed) last hidden state
        last = hs[-1][0, -1]
        own = model.lm_head(last * model.config.d_model ** -0.5) if kind == "t5" else (
            model.proj_out(last) if kind == "whisper" else model.lm_head(last) + model.final_logits_bias[0])
        torch.testing.assert_close(own, out.logits[0, -1], rtol=1e-5, atol=1e-5)
        for i in range(1, len(layers)):
            torch.testing.assert_close(hs[i], outs[i - 1])  # hidden state i = the output of layer i - 1
            rows.append(reference_head(kind, model, hs[i][0, -1]))
    rows.append(out.logits[0, -1])
    return torch.stack(rows).float()


@pytest.mark.parametrize("kind,lean", HF)
def test_hf_middle_layers_equal_the_final_norm_and_head_on_decoder_hidden_states(deep_models, kind, lean):
    """Four decoder layers, two rows continued with different tokens: every step's lens
    rows equal ``reference_lens`` of that row's whole sequence."""
    tiny = deep_models[kind]
    be = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind, lean=lean)
    cache = be.init_cache(be.encode(tiny.inputs), 2)
    rows = [list(tiny.prompt.prompt_ids), list(tiny.prompt.prompt_ids)]
    new = torch.tensor(rows)
    for t in range(4):
        out = be.step(new, cache, False, capture_lens=True)
        cache = out.cache
        for r, seq in enumerate(rows):
            # batched cached steps vs one uncached forward: float32 rounding (a wrong norm or head is off by O(1))
            torch.testing.assert_close(out.lens_logits[r], reference_lens(kind, tiny, seq), rtol=1e-3, atol=1e-3)
        nxt = [30 + t, 40 + t]
        for seq, tok in zip(rows, nxt):
            seq.append(tok)
        new = torch.tensor([[tok] for tok in nxt])


def test_bergamot_first_layer_lens_is_the_one_layer_decoders_logits(bergamot, monkeypatch):
    """Bergamot tiny11 (post-norm, no final norm): layer 0's lens is the logits of the same
    network with its decoder cut after layer 0 (the projection of that layer's output)."""
    import core.backends.marian_net as net

    enc = bergamot.encode({"input_ids": torch.tensor([bergamot.source_ids("Good morning, my friend.")])})
    ids = [[1, 50, 60], [1, 70, 80]]
    lens = bergamot.step(torch.tensor(ids), bergamot.init_cache(enc, 2), False, capture_lens=True).lens_logits
    monkeypatch.setattr(net, "DECODER_LAYERS", 1)
    cut = bergamot.step(torch.tensor(ids), bergamot.init_cache(enc, 2), False)
    torch.testing.assert_close(lens[:, 0], cut.logits, rtol=1e-5, atol=1e-4)


def test_ocr_middle_layer_lens_is_the_cut_decoders_logits():
    """The OCR reader (pre-norm, final norm): layer i's lens is the logits of the reader
    whose decoder keeps only its first i + 1 layers (final norm and lm_head as they are)."""
    be = tiny_ocr(layers=3)
    enc = be.encode(_ocr_input())
    ids = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 10]])
    lens = be.step(ids, be.init_cache(enc, 2), False, capture_lens=True).lens_logits
    model = be.model
    full = model.layers
    try:
        for i in range(3):
            model.layers = torch.nn.ModuleList(list(full)[: i + 1])
            cut = be.step(ids, be.init_cache(dataclasses.replace(enc, extras={}), 2), False)
            torch.testing.assert_close(lens[:, i], cut.logits, rtol=1e-5, atol=1e-5)
    finally:
        model.layers = full


# ------------------------------------------------------------------------------- engine


def _steps(events) -> list[StepEvent]:
    return [e for e in events if isinstance(e, StepEvent)]


def _run(backend, enc, prompt, options) -> list[StepEvent]:
    return _steps(Engine(backend, kept_caches=0).run(enc, prompt, options))


@pytest.mark.parametrize("options", STRATEGIES, ids=lambda o: o.strategy)
@pytest.mark.parametrize("name", NAMES)
def test_last_lens_row_is_the_models_own_raw_distribution(all_backends, name, options):
    """Every StepEvent has one entry per decoder layer (layers 0..n-1); the last is the
    raw distribution: its top-k is ``raw_topk`` (ids and probabilities, exactly), its top-1
    and probability the raw top-1's, the emitted token's log-probability log ``raw_prob``."""
    _, be, enc, prompt, n_layers = all_backends[name]
    steps = _run(be, enc, prompt, dataclasses.replace(options, capture_lens=True))
    assert steps
    for ev in steps:
        assert [e.layer for e in ev.lens] == list(range(n_layers))
        out = ev.lens[-1]
        assert out.topk == ev.raw_topk
        assert (out.id, out.text, out.prob) == (ev.raw_topk[0].id, ev.raw_topk[0].text, ev.raw_topk[0].prob)
        assert out.logprob == pytest.approx(math.log(ev.raw_prob), abs=1e-5)
        for e in ev.lens:
            assert e.topk[0] == TokenProb(e.id, e.text, e.prob) and 1 <= len(e.topk) <= options.top_k_report
            assert math.isfinite(e.logprob) and e.logprob <= 0.0  # beam search too: the row's candidate
            assert all(a.prob >= b.prob for a, b in zip(e.topk, e.topk[1:]))


def _rules(prompt, t: int, scores: torch.Tensor) -> torch.Tensor:
    """The hard rules on (layers, vocab) scores at free step ``t``."""
    scores = scores.clone()
    scores[:, list(prompt.suppress_tokens)] = -math.inf
    if t == 0 and prompt.begin_suppress_tokens:
        scores[:, list(prompt.begin_suppress_tokens)] = -math.inf
    return scores


@pytest.mark.parametrize("options", STRATEGIES + [
    DecodingOptions(strategy="diverse_beam", num_beams=4, num_beam_groups=2, max_new_tokens=8),
    DecodingOptions(strategy="contrastive", top_k=4, penalty_alpha=0.6, max_new_tokens=8),
], ids=lambda o: o.strategy)
@pytest.mark.parametrize("kind,lean", HF)
def test_engine_lens_equals_a_teacher_forced_reference(deep_models, kind, lean, options):
    """For every emitted token, every layer's top-k (ids and probabilities) and the token's
    log-probability equal the teacher-forced ``reference_lens`` of the output's prefix with
    the hard rules (suppressed tokens, and the begin-suppressed ones at the first step) on
    every layer: the lens of the row the token was chosen from, for beam search too."""
    tiny = deep_models[kind]
    be = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind, lean=lean)
    options = dataclasses.replace(options, capture_lens=True, top_k_report=5)
    steps = _run(be, be.encode(tiny.inputs), tiny.prompt, options)
    assert len(steps) >= 3
    seq = list(tiny.prompt.prompt_ids)
    for t, ev in enumerate(steps):
        logits = reference_lens(kind, tiny, seq)
        ref = torch.log_softmax(_rules(tiny.prompt, t, logits), dim=-1)
        for layer, e in enumerate(ev.lens):
            # cached steps vs one uncached forward: float32 rounding, growing with the logits' size
            tol = 1e-3 + 1e-5 * float(logits[layer].abs().max())
            values, ids = torch.topk(ref[layer], 5)
            assert [tp.id for tp in e.topk[:3]] == ids[:3].tolist(), (t, layer)
            ref_p = values.exp().numpy()  # entries whose probability underflows to 0 are not listed
            assert (ref_p[len(e.topk):] == 0).all()
            for tp, v in zip(e.topk, values.tolist()):  # compared as log-probabilities, to the tolerance
                assert tp.prob < 1e-30 or math.log(tp.prob) == pytest.approx(v, abs=tol)
            assert e.logprob == pytest.approx(float(ref[layer, ev.token_id]), abs=tol, rel=1e-4)
            suppressed = set(tiny.prompt.suppress_tokens) | (set(tiny.prompt.begin_suppress_tokens) if t == 0 else set())
            assert not suppressed & {tp.id for tp in e.topk}
        seq.append(ev.token_id)


@pytest.mark.parametrize("options", STRATEGIES + [
    DecodingOptions(strategy="contrastive", top_k=4, penalty_alpha=0.6, max_new_tokens=8),
    DecodingOptions(strategy="mirostat", max_new_tokens=8, seed=1),
], ids=lambda o: o.strategy)
@pytest.mark.parametrize("name", NAMES)
def test_capture_off_gives_no_lens_and_the_same_run(all_backends, name, options):
    _, be, enc, prompt, _ = all_backends[name]
    off = _run(be, enc, prompt, options)
    on = _run(be, enc, prompt, dataclasses.replace(options, capture_lens=True))
    assert all(ev.lens == [] for ev in off) and all(ev.lens for ev in on)
    assert len(on) == len(off)
    for a, b in zip(on, off):  # the same tokens, probabilities, top-k, stages and attention, exactly
        for f in ("step", "token_id", "prob", "raw_prob", "topk", "raw_topk", "entropy", "rank", "raw_entropy",
                  "stage_candidates", "mu", "forced"):
            assert getattr(a, f) == getattr(b, f), f
        assert np.array_equal(a.cross_attention, b.cross_attention)
        assert [(s.name, s.kept, s.mass) for s in a.stages] == [(s.name, s.kept, s.mass) for s in b.stages]


def test_a_backend_without_the_lens_is_a_clear_error(deep_models):
    tiny = deep_models["marian"]
    be = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "marian", lean=False)

    class NoLens:  # a backend whose step takes capture_lens but gives none
        name, vocab_size = "no-lens", be.vocab_size

        def __getattr__(self, a):
            return getattr(be, a)

        def step(self, ids, cache, att, capture_lens=False):
            return dataclasses.replace(be.step(ids, cache, att), lens_logits=None)

    options = DecodingOptions(max_new_tokens=3, capture_lens=True)
    with pytest.raises(RuntimeError, match="no-lens gives no logit lens"):
        _run(NoLens(), be.encode(tiny.inputs), tiny.prompt, options)

    class OldStep(NoLens):  # a backend whose step does not know capture_lens
        def step(self, ids, cache, att):
            return be.step(ids, cache, att)

    with pytest.raises(RuntimeError, match="no-lens gives no logit lens"):
        _run(OldStep(), be.encode(tiny.inputs), tiny.prompt, options)
    assert _run(OldStep(), be.encode(tiny.inputs), tiny.prompt, DecodingOptions(max_new_tokens=3))  # never asked


def test_beam_lens_follows_the_row_the_token_came_from(deep_models):
    """Beam search: two output tokens chosen from different rows at the same step would
    disagree; each StepEvent's lens is its own row's (its emitted token's log-probability
    at the output layer is its raw probability, and its top-k the row's raw top-k)."""
    tiny = deep_models["whisper"]
    be = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "whisper")
    options = DecodingOptions(strategy="beam", num_beams=4, max_new_tokens=10, capture_lens=True)
    steps = _run(be, be.encode(tiny.inputs), tiny.prompt, options)
    for ev in steps:
        assert ev.lens[-1].topk == ev.raw_topk
        assert ev.lens[-1].logprob == pytest.approx(math.log(ev.raw_prob), abs=1e-5)


# ------------------------------------------------------------------------------- analysis


def _entry(layer, logprob, prob=0.5, tid=1):
    return LensEntry(layer, tid, "x", prob, [TokenProb(tid, "x", prob)], logprob)


def test_deltas_are_the_change_from_the_layer_before():
    lens = [_entry(0, -3.0), _entry(1, -1.0), _entry(2, -1.5), _entry(3, -math.inf), _entry(4, -0.1)]
    assert deltas(lens) == [None, 2.0, -0.5, None, None]
    assert deltas([]) == []


def test_grid_is_layers_by_steps():
    a = StepEvent(0, 1, "x", 0.5, 0.5, [], [], 0.1, lens=[_entry(0, math.log(0.2), 0.3), _entry(1, math.log(0.5), 0.5)])
    b = StepEvent(1, 1, "x", 0.5, 0.5, [], [], 0.1)
    top, chosen, delta = grid([a, b])
    assert top.shape == (2, 2) and top[0, 0] == pytest.approx(0.3) and top[1, 0] == pytest.approx(0.5)
    assert chosen[0, 0] == pytest.approx(0.2) and delta[1, 0] == pytest.approx(math.log(2.5))
    assert np.isnan(top[:, 1]).all() and np.isnan(delta[0, 0])


def test_lens_json_has_the_documented_keys_and_no_infinity():
    out = lens_json([_entry(0, -math.inf, 0.25), _entry(1, -0.5, 0.75)])
    assert out == [{"layer": 0, "id": 1, "text": "x", "prob": 0.25, "logprob": None},
                   {"layer": 1, "id": 1, "text": "x", "prob": 0.75, "logprob": -0.5}]
    json.dumps(out, allow_nan=False)


# ------------------------------------------------------------------------------- CLI (e2e)


def _cli(capsys, *argv) -> dict:
    from core.cli import main

    code = main(list(argv) + ["--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _check_trace(trace: dict, n_layers: int) -> None:
    assert trace["options"]["capture_lens"] is True
    for tok in trace["tokens"]:
        lens = tok["lens"]
        assert [e["layer"] for e in lens] == list(range(n_layers))
        assert all(set(e) == {"layer", "id", "text", "prob", "logprob"} for e in lens)
        out = lens[-1]  # the output layer: the raw distribution
        assert out["logprob"] == pytest.approx(math.log(tok["raw_prob"]), abs=1e-4)
        if tok["rank"] == 1:  # the token is the raw favourite: the output layer's top-1
            assert out["id"] == tok["id"] and out["prob"] == tok["raw_prob"]
        assert all(0.0 <= e["prob"] <= 1.0 for e in lens)


@pytest.mark.e2e
@pytest.mark.usefixtures("cli_reuses_models")
def test_cli_logit_lens_trace_on_bergamot(capsys):
    trace = _cli(capsys, "translate", "The cat sat on the mat.", "--direction", "en-pt", "--logit-lens")
    assert trace["text"] and trace["tokens"]
    _check_trace(trace, 2)
    plain = _cli(capsys, "translate", "The cat sat on the mat.", "--direction", "en-pt")
    assert "lens" not in plain["tokens"][0] and plain["options"]["capture_lens"] is False
    assert [t["id"] for t in plain["tokens"]] == [t["id"] for t in trace["tokens"]]
    beam = _cli(capsys, "translate", "The cat sat on the mat.", "--direction", "en-pt", "--logit-lens",
                "--strategy", "beam", "--beams", "3")
    _check_trace(beam, 2)


@pytest.mark.e2e
@pytest.mark.usefixtures("cli_reuses_models")
def test_cli_logit_lens_trace_on_whisper_tiny_en(capsys):
    from pathlib import Path

    clip = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"
    trace = _cli(capsys, "transcribe", str(clip), "--model", "tiny.en", "--logit-lens", "--max-new-tokens", "12")
    _check_trace(trace, 4)
    # the output emerges in the upper layers: the last inner layer agrees with the output more often than layer 0
    agree = [sum(t["lens"][i]["id"] == t["id"] for t in trace["tokens"]) for i in range(4)]
    assert agree[2] > agree[0] and agree[3] >= agree[2]
