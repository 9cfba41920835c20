"""The long-form log-mel's first pass (the clip's maximum, ``LogMel.window``) computes at most
one window's frames at a time (issue 19 §3): chunks of 30,000 frames (5 minutes) took a
transient +220 MB (STFT, magnitudes, mel product) at the start of a long run, measured on
10 minutes of audio; chunks of one window take +40 MB. The values are unchanged (the
maximum of the chunks' maxima)."""

from __future__ import annotations

import pytest

from core.events import AttemptEvent
from core.options import DecodingOptions
from tests.core.test_longform_memory import clip_100s  # noqa: F401 - the module fixture

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_clip_maximum_is_found_a_window_of_frames_at_a_time(whisper_tiny_en, clip_100s, monkeypatch):  # noqa: F811
    import torch

    from core.tasks import longform_windows as longform

    frames: list[int] = []
    real = torch.stft

    def stft(x, n_fft, hop_length=None, *a, **kw):
        frames.append(x.shape[-1] // hop_length)
        return real(x, n_fft, hop_length, *a, **kw)

    monkeypatch.setattr(torch, "stft", stft)
    whisper_tiny_en._cache.clear()
    for ev in whisper_tiny_en.transcribe(clip_100s, DecodingOptions()):
        if isinstance(ev, AttemptEvent):
            break
    assert len(frames) >= 4 and max(frames) <= longform.N_FRAMES + 3, frames  # 100 s: 4 chunks, not 1 of 10,000
