"""A long recording's per-step attention is kept compactly once its window is out of view
(issue 19 §3: an hour of speech with whisper-base grew by ~0.55 MB per second of audio).

Whisper-base's cross-attention of one step is 6 layers × 8 heads × 1500 frames, 288 kB in
float32. The run keeps it in memory for the window being decoded and the selected step's;
the other windows' go to a temporary file as float16 and are read back when drawn, so the
heatmap shows the same rows (within float16 rounding) and nothing else holds a copy.
"""

from __future__ import annotations

import dataclasses
import gc
import weakref

import numpy as np

from core.events import SegmentEvent, StepEvent, TokenProb
from gui.run_state import RunState
from gui.widgets.attention_heatmap import AttentionHeatmap, reduce_attention

LAYERS, HEADS, FRAMES = 6, 8, 1500  # whisper-base, one 30 s window
PER_WINDOW = 12
FLOAT16_ATOL = 5e-4  # |x - float16(x)| <= 2**-12 for x in [0, 1]


def attention(step: int) -> np.ndarray:
    """A softmax-like (layers, heads, frames) row peaked where the token 'listens'."""
    rng = np.random.default_rng(step)
    a = rng.random((LAYERS, HEADS, FRAMES)).astype(np.float32) * 0.01
    a[:, :, (step * 37) % FRAMES] += 1.0
    return a / a.sum(-1, keepdims=True)


def window_step(step: int, window: int, att: np.ndarray) -> StepEvent:
    tp = [TokenProb(step + 10, f" w{step}", 0.9)]
    return StepEvent(step=step, token_id=step + 10, text=f" w{step}", prob=0.9, raw_prob=0.8, topk=tp, raw_topk=tp,
                     entropy=0.3, cross_attention=att, segment=window, source_offset=FRAMES * window)


def segment(window: int) -> SegmentEvent:
    return SegmentEvent(segment=window, label=f"{30 * window}–{30 * window + 30} s", source_offset=FRAMES * window,
                        source_len=FRAMES, kind="window")


def kept_bytes(ev: StepEvent) -> int:
    """Bytes of numpy arrays the event holds in memory (its attention, stage probabilities)."""
    return sum(v.nbytes for v in vars(ev).values() if isinstance(v, np.ndarray))


def decode_windows(run: RunState, windows: int, heatmap: AttentionHeatmap | None = None,
                   select_at: tuple[int, int] | None = None) -> tuple[list[StepEvent], dict[int, np.ndarray]]:
    """Feed ``windows`` long-form windows of PER_WINDOW steps into ``run`` (and ``heatmap``)
    as the Speech tab does; ``select_at`` = (before window w, select step s). Returns the
    events and a copy of each step's original attention."""
    events, originals = [], {}
    for w in range(windows):
        if select_at is not None and select_at[0] == w:
            run.select(select_at[1])
            if heatmap is not None:
                heatmap.select_step(select_at[1])
        run.add_segment(segment(w))
        if heatmap is not None:
            heatmap.handle(segment(w))
        batch = []
        for k in range(PER_WINDOW):
            step = w * PER_WINDOW + k
            att = attention(step)
            originals[step] = att.copy()
            ev = window_step(step, w, att)
            run.add(ev)
            batch.append(ev)
        if heatmap is not None:
            heatmap.append_steps(batch)
        events += batch
    run.wait_spilled(30)
    return events, originals


def test_windows_out_of_view_keep_their_attention_compactly(qtbot):
    """After 5 windows, the 4 earlier windows' steps hold (almost) nothing in memory; the
    newest window's are untouched; every step still reads back its attention."""
    run = RunState()
    events, originals = decode_windows(run, 5)
    full = LAYERS * HEADS * FRAMES * 4
    old = [ev for ev in events if ev.segment < 4]
    newest = [ev for ev in events if ev.segment == 4]
    assert max(kept_bytes(ev) for ev in old) <= 1024, "windows out of view still hold their float32 attention"
    assert all(kept_bytes(ev) == full for ev in newest)
    assert run.attention_bytes() == full * PER_WINDOW
    for ev in events:  # rebuilt on demand: float32, same shape, float16 rounding at most
        back = ev.cross_attention
        assert back.dtype == np.float32 and back.shape == (LAYERS, HEADS, FRAMES) and ev.has_attention
        np.testing.assert_allclose(back, originals[ev.step], rtol=0, atol=FLOAT16_ATOL)
    assert [ev.step for ev in run.steps()] == list(range(5 * PER_WINDOW))


