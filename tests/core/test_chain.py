"""The sampler chain as a whole: default order = transformers' order, the user's order and
switches are obeyed, and each StepEvent reports what every stage kept.

Per-processor parity is in test_processors_parity.py (transformers classes) and
test_llama_samplers.py (llama.cpp / webui definitions); here the processors are composed.
"""

import math

import pytest
import torch
from transformers import GenerationConfig

from core.backends.base import DecoderPrompt
from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import StepEvent
from core.options import DecodingOptions
from core.processors import ChainContext, build_processors
from tests.core.conftest import V, tiny_marian

EOS = 0
PROMPT = DecoderPrompt(prompt_ids=(V - 1,), eos_token_id=EOS)


@pytest.fixture(scope="module")
def marian():
    return tiny_marian(seed=3)


def _context(tiny):
    tok = tiny.tokenizer
    return ChainContext(
        tokenize=lambda text: tok.encode(text, add_special_tokens=False),
        encoder_input_ids=tiny.inputs["input_ids"],
    )


EVERYTHING = dict(
    temperature=0.7, top_k=30, top_p=0.9, min_p=0.02, typical_p=0.95, epsilon_cutoff=1e-4, eta_cutoff=1e-3,
    repetition_penalty=1.3, no_repeat_ngram_size=2, encoder_repetition_penalty=1.2,
    encoder_no_repeat_ngram_size=2, min_new_tokens=6,
)


def _transformers_chain(tiny, do_sample: bool, prompt_len: int):
    """transformers' own processor list for the same settings (GenerationMixin._get_logits_processor)."""
    cfg = GenerationConfig(
        do_sample=do_sample, eos_token_id=EOS, decoder_start_token_id=V - 1, pad_token_id=V - 1,
        bad_words_ids=[[5], [7, 8]], sequence_bias={(9,): 2.0, (3, 4): -1.5},
        exponential_decay_length_penalty=(2, 1.1), **EVERYTHING,
    )
    tiny.model._prepare_special_tokens(cfg, kwargs_has_attention_mask=True, device="cpu")
    return tiny.model._get_logits_processor(cfg, input_ids_seq_length=prompt_len,
                                            encoder_input_ids=tiny.inputs["input_ids"], device="cpu")


def _ours(tiny, strategy: str, **changes):
    options = DecodingOptions(
        strategy=strategy, bad_words=("w5", "w7 w8"), logit_bias=(("w9", 2.0), ("w3 w4", -1.5)),
        length_decay_start=2, length_decay_factor=1.1, **EVERYTHING,
    ).with_(**changes)
    return build_processors(options, PROMPT, len(PROMPT.prompt_ids), _context(tiny))


def _histories(seed: int, n: int):
    """input_ids rows (prompt + tokens with repeats, some from the source) of lengths 1..n."""
    g = torch.Generator().manual_seed(seed)
    body = torch.randint(1, 12, (n,), generator=g)  # small ids: repeats and source overlap happen
    return [torch.cat([torch.tensor([V - 1]), body[:k]])[None] for k in range(n + 1)]


@pytest.mark.parametrize("strategy,do_sample", [("sample", True), ("greedy", False), ("beam", False)])
def test_default_order_equals_transformers_generate_chain(marian, strategy, do_sample):
    theirs = _transformers_chain(marian, do_sample, prompt_len=1)
    ours = _ours(marian, strategy)
    names = [type(p).__name__ for p in theirs]
    assert len(ours) == len(theirs), (names, [p.name for p in ours])
    g = torch.Generator().manual_seed(0)
    fired = 0
    for seed in range(3):
        for input_ids in _histories(seed, 9):
            scores = torch.randn(1, V, generator=g) * 3
            if strategy == "beam":
                scores = torch.log_softmax(scores, dim=-1)
            expected = theirs(input_ids, scores.clone())
            got = ours(input_ids, scores.clone())
            assert torch.equal(torch.isinf(got), torch.isinf(expected)), (seed, input_ids.shape)
            finite = ~torch.isinf(expected)
            torch.testing.assert_close(got[finite], expected[finite], rtol=1e-5, atol=1e-5)
            fired += int(not torch.equal(got, scores))
    assert fired > 20  # the chain changed the scores: the comparison is not vacuous


