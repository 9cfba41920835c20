"""OCR attention reader: EasyOCR's ``english_g2`` recogniser as encoder + a small
transformer decoder trained by us (``tools/train_ocr.py``).

Plain torch only (no torchvision, no easyocr at inference time).

Encoder
    The ``english_g2`` recogniser of EasyOCR 1.7.2 (``core.backends.english_g2``): CNN +
    two BiLSTMs, grayscale lines of height 64 in [-1, 1] -> one 256-d column per 4
    pixels, ``W // 4 - 1`` columns; its CTC head is kept for the CTC reading.

Decoder memory
    ``LayerNorm(Linear(columns) + sinusoidal positions)``.

Decoder
    A pre-LayerNorm transformer decoder (Vaswani et al. 2017; pre-LN as in Xiong et
    al. 2020): causal self-attention, cross-attention over the memory, GELU FFN.
    Supports incremental decoding with a KV cache (self-attention keys/values grow
    by one position per step; cross-attention keys/values are computed once) and
    returns the cross-attention weights of every layer and head.

Vocabulary and CTC decoding: ``core.backends.ocr_vocab`` (its names, and the encoder's, are
re-exported here); the files (save/load): ``core.backends.ocr_checkpoint``, which imports
this module (never the other way round).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from core.backends.english_g2 import (  # noqa: F401  (re-exported: their old home)
    INPUT_HEIGHT,
    PIXELS_PER_COLUMN,
    BidirectionalLSTM,
    EnglishG2Encoder,
    VGG_FeatureExtractor,
    load_english_g2_state_dict,
    num_columns,
)
from core.backends.ocr_vocab import ENGLISH_G2_CHARACTERS, OCRVocab, ctc_greedy_decode  # noqa: F401

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
        hidden, cross, new_cache = self.decode_hidden(input_ids, cache, output_attentions)
        return self.lm_head(hidden), cross, new_cache

    def decode_hidden(
        self, input_ids: torch.Tensor, cache: DecoderCache, output_attentions: bool = False,
        layer_outputs: list[torch.Tensor] | None = None, n_layers: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderCache]:
        """:meth:`decode_step` without the output projection: the decoder's last layer
        output after ``final_norm``, float32 (B, T_new, d_model) (``lm_head`` of it gives
        the logits), the cross-attention and the new cache. If ``layer_outputs`` is a
        list, each layer's output at the last position (B, d_model), before
        ``final_norm``, is appended to it (the logit lens). ``n_layers``: run only the first
        ``n_layers`` layers (early exit; the new cache then holds only those layers)."""
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
        for i, layer in enumerate(self.layers if n_layers is None else self.layers[:n_layers]):
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
            if layer_outputs is not None:
                layer_outputs.append(x[:, -1])
        cross = torch.stack(attns, dim=1) if output_attentions else None
        return self.final_norm(x), cross, DecoderCache(new_k, new_v, cache.cross_k, cache.cross_v, cache.memory_mask)

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
