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

Memory: the decoder's cross-attention keys/values of a window (base: 37 MB) and the
engine's KV cache kept for a fork are held for the last :data:`KV_WINDOWS_KEPT` windows
only (:func:`hold_window_kv`); older windows get them back on demand.

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

import hashlib
import math
import time
import zlib
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Sequence

import numpy as np

from core.catalog import LANGUAGE_PROBS_KEPT, SAMPLE_RATE
from core.events import AttemptEvent, BeamEvent, Finished, RunStats, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.base import RunTotals

#: mel frames per second (10 ms hop) and per 30 s window; encoder frames are 2 mel frames
MEL_PER_S = 100
N_FRAMES = 3000
INPUT_STRIDE = 2
#: 0.02 s per timestamp tick
TIME_PRECISION = 0.02
#: windows of a long-form run whose decoder cross-attention keys/values and kept KV cache stay
#: in memory (:func:`hold_window_kv`): the one being decoded and the one before it
KV_WINDOWS_KEPT = 2

__all__ = ["KV_WINDOWS_KEPT", "LongFormOptions", "WindowPlan", "drop_window_kv", "hold_window_kv", "attempt_warning", "silence_note", "encode_audio", "plan_of_run", "window_samples", "compression_ratio", "loudest_db", "split_window", "token_entropy", "transcribe",
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


@dataclass(frozen=True)
class WindowPlan:
    """Where one window of a long-form run sat, so the run can be forked, re-scored
    (what-if) or aligned later on the same encoder output and prompt.

    Attributes:
        seek: its first mel frame (10 ms); n_frames: the mel frames it covers (<= 3000).
        prompt: its DecoderPrompt (previous text included).
        event: its SegmentEvent.
    """

    seek: int
    n_frames: int
    prompt: object
    event: SegmentEvent


def window_samples(plan: WindowPlan) -> tuple[int, int]:
    """(first, end) sample of the audio a window covers (16 kHz)."""
    per = SAMPLE_RATE // MEL_PER_S
    return plan.seek * per, (plan.seek + plan.n_frames) * per


def _audio_key(audio: np.ndarray) -> str:
    """SHA-1 of the samples' bytes (hex), read in place: ``tobytes()`` copied the whole clip
    (230 MB for an hour of float32) at every run, fork and what-if."""
    return hashlib.sha1(memoryview(np.ascontiguousarray(audio)).cast("B")).hexdigest()


def drop_window_kv(model, encoded) -> int:
    """Free what decoding kept for one window beside its encoder output: the decoder's
    cross-attention keys and values (``EncoderOutput.extras["whisper_cross_kv"]``, a function
    of the encoder output alone; whisper-base: 6 layers × K and V × 1500 frames × 512, 37 MB
    in float32) and the engine's KV cache of the last run on it (``Engine.kept``, which
    holds them too, plus ~11 MB of self-attention). Both are rebuilt on demand: the backend
    computes the keys and values again on the next decode of this window (a few tens of
    ms), and a fork on it feeds its prompt again instead of reusing the cache.

    Returns:
        the bytes of keys and values released (0 if there were none).
    """
    kv = encoded.extras.pop("whisper_cross_kv", None)
    kept = model.engine.kept.get(id(encoded))
    if kept is not None and kept.encoded is encoded:
        del model.engine.kept[id(encoded)]
    if kv is None:
        return 0
    return sum(t.numel() * t.element_size() for part in kv for t in part)


def hold_window_kv(model, encoded, keep: int = KV_WINDOWS_KEPT) -> None:
    """Mark ``encoded`` (a window's encoder output) as the newest one whose cross-attention
    keys/values and kept KV cache may stay in memory; the windows marked before it beyond
    the last ``keep`` lose theirs (:func:`drop_window_kv`). A long-form run on an hour of
    audio otherwise keeps them for every window still in the encoder cache or the engine's
    kept caches (measured with base: ~12 windows, ~480 MB)."""
    held = [e for e in getattr(model, "_longform_kv_held", []) if e is not encoded] + [encoded]
    for old in held[:-keep] if keep > 0 else held:
        drop_window_kv(model, old)
    model._longform_kv_held = held[-keep:] if keep > 0 else []


def encode_audio(model, audio: np.ndarray, plan: WindowPlan):
    """The EncoderOutput of ``plan``'s window of ``audio`` (another version of the run's
    audio, e.g. with a span silenced): the whole clip's log-mel, cut as the run cut it."""
    key = _audio_key(audio)
    encoded = _encode_window(model, _LogMel(model, audio), key, plan.seek, plan.n_frames)[0]
    hold_window_kv(model, encoded)
    return encoded


def plan_of_run(model, audio: np.ndarray, options: DecodingOptions, language: str, task: str,
                candidate_languages=None):
    """(windows, prepare, stats) of the last long-form run on ``audio`` (as
    ``SpeechModel._plan`` gives for fixed windows): its :class:`WindowPlan` s and a
    ``prepare`` giving each window's cached encoder output, prompt and SegmentEvent, so
    ``fork_segment`` and ``core.tasks.whatif`` work on a long-form run.

    Raises:
        ValueError: this audio has not been transcribed long-form by this model.
    """
    from core.tasks.base import Prepared
    from core.inputs.types import check_audio as _check_audio

    options.validate()
    model.check_language_task(language, task, candidate_languages)
    audio = _check_audio(audio)
    key = _audio_key(audio)
    plans = getattr(model, "_longform_plans", {}).get(key)
    if not plans:
        raise ValueError("this audio has no long-form run to go back to; transcribe it long-form first")
    mel = _LogMel(model, audio)  # computed only for a window not in the encoder cache

    def prepare(i: int, plan: WindowPlan) -> Prepared:
        encoded, hit = _encode_window(model, mel, key, plan.seek, plan.n_frames)
        hold_window_kv(model, encoded)  # a fork on an old window: its K/V come back, the oldest held go
        return Prepared(encoded, plan.prompt, plan.event, hit)

    return list(plans), prepare, RunStats(load_s=model.load_s, audio_s=len(audio) / SAMPLE_RATE, encoder_cached=True)


def compression_ratio(text: str) -> float:
    """gzip compression ratio of ``text`` (UTF-8 bytes / zlib-compressed bytes), as
    openai/whisper ``utils.compression_ratio``; 0.0 for empty text."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def token_entropy(tokens: Sequence[int], last: int = 32) -> float:
    """Entropy in nats of the token counts of the last ``last`` tokens (whisper.cpp
    ``whisper_sequence_score``): low when a few tokens repeat; 0.0 for no tokens."""
    window = list(tokens)[-last:]
    if not window:
        return 0.0
    n = len(window)
    return float(-sum(c / n * math.log(c / n) for c in Counter(window).values()))


def loudest_db(samples: np.ndarray, frame: int = 320) -> float:
    """Level in dBFS of the loudest ``frame``-sample frame (RMS; 320 samples = 20 ms at
    16 kHz) of float32 audio in [-1, 1]; -inf for all-zero or empty audio."""
    if samples.size == 0:
        return float("-inf")
    n = max(1, samples.size // frame)
    frames = samples[: n * frame].reshape(n, -1) if samples.size >= frame else samples.reshape(1, -1)
    rms = float(np.sqrt(np.max(np.mean(np.square(frames, dtype=np.float64), axis=1))))
    return 20 * math.log10(rms) if rms > 0 else float("-inf")


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
    mel = _LogMel(model, audio)
    total_frames = int(mel.shape[-1])
    audio_key = _audio_key(audio)
    stats = RunStats(load_s=model.load_s, audio_s=len(audio) / SAMPLE_RATE, encoder_cached=True)
    totals = RunTotals(stats)
    history: list[int] = model.prefix_ids(longform.initial_prompt) if longform.initial_prompt else []
    reset_since = 0
    lang = None if (model.multilingual and language == "auto") else (language if model.multilingual else "en")
    texts: list[str] = []
    seek, window, begun = 0, 0, time.perf_counter()
    plans: list[WindowPlan] = []
    model._longform_plans = {audio_key: plans}  # the last long-form run (fork / what-if go back to it)
    while seek < total_frames:
        if cancel is not None and cancel():
            totals.reason = "cancelled"
            break
        n_frames = min(N_FRAMES, total_frames - seek)
        t0 = time.perf_counter()
        encoded, hit = _encode_window(model, mel, audio_key, seek, n_frames)
        hold_window_kv(model, encoded)  # the K/V of windows before the last KV_WINDOWS_KEPT go
        probs = model._language_distribution(encoded, None, candidates) if window == 0 else {}
        if lang is None:
            lang = next(iter(probs))
        model.last_language = lang
        previous = history[reset_since:] if longform.condition_on_previous_text else []
        prompt = model.prompt(lang, task, timestamps=True, previous=previous)
        prompt = replace(prompt, max_new_tokens=min(longform.sample_len, prompt.max_new_tokens or longform.sample_len))
        no_speech = _no_speech_prob(model, encoded, prompt.prompt_ids)
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
        attempt, step_offset = None, totals.step
        for k, temperature in enumerate(longform.temperatures):
            run_options = options if temperature == 0 else replace(
                options, strategy="sample", temperature=temperature,
                seed=None if options.seed is None else options.seed + 1000 * window + k)
            steps: list[StepEvent] = []
            finished = None
            run_start = time.perf_counter() - begun
            for ev in model.engine.run(encoded, prompt, run_options, cancel=cancel, step_offset=step_offset,
                                       segment=window, source_offset=seek // INPUT_STRIDE,
                                       forced_ids=prefix_ids if window == 0 else (),
                                       reuse_cache=not (window == 0 and prefix_ids)):
                if isinstance(ev, Finished):
                    finished = ev
                    continue
                if isinstance(ev, StepEvent):
                    steps.append(ev)
                yield ev
            tokens = list(finished.token_ids)
            attempt = _judge(model, encoded, prompt, tokens, steps, finished, no_speech, level, longform)
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


class _LogMel:
    """The log-mel spectrogram of the whole audio as transformers' feature extractor computes
    it for long-form (``truncation=False, padding="longest"``: normalised over the whole
    clip: values below the clip's maximum - 8 are raised to it), computed a window at a time.

    The whole spectrogram of an hour is 80 × 360,000 float32 (115 MB), and computing it in
    one call (``torch.stft`` of the whole clip) took a transient ~2 GB (measured: +705 MB
    for 20 minutes). Here the clip's maximum is found in chunks of :data:`MEL_CHUNK` frames
    (the first time a window is asked for), and each window's frames are computed when
    asked: the same frames (the STFT's reflect padding at the clip's two ends, a frame's
    samples the same as in one call), so the values equal the one-call ones up to float
    rounding of the filter-bank product. Audio of 30 s or less is short-form: padded to
    30 s of samples and computed in one call, as before.

    Attributes:
        shape: (1, n_mels, n_frames) of the whole spectrogram (n_frames = samples // hop).
    """

    def __init__(self, model, audio: np.ndarray) -> None:
        self._fe = model._loaded.feature_extractor
        self._audio = np.asarray(audio, dtype=np.float32)
        self._full = None
        self._max: float | None = None
        n_mels = int(self._fe.feature_size)
        if len(audio) <= N_FRAMES * SAMPLE_RATE // MEL_PER_S or getattr(self._fe, "dither", 0.0):
            self._full = _log_mel(model, audio)  # short-form (or random dither: one call, as transformers)
            self.shape = tuple(self._full.shape)
        else:
            self.shape = (1, n_mels, len(audio) // int(self._fe.hop_length))

    def _log_spec(self, first: int, end: int):
        """log10 of the mel power of frames [first, end) before the clip-wide clamp:
        float32 (n_mels, end - first)."""
        import torch

        fe, w = self._fe, self._audio
        n_fft, hop, n = int(fe.n_fft), int(fe.hop_length), len(self._audio)
        lo, hi = first * hop - n_fft // 2, (end - 1) * hop + n_fft // 2  # samples; torch.stft's centre padding
        if lo >= 0 and hi <= n:
            seg = w[lo:hi]
        else:  # a frame at the clip's start or end: reflect padding (no edge repeat), as torch.stft(center=True)
            idx = np.arange(lo, hi)
            idx = np.where(idx < 0, -idx, idx)
            idx = np.where(idx >= n, 2 * (n - 1) - idx, idx)
            seg = w[idx]
        stft = torch.stft(torch.from_numpy(np.ascontiguousarray(seg)), n_fft, hop,
                          window=torch.hann_window(n_fft), center=False, return_complex=True)
        magnitudes = (stft.abs() ** 2).contiguous()
        filters = torch.from_numpy(fe.mel_filters).to(torch.float32)
        return torch.clamp(filters.T @ magnitudes, min=1e-10).log10()

    def window(self, seek: int, n_frames: int):
        """float32 tensor (1, n_mels, <= n_frames): frames [seek, seek + n_frames) (fewer at
        the clip's end), normalised as the whole clip is."""
        if self._full is not None:
            return self._full[..., seek: seek + n_frames]
        import torch

        total = self.shape[-1]
        if self._max is None:
            self._max = max(float(self._log_spec(a, min(total, a + MEL_CHUNK)).max())
                            for a in range(0, total, MEL_CHUNK))
        end = min(total, seek + n_frames)
        spec = torch.maximum(self._log_spec(seek, end), torch.tensor(self._max - 8.0))
        return ((spec + 4.0) / 4.0)[None]


#: frames per chunk while finding a long clip's log-mel maximum (5 minutes: ~50 MB of STFT)
MEL_CHUNK = 30_000


def _log_mel(model, audio: np.ndarray):
    """float32 tensor (1, n_mels, n_frames): the log-mel spectrogram of the whole audio, as
    transformers' feature extractor computes it for long-form (``truncation=False,
    padding="longest"``: normalised over the whole clip); audio of 30 s or less is padded to
    30 s of samples first (short-form). In one call: :class:`_LogMel` gives it a window at a
    time."""
    fe = model._loaded.feature_extractor
    if len(audio) <= N_FRAMES * SAMPLE_RATE // MEL_PER_S:
        return fe(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    out = fe(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt", truncation=False, padding="longest",
             return_attention_mask=True)
    return out.input_features[..., : int(out.attention_mask.sum())]


def _encode_window(model, mel, audio_key: str, seek: int, n_frames: int):
    """(EncoderOutput, cache hit) of the 30 s window of ``mel`` starting at mel frame ``seek``
    (zero-padded to 3000 frames, as transformers ``_get_input_segment``); cached."""
    import torch

    key = (model.name, audio_key, "mel", seek, n_frames)

    def run():
        model.encode_count += 1
        window = mel.window(seek, n_frames)
        if window.shape[-1] < N_FRAMES:
            window = torch.nn.functional.pad(window, (0, N_FRAMES - window.shape[-1]))
        return model.backend.encode({"input_features": window,
                                     "source_len": torch.tensor(math.ceil(n_frames / INPUT_STRIDE))})

    encoded, hit = model._cache.get_or_encode(key, run)
    return encoded, hit


def _no_speech_prob(model, encoded, prompt_ids: Sequence[int]) -> float | None:
    """The no-speech token's probability at ``<|startoftranscript|>`` in the full prompt
    (previous text included), as openai ``DecodingTask`` (``probs_at_sot``) and transformers
    ``WhisperNoSpeechDetection``: softmax over the whole vocabulary, no rule applied."""
    import torch

    sp = model._loaded.special
    if sp.no_speech is None:
        return None
    upto = list(prompt_ids).index(sp.sot) + 1
    out = model.backend.step(torch.tensor([list(prompt_ids)[:upto]]), model.backend.init_cache(encoded, 1), False)
    return float(torch.softmax(out.logits[0].float(), dim=-1)[sp.no_speech])


def _judge(model, encoded, prompt, tokens, steps, finished, no_speech, level, lf) -> dict:
    """The fallback decision of one attempt (openai ``decode_with_fallback``).

    The average log-probability is openai's ``sum_logprobs / (len(tokens) + 1)``: the
    tokens' log-probabilities under the rule-filtered distribution at temperature 1 plus
    that of end-of-text, got by feeding prompt + tokens once more (that call's
    cross-attention is the end-of-text row word timing needs)."""
    import torch

    from core.processors import ChainContext, build_processors, split_hard_rules

    eot = model._loaded.special.eot
    ids = list(prompt.prompt_ids) + list(tokens)
    out = model.backend.step(torch.tensor([ids]), model.backend.init_cache(encoded, 1), True)
    end_attention = out.cross_attention[0, :, :, : encoded.source_len].float().numpy().copy()
    sum_logprob = float(sum(math.log(max(s.raw_prob, 1e-45)) for s in steps))
    reasons, verdict = [], "accepted"
    if finished.reason == "eos":
        rules, _ = split_hard_rules(build_processors(DecodingOptions(), prompt, len(prompt.prompt_ids),
                                                     ChainContext(tokenize=model.backend.tokenize)))
        scores = rules(torch.tensor([ids]), out.logits.float())
        sum_logprob += float(torch.log_softmax(scores, dim=-1)[0, eot])
    avg_logprob = sum_logprob / (len(tokens) + 1)
    text = model.backend.decode([t for t in tokens if t < eot])
    ratio = compression_ratio(text)
    entropy = token_entropy(tokens)
    if lf.compression_ratio_threshold is not None and ratio > lf.compression_ratio_threshold:
        reasons.append(f"compression ratio {ratio:.2f} > {lf.compression_ratio_threshold:g} (repetition)")
    if lf.logprob_threshold is not None and avg_logprob < lf.logprob_threshold:
        reasons.append(f"average log-probability {avg_logprob:.2f} < {lf.logprob_threshold:g}")
    if lf.entropy_threshold is not None and len(tokens) > 32 and entropy < lf.entropy_threshold:
        reasons.append(f"token entropy {entropy:.2f} < {lf.entropy_threshold:g} nats (repetition)")
    if reasons:
        verdict = "fallback"
    if lf.no_speech_threshold is not None and no_speech is not None and no_speech > lf.no_speech_threshold:
        said = f"no-speech probability {no_speech:.2f} > {lf.no_speech_threshold:g}"
        if lf.logprob_threshold is not None and avg_logprob < lf.logprob_threshold:
            verdict, reasons = "silence", [f"{said} and average log-probability {avg_logprob:.2f} < "
                                           f"{lf.logprob_threshold:g}"]
        elif lf.silence_db is not None and level < lf.silence_db:
            verdict, reasons = "silence", [f"{said} and the loudest 20 ms is {level:.0f} dBFS < {lf.silence_db:g}"]
    return {"avg_logprob": avg_logprob, "compression_ratio": ratio, "entropy": entropy, "verdict": verdict,
            "reasons": reasons, "end_attention": end_attention}


def _db(level: float) -> str:
    return "−inf dBFS" if level == float("-inf") else f"{level:.0f} dBFS".replace("-", "−")


def _range(values: Sequence[float], fmt) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def silence_note(skipped: Sequence[tuple[float | None, float]]) -> str:
    """What a run skipped as silence, for a status line: "1 window skipped as silence (no-speech
    0.95, −inf dBFS)", "3 windows skipped as silence (no-speech 0.81–0.95, −62–−inf dBFS)";
    "" for none.

    Args:
        skipped: (no-speech probability or None, loudest 20 ms in dBFS) per skipped window
            (``AttemptEvent.no_speech_prob`` / ``loudest_db`` of the attempts whose verdict is
            "silence", or of a fixed run's skipped windows).
    """
    if not skipped:
        return ""
    n = len(skipped)
    probs = [p for p, _ in skipped if p is not None]
    what = []
    if probs:
        what.append("no-speech " + _range(probs, lambda p: f"{p:.2f}"))
    levels = [lv for _, lv in skipped]
    what.append(_range(levels, lambda lv: _db(lv).replace(" dBFS", "")) + " dBFS")
    return f"{n} window{'s' if n != 1 else ''} skipped as silence ({', '.join(what)})"


def attempt_warning(ev: AttemptEvent, no_speech_threshold: float | None = 0.6) -> str:
    """A warning for a kept attempt whose window the model thinks holds no speech (no-speech
    probability above ``no_speech_threshold``) but that openai's rule kept (its average
    log-probability was not low enough, nor its audio quiet): its text may be invented (40 s
    of tones: "." at no-speech 0.94). "" otherwise."""
    if (not ev.kept_in_transcript or ev.verdict == "silence" or ev.no_speech_prob is None
            or no_speech_threshold is None or ev.no_speech_prob <= no_speech_threshold):
        return ""
    return (f"{ev.start:.2f}–{ev.end:.2f} s: kept {ev.text!r} although the no-speech probability is "
            f"{ev.no_speech_prob:.2f} > {no_speech_threshold:g} (average log-probability {ev.avg_logprob:.2f} is not "
            "below the threshold and the audio is not quiet): the text may be invented")


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
