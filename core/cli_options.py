"""The decoding flags every ``decoding-explorer`` command shares, and the options they give.

One flag per ``DecodingOptions`` field, named as the field's common spelling in
transformers / llama.cpp (``--top-p``, ``--min-p``, ``--dry-multiplier``, ...); the help
says what each does and which value switches it off. ``options_from_args`` builds the
validated options (``ValueError`` with one line on impossible values, which the CLI
prints and exits 1 on).
"""

from __future__ import annotations

import argparse

from core.options import LLAMA_CPP_SAMPLER_ORDER, STAGES, STRATEGIES, DecodingOptions

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
    d = DecodingOptions()
    g = p.add_argument_group("strategy")
    g.add_argument("--strategy", choices=CLI_STRATEGIES, default=d.strategy,
                   help="greedy | sample | beam | diverse-beam (Vijayakumar et al. 2016) | "
                        "contrastive (Su et al. 2022) | mirostat (v2, Basu et al. 2021)")
    g.add_argument("--seed", type=int, default=d.seed, help="seed of the sampler's random stream")
    g.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    g.add_argument("--beams", type=int, default=d.num_beams, help="beam width for beam / diverse-beam")
    g.add_argument("--length-penalty", type=float, default=d.length_penalty,
                   help="beam score = sum log p / length ** this")
    g.add_argument("--beam-groups", type=int, default=d.num_beam_groups, help="diverse-beam: groups (divide --beams)")
    g.add_argument("--diversity-penalty", type=float, default=d.diversity_penalty,
                   help="diverse-beam: subtracted per earlier group's pick of the same token")
    g.add_argument("--penalty-alpha", type=float, default=d.penalty_alpha,
                   help="contrastive: weight of the degeneration penalty (0 = greedy); candidates = --top-k")
    g.add_argument("--mirostat-tau", type=float, default=d.mirostat_tau, help="mirostat: target surprise, bits")
    g.add_argument("--mirostat-eta", type=float, default=d.mirostat_eta, help="mirostat: learning rate of mu")

    f = p.add_argument_group("sampler chain (sampling strategies only)")
    f.add_argument("--temperature", type=float, default=d.temperature)
    f.add_argument("--top-k", type=int, default=d.top_k, help="0 = off")
    f.add_argument("--top-p", type=float, default=d.top_p, help="nucleus; 1.0 = off")
    f.add_argument("--min-p", type=float, default=d.min_p, help="keep p >= min_p * p_max; 0 = off")
    f.add_argument("--typical-p", type=float, default=d.typical_p, help="locally typical mass; 1.0 = off")
    f.add_argument("--epsilon-cutoff", type=float, default=d.epsilon_cutoff, help="drop p < epsilon; 0 = off")
    f.add_argument("--eta-cutoff", type=float, default=d.eta_cutoff, help="entropy-dependent cutoff; 0 = off")
    f.add_argument("--top-h", type=float, default=d.top_h, help="entropy-bounded top-h; 0 = off")
    f.add_argument("--top-n-sigma", type=float, default=d.top_n_sigma, help="keep logits >= max - n*sigma; 0 = off")
    f.add_argument("--top-a", type=float, default=d.top_a, help="keep p >= top_a * p_max^2; 0 = off")
    f.add_argument("--tfs", type=float, default=d.tfs, help="tail-free sampling z; 1.0 = off")
    f.add_argument("--xtc-probability", type=float, default=d.xtc_probability, help="XTC: chance per step; 0 = off")
    f.add_argument("--xtc-threshold", type=float, default=d.xtc_threshold, help="XTC: top choices are p >= this")
    f.add_argument("--dynatemp-range", type=float, default=d.dynatemp_range,
                   help="dynamic temperature: temperature +- range by entropy; 0 = off")
    f.add_argument("--dynatemp-exponent", type=float, default=d.dynatemp_exponent)
    f.add_argument("--smoothing-factor", type=float, default=d.smoothing_factor, help="quadratic sampling; 0 = off")
    f.add_argument("--smoothing-curve", type=float, default=d.smoothing_curve)
    f.add_argument("--sampler-order", type=_sampler_order, default=None, metavar="NAME,NAME,...",
                   help="run only these stages, in this order (like llama.cpp --samplers); "
                        "'transformers' or 'llama.cpp' name the default orders. Stages: " + ", ".join(STAGES))

    q = p.add_argument_group("penalties and constraints (every strategy)")
    q.add_argument("--repetition-penalty", type=float, default=d.repetition_penalty, help="1.0 = off")
    q.add_argument("--no-repeat-ngram", type=int, default=d.no_repeat_ngram_size, help="0 = off")
    q.add_argument("--dry-multiplier", type=float, default=d.dry_multiplier, help="DRY; 0 = off")
    q.add_argument("--dry-base", type=float, default=d.dry_base)
    q.add_argument("--dry-allowed-length", type=int, default=d.dry_allowed_length)
    q.add_argument("--encoder-repetition-penalty", type=float, default=d.encoder_repetition_penalty,
                   help="translate: > 1 favours source tokens (hallucination penalty), < 1 avoids them; 1.0 = off")
    q.add_argument("--encoder-no-repeat-ngram", type=int, default=d.encoder_no_repeat_ngram_size,
                   help="translate: forbid copying source n-grams of this size; 0 = off")
    q.add_argument("--bad-words", nargs="+", default=[], metavar="W", help="words never to write")
    q.add_argument("--logit-bias", type=_logit_bias, action="append", default=[], metavar="TEXT=VALUE",
                   help="add VALUE to the score of TEXT's tokens (repeatable)")
    q.add_argument("--min-new-tokens", type=int, default=d.min_new_tokens, help="no EOS before this many tokens")
    q.add_argument("--length-decay", type=float, nargs=2, default=None, metavar=("START", "FACTOR"),
                   help="exponential decay length penalty: EOS boosted by FACTOR**(len-START) - 1 after START tokens")

    o = p.add_argument_group("output")
    o.add_argument("--top-k-report", type=int, default=d.top_k_report, help="alternatives per token in --json")
    o.add_argument("--json", action="store_true", help="print a JSON trace instead of the text")
    o.add_argument(
        "--attention",
        nargs="?",
        const="mean",
        choices=("mean", "full"),
        help="add cross-attention to the JSON trace (mean over layers and heads, or full)",
    )


