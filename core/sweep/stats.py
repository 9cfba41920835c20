"""The statistics of a sweep, as a reviewer would want them, and ``summary.md`` / ``summary.json``.

- **Metric per strategy**: the mean over files of the per-file metric (WER / CER as a
  fraction, chrF 0..100), the seeds of a file averaged first; files without a reference (or
  with an empty one) are left out. Its **95% confidence interval** is a bootstrap over files
  (``scipy.stats.bootstrap``, BCa, 9,999 resamples, seed 0). With a seed range, the spread
  over seeds is the standard deviation (ddof 1) of the per-seed means.
- **Paired comparison** of each strategy with the baseline (``--baseline``, default the
  first) over the files both scored: wins / losses / ties (a win = better than the baseline:
  lower WER/CER, higher chrF), the **sign test** p-value (``scipy.stats.binomtest`` on wins
  out of wins + losses, two-sided, ties dropped), and the mean difference (strategy minus
  baseline) with its 95% **paired bootstrap** interval (``scipy.stats.bootstrap``,
  ``paired=True``, BCa, 9,999 resamples, seed 0).
- **Hallucination signals** per strategy: the sums over its rows of windows skipped as
  digital silence, no-speech windows,
  fallbacks and repetition loops, and the outputs on silent inputs (rows whose reference is
  empty and whose text is not).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Sequence

#: what the summary says about its methods (also in summary.json)
METHODS = {
    "metric": "mean over files of the per-file metric (seeds of a file averaged first)",
    "ci": "95% bootstrap over files (scipy.stats.bootstrap, BCa, 9999 resamples, seed 0)",
    "paired_test": "sign test over files (scipy.stats.binomtest, two-sided, ties dropped)",
    "paired_ci": "95% paired bootstrap of the mean difference (scipy.stats.bootstrap, paired=True, BCa, 9999 "
                 "resamples, seed 0)",
}
CONFIDENCE, RESAMPLES, SEED = 0.95, 9999, 0


def bootstrap_ci(values: Sequence[float], *, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The ``confidence`` bootstrap interval of the mean of ``values`` (METHODS["ci"]);
    (v, v) when every value is v, None for no value."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None
    if x.size == 1 or np.all(x == x[0]):
        return float(x[0]), float(x[0])
    from scipy.stats import bootstrap

    res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=RESAMPLES, method="BCa",
                    random_state=np.random.default_rng(SEED))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if math.isnan(lo) or math.isnan(hi):  # BCa on too few distinct values
        res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=RESAMPLES, method="percentile",
                        random_state=np.random.default_rng(SEED))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return lo, hi


def paired(baseline: dict[str, float], other: dict[str, float], higher_is_better: bool) -> dict:
    """``other`` against ``baseline`` (file -> metric) over the files both have (METHODS).

    Returns:
        ``{"files", "wins", "losses", "ties", "p_value", "test", "mean_diff", "ci"}``:
        mean_diff = mean(other - baseline); ci its paired bootstrap interval; p_value the sign
        test's (1.0 when there is no win and no loss); None values for no common file.
    """
    import numpy as np
    from scipy.stats import binomtest

    files = sorted(set(baseline) & set(other))
    a = np.array([baseline[f] for f in files], dtype=float)
    b = np.array([other[f] for f in files], dtype=float)
    diff = b - a
    better = diff > 0 if higher_is_better else diff < 0
    worse = diff < 0 if higher_is_better else diff > 0
    wins, losses = int(better.sum()), int(worse.sum())
    ties = len(files) - wins - losses
    out = {"files": len(files), "wins": wins, "losses": losses, "ties": ties, "test": "sign test",
           "p_value": None, "mean_diff": None, "ci": None}
    if not files:
        return out
    out["p_value"] = float(binomtest(wins, wins + losses, 0.5).pvalue) if wins + losses else 1.0
    out["mean_diff"] = float(diff.mean())
    out["ci"] = _paired_ci(a, b)
    return out


def _paired_ci(a, b) -> list[float]:
    import numpy as np

    diff = b - a
    if diff.size == 1 or np.all(diff == diff[0]):
        return [float(diff[0]), float(diff[0])]
    from scipy.stats import bootstrap

    def mean_diff(x, y, axis=-1):
        return np.mean(y - x, axis=axis)

    for method in ("BCa", "percentile"):
        res = bootstrap((a, b), mean_diff, paired=True, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                        method=method, random_state=np.random.default_rng(SEED))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if not (math.isnan(lo) or math.isnan(hi)):
            return [lo, hi]
    return [lo, hi]


def per_file(rows: Sequence[dict], spec: str) -> dict[str, float]:
    """File -> the mean metric of ``spec``'s rows on it (its seeds averaged), files with a value only."""
    values: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["spec"] == spec and r.get("value") is not None:
            values[r["file"]].append(float(r["value"]))
    return {f: sum(v) / len(v) for f, v in values.items()}


