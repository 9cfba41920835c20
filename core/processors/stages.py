"""THE stage registry: every rule of the sampler chain, declared once.

Each :class:`Stage` says, in one place:

- its ``name`` (the key in ``DecodingOptions.sampler_order``), ``label`` and ``help`` (one
  sentence, with its source: the paper, the transformers class or the llama.cpp sampler);
- its option ``fields`` (:class:`Field`: label, help, the range ``validate()`` checks, the
  options panel's control and the CLI flag);
- ``is_off(options)``: whether its value is its "off" value (it builds no processor);
- ``build(options, prompt, ctx)``: its processor (the torch modules are imported only here,
  so this module loads without torch: the window imports it);
- ``strategies``: the strategies it applies to (None = every strategy; the warpers shape
  sampling only, as transformers' ``generate()`` adds warpers only when ``do_sample``);
- ``transformers`` / ``llama_cpp``: its place in transformers' ``_get_logits_processor``
  order and in llama.cpp's default sampler chain (``common/common.h``); the stages a
  library lacks sit after or beside their closest kin.

``core.options`` (the fields' checks, ``STAGES`` and the two orders), ``core.processors.chain``
(which processor each stage builds), the sampler-chain widget (rows, tooltips, "off"
dimming), the options panel (sections, control specs, tooltips) and the CLI (the flags of
``core.cli.options``) all read :data:`REGISTRY`. Adding a rule is one processor class plus
one entry here (the watermark, ``core.processors.watermark``, was added that way).

``DecodingOptions`` keeps its fields flat (see its docstring): the grouping of fields by
rule lives here, in each stage's ``fields``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# Named for the reader, not imported: core.options and core.processors.chain import this
# module (it must load without torch, and no two modules import each other).
DecodingOptions = Any  # core.options.DecodingOptions
DecoderPrompt = Any  # core.backends.base.DecoderPrompt
ChainContext = Any  # core.processors.chain.ChainContext

SAMPLING_STRATEGIES = ("sample", "mirostat")
"""The strategies that sample: the warpers (temperature and the filters) apply to them only."""

DRY_SEQUENCE_BREAKERS = ("\n", ":", '"', "*")
"""llama.cpp's default DRY sequence breakers (``common/common.h`` ``dry_sequence_breakers``)."""


# ------------------------------------------------------------------ checks
def _range(name: str, value: float, lo: float, hi: float, *, lo_open=False, hi_open=False, off: str = "") -> None:
    """ValueError "NAME must be in [lo, hi]OFF, got VALUE" unless ``value`` is in the range."""
    ok_lo = value > lo if lo_open else value >= lo
    ok_hi = value < hi if hi_open else value <= hi
    if not (ok_lo and ok_hi):
        left, right = "(" if lo_open else "[", ")" if hi_open else "]"
        raise ValueError(f"{name} must be in {left}{lo}, {hi}{right}{off}, got {value}")


Check = Callable[[str, Any], None]
"""``check(field name, value)``: raises ValueError naming the field, its value and the range."""


def in_range(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False, off: str = "") -> Check:
    """A check that the value lies in [lo, hi] (open ends as asked); ``off`` is appended
    to the message ("(0 = off)")."""
    return lambda name, v: _range(name, v, lo, hi, lo_open=lo_open, hi_open=hi_open, off=off)


def at_least(lo: float, off: str = "") -> Check:
    """A check that the value is >= ``lo``."""
    def check(name: str, v: Any) -> None:
        if v < lo:
            raise ValueError(f"{name} must be >= {lo}{off}, got {v}")
    return check


def above(lo: float, off: str = "", hint: str = "") -> Check:
    """A check that the value is > ``lo`` (NaN fails); ``hint`` follows the value."""
    def check(name: str, v: Any) -> None:
        if not v > lo:
            raise ValueError(f"{name} must be > {lo}{off}, got {v}{hint}")
    return check


def _words(name: str, words: tuple[str, ...]) -> None:
    if any(not w.strip() for w in words):
        raise ValueError(f"{name} must be non-empty words; remove the empty entry")


def _biases(name: str, pairs: tuple[tuple[str, float], ...]) -> None:
    for text, bias in pairs:
        if not text.strip():
            raise ValueError(f"{name} needs a non-empty text for bias {bias}")
        _range(f"{name} for {text!r}", bias, -100.0, 100.0)


# ------------------------------------------------------------------ declarations
@dataclass(frozen=True)
class Field:
    """One ``DecodingOptions`` field a stage reads.

    Attributes:
        name: the field's name.
        label: its label in the options panel ("top-k").
        help: what it does and where it comes from (the control's tooltip).
        check: ``check(name, value)`` raising ValueError (``DecodingOptions.validate``); None: no check.
        control: the panel's slider ``(minimum, maximum, step, decimals, text at the minimum)``;
            None: no slider (a text field or no control).
        text_control: the panel shows a text field for it (bad words, logit bias).
        flag: the CLI flag ("--top-k"); None: none (set through another field's flag).
        flag_help: the flag's help (the default is appended unless ``from_flag`` is given).
        flag_kwargs: argparse keywords beyond ``default=None`` (``type`` defaults to the
            field's default's type).
        from_flag: ``value -> {field: value}`` for flags that set several fields or need
            converting (ValueError on impossible values); None: the value is the field's.
    """

    name: str
    label: str
    help: str
    check: Check | None = None
    control: tuple | None = None
    text_control: bool = False
    flag: str | None = None
    flag_help: str = ""
    flag_kwargs: Mapping[str, Any] = field(default_factory=dict)
    from_flag: Callable[[Any], dict] | None = None


