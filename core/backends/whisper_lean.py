"""Whisper's "lean" decoder step: the weights of a Whisper model (the bundled models'
``core.backends.whisper_net.WhisperNet`` or a transformers ``WhisperForConditionalGeneration``:
the same module tree) run layer by layer with preallocated self-attention
KV tensors and precomputed cross-attention keys/values.

``core.backends.hf.HFSeq2SeqBackend`` uses it for Whisper because the per-step overhead of
the generic forward (mask building, cache objects, output recording) is a large part of a
tiny model's step time. ``tests/core/test_hf_backend.py`` checks that both paths give the
same logits and cross-attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from core.backends.base import StepOutput
from core.backends.int8 import Int8Linear
from core.backends import step_threads
from core.backends.step_threads import StepThreads, column_edges, parallel


@dataclass
class LeanCache:
    """Decoder state for ``WhisperLeanDecoder``.

    Attributes:
        self_k, self_v: per layer float32 (batch, heads, max_len, head_dim), filled up to ``length``.
        cross_k, cross_v: per layer float32 (batch or 1, heads, source_len_total, head_dim),
            computed once in ``init_cache``.
        length: number of decoder positions already in the cache.
    """

    self_k: list[torch.Tensor]
    self_v: list[torch.Tensor]
    cross_k: list[torch.Tensor]
    cross_v: list[torch.Tensor]
    length: int = 0


def fast_layout(layer: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Lay a Whisper decoder layer's float weights out for one-token steps, in place and
    without a second copy; returns the self-attention's fused q/k/v product
    ``(weight_t, bias)``: weight_t (d_model, 3 d_model) contiguous, the transposes of
    ``q_proj``, ``k_proj``, ``v_proj`` side by side, bias (3 d_model,) (``k_proj`` has none: 0),
    or None where those projections are not plain ``nn.Linear`` (int8 layers keep theirs).

    A decode step multiplies one row by each weight matrix: a GEMV, bound by the rate the CPU
    streams the matrix. MKL's GEMV streams a matrix fastest along its longer side
    (measured here on one core, each matrix read from memory, not cache: (384 -> 1536) 264 us
    as ``nn.Linear`` stores it, (out, in), vs 140 us stored (in, out); (1536 -> 384) 163 vs
    259 us; three (384 -> 384) 3 x 68 us vs one (384 -> 1152) 113 us). So:

    - ``q_proj``, ``k_proj``, ``v_proj``: their weights become column blocks of one
      (d_model, 3 d_model) contiguous tensor (each module's ``weight`` a strided view of it:
      same values, same shape, ``nn.Linear`` and transformers run them as before), and the lean
      step runs the three as one product;
    - ``fc1`` (d_model -> ffn, wider out than in): stored transposed (``whisper_ct2.transposed_storage``);
    - ``fc2`` (ffn -> d_model) and the square ``out_proj``/cross-attention ones stay (out, in).

    Idempotent: a layer already laid out (a second decoder over the same model) keeps its tensors.
    """
    sa = layer.self_attn
    projs = (sa.q_proj, sa.k_proj, sa.v_proj)
    if not all(type(m) is torch.nn.Linear for m in projs):
        return None
    fc1 = layer.fc1
    with torch.no_grad():
        if type(fc1) is torch.nn.Linear and not fc1.weight.t().is_contiguous():
            fc1.weight.data = fc1.weight.detach().t().contiguous().t()
        kept = getattr(sa, "_lean_qkv", None)
        d = projs[0].weight.shape[1]
        if kept is not None and all(
            m.weight.data_ptr() == kept[0].data_ptr() + j * d * kept[0].element_size()
            and m.weight.stride() == (1, 3 * d) for j, m in enumerate(projs)
        ):
            return kept
        ws = [m.weight.detach() for m in projs]
        weight_t = torch.cat(ws).t().contiguous()  # (d, 3d)
        bias = torch.cat([m.bias.detach() if m.bias is not None else torch.zeros(d, dtype=ws[0].dtype,
                                                                                   device=ws[0].device)
                          for m in projs])
        for j, m in enumerate(projs):
            m.weight.data = weight_t[:, j * d:(j + 1) * d].t()
        sa._lean_qkv = (weight_t, bias)  # a plain attribute: outside the state dict
    return sa._lean_qkv


