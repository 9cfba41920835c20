"""Two-model runs (issue 21): the second model a run's options name, and the engine that
hands it to ``Engine.run`` segment by segment.

When the options name a second model (speculative decoding's ``draft="model:NAME"``,
contrastive decoding's ``contrastive_amateur="NAME"``), ``core.tasks.base.SegmentedTask``
loads it once as a task of the same kind, plans the same input with it, and wraps its plan's
engine in a :class:`CompanionEngine`, which builds a ``ModelDraft`` / ``ModelCompanion`` per
segment. A Whisper window decoded outside the segment runs (long-form) gets its second
model from :func:`window_companions`. Torch-free at import.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from core.backends.base import EncoderOutput
from core.options import DecodingOptions
from core.tasks.plan import OtherInput, Plan, Prepared


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

    def __init__(self, task: Any, inp: Any, plan: Plan):
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

    def other(self, other: OtherInput, companion_other: Callable[[Any, Plan], OtherInput]) -> OtherInput:
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

    def _companion_plan(self, name: str, task2: Any) -> Plan:
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


def window_companions(model, options: DecodingOptions, prompt, encode: Callable[[Any], object], *,
                      language: str = "en", task: str = "transcribe", timestamps: bool = False) -> dict:
    """``SpeechModel.companions``: ``Engine.run``'s ``draft=`` / ``amateur=`` for one Whisper
    window decoded outside the segment runs (long-form: ``core.tasks.longform``), when
    ``options`` name a second model (:func:`companion_names`); {} otherwise.

    Args:
        model: the target, a ``core.tasks.speech.SpeechModel``.
        options: the run's options.
        prompt: the window's decoder prompt (with ``<|startofprev|>`` + previous text in
            long-form: the previous ids are mapped to the second model by text).
        encode: the second model (a ``SpeechModel``) -> its encoder output of the same
            window (e.g. ``lambda m: encode_window(m, mel, key, seek, n_frames)[0]``:
            cached per model).
        language, task, timestamps: the window's, for the second model's own prompt
            (an English-only model gets "en", "transcribe").

    Raises:
        ValueError / FileNotFoundError / RuntimeError: the second model cannot be loaded,
            or its tokenizer does not share the text (``TokenMap``).
    """
    from core.speculative.companion import ModelCompanion
    from core.speculative.model_draft import DRAFT_CONFIDENCE, ModelDraft

    draft, amateur = companion_names(options)
    out: dict = {}
    for role, name in (("draft", draft), ("amateur", amateur)):
        if not name:
            continue
        model_name, size = split_shortlist(name) if role == "draft" else (name, None)
        other = model.companion_task(model_name)
        token_map = model.token_map(model_name, other)
        ids = [int(t) for t in prompt.prompt_ids]
        sp = model._loaded.special
        previous: list[int] = []
        if sp.sot_prev is not None and ids and ids[0] == sp.sot_prev and sp.sot in ids:
            previous = ids[1:ids.index(sp.sot)]
        mapped = [c for t in previous for c in token_map.companion_ids(t)]
        own = other.prompt(language if other.multilingual else "en",
                           task if other.multilingual else "transcribe", timestamps,
                           previous=mapped if other._loaded.special.sot_prev is not None else ())
        kwargs = {"head_ids": model.companion_shortlist(model_name, other, size)} if size else {}
        label = model_name if not size else f"{model_name}{SHORTLIST_MARK}{size}"
        companion = ModelCompanion(other.backend, encode(other), token_map, name=label, target_prompt=ids,
                                   draft_prompt=own.prompt_ids, step_kwargs=kwargs)
        out[role] = companion if role == "amateur" else ModelDraft(
            companion, name=options.draft, sample=options.verification == "sample", seed=options.seed,
            eos_token_id=prompt.eos_token_id, confidence=DRAFT_CONFIDENCE)
    return out
