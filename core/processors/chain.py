"""The sampler chain: which processor each named stage builds, in the user's order.

``build_processors(options, prompt, prompt_len, context)`` returns the hard rules of the
model (suppressed tokens) followed by one processor per stage of
``options.sampler_order`` that is switched on, set to something other than its "off"
value and applies to the strategy (``core.options``: penalties for every strategy,
warpers for sampling). With the default order the list equals what transformers'
``generate()`` builds (``GenerationMixin._get_logits_processor``) for the same settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from core.backends.base import DecoderPrompt
from core.options import PENALTY_STAGES, DecodingOptions

DRY_SEQUENCE_BREAKERS = ("\n", ":", '"', "*")
"""llama.cpp's default DRY sequence breakers (``common/common.h`` ``dry_sequence_breakers``)."""


@dataclass(frozen=True)
class ChainContext:
    """What some stages need beyond the options.

    Attributes:
        tokenize: text -> token ids without special tokens (the model's tokenizer), for
            bad words, logit bias and DRY's sequence breakers; None if the backend has none.
        encoder_input_ids: int64 (1, source_len): the source token ids (translation), for
            the encoder repetition penalty and encoder no-repeat n-gram; None otherwise.
    """

    tokenize: Callable[[str], list[int]] | None = None
    encoder_input_ids: torch.Tensor | None = None


def word_variants(tokenize: Callable[[str], list[int]], text: str) -> list[tuple[int, ...]]:
    """The token ids of ``text`` as the model would write it at a sentence start and
    after a space (``"cat"`` and ``" cat"`` are different tokens in byte-level BPE);
    duplicates and empty tokenisations dropped."""
    variants: list[tuple[int, ...]] = []
    for form in (text.strip(), " " + text.strip()):
        ids = tuple(int(i) for i in tokenize(form))
        if ids and ids not in variants:
            variants.append(ids)
    return variants


def _need_tokenizer(context: ChainContext, what: str) -> Callable[[str], list[int]]:
    if context.tokenize is None:
        raise ValueError(f"{what} needs the model's tokenizer, which this model does not expose; clear {what}")
    return context.tokenize


def _need_source(context: ChainContext, what: str) -> torch.Tensor:
    if context.encoder_input_ids is None:
        raise ValueError(f"{what} applies to translation only (it needs the source token ids); set it to off")
    return context.encoder_input_ids


def _stage(name: str, o: DecodingOptions, prompt: DecoderPrompt, prompt_len: int, ctx: ChainContext):
    """The processor of stage ``name`` for these options, or None when it is off."""
    from core.processors import constraints as c
    from core.processors import llama_samplers as llama
    from core.processors import penalties as pen
    from core.processors import warpers as w

    eos = prompt.eos_token_id
    if name == "sequence_bias":
        if not o.logit_bias:
            return None
        tokenize = _need_tokenizer(ctx, "logit bias")
        bias: dict[tuple[int, ...], float] = {}
        for text, value in o.logit_bias:
            for ids in word_variants(tokenize, text):
                bias[ids] = value
        return c.SequenceBias(bias) if bias else None
    if name == "encoder_repetition_penalty":
        if o.encoder_repetition_penalty == 1.0:
            return None
        return c.EncoderRepetitionPenalty(o.encoder_repetition_penalty, _need_source(ctx, "encoder repetition penalty"))
    if name == "repetition_penalty":
        return pen.RepetitionPenalty(o.repetition_penalty) if o.repetition_penalty != 1.0 else None
    if name == "dry":
        if o.dry_multiplier == 0:
            return None
        breakers: set[int] = set()
        if ctx.tokenize is not None:
            for text in DRY_SEQUENCE_BREAKERS:
                breakers.update(int(i) for i in ctx.tokenize(text)[-1:])  # the breaker's own token
        return llama.DRY(o.dry_multiplier, o.dry_base, o.dry_allowed_length, sequence_breakers=breakers)
    if name == "no_repeat_ngram":
        return pen.NoRepeatNGram(o.no_repeat_ngram_size) if o.no_repeat_ngram_size > 0 else None
    if name == "encoder_no_repeat_ngram":
        if o.encoder_no_repeat_ngram_size == 0:
            return None
        return c.EncoderNoRepeatNGram(o.encoder_no_repeat_ngram_size, _need_source(ctx, "encoder no-repeat n-gram"))
    if name == "bad_words":
        if not o.bad_words:
            return None
        tokenize = _need_tokenizer(ctx, "bad words")
        ids = [list(v) for word in o.bad_words for form in c.bad_word_forms(word, o.bad_words_exact)
               for v in word_variants(tokenize, form)]
        ids = [list(v) for v in dict.fromkeys(tuple(v) for v in ids)]  # case forms may tokenise alike
        return c.NoBadWords(ids, eos) if ids else None
    if name == "min_new_tokens":
        return c.MinNewTokens(prompt_len, o.min_new_tokens, eos) if o.min_new_tokens > 0 else None
    if name == "exponential_decay_length_penalty":
        if o.length_decay_factor == 1.0:
            return None
        return c.ExponentialDecayLengthPenalty(o.length_decay_start, o.length_decay_factor, eos, prompt_len)
    # the warpers
    if name == "temperature":
        if o.dynatemp_range > 0:
            return llama.DynamicTemperature(o.temperature, o.dynatemp_range, o.dynatemp_exponent)
        return w.Temperature(o.temperature) if o.temperature != 1.0 else None
    if name == "quadratic":
        return llama.QuadraticSampling(o.smoothing_factor, o.smoothing_curve) if o.smoothing_factor > 0 else None
    if name == "top_h":
        return w.TopH(o.top_h) if o.top_h > 0 else None
    if name == "top_k":
        return w.TopK(o.top_k) if o.top_k > 0 else None
    if name == "top_p":
        return w.TopP(o.top_p) if o.top_p < 1.0 else None
    if name == "min_p":
        return w.MinP(o.min_p) if o.min_p > 0 else None
    if name == "typical_p":
        return w.TypicalP(o.typical_p) if o.typical_p < 1.0 else None
    if name == "epsilon_cutoff":
        return w.EpsilonCutoff(o.epsilon_cutoff) if o.epsilon_cutoff > 0 else None
    if name == "eta_cutoff":
        return w.EtaCutoff(o.eta_cutoff) if o.eta_cutoff > 0 else None
    if name == "top_n_sigma":
        return llama.TopNSigma(o.top_n_sigma) if o.top_n_sigma > 0 else None
    if name == "top_a":
        return llama.TopA(o.top_a) if o.top_a > 0 else None
    if name == "tfs":
        return llama.TailFree(o.tfs) if o.tfs < 1.0 else None
    if name == "xtc":
        if o.xtc_probability == 0:
            return None
        return llama.XTC(o.xtc_probability, o.xtc_threshold, seed=None if o.seed is None else o.seed + 1)
    raise ValueError(f"unknown stage {name!r}")


def chain_stages(
    options: DecodingOptions, prompt: DecoderPrompt, prompt_len: int, context: ChainContext | None = None
) -> list[tuple[str, object]]:
    """(stage name, processor) of every stage that runs, in ``options.sampler_order``.

    Raises:
        ValueError: a stage set on where it cannot apply (encoder stages without source
            ids, bad words / logit bias without a tokenizer), or a processor's own check.
    """
    context = context or ChainContext()
    stages = []
    for name in options.sampler_order:
        if not options.stage_enabled(name):
            continue
        if name not in PENALTY_STAGES and not options.is_sampling:
            continue  # warpers shape sampling only (transformers: do_sample)
        processor = _stage(name, options, prompt, prompt_len, context)
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
