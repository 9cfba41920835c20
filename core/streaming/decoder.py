"""Decoding one buffer of audio with a loaded Whisper model, for the streaming policies.

The buffer is encoded outside the model's encoder cache (``core.streaming.short_encoder``: the
padded 30 s window as offline, or only the buffer's frames, whisper.cpp's ``audio_ctx``);
``SpeechModel.prompt`` builds the prompt with the committed text as previous text and
``Engine.run`` decodes with the run's ``DecodingOptions`` (greedy, beam, sampling, ...). The
committed tokens inside the buffer go into the prompt after ``<|notimestamps|>``, as
openai/whisper's ``prefix`` (``decoding.py``: appended to the initial tokens, fed in one decoder
call): as ``forced_ids`` each cost a decoder step and an output-head projection (10 ms on tiny.en),
about half of a LocalAgreement decode in a 10 s buffer. Each new token gets its alignment
heads' most-attended frame (AlignAtt's test, before it is emitted), by default as
ufal/SimulStreaming finds it (:class:`AttentionFrames`: z-score over the decode's rows, prompt
included, median filter 7, mean over heads; the prompt's rows cost one more decoder call over the
prompt on the run's cross-attention keys and values, ~5 % of a decode on base); word timing (DTW over the
same heads, ``SpeechModel.alignment``) runs only when a policy commits, over the whole decode
(``Hypothesis.timed``). Token texts come from the tokenizer's decode of the whole sequence, so a
character split over byte tokens (CJK, emoji) is whole in the text of the token that completes it.

A decode that loops (openai/whisper's rule: the text's gzip compression ratio above 2.4, or the
token limit reached) is done again, as ``transcribe`` does per window (openai
``decode_with_fallback``, ``core.tasks.longform``): first over the full window if the buffer was
encoded short, then at the next temperatures of the long-form ladder (0.2, 0.4, ..., 1.0;
sampling). Streaming has no "previous window" to retry later, so without this a degenerate
decode ("Hear the Hear the ...", sampling at T=1 on a 1 s buffer) would be committed as it
stands. The token limit of a buffer is ``TOKENS_PER_S`` per second of audio (+ 10): speech
never needs more, and a loop stops there instead of at 224 tokens. A loop is stopped earlier,
as soon as its last tokens repeat one phrase three times (``repeating``): session 12,
whisper-base on a 16 s buffer ran each of the ladder's seven attempts to the limit (~190
tokens), the decode took 12 s of CPU and the stream skipped 11.6 s of audio to catch up. The
price: speech that says one phrase three times in a row ("no, no, no, no, no") is decoded again
like a loop, and when every attempt repeats it, the decode stands with its third repetition.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Sequence

import numpy as np

from core.catalog import FRAME_S, SAMPLE_RATE
from core.streaming.base import Hypothesis, StopRule
from core.streaming.events import StreamToken
from core.streaming.short_encoder import ENCODERS, PAD_S, encode
from core.tasks.longform_verdicts import fallback_options

#: openai/whisper's loop test: a decode whose text's gzip compression ratio is above this is redone
COMPRESSION_RATIO = 2.4
#: the fallback ladder (``core.tasks.longform.LongFormOptions.temperatures``); 0.0 = the run's options
FALLBACK_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
#: the most tokens a buffer may hold per second of audio (+ 10): fast speech is ~5
TOKENS_PER_S = 12
#: a decode whose last tokens repeat one phrase this many times, over at least
#: ``REPEAT_TOKENS`` tokens, is stopped as a loop (``repeating``) and done again
REPEATS, REPEAT_TOKENS = 3, 9
#: how a step's most-attended frame is found from the alignment heads' cross-attention
#: (``WhisperDecoder(frame_rule=...)``): "normalised" as ufal/SimulStreaming (each head's
#: attention z-scored per frame over the decode's rows, median filter of width 7 over frames,
#: the mean over heads: ``AttentionFrames``), "mean" (the heads' plain mean, sessions 11-12)
FRAME_RULES = ("normalised", "mean")
#: the median filter's width over frames (openai/whisper ``timing.py``, SimulStreaming ``infer``)
MEDIAN_WIDTH = 7


def repeating(ids: Sequence[int], times: int = REPEATS, at_least: int = REPEAT_TOKENS, longest: int = 16) -> bool:
    """Whether ``ids`` end in one phrase (1 to ``longest`` tokens) said ``times`` times in a row
    and covering ``at_least`` tokens ("the roof of the house. the roof of the house. the roof of
    the house."; a one-token phrase must come ``at_least`` times): a decoding loop, which would
    otherwise run to the token limit."""
    n = len(ids)
    for k in range(1, min(longest, n // times) + 1):
        reps = max(times, -(-at_least // k))
        if k * reps > n:
            continue
        tail = list(ids[n - k:])
        if all(list(ids[n - k * (j + 1):n - k * j]) == tail for j in range(1, reps)):
            return True
    return False


def median_filter(x: np.ndarray, width: int = MEDIAN_WIDTH) -> np.ndarray:
    """openai/whisper ``timing.median_filter`` in numpy: the median over a sliding window of
    ``width`` (odd) along the last axis, the edges padded by reflection (a row shorter than
    ``width // 2 + 1`` is returned as it is, as whisper does)."""
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode="reflect")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1), axis=-1)


