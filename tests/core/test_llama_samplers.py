"""The llama.cpp / text-generation-webui samplers (core/processors/llama_samplers.py)
against separately written references of their definitions.

Each reference below is a plain-Python loop over one row, written the way the source
does it (llama.cpp: over the candidates sorted by logit; webui: over the sorted row),
not the tensor code under test. Random logits: several seeds, batch 1 and 3, vocab 50
and 1000, with and without ``-inf`` already present.
"""

from __future__ import annotations

import math

import pytest
import torch

from core.processors.llama_samplers import (
    DRY,
    XTC,
    DynamicTemperature,
    TopNSigma,
)
from core.processors.webui_samplers import QuadraticSampling, TailFree, TopA
from core.processors.warpers import Temperature

INF = math.inf
CASES = [
    (seed, batch, vocab, with_inf)
    for seed in range(3)
    for batch in (1, 3)
    for vocab in (50, 1000)
    for with_inf in (False, True)
]


def _scores(seed: int, batch: int, vocab: int, with_inf: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(batch, vocab, generator=g) * 3
    if with_inf:  # an earlier filter already removed ~30% of each row
        mask = torch.rand(batch, vocab, generator=g) < 0.3
        mask[:, 0] = False
        scores = scores.masked_fill(mask, -INF)
    return scores


def _ids(batch: int) -> torch.Tensor:
    return torch.zeros(batch, 4, dtype=torch.long)


def _same(ours: torch.Tensor, rows: list[list[float]], rtol: float = 1e-5, atol: float = 1e-5) -> None:
    theirs = torch.tensor(rows, dtype=torch.float64)
    assert ours.dtype == torch.float32 and ours.shape == theirs.shape
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    finite = ~torch.isinf(theirs)
    torch.testing.assert_close(ours.double()[finite], theirs[finite], rtol=rtol, atol=atol)


def _softmax(xs: list[float]) -> list[float]:
    m = max(xs)
    e = [math.exp(x - m) if x != -INF else 0.0 for x in xs]
    s = sum(e)
    return [v / s for v in e]


def _sorted_desc(row: list[float]) -> list[int]:
    """Token ids by score, highest first (stable, so ties keep id order)."""
    return sorted(range(len(row)), key=lambda i: -row[i])


def _kept_is_prefix(before: torch.Tensor, after: torch.Tensor) -> None:
    """Every kept token scores at least as high (before filtering) as every removed one."""
    for b in range(before.shape[0]):
        was = ~torch.isinf(before[b])
        kept = was & ~torch.isinf(after[b])
        removed = was & torch.isinf(after[b])
        assert kept.any()
        if removed.any():
            assert before[b][kept].min() >= before[b][removed].max()


# ---------------------------------------------------------------- references ---


def ref_top_n_sigma(row: list[float], n: float) -> list[float]:
    """llama.cpp llama_sampler_top_n_sigma_apply, one candidate at a time."""
    if n <= 0 or len(row) <= 1:
        return list(row)
    mx, total, count = row[0], 0.0, 0
    for x in row:
        if x != -INF:
            mx = max(mx, x)
            total += x
            count += 1
    mean = total / count if count else 0.0
    acc = sum((x - mean) ** 2 for x in row if x != -INF)
    std = math.sqrt(acc / count) if count else 0.0
    return [-INF if x < mx - n * std else x for x in row]


def ref_xtc(row: list[float], probability: float, threshold: float, min_keep: int, chance: float) -> list[float]:
    """llama.cpp llama_sample_xtc_apply over the finite candidates, given the coin."""
    candidates = [i for i in _sorted_desc(row) if row[i] != -INF]
    if probability <= 0 or threshold > 0.5 or len(candidates) < 2 or chance > probability:
        return list(row)
    probs = _softmax([row[i] for i in candidates])
    pos_last = 0
    for i, p in enumerate(probs):
        if p >= threshold:
            pos_last = i
        else:
            break
    out = list(row)
    if len(candidates) - pos_last >= min_keep and pos_last > 0:
        for i in candidates[:pos_last]:
            out[i] = -INF
    return out


def ref_dry_penalties(context, multiplier, base, allowed_length, breakers, last_n) -> dict[int, float]:
    """Penalty per token, matching backwards one earlier occurrence at a time (webui's
    DRYLogitsProcessor without its 50-token cap), with llama.cpp's window and exponent cap."""
    if multiplier == 0 or last_n == 0:
        return {}
    ctx = context if last_n < 0 else context[-last_n:]
    last = ctx[-1]
    if last in breakers:
        return {}
    longest: dict[int, int] = {}
    for i in range(len(ctx) - 1):
        if ctx[i] != last or ctx[i + 1] in breakers:
            continue
        length = 1
        while i - length >= 0:
            previous = ctx[-(length + 1)]
            if ctx[i - length] != previous or previous in breakers:
                break
            length += 1
        longest[ctx[i + 1]] = max(longest.get(ctx[i + 1], 0), length)
    max_exponent = int(88.7228391 / math.log(base)) if base > 1.000001 else 0
    penalties = {}
    for token, length in longest.items():
        if length >= allowed_length:
            exponent = length - allowed_length
            if max_exponent > 0:
                exponent = min(exponent, max_exponent)
            penalties[token] = multiplier * base**exponent
    return penalties


def ref_dynatemp(row: list[float], temp: float, delta: float, exponent: float) -> list[float]:
    """llama.cpp llama_sampler_temp_ext_apply over the finite candidates."""
    if delta <= 0:
        return [x / temp for x in row]
    t_min, t_max = max(0.0, temp - delta), temp + delta
    finite = [x for x in row if x != -INF]
    if len(finite) <= 1:
        return list(row)
    max_entropy = -math.log(1.0 / len(finite))
    entropy = -sum(p * math.log(p) for p in _softmax(finite) if p > 0)
    dyn = t_min + (t_max - t_min) * (entropy / max_entropy) ** exponent
    if dyn <= 0:
        best = max(range(len(row)), key=lambda i: (row[i], -i))
        return [x if i == best else -INF for i, x in enumerate(row)]
    return [x / dyn for x in row]


def ref_top_a(row: list[float], top_a: float, min_keep: int) -> list[float]:
    """webui TopALogitsWarper over the sorted row."""
    order = _sorted_desc(row)
    probs = _softmax([row[i] for i in order])
    out = list(row)
    for rank, (i, p) in enumerate(zip(order, probs)):
        if p < top_a * probs[0] ** 2 and rank >= min_keep:
            out[i] = -INF
    return out


def ref_tfs(row: list[float], z: float, min_keep: int) -> tuple[list[float], list[float]]:
    """webui TailFreeLogitsWarper over the sorted row; also the cdf at each sorted
    position it decides (NaN for the first and last)."""
    n = len(row)
    if z >= 1 or n <= 2:
        return list(row), [math.nan] * n
    order = _sorted_desc(row)
    p = _softmax([row[i] for i in order])
    d2 = [abs((p[i + 2] - p[i + 1]) - (p[i + 1] - p[i])) for i in range(n - 2)]
    total = sum(d2)
    cdf_at = [math.nan] * n
    remove = [False] * n
    cum = 0.0
    for i, d in enumerate(d2):
        cum += d / total if total > 0 else math.nan
        cdf_at[i + 1] = cum
        remove[i + 1] = cum > z
    remove[n - 1] = True
    for rank in range(min(min_keep, n)):
        remove[rank] = False
    out = list(row)
    for rank, i in enumerate(order):
        if remove[rank]:
            out[i] = -INF
    cdf = [math.nan] * n
    for rank, i in enumerate(order):
        cdf[i] = cdf_at[rank]
    return out, cdf


def ref_quadratic(row: list[float], factor: float, curve: float) -> list[float]:
    """webui QuadraticSamplingLogitsWarper, one row."""
    if factor == 0:
        return list(row)
    mx = max(row)
    k, s = (3 - curve) / 2, (curve - 1) / 2
    return [x if x == -INF else -(k * factor * (x - mx) ** 2) + s * factor * (x - mx) ** 3 + mx for x in row]


# ---------------------------------------------------------------- top-n-sigma ---


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
@pytest.mark.parametrize("n", [0.0, 0.3, 1.0, 2.0, 3.5])
def test_top_n_sigma_matches_llama_cpp(seed, batch, vocab, with_inf, n):
    scores = _scores(seed, batch, vocab, with_inf)
    ours = TopNSigma(n)(_ids(batch), scores)
    _same(ours, [ref_top_n_sigma(row, n) for row in scores.tolist()])
    _kept_is_prefix(scores, ours)


def test_top_n_sigma_is_the_papers_rule():
    """Kept iff logit >= max - n * (population) std of the finite logits."""
    scores = _scores(7, 3, 200, True)
    ours = TopNSigma(1.5)(_ids(3), scores)
    for b in range(3):
        finite = scores[b][~torch.isinf(scores[b])].double()
        keep = scores[b].double() >= finite.max() - 1.5 * finite.std(unbiased=False)
        assert torch.equal(~torch.isinf(ours[b]), keep)
        assert 1 < int(keep.sum()) < finite.numel()  # not vacuous


def test_top_n_sigma_leaves_minus_inf_out_of_the_std():
    # finite logits 10, 0, 4: std 4.11, threshold 10 - 1.5 * 4.11 = 3.83 keeps 4. Counting
    # the seven -inf as zeros (webui's TopNSigmaLogitsWarper) would give std 3.1 and drop 4.
    scores = torch.tensor([[10.0, 0.0, 4.0] + [-INF] * 7, [-INF] * 10])
    want = torch.tensor([[10.0, -INF, 4.0] + [-INF] * 7, [-INF] * 10])
    assert torch.equal(TopNSigma(1.5)(_ids(2), scores), want)  # an all -inf row stays as it is


# ---------------------------------------------------------------- XTC ---


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
@pytest.mark.parametrize("probability", [0.0, 0.5, 1.0])
def test_xtc_matches_llama_cpp(seed, batch, vocab, with_inf, probability):
    scores = _scores(seed, batch, vocab, with_inf)
    for threshold in (0.0, 0.02, 0.05, 0.1, 0.3, 0.5, 0.6):
        for min_keep in (1, 3, vocab):
            xtc = XTC(probability, threshold, seed=seed + 11, min_tokens_to_keep=min_keep)
            coins = torch.Generator().manual_seed(seed + 11)  # the same stream, drawn alongside
            for _call in range(2):  # the coin stream goes on from call to call
                ours = xtc(_ids(batch), scores)
                draws = probability > 0 and threshold <= 0.5  # llama.cpp draws no coin otherwise
                chances = torch.rand(batch, generator=coins).tolist() if draws else [0.0] * batch
                rows = [ref_xtc(r, probability, threshold, min_keep, c) for r, c in zip(scores.tolist(), chances)]
                _same(ours, rows, rtol=0, atol=0)


def test_xtc_removes_all_top_choices_but_the_last():
    scores = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.06, 0.04]]))
    out = XTC(1.0, 0.1, seed=0)(_ids(1), scores)
    assert torch.isinf(out[0, :2]).all() and torch.equal(out[0, 2:], scores[0, 2:])
    # one token above the threshold: nothing to exclude
    assert torch.equal(XTC(1.0, 0.35, seed=0)(_ids(1), scores), scores)
    # the finite tokens left would be fewer than min_keep: nothing is removed
    assert torch.equal(XTC(1.0, 0.1, seed=0, min_tokens_to_keep=4)(_ids(1), scores), scores)
    assert torch.isinf(XTC(1.0, 0.1, seed=0, min_tokens_to_keep=3)(_ids(1), scores)[0, :2]).all()


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
def test_xtc_invariants(seed, batch, vocab, with_inf):
    scores = _scores(seed, batch, vocab, with_inf)
    assert torch.equal(XTC(0.0, 0.05, seed=seed)(_ids(batch), scores), scores)  # probability 0: identity
    out = XTC(1.0, 0.02, seed=seed, min_tokens_to_keep=2)(_ids(batch), scores)
    for b in range(batch):
        was = ~torch.isinf(scores[b])
        kept = was & ~torch.isinf(out[b])
        removed = was & torch.isinf(out[b])
        assert int(kept.sum()) >= 2
        if removed.any():  # the top choices go: every removed token outranks every kept one
            assert scores[b][removed].min() >= scores[b][kept].max()


