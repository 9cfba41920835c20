"""What the views show is what the strategy used (issue 9, "What is shown is true").

- Greedy and beam search ignore the sampling controls (temperature, top-k, top-p): the
  processed probabilities they report equal those of a run with those controls off, as
  transformers' ``generate(do_sample=False)`` ignores its warpers.
- A filter that keeps one token reports one processed candidate, not arbitrary
  zero-probability ids, and the raw top-k still lists the real raw runners-up.
"""

from __future__ import annotations

import pytest

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import BeamEvent, StepEvent
from core.options import DecodingOptions
from core.processors import Temperature, TopK, TopP, build_processors


def _steps(tiny, options: DecodingOptions) -> list[StepEvent]:
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind)
    encoded = backend.encode(tiny.inputs)
    return [e for e in Engine(backend).run(encoded, tiny.prompt, options) if isinstance(e, StepEvent)]


WARPERS = dict(temperature=2.0, top_k=3, top_p=0.5)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_deterministic_strategies_build_no_warpers(tiny_models, strategy):
    tiny = tiny_models["whisper"]
    procs = build_processors(DecodingOptions(strategy=strategy, **WARPERS), tiny.prompt, len(tiny.prompt.prompt_ids))
    assert not [p for p in procs if isinstance(p, (Temperature, TopK, TopP))]
    sample = build_processors(DecodingOptions(strategy="sample", **WARPERS), tiny.prompt, len(tiny.prompt.prompt_ids))
    assert [type(p) for p in sample if isinstance(p, (Temperature, TopK, TopP))] == [Temperature, TopK, TopP]


@pytest.mark.parametrize("kind", ["whisper", "marian"])
def test_greedy_probabilities_ignore_sampling_controls(tiny_models, kind):
    tiny = tiny_models[kind]
    plain = _steps(tiny, DecodingOptions(strategy="greedy", max_new_tokens=12))
    warped = _steps(tiny, DecodingOptions(strategy="greedy", max_new_tokens=12, **WARPERS))
    assert len(plain) > 3
    assert [e.token_id for e in warped] == [e.token_id for e in plain]
    for a, b in zip(plain, warped):
        assert b.prob == pytest.approx(a.prob, abs=1e-6)
        assert b.prob == pytest.approx(b.raw_prob, abs=1e-6)  # no processor changed the distribution
        assert [t.id for t in b.topk] == [t.id for t in a.topk]
        assert [t.prob for t in b.topk] == pytest.approx([t.prob for t in a.topk], abs=1e-6)


def test_beam_probabilities_ignore_sampling_controls(tiny_models):
    tiny = tiny_models["whisper"]
    plain = _steps(tiny, DecodingOptions(strategy="beam", num_beams=3, max_new_tokens=10))
    warped = _steps(tiny, DecodingOptions(strategy="beam", num_beams=3, max_new_tokens=10, **WARPERS))
    assert [e.token_id for e in warped] == [e.token_id for e in plain]
    assert [e.prob for e in warped] == pytest.approx([e.prob for e in plain], abs=1e-6)


def test_single_survivor_reports_real_runners_up(tiny_models):
    tiny = tiny_models["whisper"]
    steps = _steps(tiny, DecodingOptions(strategy="sample", top_k=1, max_new_tokens=6, top_k_report=8))
    assert steps
    for ev in steps:
        assert len(ev.topk) == 1  # one token survived the filter
        assert ev.topk[0].id == ev.token_id and ev.topk[0].prob == pytest.approx(1.0)
        assert len(ev.raw_topk) == 8
        assert all(t.prob > 0 for t in ev.raw_topk)
        assert [t.prob for t in ev.raw_topk] == sorted((t.prob for t in ev.raw_topk), reverse=True)


def test_topk_chart_rows_after_single_survivor(tiny_models):
    from gui.widgets.topk_chart import rows_for

    tiny = tiny_models["whisper"]
    ev = _steps(tiny, DecodingOptions(strategy="sample", top_k=1, max_new_tokens=2))[0]
    rows = rows_for(ev)
    assert rows[0].chosen and rows[0].prob == pytest.approx(1.0)
    cut = rows[1:]
    assert cut and all(r.prob == 0.0 for r in cut)
    raw = {t.id: t.prob for t in ev.raw_topk}
    assert all(r.token_id in raw and r.raw_prob == pytest.approx(raw[r.token_id]) and r.raw_prob > 0 for r in cut)
