"""``decoding-explorer replay TRACE.json``: rerun the command that wrote a ``--json`` trace and
compare its token ids with the trace's.

Greedy decoding on a flat distribution can flip when the order of a sum changes (oneDNN/MKL
threading under load, another thread count, another torch), so the trace's ``"rerun"`` block
(``core.cli.trace.rerun_block``) records the torch and transformers versions, the torch
thread count, device, dtype, seed, the command line and the input's SHA-256. Replay:

1. reads the trace, plain or gzipped (a sweep's ``traces/*.json.gz`` as it is; exit 2 when the file is not a trace: not JSON, or no ``"tokens"`` /
   ``"rerun"`` with a command line);
2. checks the input file is there and unchanged (exit 1 otherwise) and warns on stderr when
   the torch / transformers / app version differ or the thread count cannot be the same;
3. sets the trace's thread count and seed, reruns its command line (``--json``, in the
   directory it ran in; files long-form would write go to a temporary directory) and
4. compares the ids: ``same ids (N tokens)`` on stdout and exit 0, or the first step where
   they differ (step index from 0 in decoding order, both ids and their texts) and exit 1.

Progress goes to stderr; stdout has only the verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from typing import Sequence

from core.cli import trace as cli_trace
from core.cli.trace import CLIError
from core.inputs.json_file import read_json


class NotATrace(Exception):
    """The file given to replay is not a trace replay can rerun (exit status 2)."""


def add_parser(sub, main) -> None:
    """Add the ``replay`` subcommand to ``sub`` (the subparsers of ``core.cli.commands.build_parser``);
    ``main`` is the CLI's entry point (argv -> exit status), which replay reruns the trace's
    command line with (passed in: this module does not import ``core.cli.commands``)."""
    r = sub.add_parser("replay", help="rerun a --json trace's command and check it gives the same token ids")
    r.add_argument("trace", help="a trace written by transcribe / translate / ocr ... --json, or a sweep's traces/*.json.gz "
                        "(gzipped traces are read as they are)")
    r.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch threads for the rerun (default: the trace's; another count may flip greedy choices "
                        "on flat distributions)")
    r.set_defaults(func=cmd_replay, run_command=main)


def note_command(argv: Sequence[str], args) -> None:
    """Remember the running command line for the trace's ``"rerun"`` block (``core.cli.trace.note_command``)."""
    cli_trace.note_command(argv, args)


def read_trace(path: str) -> dict:
    """The trace in ``path`` (a dict with ``"tokens"`` and a ``"rerun"`` block holding a command
    line). CLIError (exit 1) when the file is missing; NotATrace (exit 2) when it is not a
    trace replay can rerun."""
    if not os.path.isfile(path):
        raise CLIError(f"{path}: no such file; give a trace written with --json")
    data = read_json(path, unreadable=lambda why: CLIError(f"{path} cannot be read ({why})"),
                     not_json=lambda why: NotATrace(f"{path} is not a decoding-explorer trace (not JSON: {why}); "
                                                    "give the output of transcribe / translate / ocr ... --json"))
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list) or "task" not in data:
        raise NotATrace(f"{path} is not a decoding-explorer trace (no \"task\" and \"tokens\"); give the output of "
                        "transcribe / translate / ocr ... --json")
    rerun = data.get("rerun")
    if not isinstance(rerun, dict) or not isinstance(rerun.get("argv"), list):
        raise NotATrace(f"{path} is not a decoding-explorer trace replay can rerun: it has no \"rerun\" block with "
                        "a command line (traces from before replay, --compare and the window's lack one); "
                        "write it again with --json")
    if any(not isinstance(t, dict) or not isinstance(t.get("id"), int) for t in data["tokens"]):
        raise NotATrace(f"{path} is not a decoding-explorer trace: a token has no integer \"id\"")
    return data


def check_input(rerun: dict) -> None:
    """CLIError when the trace's input file is missing or its SHA-256 differs (a rerun on
    another input says nothing about reproducibility)."""
    inp = rerun.get("input") or {}
    path = inp.get("path")
    if not path:
        return
    if not os.path.isfile(path):
        raise CLIError(f"the input {path} is missing; put the file the trace was made from back there to replay it")
    want = inp.get("sha256")
    have = cli_trace.file_sha256(path)
    if want and have != want:
        raise CLIError(f"the input {path} changed since the trace was written (sha256 {want[:12]}... then, "
                       f"{have[:12]}... now); replay needs the same file")