def test_xtc_same_seed_same_exclusions():
    scores = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.06, 0.04]] * 3))
    runs = []
    for seed in (5, 5, 6):
        xtc = XTC(0.5, 0.1, seed=seed)
        runs.append(torch.stack([torch.isinf(xtc(_ids(3), scores)) for _ in range(40)]))
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])
    acted = runs[0][:, :, 0].float().mean()
    assert 0.3 < acted < 0.7  # the coin lands about half the time


# ---------------------------------------------------------------- DRY ---


def _contexts(seed: int, batch: int) -> torch.Tensor:
    """Rows that end by repeating an earlier stretch (so DRY has long matches to find)."""
    g = torch.Generator().manual_seed(seed)
    head = torch.randint(0, 8, (batch, 14), generator=g)
    mid = torch.randint(0, 8, (batch, 6), generator=g)
    return torch.cat([head, mid, head[:, : 4 + seed]], dim=1)


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
@pytest.mark.parametrize("penalty_last_n", [-1, 0, 9, 25])
def test_dry_matches_reference(seed, batch, vocab, with_inf, penalty_last_n):
    scores = _scores(seed, batch, vocab, with_inf)
    ids = _contexts(seed, batch)
    hits = 0
    for multiplier, base, allowed in ((0.8, 1.75, 2), (0.0, 1.75, 2), (1.5, 1.0, 1), (0.8, 3.0, 3), (2.0, 1.2, 5)):
        for breakers in ((), (3,), (0, 5)):
            ours = DRY(multiplier, base, allowed, breakers, penalty_last_n)(ids, scores)
            rows = scores.tolist()
            for b, context in enumerate(ids.tolist()):
                for token, penalty in ref_dry_penalties(context, multiplier, base, allowed, set(breakers), penalty_last_n).items():
                    rows[b][token] -= penalty
                    hits += 1
            _same(ours, rows, rtol=0, atol=1e-5)
            changed = ours != scores
            assert int(changed.sum()) == sum(
                1 for b, row in enumerate(rows) for i, x in enumerate(row) if x != scores[b, i].item()
            )
    if penalty_last_n in (-1, 25):  # the window holds the repeated stretch
        assert hits > 0  # not vacuous