class AttentionFrames:
    """The most-attended frame of each new token of one decode, as ufal/SimulStreaming finds it
    (``simul_whisper.py``, ``PaddedAlignAttWhisper.infer``): the alignment heads' cross-attention
    rows of every position fed so far in the decode (the prompt's: previous text, start
    sequence, the forced committed tokens; then one per new token) are z-scored per head and
    frame over those rows (``std_mean(dim=-2)``, as openai/whisper ``timing.py`` normalises
    before DTW), median-filtered over frames (width 7), averaged over the heads, and the last
    row's argmax within the buffer's frames is the token's frame. The z-score removes what
    every row attends alike (the first frames, a loud onset), so the argmax follows the frame
    this token attends more than the others do. Running sums per head and frame keep each
    token's cost at O(heads x frames).

    One deliberate difference: SimulStreaming median-filters the rows over all encoder frames
    (30 s) and cuts them to the audio's frames afterwards; here the rows end at the buffer's
    last frame, so the last 3 frames are filtered against a reflected edge. The frame differs
    for ~8% of tokens, AlignAtt's decision at its default 25-frame threshold for 0 of 236
    (tiny.en) and 4 of 253 (base) tokens (session 13 review, /work/notes/s13/r1/median_order.py).

    Args:
        prompt_rows: float32 (heads, rows, frames): the alignment heads' rows of the prompt's
            positions before the one that predicts the first new token (may have 0 rows).
    """

    def __init__(self, prompt_rows: np.ndarray):
        rows = np.asarray(prompt_rows, np.float64)
        self.n = rows.shape[1]
        self.s1, self.s2 = rows.sum(axis=1), np.square(rows).sum(axis=1)

    def add(self, row: np.ndarray) -> np.ndarray:
        """Take the next position's heads' rows ``row`` (heads, frames) -> the normalised row
        float32 (frames,) the argmax decides on (the raw mean over heads when it is the only row)."""
        r = np.asarray(row, np.float64)
        if self.n == 0:
            self.s1, self.s2 = np.zeros_like(r), np.zeros_like(r)
        self.n += 1
        self.s1 += r
        self.s2 += r * r
        if self.n < 2:
            return r.mean(axis=0).astype(np.float32)
        mean = self.s1 / self.n
        std = np.sqrt(np.maximum(self.s2 / self.n - mean * mean, 0.0))
        z = np.divide(r - mean, std, out=np.zeros_like(r), where=std > 1e-12)
        return median_filter(z).mean(axis=0).astype(np.float32)


