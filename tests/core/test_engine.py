"""Engine parity with transformers' generate() on tiny random models, and engine behaviour."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine, EncoderCache
from core.events import BeamEvent, Finished, StepEvent
from core.options import DecodingOptions

MIN_LEN = 5  # sequences compared must be longer than this (random models often stop at once)


def _generate(tiny, options: DecodingOptions, num_beams: int) -> list[int]:
    """transformers' generate() on the same model/prompt; generated ids, no prompt, no EOS."""
    inputs = dict(tiny.inputs)
    prompt = list(tiny.prompt.prompt_ids)
    kwargs = dict(
        decoder_input_ids=torch.tensor([prompt]), max_new_tokens=options.max_new_tokens, do_sample=False,
        num_beams=num_beams, length_penalty=options.length_penalty, early_stopping=False,
        repetition_penalty=options.repetition_penalty, no_repeat_ngram_size=options.no_repeat_ngram_size,
    )
    if tiny.prompt.suppress_tokens:
        kwargs["suppress_tokens"] = list(tiny.prompt.suppress_tokens)
    if tiny.prompt.begin_suppress_tokens:
        kwargs["begin_suppress_tokens"] = list(tiny.prompt.begin_suppress_tokens)
    out = tiny.model.generate(**inputs, **kwargs)[0].tolist()
    if out[: len(prompt)] == prompt:  # Whisper's generate() already strips the prompt
        out = out[len(prompt):]
    eos = tiny.prompt.eos_token_id
    return out[: out.index(eos)] if eos in out else out


def _ours(tiny, options: DecodingOptions, **backend_kw) -> tuple[list, Finished]:
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind, **backend_kw)
    encoded = backend.encode(tiny.inputs)
    events = list(Engine(backend).run(encoded, tiny.prompt, options))
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    return events, events[-1]


GREEDY_CASES = [
    dict(),
    dict(repetition_penalty=1.3),
    dict(no_repeat_ngram_size=2),
    dict(repetition_penalty=0.9, no_repeat_ngram_size=3),
]


@pytest.mark.parametrize("kind", ["whisper", "marian", "t5"])
@pytest.mark.parametrize("extra", GREEDY_CASES)
def test_greedy_matches_generate(tiny_models, kind, extra):
    tiny = tiny_models[kind]
    options = DecodingOptions(strategy="greedy", max_new_tokens=24, **extra).validate()
    events, fin = _ours(tiny, options)
    expected = _generate(tiny, options, num_beams=1)
    assert len(expected) > MIN_LEN
    assert fin.token_ids == expected
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.token_id for e in steps] == expected
    assert [e.step for e in steps] == list(range(len(expected)))


@pytest.mark.parametrize("kind", ["whisper", "marian", "t5"])
@pytest.mark.parametrize("num_beams", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
def test_beam_matches_generate(tiny_models, kind, num_beams, length_penalty):
    tiny = tiny_models[kind]
    options = DecodingOptions(strategy="beam", num_beams=num_beams, length_penalty=length_penalty,
                              max_new_tokens=16).validate()
    events, fin = _ours(tiny, options)
    expected = _generate(tiny, options, num_beams=num_beams)
    assert len(expected) > MIN_LEN
    assert fin.token_ids == expected
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.token_id for e in steps] == expected
    if num_beams > 1:
        beams = [e for e in events if isinstance(e, BeamEvent)]
        assert beams and all(len(b.beams) == num_beams for b in beams)
        assert all(b.beams[0].score >= b.beams[-1].score for b in beams)  # best first
        # the best hypothesis's reported step probabilities multiply to its processed score
        assert all(0.0 < e.prob <= 1.0 for e in steps)


@pytest.mark.parametrize("kind", ["whisper", "marian"])
@pytest.mark.parametrize("extra", [dict(repetition_penalty=1.5), dict(no_repeat_ngram_size=2)])
def test_beam_with_penalties_matches_generate(tiny_models, kind, extra):
    tiny = tiny_models[kind]
    options = DecodingOptions(strategy="beam", num_beams=3, max_new_tokens=16, **extra).validate()
    _, fin = _ours(tiny, options)
    expected = _generate(tiny, options, num_beams=3)
    assert len(expected) > MIN_LEN
    assert fin.token_ids == expected


def test_generic_whisper_path_matches_generate_too(tiny_models):
    tiny = tiny_models["whisper"]
    for options in [DecodingOptions(strategy="greedy", max_new_tokens=20),
                    DecodingOptions(strategy="beam", num_beams=4, max_new_tokens=12)]:
        _, fin = _ours(tiny, options, lean=False)
        expected = _generate(tiny, options, num_beams=options.num_beams if options.strategy == "beam" else 1)
        assert len(expected) > MIN_LEN and fin.token_ids == expected


