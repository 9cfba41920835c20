"""The sampler chain: the processors of the stages that run, in the user's order.

``build_processors(options, prompt, prompt_len, context)`` returns the hard rules of the
model (suppressed tokens) followed by one processor per stage of
``options.sampler_order`` that is switched on, set to something other than its "off"
value and applies to the strategy; what each stage builds, and when it is off, is declared
in the registry (``core.processors.stages``). With the default order the list equals what transformers'
``generate()`` builds (``GenerationMixin._get_logits_processor``) for the same settings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import torch

from core.backends.base import DecoderPrompt
from core.options import DecodingOptions
from core.processors.stages import DRY_SEQUENCE_BREAKERS, stage, word_variants  # noqa: F401 (re-exported)


@dataclass(frozen=True)
class ChainContext:
    """What some stages need beyond the options.

    Attributes:
        tokenize: text -> token ids without special tokens (the model's tokenizer), for
            bad words, logit bias and DRY's sequence breakers; None if the backend has none.
        encoder_input_ids: int64 (1, source_len): the source token ids (translation), for
            the encoder repetition penalty and encoder no-repeat n-gram; None otherwise.
        prompt_len: the number of forced prompt tokens (``chain_stages`` sets it).
        amateur: contrastive decoding's amateur model (``core.speculative.draft.Companion``:
            its logits mapped into this model's vocabulary, stepping alongside), which
            ``Engine.run(amateur=...)`` hands over; None when the task loaded none.
    """

    tokenize: Callable[[str], list[int]] | None = None
    encoder_input_ids: torch.Tensor | None = None
    prompt_len: int = 0
    amateur: Any = None


def build_stage(name: str, o: DecodingOptions, prompt: DecoderPrompt, prompt_len: int, ctx: ChainContext):
    """The processor of stage ``name`` for these options, or None when it is off
    (``core.processors.stages``: the stage's ``is_off`` and ``build``).

    Raises:
        ValueError: unknown stage, or the stage cannot apply here.
    """
    s = stage(name)
    if s.is_off(o):
        return None
    return s.build(o, prompt, replace(ctx, prompt_len=prompt_len))


def chain_stages(
    options: DecodingOptions, prompt: DecoderPrompt, prompt_len: int, context: ChainContext | None = None
) -> list[tuple[str, object]]:
    """(stage name, processor) of every stage that runs, in ``options.sampler_order``.

    Raises:
        ValueError: a stage set on where it cannot apply (encoder stages without source
            ids, bad words / logit bias without a tokenizer), or a processor's own check.
    """
    context = replace(context or ChainContext(), prompt_len=prompt_len)
    stages = []
    for name in options.sampler_order:
        s = stage(name)
        if not options.stage_enabled(name) or not s.applies_to(options.strategy):
            continue  # switched off; or a warper under a strategy that does not sample (transformers: do_sample)
        if s.is_off(options):
            continue
        processor = s.build(options, prompt, context)
        if processor is not None:
            stages.append((name, processor))
    return stages


def rules_for(prompt: DecoderPrompt, prompt_len: int) -> list:
    """The model's hard rules: suppress tokens, begin-suppress tokens, then Whisper's
    timestamp rules (transformers' order: the timestamp rule sees the suppressed scores)."""
    from core.processors.rules import BeginSuppressTokens, SuppressTokens
    from core.processors.whisper import TimestampRules

    rules: list = []
    if prompt.suppress_tokens:
        rules.append(SuppressTokens(prompt.suppress_tokens))
    if prompt.begin_suppress_tokens:
        rules.append(BeginSuppressTokens(prompt.begin_suppress_tokens, prompt_len))
    if prompt.timestamp_rules is not None:
        no_timestamps, max_initial = prompt.timestamp_rules
        rules.append(TimestampRules(no_timestamps, prompt.eos_token_id, prompt_len, max_initial))
    return rules


def stage_names(processors: Sequence[object]) -> list[str]:
    """The stage names of a processor list (for tests and the CLI)."""
    from core.processors import stage_name

    return [stage_name(p) for p in processors]
