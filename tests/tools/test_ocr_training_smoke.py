"""Smoke runs of the OCR training scripts (tools/train_ocr.py on the CPU,
tools/train_ocr_gpu.py with --device cpu): a few steps each, so that a change to the
model, the data renderer or the shared helpers cannot break them unnoticed. They are
run by hand for real (tools/README.md); CI never trains.

Fonts: a manifest (ocr_data's OCR_FONTS_MANIFEST) with DejaVu Sans as the training face
and DejaVu Serif standing in for a held-out family (the held-out packages are not
installed by .ci/run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.backends.ocr_checkpoint import load_pretrained
from tests.helpers.ocr_images import font_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    sans = Path(font_path())
    serif = sans.with_name("DejaVuSerif.ttf")
    if not serif.is_file():
        serif = sans  # Liberation-only machines: one file, two roles
    manifest = tmp_path_factory.mktemp("fonts") / "fonts.json"
    manifest.write_text(json.dumps([
        {"path": str(sans), "family": "Training Sans", "style": "Book", "has_euro": True},
        {"path": str(serif), "family": "Open Sans", "style": "Book", "has_euro": True},  # held out
    ]))  # fmt: skip
    return {**os.environ, "OCR_FONTS_MANIFEST": str(manifest), "OCR_FONT_ROOT": "/", "PYTHONPATH": str(ROOT),
            "OMP_NUM_THREADS": "1"}


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _check_best(out: Path, steps_logged: int) -> None:
    model, vocab = load_pretrained(out / "best")  # loads as the app would
    assert model.cfg.vocab_size == len(vocab)
    rows = [json.loads(x) for x in (out / "eval.jsonl").read_text().splitlines()]
    assert rows and all("clean_ctc_cer" in r for r in rows)
    assert f"step {steps_logged}" in (out / "train.log").read_text()


def test_train_ocr_gpu_script_runs_on_cpu(tmp_path, env):
    out = tmp_path / "gpu"
    r = _run(["tools/train_ocr_gpu.py", "--init", "assets/ocr", "--out", str(out), "--device", "cpu", "--steps", "2",
              "--workers", "0", "--batch", "4", "--eval-lines", "4", "--log-every", "1"], env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    _check_best(out, 2)
    assert "done: 2 steps" in r.stdout


def test_train_ocr_cpu_script_runs_and_resumes(tmp_path, env):
    out = tmp_path / "cpu"
    base = ["tools/train_ocr.py", "--out", str(out), "--batch", "4", "--eval-lines", "4", "--log-every", "1",
            "--threads", "1", "--workers", "1"]
    r = _run([*base, "--steps", "2"], env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    _check_best(out, 2)
    assert (out / "last.pt").is_file()
    r = _run([*base, "--steps", "3", "--resume"], env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "resumed from" in r.stdout and "done: step 3" in r.stdout
