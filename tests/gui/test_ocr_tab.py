"""The OCR tab: widget wiring with a fake model (tests/gui/fakes_ocr.py), then the real
bundled OCRModel on the bundled sample image.

The fake "detects" dark row bands and reads each line as ``LINE_TEXT`` with attention
peaking at column k for the line's k-th token, so the overlay's position is known.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from PySide6.QtCore import QEvent, QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QMouseEvent
from PySide6.QtWidgets import QApplication

from core.events import SegmentEvent, StepEvent
from core.options import DecodingOptions
from gui.tabs.ocr import OCRTab, first_image_sample
from gui.widgets.image_view import qimage_from_array

from .fakes_ocr import LINE_TEXT, FakeOCRModel

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def text_image(lines=("Hello world", "Price 4.99"), size=28, width=360) -> Image.Image:
    """Dark text lines on white, rendered with Pillow."""
    font = ImageFont.truetype(FONT, size)
    img = Image.new("RGB", (width, 30 + int(1.8 * size) * len(lines)), "white")
    d = ImageDraw.Draw(img)
    for i, t in enumerate(lines):
        d.text((16, 15 + int(1.8 * size) * i), t, font=font, fill="black")
    return img


@pytest.fixture
def tab(qtbot):
    t = OCRTab()
    qtbot.addWidget(t)
    t.resize(1300, 850)
    t.show()
    t.options_panel._timer.setInterval(20)
    t.errors = []
    t.errorOccurred.connect(t.errors.append)
    yield t
    t.shutdown()


def _decode(qtbot, tab, action, timeout=10_000):
    with qtbot.waitSignal(tab.decodeFinished, timeout=timeout) as blocker:
        action()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=timeout)
    return blocker.args[0]


def _inside(rng, box) -> bool:
    x0, _y0, x1, _y1 = box
    return x0 - 1e-6 <= rng[0] < rng[1] <= x1 + 1e-6


def test_sample_lines_stream_table_and_overlay(qtbot, tab, tmp_path):
    model = FakeOCRModel()
    tab.model = model
    fin = _decode(qtbot, tab, tab.load_sample)
    sample = first_image_sample()
    assert sample is not None and tab.source_name == sample.name
    expected = model.detect(Image.open(sample).convert("RGB"))
    assert len(expected) == 3  # the sample has three text lines
    # boxes drawn, numbered in reading order
    assert tab.view.line_count() == 3
    assert [tab.view.line_label(i) for i in range(3)] == ["1", "2", "3"]
    for i, line in enumerate(expected):
        r = tab.view.line_box(i)
        assert (r.left(), r.top(), r.right(), r.bottom()) == line.box
    # one stream segment per line, heatmap rows == tokens, columns = the widest line's columns
    assert fin.text == "\n".join([LINE_TEXT] * 3)
    assert tab.stream.token_count() == 3 * len(LINE_TEXT) == tab.heatmap.row_count()
    assert tab.heatmap.column_count() == max(line.n_columns for line in expected)
    assert len(tab.heatmap.row_separators()) == 2  # a white line between the lines' rows
    # the comparison table: attention reading and CTC reading per line
    assert tab.readings.rowCount() == 3
    assert [tab.reading(i) for i in range(3)] == [(LINE_TEXT, LINE_TEXT.upper())] * 3
    # the newest token's attention is drawn on the last line at its column (k = 3)
    last = expected[2]
    assert tab.view.attention_shown()
    assert tab.view.overlay.argmax_range() == pytest.approx(last.column_x(len(LINE_TEXT) - 1))
    assert _inside(tab.view.overlay.argmax_range(), last.box)
    b = tab.view.overlay.box()
    assert (b.left(), b.top(), b.right(), b.bottom()) == last.box
    assert len(tab.view.overlay.bands()) == last.n_columns
    # select token 1 (line 1, k = 1): overlay moves there, for every layer/head choice
    tab.select_step(1)
    assert tab.view.overlay.argmax_range() == pytest.approx(expected[0].column_x(1))
    tab.heatmap.layer_combo.setCurrentIndex(2)
    tab.heatmap.head_combo.setCurrentIndex(1)
    assert tab.view.overlay.argmax_range() == pytest.approx(expected[0].column_x(1))
    bands = tab.view.overlay.bands()
    assert max(v for _x0, _x1, v in bands) == pytest.approx(1.0)  # normalised to its maximum
    # a table row click selects the line's first token
    tab.line_views.clicked(1)
    assert tab.selected_step() == len(LINE_TEXT) and tab.topk.step() == len(LINE_TEXT)
    assert tab.errors == []
    tab.grab().save(str(tmp_path / "gui_ocr_fake_sample.png"))


def test_option_change_redecodes_without_detecting_or_encoding_again(qtbot, tab):
    model = FakeOCRModel()
    tab.model = model
    _decode(qtbot, tab, lambda: tab.set_image(text_image(), "two lines"))
    assert len(model.detect_calls) == 1 and model.encode_count == 2 and model.ctc_calls == 2
    fin = _decode(qtbot, tab, lambda: tab.options_panel.controls["max_new_tokens"].setValue(2))
    assert fin.stats.n_tokens == 4 and tab.heatmap.row_count() == 4
    assert len(model.detect_calls) == 1 and model.encode_count == 2 and model.ctc_calls == 2
    assert tab.view.line_count() == 2 and [tab.reading(i) for i in range(2)] == [(LINE_TEXT[:2], "AB12")] * 2


def _mouse(view, kind, scene_xy, button=Qt.MouseButton.LeftButton):
    pos = QPointF(view.mapFromScene(QPointF(*scene_xy)))
    buttons = Qt.MouseButton.NoButton if kind == QEvent.Type.MouseButtonRelease else button
    ev = QMouseEvent(kind, pos, view.viewport().mapToGlobal(pos), button, buttons, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(view.viewport(), ev)


def test_rubber_band_reads_only_that_region_and_whole_image_resets(qtbot, tab, tmp_path):
    model = FakeOCRModel()
    tab.model = model
    img = text_image(("First line", "Second", "The third line"))
    _decode(qtbot, tab, lambda: tab.set_image(img, "three lines"))
    assert tab.view.line_count() == 3 and not tab.whole_button.isEnabled()
    line2 = model.detect(img)[1]
    x0, y0, x1, y1 = line2.box
    start, end = (x0 - 6, y0 - 4), (x1 + 6, y1 + 4)

    def drag():
        _mouse(tab.view, QEvent.Type.MouseButtonPress, start)
        _mouse(tab.view, QEvent.Type.MouseMove, ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2))
        _mouse(tab.view, QEvent.Type.MouseMove, end)
        _mouse(tab.view, QEvent.Type.MouseButtonRelease, end)

    assert [tab.line_path(i) for i in range(3)] == ["detected"] * 3
    fin = _decode(qtbot, tab, drag)
    region = tab.region
    assert region is not None
    assert tab.line_path(0) == "region"  # the one-line region was read whole
    rx, ry, rw, rh = region
    # the region the user dragged (view -> scene rounding: within 2 image pixels)
    assert abs(rx - start[0]) <= 2 and abs(ry - start[1]) <= 2
    assert abs(rx + rw - end[0]) <= 2 and abs(ry + rh - end[1]) <= 2
    assert model.detect_calls[-1] == region and model.decode_regions[-1] == region
    assert fin.text == LINE_TEXT and tab.view.line_count() == 1
    assert tab.heatmap.column_count() == line2.n_columns  # columns of this run's line only
    r = tab.view.line_box(0)
    assert (r.left(), r.top(), r.right(), r.bottom()) == line2.box  # full-image pixels
    assert tab.view.region_rect() is not None and tab.whole_button.isEnabled()
    tab.grab().save(str(tmp_path / "gui_ocr_fake_region.png"))
    n_detect = len(model.detect_calls)
    fin = _decode(qtbot, tab, tab.whole_button.click)
    assert tab.region is None and model.decode_regions[-1] is None
    assert len(model.detect_calls) == n_detect  # the whole image's detection is reused
    assert fin.text.count("\n") == 2 and tab.view.line_count() == 3 and tab.view.region_rect() is None


def test_found_by_column_shows_how_each_line_was_found(qtbot, tab):
    from gui.tabs.ocr import COL_PATH, PATH_TIPS

    tab.model = FakeOCRModel()
    _decode(qtbot, tab, lambda: tab.set_image(text_image(("Hello world",)), "one line"))
    assert tab.readings.rowCount() == 1 and tab.line_path(0) == "whole image"
    assert tab.readings.horizontalHeaderItem(COL_PATH).text() == "found by"
    assert tab.readings.item(0, COL_PATH).toolTip() == PATH_TIPS["whole image"]
    assert tab.reading(0) == (LINE_TEXT, LINE_TEXT.upper())  # the other columns are unchanged
    _decode(qtbot, tab, lambda: tab.set_image(text_image(), "two lines"))
    assert [tab.line_path(i) for i in range(2)] == ["detected", "detected"]


def _record_stages(tab) -> list:
    seen: list = []
    tab.stageProgress.connect(lambda stage, value, maximum, _text: seen.append((stage, value, maximum)))
    return seen


def test_progress_shows_each_stage_in_order(qtbot, tab):
    model = FakeOCRModel(tiles=3)
    tab.model = model
    seen = _record_stages(tab)
    texts: list[str] = []
    tab.busyChanged.connect(lambda busy, text: texts.append(text) if busy else None)
    shown = []
    tab.stageProgress.connect(lambda *_a: shown.append(tab.progress_state()))
    _decode(qtbot, tab, lambda: tab.set_image(text_image(("one", "two", "three")), "three lines"))
    assert seen == [
        ("detect", 0, 1),  # before the worker starts
        ("detect", 0, 3), ("detect", 1, 3), ("detect", 2, 3), ("detect", 3, 3),  # tile by tile
        ("read", 0, 3),  # lines found
        ("read", 0, 3), ("read", 1, 3), ("read", 2, 3),  # line i of n
        ("compare", 0, 3), ("compare", 1, 3), ("compare", 2, 3),  # the CTC column
    ]
    assert all(s[0] for s in shown)  # the bar was visible at each stage, with its value and range
    assert [s[1:3] for s in shown] == [(max(v, 0), max(m, 1)) for _st, v, m in seen]
    assert "reading line 2 of 3 (1/3)" in [s[3] for s in shown]
    assert "Reading line 3 of 3…" in texts and "Detecting text lines (tile 2 of 3)…" in texts
    # hidden when the run ended (the CTC column's last stage may still be on its way here)
    qtbot.waitUntil(lambda: not tab.progress_state()[0], timeout=5_000)
    # an option change re-reads the cached lines: reading only
    seen.clear()
    _decode(qtbot, tab, lambda: tab.options_panel.controls["max_new_tokens"].setValue(2))
    assert seen == [("read", 0, 3), ("read", 0, 3), ("read", 1, 3), ("read", 2, 3)]


def test_cancel_stops_between_lines(qtbot, tab):
    model = FakeOCRModel(delay_s=0.05)
    tab.model = model
    seen = _record_stages(tab)
    tab.set_image(text_image(("one", "two", "three", "four")), "four lines")
    qtbot.waitUntil(lambda: ("read", 1, 4) in seen, timeout=10_000)
    assert tab.progress_state()[0] and tab.progress_cancel.isVisible()
    tab.progress_cancel.click()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=10_000)
    qtbot.wait(300)  # nothing more arrives
    assert model.lines_started == 2  # line 3 never started
    assert ("read", 2, 4) not in seen and not any(s[0] == "compare" for s in seen)
    assert not tab.progress_state()[0]
    assert model.ctc_calls == 0


def test_cancel_stops_between_detection_tiles(qtbot, tab):
    model = FakeOCRModel(tiles=8, tile_delay_s=0.1)
    tab.model = model
    seen = _record_stages(tab)
    tab.set_image(text_image(), "two lines")
    qtbot.waitUntil(lambda: ("detect", 1, 8) in seen, timeout=10_000)
    assert tab.cancel()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=10_000)
    qtbot.wait(300)
    assert model.tiles_done <= 3 and model.lines_started == 0  # stopped between tiles, nothing read
    assert not any(s[0] == "read" for s in seen) and not tab.progress_state()[0]
    assert tab.errors == []  # a cancel is not an error


def test_model_load_shows_its_stages(qtbot, tab, monkeypatch):
    import time as _time

    from core.tasks.ocr import OCRModel

    def fake_load(cls, name="bundled", progress=None, stage=None):
        for i, what in enumerate(("reader", "CTC head", "importing EasyOCR", "CRAFT")):
            progress(f"loading {what}")
            stage(i, 4, f"loading {what}")
            _time.sleep(0.05)
        return FakeOCRModel()

    monkeypatch.setattr(OCRModel, "load", classmethod(fake_load))
    seen = _record_stages(tab)
    with qtbot.waitSignal(tab.modelReady, timeout=10_000):
        tab.load_model("bundled")
    qtbot.waitUntil(lambda: not tab.is_busy(), timeout=10_000)
    assert seen == [("load", i, 4) for i in range(4)]
    assert not tab.progress_state()[0]


def test_a_click_is_not_a_region(qtbot, tab):
    tab.model = FakeOCRModel()
    _decode(qtbot, tab, lambda: tab.set_image(text_image(), "two lines"))
    got = []
    tab.view.regionSelected.connect(got.append)
    _mouse(tab.view, QEvent.Type.MouseButtonPress, (50, 20))
    _mouse(tab.view, QEvent.Type.MouseButtonRelease, (51, 21))
    assert got == [] and tab.region is None


def test_wheel_zoom_and_fit(qtbot, tab):
    tab.model = FakeOCRModel()
    _decode(qtbot, tab, lambda: tab.set_image(text_image(), "two lines"))
    fitted = tab.view.scale_factor()
    tab.zoom_in_button.click()
    assert tab.view.scale_factor() == pytest.approx(1.25 * fitted)
    tab.fit_button.click()
    assert tab.view.scale_factor() == pytest.approx(fitted)


def test_paste_clipboard_image_and_file_path(qtbot, tab, tmp_path):
    model = FakeOCRModel()
    tab.model = model
    img = text_image(("Clipboard text", "on two lines", "and a third"))
    QApplication.clipboard().setImage(qimage_from_array(np.asarray(img)))
    fin = _decode(qtbot, tab, tab.paste_action.trigger)
    assert tab.source_name == "pasted image"
    assert np.array_equal(np.asarray(tab.image), np.asarray(img))
    assert fin.text.count("\n") == 2 and tab.view.line_count() == 3
    # a copied file path (text) opens that file
    f = tmp_path / "copied.png"
    text_image(("only one",)).save(f)
    QApplication.clipboard().setText(str(f))
    fin = _decode(qtbot, tab, tab.paste)
    assert tab.source_name == "copied.png" and fin.text == LINE_TEXT
    # text that is no image: a banner says what to do
    QApplication.clipboard().setText("just some words")
    assert tab.paste() is False
    assert "holds no image" in tab.banner.message() and "Ctrl+V" in tab.banner.message()


def test_drop_of_a_file(qtbot, tab, tmp_path):
    tab.model = FakeOCRModel()
    f = tmp_path / "dropped.jpg"
    text_image().save(f, quality=95)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(f))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    fin = _decode(qtbot, tab, lambda: tab.dropEvent(drop))
    assert tab.source_name == "dropped.jpg" and "dropped.jpg" in tab.info_label.text()
    assert fin.text == "\n".join([LINE_TEXT] * 2)


def test_errors_in_the_banner(qtbot, tab, tmp_path):
    tab.model = FakeOCRModel()
    status: list[str] = []
    tab.statusMessage.connect(status.append)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    tab.open_file(empty)
    qtbot.waitUntil(lambda: bool(tab.banner.message()), timeout=5000)
    assert "empty.png" in tab.banner.message() and "0 bytes" in tab.banner.message()
    assert str(tmp_path) not in tab.banner.message()  # files are named by name, never by full path
    assert "PNG, JPEG" in tab.banner.message()  # what to do
    assert tab.image is None
    # a truncated PNG
    bad = tmp_path / "cut.png"
    text_image().save(bad)
    bad.write_bytes(bad.read_bytes()[:200])
    tab.banner.hide()
    tab.open_file(bad)
    qtbot.waitUntil(lambda: bool(tab.banner.message()), timeout=5000)
    assert "cut.png" in tab.banner.message() and ("truncated" in tab.banner.message() or "corrupt" in tab.banner.message())
    assert str(tmp_path) not in tab.banner.message()
    assert tab.image is None
    # a file that is not there, given through "..": still its name only
    tab.banner.hide()
    tab.open_file(tmp_path / "sub" / ".." / "missing.png")
    qtbot.waitUntil(lambda: bool(tab.banner.message()), timeout=5000)
    assert tab.banner.message().startswith("missing.png: no such file"), tab.banner.message()
    assert str(tmp_path) not in tab.banner.message()
    assert status and all(str(tmp_path) not in m for m in status) and "Opening missing.png…" in status
    # a large image is downscaled on load, and the info line says so
    big = tmp_path / "big.png"
    Image.new("RGB", (6000, 1500), "white").save(big)
    tab.model = None
    tab.open_file(big)
    qtbot.waitUntil(lambda: tab.image is not None, timeout=5000)
    assert tab.image.size == (4096, 1024) and "downscaled from 6000×1500" in tab.info_label.text()
    # a very wide line keeps its resolution (shrunk to 4096 px wide its text could not be read)
    wide = tmp_path / "wide.png"
    Image.new("RGB", (5000, 60), "white").save(wide)
    tab.open_file(wide)
    qtbot.waitUntil(lambda: tab.image is not None and tab.image.size == (5000, 60), timeout=5000)
    assert "downscaled" not in tab.info_label.text()
    tab.model = FakeOCRModel()
    # a blank image: no text found, and the banner says what to do
    blank = Image.new("RGB", (300, 200), "white")
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000) as blocker:
        tab.set_image(blank, "blank")
    assert "No text found" in blocker.args[0] and "printed text" in blocker.args[0]
    assert tab.banner.message() == blocker.args[0]
    assert tab.stream.token_count() == 0 and tab.view.line_count() == 0
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    tab.grab().save(str(tmp_path / "gui_ocr_fake_blank.png"))


def test_button_texts_have_glyphs_in_their_font(tab):
    """Every button of the input area draws its text with its own font ("✋ Pan" drew a
    missing-glyph box)."""
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QAbstractButton

    buttons = tab.input_area.findChildren(QAbstractButton)
    assert tab.pan_button in buttons and tab.progress_cancel in buttons
    for b in buttons:
        fm = QFontMetrics(b.font())
        missing = [c for c in b.text() if not c.isspace() and not fm.inFontUcs4(ord(c))]
        assert not missing, (b.text(), missing)
    assert tab.pan_button.text() == "Pan"


def test_main_window_tab_order(qtbot, settings):
    from gui.main_window import MainWindow

    win = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(win)
    assert [win.tabs.tabText(i) for i in range(win.tabs.count())] == ["Speech", "OCR", "Translation"]
    assert win.tabs.widget(1) is win.ocr_tab


def test_status_bar_shows_rtf_for_speech_only(qtbot, settings):
    from gui.main_window import MainWindow

    win = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(win)
    stats = {"encode_ms": 12.0, "ms_per_token": 5.0, "tokens_per_s": 200.0, "rtf": 0.5, "model": "m"}
    for tab, shown in ((win.ocr_tab, False), (win.translation_tab, False), (win.speech_tab, True)):
        win.tabs.setCurrentWidget(tab)
        win._on_stats(tab, stats)
        text = win.stats_label.text()
        assert "5.0 ms/token" in text and "200.0 tokens/s" in text
        assert ("RTF 0.50" in text) is shown, (tab, text)


# ------------------------------------------------------------------ the real bundled model
SLOW_MS = 240_000
#: what tools/make-sample rendered into assets/samples/ocr_en.png (README there): text, top y of the line
SAMPLE_LINES = [("The museum opens at nine in the", 22), ("morning and closes before dinner.", 74),
                ("Tickets: $12.50 adults, $6 kids (2024)", 126)]
SAMPLE_FONT_PX = 30


@pytest.mark.e2e
def test_real_model_reads_the_sample(qtbot, tab, tmp_path):
    import jiwer

    with qtbot.waitSignal(tab.modelReady, timeout=SLOW_MS):
        tab.load_model("bundled")
    qtbot.waitUntil(lambda: not tab.is_busy(), timeout=SLOW_MS)
    model = tab.model
    assert model.has_ctc
    events = []
    tab.decodeFinished.connect(events.append)
    fin = _decode(qtbot, tab, tab.load_sample, timeout=SLOW_MS)
    assert tab.errors == [] and not fin.cancelled
    # detection: one box per rendered line, in reading order, each around its line
    lines = tab.lines
    assert len(lines) == len(SAMPLE_LINES) == tab.view.line_count() == tab.readings.rowCount()
    assert [tab.line_path(i) for i in range(3)] == ["detected"] * 3
    for line, (_text, top) in zip(lines, SAMPLE_LINES):
        x0, y0, x1, y1 = line.box
        assert y0 <= top + SAMPLE_FONT_PX // 2 <= y1 and x0 < 60 and x1 > 400
    # one stream segment per line; heatmap rows == tokens; columns = the widest line's encoder columns
    steps = tab.run.steps()
    assert len(steps) == fin.stats.n_tokens == tab.stream.token_count() == tab.heatmap.row_count()
    assert sorted({e.segment for e in steps}) == [0, 1, 2]
    assert [e.segment for e in steps] == sorted(e.segment for e in steps)  # lines one after another
    assert len(tab.stream.segment_labels()) == 3
    assert tab.heatmap.column_count() == max(line.n_columns for line in lines)
    # the table holds each line's attention reading (the run's per-line text) and a CTC reading
    readings = [tab.reading(i) for i in range(3)]
    assert [r[0] for r in readings] == fin.text.split("\n")
    for i, (att_text, ctc_text) in enumerate(readings):
        assert att_text.strip() and "".join(e.text for e in steps if e.segment == i).strip() == att_text.strip()
        # english_g2's CTC reading, compared with the rendered text (the reference)
        assert jiwer.cer(SAMPLE_LINES[i][0], ctc_text) < 0.15
    # the newest token's attention is drawn on its line, inside the line box
    last = steps[-1]
    box = lines[last.segment].box
    assert tab.view.attention_shown() and len(tab.view.overlay.bands()) == lines[last.segment].n_columns
    assert box[0] - 8 <= tab.view.overlay.argmax_range()[0] <= box[2]
    # select a token in line 2: the overlay moves onto line 2, at x inside its box
    mid = [e for e in steps if e.segment == 1][3]
    tab.select_step(mid.step)
    b = tab.view.overlay.box()
    assert (b.left(), b.top(), b.right(), b.bottom()) == lines[1].box
    x0, x1 = tab.view.overlay.argmax_range()
    assert lines[1].box[0] - 8 <= x0 < x1 <= lines[1].box[2] + 8
    tab.grab().save(str(tmp_path / "gui_ocr_real_sample.png"))
    # an option change re-decodes from the cached detection and encoder output
    n_enc = model.encode_count
    fin2 = _decode(qtbot, tab, lambda: tab.options_panel.controls["max_new_tokens"].setValue(4), timeout=SLOW_MS)
    assert model.encode_count == n_enc and fin2.stats.encoder_cached
    assert fin2.stats.n_tokens <= 12 and tab.heatmap.row_count() == fin2.stats.n_tokens
    assert tab.view.line_count() == 3 and all(tab.reading(i)[1] == readings[i][1] for i in range(3))
    # a region around the third line: only that line is read; the boxes stay in full-image pixels
    x0, y0, x1, y1 = lines[2].box
    region = (max(0, x0 - 10), max(0, y0 - 8), x1 - x0 + 20, y1 - y0 + 16)
    fin3 = _decode(qtbot, tab, lambda: tab.set_region(region), timeout=SLOW_MS)
    assert tab.errors == [] and tab.region == region and "\n" not in fin3.text
    assert len(tab.lines) == 1 and tab.view.line_count() == 1 and tab.line_path(0) == "region"
    bx0, by0, bx1, by1 = tab.lines[0].box
    assert region[0] <= bx0 < bx1 <= region[0] + region[2] and region[1] <= by0 < by1 <= region[1] + region[3]
    assert tab.heatmap.column_count() == tab.lines[0].n_columns
    # the new region's views follow its newest token (the earlier selection is dropped)
    assert tab.selected_step() is None and tab.topk.step() == fin3.stats.n_tokens - 1
    assert tab.view.attention_shown() and tab.view.overlay.box().left() == bx0
    tab.grab().save(str(tmp_path / "gui_ocr_real_region.png"))


def test_line_labels_letter_the_parts_of_a_cut_line():
    from types import SimpleNamespace as NS

    from gui.tabs.ocr import line_labels

    flags = [False, False, True, True, False, True]
    assert line_labels([NS(continues_previous=f) for f in flags]) == ["1", "2a", "2b", "2c", "3a", "3b"]
    assert line_labels([NS(), NS()]) == ["1", "2"]  # lines without the attribute (hub models' fakes)
    assert line_labels([]) == []
