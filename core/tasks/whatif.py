"""Input what-ifs: which output tokens depended on which part of the input (issue 13, section 3).

Two questions, both answered by forcing the run's own tokens through another encoder output
(``Engine.run(forced_ids=...)`` reports a forced token with its real probabilities):

**Mask** (``core.tasks.segments.what_if_segments`` with ``kind="mask"``): a span of the input is taken away —
audio silenced (:func:`silence_span`: zeros from t0 to t1), an image region blanked
(:func:`blank_region`: filled with the image's background colour, :func:`background_color`),
source tokens dropped (the translation task removes them from its chunk). Each segment the
mask touches (a 30 s window, an OCR line, a sentence) is encoded again — its input changed, so
its encoder-cache key is new — and

1. decoded freely with the run's own options: the what-if branch, what the model writes
   without that part;
2. scored: the original tokens of the segment are forced through the masked encoder output,
   giving per token its probability under the masked input. Its change from the probability
   under the real input (the same forcing through the real encoder output) says which tokens
   depended on the masked part (:attr:`TokenShift.depends`).

Segments the mask does not touch are left alone.

**No input** (``kind="prior"``): every segment's encoder output is replaced by that of an input
with nothing in it — all-zero audio of the same length, a blank image of the background
colour, an empty source — and the run's tokens are forced through it. A token's probability
then is what the decoder's language prior alone gives it (conditioned on the tokens before it,
but on no evidence). :attr:`TokenShift.prior_explained` marks tokens that the prior explains
about as well as the input does: where hallucinations come from (:data:`PRIOR_MIN`,
:data:`PMI_MAX` give the rule and why).

Probabilities here are *raw* (``StepEvent.raw_prob``: softmax of the logits with the model's
hard rules only, no temperature, penalties or filters), so that the comparison is the model's
own and does not depend on the strategy: under a top-p filter a token outside the nucleus would
get 0 and look as if it had depended on the masked part when only the filter cut it.

Events (plain data, as ``core.events``): a mask stream yields per touched segment its
``SegmentEvent``, the re-decode's ``StepEvent``/``BeamEvent``s (steps numbered from the
segment's first step in the original run, like a fork) and one :class:`WhatIfScores`, then a
``Finished`` for the re-decoded segments and one :class:`WhatIfDone`; a prior stream yields a
:class:`WhatIfScores` per segment and one :class:`WhatIfDone`.

No Qt, no task specifics: the tasks (``core.tasks.speech/ocr/translation``) give the segments,
the original preparation and the masked encoding (their ``masked`` and ``emptied``), and
``core.tasks.base.SegmentedTask`` runs the segment loop (``core.tasks.segments.what_if_segments``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from core.backends.base import DecoderPrompt, EncoderOutput
from core.events import Placement, SegmentEvent, StepEvent
from core.options import DecodingOptions

#: a token "depended on the masked part" when its probability under the masked input is at
#: most this fraction of its probability under the real input ...
DEPEND_RATIO = 0.5
#: ... and fell by at least this much (absolute), so that a token of p 0.004 -> 0.001 is not
#: flagged: halving and a visible drop are both needed
DEPEND_DROP = 0.1

#: hallucination-prone: the prior alone (no input) gives the token at least this probability ...
PRIOR_MIN = 0.1
#: ... and the input adds less than this much log-probability to it: ln p(y | x) - ln p(y | ∅)
#: < ln 2, i.e. the input does not even double the token's probability over the prior.
#: ln p(y|x) - ln p(y|∅) is the pointwise mutual information between the token and the input
#: (given the tokens before it). Low PMI on a token the decoder's language model likes is the
#: signature of hallucination that van der Poel, Cotterell & Meister (2022, "Mutual Information
#: Alleviates Hallucinations in Abstractive Summarization", EMNLP) found and decode against
#: (CPMI: they down-weight p(y) where the model is uncertain); Xu et al. (2023, "Understanding
#: and Detecting Hallucinations in Neural Machine Translation via Model Introspection", TACL)
#: detect hallucinations as outputs with low source contribution. Whisper's well-known output on
#: silence ("Thank you.", Koenecke et al. 2024, "Careless Whisper") is the extreme case: prior
#: probability high, no input behind it. Both conditions are needed: a token of prior 0.01 and
#: input 0.015 has low PMI too but is not something the prior "explains".
PMI_MAX = math.log(2.0)

KINDS = ("mask", "prior")


@dataclass(frozen=True)
class TokenShift:
    """One original token under the real input and under the masked (or empty) input.

    Attributes:
        step: its step in the original run; segment: its segment.
        token_id, text: the token.
        p_input: its raw probability under the real input (forced through the real encoder
            output, the tokens before it as the run had them).
        p_other: its raw probability under the masked input (kind "mask") or the empty input
            (kind "prior": the decoder's language prior).
        other_top: the token the masked/empty input's model puts first at this position (text).
    """

    step: int
    segment: int
    token_id: int
    text: str
    p_input: float
    p_other: float
    other_top: str = ""

    @property
    def delta(self) -> float:
        """p_other - p_input (negative: the token lost probability without that input)."""
        return self.p_other - self.p_input

    @property
    def pmi(self) -> float:
        """ln p_input - ln p_other: how much the (masked part of the) input raised the token's
        log-probability (+inf if p_other is 0, -inf if p_input is 0)."""
        if self.p_other <= 0:
            return math.inf if self.p_input > 0 else 0.0
        if self.p_input <= 0:
            return -math.inf
        return math.log(self.p_input) - math.log(self.p_other)

    @property
    def depends(self) -> bool:
        """The token depended on the masked part: without it its probability at least halved
        (:data:`DEPEND_RATIO`) and fell by at least :data:`DEPEND_DROP`."""
        return self.p_other <= DEPEND_RATIO * self.p_input and self.p_input - self.p_other >= DEPEND_DROP

    @property
    def prior_explained(self) -> bool:
        """(Kind "prior".) Hallucination-prone: the prior alone gives it at least
        :data:`PRIOR_MIN` and the input does not double that (PMI < :data:`PMI_MAX`; a prior at
        least as high as the input's probability included)."""
        return is_prior_explained(self.p_input, self.p_other)


def is_prior_explained(p_input: float, p_prior: float) -> bool:
    """The marking rule of :attr:`TokenShift.prior_explained` (see :data:`PMI_MAX`)."""
    if p_prior < PRIOR_MIN:
        return False
    return p_input <= 0 or math.log(max(p_input, 1e-300)) - math.log(p_prior) < PMI_MAX


@dataclass(frozen=True)
class WhatIfScores:
    """One segment's original tokens scored under the masked (or empty) input.

    Attributes:
        kind: "mask" or "prior".
        segment: the segment.
        shifts: one per original token of the segment, in step order.
        text, token_ids: the segment's free re-decode under the masked input (kind "mask";
            "" and () for "prior").
    """

    kind: str
    segment: int
    shifts: tuple[TokenShift, ...]
    text: str = ""
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class WhatIfDone:
    """The end of a what-if stream.

    Attributes:
        kind: "mask" or "prior".
        description: what was changed ("silence 1.20–1.65 s", "blank 80×20 px at (10, 4)",
            "drop 'door'", "no input: silence").
        segments: the segments that were scored (and for "mask" re-decoded), in order.
        shifts: every scored token, in step order.
        cancelled: the stream stopped early.
        seconds: how long it took.
    """

    kind: str
    description: str
    segments: tuple[int, ...]
    shifts: tuple[TokenShift, ...]
    cancelled: bool = False
    seconds: float = 0.0

    def depending(self) -> list[TokenShift]:
        """The tokens that depended on the masked part (kind "mask")."""
        return [s for s in self.shifts if s.depends]

    def prior_explained(self) -> list[TokenShift]:
        """The hallucination-prone tokens (kind "prior")."""
        return [s for s in self.shifts if s.prior_explained]


@dataclass(frozen=True)
class OriginalSegment:
    """The original run's tokens of one segment: its first step and its token ids."""

    step_offset: int
    token_ids: tuple[int, ...]


def original_segments(steps: Iterable[StepEvent], n_segments: int) -> dict[int, OriginalSegment]:
    """The original run's tokens per segment from its StepEvents (in step order).

    A segment with no token gets the step after the previous segment's last token as its
    offset (its re-decode is numbered from there) and no ids.
    """
    by_seg: dict[int, list[StepEvent]] = {}
    for ev in sorted(steps, key=lambda e: e.step):
        by_seg.setdefault(ev.segment, []).append(ev)
    out: dict[int, OriginalSegment] = {}
    nxt = 0
    for i in range(n_segments):
        evs = by_seg.get(i, [])
        offset = evs[0].step if evs else nxt
        out[i] = OriginalSegment(offset, tuple(e.token_id for e in evs))
        nxt = offset + len(evs)
    return out


# ------------------------------------------------------------------------------ masks
def silence_span(audio: np.ndarray, t0: float, t1: float, sample_rate: int) -> np.ndarray:
    """A copy of ``audio`` with the samples from ``t0`` to ``t1`` seconds set to 0 (a long clip
    kept as int16, ``core.inputs.pcm16.Pcm16Audio``, stays int16).

    Raises:
        ValueError: an empty or reversed span, or one outside the audio.
    """
    from core.inputs.pcm16 import Pcm16Audio

    if isinstance(audio, Pcm16Audio):
        return audio.silenced(*span_samples(len(audio), t0, t1, sample_rate))
    audio = np.asarray(audio, dtype=np.float32)
    a, b = span_samples(len(audio), t0, t1, sample_rate)
    out = audio.copy()
    out[a:b] = 0.0
    return out


def span_samples(n: int, t0: float, t1: float, sample_rate: int) -> tuple[int, int]:
    """The sample range [a, b) of the span ``t0..t1`` seconds, clipped to ``n`` samples.

    Raises:
        ValueError: an empty or reversed span, or one outside the audio.
    """
    if not (math.isfinite(t0) and math.isfinite(t1)) or t1 <= t0:
        raise ValueError(f"the span must run forward: got {t0:.3f}–{t1:.3f} s; drag from its start to its end")
    a = max(0, int(round(t0 * sample_rate)))
    b = min(n, int(round(t1 * sample_rate)))
    if b <= a:
        raise ValueError(f"the span {t0:.2f}–{t1:.2f} s lies outside the audio (0–{n / sample_rate:.2f} s)")
    return a, b


def background_color(image) -> tuple[int, int, int]:
    """The image's background colour: the per-channel median of its outermost ring of pixels
    (first and last row and column).

    For a page, a screenshot or a photographed sign the border is paper / background, so
    filling with it is what "no ink here" looks like to the reader; the median ignores text
    or a frame that touches the border in a few places.
    """
    a = np.asarray(image.convert("RGB"), dtype=np.uint8)
    ring = np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]], axis=0)
    return tuple(int(v) for v in np.median(ring, axis=0))  # type: ignore[return-value]


