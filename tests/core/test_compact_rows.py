"""Compact rows: a shortlist's step scored, chosen and reported over the columns of its blocks
(``StepOutput.logit_ids``, ``Scorer``, greedy's ``columns``, the report's ``_Dist``) gives the
same events, bit for bit, as the full 32,000-wide rows; where a rule reads the whole row (a
chain stage, sampling, beams, forced tokens, the lens) the engine keeps full rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from core.backends.base import COMPACT_BLOCK
from core.engine import Engine
from core.options import DecodingOptions
from core.report import StepReporter, StepTensors
from core.scoring import compact_softmax_exact
from tests.core.test_marian_tiny import EN, PT, backend_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

APP = DecodingOptions(strategy="greedy", max_new_tokens=200, top_k_report=10, capture_attention=True)


def _same(a, b) -> bool:
    """Deep equality of events, floats and arrays bit for bit (the decoder's wall time and the
    run's stats left out)."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a) if f.name not in ("time_ms", "stats"))
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and a.tobytes() == b.tobytes())
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return a == b


class _Spy:
    """Wraps a backend's ``step``: counts the steps that came back compact."""

    def __init__(self, backend):
        self.backend, self.compact_steps, self.steps = backend, 0, 0
        self._step = backend.step

    def __enter__(self):
        def step(*args, **kwargs):
            out = self._step(*args, **kwargs)
            self.steps += 1
            self.compact_steps += out.logit_ids is not None
            return out

        self.backend.step = step
        return self

    def __exit__(self, *exc):
        del self.backend.step


def _runs(backend, text, options, prompt=None, **run_kw):
    """(events with compact rows, events with full rows, compact steps, steps) of one sentence."""
    encoded = backend.encode(backend.source_ids(text))
    prompt = prompt or backend.decoder_prompt(encoded)
    with _Spy(backend) as spy:
        compact = list(Engine(backend).run(encoded, prompt, options, **run_kw))
    full = list(Engine(backend, compact=False).run(encoded, prompt, options, **run_kw))
    return compact, full, spy.compact_steps, spy.steps


