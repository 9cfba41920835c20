"""What CRAFT is given of an image: the scale it is detected at, the tiles it is cut into
when too large for CRAFT's canvas, and the inked regions of a large, mostly blank image
(numpy and Pillow only; no torch, no Qt). The ink itself (mask, bands, text height, one-line
boxes) is found by ``core.tasks.ocr_layout``.

* :func:`detection_plan` / :func:`detection_scale`: CRAFT sees the image upscaled so that the
  text is at least :data:`DETECT_TEXT_PX` tall.
* :func:`needs_tiles` / :func:`tile_spans`: an image too large for CRAFT's canvas
  (:data:`CRAFT_CANVAS`, EasyOCR shrinks larger inputs to fit it) at a scale where its text
  stays readable is cut into overlapping tiles that are detected one by one.
* :func:`ink_regions`: the parts of a large image that hold ink, so CRAFT runs on them only.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

from core.tasks.ocr_layout import Box

#: CRAFT is given text at least this many pixels tall (ink height of a line). Measured on
#: 40 rendered paragraphs of 8-24 px grey, blurred, JPEG'd text (held-out fonts): ink
#: covered by CRAFT boxes 0.735 at the original size, 0.784 / 0.797 / 0.791 when the
#: text was upscaled to 12 / 16 / 20 px; 24 px and more covered less and took longer
DETECT_TEXT_PX = 20
#: largest detection upscale
MAX_UPSCALE = 4.0
#: smaller upscales are not made (they change CRAFT's boxes a little and gain nothing:
#: at 1.33x a 1200x800 screenshot's 16 px menu items "Format" and "Tools" joined)
MIN_UPSCALE = 1.5
#: longest side EasyOCR's CRAFT works at (``Reader.detect(canvas_size=2560)``): larger
#: inputs are shrunk to it before detection
CRAFT_CANVAS = 2560
#: text smaller than this (pixels, after CRAFT's own shrinking) is detected in tiles
MIN_DETECT_TEXT_PX = 12
#: larger text is shrunk to this height before it is detected in tiles (fewer tiles;
#: CRAFT covered the most ink at about 16-24 px, see DETECT_TEXT_PX)
TILE_TEXT_PX = 24
#: :func:`ink_regions`: ink closer than this many text heights is one region (the lines of
#: a paragraph, the words of a line: line spacing is ~1.2-2 heights, word spaces < 1)
REGION_JOIN = 3.0
#: :func:`ink_regions`: blank margin kept around a region's ink, in text heights (CRAFT
#: sees each line with the blank around it, as in the whole image), at least 32 px
REGION_MARGIN = 2.0
#: :func:`ink_regions` gives up (None: detect the whole image) when its regions hold more
#: than this fraction of the image's pixels (a full page: cropping saves nothing) ...
REGION_MAX_FRACTION = 0.5
#: ... or when there are more than this many (ink scattered everywhere: a photo, noise)
MAX_REGIONS = 64
#: :func:`ink_regions` looks for ink on a grid of at most this many cells on the long side
REGION_GRID = 512
#: an inked part (:func:`ink_regions`) larger than this many pixels at its detection scale
#: is given to CRAFT in tiles of this size: CRAFT's peak memory grows with its input's
#: pixels (measured on one core: 2560 x 2560 +4.6 GB, 1280 x 1280 +0.9 GB)
REGION_TILE = 1280


def detection_plan(text_px: float | None, size: tuple[int, int]) -> tuple[float, bool]:
    """(scale, tiled): how CRAFT is run on an image of ``size`` (width, height) whose text
    is ``text_px`` tall (None: unknown).

    The image is upscaled for small text (:func:`detection_scale`). When CRAFT's canvas
    would then shrink the text below :data:`MIN_DETECT_TEXT_PX` (:func:`needs_tiles`),
    the image is detected in tiles, after shrinking large text to
    :data:`TILE_TEXT_PX` (or the whole image to the canvas, if that is less shrinking),
    so that fewer tiles are needed.
    """
    w, h = size
    scale = detection_scale(text_px, size)
    if not needs_tiles(text_px * scale if text_px else None, (round(w * scale), round(h * scale))):
        return scale, False
    if text_px and text_px * scale > TILE_TEXT_PX:
        scale = min(scale, max(TILE_TEXT_PX / text_px, CRAFT_CANVAS / max(size)))
    tiled = needs_tiles(text_px * scale if text_px else None, (round(w * scale), round(h * scale)))
    return scale, tiled


def detection_scale(text_px: float | None, size: tuple[int, int], target: float = DETECT_TEXT_PX,
                    max_factor: float = MAX_UPSCALE, max_pixels: int = 16_000_000) -> float:
    """How much to enlarge an image before CRAFT so its text is ``target`` pixels tall.

    Args:
        text_px: the text's height in pixels (:func:`text_height`); None: unknown.
        size: (width, height) of the image.
        target: text height wanted.
        max_factor: largest factor.
        max_pixels: the enlarged image holds at most this many pixels (CRAFT's time and
            memory grow with them); the factor is lowered to fit, never below 1.

    Returns:
        the factor, >= 1.0 (1.0 for text already large enough or of unknown size, and
        for factors below :data:`MIN_UPSCALE`).
    """
    if not text_px or text_px <= 0:
        return 1.0
    f = min(max_factor, target / text_px)
    if f < MIN_UPSCALE:
        return 1.0
    w, h = size
    if w * h * f * f > max_pixels:
        f = max(1.0, math.sqrt(max_pixels / (w * h)))
    return f


def needs_tiles(text_px: float | None, size: tuple[int, int], canvas: int = CRAFT_CANVAS,
                min_text_px: float = MIN_DETECT_TEXT_PX) -> bool:
    """True when CRAFT, which shrinks an image of ``size`` (width, height) to fit
    ``canvas``, would see text of ``text_px`` pixels at less than ``min_text_px``; such
    an image is detected in tiles (:func:`tile_spans`). Unknown text height: tiles when
    the image is over 3 x wider (or taller) than the other side and exceeds the canvas."""
    long_side = max(size)
    if long_side <= canvas:
        return False
    if not text_px:
        return long_side >= 3 * min(size)
    return text_px * canvas / long_side < min_text_px


def tile_spans(length: int, tile: int = CRAFT_CANVAS, overlap: int = 256) -> list[tuple[int, int]]:
    """Overlapping [start, end) spans that cover ``0 .. length``, each at most ``tile``
    long, neighbours sharing ``overlap`` pixels (so a word cut at one tile's edge is
    whole in the next); [(0, length)] when it fits in one.

    Raises:
        ValueError: if ``length`` < 1 or ``overlap`` is not in 0 .. tile / 2.
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    if not 0 <= overlap <= tile // 2:
        raise ValueError(f"overlap must be in 0..{tile // 2}, got {overlap}")
    if length <= tile:
        return [(0, length)]
    n = math.ceil((length - overlap) / (tile - overlap))
    step = (length - tile) / (n - 1)
    return [(round(i * step), round(i * step) + tile) for i in range(n)]


