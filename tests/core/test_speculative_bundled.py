"""Speculative decoding on the bundled models (issue 21): greedy verification gives the
target's own greedy ids, 100%, through the tasks (whisper tiny.en on the bundled clip, with and
without timestamps and with penalties; Bergamot en->pt), for the n-gram draft and the branch
draft (the previous run on the same cached encoder output drafts the next one).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import soundfile as sf

from core.events import Finished, SpeculationRound, StepEvent
from core.options import DecodingOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"
TEXT = ("Flight LH 4021 leaves Lisbon at 10:45 on 12 March; flight LH 4022 returns from Berlin at 18:30 "
        "on 19 March. Maria Oliveira and João Pereira booked seats 14A and 14B.")


@pytest.fixture(scope="module")
def clip():
    audio, rate = sf.read(SAMPLE, dtype="float32")
    assert rate == 16_000
    return audio


@pytest.fixture(scope="module")
def en_pt(translation_en_pt):
    return translation_en_pt  # loaded once per session


def _decode(model, source, options, **settings):
    events = list(model.decode(source, options, **settings))
    fin = events[-1]
    assert isinstance(fin, Finished)
    return [e for e in events if isinstance(e, StepEvent)], [e for e in events if isinstance(e, SpeculationRound)], fin


def _same(steps, ref_steps):
    assert [(e.step, e.token_id) for e in steps] == [(e.step, e.token_id) for e in ref_steps]
    for a, b in zip(steps, ref_steps):
        assert a.prob == pytest.approx(b.prob, abs=1e-3)


@pytest.mark.parametrize("settings,extra", [
    (dict(language="en"), {}),
    (dict(language="en", timestamps=True), {}),
    (dict(language="en", timestamps=True), dict(repetition_penalty=1.3, no_repeat_ngram_size=3)),
], ids=["plain", "timestamps", "timestamps+penalties"])
def test_whisper_tiny_en_on_the_clip(whisper_tiny_en, clip, settings, extra):
    plain = DecodingOptions(max_new_tokens=96, top_k_report=5, **extra)
    ref_steps, _, ref = _decode(whisper_tiny_en, clip, plain, **settings)
    assert len(ref.token_ids) > 10
    for draft, n in (("ngram", 0), ("ngram", 4), ("branch", 0)):
        # "branch": the run just before on the same cached encoder output drafts
        steps, rounds, fin = _decode(whisper_tiny_en, clip, plain.with_(strategy="speculative", draft=draft,
                                                                        draft_tokens=n), **settings)
        assert fin.token_ids == ref.token_ids, (draft, n)
        _same(steps, ref_steps)
        s = fin.stats.speculative
        assert s is not None and s.draft == draft
        if draft == "branch":
            assert s.accepted == s.draft_tokens > 0 and s.tokens_per_target_call > 2
        assert all(not r.near_tie for r in rounds)


def test_bergamot_en_pt(en_pt):
    plain = DecodingOptions(max_new_tokens=128, top_k_report=5)
    ref_steps, _, ref = _decode(en_pt, TEXT, plain)
    assert len(ref.token_ids) > 30
    for draft, n in (("ngram", 0), ("ngram", 3), ("branch", 0)):
        steps, rounds, fin = _decode(en_pt, TEXT, plain.with_(strategy="speculative", draft=draft, draft_tokens=n))
        assert fin.token_ids == ref.token_ids, (draft, n)
        assert fin.text == ref.text
        _same(steps, ref_steps)
        s = fin.stats.speculative
        assert s.draft_tokens > 0
        if n or draft == "branch":  # (the adaptive n-gram run may switch itself off on timings)
            assert s.accepted > 0
        if draft == "ngram" and n:  # names and numbers are copied from the source (shared vocabulary);
            # a fixed gamma: the adaptive one may switch itself off on timings
            assert s.acceptance_rate > 0.15
