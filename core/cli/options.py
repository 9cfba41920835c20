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

from core.devices import DEVICE_TASKS, DEVICES, device_problem
from core.dtypes import HALF_DTYPES, HALF_TASKS, INT8_TASKS, MODEL_DTYPES
from core.options import LLAMA_CPP_SAMPLER_ORDER, STAGES, STRATEGIES, DecodingOptions
from core.processors.stages import REGISTRY, Field, _logit_bias_arg as _logit_bias  # noqa: F401 (re-exported)
from core.tasks.presets import BUILTIN_NAMES, builtin_preset

CLI_STRATEGIES = tuple(s.replace("_", "-") for s in STRATEGIES)
"""Strategy names as typed on the command line (``diverse-beam``)."""


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


DRAFT_KINDS = ("ngram, branch, early-exit:L[#N] (e.g. early-exit:4), or a draft model: a bundled name[#N] "
               "(e.g. tiny.en, tiny.en#8192), a hub id (org/name) or a local directory")
"""What ``--draft`` takes, for its error messages."""


def _known_model(name: str) -> bool:
    """Whether ``name`` can name a draft model without loading anything: a bundled model of
    any task, a hub id ("org/name") or an existing directory."""
    from pathlib import Path

    from core import catalog

    return (name in catalog.WHISPER_BUNDLED or name in catalog.TRANSLATION_BUNDLED or "/" in name
            or Path(name).expanduser().is_dir())


def _draft(text: str) -> str:
    """``--draft`` as typed -> ``DecodingOptions.draft``: ngram, branch and early-exit:L as they
    are, anything else a draft model (``model:NAME``; ``model:`` may be written), checked
    before any model loads (a name that is neither bundled, a hub id "org/name" nor a
    directory is refused). argparse prefixes the messages with "argument --draft:"."""
    text = text.strip()
    if text in ("ngram", "branch") or text.startswith(("early-exit:", "model:")):
        value = text
    elif text.startswith("early-exit"):
        raise argparse.ArgumentTypeError(f"{text!r}: write early-exit:L, e.g. early-exit:4")
    else:
        value = f"model:{text}"
    from core.options import check_draft

    try:
        value = check_draft(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value.startswith("model:"):
        name = value.split(":", 1)[1].strip().rsplit("#", 1)[0]
        if not _known_model(name):
            raise argparse.ArgumentTypeError(f"{text!r} is no draft kind and no model known here; give {DRAFT_KINDS}")
    return value


def _draft_tokens(text: str) -> int:
    """``--draft-tokens``: a whole number 1..64, or auto (0: the adaptive schedule)."""
    if text.strip().lower() == "auto":
        return 0
    if not text.strip().isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"give a whole number 1..64 or auto, got {text!r}")
    return int(text)


