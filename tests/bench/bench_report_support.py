"""The per-step report over a shortlisted row's support vs over the whole 32k row (issue 22).

Same process, same sentences (tests/core/test_marian_tiny.py), Bergamot tiny11 float32 with
its shortlist, greedy with the app's capture (cross-attention, top-10), one torch thread,
process CPU time. Passes alternate ``core.report.support`` on (as shipped) and off (the
whole-row computation, as before); prints ms/sentence and ms/token per mode, medians over
``--repeats``, and checks that both modes give the same ids and the same StepEvent numbers.
Not a pass/fail test.

    .venv/bin/python tests/bench/bench_report_support.py [--repeats N] [--direction en-pt]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core import report  # noqa: E402
from core.backends.marian_tiny import load_bergamot  # noqa: E402
from core.engine import Engine  # noqa: E402
from core.events import Finished, StepEvent  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from tests.core.test_marian_tiny import EN, PT  # noqa: E402

OPTIONS = DecodingOptions(strategy="greedy", max_new_tokens=1000, top_k_report=10, capture_attention=True)


def one_pass(backend, engine, sentences) -> tuple[float, int, list]:
    """(CPU seconds, output tokens incl. </s>, per sentence the reported numbers)."""
    t0 = time.process_time()
    n, seen = 0, []
    for text in sentences:
        encoded = backend.encode(backend.source_ids(text))
        for ev in engine.run(encoded, backend.decoder_prompt(encoded), OPTIONS):
            if isinstance(ev, StepEvent):
                seen.append((ev.token_id, ev.prob, ev.rank, ev.entropy, ev.raw_entropy, ev.raw_varentropy,
                             [(t.id, t.prob) for t in ev.topk], [(t.id, t.prob) for t in ev.raw_topk]))
            elif isinstance(ev, Finished):
                n += len(ev.token_ids) + 1
    return time.process_time() - t0, n, seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--direction", default="en-pt")
    args = ap.parse_args()
    torch.set_num_threads(1)
    sentences = EN if args.direction == "en-pt" else PT
    backend = load_bergamot(args.direction, shortlist=True)
    engine = Engine(backend)
    shipped = report.support
    times = {"support": [], "whole row": []}
    seen = {}
    one_pass(backend, engine, sentences[:4])  # warm up
    for _ in range(args.repeats):
        for mode in times:
            report.support = shipped if mode == "support" else (lambda probs: None)
            s, n, seen[mode] = one_pass(backend, engine, sentences)
            times[mode].append((s, n))
    report.support = shipped
    same = seen["support"] == seen["whole row"]
    print(f"{args.direction}: {len(sentences)} sentences, {args.repeats} alternating passes, one thread, CPU time")
    for mode, rows in times.items():
        ms_sent = statistics.median(1000 * s / len(sentences) for s, _ in rows)
        ms_tok = statistics.median(1000 * s / n for s, n in rows)
        print(f"  report over {mode:<10} {ms_sent:7.2f} ms/sentence  {ms_tok:6.3f} ms/token")
    print(f"  same ids and reported numbers: {same}")


if __name__ == "__main__":
    main()
