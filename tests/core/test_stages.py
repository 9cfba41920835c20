"""The stage registry (core.processors.stages) drives every consumer: the options' orders and
checks, the chain builder and the CLI flags (the window's consumers: tests/gui/test_options_panel.py).
And the options are validated once per object, once per decode."""

from __future__ import annotations

import random
import sys

import pytest
import torch

from core.backends.base import DecoderPrompt
from core.cli import build_parser
from core.cli.options import options_from_args
from core.options import (
    DEFAULT_SAMPLER_ORDER,
    LLAMA_CPP_SAMPLER_ORDER,
    PENALTY_STAGES,
    SAMPLING_STRATEGIES,
    STAGE_LABELS,
    STAGES,
    STRATEGIES,
    WARPER_STAGES,
    DecodingOptions,
)
from core.processors.chain import ChainContext, build_stage, chain_stages
from core.processors.stages import REGISTRY, STAGE, stage


def test_the_orders_and_kinds_are_the_registrys():
    assert STAGES == DEFAULT_SAMPLER_ORDER == tuple(s.name for s in sorted(REGISTRY, key=lambda s: s.transformers))
    assert LLAMA_CPP_SAMPLER_ORDER == tuple(s.name for s in sorted(REGISTRY, key=lambda s: s.llama_cpp))
    assert sorted(LLAMA_CPP_SAMPLER_ORDER) == sorted(STAGES) and len(set(STAGES)) == len(REGISTRY)
    assert set(PENALTY_STAGES) == {s.name for s in REGISTRY if s.strategies is None}
    assert set(WARPER_STAGES) == {s.name for s in REGISTRY if s.strategies == SAMPLING_STRATEGIES}
    assert all(STAGE_LABELS[s.name] == s.label for s in REGISTRY)
    names = {f.name for s in REGISTRY for f in s.fields}
    assert names <= set(DecodingOptions.__dataclass_fields__)  # every declared field exists
    for s in REGISTRY:  # one sentence with its source
        assert s.help.endswith(".") and "(" in s.help and s.label, s.name
        for f in s.fields:
            assert f.help and f.label, f.name


# values that switch each stage on (None: stays off) for the random settings below
PICKS = {
    "temperature": [1.0, 0.7], "dynatemp_range": [0.0, 0.3], "smoothing_factor": [0.0, 0.5],
    "top_h": [0.0, 0.5], "top_k": [0, 20], "top_p": [1.0, 0.9], "min_p": [0.0, 0.05],
    "typical_p": [1.0, 0.9], "epsilon_cutoff": [0.0, 3e-4], "eta_cutoff": [0.0, 3e-4],
    "top_n_sigma": [0.0, 1.0], "top_a": [0.0, 0.2], "tfs": [1.0, 0.9], "xtc_probability": [0.0, 0.5],
    "repetition_penalty": [1.0, 1.2], "no_repeat_ngram_size": [0, 3], "dry_multiplier": [0.0, 0.8],
    "encoder_repetition_penalty": [1.0, 1.3], "encoder_no_repeat_ngram_size": [0, 2],
    "bad_words": [(), ("cat",)], "logit_bias": [(), (("yes", 2.0),)], "min_new_tokens": [0, 3],
    "length_decay_factor": [1.0, 1.05], "watermark_delta": [0.0, 2.0], "contrastive_amateur": ["", "layer:1"],
}


def test_is_off_is_what_the_chain_builds_and_stage_is_set():
    """One "off" test per stage (the registry's), read by the builder, the options and the widget."""
    prompt = DecoderPrompt(prompt_ids=(1,), eos_token_id=2)
    ctx = ChainContext(tokenize=lambda text: [3 + len(text) % 5], encoder_input_ids=torch.tensor([[5, 6, 7]]))
    assert {s.name for s in REGISTRY} == {stage(n).name for n in STAGES}
    assert all(set(s.field_names()) & set(PICKS) for s in REGISTRY)  # every stage is switched on and off
    rng = random.Random(0)
    for _ in range(40):
        o = DecodingOptions(strategy="sample", **{k: rng.choice(v) for k, v in PICKS.items()}).validate()
        built = dict(chain_stages(o, prompt, 1, ctx))
        for s in REGISTRY:
            off = s.is_off(o)
            assert off == (build_stage(s.name, o, prompt, 1, ctx) is None), (s.name, o)
            assert o.stage_is_set(s.name) == (not off)
            assert (s.name in built) == (not off)


