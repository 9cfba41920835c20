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
(:class:`CompanionEngine`): the second model encodes the segment once (cached by its own
encoder cache, as the target's) and keeps its own KV cache.

Torch-free at import (the OCR task's image loading must not load torch).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterator, Protocol, Sequence, runtime_checkable

from core.backends.base import EncoderOutput
from core.events import Event, RunStats, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.segments import (  # noqa: F401 - the loops' old home
    Prepared,
    RunTotals,
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


@dataclass(frozen=True)
class Plan:
    """One run's segments, ready to decode.

    Attributes:
        segments: the task's segments (windows, text lines, sentence chunks).
        prepare: (i, segment) -> :class:`Prepared`: encodes segment ``i`` (cached) and gives
            its decoder prompt and SegmentEvent.
        stats: the run's starting stats (``load_s``, ``audio_s``, ``encoder_cached=True``).
        engine: the ``core.engine.Engine`` to run.
        join: the whole text from ``(segment, its stripped text)`` pairs, in order.
        skip: ``decode_segments``' skip rule (speech: a window of digital silence), or None.
    """

    segments: Sequence[Any]
    prepare: Callable[[int, Any], Prepared]
    stats: RunStats
    engine: Any
    join: Callable[[list], str]
    skip: Callable[[int, Any, Prepared], SegmentEvent | None] | None = None


@dataclass(frozen=True)
class OtherInput:
    """What a what-if puts in place of the input (a mask, or nothing).

    Attributes:
        segments: the segment indices to re-run, in order (those a mask touches; all for
            an empty input).
        encode: segment index -> the encoder output of the masked / empty input.
        description: what was changed ("silence 1.20–1.65 s", "no input: a blank image").
        adapt: applied to each StepEvent of a mask's re-decode (translation puts dropped
            source positions back into the attention columns), or None.
    """

    segments: Sequence[int]
    encode: Callable[[int], EncoderOutput]
    description: str
    adapt: Callable[[int, StepEvent], StepEvent] | None = None


SHORTLIST_MARK = "#"
"""``draft="model:NAME#N"``: the draft model with a shortlist head of its N most frequent
ids (``core.speculative.shortlist``); ``model:NAME`` keeps its full output head."""


def companion_names(options: DecodingOptions) -> tuple[str | None, str | None]:
    """The second models ``options`` name: (the draft model of ``draft="model:NAME"`` under
    strategy "speculative", or None; the amateur model of ``contrastive_amateur``, or None
    for off and for an early-layer amateur "layer:L" / "layer:auto")."""
    draft = None
    value = getattr(options, "draft", "") or ""
    if getattr(options, "strategy", "") == "speculative" and value.startswith("model:"):
        draft = value.split(":", 1)[1].strip() or None
    amateur = (getattr(options, "contrastive_amateur", "") or "").strip()
    if not amateur or amateur.startswith("layer:"):
        amateur = None
    return draft, amateur


def split_shortlist(name: str) -> tuple[str, int | None]:
    """``"tiny.en#8192"`` -> ("tiny.en", 8192); ``"tiny.en"`` -> ("tiny.en", None).

    Raises:
        ValueError: a mark followed by no positive whole number.
    """
    if SHORTLIST_MARK not in name:
        return name, None
    model, size = name.rsplit(SHORTLIST_MARK, 1)
    if not size.isdigit() or int(size) < 1:
        raise ValueError(f"draft model:{name}: after {SHORTLIST_MARK!r} give the shortlist size, e.g. "
                         f"model:{model}{SHORTLIST_MARK}8192")
    return model, int(size)


class CompanionEngine:
    """A task's engine that hands ``Engine.run`` the second model its options name.

    Wraps a :class:`Plan`: its ``prepare`` notes which segment each encoder output is, and
    its ``run`` builds, for that segment, a ``core.speculative.companion.ModelCompanion`` of
    the second model (encoding the same segment with it through its own task's plan:
    cached) and passes ``draft=ModelDraft(...)`` and/or ``amateur=`` to the engine. Every
    other attribute is the engine's.

    The second model's decoder prompt is its own task's prompt for the segment; a longer
    target prompt (long-form's previous text before it) keeps its leading ids, mapped by
    text. What-if runs register their masked / emptied encodings with :meth:`other`, so
    the second model sees the same change of input.
    """

    def __init__(self, task: "SegmentedTask", inp: Any, plan: Plan):
        self.engine = plan.engine
        self.task, self.inp, self.plan = task, inp, plan
        self._known: dict[int, tuple[Any, int, Prepared, Callable | None]] = {}
        self._plans: dict[str, Plan] = {}

    def __getattr__(self, name: str) -> Any:
        if name == "engine":
            raise AttributeError(name)
        return getattr(self.engine, name)

    def prepare(self, i: int, segment: Any) -> Prepared:
        """The plan's ``prepare``, noting the segment of the encoder output."""
        ready = self.plan.prepare(i, segment)
        self._known[id(ready.encoded)] = (ready.encoded, i, ready, None)
        return ready

    def other(self, other: OtherInput, companion_other: Callable[["SegmentedTask", Plan], OtherInput]) -> OtherInput:
        """``other`` (a what-if's input) whose encodings are noted, so that the second model
        encodes the same change (``companion_other(its task, its plan)``: its ``masked`` /
        ``emptied``)."""
        def encode(i: int) -> EncoderOutput:
            encoded = other.encode(i)
            ready = self.prepare(i, self.plan.segments[i])
            self._known[id(encoded)] = (encoded, i, ready, companion_other)
            return encoded

        return dataclasses.replace(other, encode=encode)

    def run(self, encoded: EncoderOutput, prompt: Any, options: DecodingOptions, **kw: Any):
        """``Engine.run`` with ``draft=`` / ``amateur=`` built for this segment (unless given)."""
        draft, amateur = companion_names(options)
        if draft and kw.get("draft") is None:
            from core.speculative.model_draft import DRAFT_CONFIDENCE, ModelDraft

            name, size = split_shortlist(draft)
            kw["draft"] = ModelDraft(self.companion(name, encoded, prompt, shortlist=size), name=options.draft,
                                     sample=options.verification == "sample", seed=options.seed,
                                     eos_token_id=prompt.eos_token_id, confidence=DRAFT_CONFIDENCE)
        if amateur and kw.get("amateur") is None:
            kw["amateur"] = self.companion(amateur, encoded, prompt)
        return self.engine.run(encoded, prompt, options, **kw)

    def companion(self, name: str, encoded: EncoderOutput, prompt: Any, shortlist: int | None = None):
        """The ``ModelCompanion`` of model ``name`` for the segment of ``encoded`` (fresh cache).

        Raises:
            ValueError: ``encoded`` is not one of this plan's segments; the second model
                splits the input into another number of segments; the two tokenizers do not
                share the text (``TokenMap``).
        """
        from core.speculative.companion import ModelCompanion

        known = self._known.get(id(encoded))
        if known is None or known[0] is not encoded:
            raise ValueError(f"the {name} model can only follow this input's own segments; this run decodes another "
                             "encoder output (use another draft, e.g. ngram)")
        _, i, ready, companion_other = known
        task2 = self.task.companion_task(name)
        plan2 = self._companion_plan(name, task2)
        if companion_other is not None:
            d_encoded = companion_other(task2, plan2).encode(i)
            d_ready = plan2.prepare(i, plan2.segments[i])
        else:
            d_ready = plan2.prepare(i, plan2.segments[i])
            d_encoded = d_ready.encoded
        token_map = self.task.token_map(name, task2)
        target = [int(t) for t in prompt.prompt_ids]
        own = [int(t) for t in ready.prompt.prompt_ids]
        draft_prompt = None
        if own and len(target) >= len(own) and target[len(target) - len(own):] == own:
            lead = target[:len(target) - len(own)]
            draft_prompt = [c for t in lead for c in token_map.companion_ids(t)] + list(d_ready.prompt.prompt_ids)
        kwargs = {}
        if shortlist:
            kwargs["head_ids"] = self.task.companion_shortlist(name, task2, shortlist)
        label = name if not shortlist else f"{name}{SHORTLIST_MARK}{shortlist}"
        return ModelCompanion(task2.backend, d_encoded, token_map, name=label, target_prompt=target,
                              draft_prompt=draft_prompt, step_kwargs=kwargs)

    def _companion_plan(self, name: str, task2: "SegmentedTask") -> Plan:
        plan2 = self._plans.get(name)
        if plan2 is None:
            try:
                plan2 = task2.plan(self.inp, DecodingOptions())
            except ValueError as exc:
                raise ValueError(f"the {name} model cannot read this input as the target does: {exc}") from exc
            if len(plan2.segments) != len(self.plan.segments):
                raise ValueError(f"the {name} model splits this input into {len(plan2.segments)} segment(s), "
                                 f"{self.task.name} into {len(self.plan.segments)}: it cannot follow segment by segment")
            self._plans[name] = plan2
        return plan2


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
                                cancel=cancel, forced={0: prefix_ids} if prefix_ids else None)

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
