"""core.tasks.ocr.split_long_box: wide line boxes are cut at word gaps (pure numpy, no model)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from core.tasks.ocr import MAX_LINE_ASPECT, split_long_box
from tests.helpers.ocr_images import font_path

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()


def _line(words=WORDS, size=30, dark_on_light=True):
    """A one-line grayscale image and the x ranges [x0, x1) of each word's ink."""
    font = ImageFont.truetype(font_path(), size)
    text = " ".join(words)
    x0, y0, x1, y1 = font.getbbox(text)
    bg, fg = (255, 0) if dark_on_light else (20, 230)
    img = Image.new("L", (x1 + 40, y1 + 20), bg)
    d = ImageDraw.Draw(img)
    d.text((20, 10), text, font=font, fill=fg)
    spans, x = [], 20.0
    for w in words:
        bx0, _, bx1, _ = d.textbbox((x, 10), w, font=font)
        spans.append((bx0, bx1))
        x += font.getlength(w + " ")
    return np.asarray(img), (0, 0, img.width, img.height), spans


def test_narrow_box_is_kept_whole():
    gray, _, _ = _line(WORDS[:2])
    box = (0, 0, gray.shape[1], gray.shape[0])
    assert split_long_box(gray, box) == [box]


@pytest.mark.parametrize("dark_on_light", [True, False])
def test_wide_box_is_cut_between_words_into_pieces_that_fit(dark_on_light):
    gray, box, spans = _line(WORDS * 2, dark_on_light=dark_on_light)
    h = box[3] - box[1]
    assert box[2] - box[0] > 2 * MAX_LINE_ASPECT * h  # needs at least three pieces
    pieces = split_long_box(gray, box)
    assert len(pieces) >= 3
    # contiguous, covering the box, each within the width limit, same rows
    assert pieces[0][0] == box[0] and pieces[-1][2] == box[2]
    for a, b in zip(pieces, pieces[1:]):
        assert a[2] == b[0]
    for p in pieces:
        assert (p[1], p[3]) == (box[1], box[3])
        assert 0 < p[2] - p[0] <= MAX_LINE_ASPECT * h + 1
    # no cut goes through a word's ink
    for p in pieces[:-1]:
        cut = p[2]
        assert not any(x0 < cut < x1 for x0, x1 in spans), (cut, spans)


def test_text_without_gaps_is_cut_at_the_width_limit():
    h, w = 20, 1000
    gray = np.zeros((h, w), dtype=np.uint8)
    gray[5:15, :] = 255  # one long bar of ink, no gaps
    pieces = split_long_box(gray, (0, 0, w, h), max_aspect=10)
    assert len(pieces) == 5
    assert all(p[2] - p[0] <= 200 for p in pieces)


def test_box_offsets_are_kept():
    gray, (x0, y0, x1, y1), _ = _line()
    big = np.full((gray.shape[0] + 50, gray.shape[1] + 70), 255, dtype=np.uint8)
    big[50:, 70:] = gray
    inner = split_long_box(gray, (x0, y0, x1, y1))
    outer = split_long_box(big, (x0 + 70, y0 + 50, x1 + 70, y1 + 50))
    assert outer == [(a + 70, b + 50, c + 70, d + 50) for a, b, c, d in inner]


def test_bad_arguments():
    gray = np.zeros((10, 10), dtype=np.uint8)
    with pytest.raises(ValueError, match="max_aspect"):
        split_long_box(gray, (0, 0, 10, 10), max_aspect=1)
    with pytest.raises(ValueError, match="empty box"):
        split_long_box(gray, (5, 0, 5, 10))
