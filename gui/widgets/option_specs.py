"""The options panel's data: sections, which fields each holds, the control specs
(range, step, decimals, "off" text), the definition-and-source help of every control, and
the parsing of the text fields (bad words, logit bias). No widgets here."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Iterable

from PySide6.QtCore import QStandardPaths

from core.options import BEAM_STRATEGIES, SAMPLING_STRATEGIES, DecodingOptions
from core.processors.stages import REGISTRY, stage_fields

#: the encoder stages: they need the source token ids, which only translation has
ENCODER_STAGES = ("encoder_repetition_penalty", "encoder_no_repeat_ngram")
#: what the tabs without source ids say about them (DecodeTab passes it in)
NO_SOURCE_IDS = "applies to translation only: it needs the source token ids, and this tab's encoder reads {what}"

SECTIONS = ("Strategy", "Filters", "Penalties", "Beam", "Constraints")
#: sections open on first start (the settings keep the user's choice)
DEFAULT_EXPANDED = ("Strategy", "Filters")
#: the chain stages each section's summary lists (the registry's ``section`` of each stage)
SECTION_STAGES = {
    name: tuple(st.name for st in REGISTRY if st.section == name) for name in ("Penalties", "Constraints")
}
#: fields compared with the preset (the rest are about reporting, not decoding)
MARKED_FIELDS = tuple(f.name for f in fields(DecodingOptions)
                      if f.name not in ("top_k_report", "capture_attention", "capture_lens"))
#: integer fields (the spin boxes give floats)
INT_FIELDS = {f.name for f in fields(DecodingOptions) if type(f.default) is int}

STRATEGY_HELP = {
    "greedy": "Greedy: always take the most probable token after the penalties "
    "(transformers generate() with do_sample=False, num_beams=1).",
    "sample": "Sampling: draw each token from the processed distribution — penalties, temperature and the "
    "filters of the chain (transformers do_sample=True).",
    "beam": "Beam search: keep the num_beams best partial hypotheses by summed log-probability, "
    "ranked with the length penalty (transformers num_beams > 1).",
    "diverse_beam": "Diverse (group) beam search: the beams are split into groups and a group is penalised for "
    "tokens earlier groups chose at the same step (Vijayakumar et al. 2016).",
    "contrastive": "Contrastive search: among the top-k candidates take the argmax of (1 − α)·p(v) − α·(max cosine "
    "similarity of v's hidden state to the context) (Su et al. 2022).",
    "mirostat": "Mirostat v2: drop tokens whose surprise exceeds μ, sample, then move μ toward the target "
    "surprise τ at rate η (Basu et al. 2021; llama.cpp mirostat 2). Temperature and the filters apply first.",
    "speculative": "Speculative decoding: a cheap draft proposes γ tokens, the model scores them in one call and "
    "keeps a prefix (accept if u < p/q), then adds one token of its own — resampled from norm(max(0, p − q)) at the "
    "first rejection, or a bonus token when all were accepted (Leviathan et al. 2023, Algorithm 1; transformers "
    "assistant_model / prompt_lookup_num_tokens). Greedy verification gives exactly greedy's tokens.",
}

#: every control's definition and source (its tooltip): the strategy's fields here, the
#: stages' fields from the registry (``core.processors.stages``)
FIELD_HELP = {
    "max_new_tokens": "Upper bound on the tokens generated per segment, the forced prompt not counted "
    "(transformers max_new_tokens; openai/whisper sample_len).",
    "seed": "Seed of the random draws (sampling, mirostat, XTC): the same seed gives the same tokens "
    "(torch.Generator.manual_seed).",
    "mirostat_tau": "Target surprise τ in bits; μ starts at 2τ (Basu et al. 2021; llama.cpp mirostat_tau, default 5.0).",
    "mirostat_eta": "Learning rate η: μ ← μ − η · (observed surprise − τ) (Basu et al. 2021; llama.cpp mirostat_eta, "
    "default 0.1).",
    "penalty_alpha": "α in (1 − α)·p(v) − α·max cos-sim(h_v, context): the degeneration penalty; 0 = greedy "
    "(Su et al. 2022; transformers penalty_alpha).",
    "num_beams": "Beam width: hypotheses kept per step (transformers num_beams).",
    "length_penalty": "Beam score = sum of log p / length^penalty: > 0 favours longer outputs, < 0 shorter "
    "(transformers length_penalty).",
    "num_beam_groups": "Diverse beam search: the beams are split into this many groups; beams must be a multiple "
    "(Vijayakumar et al. 2016; transformers num_beam_groups).",
    "diversity_penalty": "Subtracted from a token's score once for each earlier group that chose it at this step "
    "(Hamming diversity; Vijayakumar et al. 2016; transformers diversity_penalty).",
    "draft_tokens": "Speculative decoding: tokens the draft proposes per round (γ). auto = adaptive: +2 after a round "
    "whose draft was all accepted, −1 after a rejection (transformers' \"heuristic\" schedule); N = always N.",
    **{f.name: f.help for _, f in stage_fields() if f.control is not None or f.text_control},
}
#: the help of the check boxes (non-stage switches of the engine; tooltips)
CHECK_HELP = {
    "kv_cache": "KV cache: keep each decoder layer's keys and values between steps, so a step runs the decoder on "
    "the new token only (transformers use_cache=True). Off (--no-kv-cache): every step re-runs the decoder over the "
    "whole prefix, as a decoder without a cache does — the same ids, but step t costs about t cached steps "
    "(quadratic in total); switch it off to see what the cache saves (the step strip's ms per step). "
    "Refused with the strategy speculative: it cuts the rejected draft tokens out of the cache.",
}
#: the check boxes of the Strategy section: (field, text)
CHECK_SPECS = [("kv_cache", "KV cache")]
#: the help of the choice boxes (speculative decoding's draft and verification; tooltips)
CHOICE_HELP = {
    "draft": "Speculative decoding: what drafts the tokens the model verifies — ngram (copy the continuation of the "
    "longest earlier match of the last tokens: prompt lookup, transformers prompt_lookup_num_tokens), branch (the "
    "tokens an earlier branch or attempt decoded), early-exit:L (the model's own first L decoder layers through its "
    "output head: self-speculation, LayerSkip), model:NAME (a smaller model sharing the tokenizer, e.g. "
    "model:tiny.en for base; transformers assistant_model). Type another layer count or a model name or directory.",
    "verification": "Speculative decoding: how the model judges a drafted token. greedy: accepted iff it is the "
    "model's argmax — the output is token for token greedy search's. sample: accepted if u < p/q, else resampled "
    "from norm(max(0, p − q)) (Leviathan et al. 2023, Algorithm 1) — distributed as sampling from the model; the "
    "seed, temperature and the filters apply.",
    # contrastive decoding's amateur: the registry's help (core.processors.stages)
    **{f.name: f.help for _, f in stage_fields() if f.name == "contrastive_amateur"},
}

# (field, label, min, max, step, decimals, special text at the minimum)
STRATEGY_SPECS = [("max_new_tokens", "max tokens", 1, 512, 1, 0, None)]
MIROSTAT_SPECS = [
    ("mirostat_tau", "mirostat τ", 0.1, 20.0, 0.1, 1, None),
    ("mirostat_eta", "mirostat η", 0.01, 1.0, 0.01, 2, None),
]
CONTRASTIVE_SPECS = [("penalty_alpha", "penalty α", 0.0, 1.0, 0.05, 2, None)]
SPECULATIVE_SPECS = [("draft_tokens", "draft tokens", 0, 16, 1, 0, "auto")]
#: the drafts the draft box lists (its text is editable: another layer count, model or directory)
DRAFT_CHOICES = (
    ("ngram", "n-gram prompt lookup: copy what followed the last tokens where they occurred before (free to draft)"),
    ("branch", "the tokens of the branch this one was forked from, or of the failed long-form attempt"),
    ("early-exit:4", "the model's first 4 decoder layers through its own output head (self-speculation)"),
    ("model:tiny.en", "whisper tiny.en drafts (speech; for base and larger English or multilingual models)"),
)
#: contrastive decoding's amateurs the amateur box lists (its text is editable: another layer or model)
AMATEUR_CHOICES = (
    ("", "off: no contrastive decoding"),
    ("layer:auto", "DoLa: at each step the early layer furthest from the final one (Jensen-Shannon divergence)"),
    ("layer:2", "DoLa: the output of the model's first 2 decoder layers through its output head"),
    ("tiny.en", "whisper tiny.en as the amateur (speech; for base and larger models)"),
)
#: how the target verifies (DecodingOptions.verification)
VERIFICATION_CHOICES = (
    ("greedy", "accept iff the drafted token is the model's argmax: exactly greedy search's tokens"),
    ("sample", "accept if u < p/q, else resample from norm(max(0, p − q)): distributed as sampling"),
)


def _stage_specs(section: str) -> list[tuple]:
    """The slider specs of the stages in ``section``, in registry order (from each field's
    ``control``)."""
    return [(f.name, f.label, *f.control) for st, f in stage_fields() if st.section == section and f.control]


FILTER_SPECS = _stage_specs("Filters")
PENALTY_SPECS = _stage_specs("Penalties")
CONSTRAINT_SPECS = _stage_specs("Constraints")
BEAM_SPECS = [
    ("num_beams", "beams", 1, 10, 1, 0, None),
    ("length_penalty", "length penalty", -1.0, 3.0, 0.1, 1, None),
    ("num_beam_groups", "beam groups", 1, 10, 1, 0, None),
    ("diversity_penalty", "diversity penalty", 0.0, 5.0, 0.1, 1, None),
]

#: fields used only by some strategies (the others: every strategy)
ONLY_FOR = {
    "seed": SAMPLING_STRATEGIES,
    "num_beams": BEAM_STRATEGIES,
    "length_penalty": BEAM_STRATEGIES,
    "num_beam_groups": ("diverse_beam",),
    "diversity_penalty": ("diverse_beam",),
    "penalty_alpha": ("contrastive",),
    "mirostat_tau": ("mirostat",),
    "mirostat_eta": ("mirostat",),
    "draft": ("speculative",),
    "draft_tokens": ("speculative",),
    "verification": ("speculative",),
}
#: top-k's candidates per step when the user picks contrastive search with top-k off
#: (transformers' documented example: penalty_alpha=0.6, top_k=4)
CONTRASTIVE_DEFAULT_TOP_K = 4


def default_presets_dir() -> Path | None:
    """Where user presets live: ``QStandardPaths.AppDataLocation``/presets (None if Qt knows none)."""
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    return Path(base) / "presets" if base else None


def parse_bad_words(text: str) -> tuple[str, ...]:
    """"cat, dog" -> ("cat", "dog"); empty entries dropped."""
    return tuple(w.strip() for w in text.split(",") if w.strip())


def parse_logit_bias(text: str) -> tuple[tuple[str, float], ...]:
    """"yes=5, no=-5" -> (("yes", 5.0), ("no", -5.0)).

    Raises:
        ValueError: an entry without "=value" or with a value that is not a number.
    """
    out = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        if "=" not in entry:
            raise ValueError(f"logit bias entry {entry.strip()!r}: write text=value, e.g. {entry.strip()}=5")
        word, _, value = entry.rpartition("=")
        try:
            out.append((word.strip(), float(value)))
        except ValueError:
            raise ValueError(f"logit bias entry {entry.strip()!r}: {value.strip()!r} is not a number") from None
    return tuple(out)


def format_logit_bias(bias: Iterable[tuple[str, float]]) -> str:
    return ", ".join(f"{t}={b:g}" for t, b in bias)