def ink_regions(mask: np.ndarray, text_px: float | None, join: float = REGION_JOIN,
                margin: float = REGION_MARGIN) -> list[Box] | None:
    """The parts of an image that hold ink, as boxes with a blank margin: what CRAFT needs to
    see of a large, mostly blank image (a line of text on a 12000 x 12000 page).

    The mask is reduced to a grid of at most :data:`REGION_GRID` cells on its long side (a
    cell holds ink when any of its pixels does), then cut by recursive XY-cut (Nagy & Seth
    1984) along blank bands at least ``join`` text heights wide: what is left are blocks of
    ink (a paragraph, a line, a lone word) with no such band inside. Each block is grown by
    ``margin`` text heights (at least 32 px) and clipped to the image; blocks that then
    overlap are joined.

    Args:
        mask: bool (H, W) from :func:`ink_mask`.
        text_px: typical text height in pixels (:func:`text_height`); None: 1% of the
            image's long side.
        join: blank bands narrower than this many text heights do not separate regions.
        margin: blank kept around each region, in text heights.

    Returns:
        [(x0, y0, x1, y1)] (x1, y1 exclusive) top to bottom, then left to right; [] when
        there is no ink; None when the regions would hold more than
        :data:`REGION_MAX_FRACTION` of the pixels or number more than :data:`MAX_REGIONS`
        (read the whole image instead).
    """
    h, w = mask.shape
    unit = float(text_px) if text_px and text_px > 0 else 0.01 * max(h, w)
    b = max(1, math.ceil(max(h, w) / REGION_GRID))  # pixels per grid cell
    gh, gw = math.ceil(h / b), math.ceil(w / b)
    grid = np.zeros((gh, gw), dtype=bool)
    full_h, full_w = (h // b) * b, (w // b) * b
    if full_h and full_w:
        grid[: h // b, : w // b] = mask[:full_h, :full_w].reshape(h // b, b, w // b, b).any(axis=(1, 3))
    if full_h < h:  # the last partial row / column of cells
        grid[-1, :] |= np.pad(mask[full_h:].any(axis=0), (0, gw * b - w)).reshape(gw, b).any(axis=1)
    if full_w < w:
        grid[:, -1] |= np.pad(mask[:, full_w:].any(axis=1), (0, gh * b - h)).reshape(gh, b).any(axis=1)
    if not grid.any():
        return []
    gap = max(1, math.ceil(join * unit / b))  # blank cells that separate two regions
    blocks: list[tuple[int, int, int, int]] = []
    todo = [(0, 0, gw, gh)]
    while todo:
        x0, y0, x1, y1 = todo.pop()
        sub = grid[y0:y1, x0:x1]
        rows, cols = np.flatnonzero(sub.any(axis=1)), np.flatnonzero(sub.any(axis=0))
        if rows.size == 0:
            continue
        x0, x1, y0, y1 = x0 + int(cols[0]), x0 + int(cols[-1]) + 1, y0 + int(rows[0]), y0 + int(rows[-1]) + 1
        parts = _cut_at_gaps(rows - rows[0], gap)
        if len(parts) > 1:
            todo.extend((x0, y0 + a, x1, y0 + e) for a, e in parts)
            continue
        parts = _cut_at_gaps(cols - cols[0], gap)
        if len(parts) > 1:
            todo.extend((x0 + a, y0, x0 + e, y1) for a, e in parts)
            continue
        blocks.append((x0, y0, x1, y1))
        if len(blocks) > 4 * MAX_REGIONS:
            return None
    m = max(32, round(margin * unit))
    boxes = [(max(0, x0 * b - m), max(0, y0 * b - m), min(w, x1 * b + m), min(h, y1 * b + m))
             for x0, y0, x1, y1 in blocks]
    boxes = _join_overlapping(boxes)
    if len(boxes) > MAX_REGIONS or sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in boxes) > REGION_MAX_FRACTION * h * w:
        return None
    return sorted(boxes, key=lambda r: (r[1], r[0]))


def _cut_at_gaps(idx: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """[start, end) runs of the sorted indices ``idx`` (starting at 0) split where
    consecutive indices are more than ``gap`` apart."""
    cuts = np.flatnonzero(np.diff(idx) > gap)
    starts = [0] + [int(idx[c + 1]) for c in cuts]
    ends = [int(idx[c]) + 1 for c in cuts] + [int(idx[-1]) + 1]
    return list(zip(starts, ends))


def _join_overlapping(boxes: list[Box]) -> list[Box]:
    """Boxes that overlap joined into their bounding box, until none overlap."""
    boxes = list(boxes)
    joined = True
    while joined:
        joined = False
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                a, c = boxes[i], boxes[j]
                if a[0] < c[2] and c[0] < a[2] and a[1] < c[3] and c[1] < a[3]:
                    boxes[i] = (min(a[0], c[0]), min(a[1], c[1]), max(a[2], c[2]), max(a[3], c[3]))
                    del boxes[j]
                    joined = True
                    break
            if joined:
                break
    return boxes


def resize_gray(gray: np.ndarray, factor: float) -> np.ndarray:
    """``gray`` (uint8 (H, W)) resized by ``factor`` (bicubic), at least 1 x 1 pixel."""
    if factor == 1.0:
        return gray
    h, w = gray.shape
    size = (max(1, round(w * factor)), max(1, round(h * factor)))
    return np.asarray(Image.fromarray(gray).resize(size, Image.BICUBIC))
