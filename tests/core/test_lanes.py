"""Decoding lanes (core/tasks/lanes.py): several strategies on one encoder output, interleaved.

On the tiny random models: every lane's events equal its options decoded alone
(``decode_segments``), token for token; the encoder runs once per segment for all lanes;
the lanes interleave (a later lane's tokens arrive before the first lane ends); each
lane's log-probability, time and token count; the agreement and the display alignment.
On the bundled Bergamot en-pt model: the task's ``decode_lanes`` against its ``decode``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import BeamEvent, Finished, RunStats, SegmentEvent, StepEvent
from core.tasks.lanes import (
    LaneEvent, LanesFinished, agreement, align_lanes, interleave, mean_agreement,
)
from core.tasks.segments import decode_lanes
from core.options import DecodingOptions
from core.tasks.base import Prepared, decode_segments
from tests.core.conftest import V

pytestmark = pytest.mark.usefixtures("one_torch_thread")

KINDS = [("whisper", True), ("whisper", False), ("marian", False), ("t5", False)]

LANES = {
    "greedy": dict(strategy="greedy"),
    "beam": dict(strategy="beam", num_beams=3),
    "sample": dict(strategy="sample", seed=3, temperature=0.8),
    "min_p": dict(strategy="sample", seed=5, min_p=0.1),
    "mirostat": dict(strategy="mirostat", seed=3, mirostat_tau=3.0),
    "diverse_beam": dict(strategy="diverse_beam", num_beams=4, num_beam_groups=2, diversity_penalty=0.7),
    "contrastive": dict(strategy="contrastive", top_k=4, penalty_alpha=0.6),
}
FOUR = ("greedy", "beam", "sample", "min_p")


def _options(name: str, max_new_tokens: int = 12) -> DecodingOptions:
    return DecodingOptions(max_new_tokens=max_new_tokens, top_k_report=8, **LANES[name])


class _Segments:
    """Three segments of one tiny model: each its own encoder input (the features shifted),
    encoded by ``prepare`` through the backend, with a count of encoder passes."""

    def __init__(self, tiny, backend, n: int = 3):
        self.tiny, self.backend, self.encodes, self.prepares = tiny, backend, 0, 0
        self.items = list(range(n))
        self._cache: dict[int, object] = {}

    def inputs(self, i: int) -> dict:
        out = dict(self.tiny.inputs)
        key = "input_features" if "input_features" in out else None
        if key:
            out[key] = out[key] + 0.5 * i
        else:
            ids = out["input_ids"].clone()
            ids[0, :3] = (ids[0, :3] + 7 * i) % (V - 3) + 2
            out["input_ids"] = ids
        return out

    def prepare(self, i: int, seg: int) -> Prepared:
        self.prepares += 1
        if seg not in self._cache:  # as the tasks' EncoderCache does
            self.encodes += 1
            self._cache[seg] = self.backend.encode(self.inputs(seg))
        enc = self._cache[seg]
        return Prepared(enc, self.tiny.prompt, SegmentEvent(segment=i, label=f"segment {i}", source_offset=10 * i,
                                                             source_len=enc.source_len, total=len(self.items)), True)


def _join(done) -> str:
    return " | ".join(t for _, t in done)


def _alone(engine, segs: _Segments, options: DecodingOptions) -> list:
    return list(decode_segments(engine, segs.items, segs.prepare, options, RunStats(encoder_cached=True), _join))


def _lanes(engine, segs: _Segments, lanes: list[DecodingOptions], **kw) -> list:
    return list(decode_lanes(engine, segs.items, segs.prepare, lanes, RunStats(encoder_cached=True), _join, **kw))


def _of(events: list, lane: int) -> list:
    return [e.event for e in events if isinstance(e, LaneEvent) and e.lane == lane]


def _same_events(alone: list, lane: list) -> None:
    """The lane's events are the run alone's, event for event (StepEvents: token, step,
    segment and probabilities; BeamEvents: beams; SegmentEvents equal; the Finished's text
    and ids)."""
    assert [type(e) for e in lane] == [type(e) for e in alone]
    for a, b in zip(alone, lane):
        if isinstance(a, StepEvent):
            assert (a.step, a.token_id, a.segment, a.source_offset) == (b.step, b.token_id, b.segment, b.source_offset)
            assert a.prob == pytest.approx(b.prob, abs=1e-5) and a.raw_prob == pytest.approx(b.raw_prob, abs=1e-5)
            assert [t.id for t in a.topk[:3]] == [t.id for t in b.topk[:3]]
        elif isinstance(a, BeamEvent):
            assert a.step == b.step and [h.token_ids for h in a.beams] == [h.token_ids for h in b.beams]
        elif isinstance(a, SegmentEvent):
            assert a == b
        else:
            assert isinstance(b, Finished)
            assert (a.text, a.token_ids, a.reason, a.cancelled) == (b.text, b.token_ids, b.reason, b.cancelled)
            assert a.stats.n_tokens == b.stats.n_tokens


@pytest.fixture(scope="module")
def setups(tiny_eos_models):
    out = {}
    for kind, lean in KINDS:
        tiny = tiny_eos_models[kind]
        backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind, lean=lean)
        out[(kind, lean)] = (tiny, backend)
    return out


# --------------------------------------------------------------------------- equal to alone


@pytest.mark.parametrize("kind,lean", KINDS)
def test_four_lanes_equal_each_run_alone(setups, kind, lean):
    tiny, backend = setups[(kind, lean)]
    lanes = [_options(n) for n in FOUR]
    segs = _Segments(tiny, backend)
    events = _lanes(Engine(backend), segs, lanes)
    assert segs.prepares == segs.encodes == 3  # once per segment, for all four lanes
    fresh = _Segments(tiny, backend)
    for k, o in enumerate(lanes):
        _same_events(_alone(Engine(backend), fresh, o), _of(events, k))
    assert isinstance(events[-1], LanesFinished) and sum(isinstance(e, LanesFinished) for e in events) == 1


@pytest.mark.parametrize("names", [("mirostat", "contrastive"), ("diverse_beam", "greedy", "beam"),
                                   ("sample", "sample")])
def test_other_strategies_equal_alone(setups, names):
    tiny, backend = setups[("whisper", True)]
    lanes = [_options(n) for n in names]
    events = _lanes(Engine(backend), _Segments(tiny, backend), lanes)
    for k, o in enumerate(lanes):
        _same_events(_alone(Engine(backend), _Segments(tiny, backend), o), _of(events, k))
    if names == ("sample", "sample"):  # two seeded samplers with the same seed: one stream each
        assert _of(events, 0)[-1].token_ids == _of(events, 1)[-1].token_ids


def test_a_forced_prefix_is_forced_in_every_lane(setups):
    tiny, backend = setups[("marian", False)]
    lanes = [_options("greedy"), _options("beam")]
    prefix = [17, 23]
    events = _lanes(Engine(backend), _Segments(tiny, backend), lanes, forced={0: prefix})
    for k, o in enumerate(lanes):
        steps = [e for e in _of(events, k) if isinstance(e, StepEvent) and e.segment == 0]
        assert [e.token_id for e in steps[:2]] == prefix and all(e.forced for e in steps[:2])
        alone = list(decode_segments(Engine(backend), [0, 1, 2], _Segments(tiny, backend).prepare, o,
                                     RunStats(), _join, forced={0: prefix}))
        assert _of(events, k)[-1].token_ids == alone[-1].token_ids


# --------------------------------------------------------------------------- interleaving


def test_lanes_interleave(setups):
    """Lane 2's (and 3's, 4's) tokens arrive before lane 1 ends its first segment; the
    events of the lanes alternate within a segment."""
    tiny, backend = setups[("whisper", True)]
    lanes = [_options(n, max_new_tokens=16) for n in ("greedy", "sample", "min_p", "mirostat")]
    events = _lanes(Engine(backend), _Segments(tiny, backend, n=1), lanes)
    order = [e.lane for e in events if isinstance(e, LaneEvent) and isinstance(e.event, StepEvent)]
    last_of_lane0 = max(i for i, lane in enumerate(order) if lane == 0)
    for k in (1, 2, 3):
        assert order.index(k) < last_of_lane0
    assert order[:4] == [0, 1, 2, 3]  # one token each per turn


def test_a_beam_lane_grows_live_beside_greedy(setups):
    tiny, backend = setups[("whisper", True)]
    events = _lanes(Engine(backend), _Segments(tiny, backend, n=1), [_options("greedy", 16), _options("beam", 16)])
    kinds = [(e.lane, type(e.event).__name__) for e in events if isinstance(e, LaneEvent)]
    first_beam = kinds.index((1, "BeamEvent"))
    last_greedy = max(i for i, k in enumerate(kinds) if k == (0, "StepEvent"))
    assert first_beam < last_greedy


# --------------------------------------------------------------------------- results


def test_results_count_each_lane(setups):
    tiny, backend = setups[("marian", False)]
    lanes = [_options(n) for n in FOUR]
    events = _lanes(Engine(backend), _Segments(tiny, backend), lanes)
    done: LanesFinished = events[-1]
    assert [r.lane for r in done.lanes] == [0, 1, 2, 3] and [r.options for r in done.lanes] == lanes
    for k, r in enumerate(done.lanes):
        steps = [e for e in _of(events, k) if isinstance(e, StepEvent)]
        fin = _of(events, k)[-1]
        assert r.text == fin.text and r.token_ids == fin.token_ids and r.n_tokens == len(steps) == len(r.token_ids)
        assert r.logprob == pytest.approx(sum(math.log(e.prob) for e in steps))
        assert r.raw_logprob == pytest.approx(sum(math.log(e.raw_prob) for e in steps))
        assert r.time_s > 0 and fin.stats.decode_s == r.time_s
        assert fin.stats.encode_s == pytest.approx(done.stats.encode_s)
    # each lane's time is its own steps: together no more than the whole decode
    assert sum(r.time_s for r in done.lanes) <= done.stats.decode_s + 1e-3
    assert done.stats.n_tokens == sum(r.n_tokens for r in done.lanes)
    np.testing.assert_allclose(done.agreement, agreement([r.token_ids for r in done.lanes]))
    assert not done.cancelled


def test_beam_lane_logprob_is_its_best_paths_tokens(setups):
    """A beam lane's log-probability is the sum over its output tokens of the processed
    log-probabilities beam search ranked them by (the best path of the beam tree, EOS left out)."""
    from core.analysis.beam_tree import BeamTree

    tiny, backend = setups[("t5", False)]
    events = _lanes(Engine(backend), _Segments(tiny, backend, n=1), [_options("greedy"), _options("beam")])
    tree = BeamTree()
    for e in _of(events, 1):
        if isinstance(e, BeamEvent):
            tree.add(e)
    path = [n for n in tree.best_path(0)[1:] if not n.eos]
    lane = events[-1].lanes[1]
    assert [n.token for n in path] == lane.token_ids
    assert lane.logprob == pytest.approx(sum(n.logprob for n in path), abs=1e-4)


def test_cancel_stops_every_lane(setups):
    tiny, backend = setups[("whisper", True)]
    seen = []

    def cancel() -> bool:
        return len(seen) >= 9

    lanes = [_options(n, 16) for n in FOUR]
    out = []
    for ev in decode_lanes(Engine(backend), [0, 1, 2], _Segments(tiny, backend).prepare, lanes,
                           RunStats(encoder_cached=True), _join, cancel=cancel):
        out.append(ev)
        if isinstance(ev, LaneEvent) and isinstance(ev.event, (StepEvent, BeamEvent)):
            seen.append(ev)
    done = out[-1]
    assert isinstance(done, LanesFinished) and done.cancelled
    assert all(r.cancelled and r.reason == "cancelled" for r in done.lanes)
    assert not any(isinstance(e, LaneEvent) and isinstance(e.event, SegmentEvent) and e.event.segment > 0 for e in out)


def test_bad_lanes_name_the_lane(setups):
    tiny, backend = setups[("marian", False)]
    with pytest.raises(ValueError, match="lane 2: num_beams must be >= 1"):
        _lanes(Engine(backend), _Segments(tiny, backend), [_options("greedy"), DecodingOptions(strategy="beam",
                                                                                              num_beams=0)])
    with pytest.raises(ValueError, match="at least one lane"):
        _lanes(Engine(backend), _Segments(tiny, backend), [])


# --------------------------------------------------------------------------- agreement, alignment


def test_agreement_is_difflib_ratio():
    m = agreement([[1, 2, 3, 4], [1, 2, 3, 4], [1, 9, 3], []])
    assert m.shape == (4, 4) and np.allclose(np.diag(m), 1) and np.allclose(m, m.T)
    assert m[0, 1] == 1.0 and m[0, 2] == pytest.approx(2 * 2 / 7) and m[0, 3] == 0.0
    assert agreement([[], []])[0, 1] == 1.0
    assert mean_agreement(m) == pytest.approx(m[np.triu_indices(4, 1)].mean())
    assert mean_agreement(agreement([[1]])) == 1.0


@pytest.mark.parametrize("seqs", [
    [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]],
    [[1, 2, 3, 4, 5], [1, 9, 3, 4, 5, 6]],
    [[1, 2, 3], [7, 8, 1, 2, 3], [1, 3], []],
    [[], [4, 5]],
    [[5, 6, 7, 8], [5, 1, 2, 3, 8], [9, 9, 9, 9, 9, 9]],
])
def test_align_lanes_keeps_every_token_in_order(seqs):
    cols = align_lanes(seqs)
    for k, seq in enumerate(seqs):
        idx = [c[k] for c in cols if c[k] is not None]
        assert idx == list(range(len(seq)))  # each token once, in order
    for c in cols:
        assert any(i is not None for i in c)  # no empty column
    # a token equal to lane 0's in the same column is a difflib match
    equal = sum(1 for c in cols if c[0] is not None and c[1] is not None and seqs[0][c[0]] == seqs[1][c[1]])
    from difflib import SequenceMatcher

    matched = sum(b.size for b in SequenceMatcher(None, seqs[0], seqs[1], autojunk=False).get_matching_blocks())
    assert equal >= matched


def test_align_lanes_puts_an_insertion_before_the_token_it_precedes():
    cols = align_lanes([[1, 2, 3], [1, 7, 2, 3]])
    assert cols == [(0, 0), (None, 1), (1, 2), (2, 3)]
    cols = align_lanes([[1, 2, 3], [1, 5, 6, 3]])  # 2 -> 5 6: paired, then the rest inserted
    assert cols == [(0, 0), (1, 1), (None, 2), (2, 3)]


# --------------------------------------------------------------------------- generic streams


def test_interleave_wraps_whole_streams(setups):
    tiny, backend = setups[("marian", False)]
    engine = Engine(backend)
    lanes = [_options("greedy"), _options("sample")]
    streams = [_alone(engine, _Segments(tiny, backend), o) for o in lanes]
    events = list(interleave([iter(s) for s in streams], lanes))
    for k in range(2):
        assert [type(e) for e in _of(events, k)] == [type(e) for e in streams[k]]
        assert _of(events, k)[-1].token_ids == streams[k][-1].token_ids
    done = events[-1]
    assert isinstance(done, LanesFinished) and [r.text for r in done.lanes] == [s[-1].text for s in streams]
    with pytest.raises(ValueError, match="one options per stream"):
        list(interleave([iter(streams[0])], lanes))


# --------------------------------------------------------------------------- a task


@pytest.fixture(scope="module")
def bergamot_model(translation_en_pt):
    return translation_en_pt  # loaded once per session


def test_translation_lanes_equal_decode(bergamot_model):
    text = "The weather is nice today. Where is the train station?"
    lanes = [DecodingOptions(max_new_tokens=40, top_k_report=5, **LANES[n]) for n in FOUR]
    before = bergamot_model.encode_count
    bergamot_model._cache.clear()
    events = list(bergamot_model.decode_lanes(text, lanes))
    assert bergamot_model.encode_count == before + 2  # two sentences, each encoded once
    for k, o in enumerate(lanes):
        _same_events(list(bergamot_model.decode(text, o)), _of(events, k))
    done = events[-1]
    assert done.lanes[0].text and done.lanes[1].text
    assert 0.0 <= done.mean_agreement <= 1.0
    segs = [e.event.segment for e in events if isinstance(e, LaneEvent) and isinstance(e.event, SegmentEvent)]
    assert segs == [0, 0, 0, 0, 1, 1, 1, 1]
