"""``decoding-explorer sweep`` (issue 24) against a plain loop over the CLI, on the same files.

tiny.en on ~8 espeak-ng clips (sentences of ``LIGHTHOUSE``, a few voices and speeds, each
with its ``.txt`` reference, made as tests/e2e/test_sweep_ray.py makes them), strategies
greedy, beam:3 and sample T=0.8 with seeds 0..1 (4 runs per file):

  - CLI loop: one ``decoding-explorer transcribe FILE --model tiny.en ... --json`` process
    per file per strategy and seed (what a user's shell loop does: start Python, import
    torch, load the model, encode the file, decode once);
  - sweep, 1 worker and 2 workers: ``decoding-explorer sweep transcribe DATA --workers N``,
    one process each, into a fresh out folder (Ray's start-up, the workers' model loads,
    one encoder pass per file for its 4 runs).

Throughput = files / wall seconds of the whole command(s), start-up included, as a user
waits for them. Scaling efficiency = (files/s with 2 workers) / (2 x files/s with 1
worker). The goal (the issue's): the sweep with 2 workers >= 2.5x the CLI loop's files/s.
The sweep's token ids are checked against the CLI runs' (same ids expected: the lanes share
only the encoder output). Not a pass/fail test: it prints figures; the load average is
printed with them (other work on the machine slows every figure).

An untimed 1-file sweep runs first (``--no-warmup`` skips it): Ray's first start on a
machine costs tens of seconds once, which would otherwise land on whichever sweep runs first.

    .venv/bin/python tests/bench/bench_sweep.py [--files 8] [--workers 1 2] [--no-warmup]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.helpers.speech import LIGHTHOUSE, SAMPLE_RATE, synth_speech  # noqa: E402

SPECS = ["greedy", "beam:3", "sample:T=0.8,seed=0..1"]
#: each (spec, seed) as the single run's flags
ALONE = {("greedy", 0): [], ("beam:3", 0): ["--strategy", "beam", "--beams", "3"],
         ("sample:T=0.8,seed=0..1", 0): ["--strategy", "sample", "--temperature", "0.8", "--seed", "0"],
         ("sample:T=0.8,seed=0..1", 1): ["--strategy", "sample", "--temperature", "0.8", "--seed", "1"]}
VOICES = [("en-us", 150), ("en-gb", 170), ("en-us", 130), ("en-gb", 150)]
GOAL = 2.5


def _program() -> list[str]:
    script = ROOT / ".venv" / "bin" / "decoding-explorer"
    return [str(script)] if script.exists() else [sys.executable, "-m", "core.cli"]


def make_clips(root: pathlib.Path, n: int) -> list[pathlib.Path]:
    import soundfile as sf

    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        text = LIGHTHOUSE[i % len(LIGHTHOUSE)]
        voice, wpm = VOICES[i % len(VOICES)]
        path = root / f"clip{i:02d}.wav"
        sf.write(path, synth_speech(text, voice=voice, words_per_minute=wpm), SAMPLE_RATE)
        path.with_suffix(".txt").write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def cli_loop(clips: list[pathlib.Path]) -> tuple[float, dict]:
    """Seconds for one transcribe process per file per run; {(file, spec, seed): ids}."""
    ids = {}
    t0 = time.perf_counter()
    for clip in clips:
        for (spec, seed), flags in ALONE.items():
            out = subprocess.run([*_program(), "transcribe", str(clip), "--model", "tiny.en", *flags, "--json"],
                                 capture_output=True, text=True, cwd=ROOT)
            if out.returncode != 0:
                raise SystemExit(f"transcribe {clip.name} {flags} failed: {out.stderr[-2000:]}")
            ids[(clip.stem, spec, seed)] = [t["id"] for t in json.loads(out.stdout)["tokens"]]
    return time.perf_counter() - t0, ids


def sweep(data: pathlib.Path, out: pathlib.Path, workers: int, files: list[pathlib.Path] | None = None,
          specs: list[str] | None = None) -> tuple[float, dict]:
    """Seconds for one ``sweep`` command with ``workers`` (over ``files`` only: a folder of
    links to them); {(file, spec, seed): ids}."""
    import pyarrow.parquet as pq

    shutil.rmtree(out, ignore_errors=True)
    if files is not None:
        data = out.with_name(out.name + "_data")
        data.mkdir()
        for f in files:
            for src in (f, f.with_suffix(".txt")):
                (data / src.name).symlink_to(src)
    t0 = time.perf_counter()
    res = subprocess.run([*_program(), "sweep", "transcribe", str(data), "--model", "tiny.en", "--strategies",
                          *(specs or SPECS), "--out", str(out), "--workers", str(workers), "--no-progress"],
                         capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"sweep --workers {workers} failed ({res.returncode}): {res.stderr[-2000:]}")
    rows = pq.read_table(out / "results.parquet").to_pylist()
    return wall, {(pathlib.Path(r["file"]).stem, r["spec"], r["seed"]): list(r["token_ids"]) for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--no-warmup", dest="warmup", action="store_false",
                    help="skip the untimed 1-file sweep that pays Ray's first start before the timed runs")
    args = ap.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        tmp = pathlib.Path(tmp)
        clips = make_clips(tmp / "data", args.files)
        n = len(clips)
        runs = n * len(ALONE)
        print(f"bench_sweep: tiny.en, {n} espeak clips, strategies {' '.join(SPECS)} ({len(ALONE)} runs per file, "
              f"{runs} in all), {os.cpu_count()} cores; load average before {load0[0]:.2f} {load0[1]:.2f} "
              f"{load0[2]:.2f}", flush=True)
        results = {}
        if args.warmup:  # Ray's first start on a machine (and cold file caches) costs tens of seconds once
            t0 = time.perf_counter()
            sweep(tmp / "data", tmp / "warmup", 1, files=clips[:1], specs=["greedy"])
            print(f"  warm-up sweep (1 file, greedy, untimed in the figures): {time.perf_counter() - t0:.1f} s",
                  flush=True)
        for w in args.workers:
            wall, ids = sweep(tmp / "data", tmp / f"out{w}", w)
            results[f"sweep, {w} worker{'s' if w > 1 else ''}"] = (wall, ids)
            print(f"  sweep --workers {w}: {wall:.1f} s", flush=True)
        wall, cli_ids = cli_loop(clips)
        print(f"  CLI loop ({runs} processes): {wall:.1f} s", flush=True)
        results["CLI loop (1 process per file x run)"] = (wall, cli_ids)
    load1 = os.getloadavg()
    cli_fps = n / results["CLI loop (1 process per file x run)"][0]
    print()
    print(f"{'':38s} {'wall s':>8s} {'files/s':>8s} {'vs CLI':>7s}  ids = CLI's")
    for name, (wall, ids) in results.items():
        same = sum(1 for k, v in ids.items() if cli_ids.get(k) == v)
        print(f"{name:38s} {wall:8.1f} {n / wall:8.3f} {n / wall / cli_fps:6.2f}x  {same}/{len(cli_ids)}")
    fps = {w: n / results[f"sweep, {w} worker{'s' if w > 1 else ''}"][0] for w in args.workers}
    if 1 in fps and 2 in fps:
        print(f"scaling efficiency 1 -> 2 workers: {fps[2] / (2 * fps[1]):.0%} (files/s x{fps[2] / fps[1]:.2f})")
    if 2 in fps:
        ratio = fps[2] / cli_fps
        print(f"goal: sweep with 2 workers >= {GOAL}x the CLI loop's files/s: {ratio:.2f}x -> "
              f"{'met' if ratio >= GOAL else 'NOT met'}")
    print(f"load average after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} (other work on the machine slows "
          "every figure)")


if __name__ == "__main__":
    main()
