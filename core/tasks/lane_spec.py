"""The lane-spec grammar: one short string per decoding lane (the CLI's ``--compare``, the
GUI's lane boxes).

::

    SPEC  := HEAD [":" ARG ("," ARG)*]
    HEAD  := a strategy: greedy | sample | beam | diverse-beam | contrastive | mirostat | speculative
           | a filter, which means sampling with it: top-k | top-p | min-p | typical-p | eta-cutoff
           | epsilon-cutoff
           | current          (the base options unchanged: the GUI's panel, the CLI's flags)
    ARG   := VALUE            (the head's main parameter, see MAIN)
           | KEY=VALUE        (a short key below, or any DecodingOptions field, - or _)

Short keys: ``T`` temperature, ``k`` top-k, ``p`` top-p, ``min-p``, ``typical``, ``beams``
(or ``n``), ``lp`` length penalty, ``groups``, ``div`` diversity penalty, ``alpha``
(contrastive), ``tau`` / ``eta`` (mirostat), ``rep`` repetition penalty, ``ngram``
no-repeat n-gram size, ``seed``, ``max`` max new tokens; speculative decoding: ``draft``
(ngram | branch | early-exit:L | model:NAME, also its bare value), ``gamma`` draft tokens per
round (0 = adaptive), ``verify`` greedy | sample; contrastive decoding: ``amateur``
(layer:L | layer:auto | a model name such as tiny.en).

Examples: ``greedy``, ``beam:5``, ``beam:5,lp=0.6``, ``sample:T=0.8``, ``sample:0.8,k=40``,
``min-p:0.1``, ``top-p:0.9,T=0.7``, ``contrastive:alpha=0.6,k=4``, ``mirostat:tau=4``,
``speculative:draft=ngram``, ``speculative:early-exit:4,gamma=3``.

A lane is the base options with the head's strategy and the given values replaced
(:func:`parse_lane_spec`), so flags such as ``--max-new-tokens`` or a repetition penalty
apply to every lane; each lane's options are validated.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from core.options import DecodingOptions

#: head -> (strategy, the field a bare VALUE sets, or None)
HEADS: dict[str, tuple[str | None, str | None]] = {
    "greedy": ("greedy", None),
    "sample": ("sample", "temperature"),
    "beam": ("beam", "num_beams"),
    "diverse-beam": ("diverse_beam", "num_beams"),
    "contrastive": ("contrastive", "penalty_alpha"),
    "mirostat": ("mirostat", "mirostat_tau"),
    "speculative": ("speculative", "draft"),
    "top-k": ("sample", "top_k"),
    "top-p": ("sample", "top_p"),
    "min-p": ("sample", "min_p"),
    "typical-p": ("sample", "typical_p"),
    "eta-cutoff": ("sample", "eta_cutoff"),
    "epsilon-cutoff": ("sample", "epsilon_cutoff"),
    "current": (None, None),
}

#: short keys -> DecodingOptions fields
KEYS = {
    "t": "temperature", "temp": "temperature",
    "k": "top_k", "top-k": "top_k",
    "p": "top_p", "top-p": "top_p",
    "min-p": "min_p", "minp": "min_p",
    "typical": "typical_p", "typical-p": "typical_p",
    "beams": "num_beams", "n": "num_beams",
    "lp": "length_penalty",
    "groups": "num_beam_groups",
    "div": "diversity_penalty",
    "alpha": "penalty_alpha",
    "tau": "mirostat_tau", "eta": "mirostat_eta",
    "rep": "repetition_penalty",
    "ngram": "no_repeat_ngram_size",
    "max": "max_new_tokens",
    "gamma": "draft_tokens",
    "verify": "verification",
    "amateur": "contrastive_amateur",
}

_FIELDS = {f.name: f for f in fields(DecodingOptions)}
#: fields a spec may set (numbers and the seed; lists and orders stay the base's)
_SETTABLE = {name for name, f in _FIELDS.items() if f.type in ("int", "float", "int | None")}
#: text fields a spec may set (speculative decoding's draft and verification, contrastive decoding's amateur)
_TEXT = {"draft", "verification", "contrastive_amateur"}

SPEC_HELP = (
    "a lane is STRATEGY[:ARG,...]: STRATEGY is greedy | sample | beam | diverse-beam | contrastive | "
    "mirostat | speculative, or a filter that means sampling with it (top-k | top-p | min-p | typical-p | eta-cutoff | epsilon-cutoff), or "
    "'current' (the other flags unchanged); ARG is the strategy's main value (sample: T, beam: beams, min-p: "
    "min-p, ...) or KEY=VALUE with KEY one of T, k, p, min-p, typical, beams, lp, groups, div, alpha, tau, eta, "
    "rep, ngram, seed, max, draft, gamma, verify, amateur (or any option name). E.g. greedy beam:5 sample:T=0.8 min-p:0.1 "
    "'beam:5,lp=0.6' speculative:draft=ngram"
)


def parse_lane_spec(spec: str, base: DecodingOptions | None = None) -> DecodingOptions:
    """The options of the lane ``spec`` describes: ``base`` (default ``DecodingOptions()``)
    with the spec's strategy and values replaced, validated. The base's contrastive-decoding
    amateur is left out of a lane whose strategy it does not shape (beam, diverse beam,
    contrastive search, speculative); an ``amateur=`` written in such a lane's spec is refused.

    Raises:
        ValueError: one line saying what is wrong with the spec (an unknown strategy or
            key, a value that is not a number, a bare value for a strategy without one, or
            options that do not validate).
    """
    base = base if base is not None else DecodingOptions()
    text = spec.strip()
    head, _, rest = text.partition(":")
    head = head.strip().lower().replace("_", "-")
    if head not in HEADS:
        raise ValueError(f"lane {spec!r}: unknown strategy {head!r}; {_suggest(text)}")
    strategy, main = HEADS[head]
    changes: dict[str, Any] = {} if strategy is None else {"strategy": strategy}
    for arg in (a.strip() for a in rest.split(",")) if rest.strip() else ():  # early-exit:4 keeps its colon
        if not arg:
            raise ValueError(f"lane {spec!r}: an empty value between commas")
        key, eq, value = arg.partition("=")
        if not eq:
            if main is None:
                raise ValueError(f"lane {spec!r}: {head} takes no bare value; write KEY=VALUE (e.g. seed=1)")
            name, value = main, key
        else:
            name = _field(key.strip(), spec)
        changes[name] = _number(name, value.strip(), spec)
    if "contrastive_amateur" not in changes and base.contrastive_amateur.strip():
        from core.processors.stages import CONTRASTIVE_STRATEGIES

        if changes.get("strategy", base.strategy) not in CONTRASTIVE_STRATEGIES:
            changes["contrastive_amateur"] = ""  # the base's amateur does not shape this lane's strategy (beam...)
    try:
        return replace(base, **changes).validate()
    except ValueError as exc:
        raise ValueError(f"lane {spec!r}: {exc}") from None


def parse_lanes(specs: list[str], base: DecodingOptions | None = None, *, at_least: int = 2,
                at_most: int = 4) -> list[DecodingOptions]:
    """Each spec's options (:func:`parse_lane_spec`); ValueError for too few or too many."""
    if not at_least <= len(specs) <= at_most:
        raise ValueError(f"compare {at_least} to {at_most} lanes, got {len(specs)}: {' '.join(specs) or '(none)'}")
    return [parse_lane_spec(s, base) for s in specs]


