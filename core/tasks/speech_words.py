"""What a finished speech run's words need from the model: the end-of-text attention rows
(openai/whisper ``timing.py``'s last DTW row), the refined word boundaries
(``core.analysis.refine``, as stable-ts ``refine()``), the DTW alignment and the timestamped
segments. ``SpeechModel``'s word methods (``end_attention``, ``refine_words``, ``alignment``,
``segments``) call these.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from core.catalog import SAMPLE_RATE, WINDOW_S
from core.tasks.base import Plan
from core.tasks.speech_windows import SAMPLES_PER_FRAME, WINDOW_FRAMES, window_ranges


def end_attention(model, plan: Plan, steps: Sequence) -> dict:
    """window -> the cross-attention float32 (layers, heads, frames) of the step that chose
    end-of-text in ``steps`` (a finished run of ``plan``); see ``SpeechModel.end_attention``."""
    import torch

    per_window: dict[int, list[int]] = {}
    for ev in steps:
        per_window.setdefault(ev.segment, []).append(ev.token_id)
    rows = {}
    for i, ids in per_window.items():
        ready = plan.prepare(i, plan.segments[i])
        fed = torch.tensor([list(ready.prompt.prompt_ids) + ids], dtype=torch.long)
        out = model.backend.step(fed, model.backend.init_cache(ready.encoded, 1), True)
        rows[i] = out.cross_attention[0, :, :, : ready.encoded.source_len].float().numpy().copy()
    return rows


def refine_words(model, plan: Plan, audio: np.ndarray, steps: Sequence, words: Sequence, refine, *,
                 longform: bool, cancel: Callable[[], bool] | None, progress: Callable[[int, int], None] | None,
                 budget_s: float | None, report: dict | None) -> list:
    """``words`` of the run ``steps`` (of ``plan``) with refined boundaries; see
    ``SpeechModel.refine_words``."""
    import torch

    from core.analysis.refine import RefineWindow, forced_token_probs
    from core.analysis.refine import refine_words as refine_pass

    windows, prepare = plan.segments, plan.prepare
    per_window: dict[int, list] = {}
    for ev in sorted(steps, key=lambda e: e.step):
        per_window.setdefault(ev.segment, []).append(ev)
    ranges = window_ranges(windows, longform)
    from core.inputs.pcm16 import Pcm16Audio

    if not isinstance(audio, Pcm16Audio):  # a Pcm16Audio's slices are float32: no copy of the whole clip
        audio = np.asarray(audio, np.float32)
    parts = [RefineWindow(i, audio[ranges[i][0]: min(ranges[i][1], len(audio))], ranges[i][0] / SAMPLE_RATE,
                          tuple(ev.step for ev in evs))
             for i, evs in sorted(per_window.items()) if i < len(windows)]
    ids = {i: [ev.token_id for ev in evs] for i, evs in per_window.items()}

    def encode(samples):  # silenced (or a long-form window's) audio: encoded anew, kept out of the cache
        frames = min(WINDOW_FRAMES, math.ceil(len(samples) / SAMPLES_PER_FRAME))
        return model.backend.encode({"input_features": model._features(samples), "source_len": torch.tensor(frames)})

    def score(window, samples):
        ready = prepare(window.index, windows[window.index])
        encoded = ready.encoded
        if samples is not None or longform:
            encoded = encode(window.audio if samples is None else samples)
        return forced_token_probs(model.backend, encoded, ready.prompt, ids[window.index])

    return refine_pass(words, parts, score, refine, decode=model.backend.decode, sample_rate=SAMPLE_RATE,
                       cancel=cancel, progress=progress, budget_s=budget_s, report=report)


def timestamp_segments_of(model, events: Sequence) -> list[dict]:
    """``SpeechModel.segments``: the timestamped segments ``{"start", "end", "text"}`` (seconds
    in the whole audio) of a run's StepEvents, from their timestamp-token pairs
    (``core.processors.whisper.timestamp_segments``); [] without timestamp tokens."""
    from core.events import StepEvent
    from core.processors.whisper import timestamp_segments

    per_window: dict[int, list[int]] = {}
    for ev in events:
        if isinstance(ev, StepEvent):
            per_window.setdefault(ev.segment, []).append(ev.token_id)
    return timestamp_segments(sorted(per_window.items()), model._loaded.special.notimestamps + 1,
                              model.backend.decode, WINDOW_S)


def alignment(model, steps: Sequence, end_attention: dict | None, heads: Sequence | None,
              audio: np.ndarray | None):
    """``SpeechModel.alignment``: the words of ``steps`` and each window's DTW path
    (``core.analysis.alignment.align``: an ``Alignment``), moved off silence when ``audio``
    is given. Numpy only (no model call)."""
    from dataclasses import replace

    from core.analysis.alignment import align
    from core.analysis.silence import snap_words

    found = align(steps, model.alignment_heads if heads is None else list(heads), model.backend.decode,
                  eot=model._loaded.special.eot, eot_attention=end_attention, language=model.last_language)
    return found if audio is None else replace(found, words=snap_words(found.words, audio))
