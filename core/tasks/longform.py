"""Long-form transcription as openai/whisper ``transcribe()`` does it (issue 14 §3).

Whisper sees 30 s at a time. ``transcribe()`` (openai/whisper ``whisper/transcribe.py``)
and transformers' long-form ``generate()`` (``models/whisper/generation_whisper.py``)
decode audio of any length window by window:

- **seek**: each window starts where the previous one's last complete timestamp pair
  ended (or 30 s later when it ends with a single timestamp, no pair, or is skipped), so
  no word is cut in half; the unfinished tail after the last pair is decoded again in the
  next window;
- **conditioning on previous text**: the decoder prompt is ``<|startofprev|>`` + the
  tokens of the segments decoded so far (the last 223, ``n_ctx // 2 - 1``) +
  ``<|startoftranscript|><|lang|><|task|>``; an initial prompt is the first "previous text";
- **temperature fallback**: a window is decoded again at the next temperature of
  (0.0, 0.2, ..., 1.0) when the compression ratio of its text is > 2.4 (a repetition loop)
  or its average log-probability is < -1.0; a window whose no-speech probability is
  > 0.6 while its average log-probability is < -1.0 is skipped as silence;
- **repetition loops** also fail an attempt when the token entropy of its last 32 tokens is
  below 2.4 nats (whisper.cpp ``whisper_full_with_state``: ``result_len > 32 &&
  entropy < entropy_thold``).

Every attempt is streamed live as it decodes (SegmentEvent, StepEvents, BeamEvents) and
ends with an :class:`~core.events.AttemptEvent` giving its temperature, compression ratio,
average log-probability, no-speech probability, entropy and verdict. An attempt that is
not kept (``AttemptEvent.kept_in_transcript`` False) takes its StepEvents back: a consumer
drops that window's steps from ``AttemptEvent.step_offset`` on (the next attempt is
numbered from the same step). :func:`transcript_events` does that for a finished list.

The whole clip's log-mel, the windows' encoder outputs and the keys/values kept for the
last windows are in ``core/tasks/longform_windows.py``; the measures of an attempt and the
fallback verdict on them in ``core/tasks/longform_verdicts.py``.

Where openai/whisper and transformers differ, this follows transformers (the test checks
token ids against it): the log-mel spectrogram is computed once for the whole audio and
cut into windows (a last window shorter than 30 s is zero-padded in the mel domain), and
the previous-text prompt keeps the segments' tokens (openai blanks segments without text).
Like openai it resets the previous-text prompt after an attempt above temperature 0.5, and
it computes the average log-probability on Whisper's rule-filtered distribution at
temperature 1 (``StepEvent.raw_prob``; transformers rescales by the temperature, which is
the same distribution when temperature is the only warper). Not done: openai's
``best_of`` candidates at temperature > 0, ``clip_timestamps``,
``hallucination_silence_threshold`` and the seek correction by word timestamps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Sequence

import numpy as np

from core.catalog import LANGUAGE_PROBS_KEPT, SAMPLE_RATE
from core.events import AttemptEvent, BeamEvent, Finished, Placement, RunStats, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.plan import RunTotals
from core.tasks.longform_verdicts import fallback_options, judge, loudest_db, no_speech_prob
from core.tasks.longform_windows import (
    INPUT_STRIDE,
    MEL_PER_S,
    N_FRAMES,
    LogMel,
    WindowPlan,
    audio_key,
    encode_audio,
    encode_window,
    hold_window_kv,
    plan_of_run,
    window_samples,
)

#: 0.02 s per timestamp tick
TIME_PRECISION = 0.02

__all__ = ["LongFormOptions", "WindowPlan", "encode_audio", "plan_of_run", "window_samples", "split_window", "transcribe",
           "transcript_events", "result_dict"]


@dataclass(frozen=True)
class LongFormOptions:
    """How :func:`transcribe` moves through long audio (openai/whisper ``transcribe()``'s
    arguments; None switches a check off).

    Attributes:
        temperatures: the fallback ladder; the first is tried first. 0.0 uses the
            options' own strategy (greedy or beam search); > 0 samples at that temperature.
        compression_ratio_threshold: redo a window whose text compresses better than
            this (gzip ratio; > 2.4 is a repetition loop).
        logprob_threshold: redo a window whose average log-probability is below this.
        no_speech_threshold: skip a window whose no-speech probability is above this
            while its average log-probability is below ``logprob_threshold``.
        entropy_threshold: redo a window of more than 32 tokens whose last 32 tokens'
            entropy (nats, over their counts) is below this (whisper.cpp ``entropy_thold``).
        condition_on_previous_text: prompt each window with the previous windows' tokens.
        initial_prompt: text given as the previous text of the first window ("" = none).
        sample_len: most tokens generated per window (openai: ``n_ctx // 2`` = 224).
        silence_db: also skip a window whose no-speech probability is above
            ``no_speech_threshold`` when its loudest 20 ms frame is below this level (dBFS),
            whatever its log-probability: Whisper tends to write "you" or "Thank you." over
            digital silence with an average log-probability near -0.7, which openai's rule
            alone keeps. Ours, in the manner of stable-ts's loudness-based silence
            suppression; None switches it off (then the rule is openai's exactly).
    """

    temperatures: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    compression_ratio_threshold: float | None = 2.4
    logprob_threshold: float | None = -1.0
    no_speech_threshold: float | None = 0.6
    entropy_threshold: float | None = 2.4
    condition_on_previous_text: bool = True
    initial_prompt: str = ""
    sample_len: int = 224
    silence_db: float | None = -50.0

    def validate(self) -> "LongFormOptions":
        """Return self, or raise ValueError naming the field that is out of range."""
        if not self.temperatures:
            raise ValueError("temperatures must hold at least one value, e.g. 0.0")
        if any(not math.isfinite(t) or t < 0 for t in self.temperatures):
            raise ValueError(f"temperatures must be finite and >= 0, got {self.temperatures}")
        if self.compression_ratio_threshold is not None and self.compression_ratio_threshold <= 0:
            raise ValueError(f"compression_ratio_threshold must be > 0, got {self.compression_ratio_threshold}")
        if self.no_speech_threshold is not None and not 0 <= self.no_speech_threshold <= 1:
            raise ValueError(f"no_speech_threshold must be in [0, 1], got {self.no_speech_threshold}")
        if self.entropy_threshold is not None and self.entropy_threshold < 0:
            raise ValueError(f"entropy_threshold must be >= 0, got {self.entropy_threshold}")
        if self.silence_db is not None and not -200 <= self.silence_db <= 0:
            raise ValueError(f"silence_db must be in -200..0 dBFS, got {self.silence_db}")
        if not 1 <= self.sample_len <= 440:
            raise ValueError(f"sample_len must be in 1..440 tokens, got {self.sample_len}")
        return self


def split_window(tokens: Sequence[int], timestamp_begin: int, seek_frames: int, time_offset: float):
    """Segments and seek advance of one window's generated tokens (EOS not included).

    openai/whisper ``transcribe()`` / transformers ``_retrieve_segment``: the tokens are cut
    after each pair of consecutive timestamps. When the window ends in a pair (not a single
    timestamp), the unfinished part after the last pair is dropped and the next window
    starts at that pair's time; otherwise it starts ``seek_frames`` later.

    Args:
        tokens: generated token ids; ids >= ``timestamp_begin`` are timestamps (0.02 s ticks).
        seek_frames: mel frames (10 ms) the window covers (<= 3000).
        time_offset: the window's start in seconds.

    Returns:
        (segments, advance, kept): segments as dicts ``{"start", "end", "tokens"}`` (seconds,
        the segment's ids, timestamps included), ``advance`` in mel frames, and ``kept`` =
        how many of ``tokens`` the segments hold (the rest is the dropped tail).
    """
    tokens = list(tokens)
    is_ts = [t >= timestamp_begin for t in tokens]
    single_ending = is_ts[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(tokens) - 1) if is_ts[i] and is_ts[i + 1]]
    if cuts:
        if single_ending:
            cuts.append(len(tokens))
        segments, last = [], 0
        for cut in cuts:
            part = tokens[last:cut]
            segments.append({"start": time_offset + (part[0] - timestamp_begin) * TIME_PRECISION,
                             "end": time_offset + (part[-1] - timestamp_begin) * TIME_PRECISION, "tokens": part})
            last = cut
        if single_ending:
            return segments, seek_frames, len(tokens)
        return segments, (tokens[last - 1] - timestamp_begin) * INPUT_STRIDE, last
    end = seek_frames / MEL_PER_S
    stamps = [t for t in tokens if t >= timestamp_begin]
    if stamps and stamps[-1] != timestamp_begin:
        end = (stamps[-1] - timestamp_begin) * TIME_PRECISION
    return [{"start": time_offset, "end": time_offset + end, "tokens": tokens}], seek_frames, len(tokens)


def _companions(model, options: DecodingOptions, prompt, mel, key, seek: int, n_frames: int, language: str,
                task: str) -> dict:
    """``Engine.run``'s ``draft=`` / ``amateur=`` for one attempt at one window when ``options``
    name a second model (a model draft, a contrastive-decoding amateur): ``SpeechModel.companions``
    with that model's encoder output of the same window (cached); {} otherwise (no second model
    is loaded then). A fresh companion per attempt: each attempt decodes the window anew."""
    from core.tasks.companions import companion_names

    if not any(companion_names(options)):
        return {}
    return model.companions(options, prompt, lambda other: encode_window(other, mel, key, seek, n_frames)[0],
                            language=language, task=task, timestamps=True)


def transcribe(
    model,
    audio: np.ndarray,
    options: DecodingOptions,
    longform: LongFormOptions = LongFormOptions(),
    *,
    language: str = "auto",
    task: str = "transcribe",
    cancel: Callable[[], bool] | None = None,
    candidate_languages: Sequence[str] | None = None,
    prefix_ids: Sequence[int] = (),
) -> Iterator:
    """Decode audio of any length as openai/whisper ``transcribe()`` (module docstring).

    Args:
        model: a loaded ``core.tasks.speech.SpeechModel``.
        audio: float32 (n_samples,), 16 kHz mono in [-1, 1].
        options: the decoding options of the temperature-0 attempt (greedy or beam
            search); attempts at temperature > 0 sample with ``strategy="sample"``. Their
            ``max_new_tokens`` is replaced by ``longform.sample_len`` (per window).
        longform: thresholds, fallback temperatures, conditioning, initial prompt.
        language: "auto" (detected once, on the first window, as openai) or a code.
        task: "transcribe" or "translate".
        cancel: polled between steps and windows.
        candidate_languages: detect the language among these only (``SpeechModel.candidates``).
        prefix_ids: token ids forced at the start of the first window's text (openai's
            ``prefix``; ``Engine.run``'s ``forced_ids``), on its every attempt.

    Yields:
        per window a SegmentEvent (``source_offset`` = the window's start in encoder frames,
        ``kind="window"``), then per attempt its StepEvents / BeamEvents and an
        AttemptEvent; one Finished at the end (the transcript's text and token ids).

    Raises:
        ValueError: bad audio, options, language or task.
    """
    from core.inputs.types import check_audio as _check_audio

    longform = longform.validate()
    # a window may hold up to sample_len tokens, as openai's sample_len (the options' max_new_tokens is
    # the GUI's per-run slider, often lower: a dense 30 s window needs ~150 tokens with timestamps)
    options = replace(options, max_new_tokens=longform.sample_len).validate()
    model.check_language_task(language, task, candidate_languages)
    candidates = model.candidates(candidate_languages)
    audio = _check_audio(audio)
    lw = model._loaded
    timestamp_begin = lw.special.notimestamps + 1
    mel = LogMel(model, audio)
    total_frames = int(mel.shape[-1])
    key = audio_key(audio)
    stats = RunStats(load_s=model.load_s, audio_s=len(audio) / SAMPLE_RATE, encoder_cached=True)
    totals = RunTotals(stats)
    history: list[int] = model.prefix_ids(longform.initial_prompt) if longform.initial_prompt else []
    reset_since = 0
    lang = None if (model.multilingual and language == "auto") else (language if model.multilingual else "en")
    texts: list[str] = []
    seek, window, begun = 0, 0, time.perf_counter()
    plans: list[WindowPlan] = []
    model._longform_plans = {key: plans}  # the last long-form run (fork / what-if go back to it)
    while seek < total_frames:
        if cancel is not None and cancel():
            totals.reason = "cancelled"
            break
        n_frames = min(N_FRAMES, total_frames - seek)
        t0 = time.perf_counter()
        encoded, hit = encode_window(model, mel, key, seek, n_frames)
        hold_window_kv(model, encoded)  # the K/V of windows before the last KV_WINDOWS_KEPT go
        probs = model.sot.distribution(encoded, None, candidates) if window == 0 else {}
        if lang is None:
            lang = next(iter(probs))
        model.last_language = lang
        previous = history[reset_since:] if longform.condition_on_previous_text else []
        prompt = model.prompt(lang, task, timestamps=True, previous=previous)
        prompt = replace(prompt, max_new_tokens=min(longform.sample_len, prompt.max_new_tokens or longform.sample_len))
        no_speech = no_speech_prob(model, encoded, prompt.prompt_ids)
        level = loudest_db(audio[seek * SAMPLE_RATE // MEL_PER_S: (seek + n_frames) * SAMPLE_RATE // MEL_PER_S])
        stats.encode_s += time.perf_counter() - t0
        stats.encoder_cached = stats.encoder_cached and hit
        start_s, end_s = seek / MEL_PER_S, (seek + n_frames) / MEL_PER_S
        warning = ""
        if no_speech is not None and longform.no_speech_threshold is not None \
                and no_speech > longform.no_speech_threshold:
            warning = (f"{start_s:.2f}–{end_s:.2f} s: the model's no-speech probability is {no_speech:.2f}: this "
                       "window is skipped as silence when its text is unlikely (average log-probability below the "
                       "threshold) or its audio is quiet; otherwise the text decoded from it may be invented")
        announce = SegmentEvent(segment=window, label=f"{start_s:.2f}–{end_s:.2f} s · seek {seek}"
                           + (f" · language {lang}" if model.multilingual else "")
                           + (f" · no speech {no_speech:.0%}" if no_speech is not None else ""),
                           source_offset=seek // INPUT_STRIDE, source_len=encoded.source_len, kind="window",
                           no_speech_prob=no_speech, language_probs=tuple(list(probs.items())[:LANGUAGE_PROBS_KEPT]),
                           warning=warning)
        plans.append(WindowPlan(seek, n_frames, prompt, announce))
        yield announce
        attempt, step_offset, failed = None, totals.step, None
        for k, temperature in enumerate(longform.temperatures):
            run_options, draft = fallback_options(options, temperature, window, k, prompt, failed)
            second = _companions(model, run_options, prompt, mel, key, seek, n_frames, lang, task)
            if draft is not None:
                second["draft"] = draft  # the failed attempt's tokens draft (speculative fallback)
            steps: list[StepEvent] = []
            finished = None
            run_start = time.perf_counter() - begun
            for ev in model.engine.run(encoded, prompt, run_options, cancel=cancel,
                                       place=Placement(step_offset, window, seek // INPUT_STRIDE),
                                       forced_ids=prefix_ids if window == 0 else (),
                                       reuse_cache=not (window == 0 and prefix_ids), **second):
                if isinstance(ev, Finished):
                    finished = ev
                    continue
                if isinstance(ev, StepEvent):
                    steps.append(ev)
                yield ev
            tokens = list(finished.token_ids)
            failed = tokens + ([prompt.eos_token_id] if finished.reason == "eos" else [])
            attempt = judge(model, encoded, prompt, tokens, steps, finished, no_speech, level, longform)
            last = k == len(longform.temperatures) - 1
            keep = finished.cancelled or attempt["verdict"] == "accepted" or (last and attempt["verdict"] == "fallback")
            segments, advance, kept = split_window(tokens, timestamp_begin, n_frames, start_s)
            if not keep:
                segments, advance, kept = [], n_frames, 0
            segments = [{"start": s["start"], "end": s["end"], "tokens": tuple(s["tokens"]),
                         "text": model.backend.decode(s["tokens"]).strip()} for s in segments]
            yield AttemptEvent(
                segment=window, attempt=k, temperature=temperature, step_offset=step_offset, steps=tuple(steps),
                token_ids=tuple(tokens), text=model.backend.decode(tokens).strip(),
                compression_ratio=attempt["compression_ratio"], avg_logprob=attempt["avg_logprob"],
                no_speech_prob=no_speech, entropy=attempt["entropy"], verdict=attempt["verdict"],
                reasons=tuple(attempt["reasons"]), kept_in_transcript=keep, kept_tokens=kept,
                seek=seek, start=start_s, end=end_s, end_attention=attempt["end_attention"], loudest_db=level,
                segments=tuple(segments),
            )
            if keep or attempt["verdict"] == "silence":
                break
            stats.decode_s += finished.stats.decode_s  # a failed attempt's time counts too
        totals.add(replace(finished, token_ids=tokens[:kept]), run_start)
        if finished.cancelled:
            break
        totals.step = step_offset + (len(steps) if keep else 0)
        for s in segments:
            history.extend(s["tokens"])
            if s["text"]:
                texts.append(s["text"])
        if not longform.condition_on_previous_text or temperature > 0.5:
            reset_since = len(history)
        seek += advance
        window += 1
    yield totals.finished(" ".join(texts))


def transcript_events(events: Sequence) -> list:
    """The events of a finished :func:`transcribe` stream with every attempt that was not
    kept taken back (its StepEvents and BeamEvents dropped): what a plain decode would have
    streamed. AttemptEvents and SegmentEvents stay."""
    out, pending = [], []
    for ev in events:
        if isinstance(ev, (StepEvent, BeamEvent)):
            pending.append(ev)
        elif isinstance(ev, AttemptEvent):
            if ev.kept_in_transcript:
                out.extend(pending)
            pending = []
            out.append(ev)
        else:
            out.extend(pending)
            pending = []
            out.append(ev)
    return out + pending


def result_dict(events: Sequence, language: str | None) -> dict:
    """openai/whisper ``transcribe()``'s result from a finished stream: ``{"text",
    "language", "segments": [{"id", "seek", "start", "end", "text", "tokens", "temperature",
    "avg_logprob", "compression_ratio", "no_speech_prob"}]}`` (seconds; segments without
    text left out, as openai blanks them)."""
    segments = []
    for ev in events:
        if isinstance(ev, AttemptEvent) and ev.kept_in_transcript:
            for s in ev.segments:
                if not s["text"] or s["start"] == s["end"]:
                    continue
                segments.append({"id": len(segments), "seek": ev.seek, "start": round(s["start"], 3),
                                 "end": round(s["end"], 3), "text": " " + s["text"], "tokens": list(s["tokens"]),
                                 "temperature": ev.temperature, "avg_logprob": ev.avg_logprob,
                                 "compression_ratio": ev.compression_ratio, "no_speech_prob": ev.no_speech_prob})
    text = next((ev.text for ev in events if isinstance(ev, Finished)), "")
    return {"text": text, "language": language, "segments": segments}
