"""Where the text lines of an image are, and how a line's encoder columns map back to it.

:func:`find_lines` is the detection pipeline (CRAFT boxes, ink the boxes missed, one-line
images read whole, long lines cut at word gaps (:func:`split_long_box`);
``core.tasks.ocr_layout`` holds the pixel rules it uses). A line reader (``core.tasks.ocr_readers``) turns each box into a
:class:`TextLine` with its own column geometry, so the cross-attention over a line can be
drawn over the image (:meth:`TextLine.column_x`).

Numpy and Pillow only (CRAFT is imported when it runs): importing this never loads torch.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Generator

import numpy as np
from PIL import Image

from core.tasks import ocr_layout as layout
from core.tasks import ocr_tiles as tiles

#: :attr:`TextLine.path` values
PATH_DETECTED = "detected"
PATH_DETECTED_INK = "detected + ink"
PATH_WHOLE = "whole image"
PATH_REGION = "region"
PATH_INK = "uncovered ink"

#: a found line: its box (x0, y0, x1, y1), :attr:`TextLine.path`, and whether it continues
#: the previous line (:attr:`TextLine.continues_previous`)
Found = tuple[tuple[int, int, int, int], str, bool]


class OCRCancelled(RuntimeError):
    """Detection stopped because ``cancel()`` returned True (between tiles)."""


@dataclass(frozen=True)
class OCRProgress:
    """Where a detection stands (yielded by :meth:`OCRModel.detect_steps`).

    Attributes:
        stage: "detect".
        done: tiles detected so far (0 .. total).
        total: tiles of this detection (1 unless the image is detected in tiles).
        text: a short status line, e.g. "detecting text lines (tile 2 of 8)".
    """

    stage: str
    done: int
    total: int
    text: str


@dataclass(frozen=True)
class TextLine:
    """One detected text line and how its encoder columns map back to the image.

    Attributes:
        index: reading order, 0-based.
        box: x0, y0, x1, y1 in pixels of the image returned by :func:`load_image`
            (x1, y1 exclusive).
        n_columns: encoder positions of this line (= the cross-attention's source_len).
        input_width: width in model-input pixels the line crop is resized to (bundled:
            ceil(64 * w / h); TrOCR: the processor's width).
        column_px: width of one column in model-input pixels (bundled 4, ViT patch size).
        column_start_px: x of column 0's left edge in model-input pixels (bundled 2).
        grid_columns: 0 for a single row of columns (bundled); for ViT, patches per row
            (positions run row by row over the patch grid).
        prefix_columns: leading encoder positions tied to no place (ViT's CLS and
            distillation tokens); they map to the whole box.
        continues_previous: True when this box is the right-hand part of a long line
            that :func:`split_long_box` cut at a word gap (its text joins the previous
            line's with a space, not a line break).
        path: how the line was found: :data:`PATH_DETECTED` (a CRAFT box),
            :data:`PATH_DETECTED_INK` (a CRAFT box widened over ink beside it that CRAFT
            missed), :data:`PATH_WHOLE` (the image is one line, read whole),
            :data:`PATH_REGION` (the selected region is one line, read whole) or
            :data:`PATH_INK` (ink no CRAFT box covered).
    """

    index: int
    box: tuple[int, int, int, int]
    n_columns: int
    input_width: float = 0.0
    column_px: float = 4.0
    column_start_px: float = 2.0
    grid_columns: int = 0
    prefix_columns: int = 0
    continues_previous: bool = False
    path: str = "detected"

    def column_x(self, col: int) -> tuple[float, float]:
        """x range (x0, x1) in image pixels covered by encoder column ``col`` of this line,
        clipped to the box.

        Raises:
            IndexError: if ``col`` is not in ``0 .. n_columns - 1``.
        """
        if not 0 <= col < self.n_columns:
            raise IndexError(f"column {col} is outside 0..{self.n_columns - 1}")
        x0, _, x1, _ = self.box
        if col < self.prefix_columns or self.input_width <= 0:
            return float(x0), float(x1)
        k = col - self.prefix_columns
        if self.grid_columns:
            k %= self.grid_columns
        scale = (x1 - x0) / self.input_width
        a = self.column_start_px + k * self.column_px
        b = a + self.column_px
        return (min(float(x1), x0 + a * scale), min(float(x1), x0 + b * scale))

    def column_edges(self) -> np.ndarray:
        """float64 (n_columns, 2): :meth:`column_x` of every column."""
        return np.array([self.column_x(c) for c in range(self.n_columns)], dtype=np.float64).reshape(-1, 2)


def find_lines(img: Image.Image, detector, *, region: bool = False,
               cancel: Callable[[], bool] | None = None) -> Generator[OCRProgress, None, tuple[list[Found], float]]:
    """The text lines of ``img`` in reading order, yielding progress; use as
    ``found, detect_s = yield from find_lines(...)``.

    1. An image that looks like one line of text, short and wide
       (``ocr_layout.one_line_box``), is one line: its ink with margins
       (:data:`PATH_WHOLE`, or :data:`PATH_REGION` when ``region``); CRAFT is not run.
       Parts of the line apart by blank stretches wider than ``ocr_layout.WIDE_GAP``
       line heights are read one by one and joined with a space (``continues_previous``).
    2. Otherwise CRAFT (``detector``, a ``core.backends.craft.CraftDetector``) reads a
       contrast-stretched grayscale copy, upscaled so the text is
       ``ocr_tiles.DETECT_TEXT_PX`` tall (at most 4x); an image too large for CRAFT's
       canvas at that scale (a very wide or tall one) is detected in overlapping tiles
       (``ocr_tiles.detection_plan`` and ``tile_spans``), one :class:`OCRProgress` per
       tile, ``cancel`` polled between tiles. An image CRAFT would shrink or tile is first
       searched for ink (``ocr_tiles.ink_regions``, numpy only): CRAFT then runs only on
       the inked parts, with a margin, each planned as an image of its own, and tiles
       without ink are skipped (a 12000 x 12000 PNG with one line: one small crop instead
       of 4 tiles of 2560 x 2560). When the parts would hold over half the image (a full
       page), the whole image is detected as before.
    3. When the CRAFT boxes cover less than ``ocr_layout.MIN_COVERAGE`` of the ink, the
       text-like ink left over (``ocr_layout.uncovered_ink_boxes``) joins the CRAFT line
       beside it (:data:`PATH_DETECTED_INK`) or becomes a line of its own (:data:`PATH_INK`).
    4. CRAFT lines are widened by ``LINE_PAD_X`` x their height on each side; a line
       wider than ``MAX_LINE_ASPECT`` x its height is cut at word gaps
       (``split_long_box``; the later parts continue the previous line).

    Args:
        img: an RGB image (or the region's crop).
        detector: has ``detect(gray uint8 (h, w)) -> list[DetectedBox]``.
        region: ``img`` is a region the user selected (path :data:`PATH_REGION`).
        cancel: polled between tiles.

    Returns:
        (box, path, continues_previous) per line in pixels of ``img`` ([] for a blank
        image), and the seconds CRAFT took (0 when it did not run).

    Raises:
        OCRCancelled: ``cancel()`` returned True between two tiles.
    """
    a = np.asarray(img)
    if int(a.max()) - int(a.min()) < 8:  # one colour: nothing to read
        return [], 0.0
    gray = np.asarray(img.convert("L"))
    mask = layout.ink_mask(gray)
    one = layout.one_line_box(mask, layout.ink_mask(gray, layout.WEAK_INK_LEVEL))
    detect_s = 0.0
    if one is not None:
        path = PATH_REGION if region else PATH_WHOLE
        # (box, path, continues the previous line): parts of the line apart by wide gaps
        found = [(layout.with_margins(part, img.size), path, k > 0)
                 for k, part in enumerate(layout.split_at_wide_gaps(mask, one))]
    else:
        boxes, detect_s = yield from _craft_lines(gray, mask, detector, cancel)
        found = [(box, path, False) for box, path in boxes]
    return [(piece, path, joined or j > 0)
            for box, path, joined in found
            for j, piece in enumerate(split_long_box(gray, box))], detect_s


def _craft_lines(gray: np.ndarray, mask: np.ndarray, detector, cancel: Callable[[], bool] | None
                 ) -> Generator[OCRProgress, None, tuple[list[tuple[tuple[int, int, int, int], str]], float]]:
    """Steps 2-4 of :func:`find_lines` (before the cut of long lines): (box, path) per line
    in reading order, in pixels of ``gray``, and CRAFT's seconds."""
    from core.backends.craft import DetectedBox, reading_order

    h, w = gray.shape
    text_px = layout.text_height(mask)
    scale, tiled = tiles.detection_plan(text_px, (w, h))
    stretched = layout.stretch_contrast(gray)
    regions = None
    if max(w, h) * scale > tiles.CRAFT_CANVAS:  # CRAFT would shrink or tile it: look at the ink first
        regions = tiles.ink_regions(mask, text_px)
    # (region box, its scale, its tiles [(ys, xs)] in pixels of the region at that scale)
    plan: list[tuple[tuple[int, int, int, int], float, list]] = []
    for rx0, ry0, rx1, ry1 in regions if regions is not None else [(0, 0, w, h)]:
        r_scale, r_tiled = (scale, tiled) if regions is None else tiles.detection_plan(text_px, (rx1 - rx0, ry1 - ry0))
        bh, bw = round((ry1 - ry0) * r_scale), round((rx1 - rx0) * r_scale)
        # an inked part is given to CRAFT in tiles of at most REGION_TILE px (memory bound)
        tile = tiles.CRAFT_CANVAS if regions is None else tiles.REGION_TILE
        if r_tiled or max(bh, bw) > tile:
            overlap = int(min(tile // 2, max(256, 3 * (text_px or 0) * r_scale)))
            spans = [(ys, xs) for ys in tiles.tile_spans(bh, tile, overlap)
                     for xs in tiles.tile_spans(bw, tile, overlap)]
            # blank tiles are skipped: no ink in the tile's pixels of the image
            spans = [((ty0, ty1), (tx0, tx1)) for (ty0, ty1), (tx0, tx1) in spans
                     if mask[ry0 + math.floor(ty0 / r_scale):ry0 + math.ceil(ty1 / r_scale),
                             rx0 + math.floor(tx0 / r_scale):rx0 + math.ceil(tx1 / r_scale)].any()]
        else:
            spans = [((0, bh), (0, bw))]
        plan.append(((rx0, ry0, rx1, ry1), r_scale, spans))
    n = sum(len(spans) for _, _, spans in plan)
    label = "detecting text lines" + (" (tile {} of {}" if n > 1 else "")
    if regions is not None:
        share = sum((x1 - x0) * (y1 - y0) for (x0, y0, x1, y1), _, _ in plan) / (w * h)
        label += ("; " if n > 1 else " (") + (f"{len(plan)} inked part{'s' if len(plan) != 1 else ''}, "
                                              f"{'under 1%' if share < 0.01 else format(share, '.0%')} of the image, "
                                              "blank parts skipped")
    label += ")" if n > 1 or regions is not None else ""
    boxes: list[DetectedBox] = []
    t0 = time.perf_counter()
    k = 0
    for (rx0, ry0, rx1, ry1), r_scale, spans in plan:
        big = tiles.resize_gray(stretched[ry0:ry1, rx0:rx1], r_scale)
        for (ty0, ty1), (tx0, tx1) in spans:
            if cancel is not None and cancel():
                raise OCRCancelled("detection cancelled")
            yield OCRProgress("detect", k, n, label.format(k + 1, n))
            k += 1
            for b in detector.detect(big[ty0:ty1, tx0:tx1]):
                boxes.append(DetectedBox(max(0, rx0 + math.floor((b.x0 + tx0) / r_scale)),
                                         max(0, ry0 + math.floor((b.y0 + ty0) / r_scale)),
                                         min(w, rx0 + math.ceil((b.x1 + tx0) / r_scale)),
                                         min(h, ry0 + math.ceil((b.y1 + ty0) / r_scale))))
        del big
    detect_s = time.perf_counter() - t0
    yield OCRProgress("detect", n, n, f"{len(boxes)} text box{'es' if len(boxes) != 1 else ''} found")
    if n > 1 or len(plan) > 1:  # tiles overlap: merge the halves and duplicates of a line
        boxes = reading_order(boxes)

    def pad(b) -> tuple[int, int, int, int]:
        # CRAFT's region score is weak on small marks at a line's ends ("." "," "'"):
        # widen each line by LINE_PAD_X x its height (the reader was trained with margins)
        p = int(round(LINE_PAD_X * (b.y1 - b.y0)))
        return max(0, b.x0 - p), b.y0, min(w, b.x1 + p), b.y1

    padded = [pad(b) for b in boxes]
    if layout.ink_coverage(mask, padded) >= layout.MIN_COVERAGE:
        return [(p, PATH_DETECTED) for p in padded], detect_s
    line_px = float(np.median([b.y1 - b.y0 for b in boxes])) if boxes else None
    ink = [DetectedBox(*b) for b in layout.uncovered_ink_boxes(mask, padded, line_px)]
    if not ink:
        return [(p, PATH_DETECTED) for p in padded], detect_s
    out = []
    for line in reading_order(boxes + ink):
        inside = lambda b: line.x0 <= b.x0 and b.x1 <= line.x1 and line.y0 <= b.y0 and b.y1 <= line.y1  # noqa: E731
        has_craft, has_ink = any(inside(b) for b in boxes), any(inside(b) for b in ink)
        if has_craft:
            out.append((pad(line), PATH_DETECTED_INK if has_ink else PATH_DETECTED))
        else:
            out.append((layout.with_margins((line.x0, line.y0, line.x1, line.y1), (w, h)), PATH_INK))
    return out, detect_s


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
