"""The OCR tab, given a file that is not an image (a .txt, a .wav, a .pdf, or a .png whose data
is no image), says so, names the formats it opens and how to open one. Before: "notes.txt is not
an image that can be read (corrupt, or not PNG/JPEG/WebP/BMP/TIFF)": a text file called corrupt,
and nothing said what to open or how."""

from __future__ import annotations

import numpy as np
import pytest

from gui.tabs.ocr import OCRTab

HOW = "Open… (Ctrl+O), drop an image file here, or paste a screenshot (Ctrl+V)."


@pytest.fixture
def tab(qtbot):
    t = OCRTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    yield t
    t.shutdown()


def _banner(qtbot, tab, path) -> str:
    tab.banner.hide()
    tab.open_file(path)
    qtbot.waitUntil(lambda: tab.banner.isVisible() and bool(tab.banner.message()), timeout=5000)
    return tab.banner.message()


@pytest.mark.parametrize("name", ["notes.txt", "speech.wav", "report.pdf"])
def test_a_file_that_is_not_an_image_names_what_to_open(qtbot, tab, tmp_path, name):
    import soundfile as sf

    path = tmp_path / name
    if name.endswith(".wav"):
        sf.write(path, np.zeros(16000, np.float32), 16000)
    else:
        path.write_bytes(b"%PDF-1.4\n" + b"x" * 400 if name.endswith(".pdf") else b"hello world\n" * 40)
    said = _banner(qtbot, tab, path)
    suffix = path.suffix
    assert said == (f"{name} is not an image (a {suffix} file); open a PNG, JPEG, WebP, BMP or TIFF image\n"
                    f"To open one: {HOW}"), said
    assert "corrupt" not in said and tab.image is None


def test_a_png_that_holds_no_image_is_called_unreadable_and_names_the_formats(qtbot, tab, tmp_path):
    path = tmp_path / "noise.png"
    path.write_bytes(np.random.default_rng(0).bytes(5000))
    said = _banner(qtbot, tab, path)
    assert said.startswith("noise.png is not an image that can be read: its data is corrupt or in another format; "
                           "open a PNG, JPEG, WebP, BMP or TIFF image"), said
    assert said.endswith(f"\nTo open one: {HOW}")


def test_the_formats_named_are_the_ones_the_loader_accepts():
    from core.inputs.images import FORMAT_NAMES, SUPPORTED_FORMATS
    from gui.tabs.image_input import FORMATS, IMAGE_SUFFIXES

    assert FORMATS == FORMAT_NAMES
    named = FORMAT_NAMES.upper().replace(" OR ", ", ").split(", ")
    assert set(named) == set(SUPPORTED_FORMATS) - {"MPO"}  # MPO: a camera's JPEG, opened as one
    from core.inputs.images import IMAGE_SUFFIXES as LOADER_SUFFIXES

    assert set(IMAGE_SUFFIXES) <= set(LOADER_SUFFIXES)  # what Open… lists, the loader takes as an image's name
