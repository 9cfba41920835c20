"""Speculative decoding (issue 21): greedy verification gives the target's own greedy output,
token for token and with the same reported distributions, for the n-gram and branch drafts,
on tiny random models; the chain's processors apply identically; the rounds, the cache cuts
and the summary add up; cancel, max_new_tokens, EOS inside a draft, forced ids and reuse.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import Finished, SpeculationRound, StepEvent
from core.options import DecodingOptions
from core.speculative.branch import BranchDraft
from core.speculative.ngram import NgramDraft, find_continuation
from core.speculative.rule import adapt_gamma, predicted_speedup
from tests.core.conftest import V

pytestmark = pytest.mark.usefixtures("one_torch_thread")

KINDS = [("whisper", True), ("whisper", False), ("marian", False), ("t5", False)]


def _backend(tiny, lean: bool = False) -> HFSeq2SeqBackend:
    return HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind, lean=lean)


def _run(engine, encoded, prompt, options, **kw):
    events = list(engine.run(encoded, prompt, options, **kw))
    assert isinstance(events[-1], Finished) and sum(isinstance(e, Finished) for e in events) == 1
    steps = [e for e in events if isinstance(e, StepEvent)]
    rounds = [e for e in events if isinstance(e, SpeculationRound)]
    return steps, rounds, events[-1], events


def same_step(a: StepEvent, b: StepEvent, tol: float = 1e-4) -> None:
    """Same token at the same step with the same distributions and attention (to float tolerance)."""
    assert (a.step, a.token_id, a.segment, a.forced) == (b.step, b.token_id, b.segment, b.forced)
    assert a.prob == pytest.approx(b.prob, abs=tol) and a.raw_prob == pytest.approx(b.raw_prob, abs=tol)
    assert a.entropy == pytest.approx(b.entropy, abs=1e-4) and a.rank == b.rank
    assert [t.prob for t in a.topk] == pytest.approx([t.prob for t in b.topk], abs=tol)
    assert [t.prob for t in a.raw_topk] == pytest.approx([t.prob for t in b.raw_topk], abs=tol)
    assert [s.name for s in a.stages] == [s.name for s in b.stages]
    if b.cross_attention is not None:
        assert a.cross_attention is not None, f"step {a.step}: no attention"
        np.testing.assert_allclose(a.cross_attention, b.cross_attention, atol=1e-3)


def _greedy(engine, encoded, prompt, **kw):
    return _run(engine, encoded, prompt, DecodingOptions(max_new_tokens=kw.pop("max_new_tokens", 32), **kw))


def _spec(options: DecodingOptions, **kw) -> DecodingOptions:
    return dataclasses.replace(options, strategy="speculative", **kw)


@pytest.mark.parametrize("kind,lean", KINDS)
@pytest.mark.parametrize("draft_tokens", [0, 1, 3, 8])
def test_ngram_greedy_equals_greedy_search(tiny_models, kind, lean, draft_tokens):
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    plain = DecodingOptions(max_new_tokens=40, top_k_report=8)
    ref_steps, _, ref, _ = _run(Engine(backend), encoded, tiny.prompt, plain)
    steps, rounds, fin, _ = _run(Engine(backend), encoded, tiny.prompt, _spec(plain, draft_tokens=draft_tokens))
    assert fin.token_ids == ref.token_ids and fin.reason == ref.reason
    assert len(steps) == len(ref_steps)
    for a, b in zip(steps, ref_steps):
        same_step(a, b)
    summary = fin.stats.speculative
    assert summary is not None and summary.draft == "ngram"
    assert summary.tokens == len(fin.token_ids)
    assert summary.rounds < len(steps) + 1 or summary.accepted == 0


@pytest.mark.parametrize("kind,lean", KINDS)
@pytest.mark.parametrize("draft_tokens", [0, 2, 5])
def test_branch_draft_of_the_run_itself_is_accepted_whole(tiny_eos_models, tiny_models, kind, lean, draft_tokens):
    """The run's own tokens (+ EOS when it ended by EOS) as the branch draft: every drafted
    token is accepted, the output is the same, in fewer target calls."""
    for tiny in (tiny_models[kind], tiny_eos_models[kind]):
        backend = _backend(tiny, lean)
        encoded = backend.encode(tiny.inputs)
        plain = DecodingOptions(max_new_tokens=24)
        ref_steps, _, ref, _ = _run(Engine(backend), encoded, tiny.prompt, plain)
        reference = list(tiny.prompt.prompt_ids) + ref.token_ids + ([tiny.prompt.eos_token_id] if ref.reason == "eos" else [])
        steps, rounds, fin, _ = _run(Engine(backend), encoded, tiny.prompt,
                                     _spec(plain, draft="branch", draft_tokens=draft_tokens),
                                     draft=BranchDraft(reference))
        assert fin.token_ids == ref.token_ids and fin.reason == ref.reason
        for a, b in zip(steps, ref_steps):
            same_step(a, b)
        s = fin.stats.speculative
        assert s.accepted == s.draft_tokens
        if len(ref.token_ids) > 3:
            assert s.rounds < len(ref.token_ids)
            assert s.tokens_per_target_call > 1.0


@pytest.mark.parametrize("kind,lean", KINDS)
def test_a_branch_that_parts_and_resynchronises(tiny_models, kind, lean):
    """A reference with a wrong token in the middle and a missing one later: the output is
    still the target's greedy output; drafts are rejected where the two part, and accepted
    again after the realignment."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    plain = DecodingOptions(max_new_tokens=30)
    _, _, ref, _ = _run(Engine(backend), encoded, tiny.prompt, plain)
    gen = list(ref.token_ids)
    assert len(gen) >= 16
    changed = gen[:6] + [(gen[6] + 1) % (V - 4)] + gen[7:14] + gen[15:]  # one changed, one dropped
    steps, rounds, fin, _ = _run(Engine(backend), encoded, tiny.prompt, _spec(plain, draft="branch", draft_tokens=4),
                                 draft=BranchDraft(list(tiny.prompt.prompt_ids) + changed))
    assert fin.token_ids == ref.token_ids
    rejected = [r for r in rounds if r.n_accepted < len(r.drafted)]
    assert rejected, "the changed token was accepted?"
    assert any(r.n_accepted == len(r.drafted) and r.step > rejected[-1].step for r in rounds), "never realigned"


