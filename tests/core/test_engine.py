"""Engine parity with transformers' generate() on tiny random models, and engine behaviour."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine, EncoderCache
from core.events import BeamEvent, Finished, StepEvent
from core.options import DecodingOptions
from tests.core.reference import reference_steps

pytestmark = pytest.mark.usefixtures("one_torch_thread")

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


def _check_best_beam_score(tiny, options: DecodingOptions, events: list, fin: Finished) -> None:
    """The chosen hypothesis is the best finished one of the last BeamEvent, and its score is
    what the token stream shows: the sum of the logs of its StepEvents' processed
    probabilities (plus the EOS step's, when it ended by EOS) equals its cumulative score.

    The score follows transformers' beam search: processors applied to log_softmax(logits),
    not renormalised, so where a hard rule removed probability mass (Whisper's suppressed
    tokens) the reported (renormalised) probability is larger by that mass; the reference
    (teacher-forced, transformers' processors) gives the mass and the EOS probability.
    """
    steps = [e for e in events if isinstance(e, StepEvent)]
    last = [e for e in events if isinstance(e, BeamEvent)][-1]
    assert last.finished and last.finished[0].token_ids == fin.token_ids and last.finished[0].finished
    best = last.finished[0]
    ended_by_eos = fin.reason == "eos"
    assert ended_by_eos == (len(fin.token_ids) < options.max_new_tokens)
    refs = reference_steps(tiny.model, tiny.inputs, tiny.prompt, fin.token_ids, options, with_eos=ended_by_eos)
    eos = tiny.prompt.eos_token_id
    chosen = fin.token_ids + [eos] * ended_by_eos
    # the score is transformers' cumulative processed log-probability of the sequence
    expected_score = math.fsum(float(r.beam_logp[t]) for r, t in zip(refs, chosen))
    assert best.score == pytest.approx(expected_score, rel=1e-3, abs=1e-3)
    # ... and the reported step probabilities multiply to it
    log_probs = [math.log(e.prob) for e in steps]
    if ended_by_eos:
        log_probs.append(math.log(float(refs[-1].processed[eos])))
    kept_mass = math.fsum(float(torch.logsumexp(r.beam_logp, -1)) for r in refs)  # 0 without hard rules
    assert math.fsum(log_probs) + kept_mass == pytest.approx(best.score, rel=1e-3, abs=1e-3)
    if not tiny.prompt.suppress_tokens and not tiny.prompt.begin_suppress_tokens:
        assert math.exp(math.fsum(log_probs)) == pytest.approx(math.exp(best.score), rel=1e-3)


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
        _check_best_beam_score(tiny, options, events, fin)


# Beam search on models that stop: the tiny models with their EOS logit raised
# (tests/core/conftest.py EOS_BIAS). Hypotheses end at EOS after different numbers of
# tokens, so the length penalty and the handling of finished hypotheses decide the output.
EOS_MAX_NEW = 16
LENGTH_PENALTIES = [0.0, 1.0, 2.0]


@pytest.mark.parametrize("kind", ["whisper", "marian", "t5"])
@pytest.mark.parametrize("num_beams", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("length_penalty", LENGTH_PENALTIES)
def test_beam_to_eos_matches_generate(tiny_eos_models, kind, num_beams, length_penalty):
    tiny = tiny_eos_models[kind]
    options = DecodingOptions(strategy="beam", num_beams=num_beams, length_penalty=length_penalty,
                              max_new_tokens=EOS_MAX_NEW).validate()
    events, fin = _ours(tiny, options)
    expected = _generate(tiny, options, num_beams=num_beams)
    assert fin.token_ids == expected
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.token_id for e in steps] == expected
    assert fin.reason == ("eos" if len(expected) < EOS_MAX_NEW else "max_tokens")
    if num_beams > 1:
        beams = [e for e in events if isinstance(e, BeamEvent)]
        assert all(len(b.beams) == num_beams for b in beams)
        # finished hypotheses are ranked by score / generated length ** length_penalty (EOS counted)
        for b in beams:
            ranked = [h.score / min(len(h.token_ids) + 1, EOS_MAX_NEW) ** length_penalty for h in b.finished]
            assert ranked == sorted(ranked, reverse=True)
        _check_best_beam_score(tiny, options, events, fin)


def test_eos_cases_depend_on_length_penalty(tiny_eos_models):
    """The EOS cases above are not degenerate: generate() ends at EOS after different
    numbers of tokens, and for every model some beam widths give a different output for
    length penalties 0, 1 and 2 (so an engine ignoring the penalty fails above)."""
    lengths, differs = set(), {}
    for kind, tiny in tiny_eos_models.items():
        for num_beams in (2, 3, 4, 5):
            outs = set()
            for lp in LENGTH_PENALTIES:
                options = DecodingOptions(strategy="beam", num_beams=num_beams, length_penalty=lp,
                                          max_new_tokens=EOS_MAX_NEW)
                out = tuple(_generate(tiny, options, num_beams=num_beams))
                outs.add(out)
                lengths.add(len(out))
            differs[kind, num_beams] = len(outs) > 1
    for kind in tiny_eos_models:
        assert any(differs[kind, b] for b in (2, 3, 4, 5)), f"{kind}: the length penalty never matters"
    assert sum(differs.values()) >= 9, differs
    assert EOS_MAX_NEW in lengths and len([n for n in lengths if n < EOS_MAX_NEW]) >= 3, lengths


@pytest.mark.parametrize("length_penalty", [0.0, 2.0])
def test_generic_whisper_path_beam_to_eos_matches_generate(tiny_eos_models, length_penalty):
    tiny = tiny_eos_models["whisper"]
    options = DecodingOptions(strategy="beam", num_beams=3, length_penalty=length_penalty,
                              max_new_tokens=EOS_MAX_NEW)
    events, fin = _ours(tiny, options, lean=False)
    assert fin.token_ids == _generate(tiny, options, num_beams=3)
    _check_best_beam_score(tiny, options, events, fin)


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
    # top-k 20 then top-p: at most 20 tokens have non-zero processed probability, and every
    # sampled token is one of them (reference: transformers' warpers on the same logits)
    fin = events[-1]
    refs = reference_steps(tiny.model, tiny.inputs, tiny.prompt, fin.token_ids, options)
    for e, ref in zip(steps, refs):
        kept = ref.processed > 0
        assert 1 <= int(kept.sum()) <= 20
        assert kept[e.token_id], f"step {e.step}: sampled token {e.token_id} is outside top-k 20 / top-p 0.9"
        assert {t.id for t in e.topk} <= set(torch.nonzero(kept).flatten().tolist())
    no_attn = list(Engine(backend).run(encoded, tiny.prompt, options.with_(capture_attention=False)))
    assert all(e.cross_attention is None for e in no_attn if isinstance(e, StepEvent))


@pytest.mark.parametrize("kind", ["whisper", "marian", "t5"])
def test_sampling_stays_inside_top_k_and_top_p(tiny_models, kind):
    """Over many seeds every sampled token is inside the top-k / top-p set of the processed
    distribution (transformers' warpers on the same logits), while the draws do vary."""
    tiny = tiny_models[kind]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind)
    encoded = backend.encode(tiny.inputs)
    temperature = 20.0 if kind == "t5" else 1.5  # the tiny T5's logits are ~100 in size
    not_argmax = multi = 0
    for seed, (top_k, top_p) in enumerate([(3, 1.0), (50, 0.7), (4, 0.8)] * 4):
        options = DecodingOptions(strategy="sample", temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                                  max_new_tokens=8, capture_attention=False).validate()
        events = list(Engine(backend).run(encoded, tiny.prompt, options))
        ids = events[-1].token_ids
        refs = reference_steps(tiny.model, tiny.inputs, tiny.prompt, ids, options)
        for t, (tok, ref) in enumerate(zip(ids, refs)):
            kept = ref.processed > 0
            assert kept[tok], f"seed {seed} step {t}: token {tok} outside top_k={top_k} top_p={top_p}"
            multi += int(kept.sum()) > 1
            not_argmax += tok != int(torch.argmax(ref.processed))
    assert multi >= 10 and not_argmax >= 5, (multi, not_argmax)  # the filters left choices, sampling used them


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
