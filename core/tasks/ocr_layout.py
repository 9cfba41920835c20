"""Where the text is, before and besides CRAFT: ink, contrast, scale and tiles (numpy and
Pillow only; no torch, no Qt).

:class:`core.tasks.ocr.OCRModel` uses these to decide how an image is read:

* :func:`one_line_box`: an image (or a selected region) that holds a single line of
  text, short and wide, is read whole as one line; CRAFT is not run (on small grey text
  it finds no box, or drops the first word).
* :func:`detection_scale` / :func:`stretch_contrast`: CRAFT sees a contrast-stretched
  grayscale copy, upscaled so that the text is at least :data:`DETECT_TEXT_PX` tall.
* :func:`tile_spans`: an image too large for CRAFT's canvas (:data:`CRAFT_CANVAS`,
  EasyOCR shrinks larger inputs to fit it) at a scale where its text stays readable is
  cut into overlapping tiles that are detected one by one.
* :func:`uncovered_ink_boxes`: text-like ink that no CRAFT box covers becomes a line of
  its own (or widens the CRAFT line beside it).

"Ink" is every pixel far from the background grey (the image's median), darker or
lighter, so dark-on-light and light-on-dark text are treated alike (:func:`ink_mask`).
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

#: line height in pixels the bundled reader reads (``core.backends.ocr_attn.INPUT_HEIGHT``;
#: every line crop is resized to it, so small text is upscaled to it for reading)
READER_LINE_PX = 64
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
#: :func:`split_at_wide_gaps`: a blank stretch wider than this many line heights ends a
#: part of a line read without CRAFT (a word space is 0.2-0.5 line heights)
WIDE_GAP = 1.5
#: an image is one line when it holds one band of ink rows and is at most this many
#: times as tall as the band
ONE_LINE_MAX_HEIGHT = 3.5
#: ... and at least this many times as wide as tall
ONE_LINE_MIN_ASPECT = 1.5
#: margins kept around a line's ink when it is read without a CRAFT box, in units of the
#: ink height: (left/right, top/bottom), clipped to the image. The reader was trained
#: with margins of 0.05-0.5 (sides) and 0.02-0.3 (top, bottom) x the font size
#: (tools/ocr_data.py); on 60 small grey lines 0.3 above/below read 8.4% CER, 0.1 14%
INK_MARGIN = (0.5, 0.3)
#: :func:`ink_mask`'s threshold, a fraction of the ink contrast. On 100 small grey lines
#: (tests/bench/bench_ocr.py "small") read whole: CER 9.3% at 0.4, 8.3% at 0.3, 8.1% at
#: 0.2 (blurred strokes' faint edges were cut off); on 60 rendered paragraphs of 2-4
#: tight lines the bands of rows were the lines at 0.3 and above, 59/60 at 0.25
INK_LEVEL = 0.3
#: a line's ink box grows over pixels above this fraction of the contrast next to it
#: (:func:`one_line_box`); 7.7% CER on the same 100 lines
WEAK_INK_LEVEL = 0.15
#: CRAFT boxes covering less than this fraction of the ink leave the rest to
#: :func:`uncovered_ink_boxes`
MIN_COVERAGE = 0.9
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

Box = tuple[int, int, int, int]


def stretch_contrast(gray: np.ndarray, low: float = 1.0, high: float = 99.0) -> np.ndarray:
    """Percentile contrast stretch: grey ``percentile(low)`` becomes 0 and
    ``percentile(high)`` 255, linearly in between (clipped). Polarity is kept (light text
    on dark stays light on dark).

    Args:
        gray: uint8 (H, W) grayscale image.
        low, high: percentiles (0 <= low < high <= 100).

    Returns:
        uint8 (H, W); ``gray`` itself when its percentiles are less than 2 grey levels
        apart (a blank image stays blank).

    Raises:
        ValueError: if ``gray`` is not a 2-D uint8 array or the percentiles are invalid.
    """
    _check_gray(gray)
    if not 0 <= low < high <= 100:
        raise ValueError(f"need 0 <= low < high <= 100, got low={low}, high={high}")
    lo, hi = np.percentile(gray, [low, high])
    if hi - lo < 2:
        return gray
    a = (gray.astype(np.float32) - float(lo)) * (255.0 / float(hi - lo))
    return np.clip(a + 0.5, 0, 255).astype(np.uint8)


def ink_mask(gray: np.ndarray, level: float = INK_LEVEL) -> np.ndarray:
    """Pixels that are ink: farther from the background grey (the median) than ``level``
    x the image's ink contrast (the 99.5th percentile of the distance), and at least 12
    grey levels.

    Args:
        gray: uint8 (H, W).
        level: fraction of the contrast (0 < level < 1).

    Returns:
        bool (H, W); all False on a plain image.
    """
    _check_gray(gray)
    d = np.abs(gray.astype(np.int16) - int(np.median(gray)))
    contrast = float(np.percentile(d, 99.5))
    return d > max(level * contrast, 12.0)


def ink_bands(mask: np.ndarray, min_row_ink: int | None = None) -> list[tuple[int, int]]:
    """Horizontal bands of rows that hold ink, top to bottom.

    A row holds ink when it has at least ``min_row_ink`` ink pixels (default: 2, or
    0.1% of the width if more). Bands closer than 0.25 x the taller one are joined (the
    dot of an "i", accents, an underline), and bands shorter than 0.2 x the tallest and
    with little ink (specks) are dropped.

    Args:
        mask: bool (H, W) from :func:`ink_mask`.
        min_row_ink: ink pixels a row needs.

    Returns:
        [(y0, y1)] with y1 exclusive; [] when there is no ink.
    """
    h, w = mask.shape
    need = max(2, int(0.001 * w)) if min_row_ink is None else int(min_row_ink)
    counts = mask.sum(axis=1)
    rows = counts >= need
    bands: list[list[int]] = []
    start = None
    for y, r in enumerate(rows):
        if r and start is None:
            start = y
        elif not r and start is not None:
            bands.append([start, y])
            start = None
    if start is not None:
        bands.append([start, h])
    if not bands:
        return []
    joined = [bands[0]]
    for b in bands[1:]:
        prev = joined[-1]
        if b[0] - prev[1] < 0.25 * max(b[1] - b[0], prev[1] - prev[0]):
            prev[1] = b[1]
        else:
            joined.append(b)
    tallest = max(b1 - b0 for b0, b1 in joined)
    ink = [int(counts[b0:b1].sum()) for b0, b1 in joined]
    most = max(ink)
    return [(b0, b1) for (b0, b1), n in zip(joined, ink) if b1 - b0 >= 0.2 * tallest or n >= 0.2 * most]


def text_height(mask: np.ndarray) -> float | None:
    """Typical height in pixels of the text's lines: the median height of the ink bands
    (:func:`ink_bands`), or None when there is no ink. Lines side by side share a band,
    so this is the height of one line of a simple layout."""
    bands = ink_bands(mask)
    if not bands:
        return None
    return float(np.median([b1 - b0 for b0, b1 in bands]))


def one_line_box(mask: np.ndarray, weak: np.ndarray | None = None) -> Box | None:
    """The ink box of an image that looks like a single text line, else None.

    One line: a single band of ink rows (:func:`ink_bands`) at least 4 px tall, the
    image at most :data:`ONE_LINE_MAX_HEIGHT` x the band's height and at least
    :data:`ONE_LINE_MIN_ASPECT` x as wide as it is tall, and strokes in the band as text
    has them (:func:`crossings` >= 0.4 over the columns that hold ink; not a rule or a
    bar).

    Args:
        mask: bool (H, W) from :func:`ink_mask`.
        weak: optional bool (H, W), ``ink_mask(gray, WEAK_INK_LEVEL)``: the box grows
            over its ink next to the box (the faint edges of blurred strokes).

    Returns:
        (x0, y0, x1, y1) of the band's ink (x1, y1 exclusive), or None.
    """
    h, w = mask.shape
    bands = ink_bands(mask)
    if len(bands) != 1 or w < ONE_LINE_MIN_ASPECT * h:
        return None
    y0, y1 = bands[0]
    if h > ONE_LINE_MAX_HEIGHT * (y1 - y0) or y1 - y0 < 4:
        return None
    cols = np.flatnonzero(mask[y0:y1].any(axis=0))
    x0, x1 = int(cols[0]), int(cols[-1]) + 1
    if crossings(mask[y0:y1, cols]) < 0.4:  # a rule, a bar or a filled shape (blank columns left out)
        return None
    if weak is not None:
        x0, y0, x1, y1 = _grow(weak, (x0, int(y0), x1, int(y1)))
    return x0, int(y0), x1, int(y1)


def _grow(weak: np.ndarray, box: Box) -> Box:
    """``box`` grown row by row and column by column while the next row / column holds
    ink of ``weak`` (a lower-threshold mask): the faint edges of blurred strokes."""
    x0, y0, x1, y1 = box
    h, w = weak.shape
    while y0 > 0 and weak[y0 - 1, x0:x1].any():
        y0 -= 1
    while y1 < h and weak[y1, x0:x1].any():
        y1 += 1
    while x0 > 0 and weak[y0:y1, x0 - 1].any():
        x0 -= 1
    while x1 < w and weak[y0:y1, x1].any():
        x1 += 1
    return x0, y0, x1, y1


def with_margins(box: Box, size: tuple[int, int], margin: tuple[float, float] = INK_MARGIN) -> Box:
    """``box`` (tight around ink) grown by ``margin`` x its height on each side
    ((left/right, top/bottom)), clipped to an image of ``size`` (width, height)."""
    x0, y0, x1, y1 = box
    h = y1 - y0
    mx, my = round(margin[0] * h), round(margin[1] * h)
    return max(0, x0 - mx), max(0, y0 - my), min(size[0], x1 + mx), min(size[1], y1 + my)


def split_at_wide_gaps(mask: np.ndarray, box: Box, max_gap: float = WIDE_GAP) -> list[Box]:
    """Cut a line's ink box where the line has no ink over more than ``max_gap`` x the
    box's height (far more than a word space: table cells, form fields, words spread
    over a banner), each part trimmed to its own ink columns. The reader writes "_" or
    "~" for long blank stretches, and a part that is mostly blank may be read as noise.

    Args:
        mask: bool (H, W) from :func:`ink_mask`.
        box: (x0, y0, x1, y1) around one line's ink.
        max_gap: widest blank stretch kept inside a part, in box heights.

    Returns:
        the parts left to right (same y0, y1); ``[box]`` when there is no such gap.
    """
    x0, y0, x1, y1 = box
    cols = np.flatnonzero(mask[y0:y1, x0:x1].any(axis=0))
    if cols.size == 0:
        return [box]
    limit = max_gap * (y1 - y0)
    parts, start, prev = [], int(cols[0]), int(cols[0])
    for c in cols[1:]:
        if c - prev - 1 > limit:
            parts.append((x0 + start, y0, x0 + prev + 1, y1))
            start = int(c)
        prev = int(c)
    parts.append((x0 + start, y0, x0 + prev + 1, y1))
    return parts


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


def ink_coverage(mask: np.ndarray, boxes: list[Box]) -> float:
    """Fraction (0..1) of the ink pixels inside at least one of ``boxes``; 1.0 without ink."""
    total = int(mask.sum())
    if total == 0:
        return 1.0
    covered = np.zeros_like(mask)
    for x0, y0, x1, y1 in boxes:
        covered[y0:y1, x0:x1] = True
    return float((mask & covered).sum()) / total


def crossings(mask: np.ndarray) -> float:
    """Strokes crossed per line height of width: ink runs met along the rows at 35%, 50%
    and 65% of the height of ``mask`` (bool (H, W), tight around one line's ink),
    averaged, times height / width. Text crosses about 1.5 to 4 strokes per height of
    width; a bar, a box or a blob of a photo far fewer."""
    h, w = mask.shape
    runs = 0
    for f in (0.35, 0.5, 0.65):
        row = mask[min(h - 1, int(f * h))].astype(np.int8)
        runs += int((np.diff(row) == 1).sum()) + int(row[0])
    return runs / 3.0 * h / max(1, w)


def uncovered_ink_boxes(mask: np.ndarray, boxes: list[Box], line_px: float | None = None) -> list[Box]:
    """Text-like ink that none of ``boxes`` covers, as tight line boxes.

    The ink outside the boxes is cut into bands of rows (:func:`ink_bands`) and, within
    a band, into runs of columns joined across gaps narrower than the band's height
    (the space between words). A run is kept when it looks like text: at least 6 px tall
    and 0.3 x as wide as tall; 0.4 to 2.5 x ``line_px`` tall when that is known (the
    CRAFT lines' median height), else at most half the image's height; ink over 5% to
    85% of its box (not a cloud of specks, not a solid block); and at least 0.4 strokes
    crossed per height of width (:func:`crossings`; not a bar or a filled shape). On 200
    rendered lines of 10-40 px grey, blurred, JPEG'd text the lowest values were 0.59
    crossings and 81% ink.

    Args:
        mask: bool (H, W) from :func:`ink_mask`.
        boxes: (x0, y0, x1, y1) boxes already found (e.g. CRAFT's lines).
        line_px: typical line height, pixels, or None.

    Returns:
        [(x0, y0, x1, y1)] tight around their ink, top to bottom then left to right.
    """
    rest = mask.copy()
    for x0, y0, x1, y1 in boxes:
        rest[y0:y1, x0:x1] = False
    out: list[Box] = []
    for y0, y1 in ink_bands(rest):
        h = y1 - y0
        cols = np.flatnonzero(rest[y0:y1].any(axis=0))
        if cols.size == 0:
            continue
        runs: list[list[int]] = [[int(cols[0]), int(cols[0]) + 1]]
        for c in cols[1:]:
            if c - runs[-1][1] < h:
                runs[-1][1] = int(c) + 1
            else:
                runs.append([int(c), int(c) + 1])
        for x0, x1 in runs:
            sub = rest[y0:y1, x0:x1]
            ys = np.flatnonzero(sub.any(axis=1))
            by0, by1 = y0 + int(ys[0]), y0 + int(ys[-1]) + 1
            bh, bw = by1 - by0, x1 - x0
            tight = sub[ys[0]:ys[-1] + 1]
            fill = float(tight.sum()) / (bh * bw)
            if bh < 6 or bw < 0.3 * bh or not 0.05 <= fill <= 0.85 or crossings(tight) < 0.4:
                continue
            if line_px and not 0.4 * line_px <= bh <= 2.5 * line_px:
                continue
            if not line_px and bh > 0.5 * mask.shape[0]:
                continue
            out.append((x0, by0, x1, by1))
    return out


#: widest line box (width / height) the bundled reader is given in one piece: the
#: decoder was trained on lines of at most 56 characters and stops there (measured: a
#: 92-character line read whole ended after 56); CRAFT boxes hold ~2.8 characters per
#: unit of width / height, so 18 keeps a piece to ~50 characters. Wider boxes are cut
#: at word gaps by :func:`split_long_box`
MAX_LINE_ASPECT = 18.0
#: detected line boxes are widened on both sides by this fraction of their height: CRAFT
#: boxes often end inside a final "." (measured: a DejaVu 22 px line ending in "." at
#: x 924-928 got a box ending at 926, and the full stop was not read). 0.25 made
#: english_g2's own CTC reading (the comparison column) add a "~" on wide margins.
LINE_PAD_X = 0.15


def split_long_box(gray: np.ndarray, box: tuple[int, int, int, int],
                   max_aspect: float = MAX_LINE_ASPECT) -> list[tuple[int, int, int, int]]:
    """Cut a wide line box into pieces of at most ``max_aspect`` x its height, at gaps
    between words.

    Gaps are runs of ink-free columns in the crop's column profile: a pixel is ink when it
    differs from the crop's median grey (the background, dark or light) by more than a
    third of the crop's contrast. The box is cut into the fewest pieces that fit, each
    cut at a gap (at least 0.15 x the box height wide, and at least half as wide as the
    widest gap near the cut, so a word gap rather than a letter gap) nearest the point
    that would make the pieces equal; without a gap near that point the cut falls at the
    largest allowed width.

    Args:
        gray: uint8 (H, W) grayscale image the box lies in.
        box: (x0, y0, x1, y1) in pixels of ``gray`` (x1, y1 exclusive).
        max_aspect: largest width / height of a piece (> 1).

    Returns:
        the pieces (x0, y0, x1, y1), left to right, sharing the box's y0 and y1; ``[box]``
        when it is not wider than ``max_aspect``. Margins are kept: each piece keeps
        half of the gap on either side of a cut.

    Raises:
        ValueError: if ``max_aspect`` <= 1 or the box is empty.
    """
    if max_aspect <= 1:
        raise ValueError(f"max_aspect must be > 1, got {max_aspect}")
    x0, y0, x1, y1 = (int(v) for v in box)
    h, w = y1 - y0, x1 - x0
    if h <= 0 or w <= 0:
        raise ValueError(f"empty box {box}")
    span = max(2, int(max_aspect * h))
    if w <= span:
        return [(x0, y0, x1, y1)]
    crop = gray[y0:y1, x0:x1].astype(np.int16)
    bg = int(np.median(crop))
    contrast = max(int(crop.max()) - int(crop.min()), 1)
    ink = (np.abs(crop - bg) > max(contrast // 3, 8)).any(axis=0)  # (w,) bool
    # gaps: [start, end) runs of ink-free columns
    free = ~ink
    gaps: list[tuple[int, int]] = []
    start = None
    for i, f in enumerate(free):
        if f and start is None:
            start = i
        elif not f and start is not None:
            gaps.append((start, i))
            start = None
    min_gap = max(2, int(0.15 * h))
    gaps = [(a, b) for a, b in gaps if b - a >= min_gap and a > 0 and b < w]  # inner gaps only
    pieces: list[tuple[int, int, int, int]] = []
    left = 0
    while w - left > span:
        # aim for equal pieces: the remaining width over the pieces still needed
        target = left + (w - left) / math.ceil((w - left) / span)
        lo, hi = max(left + span / 4, target - span / 4), min(left + span, target + span / 4)
        inside = [(a, b) for a, b in gaps if lo <= (a + b) / 2 <= hi]
        if inside:  # a clear word gap (at least half the widest here) nearest the target
            widest = max(b - a for a, b in inside)
            a, b = min((g for g in inside if g[1] - g[0] >= widest / 2), key=lambda g: abs((g[0] + g[1]) / 2 - target))
            cut = (a + b) // 2
        else:
            cut = int(min(hi, left + span))
        pieces.append((x0 + left, y0, x0 + cut, y1))
        left = cut
    pieces.append((x0 + left, y0, x1, y1))
    return pieces


def _check_gray(gray: np.ndarray) -> None:
    if not isinstance(gray, np.ndarray) or gray.ndim != 2 or gray.dtype != np.uint8:
        raise ValueError(f"expected a uint8 (H, W) grayscale array, got {getattr(gray, 'dtype', type(gray))} "
                         f"{getattr(gray, 'shape', '')}")