def test_events_and_rounds_add_up(tiny_models):
    tiny = tiny_models["marian"]
    backend = _backend(tiny)
    encoded = backend.encode(tiny.inputs)
    plain = DecodingOptions(max_new_tokens=30)
    _, _, ref, _ = _run(Engine(backend), encoded, tiny.prompt, plain)
    changed = ref.token_ids[:10] + [(ref.token_ids[10] + 1) % 90] + ref.token_ids[11:]
    steps, rounds, fin, events = _run(Engine(backend), encoded, tiny.prompt, _spec(plain, draft="branch", draft_tokens=3),
                                      draft=BranchDraft(list(tiny.prompt.prompt_ids) + changed))
    by_round: dict[int, list[StepEvent]] = {}
    for e in steps:
        assert e.speculation in ("", "accepted", "resampled", "bonus")
        assert (e.spec_round == -1) == (e.speculation == "")
        if e.spec_round >= 0:
            by_round.setdefault(e.spec_round, []).append(e)
    assert [r.round for r in rounds] == list(range(len(rounds)))
    for r in rounds:
        mine = by_round[r.round]
        # the round comes after its StepEvents
        assert events.index(r) > max(events.index(e) for e in mine)
        assert r.step == mine[0].step
        assert sum(e.accepted for e in mine) == r.n_accepted == sum(d.accepted for d in r.drafted)
        assert [e.token_id for e in mine[:r.n_accepted]] == [d.id for d in r.drafted[:r.n_accepted]]
        assert len(r.drafted) <= r.gamma == 3
        if r.emitted_id is not None:
            assert mine[-1].token_id == r.emitted_id and mine[-1].speculation == r.emitted_kind
        judged = [d for d in r.drafted if d.judged]
        assert len(judged) == min(len(r.drafted), r.n_accepted + 1)
        assert all(d.u is None and d.q == 1.0 for d in r.drafted)  # greedy, deterministic draft
        if r.n_accepted < len(r.drafted):
            assert r.emitted_kind == "resampled" and r.residual_topk and r.residual_topk[0].id == r.emitted_id
    s = fin.stats.speculative
    assert s.draft_tokens == sum(len(r.drafted) for r in rounds)
    assert s.accepted == sum(r.n_accepted for r in rounds)
    assert s.tokens == len(fin.token_ids)
    assert 0 < s.acceptance_rate < 1
    d = s.to_dict()
    assert d["draft"] == "branch" and d["accepted"] == s.accepted