def add_decoding_arguments(p: argparse.ArgumentParser) -> None:
    """The decoding options shared by every subcommand."""
    g = p.add_argument_group("strategy")
    g.add_argument("--preset", default=None, metavar="NAME",
                   help="start from a named preset (flags given override it): " + "; ".join(BUILTIN_NAMES))
    g.add_argument("--strategy", choices=CLI_STRATEGIES, default=None,
                   help="greedy | sample | beam | diverse-beam (Vijayakumar et al. 2016) | "
                        "contrastive (Su et al. 2022) | mirostat (v2, Basu et al. 2021) | "
                        "speculative (Leviathan et al. 2023: --draft proposes, the model verifies)")
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
    g.add_argument("--draft", type=_draft, default=None, metavar="ngram|branch|early-exit:L|MODEL",
                   help="speculative: what drafts: ngram (prompt lookup in the prompt, the text so far and a "
                        "translation's source), branch (the previous run on the same input), early-exit:L (the "
                        "model's first L decoder layers; early-exit:L#N with an N-token shortlist head), or a "
                        "smaller model by name, hub id or directory (tiny.en; tiny.en#8192 with a shortlist head)")
    g.add_argument("--draft-tokens", type=_draft_tokens, default=None, metavar="N|auto",
                   help="speculative: tokens drafted per round; auto adapts (+2 after a round accepted in full, "
                        "-1 after a rejection) and switches drafting off where it loses")
    g.add_argument("--verification", choices=("greedy", "sample"), default=None,
                   help="speculative: greedy (the output is the model's greedy output, token for token) or sample "
                        "(Leviathan et al.'s rule: distributed as sampling from the model; --seed, --temperature "
                        "and the filters apply; the off switch of --draft-tokens auto then decides from the "
                        "acceptance counts, not the clock, so a seed gives the same text on any machine)")

    f = p.add_argument_group("sampler chain (sampling strategies only)")
    q = p.add_argument_group("penalties and constraints (every strategy)")
    for st in REGISTRY:  # one flag per stage field, from the registry
        for fld in st.fields:
            if fld.flag is not None:
                _add_flag(q if st.every_strategy else f, fld)
    f.add_argument("--sampler-order", type=_sampler_order, default=None, metavar="NAME,NAME,...",
                   help="run only these stages, in this order (like llama.cpp --samplers); "
                        "'transformers' or 'llama.cpp' name the default orders. Stages: " + ", ".join(STAGES))

    m = p.add_argument_group("model")
    m.add_argument("--dtype", choices=MODEL_DTYPES, default="float32",
                   help="the model's compute type: float32, or int8 (Whisper only: linear layers with int8 "
                        "weights, one scale per row, activations quantised per call, as CTranslate2's int8; "
                        "about 2x faster decoding on a CPU; tokens may differ slightly from float32), or "
                        "float16 / bfloat16 (transcribe only: every weight cast; made for a GPU: on a CPU "
                        "bfloat16 is about as fast as float32 and float16 about 4x slower; tokens may differ "
                        "from float32: see --precision-flips; default float32)")
    m.add_argument("--device", choices=DEVICES, default="auto",
                   help="where the model runs: auto (cuda if torch.cuda.is_available(), else cpu), cpu, cuda, "
                        "mps. transcribe only (the other commands run on the CPU); on a GPU each step's logits "
                        "and captured attention are copied to the host, where the sampler chain and the "
                        "events run (default auto)")
    m.add_argument("--precision-flips", action="store_true",
                   help="with --dtype float16 / bfloat16: after the decode, the float32 model reads the "
                        "emitted ids once (teacher-forced) and the steps where its argmax differs are listed "
                        "(--json: precision_flips [{step, token, float32_token, margin}]; a line on stderr). "
                        "Keeps a float32 copy of the weights")
    m.add_argument("--no-kv-cache", dest="kv_cache", action="store_const", const=False, default=None,
                   help="decode without the KV cache: every step re-runs the decoder over the whole prefix "
                        "(the same tokens; each step slower than the last). Not with --strategy speculative")
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
            shown = _DEFAULT_SHOWN.get(field, getattr(defaults, field))
            action.help += f" (default {shown})"


_DEFAULT_SHOWN = {"draft_tokens": "auto", "contrastive_amateur": "off", "kv_cache": "the cache on"}
"""Defaults shown in the help as typed on the command line, where the field's value differs."""

SPECULATIVE_FLAGS = ("draft", "draft_tokens", "verification")
"""Flags that apply to speculative decoding only."""
BEAM_FLAGS = ("beams", "beam_groups", "diversity_penalty", "length_penalty")
"""Flags that apply to beam / diverse-beam search only."""


