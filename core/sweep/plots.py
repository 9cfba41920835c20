"""The plots of a sweep (issue 24 §4), written beside its summary as PNG and SVG.

From a sweep's out folder (``results.parquet`` and ``summary.json``), :func:`write_plots`
writes under ``OUT/plots/``:

- ``metric.png|svg``: the metric of each strategy (the mean over files, as in the summary)
  with its 95% bootstrap confidence interval as error bars (read from ``summary.json``), the
  baseline marked and each other strategy's sign-test p-value and wins / losses beside it;
- ``scatter.png|svg``: per file, the baseline's metric (x) against each other strategy's (y),
  one panel per strategy, the diagonal drawn (a dot above it is a file where the strategy
  gave a higher metric than the baseline); the seeds of a file averaged as in the summary
  (``core.sweep.stats.per_file``);
- ``frontier.png|svg``: the metric of each strategy against its mean decode seconds per
  file (the speed/quality frontier), with the CI as error bars and the strategies no other
  beats on both axes joined by a line.

matplotlib (the ``sweep`` extra) is imported lazily, with the Agg backend and its
object-oriented API (no pyplot, no global state): plots can be drawn in a worker thread.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

#: the plot files' stems under OUT/plots/ (each written as .png and .svg)
PLOT_NAMES = ("metric", "scatter", "frontier")
#: PNG resolution, dots per inch
DPI = 110


@dataclass
class ScatterPanel:
    """One panel of the per-file scatter: ``spec`` against the baseline.

    Attributes:
        spec: the strategy on the y axis; baseline: the one on the x axis.
        files: the files both scored (sorted); x, y: their metric under baseline / spec.
    """

    spec: str
    baseline: str
    files: list[str]
    x: list[float]
    y: list[float]


def read_sweep(out_dir: str | os.PathLike) -> tuple[list[dict], dict]:
    """The rows (``results.parquet`` and any parts a running sweep wrote) and ``summary.json``
    of a sweep's out folder.

    Raises:
        FileNotFoundError: the folder has no summary.json or no results (say which).
        ImportError: pyarrow is not installed (the ``sweep`` extra).
    """
    out = Path(out_dir)
    summary_path = out / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{out} has no summary.json: is it the --out folder of a finished "
                                "'decoding-explorer sweep'? (a sweep writes it when it ends)")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    files = [p for p in [out / "results.parquet"] if p.is_file()]
    files += sorted((out / "results.parts").glob("part-*.parquet")) if (out / "results.parts").is_dir() else []
    if not files:
        raise FileNotFoundError(f"{out} has no results.parquet: run the sweep (it writes one row per file x strategy)")
    from core.sweep.results import read_results  # each run once (a compaction cut short leaves rows twice)

    return read_results(out).to_pylist(), summary


def _specs(summary: dict) -> list[str]:
    return [s["spec"] for s in summary.get("strategies", [])]


def scatter_panels(rows: Sequence[dict], summary: dict) -> list[ScatterPanel]:
    """The per-file scatter's data: one :class:`ScatterPanel` per strategy other than the
    baseline, in the summary's order, over the files both it and the baseline scored (one
    point per such file)."""
    from core.sweep.stats import per_file

    baseline = summary.get("baseline")
    if baseline is None:
        return []
    base = per_file(rows, baseline)
    panels = []
    for spec in _specs(summary):
        if spec == baseline:
            continue
        mine = per_file(rows, spec)
        files = sorted(set(base) & set(mine))
        panels.append(ScatterPanel(spec, baseline, files, [base[f] for f in files], [mine[f] for f in files]))
    return panels


def _scale(summary: dict) -> tuple[float, str]:
    """(factor, axis label): WER/CER are shown in percent, chrF as is."""
    metric = summary.get("metric")
    label = {"wer": "WER", "cer": "CER", "chrf": "chrF"}.get(metric or "", metric or "metric")
    if metric in ("wer", "cer"):
        return 100.0, f"{label} (%)"
    return 1.0, label


def _better(summary: dict) -> str:
    return "higher is better" if summary.get("higher_is_better") else "lower is better"


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def metric_figure(summary: dict):
    """The metric per strategy with its 95% CI (a matplotlib ``Figure``; strategies without a
    value are listed with "no score")."""
    k, label = _scale(summary)
    strategies = summary.get("strategies", [])
    n = max(1, len(strategies))
    fig = _figure(7.0, 1.2 + 0.45 * n)
    ax = fig.add_subplot()
    baseline = summary.get("baseline")
    ys = list(range(n))[::-1]
    for y, s in zip(ys, strategies):
        v, ci = s.get("value"), s.get("ci")
        if v is None:
            ax.text(0.0, y, "  no score", va="center", fontsize=8, color="0.4", transform=ax.get_yaxis_transform())
            continue
        err = None
        if ci:
            err = [[max(0.0, k * (v - ci[0]))], [max(0.0, k * (ci[1] - v))]]
        color = "#1f77b4" if s["spec"] == baseline else "#d95f02"
        ax.errorbar([k * v], [y], xerr=err, fmt="o", color=color, ecolor=color, capsize=4, markersize=6)
        note = f"{k * v:.1f}" if k != 1.0 else f"{v:.1f}"
        vs = s.get("vs_baseline")
        if vs and vs.get("p_value") is not None:
            note += f"   {vs['wins']}W/{vs['losses']}L, p={vs['p_value']:.2g}"
        ax.annotate(note, (k * (ci[1] if ci else v), y), xytext=(6, 0), textcoords="offset points",
                    va="center", fontsize=8, color="0.25")
    ax.set_yticks(ys, [s["spec"] + (" (baseline)" if s["spec"] == baseline else "") for s in strategies])
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(f"{label} — mean over files, 95% bootstrap CI ({_better(summary)})")
    ax.margins(x=0.45 if any("vs_baseline" in s for s in strategies) else 0.25)  # room for the notes
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{summary.get('files', '?')} files · {summary.get('model', '')} · {summary.get('task', '')}",
                 fontsize=9, loc="left")
    return fig


def scatter_figure(panels: Sequence[ScatterPanel], summary: dict):
    """The per-file scatter (one panel per :class:`ScatterPanel`, one dot per file, the diagonal
    drawn); a figure saying there is nothing to compare without panels."""
    k, label = _scale(summary)
    n = max(1, len(panels))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig = _figure(3.4 * cols, 3.3 * rows)
    if not panels:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "one strategy only: nothing to compare", ha="center", va="center")
        ax.set_axis_off()
        return fig
    for i, p in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        x = [k * v for v in p.x]
        y = [k * v for v in p.y]
        ax.scatter(x, y, s=14, alpha=0.6, color="#d95f02", edgecolors="none")
        lo = min([0.0, *x, *y])
        hi = max([1e-9, *x, *y])
        pad = 0.05 * (hi - lo or 1.0)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.5", lw=1, ls="--", zorder=0)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_aspect("equal", adjustable="box")
        ax.set_xlabel(f"{p.baseline} — {label}", fontsize=8)
        ax.set_ylabel(f"{p.spec} — {label}", fontsize=8)
        ax.set_title(f"{len(p.files)} files", fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.25)
    fig.suptitle(f"Per file: each strategy against the baseline ({_better(summary)}; dashed: equal)", fontsize=9)
    return fig


def frontier_points(summary: dict) -> list[tuple[str, float, float]]:
    """(spec, mean decode seconds per file, metric) of each strategy with both, in the
    summary's order."""
    return [(s["spec"], float(s["decode_s"]), float(s["value"])) for s in summary.get("strategies", [])
            if s.get("decode_s") is not None and s.get("value") is not None]


