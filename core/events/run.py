"""A run's frame: segments starting, long-form attempts ending, its timing and its end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from core.events.step import _AttentionField, _SpillsAttention

if TYPE_CHECKING:
    from core.events.speculation import SpeculationSummary


@dataclass(frozen=True)
class SegmentEvent:
    """A new input segment starts (audio window, image line, sentence)."""

    segment: int
    label: str  # e.g. "0.0–30.0 s", "line 2", "sentence 3"
    source_offset: int = 0
    source_len: int = 0
    # how many segments the input has (0 = not known); the GUI shows "sentence i of n"
    total: int = 0
    # what a segment is, for progress text: "window", "sentence", "line"
    kind: str = "segment"
    # speech: probability of Whisper's no-speech token at the start of the window
    # (openai/whisper decoding.py: softmax of the logits after <|startoftranscript|>); None elsewhere
    no_speech_prob: float | None = None
    # speech, multilingual models: the language distribution at <|startoftranscript|> (softmax over the
    # language tokens, or over the candidate languages asked for), (code, probability) best first, the top
    # ``core.catalog.LANGUAGE_PROBS_KEPT``; () for English-only models and other tasks
    language_probs: tuple[tuple[str, float], ...] = ()
    # something the user should know about this segment's output ("" = nothing), shown in the window
    warning: str = ""


@dataclass
class RunStats:
    """Timing of one run. Seconds; ``rtf`` = processing time / audio duration (speech only).

    ``reused_tokens`` and ``first_token_s`` are not in ``to_dict`` (the CLI's timing keys)."""

    load_s: float = 0.0
    encode_s: float = 0.0
    decode_s: float = 0.0
    n_tokens: int = 0
    audio_s: float | None = None
    encoder_cached: bool = False
    # decoder positions taken from the previous run's KV cache instead of being computed
    reused_tokens: int = 0
    # seconds from the start of the run (a fork: the request) to its first StepEvent; 0.0 if none
    first_token_s: float = 0.0
    # speculative decoding's figures (None for other strategies)
    speculative: SpeculationSummary | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def ms_per_token(self) -> float:
        return 1000.0 * self.decode_s / self.n_tokens if self.n_tokens else 0.0

    @property
    def rtf(self) -> float | None:
        if not self.audio_s:
            return None
        return (self.encode_s + self.decode_s) / self.audio_s

    def to_dict(self) -> dict:
        return {
            "load_s": self.load_s,
            "encode_s": self.encode_s,
            "decode_s": self.decode_s,
            "tokens_per_s": self.tokens_per_s,
            "rtf": self.rtf,
        }


@dataclass(frozen=True)
class Finished:
    """The run ended (EOS, max tokens, or cancel)."""

    text: str
    token_ids: list[int]
    stats: RunStats
    cancelled: bool = False
    reason: str = "eos"  # "eos" | "max_tokens" | "cancelled"


@dataclass(frozen=True)
class AttemptEvent(_SpillsAttention):
    """One decoding attempt of a long-form window ended (``core.tasks.longform``; openai/whisper
    ``decode_with_fallback``). It follows the attempt's StepEvents; when
    ``kept_in_transcript`` is False those steps are taken back (drop the window's steps
    from ``step_offset`` on) and the next attempt, if any, is numbered from the same step.

    Attributes:
        segment: the window's index (its SegmentEvent's ``segment``).
        attempt: 0 for the first try, 1 for the first fallback, ...
        temperature: the attempt's temperature (0.0 = the options' own strategy).
        step_offset: the step number of the attempt's first token.
        steps: the attempt's StepEvents (kept so a failed attempt can be shown as a lane).
        token_ids: its generated ids (timestamps included, EOS not).
        text: its text (timestamps left out).
        compression_ratio: gzip ratio of the text (> 2.4: repetition).
        avg_logprob: (sum of the tokens' and end-of-text's log-probabilities) / (tokens + 1),
            under Whisper's rule-filtered distribution at temperature 1.
        no_speech_prob: no-speech probability at <|startoftranscript|> (None: no such token).
        entropy: entropy (nats) of the counts of the last 32 tokens (whisper.cpp).
        verdict: "accepted", "fallback" (failed a threshold: redone at the next temperature,
            or kept when it was the last one) or "silence" (skipped as no speech).
        reasons: one line per threshold crossed.
        kept_in_transcript: its steps stay in the run.
        kept_tokens: how many of its tokens the transcript holds (the rest, after the last
            timestamp pair, is decoded again in the next window).
        seek: the window's start in mel frames (10 ms); start, end: the window in seconds.
        end_attention: float32 (layers, heads, frames): the cross-attention at the
            end-of-text step (openai timing.py's last row), or None. Like
            ``StepEvent.cross_attention`` it may be moved to disk (:meth:`spill_attention`,
            ``attention_nbytes``, ``attention_spilled``; 288 kB per window with base) and
            is then loaded back on each read (float32, values rounded to float16).
        segments: the timestamped segments it adds, ``{"start", "end", "tokens", "text"}``
            (seconds); () when not kept.
        loudest_db: the window's loudest 20 ms frame in dBFS (-inf: digital silence).
    """

    segment: int
    attempt: int
    temperature: float
    step_offset: int
    steps: tuple = ()
    token_ids: tuple[int, ...] = ()
    text: str = ""
    compression_ratio: float = 0.0
    avg_logprob: float = 0.0
    no_speech_prob: float | None = None
    entropy: float = 0.0
    verdict: str = "accepted"
    reasons: tuple[str, ...] = ()
    kept_in_transcript: bool = True
    kept_tokens: int = 0
    seek: int = 0
    start: float = 0.0
    end: float = 0.0
    end_attention: np.ndarray | None = _AttentionField()
    segments: tuple[dict, ...] = ()
    loudest_db: float = 0.0

    _ATTENTION = "end_attention"
