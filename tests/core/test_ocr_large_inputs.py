"""OCR on inputs far beyond the usual size (issue 19, section 3) and the CLI's ``--region``
with negative numbers (section 7), with the real bundled models.

A huge image with one line of text on white: CRAFT used to run on the whole (downscaled)
image, in 4 tiles of 2560 x 2560 for a 12000 x 12000 PNG (199 s and ~5 GB in the issue;
102 s and 6.3 GB RSS on one core here). Now the ink is found first (numpy, on the loaded
copy) and CRAFT runs only around it; blank parts are never given to CRAFT. The tests count
the detector's calls and the pixels it was given, never the time.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from core.cli import commands as cli
from core.events import Finished
from core.options import DecodingOptions
from core.tasks import ocr_tiles
from core.tasks.ocr import OCRModel, load_image
from tests.helpers.ocr_images import PARAGRAPH, font_path, render_paragraph

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LINE = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def model(ocr_bundled) -> OCRModel:
    return ocr_bundled  # loaded once per session


class CountingDetector:
    """Wraps the real CRAFT detector; keeps the shape of every image it is given."""

    def __init__(self, real):
        self.real = real
        self.shapes: list[tuple[int, ...]] = []
        self.last_detect_s = 0.0

    def detect(self, image):
        self.shapes.append(image.shape)
        return self.real.detect(image)


@pytest.fixture
def counting(model, monkeypatch):
    det = CountingDetector(model._detector)
    monkeypatch.setattr(model, "_detector", det)
    return det


def huge_line_image(side: int = 6000, size: int = 64, at=(1 / 3, 1 / 2), text: str = LINE) -> Image.Image:
    """``side`` x ``side`` white RGB with one line of ``size`` px DejaVu Sans (the issue's image, smaller)."""
    img = Image.new("RGB", (side, side), "white")
    ImageDraw.Draw(img).text((int(side * at[0]), int(side * at[1])), text, font=ImageFont.truetype(font_path(), size),
                             fill="black")
    return img


def _read(model, img, lines=None):
    fin = list(model.decode(img, DecodingOptions(), lines=lines))[-1]
    assert isinstance(fin, Finished)
    return fin.text


def test_a_huge_image_is_detected_only_where_its_ink_is(model, counting):
    img = load_image(huge_line_image(6000))
    assert img.size == (4096, 4096) and img.info["downscaled_from"] == (6000, 6000)
    steps = model.detect_steps(img)
    progress = []
    while True:
        try:
            progress.append(next(steps))
        except StopIteration as stop:
            lines = stop.value
            break
    # CRAFT ran once, on a crop around the line: under 2% of the image's pixels (it was
    # given the whole 4096 x 4096 image before, which it shrinks to 2560 x 2560)
    assert len(counting.shapes) == 1, counting.shapes
    h, w = counting.shapes[0][:2]
    assert h * w < 0.02 * 4096 * 4096, counting.shapes
    assert any("blank" in p.text for p in progress), [p.text for p in progress]
    assert len(lines) == 1
    assert _read(model, img, lines) == LINE


def test_blank_parts_of_a_tiled_image_are_skipped(model, counting):
    """Two lines far apart in a very tall image (CRAFT's canvas would shrink the text
    below what it finds, so the image is detected in tiles): only the two inked parts are
    detected, and both lines are read."""
    img = Image.new("RGB", (1000, 16000), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(font_path(), 40)
    d.text((100, 1000), PARAGRAPH[0], font=font, fill="black")
    d.text((100, 14000), PARAGRAPH[1], font=font, fill="black")
    img = load_image(img)
    assert img.size == (1000, 16000)  # a tall image keeps its resolution
    lines = model.detect(img)
    assert len(counting.shapes) == 2, counting.shapes
    assert sum(s[0] * s[1] for s in counting.shapes) < 0.05 * 1000 * 16000
    assert _read(model, img, lines).split("\n") == [PARAGRAPH[0], PARAGRAPH[1]]


BLOCK = ("The quick brown fox jumps over the lazy dog", "Pack my box with five dozen liquor jugs",
         "We sold 42 apples and 17 pears today")


def test_a_large_inked_part_is_detected_in_bounded_tiles(model, counting):
    """A block of text wider than ``REGION_TILE`` at its detection scale is given to CRAFT in
    tiles of at most ``REGION_TILE`` px (CRAFT's memory grows with its input: +4.6 GB at
    2560 x 2560), and every line is read."""
    img = Image.new("RGB", (6000, 6000), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(font_path(), 110)
    for i, text in enumerate(BLOCK):
        d.text((800, 2000 + 180 * i), text, font=font, fill="black")
    img = load_image(img)
    lines = model.detect(img)
    assert len(counting.shapes) >= 2, counting.shapes
    assert all(max(s[:2]) <= ocr_tiles.REGION_TILE for s in counting.shapes), counting.shapes
    assert _read(model, img, lines).split("\n") == list(BLOCK)


def test_a_normal_page_is_detected_as_before(model, counting):
    """Images CRAFT reads whole (at most its canvas) keep the old path: one call on the whole image."""
    img, _ = render_paragraph()
    lines = model.detect(img)
    assert len(counting.shapes) == 1 and counting.shapes[0][:2] == (img.height, img.width)
    assert len(lines) == len(PARAGRAPH)


def test_ink_regions_finds_separate_blocks_and_gives_up_on_noise():
    mask = np.zeros((3000, 3000), dtype=bool)
    mask[1000:1020, 500:900] = True  # a line
    mask[1040:1060, 500:800] = True  # the next line of the same paragraph
    mask[2500:2520, 2000:2400] = True  # a line far away
    regions = ocr_tiles.ink_regions(mask, 20.0)
    assert len(regions) == 2
    first, second = regions
    assert first[0] <= 500 and first[1] <= 1000 and first[2] >= 900 and first[3] >= 1060  # the paragraph, whole
    assert second[0] <= 2000 and second[3] >= 2520
    assert (first[2] - first[0]) * (first[3] - first[1]) < 0.05 * mask.size
    assert ocr_tiles.ink_regions(np.zeros((500, 500), dtype=bool), 20.0) == []
    rng = np.random.default_rng(0)
    assert ocr_tiles.ink_regions(rng.random((3000, 3000)) < 0.01, 20.0) is None  # ink everywhere: no regions


def test_the_cli_shows_progress_and_a_size_note(model, monkeypatch, tmp_path, capsys):
    path = tmp_path / "huge.png"
    huge_line_image(6000).save(path)
    monkeypatch.setattr(OCRModel, "load", classmethod(lambda cls, *a, **k: model))
    assert cli.main(["ocr", str(path), "--progress"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == LINE
    assert "6000×6000" in err and "4096×4096" in err  # the note: read downscaled, crop for full size
    assert "detecting text lines" in err and "reading line 1 of 1" in err


def test_region_with_negative_numbers_is_accepted(model, monkeypatch, tmp_path, capsys):
    """``--region -10,-10,50000,50000`` was argparse's "expected one argument"; the region is
    clipped to the image."""
    img, _ = render_paragraph()
    path = tmp_path / "page.png"
    img.save(path)
    monkeypatch.setattr(OCRModel, "load", classmethod(lambda cls, *a, **k: model))
    assert cli.main(["ocr", str(path), "--region", "-10,-10,50000,50000"]) == 0
    out, err = capsys.readouterr()
    assert out.strip().split("\n") == list(PARAGRAPH), err
    assert cli.main(["ocr", str(path), "--region=-10,-10,50000,50000"]) == 0
    assert capsys.readouterr().out.strip().split("\n") == list(PARAGRAPH)