def describe(options: DecodingOptions) -> str:
    """A short spec-like label of ``options``' strategy and its main values ("beam:5",
    "sample:T=0.8,min-p=0.1", "greedy"), and contrastive decoding's amateur when one is set
    ("greedy:amateur=layer:auto")."""
    label = _describe_strategy(options)
    amateur = options.contrastive_amateur.strip()
    if not amateur:
        return label
    return label + ("," if ":" in label else ":") + f"amateur={amateur}"


def _describe_strategy(options: DecodingOptions) -> str:
    s = options.strategy
    if s == "greedy":
        return "greedy"
    if s == "beam":
        return f"beam:{options.num_beams}" + (f",lp={options.length_penalty:g}" if options.length_penalty != 1.0 else "")
    if s == "diverse_beam":
        return f"diverse-beam:{options.num_beams},groups={options.num_beam_groups},div={options.diversity_penalty:g}"
    if s == "contrastive":
        return f"contrastive:alpha={options.penalty_alpha:g},k={options.top_k}"
    if s == "mirostat":
        return f"mirostat:tau={options.mirostat_tau:g}"
    if s == "speculative":
        return (f"speculative:draft={options.draft}" + (f",gamma={options.draft_tokens}" if options.draft_tokens else "")
                + (",verify=sample" if options.verification == "sample" else ""))
    parts = [f"T={options.temperature:g}"] if options.temperature != 1.0 else []
    for name, label, off in (("top_k", "k", 0), ("top_p", "p", 1.0), ("min_p", "min-p", 0.0),
                             ("typical_p", "typical", 1.0)):
        v = getattr(options, name)
        if v != off:
            parts.append(f"{label}={v:g}")
    return "sample" + (":" + ",".join(parts) if parts else "")


def _suggest(text: str) -> str:
    """The hint after an unknown strategy: the ``STRATEGY:KEY=VALUE`` form, with the spec
    rewritten that way when a comma (or space) follows a known strategy ("greedy,seed=1")."""
    form = f"a lane is STRATEGY or STRATEGY:KEY=VALUE,... with STRATEGY one of {', '.join(HEADS)}"
    for sep in (",", " "):
        first, _, args = text.partition(sep)
        first = first.strip()
        if args.strip() and first.lower().replace("_", "-") in HEADS:
            fixed = first + ":" + ",".join(a.strip() for a in args.replace(":", ",").split(",") if a.strip())
            return f"write {fixed!r} ({form})"
    return form


def _field(key: str, spec: str) -> str:
    k = key.lower()
    name = KEYS.get(k) or KEYS.get(key) or key.replace("-", "_")
    if name not in _SETTABLE and name not in _TEXT:
        raise ValueError(f"lane {spec!r}: unknown key {key!r}; use T, k, p, min-p, typical, beams, lp, groups, div, "
                         "alpha, tau, eta, rep, ngram, seed, max, draft, gamma, verify, amateur or an option name")
    return name


def _number(name: str, value: str, spec: str) -> int | float | None:
    if name in _TEXT:
        return value
    kind = _FIELDS[name].type
    try:
        if kind == "float":
            return float(value)
        if kind == "int | None" and value.lower() in ("none", "random"):
            return None
        return int(value)
    except ValueError:
        what = "a number" if kind == "float" else "a whole number"
        raise ValueError(f"lane {spec!r}: {name} must be {what}, got {value!r}") from None
