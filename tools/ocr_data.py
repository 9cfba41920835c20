"""Synthetic text-line images for training the OCR attention decoder.

Lines of 1-4 tokens (words, numbers, prices, dates, times, codes, e-mail/URLs,
punctuation, rare symbols; mixed case; now and then a 5-8 word phrase) are rendered
with Pillow from installed Debian fonts, degraded by random augmentations (rotation,
shear, blur, down-scaling, noise, JPEG, low contrast, light-on-dark) and resized to
EasyOCR's input: grayscale, height 64 px, width ``ceil(64 * w / h)`` (bicubic, as
``easyocr.recognition.AlignCollate``).

Fonts are split by family: :data:`HELDOUT_FAMILIES` are never used for training and
form the evaluation sets. Run ``python tools/ocr_data.py --preview out.png`` to
look at samples.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from core.backends.ocr_attn import ENGLISH_G2_CHARACTERS, INPUT_HEIGHT

#: Families (fontconfig's first family name) kept out of training, used for evaluation.
HELDOUT_FAMILIES = frozenset(
    {"Open Sans", "Open Sans Condensed", "Caladea", "Courier Prime", "Courier Prime Code",
     "Courier Prime Sans", "Cantarell", "Gentium", "GentiumAlt"}
)  # fmt: skip

#: Families that are symbols, decorations, small caps or not Latin text.
EXCLUDED_FAMILIES = frozenset(
    {"DejaVu Math TeX Gyre", "Linux Biolinum Keyboard O", "Linux Libertine Initials O",
     "Standard Symbols PS", "D050000L", "Z003", "Go Smallcaps", "Noto Music"}
)  # fmt: skip

#: Noto families that are Latin (fonts-noto-core installs ~200 script families).
NOTO_LATIN = frozenset(
    {"Noto Sans", "Noto Serif", "Noto Sans Mono", "Noto Mono", "Noto Sans Display", "Noto Serif Display"}
)

#: Styles too faint to read once degraded.
EXCLUDED_STYLE_WORDS = ("Thin", "Hairline", "ExtraLight")

MAX_WIDTH = 1400  # px at height 64 (350 encoder columns)
MAX_CHARS = 56

ASCII_REQUIRED = [c for c in ENGLISH_G2_CHARACTERS if c not in " \u20ac"]


@dataclass(frozen=True)
class FontFile:
    """One font face: file path, family, style and whether it has the euro sign."""

    path: str
    family: str
    style: str
    has_euro: bool


def list_fonts() -> list[FontFile]:
    """Latin text faces installed (``fc-list``) whose character map covers every
    ASCII character of english_g2's alphabet.

    On a machine without these fonts installed (the GPU machine), set
    ``OCR_FONTS_MANIFEST`` to a JSON list written by :func:`write_fonts_manifest` and
    ``OCR_FONT_ROOT`` to the folder their files were unpacked into (the manifest's
    absolute paths are taken relative to it)."""
    manifest = os.environ.get("OCR_FONTS_MANIFEST")
    if manifest:
        root = Path(os.environ.get("OCR_FONT_ROOT", "/"))
        entries = json.loads(Path(manifest).read_text())
        return [FontFile(str(root / e["path"].lstrip("/")), e["family"], e["style"], e["has_euro"]) for e in entries]
    from fontTools.ttLib import TTFont  # training-time dependency only

    out = subprocess.run(
        ["fc-list", "--format", "%{file}\t%{family[0]}\t%{style[0]}\t%{index}\n"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    fonts, seen = [], set()
    for line in sorted(set(out.splitlines())):
        parts = line.split("\t")
        if len(parts) != 4:
            continue
        path, family, style, index = parts
        if index != "0" or path in seen or not path.lower().endswith((".ttf", ".otf")):
            continue
        if family in EXCLUDED_FAMILIES or any(w in style for w in EXCLUDED_STYLE_WORDS):
            continue
        if family.startswith("Noto") and family not in NOTO_LATIN:
            continue
        try:
            cmap = TTFont(path, fontNumber=0, lazy=True).getBestCmap() or {}
        except Exception:  # noqa: BLE001 - unreadable font: skip it
            continue
        if not all(ord(c) in cmap for c in ASCII_REQUIRED):
            continue
        seen.add(path)
        fonts.append(FontFile(path, family, style, 0x20AC in cmap))
    return fonts


def write_fonts_manifest(path: str | Path) -> list[str]:
    """Write :func:`list_fonts`' faces as JSON to ``path``; returns their file paths
    (to pack: ``tar cJf fonts.tar.xz -C / <paths without the leading />``)."""
    fonts = list_fonts()
    Path(path).write_text(json.dumps([f.__dict__ for f in fonts], indent=1) + "\n")
    return [f.path for f in fonts]


def split_fonts(fonts: list[FontFile]) -> tuple[list[FontFile], list[FontFile]]:
    """(training fonts, held-out evaluation fonts) by :data:`HELDOUT_FAMILIES`."""
    train = [f for f in fonts if f.family not in HELDOUT_FAMILIES]
    held = [f for f in fonts if f.family in HELDOUT_FAMILIES]
    return train, held


@lru_cache(maxsize=512)
def _font(path: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(path, size)


# --------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _words() -> tuple[str, ...]:
    path = Path(os.environ.get("OCR_WORDS", "/usr/share/dict/words"))
    if path.is_file():
        words = [w for w in path.read_text(errors="ignore").split() if w.isascii() and "'" not in w and 1 <= len(w) <= 14]
        if words:
            return tuple(words)
    # fallback so the module works without wamerican
    return tuple("the of and to in is you that it he was for on are as with his they at be this from "
                 "have or by one had not word but what all were we when your can said there use an "
                 "each which she do how their if will up other about out many then them these so "
                 "some her would make like him into time has look two more write go see number no "
                 "way could people my than first water been call who oil its now find long down day "
                 "did get come made may part menu file edit view help total price order invoice".split())


MONTHS = "January February March April May June July August September October November December".split()
SYMBOLS = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
TLDS = ["com", "org", "net", "io", "de", "co.uk", "edu"]


def _case(w: str, rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return w.lower()
    if r < 0.78:
        return w[:1].upper() + w[1:].lower()
    if r < 0.95:
        return w.upper()
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in w)


def _number(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.3:
        return str(rng.randint(0, 999))
    if r < 0.5:
        return str(rng.randint(1000, 99_999_999))
    if r < 0.65:
        return f"{rng.randint(1000, 9_999_999):,}"
    if r < 0.85:
        return f"{rng.uniform(0, 1000):.{rng.randint(1, 3)}f}"
    if r < 0.93:
        return f"{rng.choice(['-', '+', ''])}{rng.uniform(0, 100):.1f}%"
    return f"{rng.randint(1, 99)}/{rng.randint(1, 99)}"


def _price(rng: random.Random, euro: bool) -> str:
    v = rng.choice([rng.randint(1, 99), rng.randint(100, 9999), round(rng.uniform(0, 500), 2)])
    amount = f"{v:,.2f}" if isinstance(v, float) or rng.random() < 0.5 else f"{v:,}"
    r = rng.random()
    if euro and r < 0.3:
        return rng.choice([f"\u20ac{amount}", f"{amount} \u20ac", f"{amount.replace('.', ',')}\u20ac"])
    if r < 0.8:
        return f"${amount}"
    return f"{amount} {rng.choice(['USD', 'EUR', 'GBP', 'CHF'])}"


def _date(rng: random.Random) -> str:
    y, m, d = rng.randint(1950, 2035), rng.randint(1, 12), rng.randint(1, 28)
    r = rng.random()
    if r < 0.2:
        return f"{y}-{m:02d}-{d:02d}"
    if r < 0.4:
        return f"{d:02d}/{m:02d}/{y}"
    if r < 0.55:
        return f"{m}.{d}.{y % 100:02d}"
    if r < 0.75:
        return f"{MONTHS[m - 1][:3]} {d}, {y}"
    if r < 0.9:
        return f"{d} {MONTHS[m - 1]} {y}"
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}" + rng.choice(["", " am", " pm", ":00"])


def _code(rng: random.Random) -> str:
    alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    r = rng.random()
    if r < 0.3:
        return "".join(rng.choice(alnum) for _ in range(rng.randint(2, 4))) + "-" + "".join(
            rng.choice(alnum) for _ in range(rng.randint(2, 5)))
    if r < 0.5:
        return f"#{rng.randint(1, 99999)}"
    if r < 0.75:
        user = rng.choice(_words()).lower().replace("'", "")
        host = rng.choice(_words()).lower().replace("'", "")
        return f"{user}@{host}.{rng.choice(TLDS)}"
    if r < 0.9:
        return f"www.{rng.choice(_words()).lower().replace(chr(39), '')}.{rng.choice(TLDS)}" + rng.choice(
            ["", "/", f"/{rng.choice(_words()).lower()}"])
    return f"+{rng.randint(1, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"


def _symbols(rng: random.Random) -> str:
    pool = SYMBOLS + "abcxyzXYZ0123456789"
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 6)))


def _punctuate(w: str, rng: random.Random) -> str:
    r = rng.random()
    if r < 0.12:
        return w + rng.choice(",.;:!?")
    if r < 0.18:
        o, c = rng.choice(["()", "[]", '""', "''", "{}", "<>", "**", "__"])
        return o + w + c
    if r < 0.21:
        return w + rng.choice(["...", "!!", "?!", ")", "'s"])
    if r < 0.23:
        return rng.choice(["-", "~", "/", "|", "\\", "^", "`", "&", "+", "="]) + w
    return w


def random_text(rng: random.Random, euro: bool = True) -> str:
    """One line of 1-4 tokens (10%: a 5-8 word phrase), at most :data:`MAX_CHARS`
    characters, all in english_g2's alphabet. ``euro``: may contain '\u20ac'."""
    words = _words()
    n = rng.randint(5, 8) if rng.random() < 0.1 else rng.choice([1, 1, 2, 2, 2, 3, 3, 4])
    toks = []
    for _ in range(n):
        r = rng.random()
        if r < 0.55:
            t = _case(rng.choice(words), rng)
        elif r < 0.68:
            t = _number(rng)
        elif r < 0.76:
            t = _price(rng, euro)
        elif r < 0.84:
            t = _date(rng)
        elif r < 0.93:
            t = _code(rng)
        else:
            t = _symbols(rng)
        toks.append(_punctuate(t, rng))
    text = " ".join(toks)
    text = "".join(c for c in text if c in ENGLISH_G2_CHARACTERS and (euro or c != "\u20ac"))
    text = " ".join(text.split())[:MAX_CHARS].strip()
    return text or rng.choice("0123456789ABCxyz")


