"""The streaming policy protocol and what policies share.

A *policy* (whisper_streaming's ``OnlineASRProcessor`` logic, SimulStreaming's AlignAtt, the
whisper.cpp ``stream`` loop) is a small object the driver (``core.streaming.driver``) calls
every ``step_s`` seconds of new audio with a :class:`BufferView`; it decodes through a
:class:`Decoder` (the task and engine behind it, any decoding strategy) and answers with an
:class:`Update`: which tokens became final (commit), which are shown but revisable
(tentative), and where to trim the buffer. The model stays behind the decoder, so policies are
tested with scripted fakes.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol, Sequence

import numpy as np

from core.catalog import FRAME_S, SAMPLE_RATE
from core.streaming.events import StreamToken, Waited

#: whisper_streaming's ``buffer_trimming_sec`` default: trim once the buffer is longer than this
TRIM_S = 15.0
#: a buffer ending in this much silence (s) ends after a whole word (``tail_silent``): the pauses
#: between espeak's sentences are 0.4-0.55 s, after a comma 0.1-0.2 s, inside a word (a stop's
#: closure) under 0.15 s
SILENCE_S = 0.2
#: silence: every 20 ms frame's RMS below this fraction of the buffer's speech level (its 95th
#: percentile frame RMS): 20 dB under the speech, above a quiet room's noise floor
SILENCE_RATIO = 0.1
#: punctuation that ends a sentence (a committed token ending with it is a segment end)
SENTENCE_END = (".", "?", "!", "。", "？", "！")


@dataclass(frozen=True)
class Hypothesis:
    """One decode of the buffer.

    Attributes:
        tokens: the tokens decoded after the forced ones (end-of-text not included), with
            ``end_s`` in stream seconds.
        finished: the decoder chose end-of-text (False: a stop rule or the length cut it).
        stopped: the token a stop rule refused (AlignAtt), else None.
        decode_s: seconds the decode took.
        attempts: decodes run to get it (> 1 after a fallback: see ``WhisperDecoder``).
        timing: ``k -> word ends (stream s, None: unknown) of tokens[:k]`` by word timing (DTW), run only for
            what a policy commits (:meth:`timed`); None: ``tokens``' ``end_s`` stand (the
            alignment heads' most-attended frame, or a fake's).
        starts: ``k -> the starts (stream s, None: unknown) of the words tokens[:k] are in``, by
            the same word timing (the same DTW as ``timing``, run once for both); None: unknown
            (a word then starts where the word before it ends).
        rows: when a stop rule stopped the decode, its steps (``core.events.StepEvent``: the
            emitted tokens', then the stopped token's) with the row whose argmax the rule
            decided on (float32 (frames,): the alignment heads' normalised cross-attention scaled
            to [0, 1], or their mean; ``WhisperDecoder.frame_rule``) as ``cross_attention``, for
            a heatmap (``Waited.steps``); else ().
    """

    tokens: tuple[StreamToken, ...]
    finished: bool = True
    stopped: StreamToken | None = None
    decode_s: float = 0.0
    attempts: int = 1
    timing: Callable[[int], Sequence[float]] | None = field(default=None, compare=False, repr=False)
    rows: tuple = field(default=(), compare=False, repr=False)
    starts: Callable[[int], Sequence[float | None]] | None = field(default=None, compare=False, repr=False)

    def timed(self, k: int) -> tuple[StreamToken, ...]:
        """``tokens[:k]`` with ``end_s`` from word timing (DTW over the decode's alignment heads)
        over the whole decode: what a policy commits. Tentative tokens keep the cheap estimate.
        Not over ``tokens[:k]`` alone: that alignment ends the k-th token's word where the
        decoder had listened so far, on tiny.en 0.12 s late on average and up to 0.40 s (session
        15 review), which understated commit latency and, without the forced prefix, made the
        next decode drop the word after the first commit (``after_committed``'s time filter)."""
        k = max(0, min(k, len(self.tokens)))
        if self.timing is None or k == 0:
            return self.tokens[:k]
        ends = self.timing(len(self.tokens))
        return tuple(t if i >= len(ends) or ends[i] is None else replace(t, end_s=float(ends[i]))
                     for i, t in enumerate(self.tokens[:k]))


#: a stop rule: (the token about to be emitted, the buffer's encoder frames) -> stop before it
StopRule = Callable[[StreamToken, int], bool]


class Decoder(Protocol):
    """Decodes one buffer of audio (``core.streaming.decoder.WhisperDecoder`` for Whisper)."""

    def decode(self, audio: np.ndarray, start_s: float, previous: Sequence[int] = (),
               forced: Sequence[int] = (), stop: StopRule | None = None) -> Hypothesis:
        """Decode ``audio`` (float32 (n,), 16 kHz, <= 30 s) that starts ``start_s`` seconds into
        the stream, with ``previous`` ids as the prompt's previous text and ``forced`` ids forced
        first (not returned); ``stop`` is asked before each new token is emitted."""
        ...


@dataclass(frozen=True)
class BufferView:
    """What a policy sees of the driver's state at one update.

    Attributes:
        audio: the buffer, float32 (n,) 16 kHz.
        start_s: where the buffer starts in the stream (s).
        previous: ids committed before the buffer (the prompt: whisper_streaming's
            ``prompt()`` of text scrolled out of the buffer).
        committed: tokens committed inside the buffer (in order).
        final: the input ended: commit everything (flush).
    """

    audio: np.ndarray
    start_s: float
    previous: tuple[int, ...]
    committed: tuple[StreamToken, ...]
    final: bool = False

    @property
    def duration_s(self) -> float:
        return len(self.audio) / SAMPLE_RATE

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def n_frames(self) -> int:
        """The buffer's encoder frames (20 ms each)."""
        return int(np.ceil(len(self.audio) / (SAMPLE_RATE * FRAME_S)))

    @property
    def forced(self) -> tuple[int, ...]:
        return tuple(t.id for t in self.committed)


@dataclass(frozen=True)
class Update:
    """A policy's answer to one update.

    Attributes:
        commit: tokens that became final now (after the view's committed ones).
        tentative: tokens shown after them that may still change.
        trim_s: trim the buffer so that it starts here (stream s), or None.
        trim_reason: why (``Trimmed.reason``).
        waited: AlignAtt's stop, or None.
        decode_s: seconds the policy spent decoding.
        decodes: how many decodes it ran.
    """

    commit: tuple[StreamToken, ...] = ()
    tentative: tuple[StreamToken, ...] = ()
    trim_s: float | None = None
    trim_reason: str = ""
    waited: Waited | None = None
    decode_s: float = 0.0
    decodes: int = 0


class Policy(Protocol):
    """A streaming policy: the driver calls :meth:`update` every ``step_s`` s of new audio,
    and once with ``view.final`` at the end of the input."""

    name: str
    step_s: float

    def update(self, view: BufferView, decoder: Decoder) -> Update:
        ...


#: Unicode scripts written without spaces between words: a boundary between two tokens is a word
#: boundary when a character of one of these touches it (whisper's ``split_tokens_on_unicode``
#: languages zh, ja, th, lo, my, yue, and Khmer)
_UNSPACED = ("CJK", "HIRAGANA", "KATAKANA", "HALFWIDTH", "FULLWIDTH", "IDEOGRAPHIC", "THAI", "LAO", "MYANMAR",
             "KHMER", "BOPOMOFO")


def _unspaced(ch: str) -> bool:
    return unicodedata.name(ch, "").startswith(_UNSPACED) or "\u3000" <= ch <= "\u303f"


def is_boundary(tokens: Sequence[StreamToken], k: int) -> bool:
    """Whether ``tokens[:k]`` ends between two words: at either end; before a token that starts
    with a space; or, in scripts written without spaces (Chinese, Japanese, Thai, ...), between
    two tokens one of which has such a character at that boundary. Never inside a character
    (a token whose text is "" holds the first bytes of one: ``WhisperDecoder`` gives the
    character's text to the token that completes it)."""
    if k <= 0 or k >= len(tokens):
        return True
    before, after = tokens[k - 1].text, tokens[k].text
    if not before or not after:
        return False
    return after.startswith(" ") or _unspaced(before[-1]) or _unspaced(after[0])


def whole_words(tokens: Sequence[StreamToken], k: int) -> int:
    """The largest k' <= k such that ``tokens[:k']`` ends at a word boundary (:func:`is_boundary`:
    the next token starts a word, or there is none; in unspaced scripts, a character boundary).
    Committing whole words keeps a half word ("trans" of "transcription") from becoming final."""
    k = min(k, len(tokens))
    while 0 < k < len(tokens) and not is_boundary(tokens, k):
        k -= 1
    return k


def last_word_start(tokens: Sequence[StreamToken]) -> int:
    """Where the last word of ``tokens`` begins (0 for one word or none): SimulStreaming's
    truncation of the last decoded word (``simul_whisper.py``: without its CIF end-of-word model,
    "the last word is ALWAYS trimmed", because a word decoded at the buffer end "is often
    wrong -- transcribing a word in the middle")."""
    k = len(tokens) - 1
    while k > 0 and not is_boundary(tokens, k):
        k -= 1
    return max(k, 0)


def tail_silent(audio: np.ndarray, seconds: float, ratio: float = SILENCE_RATIO) -> bool:
    """Whether the last ``seconds`` of ``audio`` (float32 (n,), 16 kHz) are silence after
    speech: every 20 ms frame there has an RMS below ``ratio`` times the buffer's speech level
    (the 95th percentile of its frames' RMS). False for a buffer shorter than ``seconds`` + one
    frame, or one without speech (all frames under 1e-4 RMS, -80 dBFS)."""
    hop = int(round(SAMPLE_RATE * FRAME_S))
    n = len(audio) // hop
    tail = int(np.ceil(seconds / FRAME_S - 1e-9))
    if seconds <= 0 or n <= tail:
        return False
    rms = np.sqrt(np.mean(np.square(audio[len(audio) - n * hop:].reshape(n, hop), dtype=np.float64), axis=1))
    level = float(np.percentile(rms, 95))
    return level > 1e-4 and bool(np.all(rms[-tail:] < ratio * level))


def common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix all ``seqs`` share (0 for none given)."""
    if not seqs:
        return 0
    n = min(len(s) for s in seqs)
    for i in range(n):
        if len({s[i] for s in seqs}) > 1:
            return i
    return n


def segment_trim(view: BufferView, trim_after_s: float = TRIM_S) -> float | None:
    """whisper_streaming's "segment" buffer trimming, on committed text: once the buffer is
    longer than ``trim_after_s``, the end of the last committed sentence (a committed token
    ending in . ? !) inside it; None when shorter or no committed sentence ends there."""
    if view.duration_s <= trim_after_s:
        return None
    for t in reversed(view.committed):
        if t.text.rstrip().endswith(SENTENCE_END) and view.start_s < t.end_s < view.end_s:
            return t.end_s
    return None