def blank_region(image, region: tuple[int, int, int, int], color: tuple[int, int, int] | None = None):
    """A copy of ``image`` (RGB PIL) with ``region`` ((x, y, w, h) pixels, clipped to the
    image) filled with ``color`` (default: :func:`background_color`).

    Raises:
        ValueError: a region of zero size or outside the image.
    """
    from PIL import ImageDraw

    from core.inputs.images import check_region

    img = image.convert("RGB").copy()
    x, y, w, h = check_region(region, img.size)
    ImageDraw.Draw(img).rectangle([x, y, x + w - 1, y + h - 1], fill=color or background_color(image))
    return img


def blank_image(image, color: tuple[int, int, int] | None = None):
    """An image of ``image``'s size filled with ``color`` (default: its background colour)."""
    from PIL import Image

    return Image.new("RGB", image.size, color or background_color(image))


def boxes_touched(boxes: Sequence[tuple[int, int, int, int]], region: tuple[int, int, int, int]) -> list[int]:
    """Indices of the boxes ((x0, y0, x1, y1), exclusive ends) that overlap ``region`` (x, y, w, h)."""
    x, y, w, h = region
    return [i for i, (x0, y0, x1, y1) in enumerate(boxes) if x < x1 and x0 < x + w and y < y1 and y0 < y + h]


