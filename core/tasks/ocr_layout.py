"""Where the text is, before and besides CRAFT: ink, contrast and line boxes (numpy only;
no torch, no Qt). The scale CRAFT detects at and the tiles it is given are in
``core.tasks.ocr_tiles``.

:class:`core.tasks.ocr.OCRModel` uses these to decide how an image is read:

* :func:`one_line_box`: an image (or a selected region) that holds a single line of
  text, short and wide, is read whole as one line; CRAFT is not run (on small grey text
  it finds no box, or drops the first word).
* :func:`stretch_contrast`: CRAFT sees a contrast-stretched grayscale copy (upscaled by
  ``core.tasks.ocr_tiles.detection_scale``).
* :func:`uncovered_ink_boxes`: text-like ink that no CRAFT box covers becomes a line of
  its own (or widens the CRAFT line beside it).

"Ink" is every pixel far from the background grey (the image's median), darker or
lighter, so dark-on-light and light-on-dark text are treated alike (:func:`ink_mask`).
"""

from __future__ import annotations

import numpy as np

#: line height in pixels the bundled reader reads (``core.backends.ocr_attn.INPUT_HEIGHT``;
#: every line crop is resized to it, so small text is upscaled to it for reading)
READER_LINE_PX = 64
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


def _check_gray(gray: np.ndarray) -> None:
    if not isinstance(gray, np.ndarray) or gray.ndim != 2 or gray.dtype != np.uint8:
        raise ValueError(f"expected a uint8 (H, W) grayscale array, got {getattr(gray, 'dtype', type(gray))} "
                         f"{getattr(gray, 'shape', '')}")
