"""The public model of an exploration: a tree of branches of one input, and the selection.

The model side of the views (napari's ``components/`` next to ``_qt/``): no widgets, only
data and signals. The tab fills it from the worker's events (``RunTab.on_run_event``); the
tabs and views ask it for a step, the newest step or the selection instead of keeping
copies of their own, and subscribe to its signals (token stream, fork diff, branch tree;
the sister views — lanes, what-ifs — can take it the same way).

Once per frame, not once per token: the steps and segments added to the current branch
wait in one batch until :meth:`RunState.flush` (the run controller calls it at the end of
each pump turn, ``gui.run_controller``), which emits ``stepsAdded(branch, steps)`` per run
of steps and ``segmentAdded(branch, segment)`` between them, in order, and
``beamsAdded(events)`` (a per-token redraw of a view is O(n²) on a long run).

A decode run is the **root** branch. Forcing another token at step ``s`` of a branch
(``RunTab.fork``) makes a child branch: it shares its parent's steps before ``s`` (the
same ``StepEvent`` objects), then has its own steps from ``s`` on — the forced token(s)
first, then what the decoder chose after them. Only the forced segment (a sentence, an
OCR line, a 30 s window) is decoded again; the later segments are the parent's, renumbered
after the new segment's tokens, so a branch's steps are always 0..n-1 without gaps.

One branch is **current**: the token stream, top-k and heatmap show it, and the step
queries (:meth:`RunState.step`, :meth:`~RunState.steps`, :meth:`~RunState.latest`, ...)
answer for it. Events are added to the **growing** branch (the one a worker is decoding;
usually the current one, but the user may look at another branch meanwhile).

A new run with other options or another input starts a new exploration:
:meth:`~RunState.clear` forgets every branch here (branches of other options would mix
runs that are not comparable token by token); the tab keeps the old tree first
(``gui.exploration_history``: Edit → Previous exploration brings it back). A run with the
same options (F5, or only more capture) keeps the tree: the tab adds the old forks back
under the new root when it gives the same tokens (:meth:`RunState.adopt`). The selected
step stays (see :meth:`RunState.clear`).

Memory on long inputs: when a new segment (30 s window) starts, the large cross-attention
of the growing branch's steps out of view (neither the new window nor the selected step's)
moves to disk on a background thread (``gui.attention_spill``); reading it loads it back.
:meth:`RunState.wait_spilled` waits for it. The branches and the queries that walk them are
``gui.branches`` (no Qt).
"""

from __future__ import annotations

from typing import Iterable

from PySide6.QtCore import QObject, Signal

from core.events import Finished, SegmentEvent, SpeculationRound, StepEvent

from . import branches as tree
from .attention_spill import SPILL_MIN_BYTES, AttentionSpill
from .branches import Branch, plain_text, token_logprob

__all__ = ["SPILL_MIN_BYTES", "Branch", "RunState", "plain_text", "token_logprob"]

