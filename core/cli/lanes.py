"""``--compare``: decoding lanes on the command line (transcribe, translate, ocr).

::

    decoding-explorer transcribe clip.wav --compare greedy beam:5 sample:T=0.8 min-p:0.1 \\
        [--reference TEXT | --reference-file F] [--json]

Each SPEC is one lane (``core.tasks.lane_spec``: ``STRATEGY[:ARG,...]``); the other decoding
flags are every lane's base. The lanes decode on one encoder pass per segment
(``core.tasks.lanes``). Prints per lane its spec, log-probability, time, tokens, the metric
against the reference (WER for speech, CER for OCR, chrF for translation:
``core.analysis.metrics``) and its text, then the agreement; ``--json`` prints::

    {"task", "model", "dtype", "options",              # the base options; dtype: float32 | int8
     "reference"?, "metric"?,                          # with --reference: the text, "wer" | "cer" | "chrf"
     "lanes": [{"spec", "options", "text", "logprob", "raw_logprob", "time_s", "tokens",
                "token_ids", "reason", "metric": {"name", "value"} | null,
                "speculative"?: {...}}],                # speculative lanes: see speculative_block
     "agreement": {"mean", "pairs": [{"a", "b", "value"}]},   # lanes numbered from 1
     "timing": {"load_s", "encode_s", "decode_s", "tokens_per_s", "rtf"}}

A speculative lane's text line adds its α (accepted / judged), tokens per target call and
its speed-up over the plain lane of the same options (``speculative_block``).

A bad spec, a wrong number of lanes or an empty reference is one line on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable, Iterable

from core.analysis.metrics import METRICS, Score, metric_for, score
from core.tasks.lane_spec import SPEC_HELP, parse_lanes
from core.tasks.lanes import MAX_LANES, MIN_LANES, LanesFinished
from core.options import DecodingOptions


def add_compare_arguments(p: argparse.ArgumentParser, task: str) -> None:
    """``--compare``, ``--reference`` and ``--reference-file`` for subcommand ``task``."""
    name = METRICS[metric_for(task)][0]
    g = p.add_argument_group("lanes: strategies side by side on one encoder output")
    g.add_argument("--compare", nargs="+", metavar="SPEC", default=None,
                   help=f"decode {MIN_LANES} to {MAX_LANES} lanes on one encoder pass and compare them; " + SPEC_HELP)
    g.add_argument("--reference", metavar="TEXT", default=None,
                   help=f"with --compare: the expected text; each lane gets its {name}")
    g.add_argument("--reference-file", metavar="F", default=None, help="with --compare: the reference in a UTF-8 .txt file")


def lanes_from_args(args: argparse.Namespace, base: DecodingOptions) -> list[DecodingOptions] | None:
    """The lanes ``--compare`` asks for (None without it), checked before any model loads.

    Raises:
        ValueError: a bad spec, too few / many lanes, a reference without --compare or both
            reference flags (one line each).
    """
    if args.compare is None:
        if args.reference is not None or args.reference_file is not None:
            raise ValueError("--reference needs --compare (the lanes it scores)")
        return None
    if args.reference is not None and args.reference_file is not None:
        raise ValueError("give the reference either as --reference TEXT or --reference-file F, not both")
    return parse_lanes(args.compare, base, at_least=MIN_LANES, at_most=MAX_LANES)


def reference_text(args: argparse.Namespace) -> str | None:
    """The reference text (``--reference`` or the file's), or None.

    Raises:
        ValueError: an unreadable file.
    """
    if args.reference_file is None:
        return args.reference
    path = Path(args.reference_file)
    if not path.is_file():
        raise ValueError(f"{path}: no such file; give the reference as a UTF-8 .txt file")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text; save it as UTF-8 (.txt)") from None


def run_compare(task: str, model_name: str, base: DecodingOptions, lanes: list[DecodingOptions],
                args: argparse.Namespace, decode: Callable[[list[DecodingOptions]], Iterable]) -> int:
    """Decode ``lanes`` (``decode(lanes)``: the task model's ``decode_lanes``) and print them."""
    reference = reference_text(args)
    metric = metric_for(task) if reference is not None else None
    if metric is not None:
        score(metric, "", reference)  # an empty reference fails before the decode
    done: LanesFinished | None = None
    for ev in decode(lanes):
        if isinstance(ev, LanesFinished):
            done = ev
    if done is None:
        raise RuntimeError("the lanes ended without a result")
    scores = [score(metric, r.text, reference) if metric else None for r in done.lanes]
    out = compare_dict(task, model_name, base, args.compare, done, scores, reference)
    out = {**{k: out[k] for k in ("task", "model")}, "dtype": getattr(args, "dtype", None) or "float32", **out}
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
    else:
        print(format_compare(out))
    return 0


def compare_dict(task: str, model_name: str, base: DecodingOptions, specs: list[str], done: LanesFinished,
                 scores: list[Score | None], reference: str | None) -> dict:
    """The ``--json`` document (module docstring)."""
    n = len(done.lanes)
    out: dict = {"task": task, "model": model_name, "options": base.to_dict()}
    if reference is not None:
        out["reference"] = reference
        out["metric"] = next(s.name for s in scores if s is not None)
    out["lanes"] = [
        {"spec": spec, "options": r.options.to_dict(), "text": r.text, "logprob": _num(r.logprob),
         "raw_logprob": _num(r.raw_logprob), "time_s": round(r.time_s, 6), "tokens": r.n_tokens,
         "token_ids": list(r.token_ids), "reason": r.reason, "metric": s.to_dict() if s is not None else None}
        for spec, r, s in zip(specs, done.lanes, scores)
    ]
    for k, r in enumerate(done.lanes):
        if getattr(r, "speculative", None) is not None:
            out["lanes"][k]["speculative"] = speculative_block(r, done.lanes, specs)
    out["agreement"] = {
        "mean": round(done.mean_agreement, 6),
        "pairs": [{"a": a + 1, "b": b + 1, "value": round(float(done.agreement[a, b]), 6)}
                  for a in range(n) for b in range(a + 1, n)],
    }
    out["timing"] = done.stats.to_dict()
    out["cancelled"] = done.cancelled
    return out


_SPECULATIVE_FIELDS = ("strategy", "draft", "draft_tokens", "verification")


def plain_lane(lane, lanes) -> int | None:
    """The index of the lane that decodes plainly what speculative ``lane`` verifies: its
    strategy is ``lane``'s verification and every other option is the same (the draft
    fields aside); None when there is none."""
    want = {k: v for k, v in lane.options.to_dict().items() if k not in _SPECULATIVE_FIELDS}
    for k, other in enumerate(lanes):
        if other is lane or other.options.strategy != lane.options.verification or not other.n_tokens:
            continue
        if {key: v for key, v in other.options.to_dict().items() if key not in _SPECULATIVE_FIELDS} == want:
            return k
    return None


def speculative_block(lane, lanes, specs: list[str]) -> dict:
    """A speculative lane's ``"speculative"`` block: ``SpeculationSummary.to_dict()`` (its
    round count as ``"target_calls"``, as the single-run trace), with ``"speedup_measured"``
    = the plain lane's ms per token / this lane's (``plain_lane``; null without one) and
    ``"compared_with"``, that lane's spec."""
    out = lane.speculative.to_dict()
    out["target_calls"] = out.pop("rounds", 0)
    k = plain_lane(lane, lanes)
    out["compared_with"] = specs[k] if k is not None else None
    if k is not None and lane.n_tokens and lane.time_s > 0:
        plain = lanes[k]
        out["speedup_measured"] = round((plain.time_s / plain.n_tokens) / (lane.time_s / lane.n_tokens), 4)
    return out


def format_compare(out: dict) -> str:
    """The plain-text report: one header line and the text per lane, then the agreement."""
    lanes = out["lanes"]
    width = max(len(lane["spec"]) for lane in lanes)
    lines = []
    for i, lane in enumerate(lanes, 1):
        m = lane["metric"]
        metric = f"  {Score(m['name'], m['value']).text()}" if m else ""
        lp = lane["logprob"]
        lp_text = "-inf" if lp is None else f"{lp:.2f}"
        spec = lane.get("speculative")
        speculation = ""
        if spec is not None:
            speculation = (f"  α {spec['judged_acceptance_rate']:.2f} · {spec['tokens_per_target_call']:.1f} tokens "
                           "per target call")
            if spec.get("speedup_measured") is not None:
                speculation += f" · {spec['speedup_measured']:.2f}× {spec['compared_with']}"
            if spec.get("switched_off"):
                speculation += " · switched off"
        lines.append(f"lane {i}  {lane['spec']:<{width}}  log p {lp_text:>8}  {lane['time_s']:6.2f} s  "
                     f"{lane['tokens']:4d} tokens{metric}{speculation}")
        lines.append(f"  {lane['text']}")
    pairs = " · ".join(f"{p['a']}–{p['b']} {p['value']:.2f}" for p in out["agreement"]["pairs"])
    lines.append(f"agreement (tokens, difflib ratio): mean {out['agreement']['mean']:.2f} · {pairs}")
    t = out["timing"]
    lines.append(f"encoder {t['encode_s']:.2f} s (once per segment, shared) · lanes {t['decode_s']:.2f} s")
    return "\n".join(lines)


def _num(x: float) -> float | None:
    """A JSON number (None for -inf: a token the lane's distribution gave probability 0)."""
    return round(x, 6) if x != float("-inf") else None