@dataclass(frozen=True)
class Stage:
    """One rule of the sampler chain (see the module docstring).

    Attributes:
        name, label, help: its key, display name and one-sentence definition with source.
        fields: the option fields it reads (the first is its main value).
        is_off: ``options -> bool``: at its "off" value (builds no processor).
        build: ``(options, prompt, ctx) -> processor or None`` (None: nothing to do, e.g.
            words that tokenise to nothing); called only when not ``is_off``.
            Raises ValueError when it cannot apply (no tokenizer, no source ids).
        strategies: the strategies it applies to; None = every strategy.
        transformers: its rank in transformers' order (the default ``sampler_order``).
        llama_cpp: its rank in llama.cpp's default chain (the stages llama.cpp lacks after).
        section: the options panel's section holding its controls.
        summary: ``options -> str``: its row text when on ("top-k 40"); None: label + main value.
        check: cross-field check ``options -> None`` (ValueError); None: none.
        reported: other names its processor reports under, with their labels
            (dynamic temperature reports as "dynatemp").
        run_report: ``(options, token_ids, vocab_size) -> (data dict, one-line note)`` about a
            finished run it shaped (the watermark's detector z-score); None: nothing to say.
        strategy_note: why it applies to ``strategies`` only, for a stage that is neither a
            penalty (every strategy) nor a warper (sampling only); "" otherwise.
    """

    name: str
    label: str
    help: str
    fields: tuple[Field, ...]
    is_off: Callable[[DecodingOptions], bool]
    build: Callable[[DecodingOptions, DecoderPrompt, ChainContext], Any]
    strategies: tuple[str, ...] | None
    transformers: int
    llama_cpp: int
    section: str
    summary: Callable[[DecodingOptions], str] | None = None
    check: Callable[[DecodingOptions], None] | None = None
    reported: Mapping[str, str] = field(default_factory=dict)
    run_report: Callable[[DecodingOptions, Any, int], tuple[dict, str]] | None = None
    strategy_note: str = ""

    def applies_to(self, strategy: str) -> bool:
        """Whether this stage shapes the scores of ``strategy``."""
        return self.strategies is None or strategy in self.strategies

    @property
    def every_strategy(self) -> bool:
        """A penalty / constraint (every strategy) rather than a warper (sampling only)."""
        return self.strategies is None

    @property
    def is_warper(self) -> bool:
        """A warper: it shapes the sampling strategies' scores only (temperature, the filters)."""
        return self.strategies == SAMPLING_STRATEGIES

    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def row_text(self, o: DecodingOptions) -> str:
        """The sampler-chain row: "LABEL off" or the label and its value ("top-k 40")."""
        if self.is_off(o):
            return f"{self.label} off"
        if self.summary is not None:
            return self.summary(o)
        return f"{self.label} {_g(getattr(o, self.fields[0].name))}"


def _g(v: float) -> str:
    return f"{v:g}"


# ------------------------------------------------------------------ build helpers (lazy torch)
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


def _need_tokenizer(ctx: ChainContext, what: str) -> Callable[[str], list[int]]:
    if ctx.tokenize is None:
        raise ValueError(f"{what} needs the model's tokenizer, which this model does not expose; clear {what}")
    return ctx.tokenize


def _need_source(ctx: ChainContext, what: str):
    if ctx.encoder_input_ids is None:
        raise ValueError(f"{what} applies to translation only (it needs the source token ids); set it to off")
    return ctx.encoder_input_ids


def _sequence_bias(o, prompt, ctx):
    from core.processors.constraints import SequenceBias

    tokenize = _need_tokenizer(ctx, "logit bias")
    bias: dict[tuple[int, ...], float] = {}
    for text, value in o.logit_bias:
        for ids in word_variants(tokenize, text):
            bias[ids] = value
    return SequenceBias(bias) if bias else None


def _bad_words(o, prompt, ctx):
    from core.processors.constraints import NoBadWords, bad_word_forms

    tokenize = _need_tokenizer(ctx, "bad words")
    ids = [list(v) for word in o.bad_words for form in bad_word_forms(word, o.bad_words_exact)
           for v in word_variants(tokenize, form)]
    ids = [list(v) for v in dict.fromkeys(tuple(v) for v in ids)]  # case forms may tokenise alike
    return NoBadWords(ids, prompt.eos_token_id) if ids else None


def _dry(o, prompt, ctx):
    from core.processors.llama_samplers import DRY

    breakers: set[int] = set()
    if ctx.tokenize is not None:
        for text in DRY_SEQUENCE_BREAKERS:
            breakers.update(int(i) for i in ctx.tokenize(text)[-1:])  # the breaker's own token
    return DRY(o.dry_multiplier, o.dry_base, o.dry_allowed_length, sequence_breakers=breakers)


def _temperature(o, prompt, ctx):
    if o.dynatemp_range > 0:
        from core.processors.llama_samplers import DynamicTemperature

        return DynamicTemperature(o.temperature, o.dynatemp_range, o.dynatemp_exponent)
    from core.processors.warpers import Temperature

    return Temperature(o.temperature)


def _make(module: str, cls: str, *args: Callable[[Any, Any, Any], Any]):
    """A build function: ``module.cls(*(a(o, prompt, ctx) for a in args))``, imported lazily."""
    def build(o, prompt, ctx):
        import importlib

        return getattr(importlib.import_module(module), cls)(*(a(o, prompt, ctx) for a in args))
    return build


def _opt(name: str):
    return lambda o, prompt, ctx: getattr(o, name)


_W = "core.processors.warpers"
_L = "core.processors.llama_samplers"
_U = "core.processors.webui_samplers"
_C = "core.processors.constraints"
_E = "core.processors.encoder_penalties"
_P = "core.processors.penalties"


def _seed_plus_one(o, prompt, ctx):
    return None if o.seed is None else o.seed + 1


