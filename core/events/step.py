"""The per-token events: ``StepEvent`` with its candidates (``TokenProb``), sampler-chain
reports (``StageReport``), logit lens (``LensEntry``) and the cross-attention that may be
moved to disk (``core.spill``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from core.spill import Spilled, SpillFile, load_many


@dataclass(frozen=True)
class TokenProb:
    """One candidate token and its probability (0..1)."""

    id: int
    text: str
    prob: float


@dataclass(frozen=True)
class Placement:
    """Where one ``Engine.run``'s events sit in the whole input, for an input decoded in
    segments (audio windows, image lines, sentences): copied into its StepEvents, BeamEvents
    and SpeculationRounds. The default is a run on its own (all 0).

    Attributes:
        step_offset: the step number of the run's first token (``StepEvent.step`` counts on
            across segments).
        segment: the input segment's index (``StepEvent.segment``).
        source_offset: the segment's column 0 in the whole input, in the source's unit
            (encoder frames, pixels, tokens; ``StepEvent.source_offset``).
    """

    step_offset: int = 0
    segment: int = 0
    source_offset: int = 0

    @classmethod
    def of(cls, place: "Placement | None", keywords: dict) -> "Placement":
        """``place``, or the Placement that the keywords ``step_offset=``, ``segment=``,
        ``source_offset=`` spell (the older spelling ``Engine.run`` still takes).

        Raises:
            TypeError: another keyword, or both ``place`` and keywords.
        """
        unknown = sorted(set(keywords) - {"step_offset", "segment", "source_offset"})
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}; a run's placement is "
                            "place=Placement(step_offset=, segment=, source_offset=)")
        if place is not None and keywords:
            raise TypeError(f"give place= or {', '.join(sorted(keywords))}=, not both")
        return place if place is not None else cls(**keywords)


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
        amateur: contrastive decoding only: float32 (n_candidates,), the amateur's probability
            (softmax of its logits: the amateur model's, or the premature layer's lens) of each
            candidate; None for every other stage. The expert's is the distribution entering
            the stage (the previous stage's ``probs``, or the candidates' raw probability).
        note: one line on what the stage used at this step ("amateur layer 3 of 6 (auto, JS
            0.0123)"); "" when it has nothing to say.
    """

    name: str
    kept: int
    mass: float
    probs: np.ndarray
    amateur: np.ndarray | None = None
    note: str = ""


@dataclass(frozen=True)
class LensEntry:
    """The logit lens of one decoder layer at one step (nostalgebraist 2020): what the
    model's final norm and output projection make of that layer's output.

    The distribution is raw, as ``StepEvent.raw_prob``: softmax of the layer's logits with
    the model's hard rules (suppressed tokens) applied, temperature 1, no penalty or
    filter. The output layer's entry is the model's own raw distribution.

    Attributes:
        layer: the decoder layer, 0-based; the last entry of ``StepEvent.lens`` is the
            output layer (the model's own distribution).
        id, text, prob: the layer's most probable token and its probability.
        topk: the layer's ``top_k_report`` most probable tokens (``id``, ``prob`` first).
        logprob: the natural log-probability at this layer of the token the step emitted
            (``StepEvent.token_id``); -inf where a hard rule forbids it, NaN if unknown.
            ``logprob[i] - logprob[i - 1]`` is what layer ``i`` promoted (> 0) or
            suppressed (< 0) the token by (``core.analysis.lens.deltas``).
    """

    layer: int
    id: int
    text: str
    prob: float
    topk: list[TokenProb]
    logprob: float


class _AttentionField:
    """Storage of ``StepEvent.cross_attention``: the array itself, or, once the event was
    :meth:`~StepEvent.spill_attention`-ed, a :class:`core.spill.Spilled` handle that every
    read loads back (float32, rounded to float16). Readers always get an array or None."""

    def __set_name__(self, owner, name: str) -> None:
        self.slot = f"_{name}_stored"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return None  # the dataclass default
        v = obj.__dict__.get(self.slot)
        return v.load() if isinstance(v, Spilled) else v

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.slot] = value


