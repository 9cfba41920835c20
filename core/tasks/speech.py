"""Speech-to-text with Whisper: audio in, a live stream of decoding events out.

Pre-processing (log-mel features), the Whisper prompt (start-of-transcript,
language, task, no-timestamps), language detection, and 30-second windowing
live here; the decoding itself is ``core.engine.Engine`` on a
``core.backends.hf.HFSeq2SeqBackend``.

Whisper's encoder turns 30 s of 16 kHz audio (480 000 samples) into 1500 frames
of 20 ms; those frames are the columns of the cross-attention the events carry.
"""

from __future__ import annotations

import hashlib
import math
from typing import Callable, Iterator, Sequence

import numpy as np

from core.backends.base import DecoderPrompt
from core.catalog import FRAME_S, LANGUAGE_PROBS_KEPT, MIN_AUDIO_S, NO_SPEECH_WARN, SAMPLE_RATE, WINDOW_S
from core.catalog import WHISPER_BUNDLED as BUNDLED
from core.catalog import WHISPER_DEFAULT as DEFAULT_MODEL
from core.catalog import WHISPER_TASKS as TASKS
from core.events import Event, RunStats, SegmentEvent
from core.options import DecodingOptions
from core.tasks.base import Prepared, decode_segments, fork_segment

#: audio samples per encoder frame (320 at 16 kHz)
SAMPLES_PER_FRAME = int(SAMPLE_RATE * FRAME_S)
#: Whisper's fixed input window in samples / encoder frames
WINDOW_SAMPLES = int(SAMPLE_RATE * WINDOW_S)
WINDOW_FRAMES = WINDOW_SAMPLES // SAMPLES_PER_FRAME

__all__ = ["BUNDLED", "DEFAULT_MODEL", "FRAME_S", "LONGFORM_HINT", "NO_SPEECH_WARN", "SAMPLE_RATE", "SKIPPED",
           "SpeechModel", "TASKS", "window_warnings"]