def _xtc(o, prompt, ctx):
    from core.processors.llama_samplers import XTC

    return XTC(o.xtc_probability, o.xtc_threshold, seed=_seed_plus_one(o, prompt, ctx))


def _length_decay_flag(value) -> dict:
    start, factor = value
    if start != int(start) or start < 0:
        raise ValueError(f"--length-decay START must be a whole number of tokens >= 0, got {start}")
    return {"length_decay_start": int(start), "length_decay_factor": factor}


def _logit_bias_arg(text: str) -> tuple[str, float]:
    """``TEXT=VALUE`` -> (text, value); argparse reports the error on anything else."""
    import argparse

    word, sep, value = text.rpartition("=")
    if not sep or not word.strip():
        raise argparse.ArgumentTypeError(f"--logit-bias takes TEXT=VALUE (e.g. ' the=-5'), got {text!r}")
    try:
        return word, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--logit-bias value must be a number, got {value!r} in {text!r}") from None


def _dynatemp_check(o) -> None:
    if o.dynatemp_range >= o.temperature and o.dynatemp_range > 0:
        raise ValueError(
            f"dynatemp_range ({o.dynatemp_range}) must be smaller than the temperature "
            f"({o.temperature}): the lowest temperature is temperature - range"
        )


def _watermark_report(o, token_ids, vocab_size: int) -> tuple[dict, str]:
    from core.processors.watermark import watermark_note, watermark_z_score

    score = watermark_z_score(token_ids, vocab_size, o.watermark_gamma)
    return score.to_dict(), watermark_note(score)


def _amateur_check(name: str, value: str) -> None:
    from core.processors.amateur import parse_amateur

    if not isinstance(value, str):
        raise ValueError(f"{name} must be text (\"\" = off, layer:L, layer:auto or a model name), got {value!r}")
    parse_amateur(value)


def _contrastive_decoding(o, prompt, ctx):
    from core.processors.contrastive_decoding import ContrastiveDecoding, parse_amateur

    return ContrastiveDecoding(parse_amateur(o.contrastive_amateur), o.cd_alpha, o.cd_beta, ctx.amateur)


def _contrastive_check(o) -> None:
    if not o.contrastive_amateur.strip() or o.strategy in CONTRASTIVE_STRATEGIES:
        return
    if o.strategy == "speculative":
        raise ValueError(
            "contrastive decoding (contrastive_amateur) does not combine with speculative decoding: the amateur "
            "would have to score every drafted position; clear the amateur or choose greedy / sample"
        )
    raise ValueError(
        f"contrastive decoding (contrastive_amateur {o.contrastive_amateur.strip()!r}) applies to strategy "
        f"{', '.join(CONTRASTIVE_STRATEGIES[:-1])} or {CONTRASTIVE_STRATEGIES[-1]} (one path decoded token by "
        f"token), not {o.strategy.replace('_', ' ')}: there it would change nothing; clear the amateur or choose "
        "one of those"
    )


def _contrastive_summary(o) -> str:
    from core.processors.amateur import parse_amateur

    amateur = parse_amateur(o.contrastive_amateur)
    if amateur is not None and amateur.kind == "layer":
        return f"DoLa {amateur.text}, α {_g(o.cd_alpha)}"
    return f"contrastive {o.contrastive_amateur.strip()}, α {_g(o.cd_alpha)}, β {_g(o.cd_beta)}"


CONTRASTIVE_STRATEGIES = ("greedy", "sample", "mirostat")
"""The strategies contrastive decoding applies to: one path decoded token by token, as in its
references (x-transformers' generate; transformers' DoLa refuses beams)."""


def _temperature_summary(o) -> str:
    if o.dynatemp_range > 0:
        return f"dynamic temperature {_g(o.temperature)} ± {_g(o.dynatemp_range)}"
    return f"temperature {_g(o.temperature)}"


_OFF0, _OFF1 = " (0 = off)", " (1 = off)"


def _filter(name: str, label: str, build: tuple[str, str], *, off: int, transformers: int, llama_cpp: int,
            help: str, field_help: str, check: Check, control: tuple, flag_help: str,
            field_label: str | None = None) -> Stage:
    """A sampling filter of one option field named as the stage (label ``field_label`` or the
    stage's, CLI flag ``--name``), in the Filters section, applied when sampling only.

    Args:
        build: ``(module, class)``: the processor is ``class(options.<name>)``.
        off: the "off" value: 0 (off at values <= 0) or 1 (off at values >= 1).
    """
    if off not in (0, 1):
        raise ValueError(f"_filter {name}: off must be 0 or 1, got {off}")
    is_off = (lambda o: getattr(o, name) <= 0) if off == 0 else (lambda o: getattr(o, name) >= 1.0)
    return Stage(
        name, label, help,
        (Field(name, field_label or label, field_help, check=check, control=control,
               flag="--" + name.replace("_", "-"), flag_help=flag_help),),
        is_off=is_off, build=_make(*build, _opt(name)),
        strategies=SAMPLING_STRATEGIES, transformers=transformers, llama_cpp=llama_cpp, section="Filters",
    )

