"""Test images for OCR, rendered with Pillow from installed fonts (DejaVu / Liberation,
Debian packages fonts-dejavu-core and fonts-liberation): paragraphs, a screenshot, small
low-contrast lines, very wide lines, and a huge PNG written row by row.

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


SERIF_CANDIDATES = (
    "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
)


def font_path() -> str:
    """An installed sans-serif TrueType font; AssertionError naming the packages if none."""
    for p in FONT_CANDIDATES:
        if Path(p).is_file():
            return p
    raise AssertionError("no test font found: apt-get install fonts-dejavu-core fonts-liberation")


def serif_font_path() -> str:
    """An installed serif TrueType font; AssertionError naming the packages if none."""
    for p in SERIF_CANDIDATES:
        if Path(p).is_file():
            return p
    raise AssertionError("no serif test font found: apt-get install fonts-liberation fonts-dejavu-extra")


def render_paragraph(lines=PARAGRAPH, size: int = 40, margin: int = 40, spacing: float = 2.1,
                     width: int = 900, fg=(0, 0, 0), bg=(255, 255, 255)) -> tuple[Image.Image, list[tuple[int, int, int, int]]]:
    """Text in colour ``fg`` on ``bg`` (default black on white), one line per entry.

    Returns:
        the RGB image and each line's ink box (x0, y0, x1, y1) in pixels, from Pillow.
    """
    font = ImageFont.truetype(font_path(), size)
    height = int(2 * margin + spacing * size * len(lines))
    img = Image.new("RGB", (width, height), bg)
    draw = ImageDraw.Draw(img)
    boxes = []
    for i, text in enumerate(lines):
        xy = (margin, margin + int(i * spacing * size))
        draw.text(xy, text, font=font, fill=fg)
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


def render_small_line(text: str, height: int = 22, fg: int = 90, bg: int = 170, *, font: str | None = None,
                      blur: float = 0.5, jpeg_quality: int | None = 75,
                      margin: tuple[int, int] | None = None) -> Image.Image:
    """One line of small low-contrast text, as cropped from a screenshot or a scanned form.

    Args:
        text: the line.
        height: the font's line height (ascent + descent) in pixels; the font size is
            chosen to give it (Pillow's metrics).
        fg, bg: grey levels (0..255) of the text and the background.
        font: a TrueType file (default :func:`font_path`).
        blur: Gaussian blur radius in pixels (0: none).
        jpeg_quality: JPEG round trip at this quality (None: none).
        margin: (left/right, top/bottom) in pixels around the text's line box
            (default (height // 2, height // 4)).

    Returns:
        an RGB image ``text width + 2 * margin[0]`` x ``height + 2 * margin[1]`` pixels.
    """
    import io

    from PIL import ImageFilter

    path = font or font_path()
    ref = ImageFont.truetype(path, 100)
    asc, desc = ref.getmetrics()
    f = ImageFont.truetype(path, max(4, round(100 * height / (asc + desc))))
    asc, desc = f.getmetrics()
    mx, my = margin if margin is not None else (height // 2, height // 4)
    x0, _y0, x1, _y1 = f.getbbox(text)
    img = Image.new("L", (x1 - min(x0, 0) + 2 * mx, asc + desc + 2 * my), bg)
    ImageDraw.Draw(img).text((mx - min(x0, 0), my), text, font=f, fill=fg)
    if blur > 0:
        img = img.filter(ImageFilter.GaussianBlur(blur))
    if jpeg_quality is not None:
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=int(jpeg_quality))
        img = Image.open(io.BytesIO(buf.getvalue()))
        img.load()
    return img.convert("RGB")


#: words :func:`render_wide_lines` spreads along its lines
WIDE_WORDS = ("north", "river", "copper", "lantern", "seven", "garden", "pilot", "marble", "violet", "harbor",
              "silent", "orbit", "canvas", "timber", "falcon", "meadow", "signal", "pepper", "quartz", "summit")


def render_wide_lines(width: int = 20000, n_lines: int = 1, size: int = 100, words_per_line: int = 10,
                      words=WIDE_WORDS) -> tuple[Image.Image, list[str], list[list[tuple[int, int, int, int]]]]:
    """A very wide RGB image: ``n_lines`` lines of black text on white, each with
    ``words_per_line`` words spread evenly over the width (wide gaps between them).

    Returns:
        the image (``width`` x ``int((n_lines + 0.6) * 1.6 * size)`` pixels), each line's
        text (its words joined with a space) and each word's ink box (x0, y0, x1, y1).
    """
    font = ImageFont.truetype(font_path(), size)
    pitch = int(1.6 * size)
    img = Image.new("RGB", (width, int((n_lines + 0.6) * pitch)), "white")
    d = ImageDraw.Draw(img)
    texts, boxes = [], []
    step = width / words_per_line
    for i in range(n_lines):
        line = [words[(i * words_per_line + k) % len(words)] for k in range(words_per_line)]
        y = int(0.4 * pitch) + i * pitch
        row = []
        for k, word in enumerate(line):
            xy = (int(k * step + 0.2 * step), y)
            d.text(xy, word, font=font, fill="black")
            row.append(tuple(int(v) for v in d.textbbox(xy, word, font=font)))
        texts.append(" ".join(line))
        boxes.append(row)
    return img, texts, boxes
