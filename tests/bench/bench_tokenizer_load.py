"""The GIL holds of building Whisper's tokenizer from its tokenizer.json (issue 22, "model
load with no stall > 100 ms"): the previous build (``json.loads`` of the whole file, then
``json.dumps`` + ``tokenizers.Tokenizer.from_str`` of all of it, then transformers' deep copy
of the backend) against the current one (``parse_tokenizer_json`` + ``build_whisper_tokenizer``),
alternating, ``--rounds`` times each.

A probe thread sleeps 1 ms in a loop; a gap between its wake-ups is a time it could not get
the GIL (a GUI thread waits the same way while a loader thread holds it). Per build it prints
the wall time, the loader thread's CPU time, the longest probe gap and the line the loader
was at when the probe woke after each of the 3 longest gaps (the call that held the GIL ends
there). The load average is printed first: on a loaded machine gaps are inflated by the
scheduler (a thread holding the GIL is descheduled), so compare CPU times and take the
minimum over rounds. The garbage collector is paused during each build as the window's model
loads pause it (``gui.tabs.model_load.collector_paused``); ``--gc-on`` leaves it on (then a
full collection over torch's and transformers' objects lands in whichever step allocates).
Not a pass/fail test.

    .venv/bin/python tests/bench/bench_tokenizer_load.py [--model base] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def tokenizer_path(name: str) -> pathlib.Path:
    """The bundled model's tokenizer.json."""
    from core.catalog import WHISPER_MODELS

    entry = WHISPER_MODELS[name]
    module, rel = entry.tokenizer
    return pathlib.Path(__import__(entry.modules[module]).__file__).parent / rel


def previous_build(path: pathlib.Path, vocab_size: int):
    """The build before this change (whisper_ct2._as_json + the old build_whisper_tokenizer)."""
    import tokenizers
    from transformers import WhisperTokenizer

    from core.backends.whisper_tokens import whisper_special_tokens

    data = json.loads(path.read_bytes())
    special = whisper_special_tokens(data)
    added = list(data.get("added_tokens", []))
    present = {int(tok["id"]) for tok in added}
    for token_id in range(special.timestamp_begin, vocab_size):
        if token_id not in present:
            added.append({"id": token_id, "content": "<|%.2f|>" % ((token_id - special.timestamp_begin) * 0.02),
                          "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
                          "special": False})
    data = {**data, "added_tokens": added}
    backend = tokenizers.Tokenizer.from_str(json.dumps(data))
    extra = [t["content"] for t in added if t.get("special") and t["content"] != "<|endoftext|>"]
    return WhisperTokenizer(tokenizer_object=backend, unk_token="<|endoftext|>", bos_token="<|endoftext|>",
                            eos_token="<|endoftext|>", pad_token="<|endoftext|>", extra_special_tokens=extra)


def current_build(path: pathlib.Path, vocab_size: int):
    """parse_tokenizer_json (what whisper_ct2 should call) + build_whisper_tokenizer."""
    from core.backends.whisper_tokens import build_whisper_tokenizer, parse_tokenizer_json, whisper_special_tokens

    data = parse_tokenizer_json(path)
    whisper_special_tokens(data)
    return build_whisper_tokenizer(data, vocab_size)


def measure(build, path, vocab_size, pause_gc: bool = True):
    """(wall ms, loader CPU ms, [(gap ms, where)] longest first) of one build under the probe."""
    main = threading.get_ident()
    gaps: list[tuple[float, str]] = []
    stop = threading.Event()

    def probe():
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gap = now - last
            if gap > 0.010:
                frame = sys._current_frames().get(main)
                where = f"{pathlib.Path(frame.f_code.co_filename).name}:{frame.f_lineno} {frame.f_code.co_name}" if frame else "?"
                gaps.append((gap * 1e3, where))
            last = time.perf_counter()

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    time.sleep(0.05)
    if pause_gc:
        gc.disable()
    t0, c0 = time.perf_counter(), time.thread_time()
    build(path, vocab_size)
    wall, cpu = (time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3
    gc.enable()
    time.sleep(0.02)
    stop.set()
    thread.join()
    return wall, cpu, sorted(gaps, reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="base", choices=("base", "tiny.en"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gc-on", action="store_true", help="leave the garbage collector on during the builds")
    args = ap.parse_args()
    import torch  # noqa: F401  (as in the app: imported before the tokenizer is built)
    import transformers  # noqa: F401

    path = tokenizer_path(args.model)
    vocab_size = {"base": 51865, "tiny.en": 51864}[args.model]
    previous_build(path, vocab_size)  # warm: imports, caches
    current_build(path, vocab_size)
    gc.collect()
    gc.freeze()  # as the window's policy does after its imports
    print(f"{args.model}, garbage collector {'on' if args.gc_on else 'paused'}: {path.stat().st_size / 1e6:.1f} MB tokenizer.json; load average {os.getloadavg()}")
    best: dict[str, list[float]] = {"previous": [], "current": []}
    for r in range(args.rounds):
        for name, build in (("previous", previous_build), ("current", current_build)):
            wall, cpu, gaps = measure(build, path, vocab_size, pause_gc=not args.gc_on)
            gc.collect()
            best[name].append(gaps[0][0] if gaps else 0.0)
            top = "; ".join(f"{g:.0f} ms @ {w}" for g, w in gaps[:3])
            print(f"round {r} {name:8s}: wall {wall:6.0f} ms, CPU {cpu:5.0f} ms, longest gaps: {top}")
    for name, values in best.items():
        print(f"{name:8s}: longest probe gap min/median over rounds {min(values):.0f}/{sorted(values)[len(values) // 2]:.0f} ms")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