def test_step_events_are_plain_data_and_consistent(tiny_models):
    tiny = tiny_models["whisper"]
    options = DecodingOptions(strategy="sample", temperature=0.8, top_k=20, top_p=0.9, max_new_tokens=12,
                              top_k_report=5, seed=3).validate()
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    encoded = backend.encode({**tiny.inputs, "source_len": 30})
    events = list(Engine(backend).run(encoded, tiny.prompt, options, step_offset=7, segment=2, source_offset=40))
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert len(steps) > 3
    for e in events:
        for f in dataclasses.fields(e):
            value = getattr(e, f.name)
            assert not torch.is_tensor(value), f"{type(e).__name__}.{f.name} is a torch tensor"
    for e in steps:
        assert e.segment == 2 and e.source_offset == 40
        assert isinstance(e.cross_attention, np.ndarray) and e.cross_attention.dtype == np.float32
        assert e.cross_attention.shape == (2, 4, 30)  # layers, heads, source_len
        # the processed top-k lists only tokens the filters kept (top-p may keep fewer than 5)
        assert 1 <= len(e.topk) <= 5 and all(t.prob > 0 for t in e.topk) and len(e.raw_topk) == 5
        assert e.topk[0].prob >= e.topk[-1].prob
        assert 0 < e.prob <= 1 and 0 < e.raw_prob <= 1
        assert e.entropy >= 0
        assert all(t.id not in (7, 8) for t in e.raw_topk)  # hard rules apply to raw too
        assert sum(t.prob for t in e.topk) <= 1 + 1e-5
    assert [e.step for e in steps] == list(range(7, 7 + len(steps)))
    # top-k 20 then top-p: at most 20 tokens have non-zero processed probability
    no_attn = list(Engine(backend).run(encoded, tiny.prompt, options.with_(capture_attention=False)))
    assert all(e.cross_attention is None for e in no_attn if isinstance(e, StepEvent))


def test_sampling_is_reproducible_with_a_seed(tiny_models):
    tiny = tiny_models["t5"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "t5")
    encoded = backend.encode(tiny.inputs)
    engine = Engine(backend)

    def ids(seed):
        opts = DecodingOptions(strategy="sample", temperature=1.5, seed=seed, max_new_tokens=20)
        return list(engine.run(encoded, tiny.prompt, opts))[-1].token_ids

    first = ids(1)
    assert len(first) > MIN_LEN
    assert ids(1) == first
    others = [ids(s) for s in range(2, 6)]
    assert any(o != first for o in others)


def test_processed_probabilities_follow_temperature(tiny_models):
    """Greedy picks the same tokens at any temperature; the reported processed
    distribution is sharper at a lower temperature (lower entropy) while raw is unchanged."""
    tiny = tiny_models["marian"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "m")
    encoded = backend.encode(tiny.inputs)
    runs = {}
    for t in (0.5, 1.0, 2.0):
        ev = [e for e in Engine(backend).run(encoded, tiny.prompt, DecodingOptions(temperature=t, max_new_tokens=10))
              if isinstance(e, StepEvent)]
        runs[t] = ev
    assert [e.token_id for e in runs[0.5]] == [e.token_id for e in runs[2.0]]
    for a, b, c in zip(runs[0.5], runs[1.0], runs[2.0]):
        assert a.entropy <= b.entropy <= c.entropy
        assert a.raw_prob == pytest.approx(c.raw_prob, rel=1e-5)
        assert b.prob == pytest.approx(b.raw_prob, rel=1e-5)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_cancel_stops_between_steps(tiny_models, strategy):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    calls = {"step": 0}
    real_step = backend.step

    def counting_step(*a, **k):
        calls["step"] += 1
        return real_step(*a, **k)

    backend.step = counting_step
    encoded = backend.encode(tiny.inputs)
    polls = {"n": 0}

    def cancel():
        polls["n"] += 1
        return polls["n"] > 3

    events = list(Engine(backend).run(encoded, tiny.prompt, DecodingOptions(strategy=strategy, max_new_tokens=30),
                                      cancel=cancel))
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.cancelled and fin.reason == "cancelled"
    assert calls["step"] == 3
    assert len(fin.token_ids) <= 3


def test_encoder_cache_encodes_once(tiny_models):
    tiny = tiny_models["marian"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "m")
    cache = EncoderCache(max_items=2)
    n_encodes = {"n": 0}

    def encode():
        n_encodes["n"] += 1
        return backend.encode(tiny.inputs)

    results = []
    for opts in [DecodingOptions(), DecodingOptions(strategy="beam", num_beams=3), DecodingOptions(temperature=0.5)]:
        encoded, hit = cache.get_or_encode(("marian", "input-1"), encode)
        results.append(hit)
        list(Engine(backend).run(encoded, tiny.prompt, opts.with_(max_new_tokens=5)))
    assert n_encodes["n"] == 1 and results == [False, True, True]
    cache.get_or_encode("b", encode)
    cache.get_or_encode("c", encode)  # evicts the least recently used ("marian", "input-1")
    _, hit = cache.get_or_encode(("marian", "input-1"), encode)
    assert not hit and n_encodes["n"] == 4 and len(cache) == 2


def test_bad_options_raise(tiny_models):
    tiny = tiny_models["t5"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "t5")
    encoded = backend.encode(tiny.inputs)
    with pytest.raises(ValueError, match="temperature"):
        list(Engine(backend).run(encoded, tiny.prompt, DecodingOptions(temperature=0.0)))
    with pytest.raises(ValueError, match="prompt"):
        list(Engine(backend).run(encoded, dataclasses.replace(tiny.prompt, prompt_ids=()), DecodingOptions()))
    with pytest.raises(ValueError):
        EncoderCache(0)
