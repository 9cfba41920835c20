"""What a streaming run yields (numpy / Python data only, like ``core.events``).

The terms are whisper_streaming's (Macháček et al. 2023): the *buffer* is the audio the
decoder currently sees; its tokens are *tentative* (shown, may still be revised) until the
policy *commits* them (final); the buffer is *trimmed* at its start once its committed text is
no longer needed as audio (that text then goes into the prompt). Times are seconds of the
input stream ("audio time") unless named ``wall_s`` (seconds on the clock since the stream
began).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class StreamToken:
    """One decoded token of a streaming run.

    Attributes:
        id: the token id.
        text: its text (" fox").
        end_s: where the token's word ends in the audio, seconds from the start of the stream
            (word timing over the alignment heads; a token inside a word has the word's end).
        frame: the alignment heads' most-attended encoder frame (20 ms) when it was chosen,
            counted from the start of the buffer it was decoded in; -1 when unknown.
    """

    id: int
    text: str
    end_s: float
    frame: int = -1


def text_of(tokens) -> str:
    """The tokens' texts joined ("" for none)."""
    return "".join(t.text for t in tokens)


@dataclass(frozen=True)
class Tentative:
    """The buffer's uncommitted tail as decoded now: revisable, replaces the last Tentative.

    Attributes:
        tokens: the tentative tokens, in order, after everything committed.
        audio_s: how much audio had arrived when it was decoded (s).
        wall_s: seconds since the stream began.
    """

    tokens: tuple[StreamToken, ...]
    audio_s: float
    wall_s: float

    @property
    def text(self) -> str:
        return text_of(self.tokens)


@dataclass(frozen=True)
class Committed:
    """Tokens the policy made final (never revised afterwards).

    Attributes:
        tokens: the newly committed tokens, in order.
        audio_s: how much audio had arrived at the commit (s, audio time).
        wall_s: seconds since the stream began at the commit.
        audio_end_s: where the last committed word ends in the audio (s).
        latency_s: ``audio_s - audio_end_s``: from the end of the word's audio to its commit,
            in audio time (whisper_streaming's latency).
        word_latencies: the same per committed word (s), in order.
    """

    tokens: tuple[StreamToken, ...]
    audio_s: float
    wall_s: float
    audio_end_s: float
    latency_s: float
    word_latencies: tuple[float, ...] = ()

    @property
    def text(self) -> str:
        return text_of(self.tokens)


@dataclass(frozen=True)
class Trimmed:
    """The buffer lost its start: its audio now begins at ``start_s``.

    Attributes:
        start_s: the buffer's new start (s, audio time).
        audio: the samples cut off (float32, 16 kHz): concatenating every Trimmed's audio and the
            final buffer gives the stream back (nothing lost).
        reason: "segment end" | "committed word" | "window" | "too long" | "skipped".
    """

    start_s: float
    audio: np.ndarray = field(repr=False)
    reason: str


@dataclass(frozen=True)
class Waited:
    """AlignAtt stopped: the next token's attention reached the buffer's last frames.

    Attributes:
        token: the token that waited (not emitted).
        frame: its most-attended frame (from the buffer's start).
        limit: the first frame counted as "too close to the end" (``n_frames - f``).
        audio_s: audio arrived so far (s).
        n_frames: the buffer's encoder frames: the zone is frames [limit, n_frames); -1 unknown.
        steps: the decision's rows for a heatmap: ``core.events.StepEvent`` of each token emitted
            in that decode, then of the token that waited, each with ``cross_attention`` = the
            row AlignAtt's rule took the argmax of, float32 (frames,) from the buffer's start (the
            alignment heads' normalised cross-attention scaled to [0, 1], or their mean:
            ``WhisperDecoder.frame_rule``) and the token's text; () when the decoder gave none.
    """

    token: StreamToken
    frame: int
    limit: int
    audio_s: float
    n_frames: int = -1
    steps: tuple = field(default=(), repr=False)


@dataclass(frozen=True)
class FellBehind:
    """Decoding fell behind real time.

    Attributes:
        lag_s: audio that had arrived but was not decoded when the decoder was next free (s).
        skipped_s: (from, to) seconds of audio left out of the decoding to catch up (the take
            itself keeps them); None when the pending audio was merged into one step instead.
        message: for people.
    """

    lag_s: float
    skipped_s: tuple[float, float] | None
    message: str


@dataclass(frozen=True)
class StreamFinished:
    """The end of the stream: everything was committed (flush).

    Attributes:
        text: the final committed transcript.
        audio_s: the stream's length (s).
        wall_s: seconds from start to end.
        decode_s: seconds spent decoding (model calls).
        rtf: ``decode_s / audio_s`` (real-time factor; < 1 keeps up).
        tentative_shown: tentative tokens shown over the run (each Tentative counts its tokens).
        revised: how many of them were revised (the next state differed at their place).
        decodes: how many times the buffer was decoded.
    """

    text: str
    audio_s: float
    wall_s: float
    decode_s: float
    rtf: float
    tentative_shown: int
    revised: int
    decodes: int

    @property
    def revised_fraction(self) -> float:
        return self.revised / self.tentative_shown if self.tentative_shown else 0.0


StreamEvent = Tentative | Committed | Trimmed | Waited | FellBehind | StreamFinished
