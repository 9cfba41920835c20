"""core.spill and StepEvent.spill_attention: an event's attention moved to disk reads back
the same (float16 rounding), and nothing about the event changes for its readers."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from core.events import StepEvent, TokenProb
from core.spill import SpillFile

ATOL = 5e-4  # float16 rounding of values in [0, 1]


def event(att: np.ndarray | None, step: int = 3) -> StepEvent:
    tp = [TokenProb(7, " a", 0.9)]
    return StepEvent(step=step, token_id=7, text=" a", prob=0.9, raw_prob=0.8, topk=tp, raw_topk=tp, entropy=0.2,
                     cross_attention=att, segment=2, source_offset=3000)


def rows(seed: int = 0, shape=(6, 8, 1500)) -> np.ndarray:
    a = np.random.default_rng(seed).random(shape).astype(np.float32)
    return a / a.sum(-1, keepdims=True)


def test_spill_file_round_trip_and_many_arrays():
    store = SpillFile()
    arrays = [rows(i, (2, 3, 50 + i)) for i in range(20)]
    handles = [store.put(a) for a in arrays]
    for a, h in zip(reversed(arrays), reversed(handles)):  # any order, any time
        back = h.load()
        assert back.dtype == np.float32 and back.shape == a.shape
        np.testing.assert_allclose(back, a, rtol=0, atol=ATOL)
    assert store.nbytes == sum(a.size * 2 for a in arrays)
    with pytest.raises(ValueError, match="float16 cannot hold"):
        store.put(np.array([1e6], np.float32))


def test_spilled_event_reads_the_same_and_holds_no_array():
    a = rows()
    ev = event(a)
    assert ev.cross_attention is a and ev.has_attention and ev.attention_nbytes == a.nbytes
    assert ev.attention_shape == (6, 8, 1500) and not ev.attention_spilled
    assert ev.spill_attention(SpillFile()) == a.nbytes
    assert ev.attention_spilled and ev.attention_nbytes == 0 and ev.has_attention
    assert not any(isinstance(v, np.ndarray) for v in vars(ev).values())
    np.testing.assert_allclose(ev.cross_attention, a, rtol=0, atol=ATOL)
    assert ev.spill_attention(SpillFile()) == 0  # already spilled
    # the other fields are untouched, and a copy made with replace() is an ordinary event
    moved = dataclasses.replace(ev, step=9)
    assert moved.step == 9 and not moved.attention_spilled and moved.text == ev.text
    np.testing.assert_allclose(moved.cross_attention, a, rtol=0, atol=ATOL)
    renum = ev.renumbered(11)
    assert renum.step == 11 and renum.attention_spilled and renum.segment == 2 and renum.source_offset == 3000


def test_shape_and_presence_need_no_read(monkeypatch):
    ev = event(rows())
    ev.spill_attention(SpillFile())
    monkeypatch.setattr(SpillFile, "read", lambda *a: (_ for _ in ()).throw(AssertionError("read from disk")))
    assert ev.has_attention and ev.attention_shape == (6, 8, 1500)
    none = event(None)
    assert not none.has_attention and none.attention_shape is None and none.cross_attention is None
    assert none.spill_attention(SpillFile()) == 0


def test_small_or_absent_attention_stays_in_memory():
    small = rows(1, (2, 8, 30))  # a translation step: 1.9 kB
    ev = event(small)
    assert ev.spill_attention(SpillFile(), min_bytes=32 * 1024) == 0
    assert ev.cross_attention is small


def test_pickle_and_deepcopy_of_a_spilled_event_carry_the_array():
    a = rows(2)
    ev = event(a)
    ev.spill_attention(SpillFile())
    for other in (pickle.loads(pickle.dumps(ev)), copy.deepcopy(ev)):
        assert not other.attention_spilled and other.attention_nbytes == a.nbytes
        np.testing.assert_allclose(other.cross_attention, a, rtol=0, atol=ATOL)
        assert other.step == ev.step and other.topk == ev.topk


def test_default_and_fields_unchanged():
    assert [f.name for f in dataclasses.fields(StepEvent)][8] == "cross_attention"
    assert event(None).cross_attention is None
    assert StepEvent(0, 1, "x", 1.0, 1.0, [], [], 0.0).cross_attention is None


def test_load_many_reads_back_to_back_arrays_in_one_read(monkeypatch):
    from core.events import load_attention

    store = SpillFile()
    arrays = [rows(i, (2, 3, 40)) for i in range(6)]
    events = [event(a, step=i) for i, a in enumerate(arrays)]
    for ev in events[:4]:
        ev.spill_attention(store)  # back to back; 4 and 5 stay in memory
    other = SpillFile()
    events[5].spill_attention(other)  # another file
    reads = []
    real = SpillFile.read
    monkeypatch.setattr(SpillFile, "read", lambda self, off, shape: reads.append(shape) or real(self, off, shape))
    got = load_attention([events[3], events[0], event(None), events[5], events[1], events[4], events[2]])
    want = [arrays[3], arrays[0], None, arrays[5], arrays[1], arrays[4], arrays[2]]
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=0, atol=ATOL)
    assert len(reads) == 2  # events 0-3 in one read, event 5 in another; event 4 from memory


def test_an_attempts_end_attention_spills_like_a_steps():
    """issue 19 §3: AttemptEvent.end_attention (the end-of-text row of every long-form
    window, 288 kB with base) moves to disk as a step's attention does, with the same
    interface (``attention_nbytes``, ``spill_attention``), so the run can spill it with its
    window's steps once the window is out of view."""
    from core.events import AttemptEvent

    end = rows(5)
    ev = AttemptEvent(segment=4, attempt=0, temperature=0.0, step_offset=10, end_attention=end)
    assert ev.attention_nbytes == end.nbytes and not ev.attention_spilled and ev.has_attention
    store = SpillFile()
    assert ev.spill_attention(store, min_bytes=end.nbytes + 1) == 0  # smaller than asked: stays
    assert ev.spill_attention(store, min_bytes=32 * 1024) == end.nbytes
    assert ev.attention_spilled and ev.attention_nbytes == 0 and ev.has_attention
    assert ev.attention_shape == end.shape
    np.testing.assert_allclose(ev.end_attention, end, atol=ATOL)
    assert ev.spill_attention(store) == 0  # already on disk
    assert pickle.loads(pickle.dumps(ev)).end_attention.shape == end.shape
    none = AttemptEvent(segment=0, attempt=0, temperature=0.0, step_offset=0)
    assert none.end_attention is None and none.attention_nbytes == 0 and none.spill_attention(store) == 0
    assert dataclasses.replace(ev, attempt=1).end_attention.shape == end.shape
