"""Speculative decoding, the reviewer's findings (issue 21): the prediction's α is
accepted / judged; calls that fed more positions than the rows needed (prefills) stay out of
the timings; a fixed draft length still probes plain steps (c and the prediction known);
under sampling the off switch decides from counts (same seed, same run whatever the clock);
gamma +2 only after the full scheduled draft was accepted; n-gram lookup in the decoder's own
ids needs n >= 2.
"""

from __future__ import annotations

import dataclasses
import types

import pytest

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import Finished, SpeculationRound, SpeculationSummary
from core.options import DecodingOptions
from core.speculative import loop
from core.speculative.branch import BranchDraft
from core.speculative.loop import SpeculativeRun
from core.speculative.ngram import NgramDraft
from core.speculative.rule import GammaSchedule, adapt_gamma, predicted_speedup
from core.speculative.summary import merge_summary

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class ScriptDraft:
    """A deterministic draft that proposes ``tokens[:gamma]`` in every round (``silent_first``:
    nothing in its first call)."""

    name = "script"
    deterministic = True

    def __init__(self, tokens, silent_first: int = 0):
        self.tokens, self.silent, self.calls = list(tokens), silent_first, 0

    def propose(self, ids, gamma, process=None):
        self.calls += 1
        if self.calls <= self.silent:
            return [], None
        return self.tokens[:gamma], None

    def rollback(self, n_ids):
        pass


def _setup(tiny_models, kind="whisper"):
    tiny = tiny_models[kind]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind)
    return tiny, backend, backend.encode(tiny.inputs)


def _reference(tiny, finished):
    """The run's ids (prompt first, its EOS last when it ended by EOS): a branch draft that
    always proposes."""
    eos = [tiny.prompt.eos_token_id] if finished.reason == "eos" else []
    return list(tiny.prompt.prompt_ids) + finished.token_ids + eos


def _spec_run(backend, encoded, prompt, options, draft):
    run = SpeculativeRun(Engine(backend), encoded, prompt, options, draft=draft)
    events = list(run.events())
    assert isinstance(events[-1], Finished)
    return run, events


def test_the_prediction_uses_accepted_over_judged(tiny_models):
    tiny, backend, encoded = _setup(tiny_models)
    options = DecodingOptions(strategy="speculative", draft="ngram", draft_tokens=4, max_new_tokens=8)
    run = SpeculativeRun(Engine(backend), encoded, tiny.prompt, options, draft=ScriptDraft([1, 2, 3, 4]))
    s = run.summary
    s.draft_tokens, s.judged, s.accepted = 12, 6, 3  # 3 rounds of 4: 2 judged each, 1 kept
    run.drafted_rounds = [(1.0, 10.0, 4, 2)] * 3
    run.plain_ms = [10.0]
    run._finish_summary()
    assert s.acceptance_rate == 0.25 and s.judged_acceptance_rate == 0.5
    assert s.speedup_predicted == pytest.approx(predicted_speedup(0.5, 4.0, 0.25, 10.0, 10.0))
    d = s.to_dict()
    assert d["judged"] == 6 and d["judged_acceptance_rate"] == 0.5 and d["acceptance_rate"] == 0.25
    merged = merge_summary(s, dataclasses.replace(s))
    assert merged.judged == 12
    assert SpeculationSummary(draft="x").judged == 0  # compatible default


def test_judged_counts_the_tokens_the_target_looked_at(tiny_models):
    tiny, backend, encoded = _setup(tiny_models)
    options = DecodingOptions(strategy="speculative", draft_tokens=3, max_new_tokens=20)
    run, events = _spec_run(backend, encoded, tiny.prompt, options, ScriptDraft([7, 7, 7]))
    rounds = [e for e in events if isinstance(e, SpeculationRound)]
    s = run.summary
    assert s.judged == sum(d.judged for r in rounds for d in r.drafted)
    assert s.accepted <= s.judged <= s.draft_tokens


