"""int8 dynamic quantisation of linear layers, as CTranslate2's ``int8`` compute type does.

Each linear layer's weight is stored as int8 with one float scale per output row (symmetric,
``scale = max |w_row| / 127``); each call quantises its input activations to 8 bits with a
scale of their own (dynamic quantisation) and runs an int8 matrix product that accumulates in
int32, then rescales to float32 and adds the float32 bias.

The kernel is fbgemm's ``torch.ops.quantized.linear_dynamic``, the one
``torch.ao.quantization.quantize_dynamic`` runs, called directly on per-row packed weights
(``quantize_dynamic``'s module adds 0.4-1.2 ms per call on Whisper-base's 512 x 51,865 output
projection, whose int8 product itself takes 0.65 ms; float32: 5.8 ms; one thread here).
torchao 0.18's ``Int8DynamicActivationInt8WeightConfig`` took 86 ms for the same product in
eager mode on this CPU (its fast paths need ``torch.compile`` or a GPU), so it is not used.

fbgemm quantises a call's activations with one (asymmetric, 8-bit) scale for the whole input;
CTranslate2 takes one per row (per token). With many rows (the encoder's 1500 frames) one scale
loses the small rows, so ``Int8Linear`` first scales each row to max |x| = 1 and rescales the
output (a linear map commutes with a per-row factor); a decoder step's single row is unchanged.
On CPUs without VNNI activations are 7-bit (``reduce_range``, as ``quantize_dynamic`` does on
x86) so that the kernel's 16-bit pair sums cannot saturate.
"""

from __future__ import annotations

import warnings

import torch

from core.dtypes import DTYPES, check_dtype

__all__ = ["DTYPES", "Int8Linear", "check_dtype", "fused", "quantize_linears"]



def _has_vnni() -> bool:
    """Whether this x86 CPU has VNNI (int8 dot products summed in int32 without an int16 step)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return "avx512_vnni" in flags or "avx_vnni" in flags
    except OSError:
        pass
    return False


#: 7-bit activations where the kernel sums pairs of u8 x s8 products in int16 (x86 without VNNI:
#: full-range activations could saturate, which is why ``quantize_dynamic`` reduces the range on
#: x86); 8-bit with VNNI (base on the espeak set: WER +2.3 points with 7 bits, +1.0 with 8)
_REDUCE_RANGE = not _has_vnni()
#: several rows per call: each row scaled to max |x| = 1 first (see ``Int8Linear``); base on the
#: espeak set: token agreement with float32 0.52 -> 0.94 and WER +10.5 -> +2.3 points
_PER_ROW = True


def _packed(weight: torch.Tensor, bias: torch.Tensor | None):
    """fbgemm's packed int8 weight of ``weight`` float (out, in): per-row symmetric scales."""
    w = weight.detach().float().contiguous()
    scale = (w.abs().amax(dim=1) / 127.0).clamp_min(1e-12).double()
    zero = torch.zeros(w.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # quantized tensors are deprecated; fbgemm's kernels still take them
        warnings.simplefilter("ignore")
        q = torch.quantize_per_channel(w, scale, zero, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(q, None if bias is None else bias.detach().float().contiguous())


class Int8Linear(torch.nn.Module):
    """A drop-in for ``torch.nn.Linear`` (float32 in, float32 out) with int8 weights (one scale
    per output row) and activations quantised per call, one scale per row (see the module
    docstring); the bias is added in float32 after the rescale (packing it into fbgemm's
    product saves ~2 us a call but on several rows it must be taken out and added back, which
    rounds the small products against the bias).

    Args:
        weight: float (out_features, in_features).
        bias: float (out_features,) or None.

    The float weight is not kept (the caller may still hold it).
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.out_features, self.in_features = int(weight.shape[0]), int(weight.shape[1])
        self.packed = _packed(weight, None)
        self.bias = None if bias is None else bias.detach().float().clone()

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear) -> "Int8Linear":
        """The int8 twin of ``linear``."""
        return cls(linear.weight, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` float32 (..., in_features) -> float32 (..., out_features)."""
        if x.dtype != torch.float32 or not x.is_contiguous():  # (a decode step's row: neither call)
            x = x.float().contiguous()
        if _PER_ROW and x.numel() > x.shape[-1]:  # several rows: one activation scale per row
            s = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-30)
            out = torch.ops.quantized.linear_dynamic(x / s, self.packed, _REDUCE_RANGE).mul_(s)
        else:
            out = torch.ops.quantized.linear_dynamic(x, self.packed, _REDUCE_RANGE)
        return out.add_(self.bias) if self.bias is not None else out  # the product's own tensor: in place

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per-row weights"


def fused(linears: list[torch.nn.Linear]) -> Int8Linear:
    """One ``Int8Linear`` computing ``linears`` (all over the same input) at once: their weights
    stacked by output rows (biases, 0 where a layer has none, likewise). Per-row weight scales and
    the one activation scale per call make its outputs, split by ``out_features``, equal to the
    separate layers' int8 outputs, for one call's fixed cost (about 30 us on this CPU) instead of
    several."""
    weight = torch.cat([m.weight.detach() for m in linears])
    bias = torch.cat([m.bias.detach() if m.bias is not None else torch.zeros(m.out_features) for m in linears])
    return Int8Linear(weight, bias)


def quantize_linears(module: torch.nn.Module, skip: tuple[torch.nn.Module, ...] = ()) -> int:
    """Replace every ``torch.nn.Linear`` under ``module`` (in place) by its ``Int8Linear``,
    except the modules in ``skip`` (e.g. an output projection tied to the embeddings).

    Returns:
        how many layers were replaced.
    """
    skipped = {id(m) for m in skip}
    count = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear) and id(child) not in skipped:
                setattr(parent, name, Int8Linear.from_linear(child))
                count += 1
    return count
