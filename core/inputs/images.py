"""Opening images for OCR: any PNG / JPEG / WebP / BMP / TIFF (a path, the file's bytes or
a PIL image) as RGB, huge images downscaled without ever being decoded at full size.

:func:`load_image` applies the EXIF orientation, flattens transparency onto white and
turns 16-bit / float images into 8-bit; JPEGs are decoded at a reduced DCT scale
(``Image.draft``). Very wide or tall images keep their text's resolution
(:func:`target_size`). Every failure is a ``ValueError`` saying what is wrong with the
file. Pillow and numpy only: importing this never loads torch.
"""

from __future__ import annotations

import io
import math
import os
import threading
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

#: formats load_image accepts (Pillow's format names; MPO: a camera's multi-picture JPEG)
SUPPORTED_FORMATS = ("PNG", "JPEG", "WEBP", "BMP", "TIFF", "MPO")
#: the accepted formats as messages name them, and the file names they come with
FORMAT_NAMES = "PNG, JPEG, WebP, BMP or TIFF"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".jpe", ".mpo", ".webp", ".bmp", ".dib", ".tif", ".tiff")
#: images larger than this (bytes of decoded pixels) are refused unless the format can be
#: decoded at a reduced scale (JPEG); 20000 x 20000 RGB (1.2 GB) still loads
MAX_DECODE_BYTES = 1_300_000_000
#: no side may exceed this many pixels even for JPEG
MAX_SIDE_LIMIT = 100_000
#: :func:`target_size`: a downscaled image keeps at least this many pixels on its short side
MIN_SHORT_SIDE = 1024
#: :func:`target_size`: ... unless it would then hold more pixels than this (40 Mpx, 120 MB RGB)
MAX_KEEP_PIXELS = 40_000_000

#: :func:`size_note`: text shorter than this (pixels, in the image as read) is hard to read
#: (the bundled reader's small-text bench, tests/bench/bench_ocr.py, starts at 8-10 px)
MIN_READABLE_TEXT_PX = 10

_PIL_LIMIT_LOCK = threading.Lock()


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
                raise ValueError(f"{path}: no such file; open a {FORMAT_NAMES} image")
            if path.is_dir():
                raise ValueError(f"{path} is a folder; open an image file ({FORMAT_NAMES})")
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
            raise ValueError(_not_an_image(fp, label)) from None
        except (OSError, SyntaxError, ValueError) as e:
            raise ValueError(f"{label} could not be read: it is corrupt or truncated ({e})") from None
        finally:
            Image.MAX_IMAGE_PIXELS = saved
    fmt = img.format or "?"
    if fmt not in SUPPORTED_FORMATS:
        raise ValueError(f"{label} is a {fmt} image; open a {FORMAT_NAMES} image instead")
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


def _not_an_image(fp, label: str) -> str:
    """What to say when Pillow does not know ``fp``'s data: a file whose name is not an image's
    (notes.txt, a .wav, a .pdf) is some other kind of file; one named as an image is corrupt
    or in another format. Either way the message names the formats that open."""
    suffix = Path(fp).suffix.lower() if isinstance(fp, Path) else ""
    if suffix and suffix not in IMAGE_SUFFIXES:
        return f"{label} is not an image (a {suffix} file); open a {FORMAT_NAMES} image"
    return (f"{label} is not an image that can be read: its data is corrupt or in another format; open a "
            f"{FORMAT_NAMES} image (if an image editor opens this one, save it as PNG)")


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



def size_note(image: Image.Image, name: str = "The image") -> str | None:
    """A note for the user when :func:`load_image` downscaled ``image``: the original and
    the read size, the smallest text that stays readable, and what to do; None when the
    image is read at its own size.

    Example: "huge.png is 12000×12000 px, more than the app reads at full size: it is read
    at 4096×4096 (0.34×), so text under about 30 px tall may be too small to read. Crop
    the image around the text to read it at full size."
    """
    original = image.info.get("downscaled_from") if hasattr(image, "info") else None
    if not isinstance(original, (tuple, list)) or len(original) != 2:
        return None
    ow, oh = (int(v) for v in original)
    w, h = image.size
    scale = float(image.info.get("scale", max(w, h) / max(ow, oh)))
    smallest = math.ceil(MIN_READABLE_TEXT_PX / scale)
    return (f"{name} is {ow}×{oh} px, more than the app reads at full size: it is read at {w}×{h} "
            f"({scale:.2f}×), so text under about {smallest} px tall may be too small to read. "
            "Crop the image around the text to read it at full size.")


def as_image(image) -> Image.Image:
    """``image`` as :func:`load_image` returns it: an RGB PIL image of :func:`target_size`
    is used as is, anything else goes through :func:`load_image`."""
    if isinstance(image, Image.Image) and image.mode == "RGB" and target_size(image.size) == image.size:
        return image
    return load_image(image)


def check_region(region, size: tuple[int, int]) -> tuple[int, int, int, int]:
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

