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

from pathlib import Path
from typing import Any, Callable, Hashable

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QAction, QImage, QKeySequence
from PySide6.QtWidgets import QApplication, QWidget

from core.catalog import OCR_BUNDLED, OCR_DEFAULT
from core.events import Finished, SegmentEvent, StepEvent
from core.inputs.types import ImageInput, rgb_digest
from core.options import DecodingOptions

from ..widgets.image_view import qimage_from_array  # noqa: F401 - re-exported
from ..widgets.readings_table import COL_PATH, PATH_TIPS, line_labels  # noqa: F401 - re-exported
from .base import SAMPLES_DIR, DecodeTab, RunFn, first_file, local_files
from .image_input import (
    IMAGE_SUFFIXES,
    default_loader,
    display_image,
    file_error,
    mime_content,
)
from .ocr_input_area import EMPTY_MESSAGE, OCRInputArea
from .ocr_lines import LineViews  # noqa: F401 - EMPTY_MESSAGE re-exported
from .ocr_run import CTCReadings, LinesDetected, Stage, read_image
from .whatif_inputs import ImageMask

COLUMN_AXIS = "encoder column of the token's own line (1 column ≈ 4 px of the line scaled to 64 px high)"


def first_image_sample(directory: Path = SAMPLES_DIR) -> Path | None:
    """The first image (by name) in ``assets/samples/``, or None."""
    return first_file(IMAGE_SUFFIXES, directory)


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
    file_kind, file_suffixes, open_title = "Images", IMAGE_SUFFIXES, "Open image"
    sample_suffixes = IMAGE_SUFFIXES
    sample_missing = "No sample image found: put a PNG into {folder}."
    bundled_models, default_model = (OCR_BUNDLED,), OCR_DEFAULT
    empty_model_message = "Enter a model: 'bundled', a transformers TrOCR model id or a local folder."
    encoder_reads = "an image, not tokens"
    mask_hint = ImageMask.mask_hint

    def __init__(self, parent: QWidget | None = None) -> None:
        self.image: Any = None  # PIL.Image.Image (RGB) being read
        self.source_name = ""
        self.region: tuple[int, int, int, int] | None = None
        #: the detected lines: boxes on the image, the readings table, the overlay (gui/tabs/ocr_lines.py)
        self.line_views = LineViews(self)
        self._generation = 0  # bumps with every new image (detection cache key)
        self._pixel_hash = None  # (generation, sha256 of the RGB pixels, their shape): input_identity's
        self._lines_cache: dict[Hashable, list] = {}
        self._ctc_cache: dict[Hashable, list[str]] = {}
        #: the image loader (``core.tasks.ocr.load_image``); tests may replace it
        self.image_loader: Callable[[Any], Any] = default_loader
        self.mask = ImageMask(self)  # the what-if's blanked box (gui/tabs/whatif_inputs.py)
        super().__init__(parent)
        self.paste_action = QAction("Paste image", self)
        self.paste_action.setShortcut(QKeySequence.StandardKey.Paste)
        self.paste_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.paste_action.triggered.connect(self.paste)
        self.addAction(self.paste_action)
        self.heatmap.viewChanged.connect(self.line_views.refresh)
        # the readings table shows the decoded text line by line: no second copy under the chips
        self.stream.set_text_visible(False)
        self._loadStage.connect(self._on_load_stage)
        self.busyChanged.connect(self._on_busy)
        self._update_buttons()

    # ------------------------------------------------------------ input area
    def build_input(self) -> QWidget:
        area = OCRInputArea(self)  # the rows, the progress bar, the image over the table (gui/tabs/ocr_input_area.py)
        # its controls are the tab's too (the window, the tests and the mask use them)
        self.info_label, self.paste_button, self.whole_button = area.info_label, area.paste_button, area.whole_button
        self.fit_button, self.zoom_in_button, self.zoom_out_button = area.fit_button, area.zoom_in_button, area.zoom_out_button
        self.pan_button, self.mask_button, self.progress_cancel = area.pan_button, area.mask_button, area.progress_cancel
        self.view, self.readings, self.input_splitter = area.view, area.readings, area.input_splitter
        self.readings.lineClicked.connect(self.line_views.clicked)
        return area

    def configure_heatmap(self) -> None:
        self.heatmap.set_columns(COLUMN_AXIS, 1.0)

    # --------------------------------------------------------------- input
    def has_input(self) -> bool:
        return self.image is not None

    def set_image(self, image: Any, name: str, shown: QImage | None = None,
                  digest: tuple[Any, tuple[int, ...]] | None = None) -> None:
        """Read ``image`` (a PIL image as ``core.tasks.ocr.load_image`` returns it): show it and decode it.

        ``shown``: its pixels as a QImage, made off the GUI thread (:func:`display_image`;
        for a 4096 x 4096 image the array and QImage copies took ~380 ms); made here when None.
        ``digest``: ``rgb_digest(image)``, made off the GUI thread too (the input's identity;
        ~110 ms for 4096 x 4096); made at the first ``input_identity`` when None.
        """
        if shown is None:
            shown = display_image(image)
        self.image = image
        self.source_name = name
        self._generation += 1
        if digest is not None:
            self._pixel_hash = (self._generation, *digest)
        self._lines_cache.clear()
        self._ctc_cache.clear()
        self.region = None
        self.run.select(None)
        self.view.set_image(shown)
        self.line_views.set_lines([])
        self.clear_run()  # the run's one clear path: the views follow the run's cleared signal
        w, h = shown.width(), shown.height()
        from core.inputs.images import size_note

        note = size_note(image, name) if hasattr(image, "info") else None
        original = image.info.get("downscaled_from") if note else None
        extra = f" (downscaled from {original[0]}×{original[1]} ⚠)" if note else ""
        self.info_label.setText(f"{name} · {w}×{h} px{extra}")
        self.info_label.setToolTip(note or "")  # why small text may be lost, and what to do
        self.clear_error()
        self._update_buttons()
        if note:
            self.statusMessage.emit(note)
        elif self.model is None and not self.is_loading():
            self.statusMessage.emit("Image ready — load a model to read it")
        self.request_decode()

    def set_region(self, region: tuple[int, int, int, int] | None) -> None:
        """Read only ``region`` ((x, y, w, h) image pixels), or the whole image (None)."""
        if not self.has_input():
            return
        self.region = tuple(int(v) for v in region) if region is not None else None
        self.run.select(None)
        self.view.set_region(self.region)
        self._update_buttons()
        if self.region is not None:
            x, y, w, h = self.region
            self.statusMessage.emit(f"Reading the region {w}×{h} px at ({x}, {y}) — Whole image resets")
        self.request_decode()

    def read_file(self, path: Path) -> bool:
        """Load an image file in a worker thread; errors go to the banner."""
        self._open(path, path.name, lambda m: file_error(path, m))
        return True

    def open_image(self, image: Any, name: str = "pasted image") -> None:
        """Use a PIL image (e.g. from the clipboard); it goes through the same checks as a file."""
        self._open(image, name, lambda m: f"Could not use the {name}: {m}")

    def _open(self, source: Any, name: str, message: Callable[[str], str]) -> None:
        """Load ``source`` in a worker (the run controller's slot "open": a later open supersedes it)."""
        from ..run_controller import Callbacks

        loader = self.image_loader

        def gen(cancel):
            img = loader(source)
            # the pixel copies for the view and the pixels' hash (the input's identity), here in the worker
            yield img, display_image(img), rgb_digest(img)

        self.statusMessage.emit(f"Opening {name}…")
        client = Callbacks(lambda loaded: self.set_image(loaded[0], name, loaded[1], loaded[2]),
                           lambda m: self.show_error(message(m)))
        self.controller.start("open", gen, client, name="open-image")

    def open_mime(self, mime, what: str = "clipboard") -> bool:
        """Open what ``mime`` holds: the first local file it names, else its image. False (and a
        banner) when it holds neither."""
        kind, content = mime_content(mime, what)
        if kind == "file":
            self.open_file(content)
        elif kind == "image":
            self.open_image(content, "pasted image" if what == "clipboard" else "dropped image")
        else:
            self.show_error(content)
        return kind != "error"

    def paste(self) -> bool:
        """Ctrl+V: open the clipboard's image or image file."""
        return self.open_mime(QApplication.clipboard().mimeData(), "clipboard")

    def _update_buttons(self) -> None:
        has = self.has_input()
        self.whole_button.setEnabled(has and self.region is not None)
        for b in (self.fit_button, self.zoom_in_button, self.zoom_out_button, self.pan_button):
            b.setEnabled(has)

    # drag and drop anywhere on the tab (the image view passes drops up): files and images
    def can_drop(self, mime) -> bool:
        return mime.hasImage() or bool(local_files(mime))

    def drop(self, mime) -> bool:
        return self.open_mime(mime, "dropped data")

    # --------------------------------------------------------------- model
    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        from core.tasks.ocr import (
            OCRModel,  # torch is imported here, off the GUI thread
        )

        # stages (reader, CTC head, EasyOCR import, CRAFT) go to the bar through a queued signal
        return OCRModel.load(name, progress=progress, stage=self._loadStage.emit)

    def load_model(self, name: str) -> None:
        self._lines_cache.clear()
        self._ctc_cache.clear()
        super().load_model(name)

    # --------------------------------------------------------------- decode
    def _key(self) -> Hashable:
        return (self._generation, self.region)

    def decode_fn(self, options: DecodingOptions) -> RunFn:
        key = self._key()
        lines = self._lines_cache.get(key)
        ctc = self._ctc_cache.get(key)
        # this run's views: the cached detection at once, else the boxes arrive with LinesDetected
        self.line_views.set_lines(lines or [], ctc)
        self.heatmap.reset_columns(COLUMN_AXIS, 1.0)  # columns fit this run's lines (the widget only grows them)
        self.view.clear_attention()
        if lines is not None:
            self._show_stage("read", 0, len(lines), f"reading line 1 of {len(lines)}")
        else:
            self._show_stage("detect", 0, 1, "detecting text lines")
        return read_image(self.model, self.image, self.region, key, options, lines, ctc)

    def task_input(self, purpose: str = "decode") -> ImageInput:
        """The image and region, with the lines of this image and region for lanes (detected
        in the worker when there are none yet) and the lines read for a fork or a what-if."""
        lines = None
        if purpose == "lanes":
            lines = self._lines_cache.get(self._key())
        elif purpose in ("fork", "what_if"):
            if not self.lines:
                raise ValueError(f"No text lines{' to fork' if purpose == 'fork' else ''}: read the image first.")
            lines = list(self.lines)
        return ImageInput(self.image, lines, self.region)

    def input_identity(self) -> tuple[str, str]:
        if self._pixel_hash is None or self._pixel_hash[0] != self._generation:
            # once per image: a 4096 x 4096 image's array and hash take ~0.5 s of the GUI thread
            self._pixel_hash = (self._generation, *rgb_digest(self.image))
        return self.task_input("identity").identity(self.source_name, self._pixel_hash[1:])

    def input_settings(self) -> dict:
        return {"region": list(self.region) if self.region is not None else None}

    def branch_replayed(self, branch: int) -> None:
        """The readings table, the heatmap's line separators and the overlay follow the shown branch."""
        self.line_views.replay(branch)

    def take_event(self, ev: Any) -> None:
        if isinstance(ev, Stage):
            self._show_stage(ev.stage, ev.done, ev.total, ev.text)
            return
        if isinstance(ev, LinesDetected):
            self._lines_cache[ev.key] = ev.lines
            if ev.key == self._key():
                self.line_views.set_lines(ev.lines)
                if ev.lines:
                    self._show_stage("read", 0, len(ev.lines), f"reading line 1 of {len(ev.lines)}")
            return
        if isinstance(ev, CTCReadings):
            self._ctc_cache[ev.key] = ev.readings
            if ev.key == self._key():
                self.readings.set_ctc(ev.readings)
            return
        if isinstance(ev, SegmentEvent):
            n = len(self.lines)
            if n:
                self._show_stage("read", ev.segment, n, f"reading line {ev.segment + 1} of {n}")
            self.line_views.segment_started(ev)
        super().take_event(ev)
        if isinstance(ev, StepEvent):
            self.line_views.step_added(ev)
        elif isinstance(ev, Finished) and not ev.cancelled:
            sel = self.run.selected()
            if sel is not None and sel not in self.run:
                self.follow_newest()  # the selected token is not in this (shorter) run
            self.line_views.finished(ev)

    # ------------------------------------------------------------ progress
    def _show_stage(self, stage: str, value: int, maximum: int, text: str) -> None:
        """Show ``value`` of ``maximum`` with ``text`` in the tab's progress bar and the
        status bar (busyChanged); emits stageProgress."""
        maximum = max(1, int(maximum))
        self.input_area.show_stage(value, maximum, text)
        self.busyChanged.emit(True, text[:1].upper() + text[1:] + "…")
        self.stageProgress.emit(stage, int(value), maximum, text)

    def _on_load_stage(self, done: int, total: int, text: str) -> None:
        if self.is_loading():
            self._show_stage("load", done, total, text)

    def _on_busy(self, busy: bool, _text: str) -> None:
        if not busy:
            self.input_area.progress_row.hide()

    def progress_state(self) -> tuple[bool, int, int, str]:
        """(shown, value, maximum, text) of the tab's progress bar."""
        return self.input_area.progress_state()

    def select_step(self, step: int) -> None:
        super().select_step(step)
        self.line_views.show_attention(step)

    def follow_newest(self) -> None:
        super().follow_newest()
        self.line_views.show_attention(self.run.latest())

    # ------------------------------------------------------------ line views
    @property
    def lines(self) -> list:
        """The ``TextLine``s of the current detection, in reading order (``LineViews.lines``)."""
        return self.line_views.lines

    def reading(self, row: int) -> tuple[str, str]:
        """(attention-decoder text, CTC text) of table row ``row``."""
        return self.readings.reading(row)

    def line_path(self, row: int) -> str:
        """The "found by" cell of table row ``row`` (``TextLine.path``)."""
        return self.readings.line_path(row)

    # ------------------------------------------------------------ settings
    def save_settings(self, s: QSettings) -> None:
        super().save_settings(s)
        s.setValue("ocr/input_splitter", self.input_splitter.saveState())

    def restore_settings(self, s: QSettings) -> None:
        super().restore_settings(s)
        state = s.value("ocr/input_splitter")
        if state is not None:
            self.input_splitter.restoreState(state)
