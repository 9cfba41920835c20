"""Beam search picks its output by the length-normalised score, not the raw one.

Finished hypotheses are ranked by ``sum log p / generated_len ** length_penalty``
(transformers' ``BeamSearchScorer`` / ``generate(num_beams=N)``, EOS counted in the
length). In most runs of the tiny models the hypothesis with the best normalised score
also has the best raw (cumulative) log-probability, so an engine that chose by the raw
one still matched ``generate()`` in 43 of the 45 EOS cases of tests/core/test_engine.py.
The cases below were searched for: in each, the best raw and the best normalised
finished hypotheses differ, for every length penalty from -1 to 3 (at 0 the two
scores are the same number, so they cannot differ there), and the engine must give
``generate()``'s output, the normalised best.
"""

from __future__ import annotations

import pytest

from core.events import BeamEvent, StepEvent
from core.options import DecodingOptions
from tests.core.conftest import EOS_BIAS, MAKERS, add_eos_bias
from tests.core.test_engine import _generate, _ours

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# (kind, EOS bias, length penalty, num_beams, max_new_tokens): found by running every
# kind x bias x penalty x width x limit and keeping those where the two choices differ
CASES = [
    ("whisper", 12.0, -1.0, 3, 8),  # a negative penalty favours the shorter (3 < 4 tokens)
    ("whisper", 12.0, -0.5, 4, 12),
    ("t5", 4.0, 0.5, 5, 8),  # the longer (8 tokens) beats EOS at once
    ("whisper", 10.0, 1.0, 4, 8),
    ("marian", 1.2, 1.0, 2, 8),
    ("t5", 6.0, 1.0, 3, 16),
    ("whisper", 10.0, 1.5, 3, 12),
    ("whisper", 10.0, 2.0, 2, 16),
    ("whisper", 10.0, 3.0, 2, 16),
]

_models: dict[tuple[str, float], object] = {}


def _tiny(kind: str, bias: float):
    """The seeded tiny ``kind`` model with its EOS logit raised by ``bias`` (cached)."""
    if (kind, bias) not in _models:
        tiny = MAKERS[kind]()
        add_eos_bias(tiny.model, tiny.prompt.eos_token_id, bias, EOS_BIAS[kind][0])
        _models[kind, bias] = tiny
    return _models[kind, bias]


@pytest.mark.parametrize("kind,bias,length_penalty,num_beams,max_new", CASES,
                         ids=[f"{c[0]}-lp{c[2]}" for c in CASES])
def test_beam_output_is_the_length_normalised_best_not_the_raw_best(kind, bias, length_penalty, num_beams, max_new):
    tiny = _tiny(kind, bias)
    options = DecodingOptions(strategy="beam", num_beams=num_beams, length_penalty=length_penalty,
                              max_new_tokens=max_new).validate()
    events, fin = _ours(tiny, options)
    finished = [e for e in events if isinstance(e, BeamEvent)][-1].finished
    assert len(finished) >= 2

    def normalised(h):  # generated length, EOS counted (a hypothesis at the limit has none)
        return h.score / min(len(h.token_ids) + 1, max_new) ** length_penalty

    by_norm = max(finished, key=normalised)
    by_raw = max(finished, key=lambda h: h.score)
    # not vacuous: the two rules choose different hypotheses here
    assert by_norm.token_ids != by_raw.token_ids and by_raw.score > by_norm.score
    expected = _generate(tiny, options, num_beams=num_beams)
    assert expected == by_norm.token_ids  # transformers chooses by the normalised score
    assert fin.token_ids == expected and finished[0].token_ids == expected
    assert [e.token_id for e in events if isinstance(e, StepEvent)] == expected


def test_every_length_penalty_but_zero_has_a_case():
    assert {c[2] for c in CASES} >= {-1.0, -0.5, 0.5, 1.0, 1.5, 2.0, 3.0}
    assert {c[0] for c in CASES if c[2] == 1.0} == {"whisper", "marian", "t5"}