def options_from_args(args: argparse.Namespace) -> DecodingOptions:
    """DecodingOptions from parsed arguments.

    Raises:
        ValueError: one line naming the impossible value (the CLI exits 1 with it).
    """
    d = DecodingOptions()
    order, disabled = d.sampler_order, ()
    if args.sampler_order is not None:  # listed stages run, in this order; the rest are off
        order = tuple(args.sampler_order) + tuple(s for s in STAGES if s not in args.sampler_order)
        disabled = tuple(s for s in STAGES if s not in args.sampler_order)
    if args.length_decay is not None:
        start, factor = args.length_decay
        if start != int(start) or start < 0:
            raise ValueError(f"--length-decay START must be a whole number of tokens >= 0, got {start}")
    else:
        start, factor = d.length_decay_start, d.length_decay_factor
    options = DecodingOptions(
        strategy=args.strategy.replace("-", "_"),
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        typical_p=args.typical_p,
        epsilon_cutoff=args.epsilon_cutoff,
        eta_cutoff=args.eta_cutoff,
        top_h=args.top_h,
        top_n_sigma=args.top_n_sigma,
        top_a=args.top_a,
        tfs=args.tfs,
        xtc_probability=args.xtc_probability,
        xtc_threshold=args.xtc_threshold,
        dynatemp_range=args.dynatemp_range,
        dynatemp_exponent=args.dynatemp_exponent,
        smoothing_factor=args.smoothing_factor,
        smoothing_curve=args.smoothing_curve,
        repetition_penalty=args.repetition_penalty,
        no_repeat_ngram_size=args.no_repeat_ngram,
        dry_multiplier=args.dry_multiplier,
        dry_base=args.dry_base,
        dry_allowed_length=args.dry_allowed_length,
        encoder_repetition_penalty=args.encoder_repetition_penalty,
        encoder_no_repeat_ngram_size=args.encoder_no_repeat_ngram,
        bad_words=tuple(args.bad_words),
        logit_bias=tuple(args.logit_bias),
        min_new_tokens=args.min_new_tokens,
        length_decay_start=int(start),
        length_decay_factor=factor,
        num_beams=args.beams,
        length_penalty=args.length_penalty,
        num_beam_groups=args.beam_groups,
        diversity_penalty=args.diversity_penalty,
        penalty_alpha=args.penalty_alpha,
        mirostat_tau=args.mirostat_tau,
        mirostat_eta=args.mirostat_eta,
        sampler_order=order,
        disabled_stages=disabled,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        top_k_report=args.top_k_report,
        capture_attention=bool(args.attention),
    ).validate()
    left_out = [s for s in options.disabled_stages if options.stage_is_set(s)]
    if left_out:
        raise ValueError(
            f"{', '.join(left_out)} {'is' if len(left_out) == 1 else 'are'} set but not in --sampler-order, "
            "so it would not run; add it to the order or drop its flag"
        )
    return options