@pytest.mark.parametrize("kind,lean", KINDS)
def test_processors_apply_as_in_plain_decoding(tiny_models, kind, lean):
    """Repetition penalty, no-repeat n-gram, min new tokens, bad words and the model's
    suppress rules shape p exactly as in plain greedy decoding (row by row, each with its
    own prefix)."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    for kw in (dict(repetition_penalty=1.8), dict(no_repeat_ngram_size=2), dict(no_repeat_ngram_size=1),
               dict(repetition_penalty=0.6, min_new_tokens=10), dict(dry_multiplier=0.8, dry_allowed_length=1)):
        plain = DecodingOptions(max_new_tokens=30, **kw)
        ref_steps, _, ref, _ = _run(Engine(backend), encoded, tiny.prompt, plain)
        for draft_tokens in (0, 4):
            steps, _, fin, _ = _run(Engine(backend), encoded, tiny.prompt, _spec(plain, draft_tokens=draft_tokens))
            assert fin.token_ids == ref.token_ids, kw
            for a, b in zip(steps, ref_steps):
                same_step(a, b)
        # a branch draft built to break the rule (the plain run's tokens shifted): still the same output
        reference = list(tiny.prompt.prompt_ids) + ref.token_ids[:3] + ref.token_ids[:3] + ref.token_ids
        steps, _, fin, _ = _run(Engine(backend), encoded, tiny.prompt, _spec(plain, draft="branch", draft_tokens=5),
                                draft=BranchDraft(reference))
        assert fin.token_ids == ref.token_ids, kw


@pytest.mark.parametrize("kind,lean", KINDS)
def test_forced_ids_and_cache_reuse(tiny_models, kind, lean):
    """A fork: forced ids reported as in plain decoding, then speculation; reusing the kept
    cache of a speculative run (cut back after rejections) gives the same run."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    plain = DecodingOptions(max_new_tokens=24)
    engine = Engine(backend)
    _, _, ref, _ = _run(engine, encoded, tiny.prompt, plain, reuse_cache=False)
    forced = ref.token_ids[:4] + [(ref.token_ids[4] + 3) % 90]
    ref_steps, _, ref_fork, _ = _run(Engine(backend), encoded, tiny.prompt, plain, forced_ids=forced)
    spec = _spec(plain, draft_tokens=3)
    # a speculative run first leaves its (truncated) cache; the fork reuses it
    _run(engine, encoded, tiny.prompt, spec)
    steps, _, fin, _ = _run(engine, encoded, tiny.prompt, spec, forced_ids=forced)
    assert fin.stats.reused_tokens > 0
    assert fin.token_ids == ref_fork.token_ids
    ref_by_step = {e.step: e for e in ref_steps}
    for a in steps:
        same_step(a, ref_by_step[a.step])
    assert [e.forced for e in steps][:1] == [True]
    # the old branch drafts the fork
    steps, _, fin, _ = _run(Engine(backend), encoded, tiny.prompt, _spec(plain, draft="branch"), forced_ids=forced,
                            draft=BranchDraft(list(tiny.prompt.prompt_ids) + ref.token_ids))
    assert fin.token_ids == ref_fork.token_ids


