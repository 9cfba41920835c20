"""A synthetic sweep out folder for the plot and window tests (no model, no Ray): rows written
with the sweep's own store (``core.sweep.results.ResultStore``), traces shaped as
``core.sweep.decode`` writes them (``"options"``, ``"model"``, ``"rerun"`` with the
single-run command line), and ``summary.json`` / ``summary.md`` from ``core.sweep.stats``
(or a small hand-made summary for big folders, where the bootstrap would take seconds)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np

from core.sweep.decode import Decoded, Settings, trace_name
from core.sweep.rerun import single_run_argv
from core.sweep.results import ResultStore
from core.sweep.specs import expand, options_hash

TASK_METRIC = {"transcribe": "wer", "translate": "chrf", "ocr": "cer"}


def make_sweep(out: Path, inputs: list[dict], specs: list[str], *, task: str = "transcribe",
               model: str = "tiny.en", seed: int = 0, full_summary: bool = True,
               data: str | None = None, dtype: str = "float32") -> Path:
    """Write a sweep folder in ``out``: one row per input x run of ``specs`` (seed ranges
    expanded), metric values drawn from ``seed``'s RNG.

    Args:
        inputs: one dict per input: ``id`` (the file column), and ``path`` (a file) or ``text``
            (translation's source), optionally ``reference``.
        dtype: the traces' compute type (transcribe's --dtype).
        full_summary: summary.json from ``core.sweep.stats.summarize`` (bootstrap; small
            folders) or a hand-made one with the same keys (big folders).
    """
    rng = np.random.default_rng(seed)
    settings = Settings(model=model, dtype=dtype)
    runs = expand(specs)
    store = ResultStore(out)
    metric = TASK_METRIC[task]
    results = []
    for k, inp in enumerate(inputs):
        ihash = hashlib.sha256(inp["id"].encode()).hexdigest()
        for j, run in enumerate(runs):
            ohash = options_hash(task, model, run.options, settings.for_hash(task))
            value = float(np.clip(rng.normal(0.2 + 0.05 * j, 0.1), 0, 1)) * (100 if metric == "chrf" else 1)
            dec = float(rng.uniform(0.05, 0.2) * (1 + j))
            row = {"file": inp["id"], "spec": run.spec, "seed": run.seed, "strategy": run.spec, "metric": metric,
                   "value": value, "logprob": -float(rng.uniform(1, 10)), "raw_logprob": -float(rng.uniform(1, 10)),
                   "tokens": int(rng.integers(3, 40)), "decode_s": dec, "encode_s": 0.1,
                   "audio_s": 2.0 if task == "transcribe" else None,
                   "rtf": (0.1 + dec) / 2.0 if task == "transcribe" else None, "segments": 1,
                   "no_speech": int(rng.random() < 0.05), "fallbacks": int(rng.random() < 0.05),
                   "repetitions": int(rng.random() < 0.02), "silent_reference": False, "reason": "eos",
                   "text": f"output {k} {run.spec}", "reference": inp.get("reference", f"reference {k}"),
                   "token_ids": [1, 2, 3], "input_hash": ihash, "options_hash": ohash,
                   "trace": trace_name(ihash, ohash), "worker": "test:1"}
            trace = None
            if "path" in inp or "text" in inp:
                argv = single_run_argv(task, settings, run.options, path=inp.get("path"), text=inp.get("text"))
                doc = {"task": task, "model": model, "dtype": dtype, "options": run.options.to_dict(),
                       "text": row["text"], "tokens": [],
                       "rerun": {"task": task, "model": model, "argv": argv, "cwd": None,
                                 "input": ({"path": inp["path"], "sha256": ihash} if "path" in inp
                                           else {"text_sha256": ihash})},
                       "sweep": {k2: row[k2] for k2 in ("file", "spec", "seed", "metric", "value", "reference",
                                                         "input_hash", "options_hash")}}
                trace = gzip.compress(json.dumps(doc).encode(), mtime=0)
            results.append(Decoded(row=row, trace=trace))
    store.append(results)
    store.compact()
    rows = [r.row for r in results]
    unique_specs = list(dict.fromkeys(r.spec for r in runs))
    if full_summary:
        from core.sweep.stats import markdown, summarize

        summary = summarize(rows, unique_specs)
    else:
        summary = _quick_summary(rows, unique_specs, metric)
    summary["task"], summary["model"], summary["data"] = task, model, data or str(out)
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    if full_summary:
        (out / "summary.md").write_text(markdown(summary), encoding="utf-8")
    return out


def _quick_summary(rows: list[dict], specs: list[str], metric: str) -> dict:
    """summary.json's keys with plain means and a normal-approximation CI (no bootstrap)."""
    out = []
    for spec in specs:
        v = np.array([r["value"] for r in rows if r["spec"] == spec])
        d = np.array([r["decode_s"] for r in rows if r["spec"] == spec])
        half = 1.96 * v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0
        out.append({"spec": spec, "files": len(v), "rows": len(v), "seeds": [], "value": float(v.mean()),
                    "ci": [float(v.mean() - half), float(v.mean() + half)], "seed_spread": None, "logprob": None,
                    "tokens": None, "decode_s": float(d.mean()), "rtf": None, "no_speech": 0, "fallbacks": 0,
                    "repetitions": 0, "silent_inputs": 0, "output_on_silence": 0})
    return {"metric": metric, "higher_is_better": metric == "chrf", "files": len({r["file"] for r in rows}),
            "rows": len(rows), "baseline": specs[0], "methods": {}, "strategies": out}
