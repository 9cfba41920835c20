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
