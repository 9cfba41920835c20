"""Beam search's events: the live hypotheses and the beam tree's nodes, per step."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.events.step import TokenProb


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
