"""OCR benchmark: three readers on the same rendered lines, side by side.

    .venv/bin/python -m tests.bench.bench_ocr [--n 100] [--threads 1] [--model-dir assets/ocr]

Lines are made by ``tools/ocr_data.py`` (the training renderer) in the held-out font
families only (``ocr_data.HELDOUT_FAMILIES``, never trained on), with fixed seeds that
differ from the training run's evaluation seeds (1001/2002, used to pick the
checkpoint), so the figures are not biased by checkpoint selection:

* clean: no augmentation;
* degraded: every line down-scaled to a 16-24 px line, blurred, noisy and JPEG'd
  (``ocr_data.DEGRADED``);
* small: small low-contrast lines as cropped from a screenshot or a scanned form
  (:func:`small_samples`): crops 18-30 px tall whose text line box fills 60-80% of the
  height, dark grey text (60-110) on light grey (150-200), Gaussian blur 0.4-0.9 px,
  JPEG quality 30-70; half of them phrases of 4-9 words, half ``ocr_data.random_text``.

Clean and degraded lines are height-64 grayscale images, the recognisers' input, read
directly (the reader alone). Readers:

1. ours: english_g2 encoder + our attention decoder (assets/ocr/), greedy through
   ``core.engine.Engine`` one line at a time, as the app decodes (encode included);
2. english_g2 CTC: EasyOCR's original recogniser (english_g2.pth) and best-path CTC;
3. Tesseract 5 (Debian ``tesseract-ocr``), ``--psm 7`` (a single text line), LSTM
   engine, ``OMP_THREAD_LIMIT`` = the thread count, one process per line (its start-up
   is included in ms/line; it is reported separately).

Every set is also read through the whole pipeline, as the app and the CLI read an image
(``OCRModel.detect`` then ``decode``, greedy; the lines of one image joined with a
space): "ours, pipeline" (one-line images read whole, CRAFT on an upscaled
contrast-stretched copy otherwise, uncovered ink read), "ours, CRAFT boxes only" (the
pipeline before issue 9: CRAFT on the image as it is, its boxes only) and "CTC,
pipeline" (english_g2's CTC on the pipeline's lines, the app's comparison column).
Tesseract reads the same image files.

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
SEEDS = {"clean": 7001, "degraded": 7002, "small": 7003}


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


def small_samples(n: int, fonts, seed: int) -> list:
    """``n`` (RGB image, text) small low-contrast lines (see the module docstring),
    reproducible for a given ``seed``."""
    from tests.helpers.ocr_images import render_small_line
    from tools import ocr_data

    rng = random.Random(seed)
    words = ocr_data._words()
    out = []
    for i in range(n):
        font = rng.choice(fonts)
        if i % 2:
            text = ocr_data.random_text(rng, euro=font.has_euro)
        else:
            toks = [ocr_data._case(rng.choice(words), rng) if rng.random() < 0.85 else ocr_data._number(rng)
                    for _ in range(rng.randint(4, 9))]
            text = " ".join(ocr_data._punctuate(t, rng) for t in toks)
            text = "".join(c for c in text if c in ocr_data.ENGLISH_G2_CHARACTERS and (font.has_euro or c != "\u20ac"))
            text = " ".join(text.split())[: ocr_data.MAX_CHARS].strip()
        height = rng.randint(18, 30)
        line = int(height * rng.uniform(0.6, 0.8))
        img = render_small_line(text, line, rng.randint(60, 110), rng.randint(150, 200), font=font.path,
                                blur=rng.uniform(0.4, 0.9), jpeg_quality=rng.randint(30, 70),
                                margin=(rng.randint(2, line), (height - line) // 2))
        out.append((img, text))
    return out


def read_pipeline(samples, model, craft_only: bool = False) -> tuple[list[str], list[str], float, dict]:
    """Each image through detection and greedy decoding as the app reads it.

    Returns:
        (our texts, english_g2 CTC texts of the same lines, ms per image for ours
        (detection + reading; the CTC reading not included), how many lines took each
        path).
    """
    from core.events import Finished
    from core.options import DecodingOptions

    options = DecodingOptions(strategy="greedy", capture_attention=False, top_k_report=1)
    ours, ctc, paths = [], [], {}
    spent = 0.0
    for img, _ in samples:
        img = img.convert("RGB")
        t0 = time.perf_counter()
        lines = craft_only_lines(model, img) if craft_only else model.detect(img)
        text = ""
        if lines:
            fin = [e for e in model.decode(img, options, lines=lines) if isinstance(e, Finished)][-1]
            text = " ".join(fin.text.split("\n"))
        spent += time.perf_counter() - t0
        ours.append(text)
        ctc.append(" ".join(t for t in (model.ctc_reading(img, ln).strip() for ln in lines) if t))
        for ln in lines:
            paths[ln.path] = paths.get(ln.path, 0) + 1
    return ours, ctc, spent / len(samples) * 1000, paths


def craft_only_lines(model, img):
    """The detection before issue 9: CRAFT on the image as it is, its boxes widened by
    LINE_PAD_X and cut by split_long_box; nothing else."""
    import numpy as np

    from core.tasks import ocr as ocr_task

    gray = np.asarray(img.convert("L"))
    lines = []
    for b in model._detector.detect(np.asarray(img)):
        pad = int(round(ocr_task.LINE_PAD_X * (b.y1 - b.y0)))
        box = (max(0, b.x0 - pad), b.y0, min(img.width, b.x1 + pad), b.y1)
        for j, piece in enumerate(ocr_task.split_long_box(gray, box)):
            lines.append(model._line(len(lines), piece, j > 0))
    return lines


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
    ap.add_argument("--readers", default="ours,ctc,pipeline,tesseract")
    ap.add_argument("--sets", default="clean,degraded,small")
    ap.add_argument("--stretch-lines", action="store_true",
                    help="contrast-stretch each line crop before reading (OCRModel.stretch_lines)")
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
    model = None
    if "pipeline" in readers:
        from core.tasks import ocr as ocr_task

        model = ocr_task.OCRModel.load()
        model.stretch_lines = args.stretch_lines
    for set_name in args.sets.split(","):
        if set_name == "small":
            samples = small_samples(args.n, held, SEEDS[set_name])
        else:
            aug = {"clean": ocr_data.CLEAN, "degraded": ocr_data.DEGRADED}[set_name]
            samples = ocr_data.make_samples(args.n, held, SEEDS[set_name], aug)
        refs = [t for _, t in samples]
        start = len(rows)

        def add(name, hyps, ms, note=""):
            rows.append((set_name, name, _cer(refs, hyps), sum(h == r for h, r in zip(hyps, refs)) / len(refs), ms,
                         note))

        if "ours" in readers and set_name != "small":  # small lines are no reader input: pipeline only
            hyps, ms = read_ours(samples, args.model_dir)
            add("ours: english_g2 + attention (greedy)", hyps, ms)
        if "ctc" in readers and set_name != "small":
            hyps, ms = read_ctc(samples)
            add("english_g2 CTC (EasyOCR weights)", hyps, ms)
        if model is not None:
            hyps, ctc, ms, paths = read_pipeline(samples, model)
            add("ours, pipeline (detect + read)", hyps, ms, "paths: " + ", ".join(f"{k} {v}" for k, v in paths.items()))
            add("english_g2 CTC, pipeline's lines", ctc, float("nan"))
            hyps, _, ms, paths = read_pipeline(samples, model, craft_only=True)
            add("ours, CRAFT boxes only (before)", hyps, ms,
                f"images with no box: {sum(not h for h in hyps)}")
        if "tesseract" in readers:
            hyps, ms, startup = read_tesseract(samples, args.threads)
            add("Tesseract --psm 7", hyps, ms,
                f"(per-line time includes a process start; a start alone on a blank image: {startup:.0f} ms)")
        for (_, name, cer, exact, ms, note) in rows[start:]:
            print(f"  done {set_name:8s} {name}: CER {cer:.2%}", flush=True)
    print()
    print(f"{'set':9s} {'reader':40s} {'CER':>7s} {'exact':>6s} {'ms/line':>8s}  (pipeline rows: ms per image)")
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