def _power_of_two(x: float) -> bool:
    """Whether ``x`` > 0 is a power of two (multiplying by it is exact in floating point)."""
    m, _ = math.frexp(x)
    return x > 0 and m == 0.5


class WhisperLeanDecoder:
    """A minimal Whisper decoder step over a ``WhisperNet``'s or ``WhisperForConditionalGeneration``'s weights.

    Same computation as transformers' ``WhisperDecoder`` (Radford et al. 2022, pre-norm
    Transformer decoder; queries scaled by head_dim**-0.5 before the dot product), but
    without per-step mask/cache object construction. Self-attention keys/values live in
    preallocated tensors of ``max_target_positions`` (448) positions.

    Args:
        model: the Whisper model, ``WhisperNet`` or transformers' (its layers may hold ``core.backends.int8.Int8Linear``
            in place of ``nn.Linear``: they are called the same way).
        int8: run the output projection (``proj_out``, tied to the embeddings and so kept float32
            in the model) as an int8 dynamically quantised product too (``Int8Linear``); the
            shortlist head and the logit lens then use it as well.
    """

    def __init__(self, model: Any, *, int8: bool = False):
        self.decoder = model.model.decoder
        self.proj_out = model.proj_out
        cfg = model.config
        self.heads = cfg.decoder_attention_heads
        self.d_model = cfg.d_model
        self.head_dim = cfg.d_model // self.heads
        self.max_len = cfg.max_target_positions
        self.layers = list(self.decoder.layers)
        # The vocabulary projection is a GEMV over a (vocab, d_model) matrix, memory-bound;
        # with the matrix stored transposed, (d_model, vocab) contiguous, the CPU kernel
        # streams it about twice as fast (tiny.en: 17 -> 8 ms per token on one core).
        # A copy: 80 MB for tiny.en, 106 MB for base.
        w = self.proj_out.weight.detach()
        self.proj_out_t = w.t().contiguous()
        self.proj_out_b = getattr(self.proj_out, "bias", None)
        self.int8 = bool(int8)
        # int8: the projection as int8 rows, one scale each (base: 8.6 -> 1.2 ms per step, one core)
        self._head_q = Int8Linear(w, self.proj_out_b) if self.int8 else None
        # float layers: q, k, v in one product over one (d_model, 3 d_model) matrix (see fast_layout)
        self._qkv = [fast_layout(layer) for layer in self.layers]
        self._exact_scaling = [_power_of_two(layer.self_attn.scaling) for layer in self.layers]
        self._edges: dict[int, list[int]] = {}  # column edges of the head per thread count
        # several threads: the float products that may be split, by their weights' bytes (split
        # from step_threads.SPLIT_MIN_BYTES on, read at each step): fc1 (stored transposed by
        # fast_layout) and fc2 (0: int8, not split), the fused q/k/v
        self._ffn_bytes = [layer.fc1.weight.numel() * layer.fc1.weight.element_size()
                           if type(layer.fc1) is torch.nn.Linear and type(layer.fc2) is torch.nn.Linear
                           and layer.fc1.weight.t().is_contiguous() else 0 for layer in self.layers]
        self._qkv_bytes = [0 if t is None else t[0].numel() * t[0].element_size() for t in self._qkv]
        self._int8_blocks: dict[int, list[Int8Linear]] = {}  # int8 head in row blocks per thread count
        # int8: the cross-attention as (matrix x few columns) products over K and a transposed V
        # (``_cross_attend``); float32 keeps today's products and rounding
        self._cross_t = self.int8

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, len, d_model) -> (batch, heads, len, head_dim)."""
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.head_dim).transpose(1, 2)

    def cross_kv(self, encoder_hidden_states: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Cross-attention keys and values of every layer, each float32 (1, heads, src,
        head_dim): a function of the encoder output alone, so callers may keep them with it
        (``HFSeq2SeqBackend`` stores them in ``EncoderOutput.extras``). Keys are contiguous;
        values too, except in int8 mode, where each is a transposed view of a contiguous
        (1, heads, head_dim, src) tensor (see ``_cross_attend``)."""
        cross_k, cross_v = [], []
        for layer in self.layers:
            attn = layer.encoder_attn
            cross_k.append(self._split(attn.k_proj(encoder_hidden_states)).contiguous())
            v = self._split(attn.v_proj(encoder_hidden_states))
            # int8: V stored (heads, head_dim, src), the view keeps the (1, heads, src, head_dim) shape
            cross_v.append(v.transpose(-1, -2).contiguous().transpose(-1, -2) if self._cross_t else v.contiguous())
        return cross_k, cross_v

    def init_cache(
        self,
        encoder_hidden_states: torch.Tensor,
        batch_size: int,
        cross_kv: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None,
    ) -> LeanCache:
        """Empty self-attention KV tensors for ``batch_size`` hypotheses; cross-attention
        keys/values from ``encoder_hidden_states`` (1, src, d_model) (or the precomputed
        ``cross_kv``), shared by all rows."""
        dtype = encoder_hidden_states.dtype
        shape = (batch_size, self.heads, self.max_len, self.head_dim)
        device = encoder_hidden_states.device
        self_k = [torch.empty(shape, dtype=dtype, device=device) for _ in self.layers]
        self_v = [torch.empty(shape, dtype=dtype, device=device) for _ in self.layers]
        ks, vs = cross_kv if cross_kv is not None else self.cross_kv(encoder_hidden_states)
        cross_k = [k.expand(batch_size, -1, -1, -1) for k in ks]
        cross_v = [v.expand(batch_size, -1, -1, -1) for v in vs]
        return LeanCache(self_k, self_v, cross_k, cross_v, 0)

    def step(self, input_ids: torch.Tensor, cache: LeanCache, output_attentions: bool,
             capture_lens: bool = False, *, all_positions: bool = False, exit_layer: int | None = None,
             head_ids: torch.Tensor | None = None) -> StepOutput:
        """Feed ``input_ids`` (batch, new_len) at positions ``cache.length ..``; returns
        last-position logits (batch, vocab), the decoder's output after its final layer norm
        for every position fed, float32 (batch, new_len, d_model), if asked, cross-attention
        (batch, layers, heads, src) of the last position and, with ``capture_lens``, the logit
        lens of the last position (``lens_logits`` float32 (batch, layers, vocab): the final
        layer norm and ``proj_out`` applied to each layer's output; the last row is ``logits``).

        Several tokens may be fed to a non-empty cache: position ``start + j`` attends to the
        cache and to the fed positions up to itself (a causal mask with the cache's offset).

        With more than one torch thread and at most ``step_threads.MAX_ROWS`` rows (batch x
        new_len), torch runs the step on one thread and the output projection and the
        cross-attention are split across the threads (``core.backends.step_threads``); for one
        row the results are bit-identical to a one-thread step.

        Args:
            all_positions: also return ``position_logits`` float32 (batch, new_len, vocab),
                the logits after every fed position (the last row is ``logits``), and with
                ``output_attentions`` ``position_cross_attention`` (batch, new_len, layers,
                heads, src).
            exit_layer: early exit: run decoder layers ``< exit_layer`` only, then the final
                layer norm and ``proj_out`` (the logit lens of layer ``exit_layer - 1``). The
                layers above are not filled in ``cache``: give early-exit steps a cache of
                their own. ``cross_attention`` then has ``exit_layer`` layers.
            head_ids: int64 (k,) output ids: only their logits are computed (a shortlist
                head), the others are ``-inf`` (full vocabulary width).

        Raises:
            ValueError: more than ``max_target_positions`` positions, ``exit_layer`` outside
                ``[1, decoder layers]``, or ``capture_lens`` with ``exit_layer``/``head_ids``.
        """
        # with several torch threads, a step over few rows runs torch on one thread and splits the
        # output projection and the cross-attention across threads itself (core.backends.step_threads)
        with StepThreads(input_ids.shape[0] * input_ids.shape[1], cpu=self.proj_out_t.device.type == "cpu") as parts:
            return self._step(input_ids, cache, output_attentions, capture_lens, all_positions, exit_layer,
                              head_ids, parts)

    def _step(self, input_ids: torch.Tensor, cache: LeanCache, output_attentions: bool, capture_lens: bool,
              all_positions: bool, exit_layer: int | None, head_ids: torch.Tensor | None, parts: int) -> StepOutput:
        """``step``'s work; ``parts``: how many threads the big products are split across (1: none)."""
        start, new_len = cache.length, input_ids.shape[1]
        end = start + new_len
        if end > self.max_len:
            raise ValueError(
                f"Whisper's decoder holds at most {self.max_len} positions; lower max_new_tokens"
            )
        layers = self.layers
        if exit_layer is not None:
            if not 1 <= exit_layer <= len(self.layers):
                raise ValueError(f"exit_layer must be in [1, {len(self.layers)}] (decoder layers), got {exit_layer}")
            layers = self.layers[:exit_layer]
        if capture_lens and (exit_layer is not None or head_ids is not None):
            raise ValueError("capture_lens cannot be combined with exit_layer or head_ids")
        dec = self.decoder
        x = dec.embed_tokens(input_ids) + dec.embed_positions.weight[start:end]
        # several positions: each attends to the cache and to the fed positions up to itself
        causal = new_len > 1 and start == 0  # the prompt on an empty cache: the plain causal mask
        mask = None
        if new_len > 1 and start > 0:  # a causal mask with the cache's offset (a draft to verify)
            pos = torch.arange(end, device=x.device)
            mask = pos[None, :] <= pos[start:end, None]  # (new_len, end)
        cross_rows = []
        layer_out = []  # the last position's residual stream after each layer (capture_lens)
        heads, hd = self.heads, self.head_dim
        for i, layer in enumerate(layers):
            # self-attention with the KV cache
            h = layer.self_attn_layer_norm(x)
            sa = layer.self_attn
            qkv = getattr(sa, "qkv_int8", None)  # int8: q, k, v in one product
            fused_t = self._qkv[i]
            # a power-of-two scaling (head_dim 64: 1/8) is exact: SDPA applies it to the scores,
            # bit-identical to scaling q first, one op fewer
            exact = self._exact_scaling[i]
            if qkv is not None or fused_t is not None:
                if qkv is not None:
                    both = qkv(h)
                elif parts > 1 and 0 < self._qkv_bytes[i] >= step_threads.SPLIT_MIN_BYTES:  # float, split
                    both = self._linear_parts(h, fused_t[0], fused_t[1], parts)
                else:  # float: one (rows, d) x (d, 3d) product, the bias of k is 0
                    both = torch.addmm(fused_t[1], h.reshape(-1, self.d_model), fused_t[0]).view(
                        h.shape[:-1] + (3 * self.d_model,))
                q, k, v = both.split(self.d_model, dim=-1)
                q = self._split(q if exact else q * sa.scaling)
                cache.self_k[i][:, :, start:end] = self._split(k)
                cache.self_v[i][:, :, start:end] = self._split(v)
            else:
                q = sa.q_proj(h)
                q = self._split(q if exact else q * sa.scaling)
                cache.self_k[i][:, :, start:end] = self._split(sa.k_proj(h))
                cache.self_v[i][:, :, start:end] = self._split(sa.v_proj(h))
            k, v = cache.self_k[i][:, :, :end], cache.self_v[i][:, :, :end]
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                               scale=sa.scaling if exact else 1.0)
            x = x + sa.out_proj(a.transpose(1, 2).reshape(x.shape))
            # cross-attention over the encoder hidden states
            h = layer.encoder_attn_layer_norm(x)
            ca = layer.encoder_attn
            ck, cv = cache.cross_k[i], cache.cross_v[i]
            if (output_attentions or self._cross_t) and (ck.shape[0] == 1 or ck.stride(0) == 0):
                # one K/V for every row (greedy, beams over one input): every row's queries in one
                # (heads, rows, head_dim) x (heads, head_dim, src) product that reads K and V once
                # (a broadcast matmul copies the expanded K and V per row); batch 1: the same bmm
                # as the matmul ran. int8 takes it without capture too (SDPA over its transposed
                # values: 317 -> 460 us a layer on tiny.en; this product: 192-232 us)
                b, n = h.shape[0], h.shape[1]
                qh = (ca.q_proj(h) * ca.scaling).view(b * n, heads, hd).transpose(0, 1)  # (heads, b*n, hd)
                if parts > 1:  # heads in groups, one per thread (each group's numbers as in the whole)
                    w, a = self._cross_parts(qh, ck[0], cv[0], parts)
                else:
                    w, a = self._cross_attend(qh, ck[0], cv[0])  # (heads, b*n, src), (heads, b*n, hd)
                if output_attentions:
                    weights = w.view(heads, b, n, -1).transpose(0, 1)  # (batch, heads, new_len, src)
                    cross_rows.append(weights if all_positions or n == 1 else weights[:, :, -1:].clone())
                a = a.transpose(0, 1).reshape(x.shape)
            elif output_attentions:
                q = self._split(ca.q_proj(h) * ca.scaling)
                weights = torch.softmax(q @ ck.transpose(-1, -2), dim=-1)
                a = (weights @ cv).transpose(1, 2).reshape(x.shape)
                # (batch, heads, new_len, src); only the last position's row unless every
                # position is asked for (a re-feed of ~400 positions kept every layer's rows alive)
                cross_rows.append(weights if all_positions or new_len == 1 else weights[:, :, -1:].clone())
            else:
                q = self._split(ca.q_proj(h) * ca.scaling)
                a = F.scaled_dot_product_attention(q, ck, cv, scale=1.0).transpose(1, 2).reshape(x.shape)
            x = x + ca.out_proj(a)
            # feed-forward
            h = layer.final_layer_norm(x)
            if parts > 1 and 0 < self._ffn_bytes[i] >= step_threads.SPLIT_MIN_BYTES:  # fc1, then fc2, in column blocks
                fc1, fc2 = layer.fc1, layer.fc2
                g = layer.activation_fn(self._linear_parts(h, fc1.weight.t(), fc1.bias, parts))
                x = x + self._linear_parts(g, fc2.weight.t(), fc2.bias, parts)
            else:
                x = x + layer.fc2(layer.activation_fn(layer.fc1(h)))
            if capture_lens:
                layer_out.append(x[:, -1])
        cache.length = end
        hidden = dec.layer_norm(x)  # (batch, new_len, d_model): what proj_out is applied to
        positions = None
        if all_positions:
            positions = self._head(hidden, head_ids, parts).float()
            logits = positions[:, -1]
        else:
            logits = self._head(hidden[:, -1], head_ids, parts).float()
        cross = cross_all = None
        if output_attentions:
            every = torch.stack(cross_rows, dim=1)  # (batch, layers, heads, new_len, src)
            cross = every[:, :, :, -1]
            if all_positions:
                cross_all = every.permute(0, 3, 1, 2, 4)
        lens = self._lens(layer_out[:-1], logits, parts) if capture_lens else None
        return StepOutput(logits=logits, cross_attention=cross, cache=cache, hidden_states=hidden.float(),
                          lens_logits=lens, position_logits=positions, position_cross_attention=cross_all)

    def _head(self, h: torch.Tensor, head_ids: torch.Tensor | None = None, parts: int = 1) -> torch.Tensor:
        """``proj_out`` of ``h`` (..., d_model) -> (..., vocab); with ``head_ids`` (int64
        (k,)) only those rows of the projection, the other logits ``-inf``. ``parts`` > 1: the
        full projection runs as that many blocks of vocabulary columns at once (``parallel``)."""
        if self._head_q is not None:
            return self._head_int8(h, head_ids, parts)
        if head_ids is None:
            if parts > 1:
                out = self._head_parts(h, parts)
            else:
                out = h @ self.proj_out_t
            return out + self.proj_out_b if self.proj_out_b is not None else out
        weight, bias = self._narrow_head(head_ids)
        narrow = h @ weight
        if bias is not None:
            narrow = narrow + bias
        full = torch.full(h.shape[:-1] + (self.proj_out_t.shape[1],), float("-inf"), dtype=narrow.dtype,
                          device=narrow.device)
        full[..., head_ids] = narrow
        return full

    def _head_int8(self, h: torch.Tensor, head_ids: torch.Tensor | None, parts: int = 1) -> torch.Tensor:
        """``_head`` with the int8 projection; a shortlist's rows are packed once per
        ``head_ids`` tensor (as ``_narrow_head`` keeps them). ``parts`` > 1: the projection's
        rows in that many blocks, each packed on first use (the int8 head a second time: tiny.en
        20 MB, base 27 MB), run at once and joined; bit-identical to the whole (per-row weight
        scales, and each block quantises the same activations the same way)."""
        if head_ids is None:
            if parts > 1:
                blocks = self._int8_blocks.get(parts)
                if blocks is None:
                    w = self.proj_out.weight.detach()
                    edges = column_edges(w.shape[0], parts)
                    b = self.proj_out_b
                    blocks = self._int8_blocks[parts] = [
                        Int8Linear(w[lo:hi], None if b is None else b[lo:hi]) for lo, hi in zip(edges, edges[1:])]
                return torch.cat(parallel([lambda q=q: q(h) for q in blocks]), dim=-1)
            return self._head_q(h)
        kept = getattr(self, "_narrow_q", None)
        if kept is None or kept[0] is not head_ids:
            rows = self.proj_out.weight.detach()[head_ids]
            bias = self.proj_out_b[head_ids] if self.proj_out_b is not None else None
            kept = self._narrow_q = (head_ids, Int8Linear(rows, bias))
        narrow = kept[1](h)
        full = torch.full(h.shape[:-1] + (self.proj_out_t.shape[1],), float("-inf"), dtype=narrow.dtype,
                          device=narrow.device)
        full[..., head_ids] = narrow
        return full

    def _head_parts(self, h: torch.Tensor, parts: int) -> torch.Tensor:
        """``h @ proj_out_t`` (..., d_model) -> (..., vocab) as ``parts`` blocks of vocabulary
        columns computed at once, each an ``mm`` of a column slice of the same matrix into its
        slice of one output (slices start 64-byte aligned: ``column_edges``); no weight is copied."""
        rows = h.reshape(-1, h.shape[-1])
        vocab = self.proj_out_t.shape[1]
        out = torch.empty(rows.shape[0], vocab, dtype=rows.dtype, device=rows.device)
        edges = self._edges.get(parts)
        if edges is None:
            edges = self._edges[parts] = column_edges(vocab, parts)
        w = self.proj_out_t
        parallel([lambda lo=lo, hi=hi: torch.mm(rows, w[:, lo:hi], out=out[:, lo:hi])
                  for lo, hi in zip(edges, edges[1:])])
        return out.view(h.shape[:-1] + (vocab,))

    def _linear_parts(self, x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None,
                      parts: int) -> torch.Tensor:
        """``x @ weight_t + bias``, x (..., in), weight_t (in, out) (a transposed view or a
        contiguous matrix), in ``parts`` blocks of output columns at once, each an ``addmm`` of
        a column slice into its slice of one output (64-byte aligned: ``column_edges``): the
        numbers ``nn.Linear`` gives for one row."""
        rows = x.reshape(-1, x.shape[-1])
        width = weight_t.shape[1]
        out = torch.empty(rows.shape[0], width, dtype=rows.dtype, device=rows.device)
        edges = column_edges(width, parts)
        if bias is None:
            fns = [lambda lo=lo, hi=hi: torch.mm(rows, weight_t[:, lo:hi], out=out[:, lo:hi])
                   for lo, hi in zip(edges, edges[1:])]
        else:
            fns = [lambda lo=lo, hi=hi: torch.addmm(bias[lo:hi], rows, weight_t[:, lo:hi], out=out[:, lo:hi])
                   for lo, hi in zip(edges, edges[1:])]
        parallel(fns)
        return out.view(x.shape[:-1] + (width,))

    def _cross_parts(self, qh: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     parts: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention of queries ``qh`` (heads, rows, head_dim) over one input's keys and
        values ``k``, ``v`` (heads, src, head_dim), the heads in ``parts`` groups computed at once:
        (softmax weights (heads, rows, src), output (heads, rows, head_dim)), each group's numbers
        as the whole product gives them."""
        heads = qh.shape[0]
        edges = [round(heads * i / parts) for i in range(parts + 1)]

        def group(lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
            return self._cross_attend(qh[lo:hi], k[lo:hi], v[lo:hi])

        done = parallel([lambda lo=lo, hi=hi: group(lo, hi) for lo, hi in zip(edges, edges[1:]) if hi > lo])
        return torch.cat([w for w, _ in done]), torch.cat([a for _, a in done])

    def _cross_attend(self, qh: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention of queries ``qh`` (heads, rows, head_dim), already scaled, over one
        input's ``k``, ``v`` (heads, src, head_dim): (softmax weights float32 (heads, rows,
        src), output (heads, rows, head_dim)).

        float32: ``softmax(qh @ k^T) @ v``, two ``bmm`` over K and V as stored (row x matrix).
        int8 (``v`` a transposed view of a contiguous (heads, head_dim, src) tensor, as
        ``cross_kv`` makes it there): ``(k @ qh^T)^T`` and ``(v^T @ w^T)^T``, matrix x few
        columns, which MKL streams faster for one row (tiny.en's shapes, one thread, K/V read
        from memory: 252-312 -> 192-232 us a layer; 5 rows: the same). Same float32 maths in
        another summation order: weights within ~1e-8, outputs ~1e-6 relative of float32's.
        """
        if self._cross_t and v.stride(-2) == 1:
            w = torch.bmm(k, qh.transpose(1, 2)).transpose(1, 2)  # (heads, rows, src)
            w = torch.softmax(w if w.shape[1] == 1 else w.contiguous(), dim=-1)
            return w, torch.bmm(v.transpose(1, 2), w.transpose(1, 2)).transpose(1, 2)
        w = torch.softmax(torch.bmm(qh, k.transpose(1, 2)), dim=-1)
        return w, torch.bmm(w, v)

    def _narrow_head(self, head_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The projection's columns of ``head_ids``, (d_model, k) contiguous, and their bias;
        kept for the last ``head_ids`` tensor seen (a draft passes the same one every step)."""
        kept = getattr(self, "_narrow", None)
        if kept is None or kept[0] is not head_ids:
            weight = self.proj_out_t[:, head_ids].contiguous()
            bias = self.proj_out_b[head_ids] if self.proj_out_b is not None else None
            kept = self._narrow = (head_ids, weight, bias)
        return kept[1], kept[2]

    def _lens(self, inner: list[torch.Tensor], logits: torch.Tensor, parts: int = 1) -> torch.Tensor:
        """(batch, layers, vocab): ``proj_out(layer_norm(h))`` of the inner layers' outputs
        ``inner`` (each (batch, d_model)), then the output layer's ``logits``."""
        if not inner:
            return logits[:, None]
        h = self.decoder.layer_norm(torch.stack(inner, dim=1))  # (batch, layers - 1, d_model)
        lens = self._head(h, None, parts)
        return torch.cat([lens.float(), logits[:, None]], dim=1)

    @staticmethod
    def reorder_cache(cache: LeanCache, beam_idx: torch.Tensor) -> LeanCache:
        n = cache.length
        for store in (cache.self_k, cache.self_v):
            for i, t in enumerate(store):
                new = torch.empty((beam_idx.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
                new[:, :, :n] = t[beam_idx.to(t.device), :, :n]
                store[i] = new
        b = beam_idx.shape[0]
        cache.cross_k = [k[:1].expand(b, -1, -1, -1) for k in cache.cross_k]
        cache.cross_v = [v[:1].expand(b, -1, -1, -1) for v in cache.cross_v]
        return cache