# --------------------------------------------------------------------------------------
# Rendering and augmentation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Degradation:
    """Probabilities/ranges of the augmentations ("clean" = only layout jitter)."""

    p_rotate: float = 0.5
    max_degrees: float = 2.5
    p_shear: float = 0.3
    p_blur: float = 0.35
    max_blur: float = 0.8  # Gaussian sigma in px per 30 px of font size
    p_downscale: float = 0.4
    min_height: int = 12  # px of the line when down-scaled
    max_height: int = 26
    p_noise: float = 0.4
    p_jpeg: float = 0.35
    p_low_contrast: float = 0.3
    p_invert: float = 0.2


TRAIN_AUG = Degradation()
#: Training lines with several degradations at once (scanned/photographed/compressed
#: small text); drawn with probability :data:`P_HEAVY` (see :func:`train_degradation`).
TRAIN_HEAVY = Degradation(p_rotate=0.4, p_shear=0.2, p_blur=0.8, p_downscale=1.0, min_height=12, max_height=28,
                          p_noise=0.9, p_jpeg=0.9, p_low_contrast=0.2, p_invert=0.1)
P_HEAVY = 0.35


def train_degradation(rng: random.Random) -> Degradation:
    """The augmentation of one training line: :data:`TRAIN_HEAVY` with probability
    :data:`P_HEAVY`, else :data:`TRAIN_AUG` (each augmentation independently). Session 1
    trained with TRAIN_AUG only, where all four of blur, down-scaling, noise and JPEG
    together come up in ~2% of lines."""
    return TRAIN_HEAVY if rng.random() < P_HEAVY else TRAIN_AUG
