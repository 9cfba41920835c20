"""The sampling warpers in core/processors/warpers.py (min-p, typical-p, epsilon, eta,
top-h) and the constraints in core/processors/constraints.py give the same scores as
the transformers classes they reimplement, on random scores over many settings."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.generation import logits_process as tlp

from core.processors.constraints import (
    EncoderNoRepeatNGram,
    EncoderRepetitionPenalty,
    ExponentialDecayLengthPenalty,
    MinNewTokens,
    NoBadWords,
    SequenceBias,
)
from core.processors.warpers import (
    EpsilonCutoff,
    EtaCutoff,
    MinP,
    Temperature,
    TopH,
    TopK,
    TopP,
    TypicalP,
)

SEEDS = (0, 1, 2)
KINDS = ("logits", "ties", "peaked", "neg_inf", "log_probs")


def _scores(seed: int, batch: int, vocab: int, kind: str) -> torch.Tensor:
    """Random float32 (batch, vocab) scores of one kind:

    logits: N(0, 3^2); ties: the same rounded to integers (many equal scores);
    peaked: N(0, 8^2), a confident model whose filters keep one token;
    neg_inf: logits where an earlier filter already set ~60% to -inf (the best kept);
    log_probs: log-softmax of the neg_inf kind, as beam search gives.
    """
    g = torch.Generator().manual_seed(1000 * seed + 10 * batch + vocab)
    scores = torch.randn(batch, vocab, generator=g) * 3
    if kind == "ties":
        return torch.round(scores)
    if kind == "peaked":
        return scores * (8 / 3)
    if kind in ("neg_inf", "log_probs"):
        drop = torch.rand(batch, vocab, generator=g) < 0.6
        drop.scatter_(1, scores.argmax(dim=-1, keepdim=True), False)
        scores = scores.masked_fill(drop, float("-inf"))
        if kind == "log_probs":
            scores = scores.log_softmax(dim=-1)
    assert scores.dtype == torch.float32
    return scores


def _same(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    """Same shape and dtype, the same -inf (and +inf) pattern, finite values equal to 1e-6."""
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert torch.equal(ours == float("-inf"), theirs == float("-inf"))
    assert torch.equal(ours == float("inf"), theirs == float("inf"))
    finite = torch.isfinite(theirs)
    assert torch.equal(torch.isfinite(ours), finite)
    torch.testing.assert_close(ours[finite], theirs[finite], rtol=1e-6, atol=1e-6)


def _check_warper(ours, theirs, batch: int, vocab: int, kind: str) -> list[int]:
    """Parity over SEEDS; returns the number of tokens kept per row, for the callers'
    non-vacuity checks. Also: never in place, the input's -inf stay -inf, a row keeps >= 1."""
    kept = []
    for seed in SEEDS:
        scores = _scores(seed, batch, vocab, kind)
        before = scores.clone()
        ids = torch.zeros(batch, 3, dtype=torch.long)
        out = ours(ids, scores)
        assert torch.equal(scores, before)  # not modified in place
        _same(out, theirs(ids, scores.clone()))
        assert not torch.isfinite(out[~torch.isfinite(scores)]).any()
        kept += torch.isfinite(out).sum(dim=-1).tolist()
    assert min(kept) >= 1
    return kept


SHAPES = [(batch, vocab, kind) for batch in (1, 3) for vocab in (50, 1000) for kind in KINDS]


# ---------------------------------------------------------------- sampling warpers