def test_the_selected_window_stays_in_memory(qtbot):
    run = RunState()
    events, _ = decode_windows(run, 4, select_at=(1, 5))  # step 5 (window 0) selected while it is decoded
    by_window = {w: [kept_bytes(ev) for ev in events if ev.segment == w] for w in range(4)}
    full = LAYERS * HEADS * FRAMES * 4
    assert all(b == full for b in by_window[0])  # the selected step's window
    assert all(b <= 1024 for b in by_window[1] + by_window[2])
    assert all(b == full for b in by_window[3])  # the window being decoded


def test_an_attempt_taken_back_keeps_its_steps_readable_but_not_in_memory(qtbot):
    run = RunState()
    events, originals = decode_windows(run, 1)
    kept_by_attempt = list(events)  # as AttemptEvent.steps keeps them for the Attempts view
    assert run.retract(0, 0) == PER_WINDOW and len(run) == 0
    run.wait_spilled(30)
    assert all(kept_bytes(ev) <= 1024 for ev in kept_by_attempt)
    np.testing.assert_allclose(kept_by_attempt[3].cross_attention, originals[3], rtol=0, atol=FLOAT16_ATOL)


def test_heatmap_rebuilds_an_earlier_window_and_keeps_no_copy(qtbot):
    """The heatmap draws one window at a time (6000 columns); going back to window 0 shows
    the same rows as its original float32 attention would (float16 rounding), for the
    average and for one layer and head."""
    run = RunState()
    heat = AttentionHeatmap()
    qtbot.addWidget(heat)
    heat.set_columns("time (s)", 0.02, n_columns=4 * FRAMES)
    events, originals = decode_windows(run, 4, heatmap=heat)
    assert heat.windowed() and heat.shown_segment() == 3
    assert max(kept_bytes(ev) for ev in events[:PER_WINDOW]) <= 1024  # window 0 is on disk
    heat.select_step(2)
    assert heat.shown_segment() == 0 and heat.column_offset() == 0
    want = np.stack([reduce_attention(originals[s], None, None) for s in range(PER_WINDOW)])
    np.testing.assert_allclose(heat.matrix(), want, rtol=0, atol=2e-3)
    heat.set_view(2, 5)  # one layer and head: recomputed from the spilled rows
    want = np.stack([reduce_attention(originals[s], 2, 5) for s in range(PER_WINDOW)])
    np.testing.assert_allclose(heat.matrix(), want, rtol=0, atol=2e-3)


def test_no_array_of_a_spilled_window_stays_alive(qtbot):
    """Nothing (the run, the heatmap, the events) keeps the float32 array of a window out
    of view: its memory is really given back."""
    run = RunState()
    heat = AttentionHeatmap()
    qtbot.addWidget(heat)
    heat.set_columns("time (s)", 0.02, n_columns=3 * FRAMES)
    refs = []
    for w in range(3):
        run.add_segment(segment(w))
        heat.handle(segment(w))
        batch = []
        for k in range(PER_WINDOW):
            att = attention(w * PER_WINDOW + k)
            refs.append((w, weakref.ref(att)))
            batch.append(window_step(w * PER_WINDOW + k, w, att))
            del att
        for ev in batch:
            run.add(ev)
        heat.append_steps(batch)
        del batch
    run.wait_spilled(30)
    gc.collect()
    alive = {w: sum(r() is not None for ww, r in refs if ww == w) for w in range(3)}
    assert alive == {0: 0, 1: 0, 2: PER_WINDOW}