class SpeechModel:
    """A loaded Whisper model ready to decode audio, with an encoder-output cache.

    Build with :meth:`load` (slow: seconds; call it off the GUI thread).

    Attributes:
        name: display name ("whisper-base", "whisper-tiny.en", or the id/dir given).
        multilingual: whether language choice and the translate task are available.
        languages: language codes the model knows ("en", "de", ...), in token order.
        load_s: seconds the load took.
        encode_count: how many times the encoder has run (re-decodes with other
            options reuse the cached encoder hidden states, so this stays put).
        last_language: the language used by the last decode (detected or given).
    """

    def __init__(self, loaded, cache_size: int = 8):
        from core.backends.hf import HFSeq2SeqBackend
        from core.engine import EncoderCache, Engine

        self._loaded = loaded
        self.name: str = loaded.name
        self.multilingual: bool = bool(loaded.multilingual)
        self.languages: list[str] = list(loaded.languages)
        self.load_s: float = float(loaded.load_s)
        self.backend = HFSeq2SeqBackend(loaded.model, loaded.tokenizer, loaded.name)
        self.engine = Engine(self.backend)
        self._cache = EncoderCache(max_items=cache_size)
        self.encode_count = 0
        self.last_language: str | None = None
        # window key -> (logits of the language tokens float32 (n_languages,), no-speech probability)
        self._language_cache: dict = {}

    @classmethod
    def load(cls, name: str = DEFAULT_MODEL, progress: Callable[[str], None] | None = None) -> "SpeechModel":
        """Load a bundled model ("base", "tiny.en") or a transformers Whisper id/directory.

        Raises:
            RuntimeError / FileNotFoundError / ValueError: with a message saying what to
                install or which path to give (from ``core.backends.whisper_models``).
        """
        from core.backends.whisper_models import load_whisper

        return cls(load_whisper(name, progress=progress))

    # ---------------------------------------------------------------- helpers
    def _features(self, window: np.ndarray):
        """Log-mel features (1, n_mels, 3000) float32 of one window (<= 30 s)."""
        fe = self._loaded.feature_extractor
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
        language, p, _ = self._sot_step(encoded, key, self.candidates(candidate_languages))
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
        audio = _check_audio(audio)
        n_windows = math.ceil(len(audio) / WINDOW_SAMPLES)
        if not 0 <= window < n_windows:
            raise ValueError(f"window {window} is outside the audio's {n_windows} window(s); give 0..{n_windows - 1}")
        encoded, _hit, key = self._encode(audio[window * WINDOW_SAMPLES : (window + 1) * WINDOW_SAMPLES])
        return self._language_distribution(encoded, key, cands)

    def candidates(self, candidate_languages: Sequence[str] | str | None) -> tuple[str, ...] | None:
        """The checked candidate languages (deduplicated, in the order given), or None for
        "all": None, an empty sequence/string, and any value on an English-only model (it
        has no language choice, so the restriction does not apply).

        Raises:
            ValueError: a code the model does not know (the message lists the valid ones).
        """
        if candidate_languages is None or not self.multilingual:
            return None
        if isinstance(candidate_languages, str):
            candidate_languages = candidate_languages.replace(",", " ").split()
        codes = tuple(dict.fromkeys(str(c).strip().lower() for c in candidate_languages if str(c).strip()))
        unknown = [c for c in codes if c not in self._loaded.lang_token_ids]
        if unknown:
            raise ValueError(f"unknown candidate language(s) {', '.join(map(repr, unknown))}; "
                             f"use codes {self.name} knows: {', '.join(self.languages)}")
        return codes or None

    def no_speech_prob(self, encoded, key=None) -> float | None:
        """Probability of Whisper's no-speech token after <|startoftranscript|> (0..1), or
        None if the vocabulary has none.

        As openai/whisper ``decoding.py`` computes ``no_speech_probs``: the softmax over the
        whole vocabulary of the logits at the start-of-transcript position, no filters.
        ``transcribe()`` treats a window as silence when it is > 0.6 (and the average
        log-probability < -1).
        """
        return self._sot_logits(encoded, key)[1]

    def _sot_step(self, encoded, key=None, candidates: tuple[str, ...] | None = None
                  ) -> tuple[str | None, float, float | None]:
        """(detected language or None, its probability, no-speech probability) from one
        decoder step on <|startoftranscript|>; the language among ``candidates`` (checked
        codes, :meth:`candidates`) when given. Cached by the window's key."""
        probs = self._language_distribution(encoded, key, candidates)
        language, p = next(iter(probs.items())) if probs else (None, 0.0)
        return language, p, self._sot_logits(encoded, key)[1]

    def _language_distribution(self, encoded, key=None, candidates: tuple[str, ...] | None = None) -> dict[str, float]:
        """code -> probability, best first (ties in token order): the softmax over the
        language-token logits of ``candidates`` (all languages when None); {} English-only."""
        import torch

        if not self.multilingual:
            return {}
        logits = self._sot_logits(encoded, key)[0]
        codes = list(candidates) if candidates else self.languages
        idx = [self._language_index[c] for c in codes]
        probs = torch.softmax(torch.from_numpy(logits[idx]), dim=-1).tolist()
        return dict(sorted(zip(codes, probs), key=lambda kv: -kv[1]))

    @property
    def _language_index(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.languages)}

    def _sot_logits(self, encoded, key=None) -> tuple[np.ndarray, float | None]:
        """(float32 logits of the language tokens in ``self.languages`` order, shape
        (n_languages,) — (0,) for English-only models; no-speech probability or None) of
        one decoder step on <|startoftranscript|>; cached by the window's key."""
        if key is not None and key in self._language_cache:
            return self._language_cache[key]
        import torch

        lw = self._loaded
        cache = self.backend.init_cache(encoded, 1)
        out = self.backend.step(torch.tensor([[lw.special.sot]]), cache, output_attentions=False)
        logits = out.logits[0].float()
        lang = np.zeros(0, np.float32)
        if self.multilingual:
            ids = torch.tensor([lw.lang_token_ids[c] for c in self.languages])
            lang = logits[ids].detach().cpu().numpy().astype(np.float32, copy=True)
        ns = lw.special.no_speech
        no_speech = float(torch.softmax(logits, dim=-1)[ns]) if ns is not None else None
        result = (lang, no_speech)
        if key is not None:
            self._language_cache[key] = result
        return result

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
        """Raise ValueError for a language/task the model cannot do, or an unknown
        candidate language (:meth:`candidates`)."""
        self.candidates(candidate_languages)
        if task not in TASKS:
            raise ValueError(f"task must be 'transcribe' or 'translate', got {task!r}")
        if not self.multilingual:
            if task != "transcribe":
                raise ValueError(f"{self.name} is English-only and cannot translate; choose model 'base' for translate")
            if language not in ("auto", "en"):
                raise ValueError(f"{self.name} is English-only; choose language 'en' or model 'base' for {language!r}")
        elif language != "auto" and language not in self.languages:
            raise ValueError(
                f"unknown language {language!r}; use 'auto' or one of: {', '.join(self.languages[:20])}, ..."
            )

    # ---------------------------------------------------------------- decode
    def decode(
        self,
        audio: np.ndarray,
        options: DecodingOptions,
        *,
        language: str = "auto",
        task: str = "transcribe",
        timestamps: bool = False,
        candidate_languages: Sequence[str] | None = None,
        cancel: Callable[[], bool] | None = None,
        prefix_ids: Sequence[int] = (),
    ) -> Iterator[Event]:
        """Decode 16 kHz mono audio window by window into one continuous event stream.

        Args:
            audio: float32 array (n_samples,), 16 kHz mono, values in [-1, 1].
            options: decoding options (validated here).
            language: "auto" (detected from the first window) or a code like "en".
            candidate_languages: restrict detection to these codes (the softmax over their
                language tokens only; :meth:`candidates`); None = all; ignored by English-only
                models and when ``language`` is given.
            task: "transcribe" or "translate" (to English; multilingual models only).
            timestamps: decode with timestamp tokens (no ``<|notimestamps|>`` in the prompt,
                Whisper's timestamp rules as a hard rule); they are StepEvents like any
                token; :meth:`segments` pairs them.
            cancel: polled between steps; when it returns True the run stops.
            prefix_ids: token ids forced after the prompt of the first window (openai/whisper's
                ``prefix``, which it also applies to the first window only; see
                :meth:`prefix_ids`), reported with ``forced=True``.

        A window of any length (a clip of 30 s or less too) whose no-speech probability is above
        0.6 while its loudest 20 ms frame is below -50 dBFS is skipped as silence, as long-form
        runs skip it (``core.tasks.longform.LongFormOptions``: ``no_speech_threshold``,
        ``silence_db``): its SegmentEvent's label ends "skipped as silence" and its warning says
        why; no token is decoded from it (Whisper writes "you" over 30 s of digital silence).

        Yields:
            SegmentEvent per 30 s window (``source_offset`` in encoder frames),
            StepEvent per token (cross-attention columns = 20 ms frames of the window),
            BeamEvent per step for beam search, and one Finished at the end.

        Raises:
            ValueError: empty, too short, non-finite or wrongly shaped audio; bad options,
                language or task; a prefix id that is EOS or outside the vocabulary.
        """
        windows, prepare, stats = self._plan(audio, options, language, task, timestamps, candidate_languages)
        yield from decode_segments(self.engine, windows, prepare, options, stats, _join, cancel=cancel,
                                   forced={0: prefix_ids} if prefix_ids else None, skip=_skip_silence)

    def decode_lanes(
        self,
        audio: np.ndarray,
        lanes: Sequence[DecodingOptions],
        *,
        language: str = "auto",
        task: str = "transcribe",
        timestamps: bool = False,
        candidate_languages: Sequence[str] | None = None,
        cancel: Callable[[], bool] | None = None,
        prefix_ids: Sequence[int] = (),
    ) -> Iterator:
        """Decode ``audio`` with several options side by side on one encoder pass per window
        (``core.tasks.lanes.decode_lanes``): ``LaneEvent`` s of every lane, interleaved, then a
        ``LanesFinished``. Each lane's events equal :meth:`decode` with its options.

        Raises:
            ValueError: as :meth:`decode`; no lanes, or a lane's options invalid.
        """
        from core.tasks.lanes import check_lanes, decode_lanes

        lanes = check_lanes(lanes)
        windows, prepare, stats = self._plan(audio, lanes[0], language, task, timestamps, candidate_languages)
        yield from decode_lanes(self.engine, windows, prepare, lanes, stats, _join, cancel=cancel,
                                forced={0: prefix_ids} if prefix_ids else None)

    def fork(
        self,
        audio: np.ndarray,
        options: DecodingOptions,
        *,
        segment: int,
        forced_ids: Sequence[int],
        step_offset: int,
        language: str = "auto",
        task: str = "transcribe",
        timestamps: bool = False,
        candidate_languages: Sequence[str] | None = None,
        cancel: Callable[[], bool] | None = None,
        reuse_cache: bool = True,
        longform: bool = False,
    ) -> Iterator[Event]:
        """Re-decode one 30 s window of ``audio`` with its first tokens forced (a fork).

        Only window ``segment`` is decoded (from the cached encoder output); the other
        windows are left as they were, so a branch is the original run with this window
        replaced (``core.tasks.base.fork_segment``). The engine reuses the KV cache of its
        last batch-1 run on this window up to the common prefix (``Engine.run``'s
        ``reuse_cache``).

        Args:
            audio, options, language, task, cancel: as given to the :meth:`decode` that is forked.
            segment: the window's index (``SegmentEvent.segment``).
            forced_ids: the window's generated tokens to force: the original ones before
                the fork step plus the token chosen there.
            step_offset: the step number of the window's first token in the original run.
            reuse_cache: allow the KV-cache reuse.
            longform: the run forked was :meth:`transcribe` (its last run on this audio):
                its windows, encoder outputs and prompts (previous text included) are used.

        Yields:
            the window's SegmentEvent, StepEvents numbered from ``step_offset`` (forced
            ones marked; those inside a reused cache are not repeated), BeamEvents, one
            Finished (the window's text and token ids; ``stats.first_token_s`` from this
            call, ``stats.reused_tokens``).

        Raises:
            ValueError: as :meth:`decode`; a window index out of range.
        """
        windows, prepare, stats = self._plan(audio, options, language, task, timestamps, candidate_languages,
                                             longform)
        yield from fork_segment(self.engine, windows, segment, prepare, options, stats, forced_ids=forced_ids,
                                step_offset=step_offset, cancel=cancel, reuse_cache=reuse_cache)

    def what_if(
        self,
        audio: np.ndarray,
        options: DecodingOptions,
        original: Sequence,
        *,
        span: tuple[float, float],
        language: str = "auto",
        task: str = "transcribe",
        timestamps: bool = False,
        candidate_languages: Sequence[str] | None = None,
        cancel: Callable[[], bool] | None = None,
        longform: bool = False,
    ) -> Iterator:
        """Silence ``span`` (t0, t1 seconds) of ``audio`` and re-decode the 30 s windows it
        touches; score the original tokens of those windows under the silenced audio
        (``core.tasks.whatif``: a mask).

        Args:
            audio, options, language, task, cancel: as given to the :meth:`decode` whose
                run ``original`` is (each window keeps that run's prompt, e.g. its detected
                language).
            original: that run's StepEvents.
            span: (t0, t1) seconds, t0 < t1.
            longform: ``original`` is a :meth:`transcribe` run (its windows are re-encoded
                from the silenced audio's log-mel, cut where the run cut it).

        Yields:
            ``core.tasks.whatif``'s mask stream (the silenced windows are encoded anew: their
            samples, so their encoder-cache keys, changed).

        Raises:
            ValueError: as :meth:`decode`; an empty span or one outside the audio.
        """
        from core.tasks import whatif

        windows, prepare, _stats = self._plan(audio, options, language, task, timestamps, candidate_languages,
                                              longform)
        t0, t1 = span
        a, b = whatif.span_samples(len(audio), t0, t1, SAMPLE_RATE)
        masked = whatif.silence_span(audio, t0, t1, SAMPLE_RATE)
        ranges = self._window_ranges(windows, longform)
        touched = [i for i, (lo, hi) in enumerate(ranges) if a < hi and lo < b]
        if longform:
            from core.tasks.longform import encode_audio

            encode = lambda i: encode_audio(self, masked, windows[i])  # noqa: E731
        else:
            encode = lambda i: self._encode(masked[ranges[i][0]: ranges[i][1]])[0]  # noqa: E731
        yield from whatif.what_if_segments(
            self.engine, touched, lambda i: prepare(i, windows[i]), encode,
            whatif.original_segments(original, len(windows)), options, kind="mask",
            description=f"silence {a / SAMPLE_RATE:.2f}–{b / SAMPLE_RATE:.2f} s", cancel=cancel,
        )

    def no_input(
        self,
        audio: np.ndarray,
        options: DecodingOptions,
        original: Sequence,
        *,
        language: str = "auto",
        task: str = "transcribe",
        timestamps: bool = False,
        candidate_languages: Sequence[str] | None = None,
        cancel: Callable[[], bool] | None = None,
        longform: bool = False,
    ) -> Iterator:
        """The decoder's language prior for the run ``original`` of ``audio``: each window's
        original tokens forced through the encoder output of all-zero audio of the window's
        length (``core.tasks.whatif``: kind "prior"). ``longform``: ``original`` is a
        :meth:`transcribe` run."""
        from core.tasks import whatif

        windows, prepare, _stats = self._plan(audio, options, language, task, timestamps, candidate_languages,
                                              longform)
        ranges = self._window_ranges(windows, longform)
        yield from whatif.what_if_segments(
            self.engine, range(len(windows)), lambda i: prepare(i, windows[i]),
            lambda i: self._encode(np.zeros(min(ranges[i][1], len(audio)) - ranges[i][0], np.float32))[0],
            whatif.original_segments(original, len(windows)), options, kind="prior",
            description="no input: silence of the same length", cancel=cancel,
        )

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
        from core.events import StepEvent
        from core.processors.whisper import timestamp_segments

        per_window: dict[int, list[int]] = {}
        for ev in events:
            if isinstance(ev, StepEvent):
                per_window.setdefault(ev.segment, []).append(ev.token_id)
        return timestamp_segments(sorted(per_window.items()), self._loaded.special.notimestamps + 1,
                                  self.backend.decode, WINDOW_S)

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
        from dataclasses import replace as _replace

        from core.analysis.alignment import align
        from core.analysis.silence import snap_words

        found = align(steps, self.alignment_heads if heads is None else list(heads), self.backend.decode,
                      eot=self._loaded.special.eot, eot_attention=end_attention, language=self.last_language)
        return found if audio is None else _replace(found, words=snap_words(found.words, audio))

    def end_attention(self, audio: np.ndarray, steps: Sequence, options: DecodingOptions, *,
                      language: str = "auto", task: str = "transcribe", timestamps: bool = False,
                      candidate_languages: Sequence[str] | None = None, longform: bool = False) -> dict:
        """Per window of a finished run, the cross-attention float32 (layers, heads, frames) of the
        step that chose end-of-text (timing.py's last DTW row): the window's prompt and tokens
        fed again in one decoder call on the cached encoder output (the events carry no step
        for end-of-text). ``longform``: ``steps`` are a :meth:`transcribe` run's."""
        import torch

        windows, prepare, _stats = self._plan(audio, options, language, task, timestamps, candidate_languages,
                                              longform)
        per_window: dict[int, list[int]] = {}
        for ev in steps:
            per_window.setdefault(ev.segment, []).append(ev.token_id)
        rows = {}
        for i, ids in per_window.items():
            ready = prepare(i, windows[i])
            fed = torch.tensor([list(ready.prompt.prompt_ids) + ids], dtype=torch.long)
            out = self.backend.step(fed, self.backend.init_cache(ready.encoded, 1), True)
            rows[i] = out.cross_attention[0, :, :, : ready.encoded.source_len].float().numpy().copy()
        return rows

    @staticmethod
    def _window_ranges(windows, longform: bool) -> list[tuple[int, int]]:
        """(first, end) sample of each window of a :meth:`_plan`."""
        if longform:
            from core.tasks.longform import window_samples

            return [window_samples(w) for w in windows]
        return [(i * WINDOW_SAMPLES, i * WINDOW_SAMPLES + len(w)) for i, w in enumerate(windows)]

    def _plan(self, audio, options: DecodingOptions, language: str, task: str, timestamps: bool = False,
              candidate_languages: Sequence[str] | None = None, longform: bool = False):
        """(windows, prepare, stats) of one decode: the checked audio cut into 30 s windows,
        a ``prepare`` that encodes one (cached) and says its prompt and SegmentEvent, the
        run's starting stats. ``longform``: the windows of the last :meth:`transcribe` run on
        this audio (``core.tasks.longform.plan_of_run``)."""
        if longform:
            from core.tasks.longform import plan_of_run

            return plan_of_run(self, audio, options, language, task, candidate_languages)
        options = options.validate()
        self.check_language_task(language, task, candidate_languages)
        cands = self.candidates(candidate_languages)
        audio = _check_audio(audio)
        duration = len(audio) / SAMPLE_RATE
        n_windows = math.ceil(len(audio) / WINDOW_SAMPLES)
        windows = [audio[i * WINDOW_SAMPLES : (i + 1) * WINDOW_SAMPLES] for i in range(n_windows)]
        if n_windows > 1 and len(windows[-1]) < MIN_AUDIO_S * SAMPLE_RATE:
            windows.pop()  # a sliver at the end of a long clip holds no word

        def prepare(i: int, window: np.ndarray) -> Prepared:
            encoded, hit, key = self._encode(window)
            span = f"{i * WINDOW_S:.1f}–{min(duration, (i + 1) * WINDOW_S):.1f} s"
            label = span
            detected, p, no_speech = self._sot_step(encoded, key, cands)
            probs = self._language_distribution(encoded, key, cands)
            if self.multilingual and language == "auto":
                lang = detected
                label += f" · language {lang} ({p:.0%})"
            else:
                lang = language if self.multilingual else "en"
            self.last_language = lang
            warning = ""
            if no_speech is not None:
                label += f" · no speech {no_speech:.0%}" + (" — likely no speech" if no_speech > NO_SPEECH_WARN else "")
                if no_speech > NO_SPEECH_WARN:
                    warning = (f"{span}: the model's no-speech probability is {no_speech:.0%}, so this audio may "
                               f"hold no speech and the text decoded from it may be invented; {LONGFORM_HINT}.")
            event = SegmentEvent(segment=i, label=label, source_offset=i * WINDOW_FRAMES, source_len=encoded.source_len,
                                 total=n_windows, kind="window", no_speech_prob=no_speech, warning=warning,
                                 language_probs=tuple(list(probs.items())[:LANGUAGE_PROBS_KEPT]))
            return Prepared(encoded, self.prompt(lang, task, timestamps), event, hit)

        return windows, prepare, RunStats(load_s=self.load_s, audio_s=duration, encoder_cached=True)

    def refine_words(self, audio: np.ndarray, steps: Sequence, words: Sequence, options: DecodingOptions, *,
                     refine=None, language: str = "auto", task: str = "transcribe", timestamps: bool = False,
                     candidate_languages: Sequence[str] | None = None, cancel: Callable[[], bool] | None = None,
                     progress: Callable[[int, int], None] | None = None, longform: bool = False,
                     budget_s: float | None = None, report: dict | None = None) -> list:
        """The DTW ``words`` of the run ``steps`` of ``audio`` with their boundaries moved to where
        muting the audio starts to hurt each word (``core.analysis.refine``, as stable-ts
        ``refine()``): each window's tokens forced through its audio with spans silenced,
        re-encoded (not cached). ``refine``: ``RefineOptions``. Cancelled: ``words`` as given.

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
        import torch

        from core.analysis.refine import RefineWindow, forced_token_probs
        from core.analysis.refine import refine_words as refine_pass

        windows, prepare, _stats = self._plan(audio, options, language, task, timestamps, candidate_languages,
                                              longform)
        per_window: dict[int, list] = {}
        for ev in sorted(steps, key=lambda e: e.step):
            per_window.setdefault(ev.segment, []).append(ev)
        ranges = self._window_ranges(windows, longform)
        audio = np.asarray(audio, np.float32)
        parts = [RefineWindow(i, audio[ranges[i][0]: min(ranges[i][1], len(audio))], ranges[i][0] / SAMPLE_RATE,
                              tuple(ev.step for ev in evs))
                 for i, evs in sorted(per_window.items()) if i < len(windows)]
        ids = {i: [ev.token_id for ev in evs] for i, evs in per_window.items()}

        def encode(samples):  # silenced (or a long-form window's) audio: encoded anew, kept out of the cache
            frames = min(WINDOW_FRAMES, math.ceil(len(samples) / SAMPLES_PER_FRAME))
            return self.backend.encode({"input_features": self._features(samples), "source_len": torch.tensor(frames)})

        def score(window, samples):
            ready = prepare(window.index, windows[window.index])
            encoded = ready.encoded
            if samples is not None or longform:
                encoded = encode(window.audio if samples is None else samples)
            return forced_token_probs(self.backend, encoded, ready.prompt, ids[window.index])

        return refine_pass(words, parts, score, refine, decode=self.backend.decode, sample_rate=SAMPLE_RATE,
                           cancel=cancel, progress=progress, budget_s=budget_s, report=report)


#: what fixed-window warnings (no speech, repetition loops) point the user to
LONGFORM_HINT = "long-form mode (windows: long-form) re-decodes such windows with temperature fallback"
#: the end of a skipped window's SegmentEvent label
SKIPPED = "skipped as silence"


def _skip_silence(i: int, window: np.ndarray, ready: Prepared) -> SegmentEvent | None:
    """``decode_segments``' skip rule for fixed windows: a window whose no-speech probability is
    above the long-form ``no_speech_threshold`` while its loudest 20 ms is below ``silence_db``
    (defaults 0.6, -50 dBFS) gets its SegmentEvent marked skipped; None = decode it."""
    from dataclasses import replace

    from core.tasks.longform import LongFormOptions, loudest_db

    rule, ns = LongFormOptions(), ready.event.no_speech_prob
    if ns is None or rule.no_speech_threshold is None or rule.silence_db is None or ns <= rule.no_speech_threshold:
        return None
    level = loudest_db(window)
    if level >= rule.silence_db:
        return None
    span = ready.event.label.split(" · ")[0]
    return replace(ready.event, label=f"{ready.event.label} · {SKIPPED}", warning=(
        f"{span} {SKIPPED}: no-speech probability {ns:.2f} > {rule.no_speech_threshold:g} and the loudest 20 ms is "
        f"{_db(level)} < {rule.silence_db:g} dBFS (Whisper writes \"you\" or \"Thank you.\" over silence)"))


def _db(level: float) -> str:
    """A level in dBFS as the notes write it ("−inf dBFS", "−62 dBFS")."""
    return "−inf dBFS" if level == float("-inf") else f"{level:.0f} dBFS".replace("-", "−")


def window_warnings(events: Sequence, decode: Callable[[Sequence[int]], str], *,
                    compression_ratio_threshold: float = 2.4, entropy_threshold: float = 2.4) -> list[str]:
    """Warnings about the windows of a fixed-window run (``SpeechModel.decode``'s events): a
    window whose text repeats itself (gzip compression ratio above ``compression_ratio_threshold``,
    or more than 32 tokens whose last 32 have an entropy below ``entropy_threshold`` nats: the
    long-form fallback's own tests) is a repetition loop; each warning names the window and points
    to long-form mode. [] when nothing loops.

    Args:
        events: the run's events (StepEvents and SegmentEvents; others are ignored).
        decode: token ids -> text (``SpeechModel.backend.decode``).
    """
    from core.events import StepEvent
    from core.tasks.longform import compression_ratio, token_entropy

    labels, tokens = {}, {}
    for ev in events:
        if isinstance(ev, SegmentEvent):
            labels[ev.segment] = ev.label.split(" · ")[0]
        elif isinstance(ev, StepEvent):
            tokens.setdefault(ev.segment, []).append(ev.token_id)
    out = []
    for seg, ids in sorted(tokens.items()):
        ratio, entropy = compression_ratio(decode(ids)), token_entropy(ids)
        why = []
        if ratio > compression_ratio_threshold:
            why.append(f"compression ratio {ratio:.2f} > {compression_ratio_threshold:g}")
        if len(ids) > 32 and entropy < entropy_threshold:
            why.append(f"token entropy {entropy:.2f} < {entropy_threshold:g} nats")
        if why:
            out.append(f"{labels.get(seg, f'window {seg + 1}')}: the text repeats itself ({'; '.join(why)}), a "
                       f"repetition loop; {LONGFORM_HINT}.")
    return out


def _join(done) -> str:
    """The windows' texts joined with spaces."""
    return " ".join(text for _, text in done if text)


def _check_audio(audio) -> np.ndarray:
    """Validate and return float32 mono audio, or raise ValueError saying what is wrong."""
    audio = np.asarray(audio)
    if audio.ndim != 1:
        raise ValueError(f"audio must be mono (n_samples,), got shape {audio.shape}; mix channels down first")
    if audio.size == 0:
        raise ValueError("the audio is empty (0 samples); record or open a clip with speech")
    if audio.size < MIN_AUDIO_S * SAMPLE_RATE:
        raise ValueError(
            f"the audio is too short ({audio.size / SAMPLE_RATE * 1000:.0f} ms); give at least {MIN_AUDIO_S:.1f} s"
        )
    audio = audio.astype(np.float32, copy=False)
    if not np.all(np.isfinite(audio)):
        raise ValueError("the audio holds NaN or infinite samples; the file or recording is corrupt")
    return audio
