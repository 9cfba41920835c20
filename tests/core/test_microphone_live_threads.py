"""Recorder.audio() while recording, asked from two threads at once (reviewer's finding):
each block is converted once, in order, whatever the interleaving."""

from __future__ import annotations

import threading

import numpy as np

from core.inputs import microphone as core_microphone
from core.inputs.microphone import Recorder
from tests.core.test_audio import _fake_sd


class _PausingLock:
    """The recorder's lock, whose first release in a named thread runs that thread's hook."""

    def __init__(self, hooks: dict) -> None:
        self._lock = threading.Lock()
        self.hooks = hooks

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc):
        self._lock.release()
        hook = self.hooks.pop(threading.current_thread().name, None)
        if hook is not None:
            hook()
        return False

    def acquire(self, *a, **k):
        return self._lock.acquire(*a, **k)

    def release(self):
        self._lock.release()


def test_audio_asked_from_two_threads_converts_each_block_once(monkeypatch):
    """Thread A reads the blocks to convert, thread B (one block later) reads too, A converts,
    then B: B's blocks were counted from where A had not yet converted, so before the fix B
    appended block 0 again instead of the new block (the live audio held a block twice)."""
    monkeypatch.setattr(core_microphone, "_sounddevice", lambda: _fake_sd(48000, lambda rate, ch: []))
    rec = Recorder()
    rec.start()
    rec.stream_rate = rec.sample_rate  # as a 16 kHz device would be
    assert rec.stream_rate == rec.sample_rate  # no resampler: the live audio is the blocks exactly
    rng = np.random.default_rng(0)
    fed = []

    def feed():
        x = (rng.integers(-1000, 1000, 160) / 32768).astype(np.float32)
        fed.append(x)
        rec._callback(np.stack([x, x], 1), 160, None, None)

    for _ in range(3):
        feed()
    a_read, b_read, a_done = threading.Event(), threading.Event(), threading.Event()

    def a_hook():
        a_read.set()
        b_read.wait(1.0)  # B reads now (unless the fix holds it off: then A goes on after 1 s)

    def b_hook():
        b_read.set()
        a_done.wait(1.0)

    rec._lock = _PausingLock({"A": a_hook, "B": b_hook})
    out = {}

    def ask(name):
        out[name] = np.array(rec.audio())
        if name == "A":
            a_done.set()

    ta = threading.Thread(target=ask, args=("A",), name="A")
    ta.start()
    assert a_read.wait(5.0)
    feed()  # one block more before B asks
    tb = threading.Thread(target=ask, args=("B",), name="B")
    tb.start()
    ta.join(5.0)
    tb.join(5.0)
    rec._lock = threading.Lock()
    np.testing.assert_array_equal(rec.audio(), np.concatenate(fed))
    rec.discard()
