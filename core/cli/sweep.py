"""``decoding-explorer sweep TASK DATA --strategies SPEC ... --out DIR``: decoding strategies
scored over a whole data set, on Ray (``core.sweep``).

::

    decoding-explorer sweep transcribe DATA --model base --strategies greedy beam:5 \\
        "sample:T=0.8,seed=0..4" min-p:0.1 --out runs/base-2026-11 [--workers N] \\
        [--address auto|ray://HOST:PORT] [--baseline SPEC] [--batch-size N]

DATA: a folder of audio files (transcribe) or images (ocr) with a same-stem ``.txt``
reference beside each; a TSV ``source<TAB>reference`` (translate); or a folder written by
``datasets``' ``save_to_disk`` (``--audio-column``, ``--text-column``, ``--split``).

Strategies use the lanes' grammar (``greedy``, ``beam:5``, ``min-p:0.1`` ...), plus seed
ranges: ``seed=0..4`` is five runs. Every file is encoded once for all of them (the task
model's ``decode_lanes``). The other decoding flags are every strategy's base.
``--dtype int8`` (transcribe, translate: ``core.dtypes.INT8_TASKS``) loads each worker's model
in int8; the rows' traces say ``"dtype": "int8"`` and their rerun lines carry the flag.

Writes to ``--out``: ``results.parquet`` (one row per file x strategy x seed,
``core.sweep.decode``), ``traces/`` (each row's ``--json`` trace, gzipped),
``summary.md`` and ``summary.json`` (``core.sweep.stats``), ``plots/`` (``core.sweep.plots``,
with matplotlib), ``failures.jsonl`` when a file failed. Rows already in the results (same input hash and options hash) are skipped, so the
same command resumes an interrupted sweep; Ctrl+C keeps what is done. A progress bar
(files done / total, ETA, files per second) goes to stderr.

Exit status: 0 every file done, 1 a file or the model failed, 2 usage (a bad flag or spec,
DATA unreadable, Ray not installed), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

from core import catalog
from core.cli.options import add_decoding_arguments, options_from_args

#: the default model of each task
DEFAULT_MODELS = {"transcribe": catalog.WHISPER_DEFAULT, "translate": catalog.TRANSLATION_DEFAULT,
                  "ocr": catalog.OCR_DEFAULT}


def add_parser(sub) -> None:
    """Add the ``sweep`` subcommand to ``sub`` (``core.cli.commands.build_parser``'s subparsers)."""
    from core.tasks.lane_spec import SPEC_HELP

    s = sub.add_parser("sweep", help="score decoding strategies over a whole data set (on Ray)")
    s.add_argument("sweep_task", metavar="TASK", choices=tuple(DEFAULT_MODELS),
                   help="transcribe | translate | ocr")
    s.add_argument("data", metavar="DATA",
                   help="a folder of inputs with same-stem .txt references, a TSV source<TAB>reference "
                        "(translate), or a data set saved with datasets' save_to_disk")
    s.add_argument("--strategies", nargs="+", required=True, metavar="SPEC",
                   help="the strategies to score; " + SPEC_HELP + "; a seed range 'sample:T=0.8,seed=0..4' is "
                        "one run per seed")
    s.add_argument("--out", required=True, metavar="DIR",
                   help="the out folder (results.parquet, traces/, summary.md, summary.json); an existing one "
                        "is resumed")
    s.add_argument("--model", default=None,
                   help="the task's model: transcribe tiny.en | base | ID; translate en-pt | pt-en | ID; ocr "
                        "bundled | ID (default: the task's default)")
    s.add_argument("--language", default="auto", help="transcribe: auto | en | de | ...")
    s.add_argument("--whisper-task", default=catalog.WHISPER_TASKS[0], choices=catalog.WHISPER_TASKS,
                   help="transcribe: Whisper's task")
    s.add_argument("--shortlist", action="store_true", help="translate, bundled models: the lexical shortlist")
    s.add_argument("--target-language", default=None, help="translate, M2M100/NLLB: target language code")
    s.add_argument("--source-language", default=None, help="translate, M2M100/NLLB: source language code")
    s.add_argument("--source-prefix", default=None, metavar="TEXT", help="translate, T5: source prefix")
    s.add_argument("--audio-column", default=None, metavar="NAME",
                   help="a saved data set: the input column (default audio / image / text by task)")
    s.add_argument("--text-column", default=None, metavar="NAME", help="a saved data set: the reference column")
    s.add_argument("--split", default=None, help="a saved DatasetDict: the split to read")
    g = s.add_argument_group("Ray")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="workers (Ray actors, each loads the model once; default: the CPU cores)")
    g.add_argument("--address", default=None, metavar="auto|ray://HOST:PORT",
                   help="run on an existing Ray cluster (default: start a local Ray instance)")
    g.add_argument("--batch-size", type=int, default=None, metavar="N",
                   help="files per task sent to a worker (default: up to 8, about 4 batches per worker)")
    g.add_argument("--baseline", default=None, metavar="SPEC",
                   help="the strategy the others are compared with (default: the first)")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    add_decoding_arguments(s)
    s.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run ``sweep``; returns the exit status (module docstring)."""
    missing = missing_sweep_packages()
    if missing:
        print(f"decoding-explorer sweep: {missing}", file=sys.stderr)
        return 2
    from core.sweep.data import DataError
    from core.sweep.decode import Settings
    from core.sweep.runner import SweepConfig, run_sweep

    if args.workers is not None and args.workers < 1:
        return _usage(f"--workers must be at least 1, got {args.workers}")
    try:
        base = options_from_args(args)
    except ValueError as e:
        return _usage(str(e))
    settings = Settings(model=args.model or DEFAULT_MODELS[args.sweep_task], language=args.language,
                        whisper_task=args.whisper_task, dtype=args.dtype, shortlist=args.shortlist,
                        target_language=args.target_language, source_language=args.source_language,
                        source_prefix=args.source_prefix)
    config = SweepConfig(task=args.sweep_task, data=args.data, out=args.out, settings=settings,
                         specs=list(args.strategies), base=base, workers=args.workers, address=args.address,
                         batch_size=args.batch_size, baseline=args.baseline, audio_column=args.audio_column,
                         text_column=args.text_column, split=args.split, progress=args.progress)
    try:
        report = run_sweep(config)
    except (DataError, ValueError) as e:
        return _usage(str(e))
    except RuntimeError as e:
        print(f"decoding-explorer sweep: error: {e}", file=sys.stderr)
        return 1
    print(_closing_line(report, args.out), file=sys.stderr)
    for f in report.failures[:5]:
        print(f"  failed: {f['file']} {f['spec']}: {f['error']}", file=sys.stderr)
    if report.summary is not None and not report.interrupted:
        print(_table(report.summary))
    return report.exit_code


def missing_sweep_packages() -> str | None:
    """None when ray and pyarrow import, else the one line that says how to install them."""
    try:
        import pyarrow  # noqa: F401
        import ray  # noqa: F401
    except ImportError:
        from core.sweep.ray_runner import INSTALL_HINT

        return INSTALL_HINT
    return None


def _usage(message: str) -> int:
    print(f"decoding-explorer sweep: error: {message} (see decoding-explorer sweep --help)", file=sys.stderr)
    return 2


def _closing_line(report, out: str) -> str:
    failed = f", {len(report.failures)} failed" if report.failures else ""
    restarts = f", {report.restarts} worker(s) restarted" if report.restarts else ""
    return (f"sweep: {report.decoded} files decoded, {report.skipped} already done, {report.rows} rows stored"
            f"{failed}{restarts}; results in {out}/results.parquet, summary in {out}/summary.md")


def _table(summary: dict) -> str:
    """One line per strategy on stdout: its metric and 95% CI, and the p-value against the baseline."""
    from core.analysis.metrics import METRICS

    metric = summary.get("metric")
    label = METRICS[metric][0] if metric in METRICS else "metric"
    pct = metric in ("wer", "cer")

    def fmt(v):
        return "–" if v is None else (f"{100 * v:.2f}%" if pct else f"{v:.2f}")

    width = max((len(s["spec"]) for s in summary["strategies"]), default=8)
    lines = []
    for s in summary["strategies"]:
        ci = f"[{fmt(s['ci'][0])}, {fmt(s['ci'][1])}]" if s["ci"] else ""
        vs = s.get("vs_baseline")
        cmp = ""
        if vs and vs["p_value"] is not None:
            cmp = f"  vs {summary['baseline']}: {vs['wins']}W {vs['losses']}L {vs['ties']}T, sign test p={vs['p_value']:.3g}"
        lines.append(f"{s['spec']:<{width}}  {label} {fmt(s['value'])} {ci}{cmp}")
    return "\n".join(lines)
