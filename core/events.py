"""Plain-data events yielded by ``Engine.run`` and the tasks.

Events hold numpy arrays, ints, floats and strings only — never torch tensors —
so the GUI thread can keep them without touching model state.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Union

import numpy as np

from core.spill import Spilled, SpillFile, load_many


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


@dataclass(frozen=True)
class Hypothesis:
    """One live beam: its generated token ids (no prompt), text and score."""

    token_ids: list[int]
    text: str
    score: float  # cumulative log-probability (length penalty not applied)
    finished: bool = False


BEAM_STATUSES = ("alive", "pruned", "finished")


@dataclass(frozen=True)
class BeamNode:
    """One node of the beam tree: a candidate continuation beam search considered.

    Each step creates the top ``2 * beams`` (beam, token) continuations of the running
    beams (per group for diverse beam search), ranked by cumulative score, as
    transformers' beam search does. Node 0 of a run is the root: the prompt
    (``parent`` None, ``step`` = the first step - 1, ``token`` the last prompt token,
    ``text`` "", scores 0, status "alive").

    Attributes:
        id: unique within one ``Engine.run`` (one segment); the root is 0, the others
            count up in creation order (so a parent's id is smaller than its children's).
        parent: id of the node (hypothesis) this one extends; None for the root.
        step: the step it was created at (the BeamEvent's ``step``).
        token: the token id it appends; text: its display text.
        logprob: the token's processed log-probability as beam search ranked it
            (log_softmax of the logits after the processors; for diverse beam search
            with the diversity term subtracted), so ``score == parent.score + logprob``.
        score: cumulative processed log-probability of the hypothesis (prompt excluded).
        normalized: ``score / generated_len ** length_penalty`` with generated_len the
            number of generated tokens (this one and EOS included), transformers'
            formula; for a finished node it is the score its finished hypothesis is
            ranked by.
        status: "alive": it became a running beam at its step (alive nodes stay
            "alive", also when their continuations are all pruned later or the search
            stops); "finished": it ended (EOS, or the max length) and entered the
            finished set; "pruned": considered and dropped (not among the running beams,
            or ended but did not enter the finished set), or a finished node later
            pushed out of the finished set by a better one (then re-sent, see
            ``BeamEvent.nodes``).
        row: the beam row (of the whole batch) whose distribution it was chosen from
            at ``step``: ``BeamEvent.rows[row]`` of that step has its top-k and attention.
        group: diverse beam search's group (0 for plain beam search).
        eos: the token is the end-of-sequence token (the hypothesis ended by EOS; the
            output token ids leave it out).
    """

    id: int
    parent: int | None
    step: int
    token: int
    text: str
    logprob: float
    score: float
    normalized: float
    status: str
    row: int
    group: int = 0
    eos: bool = False


@dataclass(frozen=True)
class BeamRowReport:
    """What one beam row's distribution looked like at one step (shown when a node
    chosen from it is clicked).

    Attributes:
        row: the beam row.
        topk: the processed distribution's most probable tokens (``top_k_report``).
        entropy: of the processed distribution, nats.
        attention: float32 (source_len,): the cross-attention of the row's newest
            position, averaged over layers and heads; None if not captured.
        raw_topk: the raw distribution's most probable tokens (softmax of the logits with
            the hard rules only); it differs from ``topk`` when a penalty ran.
    """

    row: int
    topk: list[TokenProb]
    entropy: float
    attention: np.ndarray | None = None
    raw_topk: list[TokenProb] = field(default_factory=list)


@dataclass(frozen=True)
class BeamEvent:
    """The live beams after a beam-search step, best first, and the beam tree's growth.

    Attributes:
        step: the step (global across segments, as ``StepEvent.step``).
        beams: the running hypotheses after this step, best first.
        finished: the finished hypotheses, best length-normalised score first.
        segment: the input segment.
        nodes: the beam-tree nodes created at this step (the root first in the run's
            first BeamEvent), followed by nodes of earlier steps whose status changed
            (a finished node pushed out of the finished set, re-sent as "pruned" with
            the same id). A consumer builds the tree by upserting:
            ``for n in ev.nodes: tree[n.id] = n`` (ids are per segment: key by
            ``(ev.segment, n.id)`` across segments).
        rows: one report per beam row at this step, indexed by row (``rows[node.row]``
            for the nodes created at this step).
        best: id of the node that is the output if the search ended now (the best
            finished hypothesis, else the best running one). In the segment's last
            BeamEvent it is the result: the tokens on the path root -> best, without a
            final EOS, are that segment's generated ids (EOS included in the tree when
            the hypothesis ended by EOS). None if there is no tree.
    """

    step: int
    beams: list[Hypothesis]
    finished: list[Hypothesis] = field(default_factory=list)
    segment: int = 0
    nodes: list[BeamNode] = field(default_factory=list)
    rows: list[BeamRowReport] = field(default_factory=list)
    best: int | None = None


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


SPECULATION_KINDS = ("accepted", "resampled", "bonus")
"""``StepEvent.speculation`` values (besides "" for a plain token)."""


@dataclass(frozen=True)
class DraftToken:
    """One drafted token of a speculation round, as the target judged it (Leviathan et al.
    2023, Algorithm 1).

    Attributes:
        id, text: the drafted token, in the target's vocabulary.
        q: the draft's probability of it (its processed distribution; 1.0 for a
            deterministic draft: n-gram lookup, a branch).
        p: the target's processed probability of it at the same position.
        ratio: min(1, p / q), the probability of accepting it.
        u: the uniform draw it was compared with (accept if u < p / q); None under greedy
            verification (accept iff it is the target's argmax).
        accepted: the target kept it. Tokens after the first rejection are not judged:
            ``accepted`` False and ``judged`` False.
        judged: the target looked at it (every token up to and including the first
            rejection).
    """

    id: int
    text: str
    q: float
    p: float
    ratio: float
    u: float | None
    accepted: bool
    judged: bool = True


@dataclass(frozen=True)
class SpeculationRound:
    """One round of speculative decoding: the draft proposed ``gamma`` tokens, the target
    scored them in one decoder call and kept a prefix, then added one token of its own
    (resampled at the first rejection, or the bonus token when all were accepted).

    It is yielded after the round's StepEvents (whose ``spec_round`` is ``round``).

    Attributes:
        round: 0-based within the run (one ``Engine.run``, one segment).
        step: the step number of the first token the round emitted (global, as
            ``StepEvent.step``).
        segment: the input segment.
        gamma: draft tokens asked for this round (the adaptive schedule's value).
        drafted: what the draft proposed (may be fewer than ``gamma``: an n-gram lookup
            with a short match, or none at all).
        n_accepted: drafted tokens kept.
        emitted_id, emitted_text: the target's own token ending the round ("resampled" or
            "bonus"); None / "" when the round ended on EOS or the token budget.
        emitted_kind: "resampled" | "bonus" | "" (none).
        residual_topk: at a rejection under sampling, the most probable tokens of the
            residual distribution norm(max(0, p - q)) the token was resampled from; under
            greedy verification the target's top-k at that position; [] otherwise.
        draft_ms: wall time of the draft's steps this round, milliseconds.
        target_ms: wall time of the target's one verifying decoder call, milliseconds.
        draft: the draft's name ("ngram", "model:tiny.en", "early-exit:4", "branch").
        near_tie: greedy verification only: the target's top-2 logit margin at a position
            of this round was < 1e-4, so scoring several positions in one call may pick
            another token than single steps would (marked for the user).
    """

    round: int
    step: int
    segment: int
    gamma: int
    drafted: tuple[DraftToken, ...]
    n_accepted: int
    emitted_id: int | None
    emitted_text: str
    emitted_kind: str
    residual_topk: list[TokenProb] = field(default_factory=list)
    draft_ms: float = 0.0
    target_ms: float = 0.0
    draft: str = ""
    near_tie: bool = False


@dataclass
class SpeculationSummary:
    """Speculative decoding over one run (``RunStats.speculative``; the CLI's ``--json``
    ``"speculative"`` block).

    Attributes:
        draft: the draft's name.
        rounds: how many rounds (target calls) ran.
        draft_tokens: tokens drafted in all; accepted: of them, kept.
        judged: of them, the ones the target judged (the accepted ones and each round's first
            rejection; the drafted tokens after a rejection are never looked at).
        tokens: tokens emitted (accepted + the target's own).
        acceptance_rate: accepted / drafted (0 when nothing was drafted): the share of the
            draft's work that was kept (what the views display as α).
        judged_acceptance_rate: α̂ = accepted / judged (0 when nothing was judged): the
            estimate of Leviathan et al.'s α (the chance that the target keeps a drafted token),
            which the predicted speed-up uses.
        tokens_per_target_call: tokens / rounds. Can be below 1: the call that emits EOS
            (or accepts a drafted EOS) counts as a round but EOS is no reported token, so a
            run that never keeps a draft gives n / (n + 1).
        c: the measured cost of one draft step relative to one target step (draft ms
            per drafted token / target ms per plain step); None when not measured.
        speedup_predicted: Leviathan et al. 2023 Theorem 3.8 from α, the mean γ and c,
            with the verify call's measured cost; None when not computable.
        speedup_measured: ms per token of plain greedy on the same input in the same
            process / this run's; None when no plain run was timed.
        switched_off: the rounds told speculation was losing and it was switched off for
            the rest of the segment (the reason, "" when it stayed on).
    """

    draft: str
    rounds: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    tokens: int = 0
    c: float | None = None
    speedup_predicted: float | None = None
    speedup_measured: float | None = None
    switched_off: str = ""
    judged: int = 0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def judged_acceptance_rate(self) -> float:
        return self.accepted / self.judged if self.judged else 0.0

    @property
    def tokens_per_target_call(self) -> float:
        return self.tokens / self.rounds if self.rounds else 0.0

    def to_dict(self) -> dict:
        return {
            "draft": self.draft, "acceptance_rate": self.acceptance_rate,
            "tokens_per_target_call": self.tokens_per_target_call, "draft_tokens": self.draft_tokens,
            "accepted": self.accepted, "rounds": self.rounds, "c": self.c,
            "speedup_measured": self.speedup_measured, "speedup_predicted": self.speedup_predicted,
            "switched_off": self.switched_off, "judged": self.judged,
            "judged_acceptance_rate": self.judged_acceptance_rate,
        }


Event = Union[StepEvent, BeamEvent, SegmentEvent, AttemptEvent, SpeculationRound, Finished]
