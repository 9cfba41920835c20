"""core.tasks.ocr_layout: ink, contrast, one-line detection, scales and tiles (numpy and
Pillow only, no model). Images are rendered with Pillow; the expected positions are
Pillow's ink boxes."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from core.tasks import ocr_layout as L
from core.tasks import ocr_tiles as T
from core.tasks.ocr import MIN_SHORT_SIDE, target_size
from tests.helpers.ocr_images import font_path, render_paragraph, render_small_line


def _gray(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"))


def _ink_box(text: str, height: int, margin: tuple[int, int]) -> tuple[int, int, int, int]:
    """Pillow's ink box of render_small_line's text (same font size computation)."""
    ref = ImageFont.truetype(font_path(), 100)
    asc, desc = ref.getmetrics()
    f = ImageFont.truetype(font_path(), max(4, round(100 * height / (asc + desc))))
    x0, _, _, _ = f.getbbox(text)
    img = Image.new("L", (10, 10))
    return ImageDraw.Draw(img).textbbox((margin[0] - min(x0, 0), margin[1]), text, font=f)


def test_reader_line_height_matches_the_reader():
    from core.backends.ocr_attn import INPUT_HEIGHT

    assert L.READER_LINE_PX == INPUT_HEIGHT == 64


def test_stretch_contrast_spreads_grey_text_and_keeps_polarity():
    gray = _gray(render_small_line("Grey text 42", 22, fg=90, bg=170, blur=0, jpeg_quality=None))
    out = L.stretch_contrast(gray)
    assert out.dtype == np.uint8 and out.shape == gray.shape
    assert int(out.max()) - int(out.min()) > 240  # was 80 grey levels apart
    bg = np.median(gray)
    assert np.median(out) > 240 and out[gray < bg - 40].mean() < 30  # background light, ink dark: kept
    inverted = 255 - gray  # light text on dark: stays light on dark
    out_inv = L.stretch_contrast(inverted)
    assert np.median(out_inv) < 15 and out_inv[inverted > 255 - bg + 40].mean() > 225
    flat = np.full((20, 30), 128, np.uint8)
    assert L.stretch_contrast(flat) is flat
    with pytest.raises(ValueError, match="uint8"):
        L.stretch_contrast(gray.astype(np.float32))
    with pytest.raises(ValueError, match="low < high"):
        L.stretch_contrast(gray, 60, 40)


@pytest.mark.parametrize("dark_on_light", [True, False])
def test_one_line_box_finds_a_small_grey_line(dark_on_light):
    text, h, margin = "Sign here 12", 18, (14, 6)
    gray = _gray(render_small_line(text, h, fg=90, bg=170, margin=margin, blur=0.9, jpeg_quality=70))
    if not dark_on_light:
        gray = 255 - gray
    mask = L.ink_mask(gray)
    box = L.one_line_box(mask, L.ink_mask(gray, L.WEAK_INK_LEVEL))
    ink = _ink_box(text, h, margin)
    assert box is not None
    # the box holds the drawn ink (within a pixel of blur) and little else
    assert box[0] <= ink[0] + 1 and box[1] <= ink[1] + 1 and box[2] >= ink[2] - 1 and box[3] >= ink[3] - 1, (box, ink)
    assert box[0] >= ink[0] - 3 and box[2] <= ink[2] + 3 and box[3] - box[1] <= ink[3] - ink[1] + 6, (box, ink)


def test_one_line_box_grows_over_the_faint_edges_of_strokes():
    text, h, margin = "Sign here 12", 18, (14, 6)
    gray = _gray(render_small_line(text, h, fg=90, bg=170, margin=margin, blur=1.0, jpeg_quality=None))
    ink = _ink_box(text, h, margin)
    cores = L.ink_mask(gray, 0.9)  # only the darkest middles of the strokes
    tight = L.one_line_box(cores)
    grown = L.one_line_box(cores, L.ink_mask(gray, L.WEAK_INK_LEVEL))
    assert tight[3] - tight[1] < ink[3] - ink[1] - 2  # the cores alone miss rows of the letters
    assert grown[1] <= ink[1] and grown[3] >= ink[3] and grown[0] <= ink[0] + 1 and grown[2] >= ink[2] - 1, (grown, ink)
    assert grown[3] - grown[1] <= ink[3] - ink[1] + 6


def test_one_line_box_rejects_paragraphs_and_tall_images():
    para, _ = render_paragraph()
    assert L.one_line_box(L.ink_mask(_gray(para))) is None  # three bands of rows
    line = _gray(render_small_line("one line", 20, margin=(10, 40)))  # a small line in a tall image
    assert L.one_line_box(L.ink_mask(line)) is None
    square = _gray(render_small_line("ab", 20, margin=(2, 2)))  # not wide
    assert L.one_line_box(L.ink_mask(square)) is None
    assert L.one_line_box(np.zeros((30, 300), bool)) is None
    bar = np.full((16, 300), 230, np.uint8)
    bar[5:11, 10:290] = 40  # a rule, not text
    assert L.one_line_box(L.ink_mask(bar)) is None


def test_ink_bands_and_text_height():
    para, boxes = render_paragraph()
    mask = L.ink_mask(_gray(para))
    bands = L.ink_bands(mask)
    assert len(bands) == len(boxes)
    for (y0, y1), box in zip(bands, boxes):
        assert abs(y0 - box[1]) <= 1 and abs(y1 - box[3]) <= 1
    assert L.text_height(mask) == pytest.approx(np.median([b[3] - b[1] for b in boxes]), abs=2)
    assert L.text_height(np.zeros((5, 5), bool)) is None


def test_detection_scale_upscales_small_text_only():
    assert T.detection_scale(10, (400, 300)) == pytest.approx(T.DETECT_TEXT_PX / 10)
    assert T.detection_scale(4, (400, 300)) == T.MAX_UPSCALE
    assert T.detection_scale(30, (400, 300)) == 1.0
    assert T.detection_scale(15, (400, 300)) == 1.0  # 1.33x: below MIN_UPSCALE
    assert T.detection_scale(None, (400, 300)) == 1.0
    # the pixel budget lowers the factor, never below 1
    assert T.detection_scale(5, (2000, 2000), max_pixels=8_000_000) == pytest.approx(np.sqrt(2))
    assert T.detection_scale(5, (4000, 4000), max_pixels=8_000_000) == 1.0


def test_detection_plan_tiles_very_wide_images():
    assert T.detection_plan(20, (1200, 800)) == (1.0, False)
    scale, tiled = T.detection_plan(40, (20000, 166))  # CRAFT's canvas would shrink 40 px text to 5 px
    assert tiled and scale == pytest.approx(T.TILE_TEXT_PX / 40)
    # CRAFT shrinks it to its canvas itself, and 100 px text stays 12.8 px: one pass
    assert T.detection_plan(100, (20000, 300)) == (1.0, False)
    assert T.needs_tiles(None, (20000, 300)) and not T.needs_tiles(None, (3000, 2500))


def test_tile_spans_cover_with_overlap():
    spans = T.tile_spans(20000, 2560, 256)
    assert spans[0][0] == 0 and spans[-1][1] == 20000
    assert all(b - a <= 2560 for a, b in spans)
    assert all(a2 <= b1 - 256 for (_, b1), (a2, _) in zip(spans, spans[1:]))  # neighbours overlap >= 256 px
    assert T.tile_spans(900, 2560, 256) == [(0, 900)]
    with pytest.raises(ValueError):
        T.tile_spans(0)
    with pytest.raises(ValueError):
        T.tile_spans(5000, 2560, 2000)


def test_uncovered_ink_boxes_finds_the_text_a_box_missed():
    para, boxes = render_paragraph()
    mask = L.ink_mask(_gray(para))
    line_px = float(np.median([b[3] - b[1] for b in boxes]))
    # CRAFT found lines 2 and 3 and the second half of line 1
    x_mid = (boxes[0][0] + boxes[0][2]) // 2
    found = [(x_mid, boxes[0][1] - 4, boxes[0][2] + 4, boxes[0][3] + 4)] + [
        (b[0] - 4, b[1] - 4, b[2] + 4, b[3] + 4) for b in boxes[1:]]
    assert L.ink_coverage(mask, found) < L.MIN_COVERAGE
    extra = L.uncovered_ink_boxes(mask, found, line_px)
    assert len(extra) == 1
    x0, y0, x1, y1 = extra[0]
    # Pillow's text box includes the "O"'s side bearing (2 px)
    assert abs(x0 - boxes[0][0]) <= 3 and x1 <= x_mid and abs(y0 - boxes[0][1]) <= 1 and abs(y1 - boxes[0][3]) <= 1
    assert L.ink_coverage(mask, found + extra) == pytest.approx(1.0)


@pytest.mark.parametrize("shape", [(40, 40, 200, 120), (60, 100, 600, 110), (300, 60, 310, 200)],
                         ids=["block", "bar", "rule"])
def test_uncovered_ink_boxes_ignore_blocks_bars_and_gradients(shape):
    img = Image.new("L", (640, 400), 240)
    ImageDraw.Draw(img).rectangle(shape, fill=30)
    assert L.uncovered_ink_boxes(L.ink_mask(np.asarray(img)), []) == []
    # the same shape beside a text line: only the text is kept
    font = ImageFont.truetype(font_path(), 24)
    ImageDraw.Draw(img).text((40, 300), "some text here", font=font, fill=30)
    found = L.uncovered_ink_boxes(L.ink_mask(np.asarray(img)), [])
    assert len(found) == 1 and found[0][1] >= 295, found
    grad = np.tile(np.linspace(40, 220, 640).astype(np.uint8), (480, 1))  # one band the image's height
    assert L.uncovered_ink_boxes(L.ink_mask(grad), []) == []


def test_split_at_wide_gaps():
    font = ImageFont.truetype(font_path(), 40)
    img = Image.new("L", (2000, 70), 255)
    d = ImageDraw.Draw(img)
    d.text((20, 10), "left words", font=font, fill=0)
    d.text((1500, 10), "right", font=font, fill=0)
    ink_cols = np.flatnonzero((np.asarray(img) < 128).any(axis=0))  # the drawn ink's columns
    a = (ink_cols[ink_cols < 1000].min(), ink_cols[ink_cols < 1000].max() + 1)
    b = (ink_cols[ink_cols > 1000].min(), ink_cols[ink_cols > 1000].max() + 1)
    mask = L.ink_mask(np.asarray(img))
    box = L.one_line_box(mask)
    parts = L.split_at_wide_gaps(mask, box)
    assert len(parts) == 2  # the space inside "left words" is not a cut
    assert abs(parts[0][0] - a[0]) <= 1 and abs(parts[0][2] - a[1]) <= 1
    assert abs(parts[1][0] - b[0]) <= 1 and abs(parts[1][2] - b[1]) <= 1
    assert L.split_at_wide_gaps(mask, parts[0]) == [parts[0]]


def test_with_margins_is_clipped_to_the_image():
    assert L.with_margins((10, 10, 110, 30), (400, 100)) == (0, 4, 120, 36)
    assert L.with_margins((100, 40, 200, 60), (400, 100), (1.0, 0.5)) == (80, 30, 220, 70)


def test_target_size_keeps_very_wide_images_readable():
    assert target_size((20000, 200)) == (20000, 200)  # not 4096 x 41
    assert target_size((200, 20000)) == (200, 20000)
    assert target_size((20000, 20000)) == (4096, 4096)
    assert target_size((12000, 9000)) == (4096, 3072)
    assert target_size((9000, 2000)) == (4608, MIN_SHORT_SIDE)
    w, h = target_size((100_000, 1000))  # would hold 100 Mpx: the pixel budget shrinks it
    assert w * h <= 40_000_000 and h > 600
