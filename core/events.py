"""Plain-data events yielded by ``Engine.run`` and the tasks.

Events hold numpy arrays, ints, floats and strings only — never torch tensors —
so the GUI thread can keep them without touching model state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np


@dataclass(frozen=True)
class TokenProb:
    """One candidate token and its probability (0..1)."""

    id: int
    text: str
    prob: float


@dataclass(frozen=True)
class StageReport:
    """What one stage of the sampler chain did at one step (one processor: a penalty,
    temperature or a filter).

    Attributes:
        name: the stage name ("repetition_penalty", "temperature", "top_k", "min_p", ...;
            ``core.options.STAGES``).
        kept: tokens with probability > 0 after this stage.
        mass: the probability those kept tokens had in the distribution entering this
            stage, before renormalisation (0..1; 1.0 for a stage that removes nothing).
        probs: float32 (n_candidates,): the probability after this stage (renormalised)
            of each of the event's ``stage_candidates``.
    """

    name: str
    kept: int
    mass: float
    probs: np.ndarray


@dataclass(frozen=True)
class StepEvent:
    """One emitted token.

    Attributes:
        step: index of this token in the run's token stream (0-based, forced prompt
            not counted; continues across segments/windows/lines/sentences).
        token_id: the chosen token id.
        text: display text of the token (e.g. " fox").
        prob: probability of the chosen token under the processed distribution
            (after repetition penalty, temperature, top-k, top-p).
        raw_prob: its probability under the raw distribution (softmax of the logits,
            temperature 1, no filtering, but with the model's hard rules such as
            suppressed tokens applied).
        topk: the ``top_k_report`` most probable tokens of the processed distribution.
        raw_topk: the same for the raw distribution.
        entropy: entropy of the processed distribution, nats.
        cross_attention: float32 array (layers, heads, source_len) — the new token's
            attention over the encoder positions, or None if not captured.
        segment: index of the input segment (audio window, image line, sentence).
        source_offset: for segmented inputs, the position of this segment's column 0
            in the whole input, in the source's unit (encoder frames, pixels, tokens).
        rank: 1-based rank of the chosen token in the raw distribution (1 = the model's
            favourite; GLTR's rank buckets colour by it).
        raw_entropy, raw_varentropy: entropy (nats) and varentropy (nats², the variance
            of the surprise -log p) of the raw distribution, as entropix plots them.
        stages: one report per stage of the sampler chain, in the order applied (empty
            when no processor ran).
        stage_candidates: the tokens whose probabilities ``stages[i].probs`` give (the
            top tokens of every stage's distribution), with their raw probability.
        mu: a stateful sampler's state when this token was chosen (mirostat's target
            surprise mu, bits), or None.
    """

    step: int
    token_id: int
    text: str
    prob: float
    raw_prob: float
    topk: list[TokenProb]
    raw_topk: list[TokenProb]
    entropy: float
    cross_attention: np.ndarray | None = None
    segment: int = 0
    source_offset: int = 0
    rank: int = 1
    raw_entropy: float = 0.0
    raw_varentropy: float = 0.0
    stages: tuple[StageReport, ...] = ()
    stage_candidates: tuple[TokenProb, ...] = ()
    mu: float | None = None

    @property
    def kept(self) -> int:
        """Tokens left with probability > 0 after the whole chain (0 = not reported)."""
        return self.stages[-1].kept if self.stages else 0


@dataclass(frozen=True)
class Hypothesis:
    """One live beam: its generated token ids (no prompt), text and score."""

    token_ids: list[int]
    text: str
    score: float  # cumulative log-probability (length penalty not applied)
    finished: bool = False


@dataclass(frozen=True)
class BeamEvent:
    """The live beams after a beam-search step, best first."""

    step: int
    beams: list[Hypothesis]
    finished: list[Hypothesis] = field(default_factory=list)
    segment: int = 0


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
    # something the user should know about this segment's output ("" = nothing), shown in the window
    warning: str = ""


@dataclass
class RunStats:
    """Timing of one run. Seconds; ``rtf`` = processing time / audio duration (speech only)."""

    load_s: float = 0.0
    encode_s: float = 0.0
    decode_s: float = 0.0
    n_tokens: int = 0
    audio_s: float | None = None
    encoder_cached: bool = False

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


Event = Union[StepEvent, BeamEvent, SegmentEvent, Finished]