def test_max_new_tokens_and_cancel(tiny_models):
    tiny = tiny_models["t5"]
    backend = _backend(tiny)
    encoded = backend.encode(tiny.inputs)
    plain = DecodingOptions(max_new_tokens=40)
    _, _, ref, _ = _run(Engine(backend), encoded, tiny.prompt, plain)
    reference = list(tiny.prompt.prompt_ids) + ref.token_ids
    for n in (1, 2, 5, 9):
        _, _, fin, _ = _run(Engine(backend), encoded, tiny.prompt,
                            _spec(dataclasses.replace(plain, max_new_tokens=n), draft="branch", draft_tokens=4),
                            draft=BranchDraft(reference))
        assert fin.token_ids == ref.token_ids[:n] and fin.reason == "max_tokens"
    calls = []
    steps, _, fin, _ = _run(Engine(backend), encoded, tiny.prompt, _spec(plain, draft="branch", draft_tokens=4),
                            draft=BranchDraft(reference), cancel=lambda: calls.append(1) or len(calls) > 2)
    assert fin.cancelled and fin.reason == "cancelled"
    assert fin.token_ids == ref.token_ids[:len(fin.token_ids)] and len(fin.token_ids) == 10


def test_a_wrong_eos_inside_a_draft_is_rejected_and_a_right_one_ends(tiny_eos_models):
    tiny = tiny_eos_models["whisper"]
    backend = _backend(tiny, True)
    encoded = backend.encode(tiny.inputs)
    plain = DecodingOptions(max_new_tokens=24)
    _, _, ref, _ = _run(Engine(backend), encoded, tiny.prompt, plain)
    eos = tiny.prompt.eos_token_id
    assert ref.reason == "eos" and len(ref.token_ids) >= 3
    early = list(tiny.prompt.prompt_ids) + ref.token_ids[:2] + [eos]
    _, rounds, fin, _ = _run(Engine(backend), encoded, tiny.prompt, _spec(plain, draft="branch", draft_tokens=6),
                             draft=BranchDraft(early))
    assert fin.token_ids == ref.token_ids and fin.reason == "eos"
    assert rounds[0].n_accepted == 2 and rounds[0].drafted[2].id == eos and not rounds[0].drafted[2].accepted


def test_ngram_lookup():
    assert find_continuation([1, 2, 3, 9, 1, 2, 3], [1, 2, 3], 3, before=4) == [9, 1, 2]
    # own_min_ngram=1: one-token matches in the own ids too (the default is 2, test_speculative_review)
    draft = NgramDraft(extra=[[50, 51, 7, 8, 52, 53]], own_min_ngram=1)
    # the most recent earlier match of the longest suffix
    assert draft.propose([1, 2, 3, 4, 2, 3, 5, 2, 3], 2)[0] == [5, 2]
    assert draft.propose([1, 2, 3, 4, 9, 3], 3)[0] == [4, 9, 3]  # n = 1: after the earlier 3
    assert draft.propose([1, 7, 8], 3)[0] == [52, 53]  # from the source
    assert draft.propose([1, 2, 99], 3) == ([], None)
    b = BranchDraft([0, 5, 6, 7, 8, 9, 10, 11])
    assert b.propose([0, 5, 6], 3)[0] == [7, 8, 9]
    assert b.propose([0, 5, 6, 40], 3)[0] == []  # parted
    assert b.propose([0, 5, 6, 40, 8, 9], 2)[0] == [10, 11]  # resynchronised
    assert b.propose([0, 5, 6, 40, 8, 9, 10], 5)[0] == [11]


def test_gamma_schedule_and_prediction():
    assert adapt_gamma(4, 4, 4) == 6 and adapt_gamma(4, 4, 1) == 3 and adapt_gamma(1, 2, 0) == 1
    assert adapt_gamma(4, 0, 0) == 4
    # Theorem 3.8 with verify = plain and draft = c * plain
    a, g, c = 0.8, 4, 0.05
    theorem = (1 - a ** (g + 1)) / ((1 - a) * (g * c + 1))
    assert predicted_speedup(a, g, c * 20.0, 20.0, 20.0) == pytest.approx(theorem)


def test_options_validate_the_draft():
    DecodingOptions(strategy="speculative", draft="early-exit:3", draft_tokens=5).validate()
    DecodingOptions(strategy="speculative", draft="model:tiny.en", verification="sample").validate()
    for bad, says in ((dict(draft="early-exit:"), "early-exit:4"), (dict(draft="tiny"), "model:NAME"),
                      (dict(draft_tokens=-1), "0 = adaptive"), (dict(verification="beam"), "greedy")):
        with pytest.raises(ValueError, match=says):
            DecodingOptions(strategy="speculative", **bad).validate()
    assert DecodingOptions(strategy="speculative", verification="sample").is_sampling
    assert not DecodingOptions(strategy="speculative").is_sampling


