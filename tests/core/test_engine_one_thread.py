"""The engine's per-token work outside the decoder step (scoring, the strategy's choice, the
report) runs on one torch thread (``core.backends.step_threads.one_thread``) for a step of few
rows: with two threads its ``index_fill``/``amax`` each opened an OpenMP region per token, whose
pool then spins on the core the split step's worker needs (H3, session 13: tiny.en int8 on two
threads 24.9 -> 7.5 ms of process CPU a token). The caller's threads are back between events."""

from __future__ import annotations

import pytest
import torch

from core.engine import Engine
from core.options import DecodingOptions
from core.report import StepReporter
from core.scoring import Scorer
from tests.core.test_marian_tiny import EN, backend_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py (two threads set below)

APP = DecodingOptions(strategy="greedy", max_new_tokens=200, top_k_report=10, capture_attention=True)


def _recorded(monkeypatch, options):
    """(threads seen inside Scorer.score and StepReporter.row_report, threads the consumer saw at
    each event, ids) of one run with two torch threads."""
    inside: list[int] = []
    score0, row0 = Scorer.score, StepReporter.row_report

    def score(self, *args, **kwargs):
        inside.append(torch.get_num_threads())
        return score0(self, *args, **kwargs)

    def row_report(self, *args, **kwargs):
        inside.append(torch.get_num_threads())
        return row0(self, *args, **kwargs)

    monkeypatch.setattr(Scorer, "score", score)
    monkeypatch.setattr(StepReporter, "row_report", row_report)
    backend = backend_for("en-pt", shortlist=True)
    encoded = backend.encode(backend.source_ids(EN[0]))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        outside, events = [], []
        for event in Engine(backend).run(encoded, backend.decoder_prompt(encoded), options):
            outside.append(torch.get_num_threads())
            events.append(event)
    finally:
        torch.set_num_threads(before)
    return inside, outside, events[-1].token_ids


@pytest.mark.parametrize("options", [APP, APP.with_(strategy="beam", num_beams=3)], ids=["greedy", "beam"])
def test_the_per_token_work_runs_on_one_thread_and_the_consumer_keeps_its_threads(monkeypatch, options):
    inside, outside, ids = _recorded(monkeypatch, options)
    assert inside and set(inside) == {1}
    assert outside and set(outside) == {2}
    backend = backend_for("en-pt", shortlist=True)
    encoded = backend.encode(backend.source_ids(EN[0]))
    reference = list(Engine(backend).run(encoded, backend.decoder_prompt(encoded), options))[-1].token_ids
    assert ids == reference  # one thread (the fixture) gives the same ids
