"""A sweep from start to end: plan it (the inputs, the runs, what is already done), decode what
is left on Ray (:mod:`core.sweep.ray_runner`), store rows as they arrive, and write the summary.

:func:`run_sweep` is what ``decoding-explorer sweep`` calls; tests call it with a callback.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from core.options import DecodingOptions
from core.sweep.data import Item, read_items
from core.sweep.decode import Settings
from core.sweep.results import ResultStore
from core.sweep.specs import Run, expand, options_hash


@dataclass
class SweepConfig:
    """What a sweep decodes and where it writes.

    Attributes:
        task: "transcribe" | "translate" | "ocr".
        data: DATA (a folder, a TSV or a saved data set; ``core.sweep.data``).
        out: the out folder (results.parquet, traces/, summary.md, summary.json).
        settings: the model and the task's settings.
        specs: the strategies (lane specs, seed ranges allowed).
        base: the options every strategy starts from (the CLI's decoding flags).
        workers: Ray workers (actors); None = the cores of the local machine / cluster.
        address: None for a local Ray instance, "auto" or "ray://HOST:PORT" for a cluster.
        batch_size: files per task sent to a worker; None = chosen from the file count.
        baseline: the strategy the others are compared with (None = the first).
        audio_column, text_column, split: a saved data set's input and reference columns, and split.
        progress: draw the progress bar on stderr.
        plots: write the plots (``core.sweep.plots``: OUT/plots/*.png|svg) with the summary.
    """

    task: str
    data: str
    out: str
    settings: Settings
    specs: list[str]
    base: DecodingOptions = field(default_factory=DecodingOptions)
    workers: int | None = None
    address: str | None = None
    batch_size: int | None = None
    baseline: str | None = None
    audio_column: str | None = None
    text_column: str | None = None
    split: str | None = None
    progress: bool = True
    plots: bool = True


@dataclass
class Plan:
    """The work of a sweep.

    Attributes:
        items: every input of DATA.
        runs: every strategy x seed, with its options hash, in order.
        todo: per input with runs left to do, ``(item, [(run, options hash)])``.
        keys: (input hash, options hash) of every row the sweep stands for (done or to do).
    """

    items: list[Item]
    runs: list[tuple[Run, str]]
    todo: list[tuple[Item, list[tuple[Run, str]]]]
    keys: set[tuple[str, str]]


@dataclass
class SweepReport:
    """How a sweep went.

    Attributes:
        files: inputs in DATA; skipped: inputs whose every row was already done;
        decoded: inputs decoded now; rows: rows stored now; failures: failed file x strategy
        (``failures.jsonl``' rows); interrupted: stopped by Ctrl+C; summary: summary.json's dict;
        restarts: workers started again after one died.
    """

    files: int = 0
    skipped: int = 0
    decoded: int = 0
    rows: int = 0
    failures: list[dict] = field(default_factory=list)
    interrupted: bool = False
    summary: dict | None = None
    restarts: int = 0

    @property
    def exit_code(self) -> int:
        """0 everything done, 1 some file failed, 130 interrupted (Ctrl+C)."""
        if self.interrupted:
            return 130
        return 1 if self.failures else 0


def plan(config: SweepConfig, store: ResultStore) -> Plan:
    """The inputs, the runs and what is left to do (rows already stored are skipped).

    Raises:
        ValueError (``DataError`` among them): bad DATA, specs or baseline.
    """
    runs = expand(config.specs, config.base)
    if config.baseline is not None and config.baseline not in config.specs:
        raise ValueError(f"--baseline {config.baseline!r} is not one of --strategies ({' '.join(config.specs)})")
    items = read_items(config.task, config.data, audio_column=config.audio_column, text_column=config.text_column,
                       split=config.split)
    hashed = [(r, options_hash(config.task, config.settings.model, r.options, config.settings.for_hash(config.task)))
              for r in runs]
    done = store.done()
    todo, keys = [], set()
    for item in items:
        left = [(r, h) for r, h in hashed if (item.input_hash, h) not in done]
        keys.update((item.input_hash, h) for _, h in hashed)
        if left:
            todo.append((item, left))
    return Plan(items, hashed, todo, keys)


def run_sweep(config: SweepConfig, *, err: TextIO | None = None,
              on_batch: Callable[[int, list], None] | None = None) -> SweepReport:
    """Run the sweep ``config`` describes; write results.parquet, traces/, summary.md,
    summary.json and plots/ in ``config.out``.

    Args:
        err: where the progress bar and notes go (stderr).
        on_batch: called after each batch is stored with (files done so far, the live Ray
            actors): tests kill a worker there.

    Raises:
        ValueError: bad DATA, specs or baseline (before Ray starts).
        ImportError: ray or pyarrow is not installed.
        RuntimeError: no worker could load the model, or every worker died.
    """
    err = err or sys.stderr
    store = ResultStore(config.out)
    store.compact()  # parts a killed sweep left
    store.clear_failures()
    work = plan(config, store)
    report = SweepReport(files=len(work.items), skipped=len(work.items) - len(work.todo))
    if report.skipped:
        print(f"sweep: {report.skipped} of {report.files} files already done in {config.out} (resuming)",
              file=err, flush=True)
    if work.todo:
        from core.sweep.ray_runner import decode_on_ray

        decode_on_ray(config, work.todo, store, report, err=err, on_batch=on_batch)
    store.compact()
    report.failures = store.failed()
    report.summary = write_summary(config, work, store)
    if config.plots and report.summary["rows"]:
        try:
            from core.sweep.plots import write_plots

            write_plots(config.out)
        except (ImportError, ValueError, OSError) as e:  # the results stand without their plots; say why
            print(f"sweep: no plots: {e}", file=err, flush=True)
    return report


def write_summary(config: SweepConfig, work: Plan, store: ResultStore) -> dict:
    """summary.json and summary.md of the rows of this sweep's inputs x runs (rows of other
    strategies an earlier sweep left in the folder are not counted); the rows' spec is the
    one given now for the same options."""
    from core.sweep.stats import markdown, summarize

    spec_of = {h: r.spec for r, h in work.runs}
    rows = []
    for row in store.rows():
        if (row["input_hash"], row["options_hash"]) in work.keys:
            rows.append({**row, "spec": spec_of[row["options_hash"]]})
    summary = summarize(rows, list(dict.fromkeys(r.spec for r, _ in work.runs)), config.baseline)
    summary["task"], summary["model"], summary["data"] = config.task, config.settings.model, str(config.data)
    out = Path(config.out)
    _write_text(out / "summary.json", json.dumps(summary, ensure_ascii=False, indent=1))
    _write_text(out / "summary.md", markdown(summary))
    return summary


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
