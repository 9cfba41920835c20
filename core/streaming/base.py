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

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from core.catalog import FRAME_S, SAMPLE_RATE
from core.streaming.events import StreamToken, Waited

#: whisper_streaming's ``buffer_trimming_sec`` default: trim once the buffer is longer than this
TRIM_S = 15.0
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
    """

    tokens: tuple[StreamToken, ...]
    finished: bool = True
    stopped: StreamToken | None = None
    decode_s: float = 0.0


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


def whole_words(tokens: Sequence[StreamToken], k: int) -> int:
    """The largest k' <= k such that ``tokens[:k']`` ends at a word boundary: the next token
    starts a word (its text begins with a space) or there is none. Committing whole words
    keeps a half word ("trans" of "transcription") from becoming final."""
    k = min(k, len(tokens))
    while 0 < k < len(tokens) and not tokens[k].text.startswith(" "):
        k -= 1
    return k


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