class _SpillsAttention:
    """What an event with one large attention array (an :class:`_AttentionField` named by
    ``_ATTENTION``) offers to move it to disk and to ask about it without loading it:
    ``StepEvent.cross_attention``, ``AttemptEvent.end_attention``."""

    _ATTENTION = "cross_attention"

    def _stored(self):
        return self.__dict__.get(f"_{self._ATTENTION}_stored")

    @property
    def has_attention(self) -> bool:
        """Whether the event carries its attention (in memory or spilled), without loading it."""
        return self._stored() is not None

    @property
    def attention_shape(self) -> tuple[int, ...] | None:
        """The attention's shape (None when not captured), without loading a spilled one."""
        v = self._stored()
        return None if v is None else tuple(np.shape(v) if not isinstance(v, Spilled) else v.shape)

    @property
    def attention_spilled(self) -> bool:
        """Whether the attention was moved to disk (:meth:`spill_attention`)."""
        return isinstance(self._stored(), Spilled)

    @property
    def attention_nbytes(self) -> int:
        """Bytes of attention this event keeps in memory (0 when none or spilled)."""
        v = self._stored()
        return int(v.nbytes) if isinstance(v, np.ndarray) else 0

    def spill_attention(self, store: SpillFile, min_bytes: int = 0) -> int:
        """Move the attention into ``store`` (float16 on disk) when it takes at least
        ``min_bytes`` in memory; reading the field then loads it back on each read. The
        event is changed in place, so every holder of it (the run, the long-form attempts,
        the views) frees the memory at once; nothing else about it changes.

        Returns:
            the bytes freed in memory (0: nothing to spill, already spilled, or smaller
            than ``min_bytes``).

        Raises:
            OSError: the store could not be written (the attention stays in memory).
        """
        v = self._stored()
        if not isinstance(v, np.ndarray) or v.nbytes < min_bytes or not np.isfinite(v).all():
            return 0
        self.__dict__[f"_{self._ATTENTION}_stored"] = store.put(v)
        return int(v.nbytes)


@dataclass(frozen=True)
class StepEvent(_SpillsAttention):
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
            attention over the encoder positions, or None if not captured. A long run's
            views may move it to disk (:meth:`spill_attention`); reading it then loads it
            back (a new float32 array, values rounded to float16).
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
        forced: the token was forced (a fork, ``Engine.run(forced_ids=...)``, the CLI's
            ``--prefix``), not chosen by the strategy; its probabilities are still the
            model's.
        lens: the logit lens of the step's distribution, one entry per decoder layer
            (the last being the output layer), when ``DecodingOptions.capture_lens`` is on;
            empty otherwise. For beam search, the lens of the beam row the token was
            chosen from.
        speculation: speculative decoding only (``SPECULATION_KINDS``): "accepted" (a
            drafted token the target accepted), "resampled" (the target rejected the draft
            at this position and drew this token from norm(max(0, p - q))), "bonus" (every
            drafted token was accepted and this one came from p alone); "" for a token of a
            plain run. Its probabilities are the target's, as in plain decoding.
        spec_round: the speculation round (``SpeculationRound.round``) that emitted it; -1
            outside speculative decoding.
        time_ms: wall time (ms, ``time.perf_counter``) of the decoder call that produced the
            step's distribution (``Inference.step``: one new token with the KV cache, the
            whole prefix without it); 0.0 where unmeasured (speculative rounds, fakes, old
            explorations). Not compared: identical runs differ in it.
    """

    step: int
    token_id: int
    text: str
    prob: float
    raw_prob: float
    topk: list[TokenProb]
    raw_topk: list[TokenProb]
    entropy: float
    cross_attention: np.ndarray | None = _AttentionField()
    segment: int = 0
    source_offset: int = 0
    rank: int = 1
    raw_entropy: float = 0.0
    raw_varentropy: float = 0.0
    stages: tuple[StageReport, ...] = ()
    stage_candidates: tuple[TokenProb, ...] = ()
    mu: float | None = None
    forced: bool = False
    lens: list[LensEntry] = field(default_factory=list)
    speculation: str = ""
    spec_round: int = -1
    time_ms: float = field(default=0.0, compare=False)

    @property
    def drafted(self) -> bool:
        """The draft proposed a token at this position (accepted, or rejected and resampled)."""
        return self.speculation in ("accepted", "resampled")

    @property
    def accepted(self) -> bool:
        """The drafted token at this position was accepted by the target."""
        return self.speculation == "accepted"

    @property
    def kept(self) -> int:
        """Tokens left with probability > 0 after the whole chain (0 = not reported)."""
        return self.stages[-1].kept if self.stages else 0

    def renumbered(self, step: int) -> "StepEvent":
        """A copy of this event at ``step`` (a fork's later segments, renumbered) that shares
        its attention storage: a spilled attention stays spilled (``dataclasses.replace``
        would load it back into memory)."""
        out = replace(self, step=step, cross_attention=None)
        out.__dict__["_cross_attention_stored"] = self.__dict__.get("_cross_attention_stored")
        return out


def load_attention(events) -> list[np.ndarray | None]:
    """``[ev.cross_attention for ev in events]``, reading the spilled ones together
    (``core.spill.load_many``: one read per window instead of one per step)."""
    stored = [ev.__dict__.get("_cross_attention_stored") if isinstance(ev, StepEvent) else None for ev in events]
    spilled = [i for i, v in enumerate(stored) if isinstance(v, Spilled)]
    loaded = dict(zip(spilled, load_many([stored[i] for i in spilled])))
    return [loaded[i] if i in loaded else ev.cross_attention for i, ev in enumerate(events)]
