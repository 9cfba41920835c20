"""The branches of an exploration (``gui.run_state``) and the queries that walk them, without Qt.

A :class:`Branch` keeps only its own steps (``fork_step`` and after); the steps before are its
parent's. The functions here answer for a branch given every branch by id (``branches``):
its step at an index, its steps in order, its speculation rounds, its segments, the order in
which a view shows them (:func:`replay`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Iterable

from core.events import Finished, SegmentEvent, SpeculationRound, StepEvent


def token_logprob(ev: StepEvent, raw: bool = False) -> float:
    """ln p of ``ev``'s token under the processed (or raw) distribution; -inf if p is 0
    (a forced token that the filters had cut)."""
    p = ev.raw_prob if raw else ev.prob
    return math.log(p) if p > 0 else -math.inf


def plain_text(texts: Iterable[str]) -> str:
    """Token texts joined, SentencePiece's word mark ``▁`` as a space, outer spaces stripped."""
    return "".join(texts).replace("▁", " ").strip()


@dataclass
class Branch:
    """One branch of the exploration tree.

    Attributes:
        id: unique in the exploration (the root is 0, forks count up).
        parent: the branch it was forked from (None for the root).
        fork_step: the first step that is its own (0 for the root); steps before it are
            the parent's.
        forced_ids: the token ids forced at ``fork_step`` (one clicked alternative, or
            the tokens of typed text); empty for the root.
        forced_text: their text; replaced_text: the parent's token text at ``fork_step``.
        options: the decoding options it ran with (a fork runs with its parent's).
        own: its own StepEvents by step (``fork_step`` and after).
        segments: the SegmentEvent of each segment, by segment index.
        finished: how its run ended (None while it grows); for a fork the forced segment's
            ``Finished`` with the branch's whole text and token ids.
        note: what the fork reused ("KV cache reused (12 tokens)", "prefix re-run"), or "".
        input_change: for an input what-if (``gui.tabs.whatif``), what was changed in the
            input ("silence 1.20–1.65 s", "drop 'door'"); its segments that the change touched
            were decoded again from that input, the others are the parent's. "" for a fork.
        rounds: speculative decoding's rounds (``core.events.SpeculationRound``) of its own
            steps, by (segment, round): ``StepEvent.spec_round`` of a step in that segment
            names its round. Empty for other strategies.
    """

    id: int
    parent: int | None = None
    fork_step: int = 0
    forced_ids: tuple[int, ...] = ()
    forced_text: str = ""
    replaced_text: str = ""
    options: object | None = None
    own: dict[int, StepEvent] = field(default_factory=dict)
    segments: dict[int, SegmentEvent] = field(default_factory=dict)
    finished: Finished | None = None
    note: str = ""
    input_change: str = ""
    rounds: dict[tuple[int, int], SpeculationRound] = field(default_factory=dict)

    @property
    def is_root(self) -> bool:
        return self.parent is None

    @property
    def fork_segment(self) -> int | None:
        """The segment that was decoded again (None for the root)."""
        ev = self.own.get(self.fork_step)
        return None if self.is_root or ev is None else ev.segment

    def label(self) -> str:
        """"original run", or the fork point: ``step 7: ' cat' → ' dog'``."""
        if self.is_root:
            return "original run"
        if self.input_change:
            return f"what if: {self.input_change}"
        return f"step {self.fork_step}: {self.replaced_text!r} → {self.forced_text!r}"


def branch_step(branches: dict[int, Branch], branch: int, step: int | None) -> StepEvent | None:
    """``branch``'s event of ``step`` (its own, or its ancestors' before its fork step)."""
    if step is None or step < 0:
        return None
    b = branches[branch]
    while b is not None:
        if step >= b.fork_step:
            return b.own.get(step)
        b = branches[b.parent] if b.parent is not None else None
    return None


def branch_steps(branches: dict[int, Branch], branch: int) -> list[StepEvent]:
    """``branch``'s events in step order: its parent's before the fork step, then its own."""
    b = branches[branch]
    own = [b.own[k] for k in sorted(b.own)]
    if b.is_root:
        return own
    return [ev for ev in branch_steps(branches, b.parent) if ev.step < b.fork_step] + own


def branch_len(branches: dict[int, Branch], branch: int) -> int:
    """How many steps ``branch`` has."""
    b = branches[branch]
    return (b.fork_step if not b.is_root else 0) + len(b.own)


def branch_rounds(branches: dict[int, Branch], branch: int) -> list[SpeculationRound]:
    """``branch``'s speculation rounds in step order: its parent's before the fork step, then
    its own (empty for a run of another strategy)."""
    b = branches[branch]
    own = sorted(b.rounds.values(), key=lambda r: r.step)
    if b.is_root:
        return own
    return [r for r in branch_rounds(branches, b.parent) if r.step < b.fork_step] + own


