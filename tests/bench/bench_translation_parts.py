"""Where a translation's milliseconds go: one direction's 34 sentences through the app's path
(source ids, encoder, ``core.engine.Engine`` greedy with top-10 report and cross-attention, as
``bench_translation.py``'s "ours" rows), each part timed by a wrapper around it.

Prints, per part, ms per sentence and us per decoder step (the best of ``--repeats`` passes,
per part, by this thread's CPU time unless ``--clock wall``: the machine is shared), and the engine's glue: the run's time minus its timed parts.
The wrappers cost ~1 us a call, counted in the parts. Not a pass/fail test.

    .venv/bin/python tests/bench/bench_translation_parts.py [--direction en-pt] [--mode shortlist|full]
        [--dtype float32|int8] [--repeats 5] [--lean] [--no-report] [--full-rows] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.backends import marian_net, marian_tiny  # noqa: E402
from core.backends.marian_tiny import load_bergamot  # noqa: E402
from core import cache, engine as engine_mod, report, scoring  # noqa: E402
from core.engine import Engine  # noqa: E402
from core.strategies import greedy  # noqa: E402
from tests.bench.bench_translation import LEAN, OPTIONS  # noqa: E402
from tests.core.test_marian_tiny import EN, PT  # noqa: E402

#: the clock the parts read (``--clock``): the wall clock or this thread's CPU time
CLOCK = time.perf_counter
TIMES: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def timed(owner, name: str, label: str) -> None:
    """Wrap ``owner.name`` so that its time adds up under ``label``."""
    fn = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t = CLOCK()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[label] += CLOCK() - t
            CALLS[label] += 1

    setattr(owner, name, wrapper)


PARTS = [  # (owner, attribute, label), outer parts first; a part's time includes the parts inside it
    (marian_tiny.MarianTinyBackend, "source_ids", "tokenize (source_ids)"),
    (marian_tiny.MarianTinyBackend, "encode", "backend.encode (all)"),
    (marian_net.MarianTinyModel, "encode", "  model.encode (6 layers)"),
    (marian_tiny.MarianTinyBackend, "init_cache", "backend.init_cache (all)"),
    (marian_net.MarianTinyModel, "cross_keys_values", "  cross keys/values"),
    (marian_net.MarianTinyModel, "output_rows", "  shortlist rows gather"),
    (Engine, "processors", "engine.processors (chain build)"),
    (cache.Inference, "step", "Inference.step (all)"),
    (marian_tiny.MarianTinyBackend, "step", "  backend.step (all)"),
    (marian_net.MarianTinyModel, "embed_one", "    embed_one"),
    (marian_net.MarianTinyModel, "decode_position", "    decode_position (2 layers)"),
    (marian_tiny.MarianTinyBackend, "_project", "    _project (output logits)"),
    (marian_tiny.MarianTinyBackend, "_project_compact", "    _project_compact (compact row)"),
    (scoring.Scorer, "score", "Scorer.score"),
    (greedy.SingleHypothesis, "update", "strategy.update"),
    (report.StepReporter, "row_report", "report.row_report"),
    (report.StepReporter, "step_event", "report.step_event"),
    (cache.Inference, "advance", "Inference.advance"),
    (cache.Inference, "finish", "Inference.finish"),
    (marian_tiny.MarianTinyBackend, "decode", "backend.decode (text)"),
]


def one_pass(backend, eng, sentences, options) -> tuple[dict, float, float, int]:
    """(part -> seconds, engine.run seconds, total seconds, steps) over the sentences."""
    TIMES.clear()
    CALLS.clear()
    run_s = total = 0.0
    steps = 0
    for text in sentences:
        t0 = CLOCK()
        encoded = backend.encode(backend.source_ids(text))
        t1 = CLOCK()
        for ev in eng.run(encoded, backend.decoder_prompt(encoded), options):
            steps += type(ev).__name__ == "StepEvent"
        t2 = CLOCK()
        run_s += t2 - t1
        total += t2 - t0
    return dict(TIMES), run_s, total, CALLS["Inference.step (all)"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--direction", default="en-pt", choices=("en-pt", "pt-en"))
    ap.add_argument("--mode", default="shortlist", choices=("shortlist", "full"))
    ap.add_argument("--dtype", default="float32", choices=("float32", "int8"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lean", action="store_true", help="no cross-attention, top-1 report")
    ap.add_argument("--no-report", action="store_true",
                    help="build no events (RunEvents.step yields nothing): the report's cost, directly and "
                         "through what it evicts from the caches (the other parts' times change too)")
    ap.add_argument("--full-rows", action="store_true",
                    help="Engine(compact=False): the shortlist's steps on 32,000-wide rows, as before compact rows")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="cpu",
                    help="this thread's CPU time (default: a shared machine) or the wall clock")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(1)
    backend = load_bergamot(args.direction, dtype=args.dtype).with_shortlist(args.mode == "shortlist")
    eng = Engine(backend, compact=not args.full_rows)
    sentences = EN if args.direction == "en-pt" else PT
    options = LEAN if args.lean else OPTIONS
    if args.no_report:
        report.RunEvents.step = lambda self, t, update, current, time_ms=0.0: iter(())
    for owner, name, label in PARTS:
        timed(owner, name, label)
    one_pass(backend, eng, sentences[:3], options)
    best: dict[str, float] = {}
    best_run = best_total = float("inf")
    steps = 0
    for _ in range(args.repeats):
        parts, run_s, total, steps = one_pass(backend, eng, sentences, options)
        for k, v in parts.items():
            best[k] = min(best.get(k, float("inf")), v)
        best_run, best_total = min(best_run, run_s), min(best_total, total)
    n = len(sentences)
    print(f"{args.direction} {args.mode} {args.dtype}{' lean' if args.lean else ''}{' no report' if args.no_report else ''}{' full rows' if args.full_rows else ''}: {n} sentences, {steps} decoder "
          f"steps ({steps / n:.1f} a sentence), best of {args.repeats} passes per part, "
          f"{'thread CPU time' if args.clock == 'cpu' else 'wall clock'}, one thread")
    print(f"{'part':<36}{'ms/sentence':>12}{'us/step':>10}")
    for _, _, label in PARTS:
        s = best.get(label, 0.0)
        print(f"{label:<36}{1000 * s / n:>12.2f}{1e6 * s / steps:>10.1f}")
    inner = sum(best.get(label, 0.0) for label in ("engine.processors (chain build)", "Inference.step (all)",
                                                   "Scorer.score", "strategy.update", "report.row_report",
                                                   "report.step_event", "Inference.advance", "Inference.finish",
                                                   "backend.decode (text)", "backend.init_cache (all)"))
    print(f"{'engine glue (run - its parts)':<36}{1000 * (best_run - inner) / n:>12.2f}{1e6 * (best_run - inner) / steps:>10.1f}")
    print(f"{'engine.run (all)':<36}{1000 * best_run / n:>12.2f}{1e6 * best_run / steps:>10.1f}")
    print(f"{'sentence (tokenize+encode+run)':<36}{1000 * best_total / n:>12.2f}")


if __name__ == "__main__":
    main()