def environment_warnings(rerun: dict, threads: int, options: dict) -> list[str]:
    """What differs from the trace's environment and may change ids (one line each): torch,
    transformers and app versions, the thread count, sampling without a seed."""
    now = cli_trace.environment()
    lines = []
    for key, name in (("torch", "torch"), ("transformers", "transformers"), ("app_version", "decoding-explorer")):
        if rerun.get(key) is not None and rerun.get(key) != now[key]:
            lines.append(f"the trace ran on {name} {rerun[key]}, this is {name} {now[key]}: "
                         "the sums may round differently and ids may differ")
    if rerun.get("threads") is not None and threads != rerun["threads"]:
        lines.append(f"the trace ran on {rerun['threads']} threads, replaying on {threads}: the order of sums "
                     "changes and greedy choices on flat distributions may flip")
    if options.get("seed") is None and (options.get("strategy") in ("sample", "mirostat")
                                        or options.get("verification") == "sample"):
        lines.append("the run sampled without a seed: its draws cannot be repeated (give --seed N)")
    return lines


def replay_threads(rerun: dict, asked: int | None) -> int:
    """The torch thread count to replay on: ``asked`` (``--threads``), else the trace's, at most
    this machine's CPU count; ValueError for a count below 1."""
    n = asked if asked is not None else int(rerun.get("threads") or 1)
    if n < 1:
        raise ValueError(f"--threads must be at least 1, got {n}")
    return min(n, os.cpu_count() or n)


def rerun_argv(argv: list[str], out_dir: str) -> list[str]:
    """The trace's command line made to print a trace and write nothing the user has: ``--json``
    added when absent; with a long-form ``--output-format``, ``--output-dir out_dir``."""
    argv = list(argv)
    if "--json" not in argv:
        argv.append("--json")
    if any(a in ("-f", "--output-format") or a.startswith("--output-format=") or
           (a.startswith("-f") and not a.startswith("--")) for a in argv):
        argv += ["--output-dir", out_dir]
    return argv


def rerun(data: dict, threads: int, main) -> dict:
    """Rerun the trace's command line with ``main`` (the CLI entry point) in this process, on
    ``threads`` torch threads, the global torch seed set to the trace's seed (the samplers
    seed their own generators from the options), in the directory it ran in; return the new
    trace. The thread count and working directory are restored afterwards. CLIError when
    the rerun fails."""
    import torch

    info = data["rerun"]
    before, cwd = torch.get_num_threads(), os.getcwd()
    out = io.StringIO()
    try:
        torch.set_num_threads(threads)
        torch.manual_seed(info.get("seed") or 0)
        if info.get("cwd") and os.path.isdir(info["cwd"]):
            os.chdir(info["cwd"])
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(out):
            try:
                code = main(rerun_argv(info["argv"], tmp))
            except SystemExit as e:  # the command line no longer parses: argparse exits (2)
                code = e.code if isinstance(e.code, int) else 2
    finally:
        os.chdir(cwd)
        torch.set_num_threads(before)
    if code != 0:
        raise CLIError(f"the rerun of `{' '.join(info['argv'])}` failed (exit {code}); see its message above")
    try:
        return json.loads(out.getvalue())
    except json.JSONDecodeError:
        raise CLIError("the rerun printed no JSON trace; is the command one that writes one (--compare does not)?") \
            from None


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first index where the id lists differ (one ending early counts), None when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _token(tokens: list[dict], i: int) -> str:
    if i >= len(tokens):
        return f"(ended after {len(tokens)} tokens)"
    t = tokens[i]
    return f"{t['id']} {t.get('text', '')!r}" + (f" (segment {t['segment']})" if "segment" in t else "")


def cmd_replay(args: argparse.Namespace) -> int:
    """Run ``replay``: 0 same ids, 1 a difference or an input/rerun error, 2 not a trace."""
    try:
        data = read_trace(args.trace)
    except NotATrace as e:
        print(f"decoding-explorer replay: error: {e}", file=sys.stderr)
        return 2
    info = data["rerun"]
    check_input(info)
    threads = replay_threads(info, args.threads)
    for line in environment_warnings(info, threads, data.get("options") or {}):
        print(f"warning: {line}", file=sys.stderr)
    print(f"replay: {' '.join(info['argv'])} on {threads} thread(s), seed {info.get('seed')}, torch "
          f"{info.get('torch')}", file=sys.stderr, flush=True)
    new = rerun(data, threads, args.run_command)
    want = [t["id"] for t in data["tokens"]]
    got = [t["id"] for t in new.get("tokens", [])]
    step = first_difference(want, got)
    if step is None:
        print(f"same ids ({len(want)} tokens)")
        return 0
    print(f"ids differ at step {step} (the trace has {len(want)} tokens, the rerun {len(got)}):\n"
          f"  trace: {_token(data['tokens'], step)}\n"
          f"  rerun: {_token(new['tokens'], step)}")
    return 1