def expand_columns(attention: np.ndarray | None, kept: Sequence[int], n: int) -> np.ndarray | None:
    """Cross-attention over the kept source positions (…, len(kept)) put back at those
    positions of ``n`` columns, zeros where positions were dropped (so a masked run's heatmap
    lines up with the original source tokens)."""
    if attention is None:
        return None
    out = np.zeros(attention.shape[:-1] + (n,), dtype=attention.dtype)
    out[..., list(kept)] = attention[..., : len(kept)]
    return out


# ------------------------------------------------------------------------------ scoring
def score_tokens(engine, encoded: EncoderOutput, prompt: DecoderPrompt, token_ids: Sequence[int], *,
                 step_offset: int = 0, segment: int = 0,
                 cancel: Callable[[], bool] | None = None) -> list[StepEvent]:
    """Force ``token_ids`` through ``encoded`` after ``prompt``; their StepEvents (one per
    token, ``raw_prob`` = the token's raw probability given the tokens before it).

    Runs greedy with ``max_new_tokens = len(token_ids)`` so nothing is decoded after them (the
    raw distribution does not depend on the strategy), no attention, no KV-cache reuse. Fewer
    events come back when ``cancel`` stopped it or the prompt's length limit cut the tokens.
    """
    ids = [int(t) for t in token_ids]
    if not ids:
        return []
    options = DecodingOptions(max_new_tokens=len(ids), top_k_report=1, capture_attention=False)
    return [ev for ev in engine.run(encoded, prompt, options, forced_ids=ids, reuse_cache=False,
                                    place=Placement(step_offset, segment), cancel=cancel)
            if isinstance(ev, StepEvent)]


def shifts_of(real: list[StepEvent], other: list[StepEvent]) -> tuple[TokenShift, ...]:
    """Pair the same forced tokens scored under the real and the other encoder output."""
    return tuple(
        TokenShift(step=a.step, segment=a.segment, token_id=a.token_id, text=a.text, p_input=float(a.raw_prob),
                   p_other=float(b.raw_prob), other_top=b.raw_topk[0].text if b.raw_topk else "")
        for a, b in zip(real, other)
    )


@dataclass(frozen=True)
class Ready:
    """One segment as the original run prepared it: its encoder output, its prompt and its
    SegmentEvent (``core.tasks.base.Prepared`` has these fields)."""

    encoded: EncoderOutput
    prompt: DecoderPrompt
    event: SegmentEvent