@pytest.mark.parametrize("batch,vocab,kind", SHAPES)
@pytest.mark.parametrize("min_p", [0.0, 1e-3, 0.05, 0.2, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("min_keep", [1, 3])
def test_min_p_matches_transformers(batch, vocab, kind, min_p, min_keep):
    kept = _check_warper(MinP(min_p, min_keep), tlp.MinPLogitsWarper(min_p, min_tokens_to_keep=min_keep),
                         batch, vocab, kind)
    if min_p == 0.0 and kind not in ("neg_inf", "log_probs"):
        assert min(kept) == vocab  # off
    if min_p == 1.0 and kind in ("logits", "peaked"):
        assert set(kept) == {min_keep}  # only the best survives the threshold; min_keep are spared


@pytest.mark.parametrize("batch,vocab,kind", SHAPES)
@pytest.mark.parametrize("mass", [1e-4, 0.2, 0.5, 0.9, 0.99, 0.9999])
@pytest.mark.parametrize("min_keep", [1, 3])
def test_typical_p_matches_transformers(batch, vocab, kind, mass, min_keep):
    kept = _check_warper(TypicalP(mass, min_keep), tlp.TypicalLogitsWarper(mass, min_tokens_to_keep=min_keep),
                         batch, vocab, kind)
    if mass == 1e-4 and kind in ("logits", "peaked"):
        assert set(kept) == {min_keep}
    if mass == 0.9 and kind == "logits":
        assert 1 < max(kept) < vocab


@pytest.mark.parametrize("batch,vocab,kind", SHAPES)
@pytest.mark.parametrize("epsilon", [1e-4, 3e-4, 3e-3, 0.05, 0.3, 0.9999])
@pytest.mark.parametrize("min_keep", [1, 3])
def test_epsilon_cutoff_matches_transformers(batch, vocab, kind, epsilon, min_keep):
    kept = _check_warper(EpsilonCutoff(epsilon, min_keep),
                         tlp.EpsilonLogitsWarper(epsilon, min_tokens_to_keep=min_keep), batch, vocab, kind)
    if epsilon == 0.9999 and kind in ("logits", "peaked"):
        assert set(kept) == {min_keep}  # nothing reaches the cutoff: the min_keep best remain
    if epsilon == 3e-3 and kind == "logits":
        assert max(kept) > min_keep and min(kept) < vocab  # the cutoff both removes and keeps


@pytest.mark.parametrize("batch,vocab,kind", SHAPES)
@pytest.mark.parametrize("epsilon", [1e-4, 4e-3, 0.02, 0.3, 0.9999])
@pytest.mark.parametrize("min_keep", [1, 3])
def test_eta_cutoff_matches_transformers(batch, vocab, kind, epsilon, min_keep):
    kept = _check_warper(EtaCutoff(epsilon, min_keep), tlp.EtaLogitsWarper(epsilon, min_tokens_to_keep=min_keep),
                         batch, vocab, kind)
    if epsilon == 4e-3 and kind == "logits":
        assert max(kept) > min_keep and min(kept) < vocab  # the cutoff both removes and keeps


@pytest.mark.parametrize("batch,vocab,kind", SHAPES)
@pytest.mark.parametrize("top_h", [1e-3, 0.1, 0.4, 0.7, 0.95, 1.0])
def test_top_h_matches_transformers(batch, vocab, kind, top_h):
    kept = _check_warper(TopH(top_h), tlp.TopHLogitsWarper(top_h), batch, vocab, kind)
    assert max(kept) <= TopH.top_n  # only the 100 best are candidates
    if top_h == 1e-3 and kind in ("logits", "peaked"):
        assert set(kept) == {1}
    if top_h == 0.7 and kind == "logits":
        assert 1 < min(kept)


def test_top_h_drops_candidates_whose_probability_underflows():
    # the 3rd candidate's probability underflows to 0 in float32: transformers' 0 * log 0 = nan
    # removes it and every later candidate, although their entropy terms are 0
    scores = torch.tensor([[0.0, 0.0, -200.0, -200.0, -300.0]])
    ids = torch.zeros(1, 1, dtype=torch.long)
    ours = TopH(1.0)(ids, scores)
    _same(ours, tlp.TopHLogitsWarper(1.0)(ids, scores.clone()))
    assert torch.isfinite(ours).tolist() == [[True, True, False, False, False]]


@pytest.mark.parametrize(
    "ours,theirs",
    [
        (MinP(1.0), tlp.MinPLogitsWarper(1.0)),  # p = the top probability
        (TopH(1.0), tlp.TopHLogitsWarper(1.0)),  # accumulated entropy = H
    ],
)
def test_a_probability_exactly_at_the_threshold_is_kept(ours, theirs):
    scores, ids = torch.tensor([[0.0, 0.0, float("-inf")]]), torch.zeros(1, 1, dtype=torch.long)
    out = ours(ids, scores)
    _same(out, theirs(ids, scores.clone()))
    assert torch.isfinite(out).tolist() == [[True, True, False]]


def test_epsilon_keeps_a_token_exactly_at_the_cutoff():
    scores, ids = torch.tensor([[2.0, 0.0, -1.0]]), torch.zeros(1, 1, dtype=torch.long)
    epsilon = scores.softmax(dim=-1)[0, 1].item()  # token 1's float32 probability, exactly
    out = EpsilonCutoff(epsilon)(ids, scores)
    _same(out, tlp.EpsilonLogitsWarper(epsilon)(ids, scores.clone()))
    assert torch.isfinite(out).tolist() == [[True, True, False]]


def test_min_p_spares_tokens_by_probability_even_when_it_underflows():
    # tokens 1-4 and 6 all have probability 0 in float32: which of them min_tokens_to_keep
    # spares is torch.topk's pick among equal probabilities, not the best score (-200)
    scores = torch.tensor([[0.0, -200.0, -201.0, -202.0, -203.0, -150.0, -300.0]])
    ids = torch.zeros(1, 1, dtype=torch.long)
    out = MinP(0.5, 3)(ids, scores)
    _same(out, tlp.MinPLogitsWarper(0.5, min_tokens_to_keep=3)(ids, scores.clone()))
    assert int(torch.isfinite(out).sum()) == 3


def test_min_p_spares_exactly_min_tokens_to_keep_on_ties_unlike_epsilon():
    """Min-p spares exactly min_tokens_to_keep tokens (topk's pick among ties); epsilon and
    eta spare every token tied with the min_tokens_to_keep-th best."""
    scores = torch.tensor([[10.0, 0.0, 0.0, 0.0, -5.0]])
    ids = torch.zeros(1, 1, dtype=torch.long)
    assert int(torch.isfinite(MinP(0.5, 2)(ids, scores)).sum()) == 2
    assert int(torch.isfinite(EpsilonCutoff(0.5, 2)(ids, scores)).sum()) == 4
    assert int(torch.isfinite(EtaCutoff(0.5, 2)(ids, scores)).sum()) == 4


def test_warper_names():
    assert [c.name for c in (Temperature, TopK, TopP, MinP, TypicalP, EpsilonCutoff, EtaCutoff, TopH)] == [
        "temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "top_h"]
    assert [c.name for c in (NoBadWords, SequenceBias, MinNewTokens, ExponentialDecayLengthPenalty,
                             EncoderRepetitionPenalty, EncoderNoRepeatNGram)] == [
        "bad_words", "sequence_bias", "min_new_tokens", "exponential_decay_length_penalty",
        "encoder_repetition_penalty", "encoder_no_repeat_ngram"]


# ---------------------------------------------------------------- constraints

PROMPT = [1, 2, 3]  # forced decoder prompt (e.g. start, language, task tokens)
EOS = 0


def _input_ids(seed: int, batch: int, new_tokens: int = 8) -> torch.Tensor:
    """int64 (batch, 3 + new_tokens): the forced prompt then tokens drawn from 4..9, so
    n-grams repeat and bias/bad-word prefixes match."""
    g = torch.Generator().manual_seed(seed)
    generated = torch.randint(4, 10, (batch, new_tokens), generator=g)
    return torch.cat([torch.tensor(PROMPT).expand(batch, -1), generated], dim=1)


def _constraint_scores(seed: int, batch: int, vocab: int, kind: str) -> torch.Tensor:
    """``_scores``, with the first and last rows finite on ids 0..19 (those the biases,
    bad words and EOS use), so that a change there shows; other rows keep their -inf."""
    scores = _scores(seed, batch, vocab, kind)
    g = torch.Generator().manual_seed(seed + 5)
    for row in (0, batch - 1):
        scores[row, :20] = torch.where(torch.isfinite(scores[row, :20]), scores[row, :20],
                                       torch.randn(20, generator=g) - 8)
    return scores


def _check_constraint(ours, theirs, ids: torch.Tensor, scores: torch.Tensor) -> bool:
    """Parity, not in place; returns whether the processor changed any score."""
    before = scores.clone()
    out = ours(ids, scores)
    assert torch.equal(scores, before)
    _same(out, theirs(ids, scores.clone()))
    return not torch.equal(out, scores)


CONSTRAINT_SHAPES = [(batch, vocab, kind) for batch in (1, 3) for vocab in (50, 1000)
                     for kind in ("logits", "neg_inf", "log_probs")]


def _bias_table(ids: torch.Tensor, seed: int) -> dict[tuple[int, ...], float]:
    """Biased sequences, some completing the end of row 0 of ``ids``: one-token ones,
    2- and 3-token ones, two ending in the same token (their biases add up), a prefix
    as long as ``ids`` and one longer (never matches), a -inf ban, a random one."""
    g = torch.Generator().manual_seed(seed)
    row = ids[0].tolist()
    return {
        (5,): 1.5,
        (11,): -2.25,
        (row[-1], 12): 3.0,
        (row[-2], row[-1], 13): -1.0,
        (row[-1], 13): 0.5,  # same last token as the previous one
        (row[-1], 4, 9, 14): -4.0,
        (8, 8, 8, 15): 2.0,
        tuple(row) + (16,): -0.75,  # prefix as long as ids: matches row 0 only
        tuple([7] * (len(row) + 1)) + (17,): 9.0,  # prefix longer than ids: never matches
        (row[-1], 18): float("-inf"),
        (int(torch.randint(4, 10, (1,), generator=g)), 19): float(torch.randn(1, generator=g)),
    }


@pytest.mark.parametrize("batch,vocab,kind", CONSTRAINT_SHAPES)
def test_sequence_bias_matches_transformers(batch, vocab, kind):
    for seed in SEEDS:
        ids = _input_ids(seed, batch)
        table = _bias_table(ids, seed)
        scores = _constraint_scores(seed, batch, vocab, kind)
        assert _check_constraint(SequenceBias(table), tlp.SequenceBiasLogitsProcessor(table), ids, scores)
        out = SequenceBias(table)(ids, scores)
        # the multi-token biases fired on row 0
        assert torch.isclose(out[0, 12], scores[0, 12] + 3.0)
        assert torch.isclose(out[0, 13], scores[0, 13] - 0.5)
        assert torch.isclose(out[0, 16], scores[0, 16] - 0.75)
        assert out[0, 18] == float("-inf")


@pytest.mark.parametrize("batch,vocab,kind", CONSTRAINT_SHAPES)
@pytest.mark.parametrize("eos", [EOS, 7, None])
def test_no_bad_words_matches_transformers(batch, vocab, kind, eos):
    for seed in SEEDS:
        ids = _input_ids(seed, batch)
        row = ids[-1].tolist()
        bad = [[EOS], [11], [row[-1], 12], [row[-2], row[-1], 13], [9, 9, 9, 14], [7], [EOS, 15],
               row + [16], [5] * (len(row) + 1) + [17], [11]]
        scores = _constraint_scores(seed, batch, vocab, kind)
        assert _check_constraint(NoBadWords(bad, eos), tlp.NoBadWordsLogitsProcessor(bad, eos), ids, scores)
        out = NoBadWords(bad, eos)(ids, scores)
        assert torch.isinf(out[:, 11]).all()  # one-token bad words: always
        assert torch.isinf(out[-1, [12, 13, 16]]).all()  # multi-token ones completing the last row
        # [EOS] is dropped from the bad words only when it is the EOS id
        assert bool(torch.isinf(out[:, EOS]).all()) == (eos != EOS or bool(torch.isinf(scores[:, EOS]).all()))


def test_no_bad_words_only_eos_is_a_no_op():
    ids, scores = _input_ids(0, 2), _scores(0, 2, 50, "logits")
    assert torch.equal(NoBadWords([[EOS]], EOS)(ids, scores), scores)
    _same(NoBadWords([[EOS]], EOS)(ids, scores), tlp.NoBadWordsLogitsProcessor([[EOS]], EOS)(ids, scores.clone()))


@pytest.mark.parametrize("batch,vocab,kind", CONSTRAINT_SHAPES)
@pytest.mark.parametrize("min_new", [0, 1, 7, 8, 9, 20])
@pytest.mark.parametrize("eos", [EOS, 42, 999])
def test_min_new_tokens_matches_transformers(batch, vocab, kind, min_new, eos):
    for seed in SEEDS:
        ids = _input_ids(seed, batch, new_tokens=8)  # 8 tokens generated after the 3-token prompt
        scores = _constraint_scores(seed, batch, vocab, kind)
        scores[:, eos % vocab] = 1.0  # a finite EOS score, so that banning it shows
        theirs = tlp.MinNewTokensLengthLogitsProcessor(len(PROMPT), min_new, eos)
        changed = _check_constraint(MinNewTokens(len(PROMPT), min_new, eos), theirs, ids, scores)
        assert changed == (min_new > 8 and eos < vocab)  # eos beyond the vocabulary is ignored


@pytest.mark.parametrize("batch,vocab,kind", CONSTRAINT_SHAPES)
@pytest.mark.parametrize("start", [0, 3, 7, 8, 12])
@pytest.mark.parametrize("factor", [0.5, 1.0, 1.05, 1.5, 3.0])
def test_exponential_decay_length_penalty_matches_transformers(batch, vocab, kind, start, factor):
    for seed in SEEDS:
        ids = _input_ids(seed, batch, new_tokens=8)
        scores = _constraint_scores(seed, batch, vocab, kind)
        eos_scores = torch.tensor([2.5, -1.75, float("-inf")])[:batch]
        if kind == "log_probs":
            eos_scores = torch.tensor([-0.5, -6.0, float("-inf")])[:batch]
        scores[:, EOS] = eos_scores  # positive, negative and banned EOS scores
        theirs = tlp.ExponentialDecayLengthPenalty((start, factor), EOS, len(PROMPT))
        ours = ExponentialDecayLengthPenalty(start, factor, EOS, len(PROMPT))
        changed = _check_constraint(ours, theirs, ids, scores)
        assert changed == (start < 8 and factor != 1.0)  # once more than `start` tokens were generated


def test_exponential_decay_moves_a_negative_eos_score_above_zero():
    # 8 new tokens, start 4 -> k = 4; factor 2 -> 16: s + |s| * 15 = -1 + 15 = 14
    ids, scores = _input_ids(0, 1), torch.zeros(1, 5)
    scores[0, EOS] = -1.0
    out = ExponentialDecayLengthPenalty(4, 2.0, EOS, len(PROMPT))(ids, scores)
    assert out[0, EOS].item() == 14.0
    _same(out, tlp.ExponentialDecayLengthPenalty((4, 2.0), EOS, len(PROMPT))(ids, scores.clone()))


def test_exponential_decay_overflow_saturates_instead_of_raising():
    ids, scores = _input_ids(0, 1, new_tokens=2000), torch.ones(1, 5)
    out = ExponentialDecayLengthPenalty(0, 2.0, EOS, len(PROMPT))(ids, scores)
    assert out[0, EOS].item() == math.inf
    with pytest.raises(OverflowError):
        tlp.ExponentialDecayLengthPenalty((0, 2.0), EOS, len(PROMPT))(ids, scores.clone())


def _encoder_ids(seed: int, sources: int, ids: torch.Tensor, rows_per_source: int, src_len: int = 12):
    """int64 (sources, src_len) drawn from 4..13, each source ending with the last 3 tokens
    of its first hypothesis row, so n-grams of the source end the decoder input."""
    g = torch.Generator().manual_seed(seed + 77)
    enc = torch.randint(4, 14, (sources, src_len), generator=g)
    for s in range(sources):
        enc[s, -4:-1] = ids[s * rows_per_source, -3:]
    return enc


# (sources, rows): one source for 1 or 3 hypotheses, 3 sources with 1 hypothesis each,
# 2 sources with 3 beams each
LAYOUTS = [(1, 1), (1, 3), (3, 3), (2, 6)]


@pytest.mark.parametrize("sources,rows", LAYOUTS)
@pytest.mark.parametrize("vocab,kind", [(50, "logits"), (1000, "logits"), (50, "neg_inf"), (1000, "log_probs")])
@pytest.mark.parametrize("penalty", [0.5, 1.0, 1.3, 2.0])
def test_encoder_repetition_penalty_matches_transformers(sources, rows, vocab, kind, penalty):
    for seed in SEEDS:
        ids = _input_ids(seed, rows)
        enc = _encoder_ids(seed, sources, ids, rows // sources)
        scores = _constraint_scores(seed, rows, vocab, kind)
        theirs = tlp.EncoderRepetitionPenaltyLogitsProcessor(penalty, enc)
        changed = _check_constraint(EncoderRepetitionPenalty(penalty, enc), theirs, ids, scores)
        assert changed == (penalty != 1.0)
        if sources == 1:  # a 1-D source is the same as one row
            _same(EncoderRepetitionPenalty(penalty, enc[0])(ids, scores), theirs(ids, scores.clone()))


def test_encoder_repetition_penalty_above_one_rewards_source_tokens():
    ids, scores = _input_ids(0, 1), torch.tensor([[2.0, -2.0, 2.0, -2.0]])
    out = EncoderRepetitionPenalty(2.0, torch.tensor([[0, 1]]))(ids, scores)
    assert out.tolist() == [[4.0, -1.0, 2.0, -2.0]]


@pytest.mark.parametrize("sources,rows", LAYOUTS)
@pytest.mark.parametrize("vocab,kind", [(50, "logits"), (1000, "neg_inf"), (50, "log_probs")])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 13])
@pytest.mark.parametrize("new_tokens", [0, 1, 8])
def test_encoder_no_repeat_ngram_matches_transformers(sources, rows, vocab, kind, n, new_tokens):
    for seed in SEEDS:
        ids = _input_ids(seed, rows, new_tokens)
        enc = _encoder_ids(seed, sources, ids, rows // sources)
        scores = _constraint_scores(seed, rows, vocab, kind)
        theirs = tlp.EncoderNoRepeatNGramLogitsProcessor(n, enc)
        changed = _check_constraint(EncoderNoRepeatNGram(n, enc), theirs, ids, scores)
        if n <= 4:  # each source ends with its first row's last 3 tokens + one more
            assert changed
        if n > len(PROMPT) + new_tokens + 1:  # the next n-gram's prefix is not complete yet
            assert not changed
        if sources == 1:  # a 1-D source is the same as one row
            _same(EncoderNoRepeatNGram(n, enc[0])(ids, scores), theirs(ids, scores.clone()))


def test_encoder_no_repeat_ngram_bans_the_token_completing_a_source_ngram():
    enc = torch.tensor([[4, 5, 6, 7]])
    ids = torch.tensor([[1, 5, 6], [1, 6, 5]])
    out = EncoderNoRepeatNGram(3, enc)(ids, torch.zeros(2, 10))
    assert torch.isinf(out).nonzero().tolist() == [[0, 7]]


# ---------------------------------------------------------------- argument checks

ENC = torch.tensor([[4, 5, 6]])


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: MinP(-0.1), "min_p"),
        (lambda: MinP(1.5), "min_p"),
        (lambda: MinP(float("nan")), "min_p"),
        (lambda: MinP(0.1, 0), "min_tokens_to_keep"),
        (lambda: TypicalP(0.0), "typical_p"),
        (lambda: TypicalP(1.0), "typical_p"),
        (lambda: TypicalP(0.5, 0), "min_tokens_to_keep"),
        (lambda: EpsilonCutoff(0.0), "epsilon_cutoff"),
        (lambda: EpsilonCutoff(1.0), "epsilon_cutoff"),
        (lambda: EpsilonCutoff(0.1, 1.5), "min_tokens_to_keep"),
        (lambda: EtaCutoff(0.0), "eta_cutoff"),
        (lambda: EtaCutoff(1.0), "eta_cutoff"),
        (lambda: EtaCutoff(0.1, -1), "min_tokens_to_keep"),
        (lambda: TopH(0.0), "top_h"),
        (lambda: TopH(1.01), "top_h"),
        (lambda: NoBadWords([], EOS), "bad_words_ids"),
        (lambda: NoBadWords([[]], EOS), "bad word"),
        (lambda: NoBadWords([[1, -2]], EOS), "bad word"),
        (lambda: NoBadWords([1, 2], EOS), "bad word"),
        (lambda: NoBadWords([[1]], -1), "eos_token_id"),
        (lambda: SequenceBias({}), "sequence_bias"),
        (lambda: SequenceBias({(): 1.0}), "keys"),
        (lambda: SequenceBias({(1, -1): 1.0}), "keys"),
        (lambda: SequenceBias({1: 1.0}), "keys"),
        (lambda: SequenceBias({(1,): float("nan")}), "values"),
        (lambda: SequenceBias({(1,): float("inf")}), "values"),
        (lambda: SequenceBias({(1,): "x"}), "values"),
        (lambda: MinNewTokens(-1, 5, EOS), "prompt_len"),
        (lambda: MinNewTokens(3, -1, EOS), "min_new_tokens"),
        (lambda: MinNewTokens(3, 5, -1), "eos_token_id"),
        (lambda: ExponentialDecayLengthPenalty(-1, 1.1, EOS, 3), "start_index"),
        (lambda: ExponentialDecayLengthPenalty(5, 0.0, EOS, 3), "decay_factor"),
        (lambda: ExponentialDecayLengthPenalty(5, float("inf"), EOS, 3), "decay_factor"),
        (lambda: ExponentialDecayLengthPenalty(5, 1.1, -1, 3), "eos_token_id"),
        (lambda: ExponentialDecayLengthPenalty(5, 1.1, EOS, -3), "prompt_len"),
        (lambda: EncoderRepetitionPenalty(0.0, ENC), "penalty"),
        (lambda: EncoderRepetitionPenalty(float("nan"), ENC), "penalty"),
        (lambda: EncoderRepetitionPenalty(1.5, torch.tensor([[-100, 4]])), "encoder_input_ids"),
        (lambda: EncoderRepetitionPenalty(1.5, torch.tensor([[1.0, 4.0]])), "encoder_input_ids"),
        (lambda: EncoderRepetitionPenalty(1.5, torch.zeros(1, 2, 3, dtype=torch.long)), "encoder_input_ids"),
        (lambda: EncoderNoRepeatNGram(0, ENC), "n-gram"),
        (lambda: EncoderNoRepeatNGram(2, [4, 5]), "encoder_input_ids"),
    ],
)
def test_bad_arguments_raise_clear_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "processor,match",
    [
        (SequenceBias({(3, 60): 1.0}), "vocabulary"),
        (NoBadWords([[60]], EOS), "vocabulary"),
        (ExponentialDecayLengthPenalty(0, 1.5, 60, 3), "vocabulary"),
        (EncoderRepetitionPenalty(1.5, torch.tensor([[4, 60]])), "vocabulary"),
        (EncoderNoRepeatNGram(2, torch.tensor([[4, 60]])), "vocabulary"),
        (EncoderRepetitionPenalty(1.5, torch.tensor([[4], [5]])), "multiple"),  # 2 sources, 3 rows
        (EncoderNoRepeatNGram(2, torch.tensor([[4], [5]])), "multiple"),
    ],
)
def test_bad_call_arguments_raise_clear_errors(processor, match):
    with pytest.raises(ValueError, match=match):
        processor(_input_ids(0, 3), torch.zeros(3, 50))