def test_dry_penalises_exactly_the_token_extending_a_long_repeat():
    scores = torch.zeros(1, 10)
    ids = torch.tensor([[1, 2, 3, 4, 7, 1, 2, 3]])  # "1 2 3" repeats; 4 would make it "1 2 3 4"
    for allowed, expected in ((1, 0.5 * 2.0**2), (2, 0.5 * 2.0), (3, 0.5), (4, None)):
        out = DRY(0.5, 2.0, allowed)(ids, scores)
        want = torch.zeros(1, 10)
        if expected is not None:
            want[0, 4] = -expected
        assert torch.equal(out, want), (allowed, out)


def test_dry_does_not_reach_across_a_sequence_breaker():
    scores = torch.zeros(1, 10)
    ids = torch.tensor([[1, 2, 3, 4, 7, 1, 2, 3]])
    # without a breaker the 3-token repeat "1 2 3" is penalised at allowed_length 3 ...
    assert DRY(1.0, 2.0, 3)(ids, scores)[0, 4] == -1.0
    # ... with 1 as a breaker the repeat can only be "2 3" (2 tokens): nothing
    assert torch.equal(DRY(1.0, 2.0, 3, sequence_breakers=[1])(ids, scores), scores)
    # and at allowed_length 2 the capped length 2 gives base ** 0
    assert DRY(1.0, 2.0, 2, sequence_breakers=[1])(ids, scores)[0, 4] == -1.0
    assert DRY(1.0, 2.0, 2)(ids, scores)[0, 4] == -2.0
    # a breaker is never penalised itself, even when it would extend a repeat
    ids = torch.tensor([[1, 2, 9, 5, 1, 2]])
    assert DRY(1.0, 2.0, 2)(ids, scores)[0, 9] == -1.0
    assert torch.equal(DRY(1.0, 2.0, 2, sequence_breakers=[9])(ids, scores), scores)
    # the last token a breaker: no repeat is live
    assert torch.equal(DRY(1.0, 2.0, 1, sequence_breakers=[2])(ids, scores), scores)