def pareto(points: Sequence[tuple[str, float, float]], higher_is_better: bool) -> list[tuple[str, float, float]]:
    """The points no other point beats on both axes (faster or as fast and better or as good,
    one of them strictly), sorted by decode seconds."""
    def better_or_equal(a, b):
        return a >= b if higher_is_better else a <= b

    out = []
    for p in points:
        dominated = any(q is not p and q[1] <= p[1] and better_or_equal(q[2], p[2]) and (q[1] < p[1] or q[2] != p[2])
                        for q in points)
        if not dominated:
            out.append(p)
    return sorted(out, key=lambda p: p[1])


def frontier_figure(summary: dict):
    """The metric against mean decode seconds per file, per strategy (the speed/quality
    frontier: the strategies no other beats on both joined by a line)."""
    k, label = _scale(summary)
    fig = _figure(6.4, 4.4)
    ax = fig.add_subplot()
    points = frontier_points(summary)
    by_spec = {s["spec"]: s for s in summary.get("strategies", [])}
    if not points:
        ax.text(0.5, 0.5, "no strategy has both a score and a decode time", ha="center", va="center")
        ax.set_axis_off()
        return fig
    for spec, t, v in points:
        ci = by_spec[spec].get("ci")
        err = [[max(0.0, k * (v - ci[0]))], [max(0.0, k * (ci[1] - v))]] if ci else None
        ax.errorbar([t], [k * v], yerr=err, fmt="o", capsize=3, markersize=6,
                    color="#1f77b4" if spec == summary.get("baseline") else "#d95f02")
        ax.annotate(spec, (t, k * v), xytext=(5, 4), textcoords="offset points", fontsize=8)
    front = pareto(points, bool(summary.get("higher_is_better")))
    if len(front) > 1:
        ax.plot([p[1] for p in front], [k * p[2] for p in front], color="0.4", lw=1, ls=":", zorder=0,
                label="frontier (no strategy is both faster and better)")
        ax.legend(fontsize=7, loc="best")
    times = [p[1] for p in points]
    if min(times) > 0 and max(times) / min(times) > 20:
        ax.set_xscale("log")
    ax.set_xlabel("decode seconds per file (mean; the shared encoder pass not counted)")
    ax.set_ylabel(f"{label} ({_better(summary)})")
    ax.margins(0.15)
    ax.grid(alpha=0.3)
    return fig


def write_plots(out_dir: str | os.PathLike) -> list[Path]:
    """Write the sweep's plots (module docstring) under ``OUT/plots/`` as PNG and SVG, each
    written to a temporary name and renamed (a plot is whole or absent).

    Args:
        out_dir: a sweep's ``--out`` folder (``results.parquet`` and ``summary.json`` in it).

    Returns:
        The paths written: ``[metric.png, metric.svg, scatter.png, scatter.svg, frontier.png,
        frontier.svg]``.

    Raises:
        FileNotFoundError: no summary.json or results in ``out_dir``.
        ImportError: matplotlib or pyarrow is missing (one line saying how to install them).
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("the sweep's plots need matplotlib: pip install -e '.[sweep]' "
                          "(or pip install matplotlib)") from None
    rows, summary = read_sweep(out_dir)
    figures = {"metric": metric_figure(summary), "scatter": scatter_figure(scatter_panels(rows, summary), summary),
               "frontier": frontier_figure(summary)}
    folder = Path(out_dir) / "plots"
    folder.mkdir(exist_ok=True)
    written = []
    for name in PLOT_NAMES:
        fig = figures[name]
        for ext in ("png", "svg"):
            path = folder / f"{name}.{ext}"
            tmp = folder / f".{name}.tmp.{ext}"
            fig.savefig(tmp, format=ext, dpi=DPI, metadata={"Date": None} if ext == "svg" else None)
            os.replace(tmp, path)
            written.append(path)
    return written