def test_the_softmax_sums_a_compact_row_as_the_full_row_here():
    assert compact_softmax_exact(32000)
    assert not compact_softmax_exact(32000 + COMPACT_BLOCK // 2)  # a cut-short last block: full rows


@pytest.mark.parametrize("direction", ["en-pt", "pt-en"])
def test_a_shortlist_run_on_compact_rows_gives_the_full_rows_events_bit_for_bit(direction):
    backend = backend_for(direction, shortlist=True)
    sentences = {"en-pt": EN, "pt-en": PT}[direction]
    for text in sentences[:12]:
        compact, full, n_compact, n_steps = _runs(backend, text, APP)
        assert n_compact == n_steps > 0  # every step came compact
        assert _same(compact, full), text


@pytest.mark.parametrize("options", [APP.with_(kv_cache=False), APP.with_(top_k_report=1, capture_attention=False),
                                     APP.with_(max_new_tokens=3)], ids=["no-kv-cache", "lean", "token-limit"])
def test_other_greedy_settings_run_compact_with_the_same_events(options):
    backend = backend_for("en-pt", shortlist=True)
    compact, full, n_compact, n_steps = _runs(backend, EN[4], options)
    assert n_compact == n_steps > 0
    assert _same(compact, full)


def test_a_fork_reusing_a_compact_runs_kept_cache_gives_the_same_events():
    backend = backend_for("en-pt", shortlist=True)
    encoded = backend.encode(backend.source_ids(EN[6]))
    prompt = backend.decoder_prompt(encoded)
    runs = []
    for compact in (True, False):
        engine = Engine(backend, compact=compact)
        ids = list(engine.run(encoded, prompt, APP))[-1].token_ids
        # forced ids: full rows, on the cache the (compact) run kept
        runs.append(list(engine.run(encoded, prompt, APP, forced_ids=ids[:3])))
    assert runs[0][-1].stats.reused_tokens == runs[1][-1].stats.reused_tokens > 0
    assert _same(runs[0], runs[1])


def test_a_suppressed_id_inside_the_shortlist_is_suppressed_at_its_column():
    backend = backend_for("en-pt", shortlist=True)
    text = EN[0]
    encoded = backend.encode(backend.source_ids(text))
    prompt = backend.decoder_prompt(encoded)
    first = next(iter(Engine(backend).run(encoded, prompt, APP))).token_id  # greedy's first choice
    rows = set(encoded.extras["shortlist_rows"].tolist())
    assert first in rows
    for rule in ({"suppress_tokens": prompt.suppress_tokens + (first,)},
                 {"begin_suppress_tokens": (first,)}):
        changed = dataclasses.replace(prompt, **rule)
        compact, full, n_compact, n_steps = _runs(backend, text, APP, prompt=changed)
        assert n_compact == n_steps
        assert _same(compact, full)
        assert compact[0].token_id != first
        assert all(t.id != first for t in compact[0].raw_topk)


@pytest.mark.parametrize("options", [
    APP.with_(repetition_penalty=1.3),  # a chain stage reads (and writes) the whole row
    APP.with_(no_repeat_ngram_size=2),  # bans ids wherever they are
    APP.with_(strategy="sample", seed=1, min_p=0.05),  # a filter over the whole row
    APP.with_(strategy="sample", seed=3, temperature=0.8),  # the draw depends on the row's layout
    APP.with_(strategy="beam", num_beams=3),  # log-probabilities, several rows
    APP.with_(capture_lens=True),
], ids=["repetition-penalty", "no-repeat-ngram", "min-p", "sampling", "beam", "lens"])
def test_where_a_rule_reads_the_whole_row_the_engine_keeps_full_rows(options):
    backend = backend_for("en-pt", shortlist=True)
    compact, full, n_compact, n_steps = _runs(backend, EN[3], options)
    assert n_steps > 0 and n_compact == 0
    assert _same(compact, full)


def test_forced_tokens_keep_full_rows():
    backend = backend_for("en-pt", shortlist=True)
    compact, full, n_compact, _ = _runs(backend, EN[2], APP, forced_ids=backend.tokenize("A")[:1])
    assert n_compact == 0
    assert _same(compact, full)


def test_the_full_softmax_has_no_compact_rows():
    backend = backend_for("en-pt", shortlist=False)
    compact, full, n_compact, n_steps = _runs(backend, EN[1], APP)
    assert n_steps > 0 and n_compact == 0
    assert _same(compact, full)


@pytest.mark.parametrize("levels", [None, 2])
def test_a_compact_row_is_reported_as_its_full_row(levels):
    """The report of a compact row (no whole row built) equals that of the full row, ties
    (``levels=2``: the top-k all ties, ordered as ``torch.topk`` orders the whole row) included."""
    vocab, g = 32000, torch.Generator().manual_seed(11)
    ids = torch.randperm(vocab, generator=g)[:480].sort().values
    blocks = torch.unique(ids // COMPACT_BLOCK)
    columns = (blocks[:, None] * COMPACT_BLOCK + torch.arange(COMPACT_BLOCK)).reshape(-1)
    values = (torch.randint(0, levels, (480,), generator=g).float() if levels else torch.randn(480, generator=g) * 4)
    full = torch.full((1, vocab), float("-inf"))
    full[0, ids] = values
    compact = full[:, columns]
    dense_probs, compact_probs = torch.softmax(full, -1), torch.softmax(compact, -1)
    reporter = StepReporter(lambda i: f"t{i}", lambda ids: "", top_k_report=10, capture_attention=False,
                            source_len=0)
    a = reporter.row_report(StepTensors(compact_probs, compact_probs, None, [], ids=columns, vocab_size=vocab), 0)
    b = reporter.row_report(StepTensors(dense_probs, dense_probs, None, [], ), 0)
    assert _same(a, b)


def test_a_compact_row_reaching_a_scorer_with_a_chain_is_refused():
    from core.backends.base import StepOutput
    from core.processors.pipeline import ProcessorList
    from core.processors.penalties import RepetitionPenalty
    from core.scoring import Scorer

    scorer = Scorer(ProcessorList([]), ProcessorList([RepetitionPenalty(1.3)]), False, False,
                    "test", 32000)
    assert not scorer.takes_compact
    out = StepOutput(torch.zeros(1, COMPACT_BLOCK), None, None, logit_ids=torch.arange(COMPACT_BLOCK))
    with pytest.raises(ValueError, match="compact"):
        scorer.score(torch.tensor([[1]]), out)
