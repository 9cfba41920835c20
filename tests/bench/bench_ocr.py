"""OCR benchmark: three readers on the same rendered lines, side by side.

    .venv/bin/python -m tests.bench.bench_ocr [--n 100] [--threads 1] [--model-dir assets/ocr]

Lines are made by ``tools/ocr_data.py`` (the training renderer) in the held-out font
families only (``ocr_data.HELDOUT_FAMILIES``, never trained on), with fixed seeds that
differ from the training run's evaluation seeds (1001/2002, used to pick the
checkpoint), so the figures are not biased by checkpoint selection:

* clean: no augmentation;
* degraded: every line down-scaled to a 16-24 px line, blurred, noisy and JPEG'd
  (``ocr_data.DEGRADED``).

Each line is a height-64 grayscale image, the recognisers' input. Readers:

1. ours: english_g2 encoder + our attention decoder (assets/ocr/), greedy through
   ``core.engine.Engine`` one line at a time, as the app decodes (encode included);
2. english_g2 CTC: EasyOCR's original recogniser (english_g2.pth) and best-path CTC;
3. Tesseract 5 (Debian ``tesseract-ocr``), ``--psm 7`` (a single text line), LSTM
   engine, ``OMP_THREAD_LIMIT`` = the thread count, one process per line (its start-up
   is included in ms/line; it is reported separately).

CER = character edit distance summed over lines / reference characters (jiwer).
Also printed: CRAFT detection time on a 3-line paragraph and a 1200x800
screenshot-like image, and the whole pipeline (detection, reading order, our reader) on
that screenshot. Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

#: seeds of the benchmark sets (the training run evaluates on 1001 / 2002)
SEEDS = {"clean": 7001, "degraded": 7002}


def _cer(refs: list[str], hyps: list[str]) -> float:
    import jiwer

    return float(jiwer.cer(refs, [h if h else "\u2205" for h in hyps]))


def read_ours(samples, model_dir: Path) -> tuple[list[str], float]:
    import torch

    from core.backends.ocr_backend import OCRAttnBackend
    from core.engine import Engine
    from core.events import Finished
    from core.options import DecodingOptions
    from tools.ocr_data import to_pixel_values

    backend = OCRAttnBackend.from_pretrained(model_dir)
    engine = Engine(backend)
    options = DecodingOptions(capture_attention=False, top_k_report=1)
    out = []
    t0 = time.perf_counter()
    for img, _ in samples:
        pv = torch.from_numpy(to_pixel_values([img])[0])
        enc = backend.encode(pv)
        fin = [e for e in engine.run(enc, backend.decoder_prompt(enc), options) if isinstance(e, Finished)][-1]
        out.append(fin.text)
    return out, (time.perf_counter() - t0) / len(samples) * 1000


def read_ctc(samples) -> tuple[list[str], float]:
    import torch

    from core.backends.ocr_backend import CTCReader
    from tools.ocr_data import to_pixel_values

    reader = CTCReader()
    out = []
    t0 = time.perf_counter()
    for img, _ in samples:
        out.append(reader.read(torch.from_numpy(to_pixel_values([img])[0])))
    return out, (time.perf_counter() - t0) / len(samples) * 1000


def read_tesseract(samples, threads: int) -> tuple[list[str], float, float]:
    """Texts, ms per line, and ms of one tesseract start-up (a blank 8x8 image)."""
    exe = shutil.which("tesseract")
    if exe is None:
        raise SystemExit("tesseract not found: apt-get install -y tesseract-ocr")
    env = dict(os.environ, OMP_THREAD_LIMIT=str(threads))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (img, _) in enumerate(samples):
            p = Path(tmp) / f"{i}.png"
            img.save(p)
            paths.append(p)
        from PIL import Image

        blank = Path(tmp) / "blank.png"
        Image.new("L", (8, 8), 255).save(blank)
        t0 = time.perf_counter()
        for _ in range(3):
            subprocess.run([exe, str(blank), "stdout", "--psm", "7", "-l", "eng"], capture_output=True, env=env)
        startup = (time.perf_counter() - t0) / 3 * 1000
        t0 = time.perf_counter()
        for p in paths:
            r = subprocess.run([exe, str(p), "stdout", "--psm", "7", "-l", "eng"], capture_output=True,
                               text=True, env=env)
            out.append(" ".join(r.stdout.split()))
        ms = (time.perf_counter() - t0) / len(samples) * 1000
    return out, ms, startup


def detection_times() -> list[tuple[str, int, float]]:
    """(image, boxes found, seconds) for CRAFT on two rendered images."""
    from core.backends.craft import CraftDetector
    from tests.helpers.ocr_images import render_paragraph, render_screenshot

    import numpy as np

    det = CraftDetector()
    para, _ = render_paragraph()
    shot, _ = render_screenshot()  # a menu bar, a sidebar of items and a few text lines
    out = []
    for name, img in (("paragraph 900x300, 3 lines", para), ("screenshot 1200x800, 16 lines", shot)):
        det.detect(np.asarray(img))  # warm-up
        t0 = time.perf_counter()
        boxes = det.detect(np.asarray(img))
        out.append((name, len(boxes), time.perf_counter() - t0))
    return out


def full_image_reading() -> tuple[float, float, int]:
    """The whole pipeline on the screenshot-like image with the bundled model, as the app
    and the CLI run it (CRAFT, reading order, our reader through the engine, greedy): (CER of the text
    against the drawn lines joined with newlines, seconds, lines read)."""
    from core.options import DecodingOptions
    from core.tasks import ocr as ocr_task
    from tests.helpers.ocr_images import render_screenshot

    shot, truth = render_screenshot()
    model = ocr_task.OCRModel.load()
    t0 = time.perf_counter()
    fin = list(model.decode(shot, DecodingOptions(strategy="greedy")))[-1]
    seconds = time.perf_counter() - t0
    return _cer(["\n".join(truth)], [fin.text]), seconds, fin.text.count("\n") + 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="lines per set")
    ap.add_argument("--threads", type=int, default=1, help="torch threads / OMP_THREAD_LIMIT")
    ap.add_argument("--model-dir", type=Path, default=ROOT / "assets" / "ocr")
    ap.add_argument("--readers", default="ours,ctc,tesseract")
    ap.add_argument("--no-detection", action="store_true")
    args = ap.parse_args(argv)

    import torch

    from tools import ocr_data

    torch.set_num_threads(args.threads)
    _, held = ocr_data.split_fonts(ocr_data.list_fonts())
    if not held:
        raise SystemExit("no held-out fonts installed; see tools/README.md for the Debian font packages")
    readers = args.readers.split(",")
    print(f"OCR benchmark: {args.n} lines per set, {len(held)} held-out faces "
          f"({', '.join(sorted({f.family for f in held}))}), {args.threads} thread(s), model {args.model_dir}")
    rows = []
    for set_name, aug in (("clean", ocr_data.CLEAN), ("degraded", ocr_data.DEGRADED)):
        samples = ocr_data.make_samples(args.n, held, SEEDS[set_name], aug)
        refs = [t for _, t in samples]
        if "ours" in readers:
            hyps, ms = read_ours(samples, args.model_dir)
            rows.append((set_name, "ours: english_g2 + attention (greedy)", _cer(refs, hyps),
                         sum(h == r for h, r in zip(hyps, refs)) / len(refs), ms, ""))
        if "ctc" in readers:
            hyps, ms = read_ctc(samples)
            rows.append((set_name, "english_g2 CTC (EasyOCR weights)", _cer(refs, hyps),
                         sum(h == r for h, r in zip(hyps, refs)) / len(refs), ms, ""))
        if "tesseract" in readers:
            hyps, ms, startup = read_tesseract(samples, args.threads)
            rows.append((set_name, "Tesseract --psm 7", _cer(refs, hyps),
                         sum(h == r for h, r in zip(hyps, refs)) / len(refs), ms,
                         f"(per-line time includes a process start; a start alone on a blank image: {startup:.0f} ms)"))
        for (_, name, cer, exact, ms, note) in rows[-len(readers):]:
            print(f"  done {set_name:8s} {name}: CER {cer:.2%}")
    print()
    print(f"{'set':9s} {'reader':40s} {'CER':>7s} {'exact':>6s} {'ms/line':>8s}")
    for set_name, name, cer, exact, ms, note in rows:
        print(f"{set_name:9s} {name:40s} {cer:7.2%} {exact:6.0%} {ms:8.1f}  {note}")
    if not args.no_detection:
        print("\nCRAFT detection (EasyOCR, CPU, int8 dynamic quantisation):")
        for name, n, s in detection_times():
            print(f"  {name:32s} {n:3d} boxes  {s:.2f} s")
        cer, seconds, n_lines = full_image_reading()
        print(f"Whole screenshot (CRAFT + reading order + ours, bundled model): {n_lines} lines, "
              f"CER {cer:.2%} against the drawn text in reading order, {seconds:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
