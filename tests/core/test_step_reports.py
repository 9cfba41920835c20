"""The numbers each StepEvent reports equal transformers' own processors on the same logits.

For every emitted token, ``raw_topk``/``raw_prob`` must be the softmax of the logits with
only the hard rules (suppress tokens) applied, and ``topk``/``prob``/``entropy`` the
softmax of the scores after transformers' processors and (sampling only) warpers, with
filtered tokens left out of ``topk``. The reference runs the model once over the whole
sequence (tests/core/reference.py), so it shares neither our KV cache nor our processors.
"""

from __future__ import annotations

import pytest

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import StepEvent
from core.options import DecodingOptions
from tests.core.reference import assert_same_topk, close, entropy, reference_steps, top_k_report

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CASES = {
    "greedy": dict(strategy="greedy"),
    "greedy-penalties": dict(strategy="greedy", repetition_penalty=1.3, no_repeat_ngram_size=2),
    # greedy ignores the sampling controls: processed = raw + penalties, no warper
    "greedy-warpers-ignored": dict(strategy="greedy", temperature=0.5, top_k=3, top_p=0.5, repetition_penalty=0.9),
    "sample-t-topk-topp": dict(strategy="sample", temperature=0.8, top_k=20, top_p=0.9, seed=3),
    "sample-topk-penalty": dict(strategy="sample", temperature=1.5, top_k=4, repetition_penalty=1.2, seed=5),
    "sample-topp": dict(strategy="sample", top_p=0.6, no_repeat_ngram_size=2, seed=7),
    "beam": dict(strategy="beam", num_beams=3),
    "beam-penalties": dict(strategy="beam", num_beams=4, repetition_penalty=1.5, temperature=0.3, top_k=2),
}


def _run(tiny, options):
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind)
    events = list(Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, options))
    return [e for e in events if isinstance(e, StepEvent)], events[-1]


@pytest.mark.parametrize("kind", ["whisper", "marian", "t5"])
@pytest.mark.parametrize("case", list(CASES))
def test_reported_topk_equal_transformers_processors(tiny_models, kind, case):
    tiny = tiny_models[kind]
    options = DecodingOptions(max_new_tokens=12, top_k_report=8, **CASES[case]).validate()
    steps, fin = _run(tiny, options)
    assert len(steps) > 3 and [e.token_id for e in steps] == fin.token_ids
    refs = reference_steps(tiny.model, tiny.inputs, tiny.prompt, fin.token_ids, options)
    k = options.top_k_report
    differ = 0
    for t, (e, ref) in enumerate(zip(steps, refs)):
        where = f"{kind} {case} step {t}"
        assert_same_topk(e.raw_topk, top_k_report(ref.raw, k), f"{where} raw_topk")
        assert_same_topk(e.topk, top_k_report(ref.processed, k), f"{where} topk")
        assert close(e.raw_prob, float(ref.raw[e.token_id])), where
        assert close(e.prob, float(ref.processed[e.token_id])), where
        assert e.entropy == pytest.approx(entropy(ref.processed), rel=1e-2, abs=1e-3), where
        # the chosen token is one the processors kept (sampling: inside top-k / top-p)
        assert ref.processed[e.token_id] > 0, f"{where}: token {e.token_id} was filtered out"
        differ += [(x.id, round(x.prob, 4)) for x in e.topk] != [(x.id, round(x.prob, 4)) for x in e.raw_topk]
    sampling_warpers = options.strategy == "sample" and (
        options.temperature != 1.0 or options.top_k > 0 or options.top_p < 1.0)
    if options.repetition_penalty != 1.0 or options.no_repeat_ngram_size or sampling_warpers:
        assert differ > 0, f"{kind} {case}: processed and raw top-k never differ, the check is blind"
    else:  # only the hard rules, which apply to both
        assert differ == 0
