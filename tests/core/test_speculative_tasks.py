"""Speculative decoding everywhere a strategy can go (issue 21): lanes (a speculative lane
beside plain greedy measures the speed-up), lane specs, forks (the old branch drafts), what-ifs
and long-form (a failed attempt's tokens draft the next attempt), on the bundled tiny.en."""

from __future__ import annotations

from pathlib import Path

import pytest
import soundfile as sf

from core.events import AttemptEvent, Finished, SpeculationRound, StepEvent
from core.options import DecodingOptions
from core.tasks.lane_spec import describe, parse_lane_spec
from core.tasks.lanes import LaneEvent, LanesFinished
from core.tasks.longform import LongFormOptions
from core.tasks.whatif import WhatIfDone

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


@pytest.fixture(scope="module")
def clip():
    audio, rate = sf.read(SAMPLE, dtype="float32")
    return audio


def _steps(events):
    return [e for e in events if isinstance(e, StepEvent)]


def test_lane_specs():
    o = parse_lane_spec("speculative:early-exit:4,gamma=3")
    assert (o.strategy, o.draft, o.draft_tokens) == ("speculative", "early-exit:4", 3)
    assert describe(o) == "speculative:draft=early-exit:4,gamma=3"
    o = parse_lane_spec("speculative:draft=ngram,verify=sample,seed=2")
    assert (o.draft, o.verification, o.seed) == ("ngram", "sample", 2)
    assert parse_lane_spec(describe(o)).verification == "sample"
    with pytest.raises(ValueError, match="early-exit:L"):
        parse_lane_spec("speculative:draft=early")


def test_a_speculative_lane_beside_greedy(whisper_tiny_en, clip):
    lanes = [DecodingOptions(max_new_tokens=64), parse_lane_spec("speculative:branch,gamma=4"),
             parse_lane_spec("speculative:ngram")]
    # the branch lane drafts from the last run on the cached encoder output: decode once first
    list(whisper_tiny_en.decode(clip, lanes[0]))
    events = list(whisper_tiny_en.decode_lanes(clip, lanes))
    done = events[-1]
    assert isinstance(done, LanesFinished)
    ids = [r.token_ids for r in done.lanes]
    assert ids[0] == ids[1] == ids[2] and len(ids[0]) > 10
    fins = {ev.lane: ev.event for ev in events if isinstance(ev, LaneEvent) and isinstance(ev.event, Finished)}
    assert fins[0].stats.speculative is None
    for k in (1, 2):
        s = fins[k].stats.speculative
        assert s is not None and s.speedup_measured is not None and s.speedup_measured > 0
    rounds = [ev.event for ev in events if isinstance(ev, LaneEvent) and isinstance(ev.event, SpeculationRound)]
    assert rounds


def test_fork_what_if_and_no_input_take_the_strategy(whisper_tiny_en, clip):
    plain = DecodingOptions(max_new_tokens=64)
    spec = plain.with_(strategy="speculative", draft="branch", draft_tokens=4)
    events = list(whisper_tiny_en.decode(clip, plain))
    steps = _steps(events)
    # a fork at step 5: the old branch drafts the new one (the engine keeps the last run on the segment)
    forced = [e.token_id for e in steps[:5]] + [steps[5].topk[1].id]
    want = list(whisper_tiny_en.fork(clip, plain, segment=0, forced_ids=forced, step_offset=0))[-1]
    list(whisper_tiny_en.decode(clip, plain))  # the run being forked is the last one again
    got = list(whisper_tiny_en.fork(clip, spec, segment=0, forced_ids=forced, step_offset=0))
    assert got[-1].token_ids == want.token_ids
    assert got[-1].stats.speculative.draft == "branch"
    assert got[-1].stats.speculative.accepted > 0  # the two branches resynchronise after the fork
    # a what-if under speculative decoding (ngram: there is no earlier run on the masked input)
    spec_ngram = plain.with_(strategy="speculative", draft="ngram")
    a = list(whisper_tiny_en.what_if(clip, plain, steps, span=(0.50, 0.84)))[-1]
    b = list(whisper_tiny_en.what_if(clip, spec_ngram, steps, span=(0.50, 0.84)))[-1]
    assert isinstance(b, WhatIfDone)
    assert [s.token_id for s in a.shifts] == [s.token_id for s in b.shifts]
    assert [round(s.p_other, 4) for s in a.shifts] == [round(s.p_other, 4) for s in b.shifts]
    prior = list(whisper_tiny_en.no_input(clip, spec_ngram, steps))[-1]
    assert len(prior.shifts) == len(steps)


def test_long_form_fallback_drafts_from_the_failed_attempt(whisper_tiny_en, clip):
    lf = LongFormOptions(temperatures=(0.0, 0.4, 0.8), logprob_threshold=0.0)  # every attempt fails
    plain = DecodingOptions()
    want = [a for a in whisper_tiny_en.transcribe(clip, plain, lf) if isinstance(a, AttemptEvent)]
    events = list(whisper_tiny_en.transcribe(clip, plain.with_(strategy="speculative", draft="ngram"), lf))
    attempts = [ev for ev in events if isinstance(ev, AttemptEvent)]
    assert [a.temperature for a in attempts] == [0.0, 0.4, 0.8]
    assert attempts[0].token_ids == want[0].token_ids  # greedy verification: the greedy attempt
    rounds = [ev for ev in events if isinstance(ev, SpeculationRound)]
    assert {r.draft for r in rounds} >= {"branch"}  # the later attempts drafted from the failed ones
    kept = [ev for ev in events if isinstance(ev, StepEvent)]
    assert len(kept) == sum(len(a.steps) for a in attempts)
    assert isinstance(events[-1], Finished) and events[-1].stats.speculative is not None
