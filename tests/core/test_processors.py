"""Our logits processors give the same scores as transformers' processors/warpers."""

from __future__ import annotations

import pytest
import torch
from transformers.generation import logits_process as tlp

from core.backends.base import DecoderPrompt
from core.options import DecodingOptions
from core.processors import (
    BeginSuppressTokens,
    NoRepeatNGram,
    RepetitionPenalty,
    SuppressTokens,
    Temperature,
    TopK,
    TopP,
    apply_processors,
    build_processors,
    split_hard_rules,
)

VOCAB = 37


def _inputs(seed: int, batch: int, seq_len: int = 9, vocab: int = VOCAB, ties: bool = False):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, 6, (batch, seq_len), generator=g)  # few ids -> repeats, n-gram hits
    scores = torch.randn(batch, vocab, generator=g) * 3
    if ties:  # quantise so many scores are exactly equal
        scores = torch.round(scores)
    return input_ids, scores


def _same(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.shape == theirs.shape
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    finite = ~torch.isinf(theirs)
    torch.testing.assert_close(ours[finite], theirs[finite], rtol=0, atol=1e-6)


CASES = [(seed, batch, ties) for seed in range(3) for batch in (1, 3) for ties in (False, True)]


@pytest.mark.parametrize("seed,batch,ties", CASES)
@pytest.mark.parametrize("penalty", [0.5, 1.0, 1.3, 2.0])
def test_repetition_penalty_matches_transformers(seed, batch, ties, penalty):
    ids, scores = _inputs(seed, batch, ties=ties)
    _same(RepetitionPenalty(penalty)(ids, scores), tlp.RepetitionPenaltyLogitsProcessor(penalty)(ids, scores.clone()))


@pytest.mark.parametrize("seed,batch,ties", CASES)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 12])
def test_no_repeat_ngram_matches_transformers(seed, batch, ties, n):
    ids, scores = _inputs(seed, batch, ties=ties)
    theirs = tlp.NoRepeatNGramLogitsProcessor(n)(ids, scores.clone())
    ours = NoRepeatNGram(n)(ids, scores)
    _same(ours, theirs)
    if n <= 2:  # with 6 distinct ids and 9 tokens some n-gram must repeat: the test is not vacuous
        assert torch.isinf(ours).any()


@pytest.mark.parametrize("seed,batch,ties", CASES)
@pytest.mark.parametrize("temperature", [0.05, 0.7, 1.0, 1.5, 10.0])
def test_temperature_matches_transformers(seed, batch, ties, temperature):
    ids, scores = _inputs(seed, batch, ties=ties)
    _same(Temperature(temperature)(ids, scores), tlp.TemperatureLogitsWarper(temperature)(ids, scores.clone()))


@pytest.mark.parametrize("seed,batch,ties", CASES)
@pytest.mark.parametrize("k", [1, 2, 5, VOCAB - 1, VOCAB, VOCAB + 50])
@pytest.mark.parametrize("min_keep", [1, 3])
def test_top_k_matches_transformers(seed, batch, ties, k, min_keep):
    ids, scores = _inputs(seed, batch, ties=ties)
    theirs = tlp.TopKLogitsWarper(k, min_tokens_to_keep=min_keep)(ids, scores.clone())
    _same(TopK(k, min_tokens_to_keep=min_keep)(ids, scores), theirs)


@pytest.mark.parametrize("seed,batch,ties", CASES)
@pytest.mark.parametrize("p", [1e-6, 0.01, 0.3, 0.5, 0.9, 0.999, 0.999999, 1.0])
@pytest.mark.parametrize("min_keep", [1, 2])
def test_top_p_matches_transformers(seed, batch, ties, p, min_keep):
    ids, scores = _inputs(seed, batch, ties=ties)
    theirs = tlp.TopPLogitsWarper(p, min_tokens_to_keep=min_keep)(ids, scores.clone())
    _same(TopP(p, min_tokens_to_keep=min_keep)(ids, scores), theirs)


