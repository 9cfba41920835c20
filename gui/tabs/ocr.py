"""The OCR tab: open, drop or paste an image, watch an encoder-decoder read its lines.

Input: Open… (PNG, JPEG, WebP, BMP, TIFF), a file or image dropped anywhere on the tab,
Ctrl+V / Paste (a clipboard image such as a screenshot, or copied image files / paths /
``file://`` URLs) and Sample (``assets/samples/ocr_en.png``). Files are read by
``core.tasks.ocr.load_image`` in a worker thread (huge images are downscaled there).

Models (``core.tasks.ocr.OCRModel.load``, imported in the loader thread so the window
never waits for torch): "bundled" (our attention decoder on EasyOCR's english_g2
encoder) or a transformers TrOCR id / local directory typed into the model box.

Decoding runs in a worker thread: CRAFT line detection (cached per image and region),
then the lines one after another into one token stream (one segment per line), then
english_g2's own CTC reading of each line (cached) for the comparison table. An option
change re-decodes from the cached detection and encoder output.

The image view (``gui.widgets.image_view.ImageView``) shows the line boxes numbered in
reading order; a left-button drag selects a region to read alone (``OCRModel.decode(...,
region=(x, y, w, h))``), "Whole image" resets it. The selected (or newest) token's
cross-attention is drawn on the image over its line: each encoder column's x range
(``TextLine.column_x``) tinted in viridis by the attention of the heatmap's chosen
layer/head (normalised to its maximum), the argmax column outlined in orange.

Heatmap: rows = tokens, columns = encoder columns of the token's own line (every line
starts at column 0; a white line separates the lines' rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSettings, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QImage, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from core.events import Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions

from ..widgets.attention_heatmap import reduce_attention
from ..widgets.image_view import ImageView, array_from_qimage, qimage_from_array
from .base import DecodeTab

BUNDLED = ("bundled",)
DEFAULT_MODEL = "bundled"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")
FORMATS = "PNG, JPEG, WebP, BMP or TIFF"
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "samples"
COLUMN_AXIS = "encoder column of the token's own line (1 column ≈ 4 px of the line scaled to 64 px high)"
EMPTY_MESSAGE = f"No image yet — open a {FORMATS} file, drop one here, paste a screenshot (Ctrl+V) or press Sample."
CTC_HEADER = "CTC reading (english_g2)"
#: the readings table's columns
COL_LINE, COL_PATH, COL_ATTN, COL_CTC = range(4)
#: what the "found by" column says for each ``TextLine.path`` (``core.tasks.ocr.PATH_*``)
PATH_TIPS = {
    "detected": "a CRAFT text box",
    "detected + ink": "a CRAFT box, widened over ink beside it that CRAFT missed",
    "whole image": "the image looks like one line of text: read whole (CRAFT not run)",
    "region": "the selected region looks like one line of text: read whole (CRAFT not run)",
    "uncovered ink": "text-like ink that no CRAFT box covered",
}


def first_image_sample(directory: Path = SAMPLES_DIR) -> Path | None:
    """The first image (by name) in ``assets/samples/``, or None."""
    if not directory.is_dir():
        return None
    imgs = sorted(p for p in directory.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    return imgs[0] if imgs else None


def no_text_message(region: tuple[int, int, int, int] | None) -> str:
    """The banner text when detection finds no text (in the whole image or in ``region``)."""
    if region is not None:
        x, y, w, h = region
        return (f"No text found in the selected region ({w}×{h} px at {x}, {y}). "
                "Drag a larger box around a text line, or press Whole image.")
    return ("No text found in the image. Open an image with printed text (e.g. a screenshot or a photo of a page); "
            "very small text reads better when cropped and enlarged.")


def line_labels(lines: list) -> list[str]:
    """Row labels of the readings table: the image line's number, with a letter for the
    parts of a long line cut at word gaps ("1", "2a", "2b", "3")."""
    labels: list[str] = []
    n, parts = 0, []
    for line in lines:
        if not getattr(line, "continues_previous", False) or n == 0:
            n += 1
            parts = [len(labels)]
            labels.append(str(n))
        else:
            parts.append(len(labels))
            labels.append("")
            for k, row in enumerate(parts):
                labels[row] = f"{n}{chr(ord('a') + k) if k < 26 else k + 1}"
    return labels


@dataclass(frozen=True)
class LinesDetected:
    """Worker -> tab: the detected lines (``core.tasks.ocr.TextLine``) for detection key ``key``."""

    key: Hashable
    lines: list


@dataclass(frozen=True)
class Stage:
    """Worker -> tab: where the run stands, for the progress bar.

    Attributes:
        stage: "detect" (CRAFT, ``done`` tiles of ``total``) or "compare" (english_g2's
            CTC reading, ``done`` lines of ``total``); the model load and the reading of
            the lines are followed from their own signals and events.
        done, total: steps finished, steps in all.
        text: the bar's text.
    """

    stage: str
    done: int
    total: int
    text: str


@dataclass(frozen=True)
class CTCReadings:
    """Worker -> tab: english_g2's CTC reading of each line of detection ``key`` ("" where empty)."""

    key: Hashable
    readings: list[str]