@pytest.mark.parametrize("kind,lean", KINDS)
def test_a_fork_drafts_from_the_run_it_forks(tiny_models, kind, lean):
    """draft "branch" without draft=: the engine drafts from the last run on this encoder
    output (the run being forked); the fork's output is the plain fork's."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    plain = DecodingOptions(max_new_tokens=24)
    with pytest.raises(ValueError, match="earlier run"):
        list(Engine(backend).run(encoded, tiny.prompt, _spec(plain, draft="branch")))
    engine = Engine(backend)
    _, _, ref, _ = _run(engine, encoded, tiny.prompt, plain)
    forced = ref.token_ids[:4] + [(ref.token_ids[4] + 3) % 90]
    _, _, ref_fork, _ = _run(Engine(backend), encoded, tiny.prompt, plain, forced_ids=forced)
    steps, rounds, fin, _ = _run(engine, encoded, tiny.prompt, _spec(plain, draft="branch", draft_tokens=4),
                                 forced_ids=forced)
    assert fin.token_ids == ref_fork.token_ids
    assert fin.stats.speculative.draft == "branch" and rounds


EARLY_EXIT_KINDS = [("whisper", True), ("whisper", False), ("marian", False)]


@pytest.mark.parametrize("kind,lean", EARLY_EXIT_KINDS)
@pytest.mark.parametrize("layer", [1, 2])
def test_early_exit_greedy_equals_greedy_search(tiny_models, kind, lean, layer):
    """early-exit:L (built by the engine): the target's greedy output; with L = all the tiny
    models' 2 decoder layers the draft is the target itself and every drafted token is kept."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    plain = DecodingOptions(max_new_tokens=24, repetition_penalty=1.3)
    ref_steps, _, ref, _ = _run(Engine(backend), encoded, tiny.prompt, plain)
    steps, rounds, fin, _ = _run(Engine(backend), encoded, tiny.prompt,
                                 _spec(plain, draft=f"early-exit:{layer}", draft_tokens=3))
    assert fin.token_ids == ref.token_ids
    for a, b in zip(steps, ref_steps):
        same_step(a, b)
    s = fin.stats.speculative
    assert s.draft == f"early-exit:{layer}" and s.draft_tokens > 0
    if layer == 2:
        assert s.accepted == s.draft_tokens


def test_a_near_tie_is_marked():
    """Greedy verification marks a round in which the target's top-2 logit margin was < 1e-4 at
    a judged position (a verify call of several positions sums in another order than single
    steps, so such a position may flip); the output is still greedy's."""
    from core.backends.base import DecoderPrompt
    from tests.core.test_speculative_sampling import EOS as T_EOS, V as TV, TableBackend

    table = torch.full((TV, TV), -5.0)
    for a in range(TV):
        table[a, (a + 1) % (TV - 1)] = 2.0  # 0 -> 1 -> 2 -> ... (never EOS)
    table[3, 5] = 2.0 - 5e-5  # after 3: 4 by a hair over 5
    backend = TableBackend(table)
    encoded = backend.encode(None)
    prompt = DecoderPrompt(prompt_ids=(0,), eos_token_id=T_EOS)
    plain = DecodingOptions(max_new_tokens=6, capture_attention=False)
    _, _, ref, _ = _run(Engine(backend), encoded, prompt, plain)
    assert ref.token_ids == [1, 2, 3, 4, 5, 6]
    _, rounds, fin, _ = _run(Engine(backend), encoded, prompt, _spec(plain, draft="branch", draft_tokens=2),
                             draft=BranchDraft([0, 1, 2, 3, 4, 5, 6]))
    assert fin.token_ids == ref.token_ids
    tied = [r for r in rounds if r.near_tie]
    assert len(tied) == 1 and tied[0].step <= 3 < tied[0].step + len(tied[0].drafted) + 1
