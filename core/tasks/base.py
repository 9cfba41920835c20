"""What every task is: the :class:`Task` protocol, and its five runs written once.

A task (speech, OCR, translation) decodes an input segment by segment: 30 s windows,
text lines, sentences. Everything it can do with a loaded model is one of five runs of
the same segments, here written once in :class:`SegmentedTask` over the task's
:meth:`~SegmentedTask.plan`:

- ``decode``: every segment, one after another, into one event stream;
- ``decode_lanes``: every segment once per lane, on one encoder output per segment;
- ``fork``: one segment again with its first tokens forced;
- ``what_if``: the segments a mask touches, re-decoded and scored under the masked input;
- ``no_input``: every segment's tokens scored under an empty input (the language prior).

A task says only what differs: its input dataclass (``core.inputs.types``: SpeechInput,
ImageInput, TextInput), its :meth:`~SegmentedTask.plan` (the segments, a ``prepare`` that
encodes one and gives its decoder prompt and SegmentEvent, the engine, how texts join),
and what a mask and an empty input are (:meth:`~SegmentedTask.masked`,
:meth:`~SegmentedTask.emptied`). The loops themselves are ``core.tasks.segments``.

Two-model runs (issue 21): when the options name a second model (speculative decoding's
``draft="model:NAME"``, contrastive decoding's ``contrastive_amateur="NAME"``), the runs
load it once as a task of the same kind (:meth:`SegmentedTask.companion_task`), plan the same
input with it, and hand ``Engine.run`` a ``ModelDraft`` / ``ModelCompanion`` per segment
(``core.tasks.companions.CompanionEngine``): the second model encodes the segment once (cached by its own
encoder cache, as the target's) and keeps its own KV cache.

Torch-free at import (the OCR task's image loading must not load torch).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Iterator, Protocol, Sequence, runtime_checkable

from core.events import Event, StepEvent
from core.options import DecodingOptions
from core.tasks.companions import (  # noqa: F401 - SHORTLIST_MARK, split_shortlist: their old home
    SHORTLIST_MARK,
    CompanionEngine,
    companion_names,
    split_shortlist,
)
from core.tasks.plan import OtherInput, Plan, Prepared, RunTotals  # noqa: F401 - Prepared, RunTotals: their old home
from core.tasks.segments import (  # noqa: F401 - the loops' old home
    decode_lanes,
    decode_segments,
    fork_segment,
    run_segment,
    what_if_segments,
)


@runtime_checkable
class Task(Protocol):
    """A loaded model of one task, as the GUI and the command line use it.

    Each run method takes the input's source first (audio, image or text) and its settings
    as keywords (``core.inputs.types``: ``language=``, ``region=``, ``shortlist=``, ...);
    ``model.decode(*SpeechInput(audio, language="de").call_args(), options)`` is the same
    call as ``model.decode(audio, options, language="de")``. Every run is a generator of
    plain-data events (``core.events``); ``cancel`` is polled between steps.

    Attributes:
        name: the model's display name.
        backend: the ``core.backends`` Backend its engine drives (tokenize, decode, vocab).
        load_s: seconds the load took.
    """

    name: str
    backend: Any
    load_s: float

    def decode(self, source: Any, options: DecodingOptions, *, cancel: Callable[[], bool] | None = None,
               prefix_ids: Sequence[int] = (), **settings: Any) -> Iterator[Event]:
        """Decode the whole input: SegmentEvents, StepEvents, BeamEvents, one Finished."""

    def decode_lanes(self, source: Any, lanes: Sequence[DecodingOptions], *,
                     cancel: Callable[[], bool] | None = None, prefix_ids: Sequence[int] = (),
                     **settings: Any) -> Iterator[Any]:
        """Decode with several options side by side: LaneEvents, then one LanesFinished."""

    def fork(self, source: Any, options: DecodingOptions, *, segment: int, forced_ids: Sequence[int],
             step_offset: int, cancel: Callable[[], bool] | None = None, reuse_cache: bool = True,
             **settings: Any) -> Iterator[Event]:
        """Re-decode one segment with its first tokens forced (a fork)."""

    def what_if(self, source: Any, options: DecodingOptions, original: Sequence[StepEvent], *,
                cancel: Callable[[], bool] | None = None, **settings: Any) -> Iterator[Any]:
        """Mask part of the input (the task's mask keyword: ``span=``, ``mask=``, ``drop=``),
        re-decode and score the segments it touches."""

    def no_input(self, source: Any, options: DecodingOptions, original: Sequence[StepEvent], *,
                 cancel: Callable[[], bool] | None = None, **settings: Any) -> Iterator[Any]:
        """Score the run ``original``'s tokens under an empty input (the language prior)."""

    def prefix_ids(self, text: str) -> list[int]:
        """The token ids of a text prefix ([] for blank text)."""


class SegmentedTask:
    """:class:`Task`'s five runs, written once over a subclass's :meth:`plan`.

    A subclass sets :attr:`input_type` and implements
    :meth:`plan`, :meth:`masked` and :meth:`emptied` (and :meth:`run_options` where a
    prefix changes the options). Errors: every run raises ``ValueError`` for bad input,
    options or settings (from :meth:`plan`), ``TypeError`` for a setting the input does
    not have.
    """

    #: the input dataclass (``core.inputs.types``) built from a run's source and settings;
    #: its ``mask_keyword`` is the keyword ``what_if`` takes the mask by
    input_type: ClassVar[type]

    # ------------------------------------------------------------------ what a task gives
    def plan(self, inp: Any, options: DecodingOptions, *, prefix_len: int = 0,
             max_new: Sequence[int] | None = None) -> Plan:
        """The run's :class:`Plan` for ``inp`` (validating ``inp`` and ``options``).
        ``prefix_len``: tokens of a forced prefix; ``max_new``: each lane's
        ``max_new_tokens`` (a task whose length budget depends on them uses them)."""
        raise NotImplementedError

    def masked(self, inp: Any, plan: Plan, mask: Any) -> OtherInput:
        """The segments ``mask`` touches and their masked encodings."""
        raise NotImplementedError

    def emptied(self, inp: Any, plan: Plan) -> OtherInput:
        """Every segment's encoding of an input with nothing in it."""
        raise NotImplementedError

    def run_options(self, options: DecodingOptions, prefix_ids: Sequence[int]) -> DecodingOptions:
        """The options a run with a forced ``prefix_ids`` decodes with (``options``)."""
        return options

    # ------------------------------------------------------------------ a second model
    def load_companion(self, name: str) -> "SegmentedTask":
        """Load model ``name`` as a task of this kind (``type(self).load(name)``: a bundled
        name through ``core.catalog``, a hub id or a directory); a task whose second model
        needs more settings (the translation languages) overrides it."""
        return type(self).load(name)

    def companion_task(self, name: str) -> "SegmentedTask":
        """The second model ``name`` (a draft, an amateur) as a task, loaded once per task.

        Raises:
            ValueError / FileNotFoundError / RuntimeError: as the task's ``load``.
        """
        kept = self.__dict__.setdefault("_companion_tasks", {})
        if name not in kept:
            kept[name] = self.load_companion(name)
        return kept[name]

    def token_map(self, name: str, other: "SegmentedTask"):
        """The ``core.speculative.companion.TokenMap`` from this model's ids to ``other``'s
        (model ``name``), built once.

        Raises:
            ValueError: the tokenizers do not share the text.
        """
        from core.speculative.companion import TokenMap

        kept = self.__dict__.setdefault("_token_maps", {})
        if name not in kept:
            kept[name] = TokenMap(self.backend, other.backend)
        return kept[name]

    def companion_shortlist(self, name: str, other: "SegmentedTask", size: int):
        """The shortlist head of model ``name`` (``core.speculative.shortlist.frequent_ids``,
        int64 (k,) in its vocabulary), built once per size (the same tensor every segment)."""
        from core.speculative.shortlist import frequent_ids

        kept = self.__dict__.setdefault("_companion_shortlists", {})
        if (name, size) not in kept:
            kept[(name, size)] = frequent_ids(other.backend, size)
        return kept[(name, size)]

    def _with_companions(self, inp: Any, plan: Plan, options: Sequence[DecodingOptions]) -> Plan:
        """``plan`` with a :class:`CompanionEngine` when any of ``options`` names a second
        model; ``plan`` itself otherwise."""
        if not any(any(companion_names(o)) for o in options):
            return plan
        engine = CompanionEngine(self, inp, plan)
        return dataclasses.replace(plan, prepare=engine.prepare, engine=engine)

    # ------------------------------------------------------------------ the five runs
    def decode(self, source: Any, options: DecodingOptions, *, cancel: Callable[[], bool] | None = None,
               prefix_ids: Sequence[int] = (), **settings: Any) -> Iterator[Event]:
        """Decode the input segment by segment into one continuous event stream
        (``core.tasks.segments.decode_segments``).

        Args:
            source: the input (audio, image, text); settings: its settings (:attr:`input_type`).
            options: decoding options (validated here).
            cancel: polled between segments and steps; True stops the run.
            prefix_ids: token ids forced at the start of the first segment's tokens (see
                :meth:`prefix_ids`), reported with ``forced=True``.

        Yields:
            per segment a SegmentEvent, then its StepEvents (a step counter running across
            segments) and BeamEvents; one Finished with the joined text and all token ids.

        Raises:
            ValueError: bad input, options or settings; a prefix id that is EOS or outside
                the vocabulary.
        """
        inp = self.input_type.of(source, settings, method="decode")
        plan = self._with_companions(inp, self.plan(inp, options, prefix_len=len(prefix_ids)), [options])
        yield from decode_segments(plan.engine, plan.segments, plan.prepare, self.run_options(options, prefix_ids),
                                   plan.stats, plan.join, cancel=cancel, forced={0: prefix_ids} if prefix_ids else None,
                                   skip=plan.skip)

    def decode_lanes(self, source: Any, lanes: Sequence[DecodingOptions], *,
                     cancel: Callable[[], bool] | None = None, prefix_ids: Sequence[int] = (),
                     **settings: Any) -> Iterator[Any]:
        """Decode the input with several options side by side on one encoder pass per
        segment (``core.tasks.segments.decode_lanes``): ``LaneEvent`` s of every lane,
        interleaved, then a ``LanesFinished``. Each lane's events equal :meth:`decode` with
        its options.

        Raises:
            ValueError: as :meth:`decode`; no lanes, or a lane's options invalid.
        """
        from core.tasks.lanes import check_lanes

        inp = self.input_type.of(source, settings, method="decode_lanes")
        lanes = check_lanes(lanes)
        plan = self.plan(inp, lanes[0], prefix_len=len(prefix_ids), max_new=[o.max_new_tokens for o in lanes])
        plan = self._with_companions(inp, plan, lanes)
        yield from decode_lanes(plan.engine, plan.segments, plan.prepare,
                                [self.run_options(o, prefix_ids) for o in lanes], plan.stats, plan.join,
                                cancel=cancel, forced={0: prefix_ids} if prefix_ids else None, skip=plan.skip)

    def fork(self, source: Any, options: DecodingOptions, *, segment: int, forced_ids: Sequence[int],
             step_offset: int, cancel: Callable[[], bool] | None = None, reuse_cache: bool = True,
             **settings: Any) -> Iterator[Event]:
        """Re-decode one segment of the input with its first tokens forced (a fork).

        Only segment ``segment`` is decoded (from the cached encoder output); the others
        are left as they were, so a branch is the original run with this segment replaced
        (``core.tasks.segments.fork_segment``). The engine reuses the KV cache of its last
        batch-1 run on this segment up to the common prefix.

        Args:
            source, options, settings, cancel: as given to the :meth:`decode` that is forked.
            segment: the segment's index (``SegmentEvent.segment``).
            forced_ids: the segment's tokens to force: the original ones before the fork
                step plus the token chosen there.
            step_offset: the step number of the segment's first token in the original run.
            reuse_cache: allow the KV-cache reuse.

        Yields:
            the segment's SegmentEvent, StepEvents numbered from ``step_offset`` (forced ones
            marked; those inside a reused cache are not repeated), BeamEvents, one Finished
            (the segment's text and token ids).

        Raises:
            ValueError: as :meth:`decode`; a segment index out of range.
        """
        inp = self.input_type.of(source, settings, method="fork")
        plan = self._with_companions(inp, self.plan(inp, options), [options])
        yield from fork_segment(plan.engine, plan.segments, segment, plan.prepare, options, plan.stats,
                                forced_ids=forced_ids, step_offset=step_offset, cancel=cancel, reuse_cache=reuse_cache)

    def what_if(self, source: Any, options: DecodingOptions, original: Sequence[StepEvent], *,
                cancel: Callable[[], bool] | None = None, **settings: Any) -> Iterator[Any]:
        """Mask part of the input (the keyword ``input_type.mask_keyword``) and re-decode the
        segments it touches; score their original tokens under the masked input
        (``core.tasks.whatif``: a mask). Each segment keeps the original run's prompt.

        Args:
            source, options, settings, cancel: as given to the :meth:`decode` whose run
                ``original`` (its StepEvents) is.

        Raises:
            TypeError: no mask given.
            ValueError: as :meth:`decode`; a mask that is empty, outside the input or
                holds nothing to mask.
        """
        keyword = self.input_type.mask_keyword
        if keyword not in settings:
            raise TypeError(f"what_if() missing 1 required keyword-only argument: {keyword!r}")
        mask = settings.pop(keyword)
        inp = self.input_type.of(source, settings, method="what_if")
        plan = self._with_companions(inp, self.plan(inp, options), [options])
        other = self.masked(inp, plan, mask)
        if isinstance(plan.engine, CompanionEngine):
            other = plan.engine.other(other, lambda task2, plan2: task2.masked(inp, plan2, mask))
        yield from self._what_if(plan, other, original, options, "mask", cancel)

    def no_input(self, source: Any, options: DecodingOptions, original: Sequence[StepEvent], *,
                 cancel: Callable[[], bool] | None = None, **settings: Any) -> Iterator[Any]:
        """The decoder's language prior for the run ``original``: each segment's original
        tokens forced through the encoding of an input with nothing in it
        (``core.tasks.whatif``: kind "prior")."""
        inp = self.input_type.of(source, settings, method="no_input")
        plan = self._with_companions(inp, self.plan(inp, options), [options])
        other = self.emptied(inp, plan)
        if isinstance(plan.engine, CompanionEngine):
            other = plan.engine.other(other, lambda task2, plan2: task2.emptied(inp, plan2))
        yield from self._what_if(plan, other, original, options, "prior", cancel)

    @staticmethod
    def _what_if(plan: Plan, other: OtherInput, original: Sequence[StepEvent], options: DecodingOptions,
                 kind: str, cancel: Callable[[], bool] | None) -> Iterator[Any]:
        from core.tasks.whatif import original_segments

        yield from what_if_segments(
            plan.engine, other.segments, lambda i: plan.prepare(i, plan.segments[i]), other.encode,
            original_segments(original, len(plan.segments)), options, kind=kind, description=other.description,
            cancel=cancel, adapt=other.adapt,
        )