# ------------------------------------------------------------------ the registry
# Declared in the options panel's order (its sections list the controls in this order). The
# chain's orders come from each stage's ranks: transformers' (``_get_logits_processor``: the
# processors, then the warpers when do_sample, then the watermark; DRY, which transformers
# lacks, beside the repetition penalty as in llama.cpp; quadratic sampling beside temperature
# as webui applies it) and llama.cpp's.
REGISTRY: tuple[Stage, ...] = (
    Stage(
        "sequence_bias", "logit bias",
        "Adds a bias to the score of each given text's last token when the text's other tokens "
        "were just generated (transformers SequenceBiasLogitsProcessor; llama.cpp --logit-bias).",
        (Field("logit_bias", "logit bias",
               "text=value entries separated by commas (e.g. yes=5, no=-5): the value is added to the score of "
               "the text's last token when its other tokens were just generated; -100 … 100 "
               "(transformers SequenceBiasLogitsProcessor, sequence_bias; llama.cpp --logit-bias).",
               check=_biases, text_control=True, flag="--logit-bias",
               flag_help="add VALUE to the score of TEXT's tokens (repeatable)",
               flag_kwargs={"type": _logit_bias_arg, "action": "append", "metavar": "TEXT=VALUE"},
               from_flag=lambda v: {"logit_bias": tuple(v)}),),
        is_off=lambda o: not o.logit_bias, build=_sequence_bias, strategies=None,
        transformers=0, llama_cpp=0, section="Constraints",
        summary=lambda o: "logit bias " + ", ".join(f"{t}={_g(b)}" for t, b in o.logit_bias),
    ),
    Stage(
        "repetition_penalty", "repetition penalty",
        "Divides positive (multiplies negative) scores of tokens already generated by the "
        "penalty (Keskar et al. 2019, CTRL; transformers RepetitionPenaltyLogitsProcessor).",
        (Field("repetition_penalty", "repetition penalty",
               "Scores of tokens already generated are divided (positive) or multiplied (negative) by the "
               "penalty; 1 = off (Keskar et al. 2019, CTRL; transformers RepetitionPenaltyLogitsProcessor).",
               check=above(0, _OFF1), control=(1.0, 2.0, 0.01, 2, "off"), flag="--repetition-penalty",
               flag_help="1.0 = off"),),
        is_off=lambda o: o.repetition_penalty == 1.0,
        build=_make(_P, "RepetitionPenalty", _opt("repetition_penalty")),
        strategies=None, transformers=2, llama_cpp=2, section="Penalties",
    ),
    Stage(
        "no_repeat_ngram", "no-repeat n-gram",
        "Forbids any token that would repeat an n-gram already generated "
        "(Paulus et al. 2017; transformers NoRepeatNGramLogitsProcessor).",
        (Field("no_repeat_ngram_size", "no-repeat n-gram",
               "Forbid any token that would repeat an n-gram of this size already generated; 0 = off "
               "(Paulus et al. 2017; transformers NoRepeatNGramLogitsProcessor).",
               check=at_least(0, _OFF0), control=(0, 10, 1, 0, "off"), flag="--no-repeat-ngram", flag_help="0 = off"),),
        is_off=lambda o: o.no_repeat_ngram_size <= 0,
        build=_make(_P, "NoRepeatNGram", _opt("no_repeat_ngram_size")),
        strategies=None, transformers=4, llama_cpp=3, section="Penalties",
    ),
    Stage(
        "dry", "DRY",
        "Don't Repeat Yourself: a token that would extend a repeat of length L ≥ allowed length loses "
        "multiplier · base^(L − allowed) (p-e-w, text-generation-webui PR #5677; llama.cpp).",
        (Field("dry_multiplier", "DRY multiplier",
               "DRY: a token that would extend a repeat of length L ≥ allowed length loses "
               "multiplier · base^(L − allowed); 0 = off (p-e-w, text-generation-webui PR #5677; llama.cpp dry_multiplier).",
               check=in_range(0.0, 100.0, off=_OFF0), control=(0.0, 5.0, 0.05, 2, "off"), flag="--dry-multiplier",
               flag_help="DRY; 0 = off"),
         Field("dry_base", "DRY base",
               "DRY: how fast the penalty grows with the repeat's length (llama.cpp dry_base, default 1.75).",
               check=in_range(1.0, 10.0, lo_open=True), control=(1.05, 4.0, 0.05, 2, None), flag="--dry-base"),
         Field("dry_allowed_length", "DRY allowed length",
               "DRY: repeats up to this many tokens are not penalised (llama.cpp dry_allowed_length, default 2).",
               check=at_least(1), control=(1, 10, 1, 0, None), flag="--dry-allowed-length")),
        is_off=lambda o: o.dry_multiplier == 0, build=_dry,
        strategies=None, transformers=3, llama_cpp=8, section="Penalties",
        summary=lambda o: f"DRY ×{_g(o.dry_multiplier)}, base {_g(o.dry_base)}, after {o.dry_allowed_length}",
    ),
    Stage(
        "encoder_repetition_penalty", "encoder rep. penalty",
        "Rescales the scores of tokens that occur in the source: > 1 favours copying "
        "them, < 1 discourages it (transformers EncoderRepetitionPenaltyLogitsProcessor, the 'hallucination penalty').",
        (Field("encoder_repetition_penalty", "encoder rep. penalty",
               "Rescale the scores of tokens that occur in the source: > 1 favours copying them, "
               "< 1 discourages it; 1 = off (transformers EncoderRepetitionPenaltyLogitsProcessor).",
               check=above(0, _OFF1), control=(0.5, 2.0, 0.05, 2, None), flag="--encoder-repetition-penalty",
               flag_help="translate: > 1 favours source tokens (hallucination penalty), < 1 avoids them; 1.0 = off"),),
        is_off=lambda o: o.encoder_repetition_penalty == 1.0,
        build=_make(_E, "EncoderRepetitionPenalty", _opt("encoder_repetition_penalty"),
                    lambda o, p, c: _need_source(c, "encoder repetition penalty")),
        strategies=None, transformers=1, llama_cpp=1, section="Penalties",
    ),
    Stage(
        "encoder_no_repeat_ngram", "encoder no-repeat n-gram",
        "Forbids any token that would copy an n-gram of the source "
        "(transformers EncoderNoRepeatNGramLogitsProcessor).",
        (Field("encoder_no_repeat_ngram_size", "encoder no-repeat n-gram",
               "Forbid any token that would copy an n-gram of this size from the source; 0 = off "
               "(transformers EncoderNoRepeatNGramLogitsProcessor).",
               check=at_least(0, _OFF0), control=(0, 10, 1, 0, "off"), flag="--encoder-no-repeat-ngram",
               flag_help="translate: forbid copying source n-grams of this size; 0 = off"),),
        is_off=lambda o: o.encoder_no_repeat_ngram_size <= 0,
        build=_make(_E, "EncoderNoRepeatNGram", _opt("encoder_no_repeat_ngram_size"),
                    lambda o, p, c: _need_source(c, "encoder no-repeat n-gram")),
        strategies=None, transformers=5, llama_cpp=4, section="Penalties",
    ),
    Stage(
        "contrastive_decoding", "contrastive decoding",
        "Contrasts the expert with an amateur, (1 + β)·expert − β·amateur on the tokens the expert finds "
        "plausible (Li et al. 2022; O'Brien & Lewis 2023, Algorithm 2; x-transformers contrastive_decode_fn), "
        "or with an early layer of the same model (DoLa, Chuang et al. 2023; transformers dola_layers).",
        (Field("contrastive_amateur", "amateur",
               "The amateur the expert is contrasted with: a smaller model (tiny.en), layer:L (the output of the "
               "first L decoder layers through the logit lens) or layer:auto (the layer furthest from the final "
               "one by Jensen-Shannon divergence); empty = off (Li et al. 2022; DoLa, Chuang et al. 2023).",
               check=_amateur_check, flag="--contrastive-amateur",
               flag_help="contrastive decoding's amateur: a smaller model (tiny.en), layer:L (DoLa: the output of the "
               "first L decoder layers) or layer:auto (DoLa's choice by JS divergence); --strategy greedy, sample or "
               "mirostat only", flag_kwargs={"metavar": "tiny.en|layer:L|layer:auto"}),
         Field("cd_alpha", "CD α",
               "Contrastive decoding's plausibility cut: only tokens with p ≥ α·p_max of the expert stay "
               "(Li et al. 2022; x-transformers contrastive_decode_fn alpha, DoLa relative_top, default 0.1).",
               check=in_range(0.0, 1.0, lo_open=True), control=(0.01, 1.0, 0.01, 2, None), flag="--cd-alpha",
               flag_help="contrastive decoding: keep tokens with p >= alpha * p_max of the expert"),
         Field("cd_beta", "CD β",
               "Contrastive decoding's amateur weight: scores = (1 + β)·expert − β·amateur; a model amateur "
               "only, DoLa subtracts the layer's log-probabilities as they are (O'Brien & Lewis 2023; "
               "x-transformers contrastive_decode_fn beta, default 0.5).",
               check=in_range(0.0, 10.0), control=(0.0, 5.0, 0.05, 2, None), flag="--cd-beta",
               flag_help="contrastive decoding: the amateur model's weight (not used by layer amateurs)")),
        is_off=lambda o: not o.contrastive_amateur.strip(), build=_contrastive_decoding,
        strategies=CONTRASTIVE_STRATEGIES, transformers=-1, llama_cpp=-1, section="Penalties",
        summary=_contrastive_summary, check=_contrastive_check,
        strategy_note="contrastive decoding shapes greedy and sampling only: it follows one path token by token "
        "(the amateur model steps alongside it), as x-transformers' generate and transformers' DoLa do; "
        "beam, diverse beam, contrastive search and speculative decoding refuse an amateur",
    ),
    Stage(
        "bad_words", "bad words",
        "Forbids the given words, tokenised with and without a leading space "
        "(transformers NoBadWordsLogitsProcessor).",
        (Field("bad_words", "bad words",
               "Words that may not be generated, separated by commas. Each is banned in every case: as typed, "
               "lower case, Capitalised, Title Case and UPPER CASE (\"estação\" also bans \"Estação\" and \"ESTAÇÃO\"), "
               "each tokenised with the model's tokenizer at a sentence start and after a space (transformers "
               "NoBadWordsLogitsProcessor, bad_words_ids). For the typed form only, use exact matching "
               "(the option bad_words_exact; CLI --bad-words-exact).",
               check=_words, text_control=True, flag="--bad-words",
               flag_help="words never to write, in any case (as typed, lower, Capitalised, Title Case, UPPER)",
               flag_kwargs={"nargs": "+", "metavar": "W"}, from_flag=lambda v: {"bad_words": tuple(v)}),
         Field("bad_words_exact", "exact bad words",
               "Ban the bad words only as typed (transformers' exact bad_words_ids), not their case variants.",
               flag="--bad-words-exact",
               flag_help="ban the --bad-words only as typed (transformers' exact bad_words_ids), not their case variants",
               flag_kwargs={"action": "store_true"})),
        is_off=lambda o: not o.bad_words, build=_bad_words,
        strategies=None, transformers=6, llama_cpp=5, section="Constraints",
        summary=lambda o: "bad words " + ", ".join(o.bad_words),
    ),
    Stage(
        "min_new_tokens", "min new tokens",
        "Forbids the end-of-sequence token until this many tokens were generated "
        "(transformers MinNewTokensLengthLogitsProcessor).",
        (Field("min_new_tokens", "min new tokens",
               "End-of-sequence is forbidden until this many tokens were generated; 0 = off "
               "(transformers MinNewTokensLengthLogitsProcessor).",
               check=at_least(0, _OFF0), control=(0, 200, 1, 0, "off"), flag="--min-new-tokens",
               flag_help="no EOS before this many tokens"),),
        is_off=lambda o: o.min_new_tokens <= 0,
        build=_make(_C, "MinNewTokens", lambda o, p, c: c.prompt_len, _opt("min_new_tokens"),
                    lambda o, p, c: p.eos_token_id),
        strategies=None, transformers=7, llama_cpp=6, section="Constraints",
    ),
    Stage(
        "exponential_decay_length_penalty", "length decay",
        "After 'start' tokens, raises the end-of-sequence score by "
        "factor^(length − start) − 1 so the output ends sooner (transformers ExponentialDecayLengthPenalty).",
        (Field("length_decay_start", "length decay start",
               "Length decay: the token count after which the end-of-sequence score starts to grow "
               "(transformers exponential_decay_length_penalty, start_index).",
               check=at_least(0), control=(0, 512, 1, 0, None), flag="--length-decay",
               flag_help="exponential decay length penalty: EOS boosted by FACTOR**(len-START) - 1 after START tokens",
               flag_kwargs={"type": float, "nargs": 2, "metavar": ("START", "FACTOR")}, from_flag=_length_decay_flag),
         Field("length_decay_factor", "length decay factor",
               "Length decay: the end-of-sequence score grows by factor^(length − start) − 1, so the "
               "output ends sooner; 1 = off (transformers ExponentialDecayLengthPenalty).",
               check=in_range(1.0, 10.0, off=_OFF1), control=(1.0, 2.0, 0.01, 2, "off"))),
        is_off=lambda o: o.length_decay_factor == 1.0,
        build=_make(_C, "ExponentialDecayLengthPenalty", _opt("length_decay_start"), _opt("length_decay_factor"),
                    lambda o, p, c: p.eos_token_id, lambda o, p, c: c.prompt_len),
        strategies=None, transformers=8, llama_cpp=7, section="Constraints",
        summary=lambda o: f"length decay ×{_g(o.length_decay_factor)} from {o.length_decay_start}",
    ),
    # the warpers: sampling only
    Stage(
        "temperature", "temperature",
        "Divides the scores by T (Ackley et al. 1985; transformers TemperatureLogitsWarper); with a "
        "dynamic range, T follows the normalised entropy between T − range and T + range (kalomaze; llama.cpp temp_ext).",
        (Field("temperature", "temperature",
               "Logits are divided by T before the softmax: < 1 sharper, > 1 flatter, 1 = off "
               "(Ackley et al. 1985; transformers TemperatureLogitsWarper).",
               check=above(0, hint="; use strategy 'greedy' for argmax"), control=(0.05, 3.0, 0.05, 2, None),
               flag="--temperature"),
         Field("dynatemp_range", "dyn. temp. range",
               "Dynamic temperature: T runs from T − range (confident step) to T + range (uncertain step) by "
               "the normalised entropy; 0 = off, must be smaller than T (kalomaze; llama.cpp dynatemp_range).",
               check=in_range(0.0, 10.0, off=_OFF0), control=(0.0, 2.95, 0.05, 2, "off"), flag="--dynatemp-range",
               flag_help="dynamic temperature: temperature +- range by entropy; 0 = off"),
         Field("dynatemp_exponent", "dyn. temp. exponent",
               "The normalised entropy is raised to this power before it sets T "
               "(llama.cpp dynatemp_exponent, default 1.0).",
               check=in_range(0.0, 10.0, lo_open=True), control=(0.1, 5.0, 0.1, 1, None), flag="--dynatemp-exponent")),
        is_off=lambda o: o.dynatemp_range <= 0 and o.temperature == 1.0, build=_temperature,
        strategies=SAMPLING_STRATEGIES, transformers=10, llama_cpp=15, section="Filters",
        summary=_temperature_summary, check=_dynatemp_check, reported={"dynatemp": "dynamic temperature"},
    ),
    Stage(
        "quadratic", "quadratic",
        "Quadratic sampling: reshapes the scores around the top token as an inverted parabola "
        "(text-generation-webui smoothing_factor / smoothing_curve, kalomaze PR #5403).",
        (Field("smoothing_factor", "smoothing factor",
               "Quadratic sampling: score ← max − f·(score − max)²; a larger f keeps fewer tokens in play; "
               "0 = off (text-generation-webui smoothing_factor, kalomaze).",
               check=in_range(0.0, 100.0, off=_OFF0), control=(0.0, 10.0, 0.05, 2, "off"), flag="--smoothing-factor",
               flag_help="quadratic sampling; 0 = off"),
         Field("smoothing_curve", "smoothing curve",
               "1 = quadratic; > 1 adds a cubic term that flattens the top and cuts the tail harder "
               "(text-generation-webui smoothing_curve).",
               check=in_range(1.0, 10.0), control=(1.0, 10.0, 0.1, 1, None), flag="--smoothing-curve")),
        is_off=lambda o: o.smoothing_factor <= 0,
        build=_make(_U, "QuadraticSampling", _opt("smoothing_factor"), _opt("smoothing_curve")),
        strategies=SAMPLING_STRATEGIES, transformers=11, llama_cpp=16, section="Filters",
        summary=lambda o: f"quadratic {_g(o.smoothing_factor)}"
        + (f", curve {_g(o.smoothing_curve)}" if o.smoothing_curve != 1 else ""),
    ),
    _filter(
        "top_h", "top-h", (_W, "TopH"), off=0, transformers=12, llama_cpp=17,
        help="Keeps the best tokens while their entropy terms stay ≤ top_h · H (Top-H decoding, "
        "arXiv:2509.02510; transformers TopHLogitsWarper).",
        field_help="Keep the best tokens while their −p·log p terms add up to ≤ top_h · H (entropy-bounded nucleus); "
        "0 = off (Top-H decoding, arXiv:2509.02510; transformers TopHLogitsWarper).",
        check=in_range(0.0, 1.0, off=_OFF0), control=(0.0, 1.0, 0.01, 2, "off"), flag_help="entropy-bounded top-h; 0 = off",
    ),
    _filter(
        "top_k", "top-k", (_W, "TopK"), off=0, transformers=13, llama_cpp=10,
        help="Keeps the k most probable tokens (Fan et al. 2018; transformers TopKLogitsWarper).",
        field_help="Keep only the k most probable tokens; 0 = off (Fan et al. 2018; transformers TopKLogitsWarper). "
        "Contrastive search uses it as its number of candidates.",
        check=at_least(0, _OFF0), control=(0, 100, 1, 0, "off"), flag_help="0 = off",
    ),
    _filter(
        "top_p", "top-p", (_W, "TopP"), off=1, transformers=14, llama_cpp=12,
        help="Nucleus: keeps the smallest set of tokens whose probability sums to ≥ p "
        "(Holtzman et al. 2020; transformers TopPLogitsWarper).",
        field_help="Nucleus: keep the smallest set of tokens whose probability sums to ≥ p; 1 = off "
        "(Holtzman et al. 2020; transformers TopPLogitsWarper).",
        check=in_range(0, 1, lo_open=True, off=_OFF1), control=(0.05, 1.0, 0.01, 2, None), flag_help="nucleus; 1.0 = off",
    ),
    _filter(
        "min_p", "min-p", (_W, "MinP"), off=0, transformers=15, llama_cpp=13,
        help="Keeps tokens with p ≥ min_p · p_max (transformers MinPLogitsWarper; Nguyen et al. 2024).",
        field_help="Keep tokens with p ≥ min_p · p_max; 0 = off (transformers MinPLogitsWarper; Nguyen et al. 2024).",
        check=in_range(0.0, 1.0, off=_OFF0), control=(0.0, 1.0, 0.01, 2, "off"), flag_help="keep p >= min_p * p_max; 0 = off",
    ),
    _filter(
        "typical_p", "typical-p", (_W, "TypicalP"), off=1, transformers=16, llama_cpp=11,
        help="Locally typical sampling: keeps the tokens whose surprise is closest to the entropy until "
        "their mass reaches p (Meister et al. 2022; transformers TypicalLogitsWarper).",
        field_help="Locally typical sampling: keep the tokens whose surprise is closest to the entropy until their "
        "mass reaches p; 1 = off (Meister et al. 2022; transformers TypicalLogitsWarper).",
        check=in_range(0.0, 1.0, lo_open=True, off=_OFF1), control=(0.05, 1.0, 0.01, 2, None),
        flag_help="locally typical mass; 1.0 = off",
    ),
    _filter(
        "epsilon_cutoff", "epsilon cutoff", (_W, "EpsilonCutoff"), off=0, transformers=17, llama_cpp=18,
        help="Drops tokens with p < ε (Hewitt et al. 2022, truncation sampling; transformers EpsilonLogitsWarper).",
        field_help="Drop tokens with p < ε; 0 = off; the paper uses 3e-4 … 9e-4 "
        "(Hewitt et al. 2022; transformers EpsilonLogitsWarper).",
        check=in_range(0.0, 1.0, hi_open=True, off=_OFF0), control=(0.0, 0.01, 0.0001, 4, "off"),
        flag_help="drop p < epsilon; 0 = off",
    ),
    _filter(
        "eta_cutoff", "eta cutoff", (_W, "EtaCutoff"), off=0, transformers=18, llama_cpp=19,
        help="Drops tokens with p < min(η, √η · e^(−H)), H the entropy (Hewitt et al. 2022; "
        "transformers EtaLogitsWarper).",
        field_help="Drop tokens with p < min(η, √η · e^(−H)), H the entropy; 0 = off "
        "(Hewitt et al. 2022; transformers EtaLogitsWarper).",
        check=in_range(0.0, 1.0, hi_open=True, off=_OFF0), control=(0.0, 0.01, 0.0001, 4, "off"),
        flag_help="entropy-dependent cutoff; 0 = off",
    ),
    _filter(
        "top_n_sigma", "top-nσ", (_L, "TopNSigma"), off=0, transformers=19, llama_cpp=9,
        help="Keeps logits ≥ max − n·σ (Tang et al. 2024, 'Top-nσ: Not All Logits Are You Need'; "
        "llama.cpp top_n_sigma).",
        field_help="Keep logits ≥ max − n·σ of the logits; 0 = off (Tang et al. 2024, 'Top-nσ: Not All Logits "
        "Are You Need'; llama.cpp top_n_sigma).",
        check=in_range(0.0, 100.0, off=_OFF0), control=(0.0, 5.0, 0.1, 1, "off"), flag_help="keep logits >= max - n*sigma; 0 = off",
    ),
    _filter(
        "top_a", "top-a", (_U, "TopA"), off=0, transformers=20, llama_cpp=20,
        help="Keeps tokens with p ≥ top_a · p_max² (BlinkDL, RWKV; text-generation-webui TopALogitsWarper).",
        field_help="Keep tokens with p ≥ top_a · p_max²; 0 = off (BlinkDL, RWKV; text-generation-webui TopALogitsWarper).",
        check=in_range(0.0, 1.0, off=_OFF0), control=(0.0, 1.0, 0.01, 2, "off"), flag_help="keep p >= top_a * p_max^2; 0 = off",
    ),
    _filter(
        "tfs", "tail-free", (_U, "TailFree"), off=1, transformers=21, llama_cpp=21, field_label="tail-free z",
        help="Tail-free sampling: cuts the tail where the normalised second differences of the sorted "
        "probabilities add up to z (Phillips 2019; text-generation-webui TailFreeLogitsWarper).",
        field_help="Tail-free sampling: cut the tail where the normalised second differences of the sorted probabilities "
        "add up to z; 1 = off (Phillips 2019; text-generation-webui TailFreeLogitsWarper).",
        check=in_range(0.0, 1.0, lo_open=True, off=_OFF1), control=(0.05, 1.0, 0.01, 2, None),
        flag_help="tail-free sampling z; 1.0 = off",
    ),
    Stage(
        "xtc", "XTC",
        "Exclude Top Choices: with the given probability, removes every token above the threshold but the "
        "least likely of them (p-e-w, text-generation-webui PR #6335; llama.cpp xtc).",
        (Field("xtc_probability", "XTC probability",
               "Exclude Top Choices: the chance per step that every token above the threshold but the least "
               "likely of them is removed; 0 = off (p-e-w, text-generation-webui PR #6335; llama.cpp xtc_probability).",
               check=in_range(0.0, 1.0, off=_OFF0), control=(0.0, 1.0, 0.01, 2, "off"), flag="--xtc-probability",
               flag_help="XTC: chance per step; 0 = off"),
         Field("xtc_threshold", "XTC threshold",
               "XTC removes top choices with p ≥ this threshold (llama.cpp xtc_threshold, default 0.1).",
               check=in_range(0.0, 0.5, lo_open=True), control=(0.01, 0.5, 0.01, 2, None), flag="--xtc-threshold",
               flag_help="XTC: top choices are p >= this")),
        is_off=lambda o: o.xtc_probability <= 0, build=_xtc,
        strategies=SAMPLING_STRATEGIES, transformers=22, llama_cpp=14, section="Filters",
        summary=lambda o: f"XTC {_g(o.xtc_probability)} above {_g(o.xtc_threshold)}",
    ),
    Stage(
        "watermark", "watermark",
        "Adds δ to the scores of a green list of γ·|V| tokens drawn from a hash of the previous token, so a "
        "detector can tell the text was generated (Kirchenbauer et al. 2023; transformers WatermarkLogitsProcessor).",
        (Field("watermark_delta", "watermark δ",
               "Watermark: δ added to the green tokens' scores; the z-score of the run's tokens is reported; 0 = off "
               "(Kirchenbauer et al. 2023; transformers WatermarkingConfig bias, default 2.0).",
               check=in_range(0.0, 100.0, off=_OFF0), control=(0.0, 10.0, 0.1, 1, "off"), flag="--watermark-delta",
               flag_help="green-list watermark: bias of the green tokens (Kirchenbauer et al. 2023); 0 = off"),
         Field("watermark_gamma", "watermark γ",
               "Watermark: the green list's share of the vocabulary γ (Kirchenbauer et al. 2023; transformers "
               "WatermarkingConfig greenlist_ratio, default 0.25).",
               check=in_range(0.0, 1.0, lo_open=True, hi_open=True), control=(0.05, 0.95, 0.05, 2, None),
               flag="--watermark-gamma", flag_help="watermark: green list share of the vocabulary")),
        is_off=lambda o: o.watermark_delta <= 0,
        build=_make("core.processors.watermark", "Watermark", _opt("watermark_gamma"), _opt("watermark_delta")),
        strategies=None, transformers=30, llama_cpp=30, section="Constraints",
        summary=lambda o: f"watermark δ {_g(o.watermark_delta)}, γ {_g(o.watermark_gamma)}",
        run_report=_watermark_report,
    ),
)