CLEAN = Degradation(p_rotate=0.0, p_shear=0.0, p_blur=0.0, p_downscale=0.0, p_noise=0.0, p_jpeg=0.0,
                    p_low_contrast=0.0, p_invert=0.0)
#: Evaluation "degraded": every line down-scaled, blurred, noisy and JPEG'd.
DEGRADED = Degradation(p_rotate=0.3, max_degrees=1.5, p_shear=0.0, p_blur=1.0, max_blur=0.6, p_downscale=1.0,
                       min_height=16, max_height=24, p_noise=1.0, p_jpeg=1.0, p_low_contrast=0.0, p_invert=0.0)


def render_line(text: str, font: FontFile, rng: random.Random, aug: Degradation) -> Image.Image:
    """Render ``text`` with ``font`` and apply ``aug``.

    Returns:
        grayscale ("L") image of height 64 px, width ``ceil(64 * w / h)`` (at most
        :data:`MAX_WIDTH`; a longer line is squeezed horizontally).
    """
    size = rng.randint(22, 56)
    f = _font(font.path, size)
    x0, y0, x1, y1 = f.getbbox(text)
    asc, desc = f.getmetrics()
    # canvas: the text box plus margins like a detector's crop (CRAFT boxes are loose)
    ml, mr = (int(size * rng.uniform(0.05, 0.5)) for _ in range(2))
    mt, mb = (int(size * rng.uniform(0.02, 0.3)) for _ in range(2))
    top, bottom = min(y0, 0), max(y1, asc + desc)
    w, h = (x1 - min(x0, 0)) + ml + mr, (bottom - top) + mt + mb
    invert = rng.random() < aug.p_invert
    lo_contrast = rng.random() < aug.p_low_contrast
    bg = rng.randint(200, 255)
    fg = rng.randint(0, 60)
    if lo_contrast:
        bg, fg = rng.randint(150, 230), rng.randint(60, 120)
    if invert:
        bg, fg = 255 - bg, 255 - fg
    img = Image.new("L", (w, h), bg)
    ImageDraw.Draw(img).text((ml - min(x0, 0), mt - top), text, font=f, fill=fg)
    if rng.random() < aug.p_shear:
        s = rng.uniform(-0.25, 0.25)
        extra = int(abs(s) * h)
        img = img.transform((w + extra, h), Image.AFFINE, (1, s, -extra if s > 0 else 0, 0, 1, 0),
                            resample=Image.BILINEAR, fillcolor=bg)  # fmt: skip
    if rng.random() < aug.p_rotate:
        img = img.rotate(rng.uniform(-aug.max_degrees, aug.max_degrees), resample=Image.BILINEAR,
                         expand=True, fillcolor=bg)  # fmt: skip
    if rng.random() < aug.p_blur:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.2, aug.max_blur) * size / 30))
    if rng.random() < aug.p_downscale:
        th = rng.randint(aug.min_height, aug.max_height)
        sw = max(4, round(img.width * th / img.height))
        img = img.resize((sw, th), rng.choice([Image.BILINEAR, Image.BOX, Image.BICUBIC, Image.NEAREST]))
    if rng.random() < aug.p_noise:
        a = np.asarray(img, dtype=np.float32)
        a = a + np.random.default_rng(rng.getrandbits(32)).normal(0, rng.uniform(3, 20), a.shape)
        img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "L")
    if rng.random() < aug.p_jpeg:
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=rng.randint(15, 70))
        img = Image.open(io.BytesIO(buf.getvalue())).convert("L")
    width = min(MAX_WIDTH, max(8, math.ceil(INPUT_HEIGHT * img.width / img.height)))
    return img.resize((width, INPUT_HEIGHT), Image.BICUBIC)