def summarize(rows: Sequence[dict], specs: Sequence[str] | None = None, baseline: str | None = None) -> dict:
    """The summary of a sweep's rows (``summary.json``).

    Args:
        rows: result rows (``core.sweep.decode.ROW_FIELDS``).
        specs: the strategies in the order to report them (default: the order of first appearance).
        baseline: the strategy the others are compared with (default the first).

    Returns:
        ``{"metric", "higher_is_better", "files", "rows", "baseline", "methods",
        "strategies": [{"spec", "files", "rows", "seeds", "value", "ci", "seed_spread",
        "logprob", "tokens", "decode_s", "rtf", "no_speech", "fallbacks", "repetitions",
        "silent_inputs", "output_on_silence", "vs_baseline"?}]}``.

    Raises:
        ValueError: ``baseline`` is not one of the strategies.
    """
    from core.analysis.metrics import METRICS

    specs = list(specs) if specs else list(dict.fromkeys(r["spec"] for r in rows))
    baseline = baseline or (specs[0] if specs else None)
    if baseline is not None and baseline not in specs:
        raise ValueError(f"--baseline {baseline!r} is not one of the strategies: {', '.join(specs)}")
    metric = next((r["metric"] for r in rows if r.get("metric")), None)
    higher = METRICS[metric][1] if metric in METRICS else False
    base_files = per_file(rows, baseline) if baseline else {}
    out_specs = []
    for spec in specs:
        mine = [r for r in rows if r["spec"] == spec]
        files = per_file(rows, spec)
        values = list(files.values())
        seeds = sorted({r["seed"] for r in mine if r.get("seed") is not None})
        seed_means = []
        if len(seeds) > 1:
            for s in seeds:
                v = [float(r["value"]) for r in mine if r.get("seed") == s and r.get("value") is not None]
                if v:
                    seed_means.append(sum(v) / len(v))
        ci = bootstrap_ci(values)
        silent = [r for r in mine if r.get("silent_reference")]
        entry = {
            "spec": spec, "files": len({r["file"] for r in mine}), "rows": len(mine), "seeds": seeds,
            "value": sum(values) / len(values) if values else None, "ci": list(ci) if ci else None,
            "seed_spread": _std(seed_means) if len(seed_means) > 1 else None,
            "logprob": _mean([r.get("logprob") for r in mine]), "tokens": _mean([r.get("tokens") for r in mine]),
            "decode_s": _mean([r.get("decode_s") for r in mine]), "rtf": _mean([r.get("rtf") for r in mine]),
            "skipped": sum(int(r.get("skipped") or 0) for r in mine),
            "no_speech": sum(int(r.get("no_speech") or 0) for r in mine),
            "fallbacks": sum(int(r.get("fallbacks") or 0) for r in mine),
            "repetitions": sum(int(r.get("repetitions") or 0) for r in mine),
            "silent_inputs": len(silent),
            "output_on_silence": sum(1 for r in silent if (r.get("text") or "").strip()),
        }
        if spec != baseline and baseline is not None:
            entry["vs_baseline"] = paired(base_files, files, higher)
        out_specs.append(entry)
    return {"metric": metric, "higher_is_better": higher, "files": len({r["file"] for r in rows}), "rows": len(rows),
            "baseline": baseline, "methods": METHODS, "strategies": out_specs}