# ---------------------------------------------------------------- flat rows and exact ties
# Every finite score equal (a flat row: entropy log n, every p = p_max) or exact ties at
# the top, in the middle and at a filter's boundary. Each filter must equal transformers'
# and leave at least one finite token per row (a row of only -inf has nothing to sample).

_NEG = float("-inf")
EDGE_ROWS = {
    "zeros5": [[0.0] * 5],
    "flat50": [[3.7] * 50],
    "flat1000_negative": [[-2.5] * 1000],
    "flat_with_inf": [[1.0, _NEG, 1.0, 1.0, _NEG], [_NEG, -2.0, -2.0, _NEG, -2.0]],
    "flat_two": [[4.0, 4.0]],
    "one_finite": [[_NEG, _NEG, 0.5, _NEG]],
    "tied_top": [[3.0, 3.0, 1.0, 0.0, -1.0]],
    "tied_middle": [[2.0, 1.0, 1.0, 1.0, 0.0, _NEG]],
    "tied_bottom": [[5.0, 1.0, 0.0, 0.0, 0.0]],
    "tied_pairs": [[1.0, 2.0, 2.0, 1.0, 0.0, 0.0]],
    "halves": [[math.log(0.4), math.log(0.2), math.log(0.2), math.log(0.1), math.log(0.1)]],
}
EDGE_WARPERS = {
    "top_k": [(lambda k=k, m=m: (TopK(k, m), tlp.TopKLogitsWarper(k, min_tokens_to_keep=m)))
              for k in (1, 2, 3, 100) for m in (1, 3)],
    "top_p": [(lambda p=p, m=m: (TopP(p, m), tlp.TopPLogitsWarper(p, min_tokens_to_keep=m)))
              for p in (0.01, 0.3, 0.5, 0.6, 0.9) for m in (1, 3)],
    "min_p": [(lambda p=p, m=m: (MinP(p, m), tlp.MinPLogitsWarper(p, min_tokens_to_keep=m)))
              for p in (0.05, 0.5, 1.0) for m in (1, 3)],
    "typical_p": [(lambda p=p, m=m: (TypicalP(p, m), tlp.TypicalLogitsWarper(p, min_tokens_to_keep=m)))
                  for p in (1e-4, 0.2, 0.5, 0.9) for m in (1, 3)],
    "epsilon_cutoff": [(lambda e=e, m=m: (EpsilonCutoff(e, m), tlp.EpsilonLogitsWarper(e, min_tokens_to_keep=m)))
                       for e in (3e-4, 0.1, 0.2, 0.5, 0.9999) for m in (1, 3)],
    "eta_cutoff": [(lambda e=e, m=m: (EtaCutoff(e, m), tlp.EtaLogitsWarper(e, min_tokens_to_keep=m)))
                   for e in (4e-3, 0.3, 0.9999) for m in (1, 3)],
    "top_h": [(lambda h=h: (TopH(h), tlp.TopHLogitsWarper(h))) for h in (1e-3, 0.4, 1.0)],
}