def test_dry_window_and_exponent_cap():
    scores = torch.zeros(1, 10)
    ids = torch.tensor([[1, 2, 3, 4, 7, 7, 7, 7, 1, 2, 3]])
    assert DRY(1.0, 2.0, 2)(ids, scores)[0, 4] == -2.0
    assert torch.equal(DRY(1.0, 2.0, 2, penalty_last_n=7)(ids, scores)[0, 4], torch.tensor(0.0))  # out of the window
    # a very long repeat: the exponent stops at int(88.7228391 / ln 2) = 127 (88.7228391 < 128 ln 2)
    ids = torch.tensor([[1, 2] * 150])
    out = DRY(0.5, 2.0, 2)(ids, scores)
    assert out[0, 1] == -0.5 * 2.0**127 and torch.isfinite(out).all()


def test_dry_off_values_change_nothing():
    scores = _scores(0, 3, 50, True)
    ids = _contexts(0, 3)
    for dry in (DRY(0.0, 1.75, 2), DRY(0.8, 1.75, 2, penalty_last_n=0), DRY(0.8, 1.75, 100)):
        assert torch.equal(dry(ids, scores), scores)
    assert not torch.equal(DRY(0.8, 1.75, 2)(ids, scores), scores)


# ---------------------------------------------------------------- dynamic temperature ---


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
@pytest.mark.parametrize("temp,delta", [(1.0, 0.0), (0.7, 0.5), (1.0, 1.0), (1.5, 2.0)])
def test_dynatemp_matches_llama_cpp(seed, batch, vocab, with_inf, temp, delta):
    scores = _scores(seed, batch, vocab, with_inf)
    for exponent in (0.0, 0.5, 1.0, 2.0):
        ours = DynamicTemperature(temp, delta, exponent)(_ids(batch), scores)
        _same(ours, [ref_dynatemp(row, temp, delta, exponent) for row in scores.tolist()])


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
def test_dynatemp_range_zero_is_plain_temperature(seed, batch, vocab, with_inf):
    scores = _scores(seed, batch, vocab, with_inf)
    for temp in (0.3, 1.0, 2.5):
        ours = DynamicTemperature(temp, 0.0, 1.0)(_ids(batch), scores)
        torch.testing.assert_close(ours, Temperature(temp)(_ids(batch), scores), rtol=1e-6, atol=1e-6)