def test_every_field_check_is_run_by_validate():
    """Out-of-range values of each declared field raise from DecodingOptions.validate with
    the field's name in the message."""
    bad = {"temperature": 0.0, "top_k": -1, "top_p": 0.0, "min_p": 1.5, "typical_p": 0.0,
           "epsilon_cutoff": 1.0, "eta_cutoff": 1.0, "top_h": 2.0, "top_n_sigma": -1.0, "top_a": 2.0,
           "tfs": 0.0, "xtc_probability": 2.0, "xtc_threshold": 0.9, "dynatemp_range": -1.0,
           "dynatemp_exponent": 0.0, "smoothing_factor": -1.0, "smoothing_curve": 0.5,
           "repetition_penalty": 0.0, "no_repeat_ngram_size": -1, "dry_multiplier": -1.0, "dry_base": 1.0,
           "dry_allowed_length": 0, "encoder_repetition_penalty": 0.0, "encoder_no_repeat_ngram_size": -1,
           "bad_words": (" ",), "logit_bias": (("", 1.0),), "min_new_tokens": -1, "length_decay_start": -1,
           "length_decay_factor": 0.5, "watermark_delta": -1.0, "watermark_gamma": 1.0,
           "contrastive_amateur": "layer:0", "cd_alpha": 0.0, "cd_beta": -1.0}
    checked = {f.name for s in REGISTRY for f in s.fields if f.check is not None}
    assert checked == set(bad)
    for name, value in bad.items():
        with pytest.raises(ValueError, match=name):
            DecodingOptions(**{name: value}).validate()


def test_every_field_flag_is_on_the_cli():
    parser = build_parser()
    flags = {s for a in parser._subparsers._group_actions[0].choices["translate"]._actions for s in a.option_strings}
    for s in REGISTRY:
        for f in s.fields:
            if f.flag is not None:
                assert f.flag in flags, f.flag
    o = options_from_args(parser.parse_args(["translate", "x", "--watermark-delta", "2", "--watermark-gamma", "0.5"]))
    assert (o.watermark_delta, o.watermark_gamma) == (2.0, 0.5) and o.stage_is_set("watermark")


def test_the_strategies_a_stage_applies_to():
    prompt = DecoderPrompt(prompt_ids=(1,), eos_token_id=2)
    o = dict(top_k=5, repetition_penalty=1.2)
    for strategy in STRATEGIES:
        names = [n for n, _ in chain_stages(DecodingOptions(strategy=strategy, **o).validate(), prompt, 1)]
        assert names == (["repetition_penalty", "top_k"] if STAGE["top_k"].applies_to(strategy)
                         else ["repetition_penalty"]), strategy
    assert STAGE["top_k"].strategies == SAMPLING_STRATEGIES and STAGE["repetition_penalty"].strategies is None


def test_the_registry_loads_without_torch():
    import subprocess

    code = "import sys, core.options, core.processors.stages; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ validate once
def test_validate_checks_an_object_once_and_keeps_the_errors(monkeypatch):
    calls = []
    check = DecodingOptions._check
    monkeypatch.setattr(DecodingOptions, "_check", lambda self: (calls.append(1), check(self))[1])
    o = DecodingOptions(top_k=3)
    assert o.validate() is o and o.validate() is o and o.validate() is o
    assert len(calls) == 1
    assert o == DecodingOptions(top_k=3) and hash(o) == hash(DecodingOptions(top_k=3))
    assert "_validated" not in o.to_dict()
    o.with_(top_k=4)  # a changed copy is checked again
    assert len(calls) == 2
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\] \(1 = off\), got 0.0"):
        DecodingOptions(top_p=0.0).validate()
    bad = DecodingOptions(num_beams=0)
    for _ in range(2):  # a failing object fails every time
        with pytest.raises(ValueError, match="num_beams must be >= 1"):
            bad.validate()


def test_the_checks_run_once_per_decode(monkeypatch, tiny_models):
    """A task validates the options and the engine validates them again (and the CLI / the
    panel before): the checks themselves run once."""
    from core.backends.hf import HFSeq2SeqBackend
    from core.engine import Engine

    calls = []
    check = DecodingOptions._check
    monkeypatch.setattr(DecodingOptions, "_check", lambda self: (calls.append(1), check(self))[1])
    tiny = tiny_models["marian"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "tiny")
    options = DecodingOptions(max_new_tokens=4).validate()  # as the task does first
    list(Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, options))
    list(Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, options))  # a re-decode
    assert len(calls) == 1