def misapplied_flag(args: argparse.Namespace) -> str | None:
    """A one-line usage error when a flag given cannot apply (the CLI exits 2 with it), else
    None: ``--draft`` / ``--draft-tokens`` / ``--verification`` without ``--strategy
    speculative`` (the strategy or ``--preset``'s; with ``--compare``, without a speculative
    lane), or a beam flag with ``--strategy speculative`` (it verifies one sequence)."""
    strategy = getattr(args, "strategy", None)
    if strategy is None and getattr(args, "preset", None) is not None:
        try:
            strategy = builtin_preset(args.preset).apply().strategy
        except KeyError:
            return None  # options_from_args says which presets exist
    strategy = (strategy or DecodingOptions().strategy).replace("-", "_")
    compare = getattr(args, "compare", None) or []
    speculative_lane = any(spec.strip().startswith("speculative") for spec in compare)
    given = [f"--{d.replace('_', '-')}" for d in SPECULATIVE_FLAGS if getattr(args, d, None) is not None]
    if given and strategy != "speculative" and not speculative_lane:
        return (f"{' / '.join(given)} applies to --strategy speculative only (the draft the model verifies), "
                f"not to --strategy {strategy.replace('_', '-')}; add --strategy speculative"
                + (" or a speculative lane to --compare" if compare else "") + f", or drop {given[0]}")
    beams = [f"--{d.replace('_', '-')}" for d in BEAM_FLAGS if getattr(args, d, None) is not None]
    if beams and strategy == "speculative":
        return (f"{' / '.join(beams)} applies to --strategy beam / diverse-beam only; --strategy speculative "
                f"verifies one sequence (--verification greedy or sample): drop {beams[0]}")
    # a sweep runs its task's model: `sweep transcribe|translate` take int8 as those commands do
    int8_task = args.sweep_task if getattr(args, "command", None) == "sweep" else getattr(args, "command", None)
    if getattr(args, "dtype", "float32") == "int8" and int8_task not in INT8_TASKS:
        where = f"sweep {int8_task}" if getattr(args, "command", None) == "sweep" else args.command
        return (f"--dtype int8 is for {' / '.join(INT8_TASKS)} (and their sweeps) only; {where} runs its models in "
                "float32: drop --dtype int8")
    dtype = getattr(args, "dtype", "float32")
    if dtype in HALF_DTYPES and getattr(args, "command", None) not in HALF_TASKS:
        return (f"--dtype {dtype} is for {' / '.join(HALF_TASKS)} only (Whisper); {args.command} runs its models "
                f"in float32: drop --dtype {dtype}")
    device = getattr(args, "device", "auto") or "auto"
    if device not in ("auto", "cpu") and getattr(args, "command", None) not in DEVICE_TASKS:
        return (f"--device {device} is for {' / '.join(DEVICE_TASKS)} only; {args.command} runs on the CPU: "
                "use --device cpu")
    if device not in ("auto", "cpu") and (problem := device_problem(device)) is not None:
        return problem
    if device not in ("auto", "cpu") and dtype == "int8":
        return "--dtype int8 runs on the CPU (its int8 products are CPU kernels); use --device cpu with it"
    if getattr(args, "precision_flips", False) and dtype not in HALF_DTYPES:
        return (f"--precision-flips compares a half-precision decode with float32; add --dtype "
                f"{' or --dtype '.join(HALF_DTYPES)}, or drop --precision-flips")
    if getattr(args, "kv_cache", None) is False and strategy == "speculative":
        return ("--no-kv-cache cannot run --strategy speculative (it cuts rejected draft tokens out of the KV "
                "cache); choose another strategy or drop --no-kv-cache")
    return _misapplied_amateur(args, strategy, compare)


def dtype_of(model) -> str:
    """The compute type a task model runs in ("float32" unless it says otherwise)."""
    return getattr(model, "dtype", "float32")


def say_dtype(model, err=None) -> None:
    """One stderr line naming the model and its compute type when it is not float32
    ("decoding-explorer: whisper-tiny.en in int8 ..."); nothing for float32."""
    import sys

    dtype = dtype_of(model)
    if dtype in HALF_DTYPES:
        print(f"decoding-explorer: {model.name} in {dtype} (every weight cast: tokens may differ from float32; "
              "--precision-flips lists where)", file=err or sys.stderr)
    elif dtype != "float32":
        print(f"decoding-explorer: {model.name} in {dtype} (dynamic quantisation: tokens may differ slightly "
              "from float32)", file=err or sys.stderr)


