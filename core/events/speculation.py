"""Speculative decoding's events (``core.speculative``): each round's drafted tokens as the
target judged them, and the run's summary (``RunStats.speculative``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.events.step import TokenProb


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
