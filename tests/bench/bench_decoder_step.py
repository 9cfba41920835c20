"""Decoder step in isolation: ``WhisperLeanDecoder.step`` alone (no engine), greedy over the
bundled sample's ids, one row, cross-attention captured. Prints ms per step (median over
steps, min over repeats) for each model and dtype, plus the full run per token; with
``--profile`` a torch.profiler table of one run.

``--ab`` alternates, in the same process and minute, the step as it runs now ("split") with the
step before ``core.backends.step_threads`` (torch's own threads for every operation: "omp") and,
with ``--variants omp,split,split-layers``, with the products inside the layers split too, and
prints each, with the load average (on a shared machine, compare the thread CPU and the
alternating minima, not one wall figure).

    .venv/bin/python tests/bench/bench_decoder_step.py [--models tiny.en,base] [--dtypes float32,int8]
        [--threads 1] [--repeats 5] [--profile] [--ab [--variants omp,split,split-layers]]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.inputs.audio import load_audio  # noqa: E402
from core.tasks.speech import SAMPLE_RATE, SpeechModel  # noqa: E402


def run_once(sm, encoded, prompt_ids, steps: int, attn: bool = True):
    """Greedy ``steps`` tokens through the backend's step alone; (per-step seconds, ids)."""
    be = sm.backend
    cache = be.init_cache(encoded, 1)
    ids = torch.tensor([prompt_ids])
    times, out_ids = [], []
    with torch.inference_mode():
        out = be.step(ids, cache, attn)
        for _ in range(steps):
            nxt = int(out.logits[0].argmax())
            out_ids.append(nxt)
            t0, c0 = time.perf_counter(), time.thread_time()
            out = be.step(torch.tensor([[nxt]]), out.cache, attn)
            times.append((time.perf_counter() - t0, time.thread_time() - c0))
    return times, out_ids


class _TorchThreads:
    """The step as it ran before ``core.backends.step_threads``: torch's threads for every operation."""

    def __init__(self, rows: int, cpu: bool = True):
        self.parts = 1

    def __enter__(self) -> int:
        return 1

    def __exit__(self, *exc: object) -> None:
        return None


#: the ways a step may use several threads: "split" (as shipped), "split-layers" (also the float
#: products inside the layers from 2 MB of weights: tiny.en's and base's fc1/fc2, base's q/k/v),
#: "omp" (before core.backends.step_threads: torch's threads for every operation)
VARIANTS = ("omp", "split", "split-layers")


@contextlib.contextmanager
def variant(name: str):
    """The step as ``name`` (one of ``VARIANTS``) runs it, inside the block."""
    import core.backends.whisper_lean as lean
    from core.backends import step_threads

    if name not in VARIANTS:
        raise ValueError(f"unknown step variant {name!r}: pick one of {', '.join(VARIANTS)}")
    kept = lean.StepThreads, step_threads.SPLIT_MIN_BYTES
    if name == "omp":
        lean.StepThreads = _TorchThreads
    elif name == "split-layers":
        step_threads.SPLIT_MIN_BYTES = 2_000_000
    try:
        yield
    finally:
        lean.StepThreads, step_threads.SPLIT_MIN_BYTES = kept


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="tiny.en,base")
    p.add_argument("--dtypes", default="float32,int8")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--ab", action="store_true", help="alternate the step variants (--variants) in one run")
    p.add_argument("--variants", default="omp,split",
                   help=f"with --ab: which of {', '.join(VARIANTS)} (default omp,split)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    clip = sorted((ROOT / "assets" / "samples").glob("*.wav"))[0]
    audio = load_audio(clip)
    for name in a.models.split(","):
        for dt in a.dtypes.split(","):
            sm = SpeechModel.load(name, dtype=dt)
            feats = sm._loaded.feature_extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
            encoded = sm.backend.encode({"input_features": feats})
            prompt = list(sm.prompt("en", "transcribe").prompt_ids)
            variants = tuple(a.variants.split(",")) if a.ab else ("split",)
            meds: dict = {v: [] for v in variants}
            cpu: dict = {v: [] for v in variants}
            ids: dict = {}
            run_once(sm, encoded, prompt, 5)
            load = os.getloadavg()[0]
            for _ in range(a.repeats):
                for v in variants:
                    with variant(v):
                        t, ids[v] = run_once(sm, encoded, prompt, a.steps)
                    meds[v].append(statistics.median(w for w, _ in t))
                    cpu[v].append(statistics.median(c for _, c in t))
            for v in variants:
                label = f" {v:10}" if a.ab else ""
                print(f"{name:8} {dt:8} {a.threads}t{label} step ms: wall min-of-medians {1000 * min(meds[v]):6.2f}  "
                      f"median {1000 * statistics.median(meds[v]):6.2f}; thread CPU min {1000 * min(cpu[v]):6.2f}  "
                      f"ids[:8] {ids[v][:8]}  load {load:.1f}-{os.getloadavg()[0]:.1f}", flush=True)
            if a.ab:
                print(f"  same ids: {len({tuple(i) for i in ids.values()}) == 1}", flush=True)
            if a.profile:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    run_once(sm, encoded, prompt, a.steps)
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))


if __name__ == "__main__":
    main()