def test_a_forks_renumbered_steps_stay_spilled(qtbot):
    """A fork of window 0 takes the parent's later windows renumbered; their attention is
    not loaded back into memory for that."""
    run = RunState()
    events, originals = decode_windows(run, 3)
    b = run.fork(0, 3, [99], " x")
    run.add_segment(segment(0))
    forced = dataclasses.replace(events[3], token_id=99, text=" x")
    run.add(forced)
    run.finish(None, branch=b.id)
    run.wait_spilled(30)
    assert run.complete_from_parent(b.id) == 2 * PER_WINDOW
    later = [ev for ev in run.branch_steps(b.id) if ev.segment == 1]
    assert later and all(kept_bytes(ev) <= 1024 for ev in later)
    np.testing.assert_allclose(later[0].cross_attention, originals[PER_WINDOW], rtol=0, atol=FLOAT16_ATOL)


def test_memory_freed_by_a_spill_is_given_back_to_the_system(qtbot, monkeypatch):
    """Freed arrays would stay in malloc's arenas (resident) without a trim: the run asks
    for one after each window whose attention went to disk, and not when nothing was freed."""
    import gui.attention_spill as attention_spill

    calls = []
    monkeypatch.setattr(attention_spill, "release_free_memory", lambda: calls.append(True) or True)
    run = RunState()
    decode_windows(run, 3)
    assert len(calls) == 2  # windows 0 and 1 went to disk when windows 1 and 2 started
    run.spill_out_of_view(keep=2)
    run.wait_spilled(30)
    assert len(calls) == 2


def test_the_attention_is_written_off_the_gui_thread(qtbot, monkeypatch):
    """On the GUI thread each numpy call of the spill waited for the decoding worker to
    hand back the GIL (1.6-2.2 s per window with base); the spill thread does the writing."""
    import threading

    from core.spill import SpillFile

    threads = set()
    real_put = SpillFile.put

    def put(self, array):
        threads.add(threading.current_thread().name)
        return real_put(self, array)

    monkeypatch.setattr(SpillFile, "put", put)
    run = RunState()
    events, _ = decode_windows(run, 3)
    assert threads and threading.main_thread().name not in threads
    assert all(kept_bytes(ev) <= 1024 for ev in events if ev.segment < 2)


def test_a_restored_exploration_keeps_only_the_shown_window_in_memory(qtbot):
    """An exploration saved with full attention and opened again: the windows out of view
    go to disk as they do while decoding."""
    from gui.run_state import Branch

    root = Branch(0)
    originals = {}
    for w in range(3):
        root.segments[w] = segment(w)
        for k in range(PER_WINDOW):
            step = w * PER_WINDOW + k
            originals[step] = attention(step)
            root.own[step] = window_step(step, w, originals[step].copy())
    run = RunState()
    run.restore([root])
    run.wait_spilled(30)
    kept = {w: max(kept_bytes(ev) for ev in root.own.values() if ev.segment == w) for w in range(3)}
    assert kept[0] <= 1024 and kept[1] <= 1024 and kept[2] == LAYERS * HEADS * FRAMES * 4
    np.testing.assert_allclose(run.step(4).cross_attention, originals[4], rtol=0, atol=FLOAT16_ATOL)


def test_an_attempts_end_of_text_row_goes_to_disk_with_its_window(qtbot):
    """issue 19 §3: each long-form window's AttemptEvent keeps its end-of-text attention
    (288 kB with base, read by word timing); once its window is out of view it is spilled
    with the window's steps, and still reads back."""
    from core.events import AttemptEvent

    run = RunState()
    run.add_segment(segment(0))
    end = attention(999)
    attempt = AttemptEvent(segment=0, attempt=0, temperature=0.0, step_offset=0, end_attention=end.copy())
    run.keep_attention(attempt)  # as the Speech tab does for each AttemptEvent
    run.add_segment(segment(1))  # window 0 leaves the view
    run.wait_spilled(30)
    assert attempt.attention_spilled and attempt.attention_nbytes == 0
    np.testing.assert_allclose(attempt.end_attention, end, rtol=0, atol=FLOAT16_ATOL)
