"""Speech-to-text with Whisper: audio in, a live stream of decoding events out.

Pre-processing (log-mel features), the Whisper prompt (start-of-transcript,
language, task, no-timestamps) and the run's plan (30-second windows) live here; beside
it ``core.tasks.speech_language`` (language detection, no-speech probability),
``core.tasks.speech_windows`` (window ranges, skipping silence, window warnings) and
``core.tasks.speech_words`` (end-of-text attention, refined word times). The runs
(decode, lanes, fork, what-ifs) are ``core.tasks.base.SegmentedTask``'s; the decoding
itself is ``core.engine.Engine`` on a ``core.backends.hf.HFSeq2SeqBackend``.

Whisper's encoder turns 30 s of 16 kHz audio (480 000 samples) into 1500 frames
of 20 ms; those frames are the columns of the cross-attention the events carry.
"""

from __future__ import annotations

import hashlib
import math
from typing import Callable, Iterator, Sequence

import numpy as np

from core.backends.base import DecoderPrompt
from core.catalog import FRAME_S, MIN_AUDIO_S, NO_SPEECH_WARN, SAMPLE_RATE
from core.catalog import WHISPER_BUNDLED as BUNDLED
from core.catalog import WHISPER_DEFAULT as DEFAULT_MODEL
from core.catalog import WHISPER_TASKS as TASKS
from core.events import RunStats
from core.inputs.pcm16 import Pcm16Audio
from core.inputs.types import SpeechInput, check_audio
from core.options import DecodingOptions
from core.tasks.base import OtherInput, Plan, Prepared, SegmentedTask
from core.tasks.speech_language import StartOfTranscript
from core.tasks.speech_windows import (  # noqa: F401 - LONGFORM_HINT, SKIPPED, window_warnings are used from here
    LONGFORM_HINT,
    SAMPLES_PER_FRAME,
    SKIPPED,
    WINDOW_FRAMES,
    WINDOW_SAMPLES,
    join_windows,
    skip_silence,
    window_event,
    window_ranges,
    window_warnings,
)

__all__ = ["BUNDLED", "DEFAULT_MODEL", "FRAME_S", "LONGFORM_HINT", "NO_SPEECH_WARN", "SAMPLE_RATE", "SKIPPED",
           "SpeechModel", "TASKS", "window_warnings"]


