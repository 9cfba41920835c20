"""The OCR tab's input area (``gui.tabs.ocr``): the buttons row (Open…, Paste, Sample · Fit,
−, +, Pan, Mask · Whole image), the model row, the info line and the progress bar, then the
image view (line boxes, region, attention) over the readings table.

:class:`OCRInputArea` is the widget the tab's ``build_input`` returns (``RunTab.input_area``);
it builds the rows with the tab's public pieces: ``make_file_buttons`` / ``make_model_picker``
(``DecodeTab``), ``paste``, ``set_region``, ``cancel`` and the tab's ``mask`` (``ImageMask``).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..widgets.image_view import ImageView
from ..widgets.readings_table import ReadingsTable
from .base import SAMPLES_DIR
from .image_input import FORMATS

EMPTY_MESSAGE = f"No image yet — open a {FORMATS} file, drop one here, paste a screenshot (Ctrl+V) or press Sample."


class OCRInputArea(QWidget):
    """The OCR tab's input area (see the module docstring); its progress bar.

    Attributes (the tab shares them): ``info_label``, ``paste_button``, ``fit_button``,
    ``zoom_in_button``, ``zoom_out_button``, ``pan_button``, ``mask_button``,
    ``whole_button``, ``progress_bar`` / ``progress_cancel`` / ``progress_row``, ``view``
    (``ImageView``), ``readings`` (``ReadingsTable``), ``input_splitter``.
    """

    def __init__(self, tab: Any) -> None:
        """The buttons row and the model row, the info line and the progress bar, then the
        image over the readings table."""
        super().__init__()
        self.info_label = QLabel(EMPTY_MESSAGE)
        self.info_label.setWordWrap(True)
        tab.make_model_picker(
            "bundled: our attention decoder on EasyOCR's english_g2 recogniser (offline). Or type a transformers "
            "TrOCR model id (microsoft/trocr-small-printed) or a local folder saved with save_pretrained, and "
            "press Enter or Load."
        )
        row2 = QHBoxLayout()
        row2.addWidget(QLabel("model"))
        row2.addWidget(tab.model_combo, 1)
        row2.addWidget(tab.load_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addWidget(QLabel("<b>Input</b> — image (drop or paste one here; drag a box on it to read one region)"))
        lay.addLayout(self._build_buttons_row(tab))
        lay.addLayout(row2)
        lay.addWidget(self.info_label)
        lay.addWidget(self._build_progress_row(tab))
        lay.addWidget(self._build_image_and_table(tab), 1)

    def _build_buttons_row(self, tab: Any) -> QHBoxLayout:
        """Open…, Paste, Sample · Fit, −, +, Pan · Whole image (the view's buttons are
        connected in ``_build_image_and_table``)."""
        tab.make_file_buttons(f"Open an image: {FORMATS} (Ctrl+O); or drop one anywhere on this tab",
                              f"Open the bundled sample image from {SAMPLES_DIR}")
        self.paste_button = QPushButton("Paste")
        self.paste_button.setToolTip("Paste a clipboard image (e.g. a screenshot) or a copied image file (Ctrl+V)")
        self.paste_button.clicked.connect(tab.paste)
        self.fit_button = _tool_button("Fit", "Fit the whole image into the view (the mouse wheel zooms)")
        self.zoom_in_button = _tool_button("+", "Zoom in (or turn the mouse wheel)")
        self.zoom_out_button = _tool_button("−", "Zoom out")
        # plain text: "✋" is missing from common UI fonts (a box)
        self.pan_button = _tool_button("Pan", "On: a left drag pans the image. Off: a left drag selects a region "
                                              "to read (pan with the middle button or Shift+drag)")
        self.pan_button.setCheckable(True)
        self.whole_button = QPushButton("Whole image")
        self.whole_button.setToolTip("Read the whole image again after a region was selected")
        self.whole_button.clicked.connect(lambda: tab.set_region(None))
        self.mask_button = tab.mask.make_mask_button()  # Mask: a drag blanks for the what-if
        row = QHBoxLayout()
        for b in (tab.open_button, self.paste_button, tab.sample_button):
            row.addWidget(b)
        row.addSpacing(10)
        for b in (self.fit_button, self.zoom_out_button, self.zoom_in_button, self.pan_button,
                  self.mask_button):
            row.addWidget(b)
        row.addSpacing(10)
        row.addWidget(self.whole_button)
        row.addStretch(1)
        return row

    def _build_progress_row(self, tab: Any) -> QWidget:
        """Where a load or a run stands (load stage i of n, CRAFT tile i of n, line i of n),
        with its own Cancel; hidden while idle."""
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(True)
        self.progress_bar.setToolTip("Loading the model, detecting text lines (tile by tile for very large "
                                     "images), reading line by line, then english_g2's CTC reading")
        self.progress_cancel = QPushButton("Cancel")
        self.progress_cancel.setToolTip("Stop now: between two lines (or two detection tiles) at the latest")
        self.progress_cancel.clicked.connect(tab.cancel)
        self.progress_row = QWidget()
        prow = QHBoxLayout(self.progress_row)
        prow.setContentsMargins(0, 0, 0, 0)
        prow.addWidget(self.progress_bar, 1)
        prow.addWidget(self.progress_cancel)
        self.progress_row.hide()
        return self.progress_row

    def _build_image_and_table(self, tab: Any) -> QSplitter:
        """The image view (line boxes, region, attention) over the readings table."""
        self.view = ImageView()
        self.view.regionSelected.connect(tab.mask.image_dragged)  # the region to read, or in Mask mode the mask
        self.fit_button.clicked.connect(self.view.fit)
        self.zoom_in_button.clicked.connect(lambda: self.view.zoom_by(1.25))
        self.zoom_out_button.clicked.connect(lambda: self.view.zoom_by(0.8))
        self.pan_button.toggled.connect(self.view.set_pan_mode)
        self.readings = ReadingsTable()
        self.input_splitter = QSplitter(Qt.Orientation.Vertical)
        self.input_splitter.addWidget(self.view)
        self.input_splitter.addWidget(self.readings)
        self.input_splitter.setStretchFactor(0, 3)
        self.input_splitter.setStretchFactor(1, 1)
        self.input_splitter.setChildrenCollapsible(False)
        self.input_splitter.setSizes([200, 100])
        return self.input_splitter

    def show_stage(self, value: int, maximum: int, text: str) -> None:
        """Show ``value`` of ``maximum`` with ``text`` in the progress bar (shown)."""
        maximum = max(1, int(maximum))
        self.progress_bar.setRange(0, maximum)
        self.progress_bar.setValue(max(0, min(int(value), maximum)))
        self.progress_bar.setFormat(f"{text} (%v/%m)")
        self.progress_row.show()

    def progress_state(self) -> tuple[bool, int, int, str]:
        """(shown, value, maximum, text) of the progress bar."""
        bar = self.progress_bar
        return (not self.progress_row.isHidden(), bar.value(), bar.maximum(), bar.text())


def _tool_button(text: str, tip: str) -> QToolButton:
    b = QToolButton()
    b.setText(text)
    b.setToolTip(tip)
    return b
