"""Decoder step in isolation: ``WhisperLeanDecoder.step`` alone (no engine), greedy over the
bundled sample's ids, one row, cross-attention captured. Prints ms per step (median over
steps, min over repeats) for each model and dtype, plus the full run per token; with
``--profile`` a torch.profiler table of one run.

    .venv/bin/python tests/bench/bench_decoder_step.py [--models tiny.en,base] [--dtypes float32,int8]
        [--threads 1] [--repeats 5] [--profile]
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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="tiny.en,base")
    p.add_argument("--dtypes", default="float32,int8")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--profile", action="store_true")
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
            meds, cpu, ids = [], [], None
            run_once(sm, encoded, prompt, 5)
            for _ in range(a.repeats):
                t, ids = run_once(sm, encoded, prompt, a.steps)
                meds.append(statistics.median(w for w, _ in t))
                cpu.append(statistics.median(c for _, c in t))
            print(f"{name:8} {dt:8} {a.threads}t step ms: wall min-of-medians {1000 * min(meds):6.2f}  "
                  f"median {1000 * statistics.median(meds):6.2f}; thread CPU min {1000 * min(cpu):6.2f}  "
                  f"ids[:8] {ids[:8]}", flush=True)
            if a.profile:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    run_once(sm, encoded, prompt, a.steps)
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))


if __name__ == "__main__":
    main()