def test_dynatemp_temperature_follows_entropy():
    dt = DynamicTemperature(1.0, 0.5, 1.0)
    flat = torch.zeros(1, 20)
    peaked = torch.tensor([[30.0] + [0.0] * 19])
    t_flat, t_peaked = float(dt.temperatures(flat)[0]), float(dt.temperatures(peaked)[0])
    assert t_flat == pytest.approx(1.5) and 0.5 <= t_peaked < 0.5001
    # T_min = 0 and zero entropy: only the top token survives
    one_hot = torch.tensor([[0.0, -1000.0, -2000.0]])
    out = DynamicTemperature(0.5, 1.0, 1.0)(_ids(1), one_hot)
    assert torch.equal(out, torch.tensor([[0.0, -INF, -INF]]))
    # a single finite score: left as it is
    single = torch.tensor([[2.0, -INF]])
    assert torch.equal(DynamicTemperature(0.5, 0.2, 1.0)(_ids(1), single), single)


# ---------------------------------------------------------------- top-a ---


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
@pytest.mark.parametrize("top_a", [0.0, 0.1, 0.5, 1.0])
def test_top_a_matches_webui(seed, batch, vocab, with_inf, top_a):
    scores = _scores(seed, batch, vocab, with_inf)
    for min_keep in (1, 3):
        ours = TopA(top_a, min_keep)(_ids(batch), scores)
        _same(ours, [ref_top_a(row, top_a, min_keep) for row in scores.tolist()], rtol=0, atol=0)
        _kept_is_prefix(scores, ours)
        assert ((~torch.isinf(ours)).sum(dim=-1) >= min_keep).all()
    if top_a == 0:
        assert torch.equal(ours, scores)


def test_top_a_rule():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    out = TopA(0.5)(_ids(1), probs.log())  # threshold 0.5 * 0.25 = 0.125
    assert torch.equal(torch.isinf(out), torch.tensor([[False, False, False, True]]))


