"""End to end: ``decoding-explorer ocr`` on rendered images with the real bundled models.

The expected text is what was drawn with Pillow (tests/helpers/ocr_images.py); the
CER bounds are those of tests/core/test_ocr_task.py (see there for why).
"""

from __future__ import annotations

import json

import jiwer
import pytest
from PIL import Image

from core.cli import main
from tests.helpers.ocr_images import PARAGRAPH, font_path, render_paragraph, render_small_line, serif_font_path

pytestmark = pytest.mark.e2e

ATTN_MAX_CER = 0.05
CTC_MAX_CER = 0.05


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def paragraph_png(tmp_path_factory):
    img, _ = render_paragraph()
    path = tmp_path_factory.mktemp("ocr") / "paragraph.png"
    img.save(path)
    return path


def test_ocr_json_trace(capsys, paragraph_png, reuse_model):
    code, out, err = _run(capsys, ["ocr", str(paragraph_png), "--json", "--attention"])
    assert code == 0, err
    trace = json.loads(out)
    # the same schema as `transcribe`, plus "lines"
    assert {"task", "model", "options", "text", "tokens", "timing", "cancelled", "reason", "lines"} <= set(trace)
    assert trace["task"] == "ocr" and trace["options"]["strategy"] == "greedy"
    assert {"load_s", "encode_s", "decode_s", "tokens_per_s", "rtf", "detect_s"} <= set(trace["timing"])
    assert jiwer.cer("\n".join(PARAGRAPH), trace["text"]) <= ATTN_MAX_CER, trace["text"]
    lines = trace["lines"]
    assert len(lines) == len(PARAGRAPH)
    assert "\n".join(ln["text"] for ln in lines) == trace["text"]
    assert [ln["box"][1] for ln in lines] == sorted(ln["box"][1] for ln in lines)
    for ln, truth in zip(lines, PARAGRAPH):
        assert len(ln["box"]) == 4 and ln["box"][0] < ln["box"][2] and ln["box"][1] < ln["box"][3]
        assert jiwer.cer(truth, ln["ctc_text"]) < CTC_MAX_CER
    tokens = trace["tokens"]
    assert "".join(t["text"] for t in tokens) == trace["text"].replace("\n", "")
    assert sorted({t["segment"] for t in tokens}) == list(range(len(PARAGRAPH)))
    for t in tokens:
        assert {"id", "text", "prob", "raw_prob", "entropy", "topk"} <= set(t)
        assert len(t["cross_attention"]) == lines[t["segment"]]["n_columns"]


@pytest.fixture(scope="module")
def shared_model(ocr_bundled):
    return ocr_bundled  # loaded once per session


@pytest.fixture
def reuse_model(monkeypatch, shared_model):
    """The CLI's OCRModel.load returns one already loaded model (loading takes seconds)."""
    from core.tasks.ocr import OCRModel

    monkeypatch.setattr(OCRModel, "load", classmethod(lambda cls, name="bundled", progress=None: shared_model))


def test_ocr_region_and_beam(capsys, paragraph_png, reuse_model, shared_model):
    from core.tasks.ocr import load_image

    line = shared_model.detect(load_image(paragraph_png))[2]
    x0, y0, x1, y1 = line.box
    region = f"{x0 - 8},{y0 - 8},{x1 - x0 + 16},{y1 - y0 + 16}"
    code, out, err = _run(capsys, ["ocr", str(paragraph_png), "--region", region, "--strategy", "beam",
                                   "--beams", "3"])
    assert code == 0, err
    assert jiwer.cer(PARAGRAPH[2], out.strip()) <= ATTN_MAX_CER, out


def test_ocr_blank_image_says_no_text(capsys, tmp_path, reuse_model):
    path = tmp_path / "blank.png"
    Image.new("RGB", (400, 300), "white").save(path)
    code, out, err = _run(capsys, ["ocr", str(path)])
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "No text found" in err


def test_ocr_bad_files(capsys, tmp_path, paragraph_png):
    data = paragraph_png.read_bytes()
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 3])
    (tmp_path / "junk.jpg").write_bytes(b"\xff\xd8\xff" + bytes(range(256)) * 8)
    cases = {
        "empty.png": "empty (0 bytes)", "cut.png": "truncated or corrupt", "junk.jpg": "corrupt",
        "missing.webp": "no such file",
    }
    for name, message in cases.items():
        code, out, err = _run(capsys, ["ocr", str(tmp_path / name)])
        assert code == 1 and out == "", name
        assert err.startswith("decoding-explorer: error: ") and err.count("\n") == 1, err
        assert message in err and str(tmp_path / name) in err
    code, out, err = _run(capsys, ["ocr", str(paragraph_png), "--region", "1,2,3"])
    assert code == 1 and "--region must be X,Y,W,H" in err


#: small grey lines, about 22 px tall, as cropped from a form (issue 9): text, font, line
#: height, blur, JPEG quality. Read by CRAFT's boxes alone (before issue 9) they came
#: out as "85.00" (CER 1.0) and "Invoice 2041 !& due on 12 Marct" (CER 0.097).
SMALL_LINES = [
    ("Please sign the form below.", serif_font_path, 15, 0.7, 50),
    ("Invoice 2041 is due on 12 March", font_path, 14, 0.8, 40),
]


@pytest.mark.parametrize("text,font,height,blur,quality", SMALL_LINES, ids=["serif", "sans"])
def test_small_grey_line_is_read(capsys, tmp_path, reuse_model, text, font, height, blur, quality):
    img = render_small_line(text, height, fg=90, bg=170, font=font(), blur=blur, jpeg_quality=quality,
                            margin=(5, (22 - height) // 2))
    assert 20 <= img.height <= 24
    path = tmp_path / "small.png"
    img.save(path)
    code, out, err = _run(capsys, ["ocr", str(path), "--json"])
    assert code == 0, err
    trace = json.loads(out)
    assert len(trace["lines"]) == 1
    cer = jiwer.cer(text, trace["text"])
    assert cer <= ATTN_MAX_CER, (cer, trace["text"])