@pytest.mark.parametrize("row", EDGE_ROWS)
@pytest.mark.parametrize("warper", EDGE_WARPERS)
def test_flat_and_tied_rows_match_transformers_and_keep_a_token(row, warper):
    scores = torch.tensor(EDGE_ROWS[row], dtype=torch.float32)
    ids = torch.zeros(scores.shape[0], 3, dtype=torch.long)
    for make in EDGE_WARPERS[warper]:
        ours, theirs = make()
        out = ours(ids, scores.clone())
        _same(out, theirs(ids, scores.clone()))
        assert torch.isfinite(out).any(dim=-1).all(), f"{warper} left a row all -inf: {out.tolist()}"
        assert not torch.isfinite(out[~torch.isfinite(scores)]).any()


@pytest.mark.parametrize(
    "warper",
    [TopK(1), MinP(1.0), MinP(0.5), EpsilonCutoff(0.9999), EtaCutoff(0.9999), TypicalP(0.5)],
    ids=lambda w: w.name,
)
def test_a_flat_row_keeps_every_token_where_the_rule_compares_values(warper):
    """On a flat row every token ties with the best, so a rule that compares a token's
    own score or probability with a threshold keeps them all: top-k's k-th best score,
    min-p's min_p * p_max, epsilon's and eta's min_keep-th best (the ties are spared),
    typical's distance from the entropy (0 for every token, all tied with the last kept)."""
    scores = torch.full((2, 7), 1.25)
    assert torch.equal(warper(torch.zeros(2, 3, dtype=torch.long), scores), scores)