# ---------------------------------------------------------------- tail-free ---


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
@pytest.mark.parametrize("z", [0.0, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0])
def test_tfs_matches_webui(seed, batch, vocab, with_inf, z):
    scores = _scores(seed, batch, vocab, with_inf)
    for min_keep in (1, 4):
        ours = TailFree(z, min_keep)(_ids(batch), scores)
        for b, row in enumerate(scores.tolist()):
            want, cdf = ref_tfs(row, z, min_keep)
            for i, x in enumerate(want):
                if math.isinf(x) != math.isinf(ours[b, i].item()):
                    # float32 cumsum vs float64: only a token whose cdf sits on z may differ
                    assert abs(cdf[i] - z) < 1e-5, (b, i, cdf[i])
                elif not math.isinf(x):
                    assert ours[b, i].item() == x
        _kept_is_prefix(scores, ours)
        assert ((~torch.isinf(ours)).sum(dim=-1) >= min_keep).all()
    if z == 1.0:
        assert torch.equal(ours, scores)


def test_tfs_centres_the_cut_like_webui():
    # sorted probs 0.5 0.25 0.125 0.0625 0.0625: d2 = .125 .0625 .0625 -> cdf .5 .75 1
    scores = torch.tensor([[0.5, 0.25, 0.125, 0.0625, 0.0625]]).log()
    keep = lambda z: (~torch.isinf(TailFree(z)(_ids(1), scores))).sum().item()
    assert keep(0.4) == 1  # cdf[0] = .5 > .4 removes sorted token 1
    assert keep(0.6) == 2
    assert keep(0.8) == 3
    assert keep(0.99) == 3  # the cdf ends at 1: below z = 1 the last two sorted tokens always go
    assert TailFree(0.0, min_tokens_to_keep=3)(_ids(1), scores).isinf().sum().item() == 2


# ---------------------------------------------------------------- quadratic ---


@pytest.mark.parametrize("seed,batch,vocab,with_inf", CASES)
@pytest.mark.parametrize("factor", [0.0, 0.1, 0.5, 2.0])
def test_quadratic_matches_webui(seed, batch, vocab, with_inf, factor):
    scores = _scores(seed, batch, vocab, with_inf)
    for curve in (1.0, 2.0, 3.0, 0.5, 4.0):
        ours = QuadraticSampling(factor, curve)(_ids(batch), scores)
        _same(ours, [ref_quadratic(row, factor, curve) for row in scores.tolist()], rtol=1e-5, atol=1e-4)
        if 1.0 <= curve <= 3.0:  # the order of the tokens is kept
            for b in range(batch):
                finite = ~torch.isinf(scores[b])
                assert torch.equal(torch.argsort(scores[b][finite]), torch.argsort(ours[b][finite]))
    if factor == 0:
        assert torch.equal(ours, scores)


def test_quadratic_uses_each_rows_own_max():
    scores = torch.tensor([[0.0, -1.0, -INF], [10.0, 8.0, 9.0]])
    out = QuadraticSampling(1.0)(_ids(2), scores)
    assert torch.equal(out, torch.tensor([[0.0, -1.0, -INF], [10.0, 6.0, 9.0]]))


# ---------------------------------------------------------------- contract ---


PROCESSORS = [
    TopNSigma(1.0),
    XTC(1.0, 0.05, seed=0),
    DRY(0.8, 1.75, 2, (3,)),
    DynamicTemperature(1.0, 0.5, 1.0),
    TopA(0.2),
    TailFree(0.9),
    QuadraticSampling(0.3, 2.0),
]


@pytest.mark.parametrize("processor", PROCESSORS, ids=lambda p: p.name)
def test_processor_contract(processor):
    scores = _scores(1, 3, 50, True)
    ids = _contexts(1, 3)
    before = scores.clone()
    out = processor(ids, scores)
    assert torch.equal(scores, before)  # never in place
    assert out.shape == scores.shape and out.dtype == torch.float32 and out is not scores
    assert torch.isinf(out[torch.isinf(before)]).all()  # a filtered token stays filtered
    assert (~torch.isinf(out)).any(dim=-1).all()