class WhisperDecoder:
    """``core.streaming.base.Decoder`` over a ``core.tasks.speech.SpeechModel``.

    Args:
        model: the loaded SpeechModel.
        options: the run's DecodingOptions (any strategy; cross-attention capture is switched on,
            the policies and word timing need it).
        language: "auto" (detected on the first buffer, then kept) or a code.
        task: "transcribe" | "translate".
        encoder: "buffer" (default: only the buffer's frames + ``pad_s`` of silence, whisper.cpp's
            ``audio_ctx``, ``short_encoder``) or "window" (the 30 s padded window, as offline).
            bench_streaming (tiny.en, 46 s of espeak at real time, LocalAgreement-2, step 1 s,
            load average ~10 on 2 cores): WER against the text 11.3 (window) -> 8.3 (buffer),
            CPU seconds per audio second 0.36 -> 0.28, wall RTF 1.13 -> 0.98, mean latency
            7.2 -> 3.8 s (the window fell behind 16 times, the buffer once).
        pad_s: seconds of padding encoded after the buffer in "buffer" mode.
        fallback: redo a looping decode (see the module docstring); False keeps it.
        frame_rule: how a new token's most-attended frame (AlignAtt's test) is found: one of
            :data:`FRAME_RULES` ("normalised": as SimulStreaming, :class:`AttentionFrames`;
            "mean": the alignment heads' plain mean). The rule applies to decodes with a stop
            rule (AlignAtt); a decode without one (LocalAgreement, fixed-window) takes the
            plain mean for its tokens' first estimates and skips the prompt's extra pass.

    Attributes:
        fallbacks: how many decodes were done again (a loop found), over the stream.

    Raises:
        ValueError: a language or task the model cannot do, an unknown encoder or frame rule,
            pad_s < 0.
    """

    def __init__(self, model, options, *, language: str = "auto", task: str = "transcribe",
                 encoder: str = "buffer", pad_s: float = PAD_S, fallback: bool = True,
                 frame_rule: str = "normalised"):
        model.check_language_task(language, task)
        if encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {encoder!r}; use one of {', '.join(ENCODERS)}")
        if pad_s < 0:
            raise ValueError(f"pad_s must be >= 0 seconds, got {pad_s}")
        if frame_rule not in FRAME_RULES:
            raise ValueError(f"unknown frame rule {frame_rule!r}; use one of {', '.join(FRAME_RULES)}")
        self.frame_rule = frame_rule
        self.model, self.task, self.encoder, self.pad_s, self.fallback = model, task, encoder, pad_s, fallback
        self.options = replace(options, capture_attention=True).validate()
        self.language = language if model.multilingual else "en"
        self.heads = list(model.alignment_heads)
        self.fallbacks = 0
        self._stopped_ev = None  # the last decode's stopped step (see _run)
        self._decided: dict[int, np.ndarray] = {}  # the last decode's rows the frames came from, by step

    def decode(self, audio: np.ndarray, start_s: float, previous: Sequence[int] = (),
               forced: Sequence[int] = (), stop: StopRule | None = None) -> Hypothesis:
        """Decode ``audio`` (float32 (n,), 16 kHz, 0.1-30 s) starting ``start_s`` s into the
        stream; see ``core.streaming.base.Decoder``. Token ``end_s`` are stream seconds: the
        most-attended frame's end until ``Hypothesis.timed`` aligns the committed ones.

        Raises:
            ValueError: audio shorter than 0.1 s or longer than 30 s.
        """
        from core.catalog import WINDOW_S
        from core.inputs.types import check_audio

        if len(audio) > WINDOW_S * SAMPLE_RATE:
            raise ValueError(f"a streaming buffer holds at most {WINDOW_S:.0f} s; got {len(audio) / SAMPLE_RATE:.1f} s")
        audio = check_audio(audio)
        t0 = time.perf_counter()
        m = self.model
        span = self.encoder
        encoded = encode(m, audio, span, self.pad_s)
        if self.language == "auto":  # detected on the first buffer, then kept
            # over the padded window: on a short encoding whisper-base took German for English
            probe = encoded if span == "window" else encode(m, audio, "window")
            self.language = m.sot.step(probe, None, None)[0] or "en"
            m.last_language = self.language
        prompt = m.prompt(self.language, self.task, previous=list(previous))
        cap = 10 + int(TOKENS_PER_S * len(audio) / SAMPLE_RATE)  # new tokens (the prefix is prompt)
        prompt = replace(prompt, max_new_tokens=max(1, min(prompt.max_new_tokens - len(forced), cap)))
        attempt, temperatures = 0, [t for t in FALLBACK_TEMPERATURES if t > 0]
        options = self.options
        while True:
            steps, new, stopped, finished, reason = self._run(encoded, prompt, options, forced, stop)
            if not self.fallback or not self._loops(forced, new, reason):
                break
            if span == "buffer":  # the short encoding is the likelier culprit: the full window first
                span = "window"
                encoded = encode(m, audio, span)
            elif temperatures:
                options = fallback_options(self.options, temperatures.pop(0), 0, attempt + 1, prompt, None)[0]
            else:
                break  # the ladder is spent: the last attempt stands, as in transcribe
            self.fallbacks += 1
            attempt += 1
        texts = self._texts(list(forced), [t.id for t in new])
        new = [replace(t, text=x, end_s=start_s + (max(t.frame, 0) + 1) * FRAME_S) for t, x in zip(new, texts)]
        if stopped is not None:
            before = self.model.backend.decode(list(forced) + [t.id for t in new])
            rest = self.model.backend.decode(list(forced) + [t.id for t in new] + [stopped.id])
            stopped = replace(stopped, text=rest[len(os.path.commonprefix([before, rest])):])
        timing, starts = self._timing(steps, start_s, bool(forced))
        rows = () if stopped is None else self._rows(steps, self._stopped_ev, [t.text for t in new] + [stopped.text])
        return Hypothesis(tuple(new), finished, stopped, time.perf_counter() - t0, attempt + 1, timing, rows, starts)

    def _rows(self, steps: list, stopped_ev, texts: list[str]) -> tuple:
        """The new tokens' steps and the stopped token's with the row each token's frame was the
        argmax of as their ``cross_attention`` (float32 (frames,): the alignment heads' mean
        cross-attention, or with the "normalised" rule the normalised row scaled to [0, 1],
        for a heatmap) and their texts (``Hypothesis.rows``); () without attention."""
        if stopped_ev is None:
            return ()
        new = [ev for ev in steps if not ev.forced] + [stopped_ev]
        rows = [self._decided.get(ev.step) if self._decided else self._mean_row(ev) for ev in new]
        if len(new) != len(texts) or any(r is None for r in rows):
            return ()
        return tuple(replace(ev, cross_attention=r, text=x) for ev, r, x in zip(new, rows, texts))

    def _run(self, encoded, prompt, options, forced, stop):
        """One Engine.run with ``forced`` after the prompt (openai's prefix): (steps, new tokens,
        stopped token, finished by end-of-text, reason); the stopped token's StepEvent is kept as
        ``_stopped_ev`` (for ``Hypothesis.rows``)."""
        from core.events import Finished, StepEvent

        n_frames = int(encoded.source_len)
        steps: list = []
        new: list[StreamToken] = []
        stopped, finished, reason = None, False, ""
        self._stopped_ev = None
        self._decided = {}
        if forced:  # the prefix's first token was the sample begin: after it end-of-text may come at once
            prompt = replace(prompt, prompt_ids=tuple(prompt.prompt_ids) + tuple(forced), begin_suppress_tokens=())
        frames = None
        # only a stop rule (AlignAtt) decides on the frames: without one the prompt's extra
        # decoder pass would cost 22-28% of a decode for nothing (LocalAgreement, fixed-window)
        if self.frame_rule == "normalised" and self.heads and stop is not None:
            frames = AttentionFrames(self._prompt_rows(encoded, prompt.prompt_ids))
        run = self.model.engine.run(encoded, prompt, options, reuse_cache=False)
        try:
            for ev in run:
                if isinstance(ev, Finished):
                    finished, reason = ev.reason == "eos", ev.reason
                    break
                if not isinstance(ev, StepEvent):
                    continue
                if frames is not None and ev.cross_attention is not None:
                    row = frames.add(self._head_rows(ev.cross_attention))
                    frame = int(np.argmax(row))
                    low, high = float(row.min()), float(row.max())  # [0, 1] for a heatmap's fixed levels
                    self._decided[ev.step] = (row - low) / (high - low) if high > low else np.zeros_like(row)
                else:
                    frame = self._frame(ev)
                if not ev.forced:
                    token = StreamToken(ev.token_id, ev.text, float("nan"), frame)
                    if stop is not None and stop(token, n_frames):
                        stopped, reason, self._stopped_ev = token, "stopped", ev
                        break
                    new.append(token)
                steps.append(ev)
                if not ev.forced and repeating([t.id for t in new]):
                    reason = "loop"  # the rest would repeat it to the token limit
                    break
        finally:
            run.close()
        return steps, new, stopped, finished, reason

    def _loops(self, forced: Sequence[int], new: Sequence[StreamToken], reason: str) -> bool:
        """openai/whisper's fallback test on one decode: it ran into the token limit, or its
        text compresses better than 2.4 (a repetition loop)."""
        from core.tasks.longform_verdicts import compression_ratio

        if not new:
            return False
        text = self.model.backend.decode(list(forced) + [t.id for t in new])
        return reason in ("max_tokens", "loop") or compression_ratio(text) > COMPRESSION_RATIO

    def _texts(self, before: list[int], ids: list[int]) -> list[str]:
        """Each of ``ids``' text as the tokenizer decodes the whole sequence (after ``before``):
        a token that ends inside a character (its bytes incomplete: "\ufffd") gets "" and the
        token completing it gets the whole character (also when ``before`` ends inside it)."""
        decode = self.model.backend.decode
        shown = decode(before)
        out = []
        for i in range(len(ids)):
            now = decode(before + ids[: i + 1])
            if now.endswith("\ufffd") and i + 1 < len(ids):
                out.append("")  # pending bytes
                continue
            # after a prefix ending inside a character (AlignAtt commits every emitted token), the
            # completed character replaces the prefix's "\ufffd": the text is what follows the common part
            out.append(now[len(os.path.commonprefix([shown, now])):])
            shown = now
        return out

    def _head_rows(self, att: np.ndarray) -> np.ndarray:
        """The alignment heads' rows of one position's cross-attention (layers, heads, frames)
        -> (len(heads), frames)."""
        return np.stack([att[layer, head] for layer, head in self.heads if layer < att.shape[0]])

    def _prompt_rows(self, encoded, prompt_ids: Sequence[int]) -> np.ndarray:
        """The alignment heads' cross-attention rows float32 (heads, len(prompt_ids) - 1, frames)
        of the prompt's positions but the last (whose row is the first new token's step): the
        prompt fed once more with every position's attention (SimulStreaming's first decoder
        call). The cross-attention keys and values are the run's (``encoded.extras``), so this
        costs the prompt's self-attention and feed-forward only."""
        import torch

        backend, n = self.model.backend, int(encoded.source_len)
        heads = len(self.heads)
        if len(prompt_ids) < 2:
            return np.zeros((heads, 0, n), np.float32)
        fed = torch.tensor([list(prompt_ids)[:-1]], dtype=torch.long)
        out = backend.step(fed, backend.init_cache(encoded, 1), True, all_positions=True)
        att = out.position_cross_attention  # (1, positions, layers, heads, source frames)
        att = att[0, :, :, :, :n].float().numpy()
        return np.stack([att[:, layer, head] for layer, head in self.heads if layer < att.shape[1]])

    def _mean_row(self, ev) -> np.ndarray | None:
        """The alignment heads' mean cross-attention of a step, float32 (frames,); None without."""
        att = ev.cross_attention
        if att is None or not self.heads:
            return None
        return np.stack([att[layer, head] for layer, head in self.heads if layer < att.shape[0]]).mean(axis=0)

    def _frame(self, ev) -> int:
        """The alignment heads' most-attended frame of a step (-1 without attention)."""
        row = self._mean_row(ev)
        return -1 if row is None else int(np.argmax(row))

    def _timing(self, steps: list, start_s: float, after_prefix: bool):
        """Two functions of k, ``Hypothesis.timing`` and ``Hypothesis.starts``: the word ends and
        the word starts (stream s) of the first k new tokens, by DTW (``SpeechModel.alignment``)
        over the first k steps, run when a policy asks (once per k for both; ``Hypothesis.timed``
        asks for all the decode's tokens). After a prefix
        (committed words earlier in the buffer, which have no steps) the DTW starts half a
        second before the first new token's most-attended frame: the prefix's words hold the
        frames before."""
        from dataclasses import replace as with_

        memo: dict[int, list] = {}

        def spans(k: int) -> list:
            if k in memo:
                return memo[k]
            part = steps[:k]
            if not part:
                return []
            f0 = max(0, part[0].cross_attention is not None and self._frame(part[0]) - 25) if after_prefix else 0
            if f0:
                part = [with_(ev, cross_attention=ev.cross_attention[..., f0:], source_offset=ev.source_offset + f0)
                        for ev in part]
            try:
                words = self.model.alignment(part).words
            except (ValueError, IndexError):  # too few frames or tokens to align: the estimates stand
                return []
            by_step = {s: (start_s + w.start, start_s + w.end) for w in words for s in w.steps}
            memo.clear()
            memo[k] = [by_step.get(ev.step) for ev in part]  # None: a token in no word
            return memo[k]

        def ends(k: int) -> list:
            return [None if x is None else x[1] for x in spans(k)]

        def starts(k: int) -> list:
            return [None if x is None else x[0] for x in spans(k)]

        return ends, starts