def _default_loader(source: Any) -> Any:
    from core.tasks.ocr import load_image  # Pillow + our checks; imported in the worker thread

    return load_image(source)


def mime_image_paths(mime) -> list[str]:
    """Local files named by ``mime``: its URL list, or text lines that are paths or ``file://`` URLs."""
    out: list[str] = []
    if mime.hasUrls():
        out = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
    if not out and mime.hasText():
        for line in mime.text().splitlines():
            s = line.strip().strip('"')
            if not s:
                continue
            p = QUrl(s).toLocalFile() if s.startswith("file:") else s
            if p and Path(p).is_file():
                out.append(p)
    return out


class OCRTab(DecodeTab):
    """OCR with an attention decoder (see module docstring).

    Signals:
        stageProgress(str, int, int, str): the progress bar changed: (stage, value,
            maximum, text); stage "load" (model load stage i of n), "detect" (CRAFT tile
            i of n), "read" (line i of n read), "compare" (CTC reading of line i of n).
            Emitted in this order within a run; the bar hides when the run ends.
    """

    stageProgress = Signal(str, int, int, str)
    #: worker thread -> GUI thread: a model-load stage (done, total, text)
    _loadStage = Signal(int, int, str)

    title = "OCR"
    settings_key = "ocr"
    #: the image and the readings table need more height than the base layout's default
    main_splitter_sizes = (380, 160, 310)

    def __init__(self, parent: QWidget | None = None) -> None:
        self.image: Any = None  # PIL.Image.Image (RGB) being read
        self.source_name = ""
        self.region: tuple[int, int, int, int] | None = None
        self.lines: list = []  # TextLine of the current detection, reading order
        self._generation = 0  # bumps with every new image (detection cache key)
        self._lines_cache: dict[Hashable, list] = {}
        self._ctc_cache: dict[Hashable, list[str]] = {}
        self._line_texts: list[str] = []
        self._separators: list[Any] = []
        self._file_job = None
        #: the image loader (``core.tasks.ocr.load_image``); tests may replace it
        self.image_loader: Callable[[Any], Any] = _default_loader
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.paste_action = QAction("Paste image", self)
        self.paste_action.setShortcut(QKeySequence.StandardKey.Paste)
        self.paste_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.paste_action.triggered.connect(self.paste)
        self.addAction(self.paste_action)
        self.heatmap.layer_combo.currentIndexChanged.connect(lambda _i: self._refresh_overlay())
        self.heatmap.head_combo.currentIndexChanged.connect(lambda _i: self._refresh_overlay())
        # the readings table shows the decoded text line by line: no second copy under the chips
        self.stream.set_text_visible(False)
        self._loadStage.connect(self._on_load_stage)
        self.busyChanged.connect(self._on_busy)
        self._update_buttons()

    # ------------------------------------------------------------ input area
    def build_input(self) -> QWidget:
        w = QWidget()
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip(f"Open an image: {FORMATS} (Ctrl+O); or drop one anywhere on this tab")
        self.open_button.clicked.connect(self.open_input)
        self.paste_button = QPushButton("Paste")
        self.paste_button.setToolTip("Paste a clipboard image (e.g. a screenshot) or a copied image file (Ctrl+V)")
        self.paste_button.clicked.connect(self.paste)
        self.sample_button = QPushButton("Sample")
        self.sample_button.setToolTip(f"Open the bundled sample image from {SAMPLES_DIR}")
        self.sample_button.clicked.connect(self.load_sample)
        self.fit_button = QToolButton()
        self.fit_button.setText("Fit")
        self.fit_button.setToolTip("Fit the whole image into the view (the mouse wheel zooms)")
        self.zoom_in_button = QToolButton()
        self.zoom_in_button.setText("+")
        self.zoom_in_button.setToolTip("Zoom in (or turn the mouse wheel)")
        self.zoom_out_button = QToolButton()
        self.zoom_out_button.setText("−")
        self.zoom_out_button.setToolTip("Zoom out")
        self.pan_button = QToolButton()
        self.pan_button.setText("Pan")  # plain text: "✋" is missing from common UI fonts (a box)
        self.pan_button.setCheckable(True)
        self.pan_button.setToolTip("On: a left drag pans the image. Off: a left drag selects a region to read "
                                   "(pan with the middle button or Shift+drag)")
        self.whole_button = QPushButton("Whole image")
        self.whole_button.setToolTip("Read the whole image again after a region was selected")
        self.whole_button.clicked.connect(lambda: self.set_region(None))

        self.model_combo = QComboBox()
        self.model_combo.setEditable(True)
        self.model_combo.addItems(list(BUNDLED))
        self.model_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.model_combo.setMinimumContentsLength(16)
        self.model_combo.setToolTip(
            "bundled: our attention decoder on EasyOCR's english_g2 recogniser (offline). Or type a transformers "
            "TrOCR model id (microsoft/trocr-small-printed) or a local folder saved with save_pretrained, and "
            "press Enter or Load."
        )
        self.model_combo.activated.connect(lambda _i: self.load_model(self.model_combo.currentText()))
        self.model_combo.lineEdit().returnPressed.connect(lambda: self.load_model(self.model_combo.currentText()))
        self.load_button = QPushButton("Load")
        self.load_button.setToolTip("Load the model named on the left")
        self.load_button.clicked.connect(lambda: self.load_model(self.model_combo.currentText()))

        self.info_label = QLabel(EMPTY_MESSAGE)
        self.info_label.setWordWrap(True)

        # where a load or a run stands: load stage i of n, CRAFT tile i of n, line i of n
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(True)
        self.progress_bar.setToolTip("Loading the model, detecting text lines (tile by tile for very large "
                                     "images), reading line by line, then english_g2's CTC reading")
        self.progress_cancel = QPushButton("Cancel")
        self.progress_cancel.setToolTip("Stop now: between two lines (or two detection tiles) at the latest")
        self.progress_cancel.clicked.connect(self.cancel)
        self.progress_row = QWidget()
        prow = QHBoxLayout(self.progress_row)
        prow.setContentsMargins(0, 0, 0, 0)
        prow.addWidget(self.progress_bar, 1)
        prow.addWidget(self.progress_cancel)
        self.progress_row.hide()

        self.view = ImageView()
        self.view.regionSelected.connect(self.set_region)
        self.fit_button.clicked.connect(self.view.fit)
        self.zoom_in_button.clicked.connect(lambda: self.view.zoom_by(1.25))
        self.zoom_out_button.clicked.connect(lambda: self.view.zoom_by(0.8))
        self.pan_button.toggled.connect(self.view.set_pan_mode)

        self.readings = QTableWidget(0, 4)
        self.readings.setHorizontalHeaderLabels(["line", "found by", "attention decoder", CTC_HEADER])
        self.readings.verticalHeader().hide()
        self.readings.verticalHeader().setDefaultSectionSize(self.readings.fontMetrics().height() + 6)
        self.readings.setMinimumHeight(92)
        self.readings.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.readings.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.readings.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        hh = self.readings.horizontalHeader()
        hh.setSectionResizeMode(COL_LINE, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(COL_PATH, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(COL_ATTN, QHeaderView.ResizeMode.Stretch)
        hh.setSectionResizeMode(COL_CTC, QHeaderView.ResizeMode.Stretch)
        self.readings.horizontalHeaderItem(COL_PATH).setToolTip(
            "How the line was found: detected (CRAFT box) · detected + ink (widened over ink CRAFT missed) · "
            "whole image / region (one line, read whole) · uncovered ink (text CRAFT missed)")
        self.readings.setToolTip("Each detected line read by the attention decoder (live) and by english_g2's own "
                                 "CTC head, for comparison. Click a row to select the line's first token.")
        self.readings.cellClicked.connect(lambda r, _c: self._line_clicked(r))

        self.input_splitter = QSplitter(Qt.Orientation.Vertical)
        self.input_splitter.addWidget(self.view)
        self.input_splitter.addWidget(self.readings)
        self.input_splitter.setStretchFactor(0, 3)
        self.input_splitter.setStretchFactor(1, 1)
        self.input_splitter.setChildrenCollapsible(False)
        self.input_splitter.setSizes([200, 100])

        row1 = QHBoxLayout()
        for b in (self.open_button, self.paste_button, self.sample_button):
            row1.addWidget(b)
        row1.addSpacing(10)
        for b in (self.fit_button, self.zoom_out_button, self.zoom_in_button, self.pan_button):
            row1.addWidget(b)
        row1.addSpacing(10)
        row1.addWidget(self.whole_button)
        row1.addStretch(1)
        row2 = QHBoxLayout()
        row2.addWidget(QLabel("model"))
        row2.addWidget(self.model_combo, 1)
        row2.addWidget(self.load_button)
        lay = QVBoxLayout(w)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addWidget(QLabel("<b>Input</b> — image (drop or paste one here; drag a box on it to read one region)"))
        lay.addLayout(row1)
        lay.addLayout(row2)
        lay.addWidget(self.info_label)
        lay.addWidget(self.progress_row)
        lay.addWidget(self.input_splitter, 1)
        return w

    def configure_heatmap(self) -> None:
        self.heatmap.set_columns(COLUMN_AXIS, 1.0)

    # --------------------------------------------------------------- input
    def has_input(self) -> bool:
        return self.image is not None

    def set_image(self, image: Any, name: str) -> None:
        """Read ``image`` (a PIL image as ``core.tasks.ocr.load_image`` returns it): show it and decode it."""
        rgb = np.asarray(image.convert("RGB") if getattr(image, "mode", "RGB") != "RGB" else image, dtype=np.uint8)
        self.image = image
        self.source_name = name
        self._generation += 1
        self._lines_cache.clear()
        self._ctc_cache.clear()
        self.region = None
        self._selected_step = None
        self.view.set_image(qimage_from_array(rgb))
        self._set_lines([])
        self.stream.clear()
        self.heatmap.clear()
        self.topk.set_step(None)
        h, w = rgb.shape[:2]
        note = getattr(image, "info", {}).get("downscaled_from") if hasattr(image, "info") else None
        extra = f" (downscaled from {note[0]}×{note[1]})" if isinstance(note, (tuple, list)) and len(note) == 2 else ""
        self.info_label.setText(f"{name} · {w}×{h} px{extra}")
        self.clear_error()
        self._update_buttons()
        if self.model is None and not self.is_loading():
            self.statusMessage.emit("Image ready — load a model to read it")
        self.request_decode()

    def set_region(self, region: tuple[int, int, int, int] | None) -> None:
        """Read only ``region`` ((x, y, w, h) image pixels), or the whole image (None)."""
        if not self.has_input():
            return
        self.region = tuple(int(v) for v in region) if region is not None else None
        self._selected_step = None
        self.view.set_region(self.region)
        self._update_buttons()
        if self.region is not None:
            x, y, w, h = self.region
            self.statusMessage.emit(f"Reading the region {w}×{h} px at ({x}, {y}) — Whole image resets")
        self.request_decode()

    def open_input(self) -> None:
        """Ctrl+O: pick an image file."""
        start = str(QSettings().value("ocr/last_dir", str(Path.home())))
        pattern = " ".join(f"*{s}" for s in IMAGE_SUFFIXES)
        path, _ = QFileDialog.getOpenFileName(self, "Open image", start, f"Images ({pattern});;All files (*)")
        if path:
            QSettings().setValue("ocr/last_dir", str(Path(path).parent))
            self.open_file(path)

    def open_file(self, path: str | Path) -> None:
        """Load an image file in a worker thread; errors go to the banner."""
        path = Path(path)
        self._open(path, path.name, lambda m: _open_error(path.name, _name_only(m, path)))

    def open_image(self, image: Any, name: str = "pasted image") -> None:
        """Use a PIL image (e.g. from the clipboard); it goes through the same checks as a file."""
        self._open(image, name, lambda m: f"Could not use the {name}: {m}")

    def _open(self, source: Any, name: str, message: Callable[[str], str]) -> None:
        from ..worker import start_worker

        loader = self.image_loader

        def gen(cancel):
            yield loader(source)

        self.statusMessage.emit(f"Opening {name}…")
        self._file_job = start_worker(
            gen,
            on_event=lambda img: self.set_image(img, name),
            on_error=lambda m: self.show_error(message(m)),
            name="open-image",
        )

    def open_mime(self, mime, what: str = "clipboard") -> bool:
        """Open what ``mime`` holds: the first local file it names, else its image. False (and a
        banner) when it holds neither."""
        paths = mime_image_paths(mime)
        if paths:
            self.open_file(paths[0])
            return True
        if mime.hasImage():
            img = mime.imageData()
            if not isinstance(img, QImage):
                img = QImage(img)
            try:
                from PIL import Image

                pil = Image.fromarray(array_from_qimage(img))
            except ValueError as exc:
                self.show_error(f"The {what} image could not be read ({exc}). Copy the image again and paste it.")
                return False
            self.open_image(pil, "pasted image" if what == "clipboard" else "dropped image")
            return True
        if mime.hasUrls():
            self.show_error(f"Only local files can be opened; save the image to disk first and open it ({FORMATS}).")
            return False
        self.show_error(f"The {what} holds no image. Copy an image (e.g. take a screenshot) or an image file "
                        f"({FORMATS}), then paste with Ctrl+V.")
        return False

    def paste(self) -> bool:
        """Ctrl+V: open the clipboard's image or image file."""
        return self.open_mime(QApplication.clipboard().mimeData(), "clipboard")

    def load_sample(self) -> None:
        """Open the first image in assets/samples/."""
        p = first_image_sample()
        if p is None:
            self.show_error(f"No sample image found: put a PNG into {SAMPLES_DIR}.")
            return
        self.open_file(p)

    def _update_buttons(self) -> None:
        has = self.has_input()
        self.whole_button.setEnabled(has and self.region is not None)
        for b in (self.fit_button, self.zoom_in_button, self.zoom_out_button, self.pan_button):
            b.setEnabled(has)
        self.sample_button.setEnabled(first_image_sample() is not None)

    # drag and drop (anywhere on the tab; the image view passes drops up)
    def dragEnterEvent(self, e) -> None:  # noqa: N802
        mime = e.mimeData()
        if mime.hasImage() or any(u.isLocalFile() for u in mime.urls()):
            e.acceptProposedAction()
        else:
            e.ignore()

    def dragMoveEvent(self, e) -> None:  # noqa: N802
        self.dragEnterEvent(e)

    def dropEvent(self, e) -> None:  # noqa: N802
        if self.open_mime(e.mimeData(), "dropped data"):
            e.acceptProposedAction()

    # --------------------------------------------------------------- model
    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        from core.tasks.ocr import OCRModel  # torch is imported here, off the GUI thread

        # stages (reader, CTC head, EasyOCR import, CRAFT) go to the bar through a queued signal
        return OCRModel.load(name, progress=progress, stage=self._loadStage.emit)

    def load_model(self, name: str) -> None:
        name = name.strip()
        if not name:
            self.show_error("Enter a model: 'bundled', a transformers TrOCR model id or a local folder.")
            return
        self.model_combo.setCurrentText(name)
        self._lines_cache.clear()
        self._ctc_cache.clear()
        super().load_model(name)

    def initial_model(self) -> str:
        """The model to load on start: the last one used, else "bundled"."""
        return self.model_combo.currentText().strip() or DEFAULT_MODEL

    # --------------------------------------------------------------- decode
    def _key(self) -> Hashable:
        return (self._generation, self.region)

    def decode_fn(self, options: DecodingOptions) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        model, image, region, key = self.model, self.image, self.region, self._key()
        lines = self._lines_cache.get(key)
        ctc = self._ctc_cache.get(key)
        # this run's views: the cached detection at once, else the boxes arrive with LinesDetected
        self._set_lines(lines or [], ctc)
        self._reset_heatmap_columns()
        self.view.clear_attention()
        if lines is not None:
            self._show_stage("read", 0, len(lines), f"reading line 1 of {len(lines)}")
        else:
            self._show_stage("detect", 0, 1, "detecting text lines")

        def gen(cancel):
            found = lines
            if found is None:
                found = yield from _detect(model, image, region, cancel)
                yield LinesDetected(key, found)
                if not found:
                    raise ValueError(no_text_message(region))
            fin = None
            for ev in model.decode(image, options, lines=found, region=region, cancel=cancel):
                if isinstance(ev, Finished):
                    fin = ev  # sent after the CTC readings, so decodeFinished sees a complete table
                    continue
                yield ev
            if ctc is None and fin is not None and not fin.cancelled and getattr(model, "has_ctc", False):
                readings = []
                for i, line in enumerate(found):
                    yield Stage("compare", i, len(found), f"CTC reading (comparison), line {i + 1} of {len(found)}")
                    if cancel():
                        break
                    readings.append(model.ctc_reading(image, line))
                else:
                    yield CTCReadings(key, readings)
            if fin is not None:
                yield fin

        return gen

    def decode_events(self, options: DecodingOptions, cancel: Callable[[], bool]) -> Iterator[Any]:
        return self.decode_fn(options)(cancel)

    def _on_event(self, ev: Any) -> None:
        if isinstance(ev, Stage):
            self._show_stage(ev.stage, ev.done, ev.total, ev.text)
            return
        if isinstance(ev, LinesDetected):
            self._lines_cache[ev.key] = ev.lines
            if ev.key == self._key():
                self._set_lines(ev.lines)
                if ev.lines:
                    self._show_stage("read", 0, len(ev.lines), f"reading line 1 of {len(ev.lines)}")
            return
        if isinstance(ev, CTCReadings):
            self._ctc_cache[ev.key] = ev.readings
            if ev.key == self._key():
                self._show_ctc(ev.readings)
            return
        if isinstance(ev, SegmentEvent):
            n = len(self.lines)
            if n:
                self._show_stage("read", ev.segment, n, f"reading line {ev.segment + 1} of {n}")
            # the heatmap has a row per token so far (counted here: its view may catch up later)
            if ev.segment > 0 and self._steps:
                self._add_separator(len(self._steps))
            self.view.set_current_line(ev.segment)
            if ev.segment < self.readings.rowCount():
                self.readings.selectRow(ev.segment)
        super()._on_event(ev)
        if isinstance(ev, StepEvent):
            seg = ev.segment
            if 0 <= seg < len(self._line_texts):
                self._line_texts[seg] += ev.text
                self._set_cell(seg, COL_ATTN, self._line_texts[seg])
            if self._selected_step is None:
                self._show_attention(ev.step)
        elif isinstance(ev, Finished) and not ev.cancelled:
            if self._selected_step is not None and self._selected_step not in self._steps:
                self._follow_newest()  # the selected token is not in this (shorter) run
            parts = ev.text.split("\n")
            if len(parts) == len(self._line_texts):  # the model's final text per line (beam search, cleanup)
                self._line_texts = parts
                for i, t in enumerate(parts):
                    self._set_cell(i, COL_ATTN, t)

    # ------------------------------------------------------------ progress
    def _show_stage(self, stage: str, value: int, maximum: int, text: str) -> None:
        """Show ``value`` of ``maximum`` with ``text`` in the tab's progress bar and the
        status bar (busyChanged); emits stageProgress."""
        maximum = max(1, int(maximum))
        self.progress_bar.setRange(0, maximum)
        self.progress_bar.setValue(max(0, min(int(value), maximum)))
        self.progress_bar.setFormat(f"{text} (%v/%m)")
        self.progress_row.show()
        self.busyChanged.emit(True, text[:1].upper() + text[1:] + "…")
        self.stageProgress.emit(stage, int(value), maximum, text)

    def _on_load_stage(self, done: int, total: int, text: str) -> None:
        if self.is_loading():
            self._show_stage("load", done, total, text)

    def _on_busy(self, busy: bool, _text: str) -> None:
        if not busy:
            self.progress_row.hide()

    def progress_state(self) -> tuple[bool, int, int, str]:
        """(shown, value, maximum, text) of the tab's progress bar."""
        bar = self.progress_bar
        return (not self.progress_row.isHidden(), bar.value(), bar.maximum(), bar.text())

    def select_step(self, step: int) -> None:
        super().select_step(step)
        self._show_attention(step)

    def _follow_newest(self) -> None:
        """Drop the token selection: the views follow the newest token again."""
        self._selected_step = None
        self.stream.select_step(None)
        self.heatmap.select_step(None)
        latest = self._steps.get(self._latest_step) if self._latest_step is not None else None
        self.topk.set_step(latest)
        self._show_attention(self._latest_step)

    # ------------------------------------------------------------ line views
    def _set_lines(self, lines: list, ctc: list[str] | None = None) -> None:
        """Show ``lines`` (boxes on the image, one table row each); texts start empty."""
        self.lines = list(lines)
        self._line_texts = ["" for _ in self.lines]
        self.view.set_lines([tuple(line.box) for line in self.lines])
        for sep in self._separators:
            self.heatmap.plot.removeItem(sep)
        self._separators.clear()
        self.readings.setRowCount(len(self.lines))
        for i, label in enumerate(line_labels(self.lines)):
            path = getattr(self.lines[i], "path", "detected")
            self._set_cell(i, COL_LINE, label)
            self._set_cell(i, COL_PATH, path, PATH_TIPS.get(path, ""))
            self._set_cell(i, COL_ATTN, "")
            self._set_cell(i, COL_CTC, "")
        no_ctc = self.model is not None and not getattr(self.model, "has_ctc", False)
        self.readings.horizontalHeaderItem(COL_CTC).setText(f"{CTC_HEADER} — n/a for this model" if no_ctc else CTC_HEADER)
        if ctc is not None:
            self._show_ctc(ctc)

    def _show_ctc(self, readings: list[str]) -> None:
        for i, t in enumerate(readings[: self.readings.rowCount()]):
            self._set_cell(i, COL_CTC, t if t else "∅")

    def _set_cell(self, row: int, col: int, text: str, tip: str | None = None) -> None:
        item = self.readings.item(row, col)
        if item is None:
            item = QTableWidgetItem()
            self.readings.setItem(row, col, item)
        item.setText(text)
        if tip is not None:
            item.setToolTip(tip)

    def reading(self, row: int) -> tuple[str, str]:
        """(attention-decoder text, CTC text) of table row ``row``."""
        return tuple(self.readings.item(row, c).text() if self.readings.item(row, c) else "" for c in (COL_ATTN, COL_CTC))

    def line_path(self, row: int) -> str:
        """The "found by" cell of table row ``row`` (``TextLine.path``)."""
        item = self.readings.item(row, COL_PATH)
        return item.text() if item else ""

    def _reset_heatmap_columns(self) -> None:
        """Start the heatmap with no columns, so they fit this run's lines (the widget only grows them;
        the same reset as the Translation tab's)."""
        self.heatmap.reset_columns(COLUMN_AXIS, 1.0)

    def _add_separator(self, row: int) -> None:
        line = pg.InfiniteLine(pos=float(row), angle=0, pen=pg.mkPen("w", width=1.5))
        line.setZValue(6)
        self.heatmap.plot.addItem(line)
        self._separators.append(line)

    def _line_clicked(self, row: int) -> None:
        steps = sorted(s for s, ev in self._steps.items() if ev.segment == row)
        if steps:
            self.select_step(steps[0])

    def _show_attention(self, step: int | None) -> None:
        """Draw token ``step``'s cross-attention (the heatmap's layer/head) over its line on the image."""
        ev = self._steps.get(step) if step is not None else None
        if ev is None or ev.cross_attention is None or not (0 <= ev.segment < len(self.lines)):
            self.view.clear_attention()
            return
        line = self.lines[ev.segment]
        layer, head = self.heatmap.selection()
        vals = reduce_attention(ev.cross_attention, layer, head)
        ranges = [line.column_x(c) for c in range(len(vals))]
        self.view.set_attention(tuple(line.box), ranges, vals)
        self.view.set_current_line(ev.segment)

    def _refresh_overlay(self) -> None:
        step = self._selected_step if self._selected_step is not None else self._latest_step
        self._show_attention(step)

    # ------------------------------------------------------------ settings
    def save_settings(self, s: QSettings) -> None:
        super().save_settings(s)
        s.setValue("ocr/model", self.model_combo.currentText())
        s.setValue("ocr/input_splitter", self.input_splitter.saveState())

    def restore_settings(self, s: QSettings) -> None:
        super().restore_settings(s)
        model = s.value("ocr/model")
        if model:
            self.model_combo.setCurrentText(str(model))
        state = s.value("ocr/input_splitter")
        if state is not None:
            self.input_splitter.restoreState(state)


def _detect(model: Any, image: Any, region, cancel: Callable[[], bool]):
    """Run ``model``'s detection in the worker, yielding a :class:`Stage` per CRAFT tile
    (``OCRModel.detect_steps``; a model with only ``detect`` is run in one go); returns
    the lines (use with ``yield from``)."""
    steps = getattr(model, "detect_steps", None)
    if steps is None:
        return list(model.detect(image, region=region))
    it = steps(image, region=region, cancel=cancel)
    while True:
        try:
            p = next(it)
        except StopIteration as stop:
            return list(stop.value)
        yield Stage(p.stage, p.done, p.total, p.text)


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


def _open_error(name: str, message: str) -> str:
    """The banner text for an image that could not be opened, with what to do."""
    text = message if name in message else f"Could not open {name}: {message}"
    if "webp" not in text.lower():  # the loader's message does not list the formats yet
        text += f"\nOpen a {FORMATS} image with text in it."
    return text
