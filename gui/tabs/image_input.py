"""What the OCR tab opens: image files, and images or files pasted or dropped (mime data),
with the banner texts for what cannot be opened (files named by their name, never their
full path, and the formats that can be)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl
from PySide6.QtGui import QImage

from ..widgets.image_view import array_from_qimage, qimage_from_array
from .base import local_files

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")
#: the formats core.inputs.images.load_image accepts (its FORMAT_NAMES; Pillow is not imported here)
FORMATS = "PNG, JPEG, WebP, BMP or TIFF"


def default_loader(source: Any) -> Any:
    """``core.tasks.ocr.load_image`` (a path or a PIL image -> a checked RGB PIL image, huge
    ones downscaled); imported in the worker thread that calls it."""
    from core.tasks.ocr import load_image  # Pillow + our checks

    return load_image(source)


def display_image(image: Any) -> QImage:
    """The pixels of ``image`` (a PIL image) as the QImage the image view shows, in the
    screen's format (RGB32, so turning it into a pixmap is no copy-and-convert on the GUI
    thread). Safe to call in a worker thread (QImage, not QPixmap): a 4096 x 4096 image
    takes ~0.4 s here, which the GUI thread must not spend."""
    import numpy as np

    rgb = np.asarray(image.convert("RGB") if getattr(image, "mode", "RGB") != "RGB" else image, dtype=np.uint8)
    return qimage_from_array(rgb).convertToFormat(QImage.Format.Format_RGB32)


def mime_image_paths(mime) -> list[str]:
    """Local files named by ``mime``: its URL list, or text lines that are paths or ``file://`` URLs."""
    out = local_files(mime)
    if not out and mime.hasText():
        for line in mime.text().splitlines():
            s = line.strip().strip('"')
            if not s:
                continue
            p = QUrl(s).toLocalFile() if s.startswith("file:") else s
            if p and Path(p).is_file():
                out.append(p)
    return out


def mime_content(mime, what: str) -> tuple[str, Any]:
    """What ``mime`` (the clipboard, or dropped data: ``what`` names it in messages) holds:
    ``("file", path)`` for the first local file it names, else ``("image", PIL image)``,
    else ``("error", banner text)``."""
    paths = mime_image_paths(mime)
    if paths:
        return "file", paths[0]
    if mime.hasImage():
        img = mime.imageData()
        if not isinstance(img, QImage):
            img = QImage(img)
        try:
            from PIL import Image

            return "image", Image.fromarray(array_from_qimage(img))
        except ValueError as exc:
            return "error", f"The {what} image could not be read ({exc}). Copy the image again and paste it."
    if mime.hasUrls():
        return "error", f"Only local files can be opened; save the image to disk first and open it ({FORMATS})."
    return "error", (f"The {what} holds no image. Copy an image (e.g. take a screenshot) or an image file "
                     f"({FORMATS}), then paste with Ctrl+V.")


def file_error(path: Path, message: str) -> str:
    """The banner text for image file ``path`` that could not be opened: the loader's
    ``message`` with the file named by its name only, and what to do."""
    return _open_error(path.name, _name_only(message, path))


def _name_only(message: str, path: Path) -> str:
    """``message`` with ``path`` (as the loader spells it: given, expanded or resolved)
    written as the file's name only: banners and status messages name files by name."""
    spellings = {str(path), str(path.expanduser())}
    try:
        spellings.add(str(path.expanduser().resolve()))
    except OSError:
        pass
    for full in sorted(spellings, key=len, reverse=True):
        if full and full != path.name:
            message = message.replace(full, path.name)
    return message


#: how to give the OCR tab an image, after what to open
HOW_TO_OPEN = "Open… (Ctrl+O), drop an image file here, or paste a screenshot (Ctrl+V)."


def _open_error(name: str, message: str) -> str:
    """The banner text for an image that could not be opened: what is wrong, the formats that
    open (the loader's message names them, or this adds them) and how to open one."""
    text = message if name in message else f"Could not open {name}: {message}"
    if FORMATS not in text:  # the loader's message does not name the formats
        return f"{text}\nOpen a {FORMATS} image with text in it: {HOW_TO_OPEN}"
    return f"{text}\nTo open one: {HOW_TO_OPEN}"
