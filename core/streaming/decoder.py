"""Decoding one buffer of audio with a loaded Whisper model, for the streaming policies.

The decode goes through the task and the engine like every other run (``SpeechModel.plan``
encodes the buffer, ``SpeechModel.prompt`` builds the prompt with the committed text as previous
text, ``Engine.run`` decodes with the run's ``DecodingOptions``: greedy, beam, sampling, ...;
the committed tokens inside the buffer are its ``forced_ids``). Each new token gets its
alignment heads' most-attended frame (AlignAtt's test, before it is emitted) and, after the
decode, its word's end from word timing (DTW over the same heads, ``SpeechModel.alignment``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Sequence

import numpy as np

from core.streaming.base import Hypothesis, StopRule
from core.streaming.events import StreamToken


class WhisperDecoder:
    """``core.streaming.base.Decoder`` over a ``core.tasks.speech.SpeechModel``.

    Args:
        model: the loaded SpeechModel.
        options: the run's DecodingOptions (any strategy; cross-attention capture is switched on,
            the policies and word timing need it).
        language: "auto" (detected on the first buffer, then kept) or a code.
        task: "transcribe" | "translate".

    Raises:
        ValueError: a language or task the model cannot do.
    """

    def __init__(self, model, options, *, language: str = "auto", task: str = "transcribe"):
        model.check_language_task(language, task)
        self.model, self.task = model, task
        self.options = replace(options, capture_attention=True).validate()
        self.language = language if model.multilingual else "en"
        self.heads = list(model.alignment_heads)

    def decode(self, audio: np.ndarray, start_s: float, previous: Sequence[int] = (),
               forced: Sequence[int] = (), stop: StopRule | None = None) -> Hypothesis:
        """Decode ``audio`` (float32 (n,), 16 kHz, 0.1-30 s) starting ``start_s`` s into the
        stream; see ``core.streaming.base.Decoder``. Token ``end_s`` are stream seconds.

        Raises:
            ValueError: audio shorter than 0.1 s or longer than 30 s.
        """
        from core.catalog import WINDOW_S
        from core.events import Finished, StepEvent
        from core.inputs.types import SpeechInput

        if len(audio) > WINDOW_S * 16000:
            raise ValueError(f"a streaming buffer holds at most {WINDOW_S:.0f} s; got {len(audio) / 16000:.1f} s")
        t0 = time.perf_counter()
        m = self.model
        plan = m.plan(SpeechInput(audio, language=self.language, task=self.task), self.options)
        prepared = plan.prepare(0, plan.segments[0])
        if self.language == "auto":
            self.language = m.last_language or "en"  # detected on the first buffer, then kept
        prompt = m.prompt(self.language, self.task, previous=list(previous))
        n_frames = int(prepared.encoded.source_len)
        steps: list = []
        new: list[StreamToken] = []
        stopped, finished = None, False
        run = m.engine.run(prepared.encoded, prompt, self.options, forced_ids=list(forced), reuse_cache=False)
        try:
            for ev in run:
                if isinstance(ev, Finished):
                    finished = ev.reason == "eos"
                    break
                if not isinstance(ev, StepEvent):
                    continue
                if not ev.forced:
                    token = StreamToken(ev.token_id, ev.text, float("nan"), self._frame(ev))
                    if stop is not None and stop(token, n_frames):
                        stopped = token
                        break
                    new.append(token)
                steps.append(ev)
        finally:
            run.close()
        ends = self._word_ends(steps, start_s)
        k = len(steps) - len(new)
        tokens = tuple(replace(t, end_s=ends.get(steps[k + i].step, start_s + max(t.frame, 0) * 0.02))
                       for i, t in enumerate(new))
        return Hypothesis(tokens, finished, stopped, time.perf_counter() - t0)

    def _frame(self, ev) -> int:
        """The alignment heads' most-attended frame of a step (-1 without attention)."""
        att = ev.cross_attention
        if att is None or not self.heads:
            return -1
        rows = np.stack([att[layer, head] for layer, head in self.heads if layer < att.shape[0]])
        return int(np.argmax(rows.mean(axis=0)))

    def _word_ends(self, steps: list, start_s: float) -> dict[int, float]:
        """StepEvent.step -> the end (stream s) of the word it belongs to."""
        if not steps:
            return {}
        try:
            words = self.model.alignment(steps).words
        except (ValueError, IndexError):  # too few frames or tokens to align: the attention frame stands in
            return {}
        return {s: start_s + w.end for w in words for s in w.steps}