def test_user_order_and_switches_are_obeyed(marian):
    base = dict(temperature=2.0, top_p=0.5)
    default = DecodingOptions(strategy="sample", **base)
    swapped = default.with_(sampler_order=("top_p", "temperature") + tuple(
        s for s in default.sampler_order if s not in ("top_p", "temperature")))
    off = default.with_(disabled_stages=("top_p",))
    build = lambda o: build_processors(o, PROMPT, 1, _context(marian))  # noqa: E731
    assert [p.name for p in build(default)] == ["temperature", "top_p"]
    assert [p.name for p in build(swapped)] == ["top_p", "temperature"]
    assert [p.name for p in build(off)] == ["temperature"]
    # the order matters: the nucleus of the flattened distribution is larger
    scores = torch.randn(1, V, generator=torch.Generator().manual_seed(1)) * 3
    ids = torch.tensor([[V - 1]])
    kept = lambda o: int(torch.isfinite(build(o)(ids, scores)).sum())  # noqa: E731
    assert kept(default) > kept(swapped)


def test_stage_needing_what_the_model_lacks_is_a_clear_error(marian):
    no_source = ChainContext(tokenize=_context(marian).tokenize)
    with pytest.raises(ValueError, match="applies to translation only"):
        build_processors(DecodingOptions(encoder_repetition_penalty=1.2), PROMPT, 1, no_source)
    with pytest.raises(ValueError, match="needs the model's tokenizer"):
        build_processors(DecodingOptions(bad_words=("w5",)), PROMPT, 1, ChainContext())


@pytest.fixture(scope="module")
def full_report_run(marian):
    """A sampled run whose top-k lists hold the whole vocabulary, so the reported
    stage numbers can be recomputed from the reported distributions."""
    backend = HFSeq2SeqBackend(marian.model, marian.tokenizer, name="tiny")
    encoded = backend.encode(marian.inputs)
    options = DecodingOptions(strategy="sample", top_k=5, min_p=0.2, temperature=0.8, repetition_penalty=1.5,
                              max_new_tokens=12, top_k_report=V, seed=4)
    events = [e for e in Engine(backend).run(encoded, marian.prompt, options) if isinstance(e, StepEvent)]
    assert len(events) >= 3
    return events


def test_stage_reports_follow_the_chain(full_report_run):
    for ev in full_report_run:
        assert [s.name for s in ev.stages] == ["repetition_penalty", "temperature", "top_k", "min_p"]
        kept = [s.kept for s in ev.stages]
        assert kept[0] == kept[1] == V  # the penalty and temperature remove nothing
        assert 1 <= kept[3] <= kept[2] <= 5 and ev.kept == kept[3] == len(ev.topk)
        assert ev.stages[0].mass == pytest.approx(1.0) and ev.stages[1].mass == pytest.approx(1.0)
        # top-k keeps the 5 most probable tokens of the distribution entering it
        entering = dict(zip((c.id for c in ev.stage_candidates), ev.stages[1].probs.tolist()))
        assert ev.stages[2].mass == pytest.approx(sum(sorted(entering.values())[-5:]), abs=1e-5)
        # after the last stage the candidates' probabilities are the processed distribution
        processed = {t.id: t.prob for t in ev.topk}
        for cand, p in zip(ev.stage_candidates, ev.stages[-1].probs.tolist()):
            assert p == pytest.approx(processed.get(cand.id, 0.0), abs=1e-6)
        # the candidates carry the raw probabilities
        raw = {t.id: t.prob for t in ev.raw_topk}
        assert all(c.prob == pytest.approx(raw[c.id], abs=1e-6) for c in ev.stage_candidates)


def test_rank_entropy_and_varentropy_of_the_raw_distribution(full_report_run):
    for ev in full_report_run:
        raw = [t.prob for t in ev.raw_topk]  # the whole vocabulary, most probable first
        assert ev.rank == 1 + sum(p > ev.raw_prob for p in raw)
        h = -sum(p * math.log(p) for p in raw if p > 0)
        v = sum(p * (math.log(p) + h) ** 2 for p in raw if p > 0)
        assert ev.raw_entropy == pytest.approx(h, rel=1e-4)
        assert ev.raw_varentropy == pytest.approx(v, rel=1e-3, abs=1e-6)
    assert any(ev.rank > 1 for ev in full_report_run)  # sampling picked a non-favourite at least once
