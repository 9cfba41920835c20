"""The OCR what-if mask (``core.tasks.whatif.blank_region``) covers exactly its region: the
pixels on its edges are blanked, the pixels just outside each edge are untouched (issue 19,
section 8: a mask one pixel too wide on any side passed the older test, which looked only
inside the region and at one far pixel)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from core.tasks import whatif

INK = (0, 0, 0)
PAPER = (250, 240, 230)


def _striped(w: int = 40, h: int = 30) -> Image.Image:
    """Paper-coloured border (the background colour), black everywhere inside it: every
    pixel that the mask blanks turns from black to paper, every pixel it leaves stays black."""
    a = np.zeros((h, w, 3), dtype=np.uint8)
    a[0, :] = a[-1, :] = a[:, 0] = a[:, -1] = PAPER
    return Image.fromarray(a)


@pytest.mark.parametrize("region", [(5, 7, 12, 9), (1, 1, 4, 4), (10, 3, 20, 4), (2, 2, 36, 26)])
def test_blank_region_covers_exactly_its_region(region):
    img = _striped()
    x, y, w, h = region
    out = np.asarray(whatif.blank_region(img, region))
    before = np.asarray(img)
    blanked = (out != before).any(axis=2)
    # the edge pixels inside the region (first / last row and column) are blanked ...
    assert (out[y, x:x + w] == PAPER).all() and (out[y + h - 1, x:x + w] == PAPER).all()
    assert (out[y:y + h, x] == PAPER).all() and (out[y:y + h, x + w - 1] == PAPER).all()
    # ... the pixels just outside each edge are not (one row above and below, one column left and right)
    assert (out[y - 1, x - 1:x + w + 1] == before[y - 1, x - 1:x + w + 1]).all(), "mask grows above the region"
    assert (out[y + h, x - 1:x + w + 1] == before[y + h, x - 1:x + w + 1]).all(), "mask grows below the region"
    assert (out[y - 1:y + h + 1, x - 1] == before[y - 1:y + h + 1, x - 1]).all(), "mask grows left of the region"
    assert (out[y - 1:y + h + 1, x + w] == before[y - 1:y + h + 1, x + w]).all(), "mask grows right of the region"
    # and nothing else changed: exactly w x h pixels
    expected = np.zeros(blanked.shape, dtype=bool)
    expected[y:y + h, x:x + w] = (before[y:y + h, x:x + w] != PAPER).any(axis=2)
    assert (blanked == expected).all() and int(blanked.sum()) == w * h


def test_blank_region_clipped_at_the_image_edge_stays_inside():
    img = _striped()
    out = np.asarray(whatif.blank_region(img, (30, 20, 50, 50)))  # runs past the right and bottom edges
    assert (out[20:, 30:] == PAPER).all()
    assert (out[19, :] == np.asarray(img)[19, :]).all() and (out[:, 29] == np.asarray(img)[:, 29]).all()
