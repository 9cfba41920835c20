"""Decoding options: one frozen dataclass, validated once.

Modelled on openai/whisper ``whisper/decoding.py`` (``DecodingOptions`` and
``_verify_options``): every impossible combination raises ``ValueError`` with a
message that says what to change.

The sampler chain: every processor is a named *stage* (``STAGES``). ``sampler_order``
gives the order they run in; ``disabled_stages`` switches stages off without losing
their values. A stage runs when it is enabled, its value is not its "off" value, and it
applies to the strategy: penalties and constraints (``PENALTY_STAGES``) shape the
scores of every strategy, the warpers (``WARPER_STAGES``: temperature and the filters)
only those of the sampling strategies (``SAMPLING_STRATEGIES``), as transformers'
``generate()`` adds warpers only when ``do_sample``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from core.processors.stages import (
    LABELS,
    LLAMA_CPP_ORDER,
    SAMPLING_STRATEGIES,
    TRANSFORMERS_ORDER,
    _range,
    check_options,
)
from core.processors.stages import stage as _stage

STRATEGIES = ("greedy", "sample", "beam", "diverse_beam", "contrastive", "mirostat", "speculative")
BEAM_STRATEGIES = ("beam", "diverse_beam")

DRAFT_KINDS = ("ngram", "branch", "early-exit:L", "model:NAME")
"""What ``DecodingOptions.draft`` may name (speculative decoding, ``core.speculative``)."""

VERIFICATIONS = ("greedy", "sample")
"""How the target verifies a draft (``DecodingOptions.verification``)."""

PENALTY_STAGES = tuple(n for n in TRANSFORMERS_ORDER if _stage(n).every_strategy)
"""Stages that apply to every strategy (penalties, constraints, the watermark), in
transformers' order; read from the registry (``core.processors.stages``)."""

WARPER_STAGES = tuple(n for n in TRANSFORMERS_ORDER if _stage(n).is_warper)
"""Stages that apply to sampling only (temperature and the filters), in transformers' order.
(Contrastive decoding is neither: it applies to greedy and sampling, ``Stage.strategy_note``.)"""

STAGES = TRANSFORMERS_ORDER
DEFAULT_SAMPLER_ORDER = STAGES
"""transformers' order (``_get_logits_processor``: processors, warpers, watermark); the
stages it lacks beside their kin (DRY by the repetition penalty, quadratic by temperature)."""

LLAMA_CPP_SAMPLER_ORDER = LLAMA_CPP_ORDER
"""llama.cpp's default chain (``common/common.h``: penalties; dry; top_n_sigma; top_k;
typ_p; top_p; min_p; xtc; temperature), the stages it lacks after it."""

STAGE_LABELS = LABELS
"""Short display names of the stages (and of the processor names reported)."""