class RunState(QObject):
    """The branches of one input's exploration, the current and growing branch, and the
    selected step (see the module docstring).

    Signals:
        stepAdded(object): a StepEvent was added to the growing branch.
        selectionChanged(object): the selected step changed (an int, or None: follow the newest).
        cleared(): every branch was forgotten (a new run starts, or the input went away).
        branchAdded(int): a branch was created (a fork, or a restored exploration's branch).
        branchChanged(int): a branch got new steps, its end or a note.
        currentBranchChanged(int): another branch is the current one.
        stepsRetracted(int, int): (branch, first step) a branch's steps from that step on were
            taken back (a long-form attempt that failed, :meth:`retract`); views redraw it.
        stepsAdded(int, list): (branch, StepEvents) the current branch's steps added since the
            last frame (:meth:`flush`), in order.
        segmentAdded(int, object): (branch, SegmentEvent) a segment of the current branch
            started; emitted by :meth:`flush` between the steps before and after it.
        beamsAdded(list): the BeamEvents of the current branch since the last frame.
        roundsAdded(int, list): (branch, SpeculationRounds) the current branch's speculation
            rounds since the last frame, emitted by :meth:`flush` after that frame's steps.
        branchFinished(int): a branch's run ended (:meth:`finish`; its ``Branch.finished``).
        marksChanged(object): the step marks of the current branch changed (:meth:`set_marks`).

    ``stepAdded`` is per token: a view never follows it (it gets ``stepsAdded`` once per
    frame, ``gui.widgets.follow``).
    """

    stepAdded = Signal(object)
    selectionChanged = Signal(object)
    cleared = Signal()
    branchAdded = Signal(int)
    branchChanged = Signal(int)
    currentBranchChanged = Signal(int)
    stepsRetracted = Signal(int, int)
    stepsAdded = Signal(int, list)
    segmentAdded = Signal(int, object)
    beamsAdded = Signal(list)
    roundsAdded = Signal(int, list)
    branchFinished = Signal(int)
    marksChanged = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._branches: dict[int, Branch] = {0: Branch(0)}
        self._current = 0
        self._growing = 0
        self._latest: dict[int, int] = {}  # branch -> its newest own step
        self._selected: int | None = None
        self._spill = AttentionSpill()  # large attention still in memory; a new one per exploration
        self._batch: list[StepEvent | SegmentEvent] = []  # the current branch's, since the last frame
        self._beams: list = []  # BeamEvents since the last frame
        self._rounds: list[SpeculationRound] = []  # the current branch's, since the last frame
        self._marks: dict[int, tuple[str, str]] = {}  # step -> (colour, tooltip line): set_marks

    # ------------------------------------------------------------ the frame
    def flush(self) -> None:
        """Emit what the current branch got since the last frame: ``stepsAdded`` per run of
        steps, ``segmentAdded`` between them, then ``beamsAdded`` and ``roundsAdded``."""
        batch, self._batch = self._batch, []
        beams, self._beams = self._beams, []
        rounds, self._rounds = self._rounds, []
        branch = self._current
        steps: list[StepEvent] = []
        for ev in batch:
            if isinstance(ev, StepEvent):
                steps.append(ev)
                continue
            if steps:
                self.stepsAdded.emit(branch, steps)
                steps = []
            self.segmentAdded.emit(branch, ev)
        if steps:
            self.stepsAdded.emit(branch, steps)
        if beams:
            self.beamsAdded.emit(beams)
        if rounds:
            self.roundsAdded.emit(branch, rounds)

    def pending(self) -> bool:
        """Steps, segments, beams or rounds wait for the next frame."""
        return bool(self._batch or self._beams or self._rounds)

    def drop_pending(self) -> None:
        """Forget what waits for the next frame (a superseded or cancelled run's last events)."""
        self._batch, self._beams, self._rounds = [], [], []

    def add_beams(self, ev: object) -> None:
        """A BeamEvent of the growing branch (shown when it is the current one, per frame)."""
        if self._growing == self._current:
            self._beams.append(ev)

    def add_round(self, ev: SpeculationRound) -> None:
        """Keep a speculation round of the growing branch (it comes after its steps; shown,
        when that branch is the current one, at the next frame: ``roundsAdded``). A round
        before the branch's fork step is the parent's and is ignored."""
        b = self._branches[self._growing]
        if ev.step < b.fork_step:
            return
        b.rounds[(ev.segment, ev.round)] = ev
        if b.id == self._current:
            self._rounds.append(ev)

    # ------------------------------------------------------------ changes
    def clear(self, options: object | None = None) -> None:
        """Forget every branch and start a new exploration with an empty root (run with
        ``options``). The selection stays: after an option change the same step stays
        selected and is shown again when the new run reaches it."""
        self._branches = {0: Branch(0, options=options)}
        self._current = self._growing = 0
        self._latest.clear()
        self._spill = AttentionSpill()  # the old file goes with the last event holding it
        self.drop_pending()
        self.cleared.emit()

    def add(self, ev: StepEvent) -> None:
        """Keep ``ev`` in the growing branch (it replaces an earlier event of the same step).
        A step before the branch's fork step is the parent's and is ignored."""
        b = self._branches[self._growing]
        if ev.step < b.fork_step:
            return
        b.own[ev.step] = ev
        self._spill.keep(ev)
        if ev.step >= self._latest.get(b.id, -1):
            self._latest[b.id] = ev.step
        if b.id == self._current:
            self._batch.append(ev)
        self.stepAdded.emit(ev)
        self.branchChanged.emit(b.id)

    def retract(self, segment: int, step_offset: int) -> int:
        """Take back the growing branch's steps of ``segment`` from ``step_offset`` on: a
        long-form attempt that was not kept (``core.events.AttemptEvent``; the next attempt
        is numbered from the same step). Emits ``stepsRetracted(branch, step_offset)`` when
        steps went. Returns how many steps were removed."""
        b = self._branches[self._growing]
        gone = [k for k, ev in b.own.items() if k >= step_offset and ev.segment == segment]
        self._spill.spill([b.own[k] for k in gone])  # an attempt taken back is only looked at again as a lane
        for k in gone:
            del b.own[k]
        if not gone:
            return 0
        self._batch = [e for e in self._batch
                       if not (isinstance(e, StepEvent) and e.step >= step_offset and e.segment == segment)]
        b.rounds = {k: r for k, r in b.rounds.items() if not (r.segment == segment and r.step >= step_offset)}
        self._rounds = [r for r in self._rounds if not (r.segment == segment and r.step >= step_offset)]
        if b.own:
            self._latest[b.id] = max(b.own)
        else:
            self._latest.pop(b.id, None)
        self.stepsRetracted.emit(b.id, step_offset)
        self.branchChanged.emit(b.id)
        return len(gone)

    def keep_attention(self, ev) -> None:
        """Spill ``ev``'s large attention with its segment's steps once that segment is out of
        view (:meth:`spill_out_of_view`): for events that are not steps of a branch, e.g. a
        long-form ``AttemptEvent``'s end-of-text row (288 kB per window with base)."""
        self._spill.keep(ev)

    def add_segment(self, ev: SegmentEvent) -> None:
        """Keep the SegmentEvent of a segment of the growing branch; the attention of the
        steps of windows now out of view moves to disk (see the module docstring)."""
        self._branches[self._growing].segments[ev.segment] = ev
        if self._growing == self._current:
            self._batch.append(ev)
        self.spill_out_of_view(keep=ev.segment)

    def spill_out_of_view(self, keep: int | None = None) -> int:
        """Move to disk (on the spill thread) the large cross-attention
        (:data:`SPILL_MIN_BYTES`) of the events added since the last call, except those of
        segment ``keep`` (the one being decoded) and of the selected step's segment.
        Returns the bytes that will be freed in memory."""
        sel = self.step(self._selected) if self._selected is not None else None
        return self._spill.out_of_view({keep, sel.segment if sel is not None else None})

    def wait_spilled(self, timeout: float | None = None) -> int:
        """Wait until the attention handed to the spill thread is on disk; returns the
        bytes it freed.

        Raises:
            TimeoutError: not done within ``timeout`` seconds.
        """
        return self._spill.wait(timeout)

    def attention_bytes(self) -> int:
        """Bytes of cross-attention the current exploration's steps keep in memory (the
        spilled ones count 0)."""
        return tree.attention_bytes(self._branches)

    def finish(self, ev: Finished, branch: int | None = None, note: str | None = None) -> None:
        """The growing branch's (or ``branch``'s) run ended with ``ev``."""
        b = self._branches[self._growing if branch is None else branch]
        b.finished = ev
        if note is not None:
            b.note = note
        self.branchChanged.emit(b.id)
        self.branchFinished.emit(b.id)

    def set_marks(self, marks: dict[int, tuple[str, str]]) -> None:
        """Mark steps of the current branch: step -> (colour, a line for the tooltip); the
        what-ifs (``gui.tabs.whatif``) mark the tokens that depended on a masked part of the
        input. The token stream follows (``marksChanged``); ``{}`` takes them away."""
        self._marks = {int(k): (str(c), str(t)) for k, (c, t) in marks.items()}
        self.marksChanged.emit(dict(self._marks))

    def marks(self) -> dict[int, tuple[str, str]]:
        """The step marks last set (:meth:`set_marks`)."""
        return dict(self._marks)

    def fork(self, parent: int, step: int, forced_ids: Iterable[int], forced_text: str,
             options: object | None = None) -> Branch:
        """A new branch of ``parent`` that forces ``forced_ids`` at ``step``; it becomes the
        growing branch (not yet the current one: :meth:`set_current`).

        Raises:
            ValueError: ``parent`` has no step ``step``, or nothing is forced.
        """
        b = tree.fork_branch(self._branches, parent, step, forced_ids, forced_text, options)
        return self._grow(b)

    def add_what_if(self, parent: int, step: int, segment: int, change: str,
                    options: object | None = None) -> Branch:
        """A new branch of ``parent`` whose own steps start at ``step``, the first step of
        ``segment``: the segment (and maybe later ones) decoded again from a changed input
        (``change`` says how). Nothing is forced. It becomes the growing branch (not the
        current one).

        Raises:
            ValueError: ``step`` is not between 0 and the parent's length.
        """
        b = tree.what_if_branch(self._branches, parent, step, segment, change, options)
        return self._grow(b)

    def _grow(self, b: Branch) -> Branch:
        """Add the new branch ``b``; it becomes the growing branch."""
        self._branches[b.id] = b
        self._growing = b.id
        self.branchAdded.emit(b.id)
        return b

    def complete_from_parent(self, branch: int) -> int:
        """Append the parent's segments after the forced one to ``branch`` (renumbered to
        follow its last step): a fork decodes only the forced segment. Returns the number
        of steps appended."""
        b = self._branches[branch]
        seg = b.fork_segment
        added, moved = tree.take_parents_later_segments(self._branches, branch)
        if not added:
            return 0
        self._latest[b.id] = max(b.own)
        if b.id == self._current:  # shown at the next frame, each segment's label first
            shown = {e.segment for e in self._batch if isinstance(e, StepEvent)} | {seg}
            for ev in added:
                if ev.segment not in shown:
                    shown.add(ev.segment)
                    if ev.segment in b.segments:
                        self._batch.append(b.segments[ev.segment])
                self._batch.append(ev)
            self._rounds.extend(moved)
        self.branchChanged.emit(b.id)
        return len(added)

    def set_current(self, branch: int) -> None:
        """Make ``branch`` the one the views show (the selection is kept as a step index)."""
        if branch not in self._branches:
            raise KeyError(f"no branch {branch}")
        if branch != self._current:
            self._current = branch
            self.drop_pending()  # the views show the new current branch from its steps
            self.currentBranchChanged.emit(branch)

    def set_growing(self, branch: int) -> None:
        """Add the next events to ``branch``."""
        if branch not in self._branches:
            raise KeyError(f"no branch {branch}")
        self._growing = branch

    def set_note(self, branch: int, note: str) -> None:
        self._branches[branch].note = note
        self.branchChanged.emit(branch)

    def restore(self, branches: list[Branch], current: int = 0) -> None:
        """Replace the exploration with ``branches`` (a saved one; ids, parents and steps as
        saved, the root first) and make ``current`` the current branch."""
        if not branches or not branches[0].is_root:
            raise ValueError("an exploration needs its root branch first")
        self._branches = {b.id: b for b in branches}
        self._latest = {b.id: max(b.own) for b in branches if b.own}
        self._current = self._growing = branches[0].id
        self._spill = AttentionSpill(ev for b in branches for ev in b.own.values())
        self.drop_pending()
        self.cleared.emit()
        for b in branches:
            self.branchAdded.emit(b.id)
        if current in self._branches and current != self._current:
            self._current = self._growing = current
        last = self.step(self.latest())
        self.spill_out_of_view(keep=last.segment if last is not None else None)  # a saved hour with full attention
        self.currentBranchChanged.emit(self._current)

    def adopt(self, branches: list[Branch]) -> None:
        """Add ``branches`` (forks and what-ifs of an earlier tree whose root decoded the same
        tokens again; parents first, ids as they were) under this tree's root, without
        clearing anything: issue 19, a re-decode that only adds capture keeps the tree.

        Raises:
            ValueError: a branch is a root, its id is taken or its parent is missing.
        """
        for b in branches:
            if b.is_root or b.id in self._branches or b.parent not in self._branches:
                raise ValueError(f"branch {b.id} (parent {b.parent}) does not fit this tree")
            self._branches[b.id] = b
            if b.own:
                self._latest[b.id] = max(b.own)
            self.branchAdded.emit(b.id)

    def select(self, step: int | None) -> None:
        """Select ``step`` of the current branch (None: no selection, the views follow the newest step)."""
        if step != self._selected:
            self._selected = step
            self.selectionChanged.emit(step)

    # ------------------------------------------------------------ branch queries
    def branch(self, branch: int) -> Branch:
        return self._branches[branch]

    def branches(self) -> list[Branch]:
        """Every branch, in the order they were made (the root first)."""
        return [self._branches[k] for k in sorted(self._branches)]

    def children(self, branch: int) -> list[Branch]:
        return [b for b in self.branches() if b.parent == branch]

    def current_branch(self) -> int:
        """The branch the views show."""
        return self._current

    def growing_branch(self) -> int:
        """The branch events are added to."""
        return self._growing

    def branch_step(self, branch: int, step: int | None) -> StepEvent | None:
        """``branch``'s event of ``step`` (its own, or its ancestors' before its fork step)."""
        return tree.branch_step(self._branches, branch, step)

    def branch_steps(self, branch: int) -> list[StepEvent]:
        """``branch``'s events in step order: its parent's before the fork step, then its own."""
        return tree.branch_steps(self._branches, branch)

    def branch_len(self, branch: int) -> int:
        """How many steps ``branch`` has."""
        return tree.branch_len(self._branches, branch)

    def branch_rounds(self, branch: int) -> list[SpeculationRound]:
        """``branch``'s speculation rounds in step order (``gui.branches.branch_rounds``)."""
        return tree.branch_rounds(self._branches, branch)

    def branch_round_of(self, branch: int, step: int | None) -> SpeculationRound | None:
        """The speculation round that emitted ``branch``'s step ``step`` (None: not a
        speculative token, or its round has not arrived yet)."""
        return tree.branch_round_of(self._branches, branch, step)

    def _all_segments(self, branch: int) -> dict[int, SegmentEvent]:
        return tree.all_segments(self._branches, branch)

    def replay(self, branch: int | None = None) -> list[StepEvent | SegmentEvent]:
        """``branch``'s (default: the current one's) segments and steps in the order a view
        shows them: each segment's SegmentEvent (even one with no steps left), then its steps."""
        return tree.replay(self._branches, self._current if branch is None else branch)

    def segments(self, branch: int | None = None) -> list[SegmentEvent]:
        """The SegmentEvents of ``branch`` (default: the current one), in segment order."""
        segs = self._all_segments(self._current if branch is None else branch)
        return [segs[k] for k in sorted(segs)]

    def logprob(self, branch: int, start: int = 0, end: int | None = None, raw: bool = False) -> float:
        """Σ ln p of ``branch``'s tokens from step ``start`` up to (not including) ``end``:
        the processed probabilities (``raw``: the raw ones); forced tokens count with the
        probability the model gave them (-inf if a filter had cut one)."""
        return sum(token_logprob(ev, raw) for ev in self.branch_steps(branch)
                   if ev.step >= start and (end is None or ev.step < end))

    def text(self, branch: int) -> str:
        """``branch``'s text (its tokens' texts joined)."""
        return plain_text(ev.text for ev in self.branch_steps(branch))

    def depth(self, branch: int) -> int:
        """How many forks lie between ``branch`` and the root."""
        return tree.depth(self._branches, branch)

    # ------------------------------------------------------------ queries on the current branch
    def step(self, step: int | None) -> StepEvent | None:
        """The current branch's event of ``step``, or None (not in it, or ``step`` is None)."""
        return self.branch_step(self._current, step)

    def steps(self) -> list[StepEvent]:
        """The current branch's events in step order."""
        return self.branch_steps(self._current)

    def rounds(self) -> list[SpeculationRound]:
        """The current branch's speculation rounds in step order (:meth:`branch_rounds`)."""
        return self.branch_rounds(self._current)

    def round_of(self, step: int | None) -> SpeculationRound | None:
        """The speculation round that emitted the current branch's ``step``, or None."""
        return self.branch_round_of(self._current, step)

    def steps_in_segment(self, segment: int) -> list[int]:
        """The current branch's steps of segment ``segment`` (a sentence, an OCR line, a 30 s window)."""
        return [ev.step for ev in self.steps() if ev.segment == segment]

    def latest(self) -> int | None:
        """The newest step of the current branch, or None before the first."""
        b = self._branches[self._current]
        if b.id in self._latest:
            return self._latest[b.id]
        return b.fork_step - 1 if not b.is_root and b.fork_step > 0 else None

    def selected(self) -> int | None:
        """The step the user selected, or None (follow the newest)."""
        return self._selected

    def current(self) -> int | None:
        """The step the views show: the selected one, else the newest."""
        return self._selected if self._selected is not None else self.latest()

    def __len__(self) -> int:
        return self.branch_len(self._current)

    def __contains__(self, step: object) -> bool:
        return isinstance(step, int) and self.branch_step(self._current, step) is not None
