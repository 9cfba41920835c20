"""The decoding flags every ``decoding-explorer`` command shares, and the options they give.

One flag per ``DecodingOptions`` field, named as the field's common spelling in
transformers / llama.cpp (``--top-p``, ``--min-p``, ``--dry-multiplier``, ...); the help
says what each does and which value switches it off. Every flag defaults to "not given":
the options start from ``--preset`` (or ``DecodingOptions()``) and the flags given
override it. ``options_from_args`` builds the
validated options (``ValueError`` with one line on impossible values, which the CLI
prints and exits 1 on).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from core.options import LLAMA_CPP_SAMPLER_ORDER, STAGES, STRATEGIES, DecodingOptions
from core.tasks.presets import BUILTIN_NAMES, builtin_preset

CLI_STRATEGIES = tuple(s.replace("_", "-") for s in STRATEGIES)
"""Strategy names as typed on the command line (``diverse-beam``)."""


def _logit_bias(text: str) -> tuple[str, float]:
    """``TEXT=VALUE`` -> (text, value); argparse reports the error on anything else."""
    word, sep, value = text.rpartition("=")
    if not sep or not word.strip():
        raise argparse.ArgumentTypeError(f"--logit-bias takes TEXT=VALUE (e.g. ' the=-5'), got {text!r}")
    try:
        return word, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--logit-bias value must be a number, got {value!r} in {text!r}") from None


def _sampler_order(text: str) -> tuple[str, ...]:
    """``name,name,...`` -> stage names; ``llama.cpp`` / ``transformers`` name the two default orders."""
    if text.strip() == "llama.cpp":
        return LLAMA_CPP_SAMPLER_ORDER
    if text.strip() == "transformers":
        return STAGES
    names = tuple(n.strip().replace("-", "_") for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in STAGES and n != "dynatemp"]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"--sampler-order: unknown stage(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(STAGES)}"
        )
    return tuple("temperature" if n == "dynatemp" else n for n in names)


def add_decoding_arguments(p: argparse.ArgumentParser) -> None:
    """The decoding options shared by every subcommand."""
    g = p.add_argument_group("strategy")
    g.add_argument("--preset", default=None, metavar="NAME",
                   help="start from a named preset (flags given override it): " + "; ".join(BUILTIN_NAMES))
    g.add_argument("--strategy", choices=CLI_STRATEGIES, default=None,
                   help="greedy | sample | beam | diverse-beam (Vijayakumar et al. 2016) | "
                        "contrastive (Su et al. 2022) | mirostat (v2, Basu et al. 2021)")
    g.add_argument("--seed", type=int, default=None, help="seed of the sampler's random stream")
    g.add_argument("--max-new-tokens", type=int, default=None)
    g.add_argument("--beams", type=int, default=None, help="beam width for beam / diverse-beam")
    g.add_argument("--length-penalty", type=float, default=None,
                   help="beam score = sum log p / length ** this")
    g.add_argument("--beam-groups", type=int, default=None, help="diverse-beam: groups (divide --beams)")
    g.add_argument("--diversity-penalty", type=float, default=None,
                   help="diverse-beam: subtracted per earlier group's pick of the same token")
    g.add_argument("--penalty-alpha", type=float, default=None,
                   help="contrastive: weight of the degeneration penalty (0 = greedy); candidates = --top-k")
    g.add_argument("--mirostat-tau", type=float, default=None, help="mirostat: target surprise, bits")
    g.add_argument("--mirostat-eta", type=float, default=None, help="mirostat: learning rate of mu")

    f = p.add_argument_group("sampler chain (sampling strategies only)")
    f.add_argument("--temperature", type=float, default=None)
    f.add_argument("--top-k", type=int, default=None, help="0 = off")
    f.add_argument("--top-p", type=float, default=None, help="nucleus; 1.0 = off")
    f.add_argument("--min-p", type=float, default=None, help="keep p >= min_p * p_max; 0 = off")
    f.add_argument("--typical-p", type=float, default=None, help="locally typical mass; 1.0 = off")
    f.add_argument("--epsilon-cutoff", type=float, default=None, help="drop p < epsilon; 0 = off")
    f.add_argument("--eta-cutoff", type=float, default=None, help="entropy-dependent cutoff; 0 = off")
    f.add_argument("--top-h", type=float, default=None, help="entropy-bounded top-h; 0 = off")
    f.add_argument("--top-n-sigma", type=float, default=None, help="keep logits >= max - n*sigma; 0 = off")
    f.add_argument("--top-a", type=float, default=None, help="keep p >= top_a * p_max^2; 0 = off")
    f.add_argument("--tfs", type=float, default=None, help="tail-free sampling z; 1.0 = off")
    f.add_argument("--xtc-probability", type=float, default=None, help="XTC: chance per step; 0 = off")
    f.add_argument("--xtc-threshold", type=float, default=None, help="XTC: top choices are p >= this")
    f.add_argument("--dynatemp-range", type=float, default=None,
                   help="dynamic temperature: temperature +- range by entropy; 0 = off")
    f.add_argument("--dynatemp-exponent", type=float, default=None)
    f.add_argument("--smoothing-factor", type=float, default=None, help="quadratic sampling; 0 = off")
    f.add_argument("--smoothing-curve", type=float, default=None)
    f.add_argument("--sampler-order", type=_sampler_order, default=None, metavar="NAME,NAME,...",
                   help="run only these stages, in this order (like llama.cpp --samplers); "
                        "'transformers' or 'llama.cpp' name the default orders. Stages: " + ", ".join(STAGES))

    q = p.add_argument_group("penalties and constraints (every strategy)")
    q.add_argument("--repetition-penalty", type=float, default=None, help="1.0 = off")
    q.add_argument("--no-repeat-ngram", type=int, default=None, help="0 = off")
    q.add_argument("--dry-multiplier", type=float, default=None, help="DRY; 0 = off")
    q.add_argument("--dry-base", type=float, default=None)
    q.add_argument("--dry-allowed-length", type=int, default=None)
    q.add_argument("--encoder-repetition-penalty", type=float, default=None,
                   help="translate: > 1 favours source tokens (hallucination penalty), < 1 avoids them; 1.0 = off")
    q.add_argument("--encoder-no-repeat-ngram", type=int, default=None,
                   help="translate: forbid copying source n-grams of this size; 0 = off")
    q.add_argument("--bad-words", nargs="+", default=None, metavar="W",
                   help="words never to write, in any case (as typed, lower, Capitalised, Title Case, UPPER)")
    q.add_argument("--bad-words-exact", action="store_true", default=None,
                   help="ban the --bad-words only as typed (transformers' exact bad_words_ids), not their case variants")
    q.add_argument("--logit-bias", type=_logit_bias, action="append", default=None, metavar="TEXT=VALUE",
                   help="add VALUE to the score of TEXT's tokens (repeatable)")
    q.add_argument("--min-new-tokens", type=int, default=None, help="no EOS before this many tokens")
    q.add_argument("--length-decay", type=float, nargs=2, default=None, metavar=("START", "FACTOR"),
                   help="exponential decay length penalty: EOS boosted by FACTOR**(len-START) - 1 after START tokens")

    o = p.add_argument_group("output")
    o.add_argument("--top-k-report", type=int, default=None, help="alternatives per token in --json")
    o.add_argument("--json", action="store_true", help="print a JSON trace instead of the text")
    o.add_argument(
        "--attention",
        nargs="?",
        const="mean",
        choices=("mean", "full"),
        help="add cross-attention to the JSON trace (mean over layers and heads, or full)",
    )
    o.add_argument("--logit-lens", action="store_true",
                   help="add the logit lens to every token of the JSON trace: per decoder layer (the last is the "
                        "output layer) its top token and probability under the model's final norm and output "
                        "projection, and the emitted token's log-probability there")
    defaults = DecodingOptions()
    for action in p._actions:  # show the default each flag falls back to
        field = _FIELD_OF.get(action.dest, action.dest)
        if action.dest not in _NOT_OPTIONS and hasattr(defaults, field) and action.help is not None:
            action.help += f" (default {getattr(defaults, field)})"


_FIELD_OF = {
    "beams": "num_beams",
    "beam_groups": "num_beam_groups",
    "no_repeat_ngram": "no_repeat_ngram_size",
    "encoder_no_repeat_ngram": "encoder_no_repeat_ngram_size",
}
"""Flags whose destination differs from the DecodingOptions field they set."""

_NOT_OPTIONS = {"preset", "sampler_order", "length_decay", "strategy", "json", "attention", "bad_words", "logit_bias",
                "logit_lens"}


def options_from_args(args: argparse.Namespace) -> DecodingOptions:
    """DecodingOptions from parsed arguments: the preset's (or the defaults') values, then
    every flag given on the command line.

    Raises:
        ValueError: one line naming the impossible value or unknown preset (the CLI
            exits 1 with it).
    """
    if args.preset is not None:
        try:
            base = builtin_preset(args.preset).apply()
        except KeyError:
            raise ValueError(f"unknown preset {args.preset!r}; built in: {'; '.join(BUILTIN_NAMES)}") from None
    else:
        base = DecodingOptions()
    fields = set(DecodingOptions.__dataclass_fields__)
    changes = {}
    for dest, value in vars(args).items():
        field = _FIELD_OF.get(dest, dest)
        if value is None or dest in _NOT_OPTIONS or field not in fields:
            continue
        changes[field] = value
    if args.strategy is not None:
        changes["strategy"] = args.strategy.replace("-", "_")
    if args.bad_words is not None:
        changes["bad_words"] = tuple(args.bad_words)
    if args.logit_bias is not None:
        changes["logit_bias"] = tuple(args.logit_bias)
    if args.sampler_order is not None:  # listed stages run, in this order; the rest are off
        changes["sampler_order"] = tuple(args.sampler_order) + tuple(s for s in STAGES if s not in args.sampler_order)
        changes["disabled_stages"] = tuple(s for s in STAGES if s not in args.sampler_order)
    if args.length_decay is not None:
        start, factor = args.length_decay
        if start != int(start) or start < 0:
            raise ValueError(f"--length-decay START must be a whole number of tokens >= 0, got {start}")
        changes["length_decay_start"], changes["length_decay_factor"] = int(start), factor
    changes["capture_attention"] = bool(args.attention)
    changes["capture_lens"] = bool(getattr(args, "logit_lens", False))
    options = replace(base, **changes).validate()
    left_out = [s for s in options.disabled_stages if options.stage_is_set(s)]
    if left_out:
        raise ValueError(
            f"{', '.join(left_out)} {'is' if len(left_out) == 1 else 'are'} set but not in --sampler-order, "
            "so it would not run; add it to the order or drop its flag"
        )
    return options
