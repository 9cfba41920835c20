"""Issue 22 item 3: the eager-torch floor of a Bergamot step. Counts the aten ops per greedy shortlist
step (bare backend loop, and the app's engine path with top-10 report + cross-attention) with
torch.profiler, their summed self CPU time per step, and the Python time around them.

    .venv/bin/python tests/bench/bench_translation_floor.py [en-pt|pt-en]

Not a pass/fail test: it prints figures (session 14: ~490 us a bare step, ~40 non-product ops
at 3.5-5 us each beside 211-258 us of products).
"""
import sys, time, collections
import torch
from torch.profiler import profile, ProfilerActivity
import pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
torch.set_num_threads(1)
from core.backends.marian_tiny import load_bergamot
from core.engine import Engine
from tests.bench.bench_translation import OPTIONS, run_bare
from tests.core.test_marian_tiny import EN, PT

direction = sys.argv[1] if len(sys.argv) > 1 else "en-pt"
sents = EN if direction == "en-pt" else PT
b = load_bergamot(direction).with_shortlist(True)
eng = Engine(b)


def engine_pass():
    steps = 0
    for s in sents:
        enc = b.encode(b.source_ids(s))
        for ev in eng.run(enc, b.decoder_prompt(enc), OPTIONS):
            steps += type(ev).__name__ == "StepEvent"
    return steps


def bare_pass():
    return run_bare(b, sents)[2] - 0  # tokens incl. </s> = steps


for label, fn in (("bare backend loop (encode + step + argmax)", bare_pass), ("engine path (top-10 + cross-attention)", engine_pass)):
    fn()  # warm
    best = 1e9
    for _ in range(3):
        t0 = time.thread_time(); steps = fn(); best = min(best, time.thread_time() - t0)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        steps = fn()
    ka = prof.key_averages()
    top = [e for e in ka if e.key.startswith("aten::") or e.key.startswith("quantized::")]
    # top-level ops only: an op's self time excludes the ops it calls
    calls = sum(e.count for e in top)
    self_us = sum(e.self_cpu_time_total for e in top)
    n = len(sents)
    print(f"\n{direction} {label}: {best * 1000 / n:.2f} ms/sentence (thread CPU, best of 3, no profiler), {steps} steps")
    print(f"  aten/quantized op calls (incl. nested) per sentence {calls / n:.0f}; summed self time under the profiler "
          f"{self_us / 1000 / n:.2f} ms/sentence")
    rows = sorted(top, key=lambda e: -e.self_cpu_time_total)[:22]
    print(f"  {'op':<40}{'calls/sent':>11}{'self us/call':>13}{'self ms/sent':>13}")
    for e in rows:
        print(f"  {e.key:<40}{e.count / n:>11.1f}{e.self_cpu_time_total / e.count:>13.2f}{e.self_cpu_time_total / 1000 / n:>13.3f}")