def markdown(summary: dict) -> str:
    """``summary.md``: the table of strategies, the paired comparisons, the hallucination
    signals and the methods used."""
    from core.analysis.metrics import METRICS

    metric = summary.get("metric")
    label = METRICS[metric][0] if metric in METRICS else "metric"
    pct = metric in ("wer", "cer")

    def fmt(v):
        if v is None:
            return "–"
        return f"{100 * v:.2f}%" if pct else f"{v:.2f}"

    lines = ["# Sweep summary", "",
             f"{summary['files']} files, {summary['rows']} rows; metric {label} "
             f"({'higher' if summary['higher_is_better'] else 'lower'} is better); baseline `{summary['baseline']}`.",
             "", f"| strategy | files | {label} | 95% CI | seed spread | log p | tokens | decode s | RTF |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for s in summary["strategies"]:
        ci = f"{fmt(s['ci'][0])} – {fmt(s['ci'][1])}" if s["ci"] else "–"
        spread = fmt(s["seed_spread"]) + f" ({len(s['seeds'])} seeds)" if s["seed_spread"] is not None else "–"
        lines.append(f"| `{s['spec']}` | {s['files']} | {fmt(s['value'])} | {ci} | {spread} | {_f(s['logprob'])} | "
                     f"{_f(s['tokens'], 1)} | {_f(s['decode_s'], 3)} | {_f(s['rtf'], 3)} |")
    compared = [s for s in summary["strategies"] if "vs_baseline" in s]
    if compared:
        lines += ["", f"## Against the baseline `{summary['baseline']}`", "",
                  "| strategy | files | wins | losses | ties | p (sign test) | mean difference | 95% CI |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        for s in compared:
            v = s["vs_baseline"]
            ci = f"{_d(v['ci'][0], pct)} – {_d(v['ci'][1], pct)}" if v["ci"] else "–"
            p = "–" if v["p_value"] is None else f"{v['p_value']:.4g}"
            lines.append(f"| `{s['spec']}` | {v['files']} | {v['wins']} | {v['losses']} | {v['ties']} | {p} | "
                         f"{_d(v['mean_diff'], pct)} | {ci} |")
    lines += ["", "## Hallucination signals", "",
              "| strategy | skipped as silence | no-speech windows | fallbacks | repetition loops | "
              "output on silent inputs |",
              "|---|---:|---:|---:|---:|---:|"]
    for s in summary["strategies"]:
        lines.append(f"| `{s['spec']}` | {s.get('skipped', 0)} | {s['no_speech']} | {s['fallbacks']} | {s['repetitions']} | "
                     f"{s['output_on_silence']} of {s['silent_inputs']} |")
    m = summary["methods"]
    lines += ["", "## Methods", "", f"- {label}: {m['metric']}.", f"- Confidence interval: {m['ci']}.",
              f"- Paired test: {m['paired_test']}; a win is a file where the strategy is better than the baseline.",
              f"- Mean difference (strategy − baseline): {m['paired_ci']}.",
              "- Skipped as silence: windows a single run skips (no-speech probability > 0.6 and the loudest 20 ms "
              "below −50 dBFS); no-speech windows: no-speech probability > 0.6; fallbacks: windows openai/whisper's temperature "
              "fallback would redo (compression ratio > 2.4 or average log-probability < −1); repetition loops: "
              "compression ratio > 2.4 or the last 32 tokens' entropy < 2.4 nats; silent inputs: an empty reference.",
              ""]
    return "\n".join(lines)


def _mean(values) -> float | None:
    v = [float(x) for x in values if x is not None]
    return sum(v) / len(v) if v else None


def _std(values: Sequence[float]) -> float:
    m = sum(values) / len(values)
    return math.sqrt(sum((x - m) ** 2 for x in values) / (len(values) - 1))


def _f(v, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _d(v, pct: bool) -> str:
    if v is None:
        return "–"
    return f"{100 * v:+.2f} pt" if pct else f"{v:+.2f}"