@dataclass(frozen=True)
class DecodingOptions:
    """How the decoder chooses tokens. Immutable; use ``dataclasses.replace`` or ``with_``.

    The probabilities shown to the user as "processed" are computed after the sampler
    chain (``sampler_order``): the penalties for every strategy, temperature and the
    filters for sampling.

    Why the fields are flat, not grouped (sampling / beam / penalties / constraints /
    capture): the flat names are the public vocabulary of the app. They are the keys of
    saved settings and user presets (``from_dict`` reads files written by older versions),
    of the JSON traces (``to_dict``), of the CLI flags and lane specs (``top_p=0.9``), and
    they match transformers' ``GenerationConfig`` and llama.cpp's parameter names one to
    one. Nesting them would rename every one of those keys and churn about 290 attribute
    reads and several hundred keyword uses in 96 files (counted when this was decided:
    ``o.top_k`` → ``o.sampling.top_k``; ``replace(o, top_k=..)`` would need nested
    replaces) for no behaviour. The grouping lives in the stage registry instead
    (``core.processors.stages``): each stage names its fields, their ranges, its section
    in the options panel and its CLI flags; the remaining fields belong to the strategies
    (beam, contrastive, mirostat) and to what a run reports (``top_k_report``,
    ``capture_attention``, ``capture_lens``).

    ``validate()`` checks an object once: it remembers that it passed and returns at
    once thereafter (a copy made with ``replace`` is checked again).
    """

    # "greedy" (argmax), "sample" (multinomial), "beam" (beam search), "diverse_beam"
    # (Vijayakumar et al. 2016), "contrastive" (Su et al. 2022), "mirostat" (v2, Basu et al. 2021),
    # "speculative" (Leviathan et al. 2023: a draft proposes, the target verifies; core.speculative)
    strategy: str = "greedy"
    # logits are divided by this before softmax; > 0. 1.0 = unchanged
    temperature: float = 1.0
    # keep only the k most probable tokens; 0 = off. Contrastive search: the candidates per step
    top_k: int = 0
    # nucleus: keep the smallest set of tokens whose probability sums to >= top_p; 1.0 = off
    top_p: float = 1.0
    # keep tokens with p >= min_p * p_max (transformers MinPLogitsWarper); 0 = off
    min_p: float = 0.0
    # locally typical sampling mass (Meister et al. 2022); 1.0 = off
    typical_p: float = 1.0
    # drop tokens with p < epsilon (Hewitt et al. 2022); 0 = off
    epsilon_cutoff: float = 0.0
    # entropy-dependent cutoff min(eta, sqrt(eta) * exp(-H)) (Hewitt et al. 2022); 0 = off
    eta_cutoff: float = 0.0
    # top-h: entropy-bounded nucleus (transformers TopHLogitsWarper); 0 = off
    top_h: float = 0.0
    # top-nσ: keep logits >= max - n·σ (Tang et al. 2024); 0 = off
    top_n_sigma: float = 0.0
    # top-a: keep p >= top_a * p_max² (text-generation-webui); 0 = off
    top_a: float = 0.0
    # tail-free sampling z (Phillips 2019); 1.0 = off
    tfs: float = 1.0
    # XTC: with this probability, drop every top choice above xtc_threshold but the least likely; 0 = off
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1
    # dynamic temperature: temperature ± range by normalised entropy ** exponent (llama.cpp); 0 = off
    dynatemp_range: float = 0.0
    dynatemp_exponent: float = 1.0
    # quadratic sampling (text-generation-webui smoothing_factor, smoothing_curve); 0 = off
    smoothing_factor: float = 0.0
    smoothing_curve: float = 1.0
    # CTRL-style penalty (Keskar et al. 2019) on tokens already generated; 1.0 = off
    repetition_penalty: float = 1.0
    # forbid repeating any n-gram of this size; 0 = off
    no_repeat_ngram_size: int = 0
    # DRY: penalty multiplier * base ** (repeat length - allowed length) (llama.cpp); 0 = off
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    # translation: > 1 favours tokens of the source (a hallucination penalty), < 1 avoids them;
    # transformers' EncoderRepetitionPenaltyLogitsProcessor convention; 1.0 = off
    encoder_repetition_penalty: float = 1.0
    # translation: forbid copying any source n-gram of this size; 0 = off
    encoder_no_repeat_ngram_size: int = 0
    # words (text) that may not be generated, tokenised with and without a leading space,
    # each with its case variants (as typed, lower, Capitalised, Title Case, UPPER)
    bad_words: tuple[str, ...] = ()
    # ban only the bad words as typed (transformers' exact bad_words_ids), not their case variants
    bad_words_exact: bool = False
    # (text, bias) pairs added to the text's last token after its prefix (transformers sequence_bias)
    logit_bias: tuple[tuple[str, float], ...] = ()
    # EOS is forbidden until this many tokens were generated; 0 = off
    min_new_tokens: int = 0
    # after start tokens, EOS's score grows by decay_factor ** (len - start) - 1; factor 1.0 = off
    length_decay_start: int = 0
    length_decay_factor: float = 1.0
    # green-list watermark (Kirchenbauer et al. 2023; transformers WatermarkLogitsProcessor, hash
    # "lefthash", context 1): delta added to a share gamma of the vocabulary seeded by the previous token
    watermark_delta: float = 0.0
    watermark_gamma: float = 0.25
    # contrastive decoding (Li et al. 2022; O'Brien & Lewis 2023; x-transformers contrastive_decode_fn):
    # the amateur ("" = off; "layer:L" / "layer:auto": an early layer through the logit lens, DoLa,
    # Chuang et al. 2023; otherwise a smaller model by name, e.g. "tiny.en"), the plausibility cut
    # alpha (keep p >= alpha * p_max of the expert) and the amateur model's weight beta
    contrastive_amateur: str = ""
    cd_alpha: float = 0.1
    cd_beta: float = 0.5
    # beam width for the beam strategies
    num_beams: int = 4
    # beam score = sum log-prob / length ** length_penalty (transformers' convention)
    length_penalty: float = 1.0
    # diverse beam search: groups (num_beams must divide) and the Hamming diversity penalty
    num_beam_groups: int = 2
    diversity_penalty: float = 0.5
    # contrastive search: (1 - alpha) * p(v) - alpha * max cosine similarity to the context
    penalty_alpha: float = 0.6
    # mirostat v2: target surprise tau (bits) and learning rate eta
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    # the order the chain's stages run in, and the stages switched off
    sampler_order: tuple[str, ...] = DEFAULT_SAMPLER_ORDER
    disabled_stages: tuple[str, ...] = ()
    # speculative decoding: what drafts ("ngram" prompt lookup, "branch" an earlier run's tokens,
    # "early-exit:L" the target's first L decoder layers, "model:NAME" a smaller model)
    draft: str = "ngram"
    # speculative decoding: tokens drafted per round (gamma); 0 = adaptive (+2 after a fully
    # accepted round, -1 after a rejection: transformers' "heuristic" schedule)
    draft_tokens: int = 0
    # speculative decoding: how the target verifies: "greedy" (accept iff the drafted token is its
    # argmax; output identical to greedy search) or "sample" (Leviathan et al.'s rule, seeded by seed;
    # output distributed as sampling from the target; temperature and the filters apply)
    verification: str = "greedy"
    # upper bound on generated tokens (the forced prompt not counted)
    max_new_tokens: int = 128
    # seed for sampling; None = nondeterministic
    seed: int | None = 0
    # how many alternatives each StepEvent reports (processed and raw top-k)
    top_k_report: int = 10
    # report cross-attention (layers, heads, source_len) with each step
    capture_attention: bool = True
    # report the logit lens with each step: per decoder layer, the final norm and output
    # projection applied to its output (StepEvent.lens); costs a projection per layer and step
    capture_lens: bool = False
    # keep the decoder's KV cache between steps; False re-runs the decoder over the whole prefix at
    # every step (as a decoder without a cache does: the same ids, step time growing with the step)
    kv_cache: bool = True

    def __post_init__(self) -> None:
        # settings and JSON give lists: keep the dataclass hashable and comparable
        object.__setattr__(self, "bad_words", tuple(str(w) for w in self.bad_words))
        object.__setattr__(self, "logit_bias", tuple((str(t), float(b)) for t, b in self.logit_bias))
        object.__setattr__(self, "sampler_order", tuple(self.sampler_order))
        object.__setattr__(self, "disabled_stages", tuple(self.disabled_stages))

    @property
    def is_sampling(self) -> bool:
        """Whether the warpers (temperature, filters) apply: sampling strategies only
        (speculative decoding with ``verification="sample"`` counts as sampling)."""
        return self.chain_strategy in SAMPLING_STRATEGIES

    @property
    def chain_strategy(self) -> str:
        """The strategy the processor chain is built for: ``strategy``, except that
        speculative decoding shapes its scores as plain decoding does under its verification
        ("greedy" or "sample")."""
        return self.verification if self.strategy == "speculative" else self.strategy

    def stage_enabled(self, stage: str) -> bool:
        """Whether ``stage`` is switched on in the chain (its value may still be "off")."""
        return stage in self.sampler_order and stage not in self.disabled_stages

    def stage_is_set(self, stage: str) -> bool:
        """Whether ``stage``'s value is something other than its "off" value (whether or
        not the stage is switched on in the chain and applies to the strategy).

        Raises:
            ValueError: unknown stage.
        """
        return not _stage(stage).is_off(self)

    def validate(self) -> "DecodingOptions":
        """Check the options once; return ``self`` so calls chain. An object that passed
        returns at once (it is immutable; ``replace`` makes a new one, checked again).

        Raises:
            ValueError: naming the bad field, its value and the allowed range.
        """
        if self.__dict__.get("_validated"):
            return self
        self._check()
        object.__setattr__(self, "_validated", True)
        return self

    def _check(self) -> None:
        """The checks themselves: the strategy's, then every stage's (from the registry)."""
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}"
            )
        check_options(self)  # every stage's fields and cross-field checks
        check_draft(self.draft)
        if isinstance(self.draft_tokens, bool) or int(self.draft_tokens) != self.draft_tokens or not (
                0 <= self.draft_tokens <= 64):
            raise ValueError(f"draft_tokens must be an integer 0..64 (0 = adaptive), got {self.draft_tokens!r}")
        if self.verification not in VERIFICATIONS:
            raise ValueError(f"verification must be 'greedy' or 'sample', got {self.verification!r}")
        if self.num_beams < 1:
            raise ValueError(f"num_beams must be >= 1, got {self.num_beams}")
        if self.strategy == "diverse_beam":
            if self.num_beam_groups < 2:
                raise ValueError(f"num_beam_groups must be >= 2 for diverse beam search, got {self.num_beam_groups}")
            if self.num_beams % self.num_beam_groups:
                raise ValueError(
                    f"num_beams ({self.num_beams}) must be a multiple of num_beam_groups "
                    f"({self.num_beam_groups}), e.g. {self.num_beam_groups * -(-self.num_beams // self.num_beam_groups)}"
                )
        if self.diversity_penalty < 0:
            raise ValueError(f"diversity_penalty must be >= 0, got {self.diversity_penalty}")
        _range("penalty_alpha", self.penalty_alpha, 0.0, 1.0)
        if self.strategy == "contrastive" and self.top_k < 1:
            raise ValueError("contrastive search needs top_k >= 1 candidates per step (e.g. 4)")
        if not self.mirostat_tau > 0:
            raise ValueError(f"mirostat_tau must be > 0 (bits), got {self.mirostat_tau}")
        _range("mirostat_eta", self.mirostat_eta, 0.0, 1.0, lo_open=True)
        for what, names in (("sampler_order", self.sampler_order), ("disabled_stages", self.disabled_stages)):
            unknown = [n for n in names if n not in STAGES]
            if unknown:
                raise ValueError(f"{what}: unknown stage(s) {', '.join(unknown)}; known: {', '.join(STAGES)}")
            if len(set(names)) != len(names):
                raise ValueError(f"{what} names a stage twice: {', '.join(names)}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.top_k_report < 1:
            raise ValueError(f"top_k_report must be >= 1, got {self.top_k_report}")
        if not self.kv_cache and self.strategy == "speculative":
            raise ValueError("kv_cache=False (--no-kv-cache) cannot be used with speculative decoding: it cuts the "
                             "rejected draft tokens out of the KV cache; use another strategy or keep the cache on")

    def with_(self, **changes: Any) -> "DecodingOptions":
        """A validated copy with ``changes`` applied."""
        return replace(self, **changes).validate()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON traces and settings."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecodingOptions":
        """Build from a dict, ignoring unknown keys (settings from older versions).

        A saved ``sampler_order`` that lacks stages added since gets them appended in
        their default places' order, so new stages are never lost.
        """
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "sampler_order" in known:
            order = [s for s in known["sampler_order"] if s in STAGES]
            order += [s for s in STAGES if s not in order]
            known["sampler_order"] = tuple(order)
        if "disabled_stages" in known:
            known["disabled_stages"] = tuple(s for s in known["disabled_stages"] if s in STAGES)
        return cls(**known).validate()


def check_draft(draft: str) -> str:
    """Check the spelling of a ``DecodingOptions.draft`` value; return it.

    Raises:
        ValueError: saying which spellings exist ("ngram", "branch", "early-exit:L" with L a
            decoder layer count >= 1, "model:NAME"; "#N" after L or NAME: a shortlist head of N ids).
    """
    if not isinstance(draft, str):
        raise ValueError(f"draft must be a string such as 'ngram', got {draft!r}")
    if draft in ("ngram", "branch"):
        return draft
    if draft.startswith("early-exit:"):
        layer, mark, size = draft.split(":", 1)[1].partition("#")
        if not layer.isdigit() or int(layer) < 1 or (mark and (not size.isdigit() or int(size) < 1)):
            raise ValueError(
                f"draft {draft!r}: write early-exit:L with L the number of decoder layers that draft, e.g. "
                "early-exit:4 (or early-exit:4#8192 with a shortlist head of the 8192 most frequent tokens)")
        return draft
    if draft.startswith("model:"):
        if not draft.split(":", 1)[1].strip():
            raise ValueError(f"draft {draft!r}: write model:NAME with a model name or directory, e.g. model:tiny.en")
        return draft
    raise ValueError(
        f"unknown draft {draft!r}; write ngram, branch, early-exit:L (e.g. early-exit:4) or model:NAME (e.g. model:tiny.en)")
