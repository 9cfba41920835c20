"""A fake speech model with ``transcribe`` (the long-form contract of
``core.tasks.longform.transcribe``) for the long-form GUI tests.

Two windows, as ``SpeechModel.transcribe`` streams them:

- window 0 (0–30 s): attempt 0 at T=0 loops (" the" x 6: compression ratio 3.1, fallback,
  taken back), attempt 1 at T=0.2 is accepted: ``KEPT`` in two timestamped segments
  (0.0–2.0 s "The quick brown fox", 2.0–4.5 s "jumps over the lazy dog.");
- window 1 (30–32 s): skipped as silence (" you", no-speech 0.9, taken back).
"""

from __future__ import annotations

import dataclasses

from core.events import AttemptEvent, Finished, RunStats, SegmentEvent

from .fakes import FakeSpeechModel, make_step

LOOP = [" the"] * 6
KEPT = [" The", " quick", " brown", " fox", " jump", "s", " over", " the", " lazy", " dog", "."]
SILENT = [" you"]
SEGMENTS = ({"start": 0.0, "end": 2.0, "tokens": (), "text": "The quick brown fox"},
            {"start": 2.0, "end": 4.5, "tokens": (), "text": "jumps over the lazy dog."})
TEXT = "The quick brown fox jumps over the lazy dog."


class FakeLongFormModel(FakeSpeechModel):
    """``FakeSpeechModel`` plus ``transcribe`` (module docstring) and ``segments`` (none:
    its plain decode has no timestamp tokens). ``transcribe_calls`` keeps each call's
    ``longform`` options."""

    last_language = "en"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.transcribe_calls: list = []
        self.fork_longform: list[bool] = []

    def segments(self, events):
        return []

    def fork(self, audio, options, *, longform=False, **kwargs):
        """The fake fork, recording whether it was asked for the long-form run's windows."""
        self.fork_longform.append(longform)
        return super().fork(audio, options, **kwargs)

    def transcribe(self, audio, options, longform=None, *, language="auto", task="transcribe", cancel=None):
        options = options.validate()
        self.transcribe_calls.append(longform)
        n_frames = 50

        def steps(words, first, window, prob):
            return [dataclasses.replace(make_step(first + i, w, n_frames=n_frames, prob=prob, offset=1500 * window),
                                        segment=window) for i, w in enumerate(words)]

        def attempt(window, k, temperature, evs, **kw):
            return AttemptEvent(segment=window, attempt=k, temperature=temperature, step_offset=evs[0].step,
                                steps=tuple(evs), token_ids=tuple(e.token_id for e in evs),
                                text="".join(e.text for e in evs).strip(), seek=3000 * window,
                                start=30.0 * window, end=30.0 * window + (30.0 if window == 0 else 2.0), **kw)

        yield SegmentEvent(segment=0, label="0.00–30.00 s · seek 0", source_offset=0, source_len=n_frames,
                           kind="window", no_speech_prob=0.01)
        loop = steps(LOOP, 0, 0, 0.9)
        yield from loop
        yield attempt(0, 0, 0.0, loop, compression_ratio=3.1, avg_logprob=-0.2, no_speech_prob=0.01, entropy=0.0,
                      verdict="fallback", reasons=("compression ratio 3.10 > 2.4 (repetition)",),
                      kept_in_transcript=False)
        kept = steps(KEPT, 0, 0, 0.7)
        yield from kept
        yield attempt(0, 1, 0.2, kept, compression_ratio=1.1, avg_logprob=-0.4, no_speech_prob=0.01, entropy=2.3,
                      verdict="accepted", kept_in_transcript=True, kept_tokens=len(KEPT), segments=SEGMENTS)
        if cancel is not None and cancel():
            yield Finished(text=TEXT, token_ids=[e.token_id for e in kept], stats=RunStats(), cancelled=True,
                           reason="cancelled")
            return
        yield SegmentEvent(segment=1, label="30.00–32.00 s · seek 3000", source_offset=1500, source_len=n_frames,
                           kind="window", no_speech_prob=0.9)
        silent = steps(SILENT, len(KEPT), 1, 0.2)
        yield from silent
        yield attempt(1, 0, 0.0, silent, compression_ratio=0.4, avg_logprob=-1.6, no_speech_prob=0.9, entropy=0.0,
                      verdict="silence", reasons=("no-speech probability 0.90 > 0.6 and average log-probability -1.60 < -1",), kept_in_transcript=False)
        stats = RunStats(decode_s=0.01, n_tokens=len(KEPT), audio_s=len(audio) / 16000, encoder_cached=False)
        yield Finished(text=TEXT, token_ids=[e.token_id for e in kept], stats=stats, reason="eos")
