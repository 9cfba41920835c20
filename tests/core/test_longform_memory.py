"""Memory of a long-form run (issue 19 §3: a 1-hour recording with base within 1.5 GB).

Each 30 s window's decoder cross-attention keys and values (whisper-base: 6 layers × K and
V × 1500 frames × 512, 37 MB in float32) are computed once per encoder output and kept with
it, and the engine keeps the KV cache of the last run on each encoder output for a fork to
reuse. A long-form run keeps both for the last ``KV_WINDOWS_KEPT`` windows only; a fork or
what-if on an older window computes them again (a few tens of ms) and gives the same tokens.
"""

from __future__ import annotations

import numpy as np
import pytest

from core.events import AttemptEvent
from core.options import DecodingOptions
from core.tasks.longform_windows import KV_WINDOWS_KEPT
from tests.core.test_longform import SENTENCES
from tests.helpers.speech import synth_speech

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def clip_100s() -> np.ndarray:
    """~100 s of espeak sentences: 4 long-form windows."""
    gap = np.zeros(4800, np.float32)
    parts = []
    for s in SENTENCES:
        parts += [synth_speech(s, words_per_minute=165), gap]
    one = np.concatenate(parts)
    return np.concatenate([one, one, one[: 12 * 16000]])


def _windows_holding_kv(model) -> tuple[int, int]:
    """(encoder outputs that keep their cross-attention K/V, kept decoder KV caches): every
    encoder output the model's cache or the engine holds."""
    encoded = {id(e): e for e in model._cache._items.values()}
    encoded.update({id(k.encoded): k.encoded for k in model.engine.kept.values()})
    return sum("whisper_cross_kv" in e.extras for e in encoded.values()), len(model.engine.kept)


def test_a_long_run_keeps_the_cross_kv_of_its_last_windows_only(whisper_tiny_en, clip_100s):
    model = whisper_tiny_en
    model._cache.clear()
    model.engine.kept.clear()
    events = list(model.transcribe(clip_100s, DecodingOptions()))
    attempts = [ev for ev in events if isinstance(ev, AttemptEvent) and ev.kept_in_transcript]
    assert len(attempts) >= KV_WINDOWS_KEPT + 2
    with_kv, kept = _windows_holding_kv(model)
    assert with_kv <= KV_WINDOWS_KEPT and kept <= KV_WINDOWS_KEPT, (with_kv, kept)

    # a fork on the first window (its K/V gone) computes them again and decodes as the run did
    first = attempts[0]
    steps = list(first.steps)
    forked = list(model.fork(clip_100s, DecodingOptions(), segment=0, forced_ids=[s.token_id for s in steps[:4]],
                             step_offset=first.step_offset, longform=True))
    assert forked[-1].token_ids == list(first.token_ids)
    with_kv, kept = _windows_holding_kv(model)
    assert with_kv <= KV_WINDOWS_KEPT and kept <= KV_WINDOWS_KEPT, (with_kv, kept)


def test_the_log_mel_is_computed_a_window_at_a_time_and_equals_the_one_call(whisper_tiny_en, clip_100s, monkeypatch):
    """The whole clip's log-mel in one torch.stft took a transient ~2 GB for an hour (+705 MB
    for 20 minutes); a long-form run now computes it in chunks and windows, bit for bit the
    same as transformers' one call."""
    import torch

    from core.tasks import longform_windows as longform

    model = whisper_tiny_en
    frames: list[int] = []
    real = torch.stft

    def stft(x, n_fft, hop_length=None, *a, **kw):
        frames.append(x.shape[-1] // hop_length)
        return real(x, n_fft, hop_length, *a, **kw)

    monkeypatch.setattr(torch, "stft", stft)
    model._cache.clear()
    for ev in model.transcribe(clip_100s, DecodingOptions()):
        if isinstance(ev, AttemptEvent):  # the first window is decoded: the clip's maximum is known
            break
    assert frames and max(frames) <= 3000 + 3, frames  # never the whole clip's 10,000 frames at once
    # a window of frames at a time (MEL_CHUNK = N_FRAMES, the default): 100 s is 4 chunks, not 1 of 10,000
    assert len(frames) >= 4 and max(frames) <= longform.N_FRAMES + 3, frames
    monkeypatch.undo()

    full = longform.log_mel(model, clip_100s)
    mel = longform.LogMel(model, clip_100s)
    assert mel.shape == tuple(full.shape)
    for seek in (0, 2999, 5000, mel.shape[-1] - 1200):
        assert torch.equal(mel.window(seek, 3000), full[..., seek: seek + 3000])


def test_the_audio_key_is_hashed_without_a_copy_of_the_audio(whisper_tiny_en):
    """A run, fork or what-if hashes the whole clip to find its windows; ``tobytes()`` made a
    transient copy of it (230 MB for an hour of float32) at each of them."""
    import tracemalloc

    from core.tasks.longform import plan_of_run

    audio = (np.random.default_rng(0).standard_normal(16000 * 240) * 0.1).astype(np.float32)  # 4 minutes, 15 MB
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="long-form first"):  # hashed, then no run of it found
            plan_of_run(whisper_tiny_en, audio, DecodingOptions(), "en", "transcribe")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the audio check's np.isfinite mask (1 byte per sample) is a quarter of it; a copy is all of it
    assert peak < audio.nbytes // 2, f"{peak / 1e6:.1f} MB allocated while hashing {audio.nbytes / 1e6:.1f} MB of audio"