def test_prefill_calls_are_left_out_of_the_timings(tiny_models):
    """Round 0 feeds the whole prompt (and is the draft's first proposal): not timed. A plain
    first call (the draft proposed nothing) is a prefill too: not a plain step's time."""
    tiny, backend, encoded = _setup(tiny_models)
    _, ref = _spec_run(backend, encoded, tiny.prompt, DecodingOptions(max_new_tokens=30, strategy="speculative",
                                                                       draft_tokens=2), NgramDraft())
    reference = _reference(tiny, ref[-1])
    options = DecodingOptions(strategy="speculative", draft="branch", draft_tokens=2, max_new_tokens=30)
    run, events = _spec_run(backend, encoded, tiny.prompt, options, BranchDraft(reference))
    n_rounds = sum(isinstance(e, SpeculationRound) for e in events)
    assert len(run.drafted_rounds) == n_rounds - 1
    # the draft is silent in its first call: the first (plain) call is the prefill
    run, events = _spec_run(backend, encoded, tiny.prompt, options, ScriptDraft([5, 6], silent_first=1))
    n_rounds = sum(isinstance(e, SpeculationRound) for e in events)
    n_plain = run.summary.rounds - n_rounds
    assert len(run.plain_ms) == n_plain - 1
    assert len(run.drafted_rounds) == n_rounds - 1  # the draft's first proposal (its own prefill)


def test_a_fixed_draft_length_still_measures_c(tiny_models):
    tiny, backend, encoded = _setup(tiny_models)
    _, ref = _spec_run(backend, encoded, tiny.prompt, DecodingOptions(max_new_tokens=40, strategy="speculative",
                                                                       draft_tokens=2), NgramDraft())
    reference = _reference(tiny, ref[-1])
    options = DecodingOptions(strategy="speculative", draft="branch", draft_tokens=2, max_new_tokens=40)
    run, events = _spec_run(backend, encoded, tiny.prompt, options, BranchDraft(reference))
    s = run.summary
    assert events[-1].token_ids == ref[-1].token_ids
    assert s.c is not None and s.speedup_predicted is not None
    assert s.switched_off == ""
    assert all(r.gamma == 2 for r in events if isinstance(r, SpeculationRound))


@pytest.mark.parametrize("plain_ms", [1e-9, 1e9])
def test_under_sampling_the_off_switch_does_not_read_the_clock(tiny_models, monkeypatch, plain_ms):
    """The same seed gives the same run whether plain steps look free or dear: the switch
    decides from counts (accepted / judged) under sampling."""
    tiny, backend, encoded = _setup(tiny_models)
    options = DecodingOptions(strategy="speculative", verification="sample", seed=3, max_new_tokens=40)
    ref_run, ref = _spec_run(backend, encoded, tiny.prompt, options, ScriptDraft([0, 0, 0, 0]))
    fake = types.SimpleNamespace(median=lambda xs: plain_ms, mean=lambda xs: (lambda v: sum(v) / len(v))(list(xs)))
    monkeypatch.setattr(loop, "statistics", fake)
    run, events = _spec_run(backend, encoded, tiny.prompt, options, ScriptDraft([0, 0, 0, 0]))
    assert events[-1].token_ids == ref[-1].token_ids
    assert run.summary.rounds == ref_run.summary.rounds
    assert bool(run.summary.switched_off) == bool(ref_run.summary.switched_off)
    assert run.summary.switched_off  # token 0 is (almost) never accepted: off by the counts


def test_gamma_grows_only_after_the_full_scheduled_draft():
    assert adapt_gamma(4, 4, 4) == 6
    assert adapt_gamma(4, 2, 2) == 3  # a short draft accepted in full: transformers lowers it
    schedule = GammaSchedule(start=4)
    schedule.update(1, 1)
    assert schedule.gamma == 3
    schedule.update(3, 3)
    assert schedule.gamma == 5


def test_ngram_in_the_decoders_own_ids_needs_two_tokens():
    draft = NgramDraft(extra=[[50, 51, 7, 8, 52, 53]])
    assert draft.propose([1, 2, 3, 4, 9, 3], 3) == ([], None)  # n = 1 in the own ids: no draft
    assert draft.propose([1, 2, 3, 4, 2, 3], 3)[0] == [4, 2, 3]  # n = 2 still
    assert draft.propose([1, 7, 8], 3)[0] == [52, 53]
    assert draft.propose([1, 9, 8], 3)[0] == [52, 53]  # n = 1 in the source ids still