class SpeechModel(SegmentedTask):
    """A loaded Whisper model ready to decode audio, with an encoder-output cache.

    Build with :meth:`load` (slow: seconds; call it off the GUI thread).

    Its runs (``decode``, ``decode_lanes``, ``fork``, ``what_if``, ``no_input``) are
    ``core.tasks.base.SegmentedTask``'s over :meth:`plan`; they take the audio (float32
    (n_samples,), 16 kHz mono) and the settings of ``core.inputs.types.SpeechInput``
    (``language``, ``task``, ``timestamps``, ``candidate_languages``; ``longform`` for a
    re-run). Segments are 30 s windows: a SegmentEvent per window (``source_offset`` in
    encoder frames), StepEvents whose cross-attention columns are the window's 20 ms
    frames. ``prefix_ids`` are forced after the first window's prompt only, as
    openai/whisper's ``prefix``. ``what_if``'s mask is ``span=(t0, t1)`` seconds of silence
    (:meth:`masked`); ``no_input`` forces the tokens through all-zero audio (:meth:`emptied`).

    Attributes:
        name: display name ("whisper-base", "whisper-tiny.en", or the id/dir given).
        multilingual: whether language choice and the translate task are available.
        languages: language codes the model knows ("en", "de", ...), in token order.
        load_s: seconds the load took.
        encode_count: how many times the encoder has run (re-decodes with other
            options reuse the cached encoder hidden states, so this stays put).
        last_language: the language used by the last decode (detected or given).
    """

    input_type = SpeechInput

    def __init__(self, loaded, cache_size: int = 8):
        from core.backends.hf import HFSeq2SeqBackend
        from core.engine import EncoderCache, Engine

        self._loaded = loaded
        self.name: str = loaded.name
        self.multilingual: bool = bool(loaded.multilingual)
        self.languages: list[str] = list(loaded.languages)
        self.load_s: float = float(loaded.load_s)
        #: the compute type: "float32" or "int8" (``load(..., dtype="int8")``)
        self.dtype: str = getattr(loaded, "dtype", "float32")
        self.backend = HFSeq2SeqBackend(loaded.model, loaded.tokenizer, loaded.name, dtype=self.dtype)
        self.engine = Engine(self.backend)
        self._cache = EncoderCache(max_items=cache_size)
        self.encode_count = 0
        self.last_language: str | None = None
        #: the <|startoftranscript|> step per window: language logits, no-speech probability
        self.sot = StartOfTranscript(loaded, self.backend, self.name)
        self._language_cache = self.sot.cache  # window key -> (language logits, no-speech probability)

    @classmethod
    def load(cls, name: str = DEFAULT_MODEL, progress: Callable[[str], None] | None = None,
             dtype: str = "float32") -> "SpeechModel":
        """Load a bundled model ("base", "tiny.en") or a transformers Whisper id/directory,
        in float32 or, with ``dtype="int8"``, with int8 dynamically quantised linear layers.

        Raises:
            RuntimeError / FileNotFoundError / ValueError: with a message saying what to
                install or which path to give (from ``core.backends.whisper_models``).
        """
        from core.backends.whisper_models import load_whisper

        return cls(load_whisper(name, progress=progress, dtype=dtype))

    # ---------------------------------------------------------------- helpers
    def _features(self, window: np.ndarray):
        """Log-mel features (1, n_mels, 3000) float32 of one window (<= 30 s)."""
        fe = self._loaded.feature_extractor
        window = np.asarray(window, dtype=np.float32)  # a Pcm16Audio window (a long clip kept as int16) read here
        return fe(window, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features

    def _encode(self, window: np.ndarray):
        """Encoder hidden states of one window, cached by the window's samples; its
        ``source_len`` is the encoder frames that cover the window's audio (Whisper pads
        every window to 30 s)."""
        key = (self.name, hashlib.sha1(np.ascontiguousarray(window).tobytes()).hexdigest())

        def run():
            import torch

            self.encode_count += 1
            frames = min(WINDOW_FRAMES, math.ceil(len(window) / SAMPLES_PER_FRAME))
            return self.backend.encode({"input_features": self._features(window), "source_len": torch.tensor(frames)})

        encoded, hit = self._cache.get_or_encode(key, run)
        return encoded, hit, key

    def detect_language(self, encoded, key=None, candidate_languages: Sequence[str] | None = None) -> tuple[str, float]:
        """Most probable language of an encoded window and its probability.

        One decoder step on <|startoftranscript|>; softmax restricted to the language
        tokens (as openai/whisper ``detect_language`` does), or to ``candidate_languages``.

        Raises:
            ValueError: for an English-only model (it has no language to detect); an
                unknown candidate code.
        """
        if not self.multilingual:
            raise ValueError(f"{self.name} is English-only; there is no language to detect")
        language, p, _ = self.sot.step(encoded, key, self.candidates(candidate_languages))
        return language, p

    def language_probs(self, audio: np.ndarray, *, window: int = 0,
                       candidate_languages: Sequence[str] | None = None) -> dict[str, float]:
        """The language distribution of one 30 s window of ``audio``: code -> probability,
        best first, summing to 1 over the model's languages or over ``candidate_languages``.

        As openai/whisper ``decoding.py`` ``detect_language``: one decoder step on
        <|startoftranscript|>, softmax over the logits of the language tokens only (a subset
        of them when candidates are given, as users of whisper/faster-whisper restrict it).
        The encoder output and the step are cached per window.

        Args:
            audio: float32 (n_samples,), 16 kHz mono.
            window: the window's index (window i covers i*30 s .. (i+1)*30 s).
            candidate_languages: codes ("en", "de", ...) or one comma-separated string;
                None/empty = all the model's languages.

        Returns:
            {} for an English-only model (it has no language tokens).

        Raises:
            ValueError: bad audio, a window past the audio's end, an unknown candidate code.
        """
        if not self.multilingual:
            return {}
        cands = self.candidates(candidate_languages)
        audio = check_audio(audio)
        n_windows = math.ceil(len(audio) / WINDOW_SAMPLES)
        if not 0 <= window < n_windows:
            raise ValueError(f"window {window} is outside the audio's {n_windows} window(s); give 0..{n_windows - 1}")
        encoded, _hit, key = self._encode(audio[window * WINDOW_SAMPLES : (window + 1) * WINDOW_SAMPLES])
        return self.sot.distribution(encoded, key, cands)

    def candidates(self, candidate_languages: Sequence[str] | str | None) -> tuple[str, ...] | None:
        """The checked candidate languages, or None for "all" (``StartOfTranscript.candidates``).

        Raises:
            ValueError: a code the model does not know (the message lists the valid ones).
        """
        return self.sot.candidates(candidate_languages)

    def no_speech_prob(self, encoded, key=None) -> float | None:
        """Probability of Whisper's no-speech token after <|startoftranscript|> (0..1), or
        None if the vocabulary has none.

        As openai/whisper ``decoding.py`` computes ``no_speech_probs``: the softmax over the
        whole vocabulary of the logits at the start-of-transcript position, no filters.
        ``transcribe()`` treats a window as silence when it is > 0.6 (and the average
        log-probability < -1).
        """
        return self.sot.logits(encoded, key)[1]

    def prompt(self, language: str, task: str, timestamps: bool = False, previous: Sequence[int] = ()) -> DecoderPrompt:
        """The forced decoder prompt and Whisper's hard rules for one window.

        With ``timestamps`` the prompt has no ``<|notimestamps|>`` and Whisper's timestamp
        rules (``core.processors.whisper.TimestampRules``) are a hard rule, with the
        model's ``generation_config.max_initial_timestamp_index`` (50 = 1.0 s).
        ``previous``: token ids of the text before this window (long-form conditioning,
        ``core.tasks.longform``): the prompt then starts ``<|startofprev|>`` + their last
        223 (``max_target_positions // 2 - 1``, as openai/whisper and transformers cut them).

        Raises:
            ValueError: ``previous`` given but the vocabulary has no ``<|startofprev|>``.
        """
        lw = self._loaded
        ids = tuple(lw.prompt_ids(language if self.multilingual else "en", task, timestamps=timestamps))
        if previous:
            if lw.special.sot_prev is None:
                raise ValueError(f"{self.name} has no <|startofprev|> token, so it cannot be given previous text")
            cut = lw.model.config.max_target_positions // 2 - 1
            ids = (lw.special.sot_prev, *list(previous)[-cut:], *ids)
        rules = None
        if timestamps:
            rules = (lw.special.notimestamps,
                     getattr(lw.model.generation_config, "max_initial_timestamp_index", None))
        return DecoderPrompt(
            prompt_ids=ids,
            eos_token_id=lw.special.eot,
            suppress_tokens=tuple(lw.suppress_tokens),
            begin_suppress_tokens=tuple(lw.begin_suppress_tokens),
            max_new_tokens=lw.model.config.max_target_positions - len(ids),
            timestamp_rules=rules,
        )

    def check_language_task(self, language: str, task: str, candidate_languages: Sequence[str] | None = None) -> None:
        """Raise ValueError for a language/task the model cannot do, or an unknown candidate
        language (``StartOfTranscript.check``)."""
        self.sot.check(language, task, candidate_languages)

    # ---------------------------------------------------------------- runs
    def plan(self, inp: SpeechInput, options: DecodingOptions, *, prefix_len: int = 0,
             max_new: Sequence[int] | None = None) -> Plan:
        """The run's 30 s windows (``core.tasks.base.Plan``; ``prefix_len`` and ``max_new`` do
        not change them): the checked audio cut into windows, a ``prepare`` that encodes one
        (cached) and gives its prompt and SegmentEvent (``source_offset`` in encoder frames),
        and the rule that skips a window of digital silence in ``decode``: a window of any
        length whose no-speech probability is above 0.6 while its loudest 20 ms is below
        -50 dBFS (``core.tasks.longform.LongFormOptions``: ``no_speech_threshold``,
        ``silence_db``) gets a SegmentEvent whose label ends "skipped as silence" and whose
        warning says why, and no token (Whisper writes "you" over 30 s of digital silence).
        ``inp.longform``: the windows of the last :meth:`transcribe` run on this audio.

        Raises:
            ValueError: empty, too short, non-finite or wrongly shaped audio; bad options,
                language or task; ``longform`` and no long-form run of this audio.
        """
        audio, language, task, timestamps, candidate_languages = (inp.audio, inp.language, inp.task, inp.timestamps,
                                                                  inp.candidate_languages)
        if inp.longform:
            from core.tasks.longform import plan_of_run

            windows, prepare, stats = plan_of_run(self, audio, options, language, task, candidate_languages)
            return Plan(windows, prepare, stats, self.engine, join_windows)
        options = options.validate()
        self.check_language_task(language, task, candidate_languages)
        cands = self.candidates(candidate_languages)
        audio = check_audio(audio)
        duration = len(audio) / SAMPLE_RATE
        n_windows = math.ceil(len(audio) / WINDOW_SAMPLES)
        cut = audio.view if isinstance(audio, Pcm16Audio) else lambda a, b: audio[a:b]  # int16 views: read per window
        windows = [cut(i * WINDOW_SAMPLES, (i + 1) * WINDOW_SAMPLES) for i in range(n_windows)]
        if n_windows > 1 and len(windows[-1]) < MIN_AUDIO_S * SAMPLE_RATE:
            windows.pop()  # a sliver at the end of a long clip holds no word

        def prepare(i: int, window: np.ndarray) -> Prepared:
            encoded, hit, key = self._encode(window)
            detected, p, no_speech = self.sot.step(encoded, key, cands)
            auto = self.multilingual and language == "auto"
            lang = self.last_language = detected if auto else (language if self.multilingual else "en")
            event = window_event(i, n_windows, duration, encoded.source_len, (lang, p) if auto else None, no_speech,
                                 self.sot.distribution(encoded, key, cands))
            return Prepared(encoded, self.prompt(lang, task, timestamps), event, hit)

        stats = RunStats(load_s=self.load_s, audio_s=duration, encoder_cached=True)
        return Plan(windows, prepare, stats, self.engine, join_windows, skip_silence)

    def masked(self, inp: SpeechInput, plan: Plan, span: tuple[float, float]) -> OtherInput:
        """``span`` (t0, t1 seconds, t0 < t1) of the audio silenced: the windows it touches,
        encoded anew from the silenced samples (a long-form run's windows from the silenced
        audio's log-mel, cut where the run cut it).

        Raises:
            ValueError: an empty span or one outside the audio.
        """
        from core.tasks import whatif

        audio, windows = inp.audio, plan.segments
        t0, t1 = span
        a, b = whatif.span_samples(len(audio), t0, t1, SAMPLE_RATE)
        masked = whatif.silence_span(audio, t0, t1, SAMPLE_RATE)
        ranges = window_ranges(windows, inp.longform)
        touched = [i for i, (lo, hi) in enumerate(ranges) if a < hi and lo < b]
        if inp.longform:
            from core.tasks.longform import encode_audio

            encode = lambda i: encode_audio(self, masked, windows[i])  # noqa: E731
        else:
            encode = lambda i: self._encode(masked[ranges[i][0]: ranges[i][1]])[0]  # noqa: E731
        return OtherInput(touched, encode, f"silence {a / SAMPLE_RATE:.2f}–{b / SAMPLE_RATE:.2f} s")

    def emptied(self, inp: SpeechInput, plan: Plan) -> OtherInput:
        """Every window's encoding of all-zero audio of the window's length."""
        ranges, n = window_ranges(plan.segments, inp.longform), len(inp.audio)
        return OtherInput(range(len(plan.segments)),
                          lambda i: self._encode(np.zeros(min(ranges[i][1], n) - ranges[i][0], np.float32))[0],
                          "no input: silence of the same length")

    def transcribe(self, audio: np.ndarray, options: DecodingOptions, longform=None, *, language: str = "auto",
                   task: str = "transcribe", cancel: Callable[[], bool] | None = None,
                   candidate_languages: Sequence[str] | None = None, prefix_ids: Sequence[int] = ()) -> Iterator:
        """Long-form transcription as openai/whisper ``transcribe()``: seek by timestamps,
        previous-text conditioning, temperature fallback, silence skipping
        (``core.tasks.longform.transcribe``; ``longform``: a ``LongFormOptions``, None = defaults).

        Yields:
            SegmentEvent per window, StepEvents/BeamEvents and an AttemptEvent per attempt
            (an attempt not kept takes its steps back), one Finished.

        Raises:
            ValueError: bad audio, options, language or task.
        """
        from core.tasks.longform import LongFormOptions, transcribe

        yield from transcribe(self, audio, options, longform or LongFormOptions(), language=language, task=task,
                              cancel=cancel, candidate_languages=candidate_languages, prefix_ids=prefix_ids)

    def segments(self, events: Sequence) -> list[dict]:
        """Timestamped segments ``{"start", "end", "text"}`` (seconds in the whole audio) of a
        run decoded with ``timestamps=True``, from its StepEvents' timestamp-token pairs
        (``core.processors.whisper.timestamp_segments``); [] without timestamp tokens."""
        from core.tasks.speech_words import timestamp_segments_of

        return timestamp_segments_of(self, events)

    def companions(self, options: DecodingOptions, prompt: DecoderPrompt, encode: Callable[["SpeechModel"], object], *,
                   language: str = "en", task: str = "transcribe", timestamps: bool = False) -> dict:
        """``Engine.run``'s ``draft=`` / ``amateur=`` for one window decoded outside the
        segment runs (long-form: ``core.tasks.longform``), when ``options`` name a second
        model; {} otherwise. ``encode``: the second model -> its encoder output of the same
        window (cached). See ``core.tasks.companions.window_companions`` (args, errors)."""
        from core.tasks.companions import window_companions

        return window_companions(self, options, prompt, encode, language=language, task=task, timestamps=timestamps)

    def prefix_ids(self, text: str) -> list[int]:
        """The token ids of a text prefix as openai/whisper forms them
        (``tokenizer.encode(" " + prefix.strip())``); [] for blank text."""
        return self.backend.tokenize(" " + text.strip()) if text.strip() else []

    @property
    def alignment_heads(self) -> list[tuple[int, int]]:
        """The (decoder layer, head) pairs whose cross-attention follows time."""
        return list(self._loaded.alignment_heads)

    def words(self, steps: Sequence, *, end_attention: dict | None = None, heads: Sequence | None = None,
              audio: np.ndarray | None = None):
        """Word-level timestamps of the steps decoded so far (``core.analysis.alignment``:
        DTW over the alignment heads' cross-attention, as openai/whisper ``timing.py``).
        ``end_attention``: window -> the end-of-text step's attention (:meth:`end_attention`);
        without it a window's last word ends where the decoder has listened so far (a run
        still decoding). ``heads``: (layer, head) pairs to align on instead of
        :attr:`alignment_heads`. ``audio``: the run's audio; given, the words are moved off
        silence (``core.analysis.silence.snap_words``)."""
        return self.alignment(steps, end_attention=end_attention, heads=heads, audio=audio).words

    def alignment(self, steps: Sequence, *, end_attention: dict | None = None, heads: Sequence | None = None,
                  audio: np.ndarray | None = None):
        """The words of :meth:`words` and each window's DTW path (``core.analysis.alignment.align``:
        an ``Alignment``). Numpy only (no model call): safe off the decoding thread."""
        from core.tasks.speech_words import alignment

        return alignment(self, steps, end_attention, heads, audio)

    def end_attention(self, audio: np.ndarray, steps: Sequence, options: DecodingOptions, **settings) -> dict:
        """Per window of a finished run, the cross-attention float32 (layers, heads, frames) of the
        step that chose end-of-text (timing.py's last DTW row): the window's prompt and tokens
        fed again in one decoder call on the cached encoder output (the events carry no step
        for end-of-text). ``settings``: the run's (``SpeechInput``; ``longform=True``: ``steps``
        are a :meth:`transcribe` run's)."""
        from core.tasks.speech_words import end_attention

        return end_attention(self, self.plan(SpeechInput.of(audio, settings, method="end_attention"), options), steps)

    def refine_words(self, audio: np.ndarray, steps: Sequence, words: Sequence, options: DecodingOptions, *,
                     refine=None, cancel: Callable[[], bool] | None = None,
                     progress: Callable[[int, int], None] | None = None, budget_s: float | None = None,
                     report: dict | None = None, **settings) -> list:
        """The DTW ``words`` of the run ``steps`` of ``audio`` with their boundaries moved to where
        muting the audio starts to hurt each word (``core.analysis.refine``, as stable-ts
        ``refine()``): each window's tokens forced through its audio with spans silenced,
        re-encoded (not cached). ``refine``: ``RefineOptions``. Cancelled: ``words`` as given.
        ``settings``: the run's (``SpeechInput``).

        ``longform``: ``steps`` are the kept attempts' steps of the last :meth:`transcribe` run on
        ``audio`` (its transcript); each word is refined within its own window's audio (the
        samples the run's seek gave that window, up to 30 s) under that window's prompt (previous
        text included). The window's audio is encoded on its own (as a clip of <= 30 s), the
        reference probabilities too, so muted and unmuted scores compare like with like.

        ``progress``: (words done, words in all), after each bisection round. ``budget_s``: stop
        when these seconds are spent (the rest keep their times); ``report``: a dict the pass fills
        (words, refined, windows, seconds, stopped; ``core.analysis.refine.refine_words``).

        Raises:
            ValueError: as :meth:`decode`; bad refine options; ``longform`` and no long-form run
                of this audio.
            core.analysis.refine.RefineError: scoring failed (the message names the window and
                its words).
        """
        from core.tasks.speech_words import refine_words

        plan = self.plan(SpeechInput.of(audio, settings, method="refine_words"), options)
        return refine_words(self, plan, audio, steps, words, refine, longform=bool(settings.get("longform")),
                            cancel=cancel, progress=progress, budget_s=budget_s, report=report)
