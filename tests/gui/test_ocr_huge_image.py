"""The OCR tab says clearly when an image is larger than it reads at full size (issue 19,
section 3): the info line marks the downscale, its tooltip and the status bar carry the
note (the size it is read at, the smallest text that stays readable, crop to read at full
size)."""

from __future__ import annotations

from PIL import Image

from core.inputs.images import size_note
from gui.tabs.ocr import OCRTab

from .fakes_ocr import FakeOCRModel


def test_a_downscaled_image_gets_a_note(qtbot, tmp_path):
    tab = OCRTab()
    qtbot.addWidget(tab)
    tab.resize(1280, 800)
    tab.show()
    status: list[str] = []
    tab.statusMessage.connect(status.append)
    try:
        big = tmp_path / "huge.png"
        Image.new("RGB", (9000, 9000), "white").save(big)
        tab.model = None
        tab.open_file(big)
        qtbot.waitUntil(lambda: tab.image is not None, timeout=20_000)
        note = size_note(tab.image, "huge.png")
        assert note and "9000×9000" in note and "4096×4096" in note and "Crop" in note
        assert "downscaled from 9000×9000" in tab.info_label.text() and "⚠" in tab.info_label.text()
        assert tab.info_label.toolTip() == note
        assert note in status
        tab.grab().save(str(tmp_path / "gui_ocr_huge_note.png"))
        # an image read at its own size has no note
        tab.model = FakeOCRModel()
        tab.set_image(Image.new("RGB", (300, 200), "white"), "small")
        assert tab.info_label.toolTip() == "" and "⚠" not in tab.info_label.text()
    finally:
        tab.shutdown()


def _open_blank_page(qtbot, tmp_path, size: tuple[int, int]) -> OCRTab:
    """An OCR tab without a model that opened a white ``size`` (width, height px) page.png
    through its loader worker; the caller shuts it down."""
    tab = OCRTab()
    qtbot.addWidget(tab)
    tab.model = None
    path = tmp_path / "page.png"
    Image.new("RGB", size, "white").save(path)
    tab.open_file(path)
    qtbot.waitUntil(lambda: tab.image is not None, timeout=20_000)
    return tab


def test_the_pixels_for_the_view_are_made_off_the_gui_thread(qtbot, tmp_path, monkeypatch):
    """Opening a 4096 x 4096 image cost the GUI thread ~380 ms (the array and QImage copies:
    827 ms longest stall in tests/bench/bench_gui_stall.py --case image); they are made in
    the loader's worker thread now. The input's identity (its pixels' hash, kept with
    explorations) is the same as before and computed once per image."""
    import hashlib

    import numpy as np
    from PySide6.QtCore import QThread
    from PySide6.QtWidgets import QApplication

    import gui.tabs.image_input as image_input
    import gui.tabs.ocr as ocr_tab

    off_gui_thread: list[bool] = []  # per QImage made from the pixels: made outside the GUI thread?
    real = ocr_tab.qimage_from_array

    def spy(rgb):
        off_gui_thread.append(QThread.currentThread() != QApplication.instance().thread())
        return real(rgb)

    monkeypatch.setattr(image_input, "qimage_from_array", spy, raising=False)
    monkeypatch.setattr(ocr_tab, "qimage_from_array", spy)
    tab = _open_blank_page(qtbot, tmp_path, (5000, 5000))
    try:
        assert off_gui_thread == [True]  # once, in the worker
        assert tab.view.image_size() == tab.image.size
        rgb = np.ascontiguousarray(np.asarray(tab.image.convert("RGB"), dtype=np.uint8))
        h = hashlib.sha256(rgb.tobytes())
        h.update(repr((rgb.shape, None)).encode())
        assert tab.input_identity() == (f"page.png ({rgb.shape[1]}×{rgb.shape[0]} px)", h.hexdigest())
        tab.region = (10, 20, 300, 40)
        h = hashlib.sha256(rgb.tobytes())
        h.update(repr((rgb.shape, (10, 20, 300, 40))).encode())
        assert tab.input_identity()[1] == h.hexdigest()
    finally:
        tab.shutdown()


def test_the_pixels_hash_is_made_off_the_gui_thread(qtbot, tmp_path, monkeypatch):
    """The input's identity hashes its RGB pixels (432 MB for a 12000 x 12000 image, downscaled
    to 4096 x 4096: ~110 ms). It was computed on the GUI thread at the first decode (the 158-185
    ms gap of bench_gui_stall --case image); the loader's worker computes it now, with the view's
    pixels, and the GUI thread never hashes an opened file."""
    from PySide6.QtCore import QThread
    from PySide6.QtWidgets import QApplication

    import gui.tabs.image_input as image_input
    import gui.tabs.ocr as ocr_tab

    on_gui_thread: list[bool] = []
    real = ocr_tab.rgb_digest

    def spy(image):
        on_gui_thread.append(QThread.currentThread() == QApplication.instance().thread())
        return real(image)

    monkeypatch.setattr(ocr_tab, "rgb_digest", spy)
    monkeypatch.setattr(image_input, "rgb_digest", spy, raising=False)
    tab = _open_blank_page(qtbot, tmp_path, (2000, 1000))
    try:
        desc, digest = tab.input_identity()
        assert on_gui_thread == [False]  # once, in the worker
        assert desc == "page.png (2000×1000 px)" and len(digest) == 64
        # an image set directly (a test, a what-if) is still hashed, once, where it is asked for
        tab.set_image(Image.new("RGB", (30, 20), "white"), "small")
        tab.input_identity()
        tab.input_identity()
        assert on_gui_thread == [False, True]
    finally:
        tab.shutdown()
