"""Fake models with ``decode_lanes`` (the task models' lanes contract) for the lanes GUI tests.

:class:`FakeLanesSpeech` is the fake speech model (tests/gui/fakes.py) whose lanes write
different words per strategy, so the alignment has something to show: greedy and beam
write ``WORDS``; sampling replaces " brown" by " red" and leaves out " lazy"; sampling
with min-p inserts " cat" after " quick". The lanes are interleaved with the real
``core.tasks.lanes.interleave`` (one event per lane per turn) and the input counts as encoded
once. :class:`FakeLanesOCR` is the fake OCR model whose lanes all read ``LINE_TEXT``.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from core.events import Finished, RunStats, SegmentEvent
from core.tasks.lanes import check_lanes, interleave
from core.options import SAMPLING_STRATEGIES

from .fakes import WORDS, FakeSpeechModel, fake_beam_events, make_step
from .fakes_ocr import FakeOCRModel


def lane_words(options) -> list[str]:
    """The words the fake speech model's lane with ``options`` writes (module docstring)."""
    words = list(WORDS)
    if options.strategy in SAMPLING_STRATEGIES and options.min_p > 0:
        words.insert(2, " cat")
    elif options.strategy in SAMPLING_STRATEGIES:
        words = [" red" if w == " brown" else w for w in words if w != " lazy"]
    return words[: options.max_new_tokens]


class FakeLanesSpeech(FakeSpeechModel):
    """The fake speech model with ``decode_lanes`` (module docstring); ``lanes_calls`` lists
    the lanes' options of every call."""

    def __init__(self, delay_s: float = 0.0, n_frames: int = 50):
        super().__init__(delay_s=delay_s, n_frames=n_frames)
        self.lanes_calls: list[list] = []

    def decode_lanes(self, audio, lanes, *, language="auto", task="transcribe", cancel=None, prefix_ids=()):
        lanes = check_lanes(lanes)
        if len(audio) < 1600:
            raise ValueError("the audio is too short; give at least 0.1 s")
        key = hashlib.sha1(np.ascontiguousarray(audio).tobytes()).hexdigest()
        with self._lock:
            self.lanes_calls.append(list(lanes))
            cached = key in self._seen
            if not cached:
                self._seen.add(key)
                self.encode_count += 1
        n_frames = min(self.n_frames, int(np.ceil(len(audio) / 320)))
        streams = [self._lane(audio, o, lane_words(o), n_frames, cancel) for o in lanes]
        yield from interleave(streams, lanes, RunStats(encode_s=0.0 if cached else 0.01, encoder_cached=cached))

    def _lane(self, audio, options, words, n_frames, cancel):
        yield SegmentEvent(segment=0, label=f"0.0–{len(audio) / 16000:.1f} s", source_offset=0, source_len=n_frames)
        if options.strategy in ("beam", "diverse_beam"):
            for bev in fake_beam_events(words, options.num_beams, n_frames=n_frames):
                if cancel is not None and cancel():
                    yield Finished("", [], RunStats(), cancelled=True, reason="cancelled")
                    return
                if self.delay_s:
                    time.sleep(self.delay_s)
                yield bev
        prob = 0.9 / options.temperature if options.strategy == "sample" else 0.9
        ids = []
        for i, w in enumerate(words):
            if cancel is not None and cancel():
                yield Finished("".join(words[:i]).strip(), ids, RunStats(), cancelled=True, reason="cancelled")
                return
            if self.delay_s:
                time.sleep(self.delay_s)
            ev = make_step(i, w, n_frames=n_frames, prob=float(np.clip(prob - 0.05 * i, 0.05, 1.0)))
            ids.append(ev.token_id)
            yield ev
        yield Finished("".join(words).strip(), ids, RunStats(decode_s=0.001 * len(words), n_tokens=len(words)))


class FakeLanesOCR(FakeOCRModel):
    """The fake OCR model with ``decode_lanes``: every lane reads like ``decode``."""

    def decode_lanes(self, image, lanes, *, lines=None, region=None, cancel=None, prefix_ids=()):
        lanes = check_lanes(lanes)
        lines = lines if lines is not None else self.detect(image, region)
        streams = [self.decode(image, o, lines=lines, region=region, cancel=cancel) for o in lanes]
        yield from interleave(streams, lanes)