STAGE: dict[str, Stage] = {s.name: s for s in REGISTRY}
"""The stages by name."""

TRANSFORMERS_ORDER: tuple[str, ...] = tuple(s.name for s in sorted(REGISTRY, key=lambda s: s.transformers))
LLAMA_CPP_ORDER: tuple[str, ...] = tuple(s.name for s in sorted(REGISTRY, key=lambda s: s.llama_cpp))

FIELD_STAGE: dict[str, str] = {f.name: s.name for s in REGISTRY for f in s.fields}
"""The stage each option field belongs to."""

STAGE_FIELDS: dict[str, tuple[str, ...]] = {s.name: s.field_names() for s in REGISTRY}
"""The option fields that set each stage."""

LABELS: dict[str, str] = {s.name: s.label for s in REGISTRY} | {k: v for s in REGISTRY for k, v in s.reported.items()}
"""Short display names of the stages and of the processor names reported."""


def stage(name: str) -> Stage:
    """The stage called ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    try:
        return STAGE[name]
    except KeyError:
        raise ValueError(f"unknown stage {name!r}; known: {', '.join(TRANSFORMERS_ORDER)}") from None


def stage_fields() -> list[tuple[Stage, Field]]:
    """Every (stage, field) pair in registry order."""
    return [(s, f) for s in REGISTRY for f in s.fields]


def check_options(o: DecodingOptions) -> None:
    """Run every stage field's check and every stage's cross-field check on ``o``.

    Raises:
        ValueError: the first failing check's message (names the field, value and range).
    """
    for s in REGISTRY:
        for f in s.fields:
            if f.check is not None:
                f.check(f.name, getattr(o, f.name))
        if s.check is not None:
            s.check(o)


def run_reports(o: DecodingOptions, token_ids, vocab_size: int | None) -> dict[str, tuple[dict, str]]:
    """What the stages that shaped a finished run say about it: ``{stage name: (data, note)}``
    for every stage with a ``run_report`` that ran (switched on, not off, applies to the
    strategy). The CLI puts the data in the JSON trace and the notes on stderr; the window
    shows the notes with the run's status.

    Args:
        o: the run's options.
        token_ids: its generated ids (``Finished.token_ids``).
        vocab_size: the model's vocabulary size; None: nothing can be reported ({}).
    """
    if vocab_size is None:
        return {}
    return {
        s.name: s.run_report(o, token_ids, vocab_size)
        for s in REGISTRY
        if s.run_report is not None and o.stage_enabled(s.name) and s.applies_to(o.strategy) and not s.is_off(o)
    }
