"""The Bergamot "tiny11" Marian network in plain PyTorch (weights from ``marian_format``).

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

``core.backends.marian_tiny`` drives it as a ``Backend`` (the decoder's virtual start
token, the lexical shortlist, the cache).
"""

from __future__ import annotations

import copy
import functools
import math
from typing import Callable

import torch
import torch.nn.functional as F

from core.backends.marian_format import MarianFormatError

D_MODEL = 256
N_HEADS = 8
HEAD_DIM = D_MODEL // N_HEADS
ENCODER_LAYERS = 6
DECODER_LAYERS = 2
LN_EPS = 1e-6


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


def _float_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """``x -> F.linear(x, weight, bias)`` (float32, ``nn.Linear`` layout (out, in))."""
    return functools.partial(F.linear, weight=weight, bias=bias)


class _TransposedLinear:
    """``x -> x W^T + b`` with ``W^T`` stored contiguous, (in, out), for ``torch.addmm``.

    On one row (a decoder step) MKL's product over a (256, out) row-major matrix is faster
    than ``F.linear``'s over the (out, 256) one: 40 vs 65-145 us for the decoder's 256 x 1536
    FFN matrix, 16 vs 19 us for the SSRU's 256 x 512 (one thread here); the other way round
    for the 1536 x 256 one, which keeps ``F.linear``. On several rows both layouts give the
    same bits and about the same time. One row's sums are taken in another order than
    ``F.linear``'s (last-bit differences; the decoded ids are unchanged on the bench's
    sentences).

    Args:
        weight: float32 (out, in) (``nn.Linear`` layout); copied transposed.
        bias: float32 (out,).
    """

    __slots__ = ("wt", "bias")

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        self.wt = weight.t().contiguous()
        self.bias = bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` float32 (..., in) -> float32 (..., out)."""
        if x.dim() == 2:
            return torch.addmm(self.bias, x, self.wt)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.wt).view(*x.shape[:-1], self.wt.shape[1])


#: the decoder products whose float32 weights are kept transposed (``_TransposedLinear``): every
#: one that reads a 256-wide input; ``ffn2`` (1536 -> 256) is faster with ``F.linear``
TRANSPOSED_DECODER = ("ssru", "q", "o", "ffn1")
#: the float32 products run on the file's exact int8 values (``_exact_int8_linear``) where
#: possible: the encoder's big ones, where reading half the bytes wins over the extra scaling
#: call (on its 256 x 256 one it does not), and the decoder's FFN (two 256 x 1536 matrices,
#: 3 of the step's 4 MB a layer). In a microbenchmark that repeats one step the decoder's
#: 8 MB stay in the cache and float32 was faster (586 vs 651 us a step); in the engine's
#: loop, where the report and the other work evict them between steps, half the bytes win:
#: 31.5 -> 27.9 ms a sentence (en-pt shortlist, capture on, thread CPU time, best of 5
#: alternating passes), the backend alone 19.4 -> 17.7; the same ids. The SSRU's and the
#: attention's smaller products stay float32 (no clear gain: the fixed cost of the call)
EXACT_INT8_ENCODER = ("qkv", "ffn1", "ffn2")
EXACT_INT8_DECODER: tuple[str, ...] = ("ffn1", "ffn2")


def _exact_int8_linear(weight: torch.Tensor, bias: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """``x -> x W^T + b`` for a float32 ``weight`` (out, in) that is exactly ``Q / m``: integers Q
    in [-127, 127] over one scale m (an intgemm8 matrix of the file dequantised, as
    ``read_marian_binary`` does: ``m = 127 / max |W|``; all of tiny11's matrices are). Q is
    stored as float16 (integers up to 2048 are exact there) in fbgemm's packed layout and the
    product runs as ``quantized::linear_dynamic_fp16``: float32 activations times the exact
    weights, float32 accumulation, on ``x / m``. The same float32 product up to rounding (the
    scale is applied to the inputs instead of the weights; outputs differ by ~1e-6 relative),
    from half the bytes, which is what these products wait for: Bergamot's 256 x 32,000 output
    projection takes 0.47-0.61 ms instead of 1.3-1.6 ms on one thread here, the 256 x 1536 FFN
    matrices 43-45 instead of 72-89 us on one row, 99 instead of 207 us on 8 rows.

    Returns:
        the callable, float32 (..., in) -> float32 (..., out); None where ``weight`` is not
        such a matrix or this CPU build has no fbgemm (then the float32 weights are used).
    """
    import warnings

    w = weight.float()
    top = float(w.abs().max())
    if top == 0.0 or "fbgemm" not in torch.backends.quantized.supported_engines:
        return None
    m = torch.tensor(127.0 / top, dtype=torch.float32)
    q = torch.round(w * m)
    if not torch.equal(q / m, w) or float(q.abs().max()) > 127:
        return None
    inv = (1.0 / m).reshape(())  # a 0-dim float32 tensor: the same product as by the float, ~2 us cheaper a call
    try:
        with warnings.catch_warnings():  # fbgemm's packed weights still work; the API is marked deprecated
            warnings.simplefilter("ignore")
            packed = torch.ops.quantized.linear_prepack_fp16(q, bias.float().contiguous())
            linear = torch.ops.quantized.linear_dynamic_fp16
            linear(torch.zeros(1, w.shape[1]), packed)
    except (RuntimeError, NotImplementedError):
        return None

    linear = _raw_op(linear)

    def product(x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            return linear(x * inv, packed)
        return linear(x.reshape(-1, x.shape[-1]) * inv, packed).view(*x.shape[:-1], -1)

    product.parts = (linear, packed, inv)  # for ``_DecoderLayer.fast``: the same call without this frame
    return product


def _raw_op(packet):
    """The C++ callable behind a ``torch.ops`` packet's default overload: the same kernel and
    bits, without ``OpOverloadPacket.__call__``'s Python check of its arguments for script objects
    (fbgemm's packed weights are one), ~1.4 us a call here; the packet itself where this torch
    has no such attribute."""
    return getattr(getattr(packet, "default", None), "_op", None) or packet


def _file_int8(weight: torch.Tensor) -> tuple[torch.Tensor, float] | None:
    """(Q int8 (out, in), 1 / m) where the float32 ``weight`` is exactly ``Q / m`` with one scale
    ``m = 127 / max |W|`` (an intgemm8 matrix of the file dequantised by ``read_marian_binary``),
    else None."""
    w = weight.float()
    top = float(w.abs().max())
    if top == 0.0:
        return None
    m = torch.tensor(127.0 / top, dtype=torch.float32)
    q = torch.round(w * m)
    if not torch.equal(q / m, w) or float(q.abs().max()) > 127:
        return None
    return q.to(torch.int8), float(1.0 / m)


#: int8 mode (``MarianTinyModel.quantized``): several rows per call (the encoder, the cross
#: keys/values) get one activation scale per row, as ``core.backends.int8.Int8Linear`` does
#: (fbgemm's own is one per call)
INT8_PER_ROW = True


def _file_int8_linear(weight: torch.Tensor, bias: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """``x -> x W^T + b`` in int8 on the file's own int8 values: ``weight`` (out, in) is ``Q / m``
    (``_file_int8``); Q goes into fbgemm's packed int8 weight unchanged, with the file's one scale
    1/m (per tensor), and the product runs as ``quantized::linear_dynamic`` (activations quantised
    to 8 bits per call, int32 accumulation, float32 out; with ``INT8_PER_ROW`` each of several rows
    is first scaled to max |x| = 1), then the float32 bias. The native engine multiplies the same
    Q (intgemm), with activation scales fixed in the file instead of per call.

    Returns:
        the callable, float32 (..., in) -> float32 (..., out); None where ``weight`` is not such a
        matrix or this build has no fbgemm.
    """
    import warnings

    exact = _file_int8(weight)
    if exact is None or "fbgemm" not in torch.backends.quantized.supported_engines:
        return None
    q, inv = exact
    from core.backends.int8 import _REDUCE_RANGE

    try:
        with warnings.catch_warnings():  # quantized tensors are deprecated; fbgemm's kernels still take them
            warnings.simplefilter("ignore")
            qw = torch._make_per_tensor_quantized_tensor(q, inv, 0)
            packed = torch.ops.quantized.linear_prepack(qw, None)
            linear = torch.ops.quantized.linear_dynamic
            linear(torch.zeros(1, q.shape[1]), packed, _REDUCE_RANGE)
    except (RuntimeError, NotImplementedError):
        return None
    bias = bias.detach().float().clone()

    def product(x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1]).contiguous()
        if INT8_PER_ROW and x.shape[0] > 1:  # several rows: one activation scale per row
            s = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-30)
            out = linear(x / s, packed, _REDUCE_RANGE).mul_(s)
        else:
            out = linear(x, packed, _REDUCE_RANGE)
        return out.add_(bias).view(*lead, -1)

    return product


class _EncoderLayer:
    """One encoder layer's products laid out for the step: q/k/v stacked into one (768, 256)
    matrix (one product instead of three; ``F.linear`` over stacked rows gives the same bits
    as the three products), each product a callable ``x -> x W^T + b`` (float32, or int8 in
    ``MarianTinyModel.quantized``)."""

    __slots__ = ("qkv", "o", "ln1", "ffn1", "ffn2", "ln2", "weights")

    def __init__(self, p: dict[str, torch.Tensor], i: int):
        pre = f"encoder_l{i}_self"
        self.weights = {
            "qkv": (torch.cat([p[pre + "_Wq"], p[pre + "_Wk"], p[pre + "_Wv"]]).contiguous(),
                    torch.cat([p[pre + "_bq"], p[pre + "_bk"], p[pre + "_bv"]]).contiguous()),
            "o": (p[pre + "_Wo"], p[pre + "_bo"]),
            "ffn1": (p[f"encoder_l{i}_ffn_W1"], p[f"encoder_l{i}_ffn_b1"]),
            "ffn2": (p[f"encoder_l{i}_ffn_W2"], p[f"encoder_l{i}_ffn_b2"]),
        }
        for name, (w, b) in self.weights.items():
            exact = _exact_int8_linear(w, b) if name in EXACT_INT8_ENCODER else None
            setattr(self, name, exact or _float_linear(w, b))
        self.ln1 = (p[pre + "_Wo_ln_scale"], p[pre + "_Wo_ln_bias"])
        pre = f"encoder_l{i}_ffn"
        self.ln2 = (p[pre + "_ffn_ln_scale"], p[pre + "_ffn_ln_bias"])


class _DecoderLayer:
    """One decoder layer's products laid out for the step: the SSRU's W and Wf stacked into one
    (512, 256) matrix (bias 0 for W's half), each product a callable ``x -> x W^T + b``
    (float32, or int8 in ``MarianTinyModel.quantized``). A plain object, so a step reads
    attributes instead of building dictionary keys."""

    __slots__ = ("ssru", "ln0", "q", "k", "v", "o", "ln1", "ffn1", "ffn2", "ln2", "weights", "fast")

    def __init__(self, p: dict[str, torch.Tensor], i: int):
        pre = f"decoder_l{i}_rnn"
        ctx = f"decoder_l{i}_context"
        ffn = f"decoder_l{i}_ffn"
        self.weights = {
            "ssru": (torch.cat([p[pre + "_W"], p[pre + "_Wf"]]).contiguous(),
                     torch.cat([torch.zeros(D_MODEL), p[pre + "_bf"]]).contiguous()),
            "q": (p[ctx + "_Wq"], p[ctx + "_bq"]), "k": (p[ctx + "_Wk"], p[ctx + "_bk"]),
            "v": (p[ctx + "_Wv"], p[ctx + "_bv"]), "o": (p[ctx + "_Wo"], p[ctx + "_bo"]),
            "ffn1": (p[ffn + "_W1"], p[ffn + "_b1"]), "ffn2": (p[ffn + "_W2"], p[ffn + "_b2"]),
        }
        for name, (w, b) in self.weights.items():
            exact = _exact_int8_linear(w, b) if name in EXACT_INT8_DECODER else None
            setattr(self, name, exact or (_TransposedLinear(w, b) if name in TRANSPOSED_DECODER else _float_linear(w, b)))
        self.ln0 = (p[pre + "_ffn_ln_scale"], p[pre + "_ffn_ln_bias"])
        self.ln1 = (p[ctx + "_Wo_ln_scale"], p[ctx + "_Wo_ln_bias"])
        self.ln2 = (p[ffn + "_ffn_ln_scale"], p[ffn + "_ffn_ln_bias"])
        self.fast = self.fast_parts()

    def fast_parts(self) -> tuple | None:
        """The step's tensors and kernels as one flat tuple (``self.fast``, made when the layer is
        built and again by ``MarianTinyModel.quantized``: a product replaced otherwise needs
        ``fast = fast_parts()`` again), for ``decode_position``'s
        one-hypothesis path to call the kernels directly (the same calls on the same tensors as
        through ``_TransposedLinear`` and ``_exact_int8_linear``'s closure: the same bits, without
        their Python frames): (ssru bias, ssru W^T, ln0 scale, ln0 bias, q bias, q W^T, o bias,
        o W^T, ln1 scale, ln1 bias, ffn1, ffn2, ln2 scale, ln2 bias), each ffn (kernel, packed,
        1/m) for the exact-int8 product, or (the layer's callable, None, None) for any other
        (int8 mode's ``Int8Linear``, the float32 fallback without fbgemm); None where the SSRU, q
        or o product is laid out otherwise."""
        ffn = [getattr(f, "parts", None) or (f, None, None) for f in (self.ffn1, self.ffn2)]
        if not all(isinstance(getattr(self, n), _TransposedLinear) for n in ("ssru", "q", "o")):
            return None
        return (self.ssru.bias, self.ssru.wt, *self.ln0, self.q.bias, self.q.wt, self.o.bias, self.o.wt, *self.ln1,
                ffn[0], ffn[1], *self.ln2)


#: the products ``MarianTinyModel.quantized`` runs in int8. All of the encoder's (several rows
#: per call) and the cross-attention keys/values (once per input, all layers in one product:
#: ``_stacked_cross_kv``); of the decoder step (one row per call) only the FFN's two (256 x 1536)
#: matrices: on one row, fbgemm's fixed cost per call (~25 us here) is more than a 256 x 256 /
#: 512 x 256 float32 product takes.
INT8_ENCODER = ("qkv", "o", "ffn1", "ffn2")
INT8_DECODER = ("ffn1", "ffn2")
#: int8 mode on the file's own int8 values with its one scale per matrix (``_file_int8_linear``)
#: instead of the weights requantised with a scale per output row (``Int8Linear``, the default).
#: Measured (session 13, bench_translation's bare loop, 34 + 34 sentences, outputs equal to the
#: native engine's): per-row requantised shortlist 32 + 33, full 31 + 33; file values with one
#: activation scale per row 31 + 31 / 29 + 32, with one per call 31 + 33 / 30 + 33; the same speed
#: (the same fbgemm kernel: bare shortlist 13.4 vs 13.0 ms a sentence, encode 3.1 both). The
#: native engine's activations are quantised with fixed scales from the file (``*_QuantMultA``,
#: intgemm), which neither reproduces: the exact weights alone do not bring its ids closer.
INT8_FILE_VALUES = False


def _stacked_cross_kv(layers: list) -> tuple[torch.Tensor, torch.Tensor]:
    """Every decoder layer's cross-attention key and value matrices stacked by output rows,
    [k_1; v_1; k_2; v_2] (4 x 256, 256), and their biases: one product computes them all
    (``cross_keys_values``); over several rows each output element is the same as the
    separate products'."""
    weights = [L.weights[name] for L in layers for name in ("k", "v")]
    return torch.cat([w for w, _ in weights]).contiguous(), torch.cat([b for _, b in weights]).contiguous()


_SCALE = 1.0 / math.sqrt(HEAD_DIM)
#: ``_SCALE`` and 1 as 0-dim float32 tensors: ``x * _SCALE_T`` gives the same bits as ``x * _SCALE``
#: (torch takes a Python float as a float32 scalar) and costs ~1.3 instead of ~3 us a call (a
#: Python number is wrapped into a new tensor on every call); likewise ``_ONE - f``
_SCALE_T = torch.tensor(_SCALE, dtype=torch.float32)
_ONE = torch.tensor(1.0, dtype=torch.float32)


class MarianTinyModel:
    """The tiny11 network with float32 weights (functional: tensors, no autograd).

    The weights are kept as Marian names them (``p``) and, for the step, laid out per layer
    (``_EncoderLayer``/``_DecoderLayer``: the encoder's q/k/v and the decoder SSRU's two
    matrices stacked, attributes instead of per-step dictionary keys): the same products on
    the same weights, so the same float32 results as a layer-by-name port, with fewer calls.

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
            self.enc_layers = [_EncoderLayer(params, i) for i in range(1, ENCODER_LAYERS + 1)]
            self.dec_layers = [_DecoderLayer(params, i) for i in range(1, DECODER_LAYERS + 1)]
            params["decoder_ff_logit_out_b"]
        except KeyError as e:
            raise MarianFormatError(f"model file lacks weight {e.args[0]!r}: not a tiny11 model") from e
        self.vocab_size = int(emb.shape[0])
        #: the full output projection, (batch, 256) -> (batch, V): on the file's int8 values
        #: (``_exact_int8_linear``) where it can, else ``torch.addmm`` on ``wemb_t``; int8 in
        #: ``quantized``
        self._full_projection = _exact_int8_linear(params["Wemb"], params["decoder_ff_logit_out_b"])
        #: (256, V) copy of ``Wemb`` for ``torch.addmm`` where ``_full_projection`` is None
        self.wemb_t = params["Wemb"].t().contiguous() if self._full_projection is None else None
        self.emb_scale = math.sqrt(D_MODEL)
        self._positions = sinusoid_positions(torch.arange(1024))  # grown on demand
        #: (cross_keys, cross_values, per layer (keys[0]^T, values[0])) of the last one-hypothesis
        #: step: the same views every step of a sentence, made once (``_cross_views``)
        self._cross_memo: tuple = (None, None, ())
        #: the compute type of the products: "float32", or "int8" (``quantized``)
        self.dtype = "float32"
        #: every decoder layer's cross-attention keys and values in one product (``_stacked_cross_kv``)
        stacked = _stacked_cross_kv(self.dec_layers)
        self._cross_kv: Callable[[torch.Tensor], torch.Tensor] = _exact_int8_linear(*stacked) or _float_linear(*stacked)

    def quantized(self) -> "MarianTinyModel":
        """An int8 twin of this model (``dtype == "int8"``): the products named in
        ``INT8_ENCODER`` / ``INT8_DECODER`` and the full output projection run as
        ``core.backends.int8.Int8Linear`` (int8 weights with one scale per output row,
        activations quantised per call, int32 accumulation: CTranslate2's int8 scheme; the
        native Bergamot engine runs intgemm int8 with fixed activation scales); the other
        decoder products, the shortlist's projection, the layer norms and the attention stay
        float32. Shares the float32 weights ``p`` with this model, which is unchanged.

        Returns:
            a new ``MarianTinyModel``; tokens may differ slightly from float32.
        """
        from core.backends.int8 import Int8Linear

        twin = copy.copy(self)
        twin.dtype = "int8"

        def int8(weight, bias):  # the file's own int8 values where it has them
            return (_file_int8_linear(weight, bias) if INT8_FILE_VALUES else None) or Int8Linear(weight, bias).forward

        def requantized(layer, names):
            out = copy.copy(layer)
            for name in names:
                setattr(out, name, int8(*layer.weights[name]))
            if isinstance(out, _DecoderLayer):
                out.fast = out.fast_parts()
            return out

        twin.enc_layers = [requantized(L, INT8_ENCODER) for L in self.enc_layers]
        twin.dec_layers = [requantized(L, INT8_DECODER) for L in self.dec_layers]
        twin._full_projection = int8(self.p["Wemb"], self.p["decoder_ff_logit_out_b"])
        twin._cross_kv = int8(*_stacked_cross_kv(self.dec_layers))
        return twin

    # -- shared pieces ---------------------------------------------------------------

    def embed(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``Wemb[ids] * 16 + pos``; ids int64 (batch, n) -> float32 (batch, n, 256),
        positions ``start .. start+n-1``."""
        return F.embedding(ids, self.p["Wemb"]) * self.emb_scale + self.positions(start, ids.shape[1])[None]

    def embed_one(self, ids: torch.Tensor, position: int) -> torch.Tensor:
        """One position's ``embed``: ids int64 (batch, 1) -> float32 (batch, 256), the same bits
        (``pos + 16 * Wemb[id]``: the product by 16 is exact) in two calls instead of five."""
        return torch.add(self.positions(position, 1), self.p["Wemb"].index_select(0, ids.view(-1)),
                         alpha=self.emb_scale)

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
        batch, n = source_ids.shape
        layer_norm, D = torch.layer_norm, D_MODEL
        for L in self.enc_layers:
            qkv = L.qkv(x)
            if batch == 1 and bias is None:
                # what ``_attention``'s matmuls run for one sentence (the same bmm calls on the
                # same strides: the same bits), without their broadcasting and reshapes
                q, k, v = qkv.view(n, 3, N_HEADS, HEAD_DIM).permute(1, 2, 0, 3)  # each (heads, n, 32)
                w = torch.softmax(torch.bmm(q * _SCALE_T, k.transpose(1, 2)), dim=-1)
                ctx = torch.bmm(w, v).transpose(0, 1).reshape(1, n, D)
            else:
                q, k, v = qkv.split(D, dim=-1)
                ctx = _merge_heads(_attention(_split_heads(q), _split_heads(k), _split_heads(v), bias)[0])
            x = layer_norm(x + L.o(ctx), (D,), *L.ln1, LN_EPS)
            h = L.ffn2(torch.relu(L.ffn1(x)))
            x = layer_norm(x + h, (D,), *L.ln2, LN_EPS)
        return x

    # -- decoder ---------------------------------------------------------------------

    @torch.no_grad()
    def cross_keys_values(self, encoder_hidden: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per decoder layer, the cross-attention keys and values, each float32
        (batch, heads, src_len, head_dim), computed once per input."""
        # one product for all layers (``_cross_kv``); each part copied out contiguous, the layout
        # the attention's bmm calls always read (the same bits as a product per layer)
        parts = self._cross_kv(encoder_hidden).split(D_MODEL, dim=-1)
        keys = [_split_heads(parts[2 * i].contiguous()) for i in range(len(self.dec_layers))]
        values = [_split_heads(parts[2 * i + 1].contiguous()) for i in range(len(self.dec_layers))]
        return keys, values

    @torch.no_grad()
    def decode_position(
        self,
        x: torch.Tensor,
        ssru_state: list[torch.Tensor],
        cross_keys: list[torch.Tensor],
        cross_values: list[torch.Tensor],
        cross_bias: torch.Tensor | None,
        layer_outputs: list[torch.Tensor] | None = None,
        n_layers: int | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
        """One decoder position for a batch of hypotheses.

        Args:
            x: float32 (batch, 256): the embedded input of this position.
            ssru_state: per layer, float32 (batch, 256): the SSRU cell state c.
            cross_keys, cross_values: from ``cross_keys_values``, batch 1 (broadcast) or batch.
            cross_bias: additive float32 (1 or batch, 1, 1, src_len) padding mask, or None.
            layer_outputs: if given, each layer's output (batch, 256) is appended to it
                (the logit lens; the last one is the returned ``y``).
            n_layers: run only the first ``n_layers`` decoder layers (early exit; the states
                of the layers above are returned unchanged); None = all.

        Returns:
            (y (batch, 256) the top hidden state, new SSRU states, cross-attention
            weights float32 (batch, layers, heads, src_len)).
        """
        new_state = []
        attentions = []
        run = DECODER_LAYERS if n_layers is None else n_layers
        # one hypothesis (greedy, sampling): the fast path's attention as two bmm calls on per-sentence views
        views = self._cross_views(cross_keys, cross_values) if x.shape[0] == 1 else None
        layer_norm, addmm, D = torch.layer_norm, torch.addmm, D_MODEL
        for li in range(run):
            L = self.dec_layers[li]
            if views is not None and L.fast is not None:
                # the layer below (its one-hypothesis attention) with the kernels called directly
                (s_b, s_wt, ln0_w, ln0_b, q_b, q_wt, o_b, o_wt, ln1_w, ln1_b, (lin1, packed1, inv1),
                 (lin2, packed2, inv2), ln2_w, ln2_b) = L.fast
                both = addmm(s_b, x, s_wt)
                f = torch.sigmoid(both[:, D:])
                c = f * ssru_state[li] + (_ONE - f) * both[:, :D]
                new_state.append(c)
                x = layer_norm(x + torch.relu(c), (D,), ln0_w, ln0_b, LN_EPS)
                keys_t, values_0 = views[li]
                scores = torch.bmm((addmm(q_b, x, q_wt) * _SCALE_T).view(N_HEADS, 1, HEAD_DIM), keys_t)
                if cross_bias is not None:
                    scores = scores + cross_bias[0]
                w = torch.softmax(scores, dim=-1)  # (heads, 1, src)
                attentions.append(w.view(1, N_HEADS, -1))
                x = layer_norm(x + addmm(o_b, torch.bmm(w, values_0).view(1, D), o_wt), (D,), ln1_w, ln1_b, LN_EPS)
                h = torch.relu(lin1(x * inv1, packed1) if inv1 is not None else lin1(x))
                h = lin2(h * inv2, packed2) if inv2 is not None else lin2(h)
                x = layer_norm(x + h, (D,), ln2_w, ln2_b, LN_EPS)
                if layer_outputs is not None:
                    layer_outputs.append(x)
                continue
            # SSRU (Kim et al. 2019): c = f*c_prev + (1-f)*(x W), h = relu(c); W and Wf in one product.
            both = L.ssru(x)  # the two halves as slices (``split`` is a Python wrapper: ~1 us more)
            f = torch.sigmoid(both[:, D:])
            c = f * ssru_state[li] + (_ONE - f) * both[:, :D]
            new_state.append(c)
            x = layer_norm(x + torch.relu(c), (D,), *L.ln0, LN_EPS)
            # Cross-attention over the encoder hidden states (its keys/values computed once per input);
            # for batch 1 ``_attention`` runs the same bmm on the same strides as the fast path's views.
            q = L.q(x).view(-1, N_HEADS, 1, HEAD_DIM)
            ctx, w = _attention(q, cross_keys[li], cross_values[li], cross_bias)
            attentions.append(w[:, :, 0, :])
            ctx = ctx.reshape(-1, D)
            x = layer_norm(x + L.o(ctx), (D,), *L.ln1, LN_EPS)
            h = L.ffn2(torch.relu(L.ffn1(x)))
            x = layer_norm(x + h, (D,), *L.ln2, LN_EPS)
            if layer_outputs is not None:
                layer_outputs.append(x)
        new_state.extend(ssru_state[run:])
        return x, new_state, torch.stack(attentions, dim=1)

    def _cross_views(self, cross_keys: list[torch.Tensor], cross_values: list[torch.Tensor]) -> tuple | None:
        """Per decoder layer (keys[0] transposed (heads, head_dim, src), values[0] (heads, src,
        head_dim)): views of one sentence's batch-1 cross keys/values for the one-hypothesis
        attention, made once per sentence (the cache hands the same lists to every step) instead
        of three view calls per layer and step; None where the keys are not batch 1."""
        memo = self._cross_memo  # read once: another thread's step may replace it
        if memo[0] is cross_keys and memo[1] is cross_values:
            return memo[2]
        if any(k.shape[0] != 1 for k in cross_keys):
            return None
        views = tuple((k[0].transpose(1, 2), v[0]) for k, v in zip(cross_keys, cross_values))
        self._cross_memo = (cross_keys, cross_values, views)
        return views

    @torch.no_grad()
    def decode_positions(
        self,
        x: torch.Tensor,
        ssru_state: list[torch.Tensor],
        cross_keys: list[torch.Tensor],
        cross_values: list[torch.Tensor],
        cross_bias: torch.Tensor | None,
        n_layers: int | None = None,
    ) -> tuple[torch.Tensor, list[list[torch.Tensor]], torch.Tensor]:
        """Several consecutive decoder positions at once (a draft to verify): the same
        computation as ``decode_position`` once per position, with every matrix product
        batched over the positions (the SSRU's recurrence is elementwise: only its scan
        runs position by position).

        Args:
            x: float32 (batch, n, 256): the embedded inputs of the n positions.
            ssru_state, cross_keys, cross_values, cross_bias, n_layers: as ``decode_position``.

        Returns:
            (y (batch, n, 256) the top hidden states, the SSRU states after each position
            (n lists of per-layer (batch, 256)), cross-attention weights float32
            (batch, n, layers run, heads, src_len)).
        """
        b, n, _ = x.shape
        run = DECODER_LAYERS if n_layers is None else n_layers
        after: list[list[torch.Tensor]] = [[] for _ in range(n)]
        attentions = []
        for li in range(run):
            L = self.dec_layers[li]
            both = L.ssru(x)
            f = torch.sigmoid(both[..., D_MODEL:])
            g = (1.0 - f) * both[..., :D_MODEL]
            c = ssru_state[li]
            cs = []
            for t in range(n):
                c = f[:, t] * c + g[:, t]
                cs.append(c)
                after[t].append(c)
            x = F.layer_norm(x + F.relu(torch.stack(cs, dim=1)), (D_MODEL,), *L.ln0, LN_EPS)
            q = L.q(x).view(b, n, N_HEADS, HEAD_DIM).transpose(1, 2)
            ctx, w = _attention(q, cross_keys[li], cross_values[li], cross_bias)
            attentions.append(w.transpose(1, 2))  # (batch, n, heads, src)
            x = F.layer_norm(x + L.o(_merge_heads(ctx)), (D_MODEL,), *L.ln1, LN_EPS)
            h = L.ffn2(F.relu(L.ffn1(x)))
            x = F.layer_norm(x + h, (D_MODEL,), *L.ln2, LN_EPS)
        for t in range(n):
            after[t].extend(ssru_state[run:])
        return x, after, torch.stack(attentions, dim=2)

    @torch.no_grad()
    def output_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The output projection restricted to ``rows`` (int64 (k,)): (weight float32
        (256, k), bias float32 (k,)), laid out for ``output_logits``."""
        return (self.p["Wemb"].index_select(0, rows).t().contiguous(),
                self.p["decoder_ff_logit_out_b"].index_select(0, rows))

    @torch.no_grad()
    def output_logits(self, y: torch.Tensor, rows: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """``y @ Wemb.T + b``: y float32 (batch, 256) -> logits float32 (batch, 32000), or
        (batch, k) over the rows prepared by ``output_rows``.

        The full projection reads 32 MB of float32 weights per call: it runs on the file's
        int8 values stored as float16 (16 MB, ``_exact_int8_linear``), or where that is not
        possible on a (256, V) copy of ``Wemb`` laid out for ``addmm`` (about twice as fast as
        ``F.linear`` on one CPU thread). The shortlist's rows are a gathered float32 copy.
        """
        if rows is None:
            if self._full_projection is not None:
                return self._full_projection(y)
            return torch.addmm(self.p["decoder_ff_logit_out_b"], y, self.wemb_t)
        weight, bias = rows
        return torch.addmm(bias, y, weight)