def _misapplied_amateur(args: argparse.Namespace, strategy: str, compare: list) -> str | None:
    """``--contrastive-amateur`` with a strategy contrastive decoding does not shape (beam, diverse
    beam, contrastive search, speculative; ``core.processors.stages.CONTRASTIVE_STRATEGIES``), where
    it would change nothing: the usage line, else None. With ``--compare`` each lane is checked as
    its options validate."""
    from core.processors.stages import CONTRASTIVE_STRATEGIES

    amateur = (getattr(args, "contrastive_amateur", None) or "").strip()
    if not amateur or compare or strategy in CONTRASTIVE_STRATEGIES:
        return None
    return (f"--contrastive-amateur {amateur} applies to --strategy {', '.join(CONTRASTIVE_STRATEGIES[:-1])} or "
            f"{CONTRASTIVE_STRATEGIES[-1]} (one path decoded token by token), not to --strategy "
            f"{strategy.replace('_', '-')}, where it would change nothing; choose one of those or drop "
            "--contrastive-amateur")


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _add_flag(group, fld: Field) -> None:
    """The flag of a stage field, as the registry declares it."""
    kwargs = dict(fld.flag_kwargs)
    default = DecodingOptions.__dataclass_fields__[fld.name].default
    if "type" not in kwargs and kwargs.get("action") is None and type(default) in (int, float):
        kwargs["type"] = type(default)  # a number flag reads as the field's number type
    group.add_argument(fld.flag, default=None, help=fld.flag_help or None, **kwargs)


_STAGE_FLAGS = {_dest(fld.flag): fld for st in REGISTRY for fld in st.fields if fld.flag is not None}
"""The stage fields' flags by argparse destination."""

_FIELD_OF = {
    "beams": "num_beams",
    "beam_groups": "num_beam_groups",
    **{dest: fld.name for dest, fld in _STAGE_FLAGS.items()},
}
"""Flags whose destination differs from the DecodingOptions field they set."""

_NOT_OPTIONS = {"preset", "sampler_order", "strategy", "json", "attention", "logit_lens", "dtype",
                "precision_flips", "device",
                *(dest for dest, fld in _STAGE_FLAGS.items() if fld.from_flag is not None)}
"""Flags that set no field directly (converted, or not options at all)."""


def _check_amateur_model(args: argparse.Namespace, options: DecodingOptions) -> None:
    """``translate --contrastive-amateur NAME``: NAME must be able to name a translation model (a
    bundled direction, a hub id "org/name" or "t5-*", a directory), checked before the expert loads.

    Raises:
        ValueError: naming the flag, the value and what to give instead.
    """
    from core.processors.amateur import parse_amateur

    amateur = parse_amateur(options.contrastive_amateur)
    if getattr(args, "command", None) != "translate" or amateur is None or amateur.kind != "model":
        return
    from core.backends.hub import looks_like_path
    from core.catalog import TRANSLATION_BUNDLED

    name = amateur.model
    if name in TRANSLATION_BUNDLED or "/" in name or name.startswith("t5-") or looks_like_path(name):
        return  # loaded beside the expert (a hub id that cannot be read, or a bad directory, says so then)
    raise ValueError(f"--contrastive-amateur: {name!r} is not a translation model; give layer:L, layer:auto or one "
                     f"of: {', '.join(TRANSLATION_BUNDLED)} (or a Hugging Face id, or a model directory)")


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
    for dest, fld in _STAGE_FLAGS.items():  # flags that set several fields, or convert
        if fld.from_flag is not None and getattr(args, dest, None) is not None:
            changes.update(fld.from_flag(getattr(args, dest)))
    if args.sampler_order is not None:  # listed stages run, in this order; the rest are off
        changes["sampler_order"] = tuple(args.sampler_order) + tuple(s for s in STAGES if s not in args.sampler_order)
        changes["disabled_stages"] = tuple(s for s in STAGES if s not in args.sampler_order)
    changes["capture_attention"] = bool(args.attention)
    changes["capture_lens"] = bool(getattr(args, "logit_lens", False))
    options = replace(base, **changes).validate()
    _check_amateur_model(args, options)
    left_out = [s for s in options.disabled_stages if options.stage_is_set(s)]
    if left_out:
        raise ValueError(
            f"{', '.join(left_out)} {'is' if len(left_out) == 1 else 'are'} set but not in --sampler-order, "
            "so it would not run; add it to the order or drop its flag"
        )
    return options