def to_pixel_values(images: list[Image.Image]) -> tuple["np.ndarray", "np.ndarray"]:
    """EasyOCR's ``NormalizePAD``: float32 (B, 1, 64, W_max) in [-1, 1], each row
    padded on the right by repeating its last column; plus the widths int64 (B,)."""
    widths = np.array([im.width for im in images], dtype=np.int64)
    wmax = int(widths.max())
    out = np.empty((len(images), 1, INPUT_HEIGHT, wmax), dtype=np.float32)
    for i, im in enumerate(images):
        a = np.asarray(im, dtype=np.float32) / 255.0 * 2.0 - 1.0
        out[i, 0, :, : a.shape[1]] = a
        out[i, 0, :, a.shape[1]:] = a[:, -1:]
    return out, widths


def make_samples(n: int, fonts: list[FontFile], seed: int, aug: Degradation) -> list[tuple[Image.Image, str]]:
    """``n`` (image, text) pairs, reproducible for a given ``seed``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        font = rng.choice(fonts)
        text = random_text(rng, euro=font.has_euro)
        out.append((render_line(text, font, rng, aug), text))
    return out


if __name__ == "__main__":
    import argparse
    import time

    ap = argparse.ArgumentParser(description="Preview synthetic OCR lines.")
    ap.add_argument("--preview", default="/tmp/ocr_preview.png")
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--set", choices=["train", "clean", "degraded"], default="train")
    args = ap.parse_args()
    train_fonts, held = split_fonts(list_fonts())
    print(f"{len(train_fonts)} training faces, {len(held)} held-out faces")
    print("held-out families:", sorted({f.family for f in held}))
    fonts, aug = {"train": (train_fonts, TRAIN_AUG), "clean": (held, CLEAN), "degraded": (held, DEGRADED)}[args.set]
    t = time.time()
    samples = make_samples(args.n, fonts, 0, aug)
    print(f"{(time.time() - t) / args.n * 1000:.1f} ms per line")
    shown = [im.crop((0, 0, min(im.width, 900), 64)) for im, _ in samples]
    sheet = Image.new("L", (900, 68 * len(shown)), 128)
    for i, im in enumerate(shown):
        sheet.paste(im, (0, 68 * i))
    sheet.save(args.preview)
    for _, text in samples:
        print(repr(text))
