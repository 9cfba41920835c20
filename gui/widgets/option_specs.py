"""The options panel's data: sections, which fields each holds, the control specs
(range, step, decimals, "off" text), the definition-and-source help of every control, and
the parsing of the text fields (bad words, logit bias). No widgets here."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Iterable

from PySide6.QtCore import QStandardPaths

from core.options import BEAM_STRATEGIES, SAMPLING_STRATEGIES, DecodingOptions

#: the encoder stages: they need the source token ids, which only translation has
ENCODER_STAGES = ("encoder_repetition_penalty", "encoder_no_repeat_ngram")
#: what the tabs without source ids say about them (DecodeTab passes it in)
NO_SOURCE_IDS = "applies to translation only: it needs the source token ids, and this tab's encoder reads {what}"

SECTIONS = ("Strategy", "Filters", "Penalties", "Beam", "Constraints")
#: sections open on first start (the settings keep the user's choice)
DEFAULT_EXPANDED = ("Strategy", "Filters")
#: the chain stages each section's summary lists
SECTION_STAGES = {
    "Penalties": ("repetition_penalty", "no_repeat_ngram", "dry", "encoder_repetition_penalty", "encoder_no_repeat_ngram"),
    "Constraints": ("bad_words", "sequence_bias", "min_new_tokens", "exponential_decay_length_penalty"),
}
#: fields compared with the preset (the rest are about reporting, not decoding)
MARKED_FIELDS = tuple(f.name for f in fields(DecodingOptions)
                      if f.name not in ("top_k_report", "capture_attention", "capture_lens"))
#: integer fields (the spin boxes give floats)
_INT_FIELDS = {f.name for f in fields(DecodingOptions) if type(f.default) is int}

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
}

#: every control's definition and source (its tooltip)
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
    "temperature": "Logits are divided by T before the softmax: < 1 sharper, > 1 flatter, 1 = off "
    "(Ackley et al. 1985; transformers TemperatureLogitsWarper).",
    "dynatemp_range": "Dynamic temperature: T runs from T − range (confident step) to T + range (uncertain step) by "
    "the normalised entropy; 0 = off, must be smaller than T (kalomaze; llama.cpp dynatemp_range).",
    "dynatemp_exponent": "The normalised entropy is raised to this power before it sets T "
    "(llama.cpp dynatemp_exponent, default 1.0).",
    "smoothing_factor": "Quadratic sampling: score ← max − f·(score − max)²; a larger f keeps fewer tokens in play; "
    "0 = off (text-generation-webui smoothing_factor, kalomaze).",
    "smoothing_curve": "1 = quadratic; > 1 adds a cubic term that flattens the top and cuts the tail harder "
    "(text-generation-webui smoothing_curve).",
    "top_h": "Keep the best tokens while their −p·log p terms add up to ≤ top_h · H (entropy-bounded nucleus); "
    "0 = off (Top-H decoding, arXiv:2509.02510; transformers TopHLogitsWarper).",
    "top_k": "Keep only the k most probable tokens; 0 = off (Fan et al. 2018; transformers TopKLogitsWarper). "
    "Contrastive search uses it as its number of candidates.",
    "top_p": "Nucleus: keep the smallest set of tokens whose probability sums to ≥ p; 1 = off "
    "(Holtzman et al. 2020; transformers TopPLogitsWarper).",
    "min_p": "Keep tokens with p ≥ min_p · p_max; 0 = off (transformers MinPLogitsWarper; Nguyen et al. 2024).",
    "typical_p": "Locally typical sampling: keep the tokens whose surprise is closest to the entropy until their "
    "mass reaches p; 1 = off (Meister et al. 2022; transformers TypicalLogitsWarper).",
    "epsilon_cutoff": "Drop tokens with p < ε; 0 = off; the paper uses 3e-4 … 9e-4 "
    "(Hewitt et al. 2022; transformers EpsilonLogitsWarper).",
    "eta_cutoff": "Drop tokens with p < min(η, √η · e^(−H)), H the entropy; 0 = off "
    "(Hewitt et al. 2022; transformers EtaLogitsWarper).",
    "top_n_sigma": "Keep logits ≥ max − n·σ of the logits; 0 = off (Tang et al. 2024, 'Top-nσ: Not All Logits "
    "Are You Need'; llama.cpp top_n_sigma).",
    "top_a": "Keep tokens with p ≥ top_a · p_max²; 0 = off (BlinkDL, RWKV; text-generation-webui TopALogitsWarper).",
    "tfs": "Tail-free sampling: cut the tail where the normalised second differences of the sorted probabilities "
    "add up to z; 1 = off (Phillips 2019; text-generation-webui TailFreeLogitsWarper).",
    "xtc_probability": "Exclude Top Choices: the chance per step that every token above the threshold but the least "
    "likely of them is removed; 0 = off (p-e-w, text-generation-webui PR #6335; llama.cpp xtc_probability).",
    "xtc_threshold": "XTC removes top choices with p ≥ this threshold (llama.cpp xtc_threshold, default 0.1).",
    "repetition_penalty": "Scores of tokens already generated are divided (positive) or multiplied (negative) by the "
    "penalty; 1 = off (Keskar et al. 2019, CTRL; transformers RepetitionPenaltyLogitsProcessor).",
    "no_repeat_ngram_size": "Forbid any token that would repeat an n-gram of this size already generated; 0 = off "
    "(Paulus et al. 2017; transformers NoRepeatNGramLogitsProcessor).",
    "dry_multiplier": "DRY: a token that would extend a repeat of length L ≥ allowed length loses "
    "multiplier · base^(L − allowed); 0 = off (p-e-w, text-generation-webui PR #5677; llama.cpp dry_multiplier).",
    "dry_base": "DRY: how fast the penalty grows with the repeat's length (llama.cpp dry_base, default 1.75).",
    "dry_allowed_length": "DRY: repeats up to this many tokens are not penalised (llama.cpp dry_allowed_length, "
    "default 2).",
    "encoder_repetition_penalty": "Rescale the scores of tokens that occur in the source: > 1 favours copying them, "
    "< 1 discourages it; 1 = off (transformers EncoderRepetitionPenaltyLogitsProcessor).",
    "encoder_no_repeat_ngram_size": "Forbid any token that would copy an n-gram of this size from the source; 0 = off "
    "(transformers EncoderNoRepeatNGramLogitsProcessor).",
    "num_beams": "Beam width: hypotheses kept per step (transformers num_beams).",
    "length_penalty": "Beam score = sum of log p / length^penalty: > 0 favours longer outputs, < 0 shorter "
    "(transformers length_penalty).",
    "num_beam_groups": "Diverse beam search: the beams are split into this many groups; beams must be a multiple "
    "(Vijayakumar et al. 2016; transformers num_beam_groups).",
    "diversity_penalty": "Subtracted from a token's score once for each earlier group that chose it at this step "
    "(Hamming diversity; Vijayakumar et al. 2016; transformers diversity_penalty).",
    "bad_words": "Words that may not be generated, separated by commas. Each is banned in every case: as typed, "
    "lower case, Capitalised, Title Case and UPPER CASE (\"estação\" also bans \"Estação\" and \"ESTAÇÃO\"), each "
    "tokenised with the model's tokenizer at a sentence start and after a space (transformers "
    "NoBadWordsLogitsProcessor, bad_words_ids). For the typed form only, use exact matching "
    "(the option bad_words_exact; CLI --bad-words-exact).",
    "logit_bias": "text=value entries separated by commas (e.g. yes=5, no=-5): the value is added to the score of "
    "the text's last token when its other tokens were just generated; -100 … 100 "
    "(transformers SequenceBiasLogitsProcessor, sequence_bias; llama.cpp --logit-bias).",
    "min_new_tokens": "End-of-sequence is forbidden until this many tokens were generated; 0 = off "
    "(transformers MinNewTokensLengthLogitsProcessor).",
    "length_decay_start": "Length decay: the token count after which the end-of-sequence score starts to grow "
    "(transformers exponential_decay_length_penalty, start_index).",
    "length_decay_factor": "Length decay: the end-of-sequence score grows by factor^(length − start) − 1, so the "
    "output ends sooner; 1 = off (transformers ExponentialDecayLengthPenalty).",
}

# (field, label, min, max, step, decimals, special text at the minimum)
STRATEGY_SPECS = [("max_new_tokens", "max tokens", 1, 512, 1, 0, None)]
MIROSTAT_SPECS = [
    ("mirostat_tau", "mirostat τ", 0.1, 20.0, 0.1, 1, None),
    ("mirostat_eta", "mirostat η", 0.01, 1.0, 0.01, 2, None),
]
CONTRASTIVE_SPECS = [("penalty_alpha", "penalty α", 0.0, 1.0, 0.05, 2, None)]
FILTER_SPECS = [
    ("temperature", "temperature", 0.05, 3.0, 0.05, 2, None),
    ("dynatemp_range", "dyn. temp. range", 0.0, 2.95, 0.05, 2, "off"),
    ("dynatemp_exponent", "dyn. temp. exponent", 0.1, 5.0, 0.1, 1, None),
    ("smoothing_factor", "smoothing factor", 0.0, 10.0, 0.05, 2, "off"),
    ("smoothing_curve", "smoothing curve", 1.0, 10.0, 0.1, 1, None),
    ("top_h", "top-h", 0.0, 1.0, 0.01, 2, "off"),
    ("top_k", "top-k", 0, 100, 1, 0, "off"),
    ("top_p", "top-p", 0.05, 1.0, 0.01, 2, None),
    ("min_p", "min-p", 0.0, 1.0, 0.01, 2, "off"),
    ("typical_p", "typical-p", 0.05, 1.0, 0.01, 2, None),
    ("epsilon_cutoff", "epsilon cutoff", 0.0, 0.01, 0.0001, 4, "off"),
    ("eta_cutoff", "eta cutoff", 0.0, 0.01, 0.0001, 4, "off"),
    ("top_n_sigma", "top-nσ", 0.0, 5.0, 0.1, 1, "off"),
    ("top_a", "top-a", 0.0, 1.0, 0.01, 2, "off"),
    ("tfs", "tail-free z", 0.05, 1.0, 0.01, 2, None),
    ("xtc_probability", "XTC probability", 0.0, 1.0, 0.01, 2, "off"),
    ("xtc_threshold", "XTC threshold", 0.01, 0.5, 0.01, 2, None),
]
PENALTY_SPECS = [
    ("repetition_penalty", "repetition penalty", 1.0, 2.0, 0.01, 2, "off"),
    ("no_repeat_ngram_size", "no-repeat n-gram", 0, 10, 1, 0, "off"),
    ("dry_multiplier", "DRY multiplier", 0.0, 5.0, 0.05, 2, "off"),
    ("dry_base", "DRY base", 1.05, 4.0, 0.05, 2, None),
    ("dry_allowed_length", "DRY allowed length", 1, 10, 1, 0, None),
    ("encoder_repetition_penalty", "encoder rep. penalty", 0.5, 2.0, 0.05, 2, None),
    ("encoder_no_repeat_ngram_size", "encoder no-repeat n-gram", 0, 10, 1, 0, "off"),
]
BEAM_SPECS = [
    ("num_beams", "beams", 1, 10, 1, 0, None),
    ("length_penalty", "length penalty", -1.0, 3.0, 0.1, 1, None),
    ("num_beam_groups", "beam groups", 1, 10, 1, 0, None),
    ("diversity_penalty", "diversity penalty", 0.0, 5.0, 0.1, 1, None),
]
CONSTRAINT_SPECS = [
    ("min_new_tokens", "min new tokens", 0, 200, 1, 0, "off"),
    ("length_decay_start", "length decay start", 0, 512, 1, 0, None),
    ("length_decay_factor", "length decay factor", 1.0, 2.0, 0.01, 2, "off"),
]

#: fields used only by some strategies (the others: every strategy)
_ONLY_FOR = {
    "seed": SAMPLING_STRATEGIES,
    "num_beams": BEAM_STRATEGIES,
    "length_penalty": BEAM_STRATEGIES,
    "num_beam_groups": ("diverse_beam",),
    "diversity_penalty": ("diverse_beam",),
    "penalty_alpha": ("contrastive",),
    "mirostat_tau": ("mirostat",),
    "mirostat_eta": ("mirostat",),
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
