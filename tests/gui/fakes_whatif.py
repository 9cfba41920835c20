"""Fake speech and OCR models with the what-if contract of ``core.tasks.whatif`` (no torch).

Speech: word ``i`` of ``fakes.WORDS`` "is spoken" from ``i * WORD_S`` to ``(i + 1) * WORD_S``
seconds. Silencing a span takes the words it overlaps out of the re-decode, and their
probability falls to ``LOST_P``; the others keep theirs. With no input, the fake's prior likes
" the", " over" and "." (``PRIOR_WORDS``, prior 0.7: hallucination-prone), the rest gets 0.01.

OCR: blanking a region re-reads the lines whose boxes it overlaps without their first
character (``LINE_TEXT[1:]``); that character's probability falls to ``LOST_P``.
"""

from __future__ import annotations

import time

import numpy as np

from core.events import Finished, RunStats, SegmentEvent, StepEvent, TokenProb
from core.tasks.whatif import TokenShift, WhatIfDone, WhatIfScores

from .fakes import WORDS, FakeSpeechModel, make_step
from .fakes_ocr import LINE_TEXT, FakeOCRModel

WORD_S = 0.1
LOST_P = 0.02
PRIOR_WORDS = (" the", " over", ".")


class FakeWhatIfSpeech(FakeSpeechModel):
    """``FakeSpeechModel`` plus ``what_if`` / ``no_input`` (see the module docstring).
    ``whatif_calls`` records (kind, span or None, the original tokens' ids)."""

    def __init__(self, *args, whatif_delay_s: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.whatif_delay_s = whatif_delay_s
        self.whatif_calls: list[tuple[str, object, tuple[int, ...]]] = []

    def what_if(self, audio, options, original, *, span, language="auto", task="transcribe", cancel=None):
        options = options.validate()
        t0, t1 = span
        self.whatif_calls.append(("mask", (t0, t1), tuple(e.token_id for e in original)))
        started = time.perf_counter()
        gone = {i for i in range(len(WORDS)) if t0 < (i + 1) * WORD_S and i * WORD_S < t1}
        n_frames = min(self.n_frames, int(np.ceil(len(audio) / 320)))
        yield SegmentEvent(segment=0, label=f"0.0–{len(audio) / 16000:.1f} s", source_offset=0, source_len=n_frames)
        kept = [w for i, w in enumerate(WORDS) if i not in gone]
        ids = []
        for k, w in enumerate(kept):
            if cancel is not None and cancel():
                yield Finished("", ids, RunStats(), True, "cancelled")
                yield WhatIfDone("mask", "", (), (), True, time.perf_counter() - started)
                return
            if self.whatif_delay_s:
                time.sleep(self.whatif_delay_s)
            ev = make_step(k, w, n_frames=n_frames)
            ids.append(ev.token_id)
            yield ev
        shifts = tuple(TokenShift(e.step, e.segment, e.token_id, e.text, e.raw_prob,
                                  LOST_P if e.step in gone else e.raw_prob, " cat" if e.step in gone else e.text)
                       for e in original)
        text = "".join(kept).strip()
        yield WhatIfScores("mask", 0, shifts, text, tuple(ids))
        yield Finished(text, ids, RunStats(n_tokens=len(ids)))
        yield WhatIfDone("mask", f"silence {t0:.2f}–{t1:.2f} s", (0,), shifts, False, time.perf_counter() - started)

    def no_input(self, audio, options, original, *, language="auto", task="transcribe", cancel=None):
        self.whatif_calls.append(("prior", None, tuple(e.token_id for e in original)))
        shifts = tuple(TokenShift(e.step, e.segment, e.token_id, e.text, e.raw_prob,
                                  0.7 if e.text in PRIOR_WORDS else 0.01, " the") for e in original)
        yield WhatIfScores("prior", 0, shifts)
        yield WhatIfDone("prior", "no input: silence of the same length", (0,), shifts, False, 0.01)


class FakeWhatIfOCR(FakeOCRModel):
    """``FakeOCRModel`` plus ``what_if`` / ``no_input`` (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.whatif_calls: list[tuple[str, object]] = []

    def what_if(self, image, options, original, *, mask, lines=None, region=None, cancel=None):
        self.whatif_calls.append(("mask", tuple(mask)))
        x, y, w, h = mask
        touched = [ln.index for ln in lines if x < ln.box[2] and ln.box[0] < x + w and y < ln.box[3] and ln.box[1] < y + h]
        by_seg = {}
        for e in original:
            by_seg.setdefault(e.segment, []).append(e)
        every = []
        ids = []
        for i in touched:
            line = lines[i]
            first = by_seg[i][0].step
            yield SegmentEvent(segment=i, label=f"line {i + 1}", source_offset=0, source_len=line.n_columns)
            for k, ch in enumerate(LINE_TEXT[1:]):
                att = np.full((self.layers, self.heads, line.n_columns), 0.01, np.float32)
                att[:, :, k] = 1.0
                tp = [TokenProb(ord(ch), ch, 0.9)]
                yield StepEvent(step=first + k, token_id=ord(ch), text=ch, prob=0.9, raw_prob=0.8, topk=tp, raw_topk=tp,
                                entropy=0.3, cross_attention=att / att.sum(-1, keepdims=True), segment=i)
                ids.append(ord(ch))
            shifts = tuple(TokenShift(e.step, i, e.token_id, e.text, e.raw_prob,
                                      LOST_P if k == 0 else e.raw_prob, "z") for k, e in enumerate(by_seg[i]))
            every.extend(shifts)
            yield WhatIfScores("mask", i, shifts, LINE_TEXT[1:], tuple(ord(c) for c in LINE_TEXT[1:]))
        yield Finished("", ids, RunStats())
        yield WhatIfDone("mask", f"blank {w}×{h} px at ({x}, {y})", tuple(touched), tuple(every), False, 0.01)

    def no_input(self, image, options, original, *, lines=None, region=None, cancel=None):
        self.whatif_calls.append(("prior", None))
        shifts = tuple(TokenShift(e.step, e.segment, e.token_id, e.text, e.raw_prob, 0.5 if e.text.isdigit() else 0.01,
                                  "a") for e in original)
        yield WhatIfDone("prior", "no input: a blank image", tuple(sorted({e.segment for e in original})), shifts)