def branch_round_of(branches: dict[int, Branch], branch: int, step: int | None) -> SpeculationRound | None:
    """The speculation round that emitted ``branch``'s step ``step`` (None: not a speculative
    token, or its round has not arrived yet)."""
    ev = branch_step(branches, branch, step)
    if ev is None or ev.spec_round < 0:
        return None
    b = branches[branch]
    while b is not None:
        if b.is_root or ev.step >= b.fork_step:
            return b.rounds.get((ev.segment, ev.spec_round))
        b = branches[b.parent] if b.parent is not None else None
    return None


def all_segments(branches: dict[int, Branch], branch: int) -> dict[int, SegmentEvent]:
    """``branch``'s SegmentEvents by segment index (its ancestors' and its own)."""
    b = branches[branch]
    if b.is_root:
        return dict(b.segments)
    merged = all_segments(branches, b.parent)
    merged.update(b.segments)
    return merged


def replay(branches: dict[int, Branch], branch: int) -> list[StepEvent | SegmentEvent]:
    """``branch``'s segments and steps in the order a view shows them: each segment's
    SegmentEvent (even one with no steps left), then its steps."""
    by_seg: dict[int, list[StepEvent]] = {}
    for e in branch_steps(branches, branch):
        by_seg.setdefault(e.segment, []).append(e)
    segs = all_segments(branches, branch)
    out: list[StepEvent | SegmentEvent] = []
    for k in sorted(segs):
        out.append(segs[k])
        out.extend(by_seg.pop(k, []))
    out.extend(e for seg in sorted(by_seg) for e in by_seg[seg])
    return out


def depth(branches: dict[int, Branch], branch: int) -> int:
    """How many forks lie between ``branch`` and the root (0 for the root)."""
    b, n = branches[branch], 0
    while b.parent is not None:
        b, n = branches[b.parent], n + 1
    return n


def fork_branch(branches: dict[int, Branch], parent: int, step: int, forced_ids: Iterable[int], forced_text: str,
                options: object | None = None) -> Branch:
    """A new branch (the next id) of ``parent`` that forces ``forced_ids`` at ``step``, with
    the parent's segments up to the forced one (``options``: None keeps the parent's).

    Raises:
        ValueError: ``parent`` has no step ``step``, or nothing is forced.
    """
    p = branches[parent]
    replaced = branch_step(branches, parent, step)
    forced = tuple(int(t) for t in forced_ids)
    if replaced is None:
        raise ValueError(f"branch {parent} has no step {step} to fork at")
    if not forced:
        raise ValueError("nothing to force: give at least one token")
    return Branch(
        id=max(branches) + 1, parent=parent, fork_step=step, forced_ids=forced,
        forced_text=forced_text, replaced_text=replaced.text,
        options=options if options is not None else p.options,
        segments={k: v for k, v in all_segments(branches, parent).items() if k <= replaced.segment},
    )


def what_if_branch(branches: dict[int, Branch], parent: int, step: int, segment: int, change: str,
                   options: object | None = None) -> Branch:
    """A new branch (the next id) of ``parent`` whose own steps start at ``step``, the first
    step of ``segment`` decoded again from an input changed as ``change`` says; it has the
    parent's segments before ``segment``.

    Raises:
        ValueError: ``step`` is not between 0 and the parent's length.
    """
    p = branches[parent]
    n = branch_len(branches, parent)
    if not 0 <= step <= n:
        raise ValueError(f"branch {parent} has {n} steps; a what-if cannot start at {step}")
    return Branch(
        id=max(branches) + 1, parent=parent, fork_step=step, replaced_text="", input_change=change,
        options=options if options is not None else p.options,
        segments={k: v for k, v in all_segments(branches, parent).items() if k < segment},
    )


def take_parents_later_segments(branches: dict[int, Branch], branch: int) -> tuple[list[StepEvent], list[SpeculationRound]]:
    """Give fork ``branch`` its parent's segments after the forced one (a fork decodes only the
    forced segment): their steps renumbered to follow the branch's last step (a spilled
    attention stays spilled), their SegmentEvents and speculation rounds. Returns (the steps
    added, in order; the rounds added); nothing for the root or a branch without own steps."""
    b = branches[branch]
    seg = b.fork_segment
    if b.is_root or seg is None:
        return [], []
    later = [ev for ev in branch_steps(branches, b.parent) if ev.segment > seg]
    if not later:
        return [], []
    shift = max(b.own) + 1 - later[0].step
    added = []
    for ev in later:
        b.own[ev.step + shift] = ev.renumbered(ev.step + shift) if shift else ev
        added.append(b.own[ev.step + shift])
    for k, sev in all_segments(branches, b.parent).items():
        if k > seg:
            b.segments[k] = sev
    moved = [dataclasses.replace(r, step=r.step + shift) if shift else r
             for r in branch_rounds(branches, b.parent) if r.segment > seg]
    for r in moved:
        b.rounds[(r.segment, r.round)] = r
    return added, moved


def attention_bytes(branches: dict[int, Branch]) -> int:
    """Bytes of cross-attention the branches' steps keep in memory (a step shared by several
    branches counts once; spilled ones count 0)."""
    seen: set[int] = set()
    total = 0
    for b in branches.values():
        for ev in b.own.values():
            if id(ev) not in seen:
                seen.add(id(ev))
                total += ev.attention_nbytes
    return total