@pytest.mark.parametrize("seed,batch", [(0, 1), (1, 4)])
def test_suppress_tokens_match_transformers(seed, batch):
    ids, scores = _inputs(seed, batch)
    suppress = [0, 3, 7, VOCAB - 1, VOCAB + 5]  # an id beyond the vocabulary is ignored
    _same(SuppressTokens(suppress)(ids, scores), tlp.SuppressTokensLogitsProcessor(suppress)(ids, scores.clone()))
    for begin_index in (ids.shape[1], ids.shape[1] - 1):  # fires only at the first free step
        theirs = tlp.SuppressTokensAtBeginLogitsProcessor([2, 5], begin_index)(ids, scores.clone())
        _same(BeginSuppressTokens([2, 5], begin_index)(ids, scores), theirs)


def _transformers_chain(options: DecodingOptions, prompt: DecoderPrompt, prompt_len: int):
    """The processor list transformers' generate() builds for these settings, same order."""
    chain = []
    if options.repetition_penalty != 1.0:
        chain.append(tlp.RepetitionPenaltyLogitsProcessor(options.repetition_penalty))
    if options.no_repeat_ngram_size:
        chain.append(tlp.NoRepeatNGramLogitsProcessor(options.no_repeat_ngram_size))
    if prompt.suppress_tokens:
        chain.append(tlp.SuppressTokensLogitsProcessor(list(prompt.suppress_tokens)))
    if prompt.begin_suppress_tokens:
        chain.append(tlp.SuppressTokensAtBeginLogitsProcessor(list(prompt.begin_suppress_tokens), prompt_len))
    if options.strategy == "sample":
        if options.temperature != 1.0:
            chain.append(tlp.TemperatureLogitsWarper(options.temperature))
        if options.top_k:
            chain.append(tlp.TopKLogitsWarper(options.top_k))
        if options.top_p < 1.0:
            chain.append(tlp.TopPLogitsWarper(options.top_p))
    return tlp.LogitsProcessorList(chain)


OPTION_SETS = [
    dict(strategy="sample", temperature=0.7, top_k=5, top_p=0.9, repetition_penalty=1.2, no_repeat_ngram_size=2),
    dict(strategy="sample", temperature=1.3, top_k=0, top_p=0.5),
    dict(strategy="sample", top_k=100, top_p=1.0, repetition_penalty=0.8),
    dict(strategy="beam", num_beams=3, temperature=0.5, top_k=3, repetition_penalty=1.5, no_repeat_ngram_size=3),
]


@pytest.mark.parametrize("opts", OPTION_SETS)
@pytest.mark.parametrize("at_begin", [True, False])
def test_build_processors_chain_matches_generate_order(opts, at_begin):
    options = DecodingOptions(**opts).validate()
    ids, scores = _inputs(7, 2)
    prompt = DecoderPrompt(prompt_ids=(1, 2), eos_token_id=0, suppress_tokens=(4, 9), begin_suppress_tokens=(0, 11))
    prompt_len = ids.shape[1] if at_begin else 2
    ours = apply_processors(build_processors(options, prompt, prompt_len), ids, scores)
    theirs = _transformers_chain(options, prompt, prompt_len)(ids, scores.clone())
    _same(ours, theirs)
    # rules first, then the rest: same numbers (the engine computes the raw distribution this way)
    rules, rest = split_hard_rules(build_processors(options, prompt, prompt_len))
    _same(apply_processors(rest, ids, apply_processors(rules, ids, scores)), theirs)
    assert torch.isinf(ours[:, 4]).all() and torch.isinf(ours[:, 9]).all()
    rules_only = apply_processors(rules, ids, scores)
    assert bool(torch.isinf(rules_only[:, 11]).all()) == at_begin


def test_processors_do_not_modify_scores_in_place():
    ids, scores = _inputs(3, 2)
    before = scores.clone()
    for p in [RepetitionPenalty(1.5), NoRepeatNGram(2), Temperature(0.5), TopK(3), TopP(0.5),
              SuppressTokens([1]), BeginSuppressTokens([1], ids.shape[1])]:
        p(ids, scores)
    assert torch.equal(scores, before)


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: RepetitionPenalty(0.0), "repetition penalty"),
        (lambda: NoRepeatNGram(0), "n-gram"),
        (lambda: Temperature(0.0), "temperature"),
        (lambda: TopK(0), "top_k"),
        (lambda: TopP(1.5), "top_p"),
        (lambda: SuppressTokens([-1]), "suppress_tokens"),
        (lambda: BeginSuppressTokens([1], -2), "begin_index"),
    ],
)
def test_bad_arguments_raise_clear_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()