def test_stage_names():
    assert [p.name for p in PROCESSORS] == ["top_n_sigma", "xtc", "dry", "dynatemp", "top_a", "tfs", "quadratic"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: TopNSigma(-1.0),
        lambda: TopNSigma(math.nan),
        lambda: XTC(1.5, 0.1, seed=0),
        lambda: XTC(-0.1, 0.1, seed=0),
        lambda: XTC(0.5, 1.1, seed=0),
        lambda: XTC(0.5, 0.1, seed=0, min_tokens_to_keep=0),
        lambda: DRY(-1.0, 1.75, 2),
        lambda: DRY(0.8, 0.9, 2),
        lambda: DRY(0.8, 1.75, 0),
        lambda: DRY(0.8, 1.75, 2.5),
        lambda: DRY(0.8, 1.75, 2, penalty_last_n=-2),
        lambda: DRY(0.8, 1.75, 2, sequence_breakers=[-1]),
        lambda: DRY(0.8, 1.75, 2, sequence_breakers=["\n"]),
        lambda: DynamicTemperature(0.0, 0.5, 1.0),
        lambda: DynamicTemperature(1.0, -0.5, 1.0),
        lambda: DynamicTemperature(1.0, 0.5, -1.0),
        lambda: DynamicTemperature(1.0, math.inf, 1.0),
        lambda: TopA(1.5),
        lambda: TopA(-0.1),
        lambda: TopA(0.1, min_tokens_to_keep=0),
        lambda: TailFree(1.5),
        lambda: TailFree(-0.1),
        lambda: TailFree(0.5, min_tokens_to_keep=0),
        lambda: QuadraticSampling(-0.1),
        lambda: QuadraticSampling(0.5, math.nan),
    ],
)
def test_bad_arguments_raise(make):
    with pytest.raises(ValueError):
        make()


# ---------------------------------------------------------------- flat rows and exact ties ---
# A flat row (every finite score equal: sigma = 0, entropy = log n) and rows with exact ties
# at the top, in the middle and at a filter's boundary. Every filter is compared with its
# reference on each row and must leave at least one finite token per row: a filter that
# removes every token leaves nothing to sample.

FLAT_ROWS = {
    "zeros5": [[0.0] * 5],
    "flat50": [[3.7] * 50],
    "flat1000_negative": [[-2.5] * 1000],
    "flat_with_inf": [[1.0, -INF, 1.0, 1.0, -INF], [-INF, -2.0, -2.0, -INF, -2.0]],
    "flat_two": [[4.0, 4.0]],
    "one_finite": [[-INF, -INF, 0.5, -INF]],
}
TIE_ROWS = {
    "tied_top": [[3.0, 3.0, 1.0, 0.0, -1.0]],
    "tied_middle": [[2.0, 1.0, 1.0, 1.0, 0.0, -INF]],
    "tied_bottom": [[5.0, 1.0, 0.0, 0.0, 0.0]],
    "tied_pairs": [[1.0, 2.0, 2.0, 1.0, 0.0, 0.0]],
    "rounded_randn": torch.round(torch.randn(2, 40, generator=torch.Generator().manual_seed(3)) * 2).tolist(),
}
EDGE_ROWS = {**FLAT_ROWS, **TIE_ROWS}


def _edge(name: str) -> torch.Tensor:
    return torch.tensor(EDGE_ROWS[name], dtype=torch.float32)


def _keeps_one_per_row(out: torch.Tensor) -> None:
    assert torch.isfinite(out).any(dim=-1).all(), f"a row came out all -inf: {out.tolist()}"


@pytest.mark.parametrize("row", FLAT_ROWS)
@pytest.mark.parametrize("n", [0.3, 1.0, 3.5])
def test_top_n_sigma_keeps_a_flat_row_whole(row, n):
    """sigma = 0: the threshold is the max itself, which every finite token reaches."""
    scores = _edge(row)
    ours = TopNSigma(n)(_ids(scores.shape[0]), scores)
    _same(ours, [ref_top_n_sigma(r, n) for r in scores.tolist()], rtol=0, atol=0)
    assert torch.equal(ours, scores)


@pytest.mark.parametrize("row", EDGE_ROWS)
@pytest.mark.parametrize("n", [0.0, 0.3, 1.0, 3.5])
def test_top_n_sigma_flat_and_tied_rows_match_llama_cpp(row, n):
    scores = _edge(row)
    ours = TopNSigma(n)(_ids(scores.shape[0]), scores)
    _same(ours, [ref_top_n_sigma(r, n) for r in scores.tolist()], rtol=0, atol=0)
    _keeps_one_per_row(ours)
    _kept_is_prefix(scores, ours)  # a tie is kept or removed as a whole


