"""Test images for OCR, rendered with Pillow from installed fonts (DejaVu / Liberation,
Debian packages fonts-dejavu-core and fonts-liberation), and a huge PNG written row by row.

The ground truth of a rendered image is the text we drew and the ink boxes Pillow
reports for it, never our own reader's output.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
)

#: three short lines of large clear text (words, a number, a price, punctuation)
PARAGRAPH = ("Open the door slowly", "We sold 42 apples today", "Total price: $19.99")


def font_path() -> str:
    """An installed sans-serif TrueType font; AssertionError naming the packages if none."""
    for p in FONT_CANDIDATES:
        if Path(p).is_file():
            return p
    raise AssertionError("no test font found: apt-get install fonts-dejavu-core fonts-liberation")


def render_paragraph(lines=PARAGRAPH, size: int = 40, margin: int = 40, spacing: float = 2.1,
                     width: int = 900) -> tuple[Image.Image, list[tuple[int, int, int, int]]]:
    """Black text on white, one line per entry.

    Returns:
        the RGB image and each line's ink box (x0, y0, x1, y1) in pixels, from Pillow.
    """
    font = ImageFont.truetype(font_path(), size)
    height = int(2 * margin + spacing * size * len(lines))
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    boxes = []
    for i, text in enumerate(lines):
        xy = (margin, margin + int(i * spacing * size))
        draw.text(xy, text, font=font, fill="black")
        boxes.append(tuple(int(v) for v in draw.textbbox(xy, text, font=font)))
    return img, boxes


#: render_screenshot's text in reading order: menu bar, then sidebar, then body
SCREENSHOT_MENU = ("File", "Edit", "View", "Insert", "Format", "Tools", "Help")
SCREENSHOT_SIDEBAR = ("Inbox (12)", "Drafts", "Sent items", "Archive", "Spam", "Trash")
SCREENSHOT_BODY = ("Meeting moved to Thursday 3:30 pm", "Invoice #20931 total: $1,249.00",
                   "Please review the attached draft before Friday.")


def render_screenshot() -> tuple[Image.Image, list[str]]:
    """A 1200x800 screenshot-like RGB image: a menu bar (16 px text on grey), a sidebar of
    items and three body lines (20 px) beside it.

    Returns:
        the image and its 16 text lines in reading order (menu items left to right, the
        sidebar top to bottom, then the body).
    """
    shot = Image.new("RGB", (1200, 800), (245, 245, 245))
    d = ImageDraw.Draw(shot)
    small = ImageFont.truetype(font_path(), 16)
    body = ImageFont.truetype(font_path(), 20)
    d.rectangle([0, 0, 1200, 32], fill=(225, 225, 230))
    for i, item in enumerate(SCREENSHOT_MENU):
        d.text((14 + 80 * i, 7), item, font=small, fill="black")
    for i, item in enumerate(SCREENSHOT_SIDEBAR):
        d.text((20, 70 + 40 * i), item, font=small, fill=(30, 30, 30))
    for i, text in enumerate(SCREENSHOT_BODY):
        d.text((260, 80 + 50 * i), text, font=body, fill="black")
    return shot, [*SCREENSHOT_MENU, *SCREENSHOT_SIDEBAR, *SCREENSHOT_BODY]


def write_huge_png(path: Path, side: int = 20000, text: str = "HUGE IMAGE TEXT", scale: int = 8) -> tuple[int, int, int, int]:
    """Write a ``side`` x ``side`` grayscale PNG row by row (never holding the image in
    memory): white, with ``text`` drawn at 1/``scale`` size and blown up ``scale`` x.

    Returns:
        the text's ink box (x0, y0, x1, y1) in the huge image's pixels.
    """
    small_side = side // scale
    font = ImageFont.truetype(font_path(), small_side // 20)
    small = Image.new("L", (small_side, small_side), 255)
    d = ImageDraw.Draw(small)
    d.text((small_side // 10, small_side // 3), text, font=font, fill=0)
    x0, y0, x1, y1 = d.textbbox((small_side // 10, small_side // 3), text, font=font)
    a = np.asarray(small)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    comp = zlib.compressobj(1)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)))  # 8-bit grayscale
        blank = b"\x00" + b"\xff" * side
        data = bytearray()
        for y in range(side):
            row = a[y // scale]
            raw = blank if row.min() == 255 else b"\x00" + np.repeat(row, scale).tobytes()
            data += comp.compress(raw)
            if len(data) > 1 << 20:
                f.write(chunk(b"IDAT", bytes(data)))
                data.clear()
        data += comp.flush()
        f.write(chunk(b"IDAT", bytes(data)))
        f.write(chunk(b"IEND", b""))
    return x0 * scale, y0 * scale, x1 * scale, y1 * scale