@pytest.mark.parametrize("row", EDGE_ROWS)
@pytest.mark.parametrize("threshold", [0.0, 0.1, 0.2, 0.25, 1 / 3, 0.5])
@pytest.mark.parametrize("min_keep", [1, 2, 5])
def test_xtc_flat_and_tied_rows_match_llama_cpp(row, threshold, min_keep):
    scores = _edge(row)
    batch = scores.shape[0]
    ours = XTC(1.0, threshold, seed=0, min_tokens_to_keep=min_keep)(_ids(batch), scores)
    chances = torch.rand(batch, generator=torch.Generator().manual_seed(0)).tolist()
    _same(ours, [ref_xtc(r, 1.0, threshold, min_keep, c) for r, c in zip(scores.tolist(), chances)], rtol=0, atol=0)
    _keeps_one_per_row(ours)
    for b in range(batch):  # never fewer finite tokens than min_keep, unless the row had fewer
        assert int(torch.isfinite(ours[b]).sum()) >= min(min_keep, int(torch.isfinite(scores[b]).sum()))


def test_xtc_on_a_flat_row_keeps_exactly_one_of_the_tied_top_choices():
    # five tokens at p = 0.2 >= 0.1: all are top choices, all but the last go
    out = XTC(1.0, 0.1, seed=0)(_ids(1), _edge("zeros5"))
    assert int(torch.isfinite(out).sum()) == 1


@pytest.mark.parametrize("row", EDGE_ROWS)
@pytest.mark.parametrize("top_a", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("min_keep", [1, 3])
def test_top_a_flat_and_tied_rows_match_webui(row, top_a, min_keep):
    scores = _edge(row)
    ours = TopA(top_a, min_keep)(_ids(scores.shape[0]), scores)
    _same(ours, [ref_top_a(r, top_a, min_keep) for r in scores.tolist()], rtol=0, atol=0)
    _keeps_one_per_row(ours)
    if row in FLAT_ROWS:  # p = p_max >= top_a * p_max^2: a flat row is kept whole
        assert torch.equal(ours, scores)


@pytest.mark.parametrize("row", EDGE_ROWS)
@pytest.mark.parametrize("z", [0.0, 0.5, 0.95])
@pytest.mark.parametrize("min_keep", [1, 3])
def test_tfs_flat_and_tied_rows_match_webui(row, z, min_keep):
    scores = _edge(row)
    ours = TailFree(z, min_keep)(_ids(scores.shape[0]), scores)
    for b, r in enumerate(scores.tolist()):
        want, cdf = ref_tfs(r, z, min_keep)
        for i, x in enumerate(want):
            if math.isinf(x) != math.isinf(ours[b, i].item()):
                assert abs(cdf[i] - z) < 1e-5, (b, i, cdf[i])  # float32 cumsum on z
    _keeps_one_per_row(ours)


@pytest.mark.parametrize("row", EDGE_ROWS)
@pytest.mark.parametrize("temp,delta,exponent", [(1.0, 1.0, 1.0), (0.5, 0.5, 1.0), (1.0, 0.5, 0.0), (0.7, 2.0, 2.0)])
def test_dynatemp_flat_and_tied_rows_match_llama_cpp(row, temp, delta, exponent):
    scores = _edge(row)
    ours = DynamicTemperature(temp, delta, exponent)(_ids(scores.shape[0]), scores)
    _same(ours, [ref_dynatemp(r, temp, delta, exponent) for r in scores.tolist()])
    _keeps_one_per_row(ours)


@pytest.mark.parametrize("row", EDGE_ROWS)
@pytest.mark.parametrize("factor,curve", [(0.5, 1.0), (2.0, 3.0)])
def test_quadratic_flat_and_tied_rows_match_webui(row, factor, curve):
    scores = _edge(row)
    ours = QuadraticSampling(factor, curve)(_ids(scores.shape[0]), scores)
    _same(ours, [ref_quadratic(r, factor, curve) for r in scores.tolist()], rtol=1e-5, atol=1e-4)
    _keeps_one_per_row(ours)
