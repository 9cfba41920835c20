"""Readers for the files of Mozilla Bergamot Marian models: the Marian binary model format
(weights, incl. 8-bit intgemm ones with their scales) and the lexical shortlist.

References: browsermt/marian-dev ``src/common/binary.cpp`` (the binary layout),
``src/common/types.h`` (item types), ``src/data/shortlist.h`` (``BinaryShortlistGenerator``)
and ``src/tensors/cpu/integer_common.h`` (intgemm quantisation). The network that runs
these weights is ``core.backends.marian_tiny``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

# Marian binary item types (src/common/types.h): TypeClass::float_type|4, intgemm8|1, int8.
TYPE_FLOAT32 = 0x404
TYPE_INTGEMM8 = 0x4101
TYPE_INT8 = 0x101

SHORTLIST_MAGIC = 0xF11A48D5013417F5


class MarianFormatError(ValueError):
    """A model, vocabulary or shortlist file is not in the format this reader understands."""


# --------------------------------------------------------------------------------------
# File readers
# --------------------------------------------------------------------------------------


def read_marian_binary(path: str | Path) -> tuple[dict[str, np.ndarray], str]:
    """Read a Marian ``.bin`` model file and dequantise it to float32.

    Layout (browsermt/marian-dev ``src/common/binary.cpp``): ``u64 version`` (1), ``u64 n``;
    n headers of four u64 (name length incl. NUL, type, number of dims, data bytes); the
    NUL-terminated names; the shapes as int32; ``u64 pad`` and that many bytes; the data
    blocks, each ``data bytes`` long.

    An intgemm8 item (``integer_common.h``) holds ``prod(shape)`` int8 values, then a
    float32 quantMult (127 / max|W|), then padding; it is dequantised as ``q / quantMult``.
    Every intgemm8 matrix except ``Wemb`` stores its bytes transposed: the shape field says
    [in, out] but the bytes are row-major [out, in] — exactly ``nn.Linear.weight``. This
    reader returns intgemm8 matrices in their stored byte order, i.e. ``Wemb`` as
    (vocab, d_model) and the projections as (out, in).

    Args:
        path: the model file.

    Returns:
        (items, model_yaml): name -> float32 array (1-D for biases, 2-D for matrices;
        the int8 activation scales ``*_QuantMultA`` are dropped, a float port ignores them),
        and the text of the ``special:model.yml`` item.

    Raises:
        MarianFormatError: wrong version, truncated file or an unknown item type.
        FileNotFoundError: no such file.
    """
    data = Path(path).read_bytes()
    if len(data) < 16:
        raise MarianFormatError(f"{path}: too short to be a Marian model file")
    version, n = struct.unpack_from("<QQ", data, 0)
    if version != 1:
        raise MarianFormatError(f"{path}: Marian binary version {version}, expected 1")
    off = 16
    headers = [struct.unpack_from("<QQQQ", data, off + 32 * i) for i in range(n)]
    off += 32 * n
    names = []
    for name_len, _, _, _ in headers:
        names.append(data[off : off + name_len - 1].decode("utf-8"))
        off += name_len
    shapes = []
    for _, _, ndim, _ in headers:
        shapes.append(tuple(struct.unpack_from(f"<{ndim}i", data, off)))
        off += 4 * ndim
    (pad,) = struct.unpack_from("<Q", data, off)
    off += 8 + pad

    items: dict[str, np.ndarray] = {}
    model_yaml = ""
    for name, (_, typ, _, nbytes), shape in zip(names, headers, shapes):
        if off + nbytes > len(data):
            raise MarianFormatError(f"{path}: truncated at item {name!r}")
        block = data[off : off + nbytes]
        off += nbytes
        count = int(np.prod(shape))
        if name.endswith("_QuantMultA"):
            continue  # int8 activation scale: only the int8 GEMM uses it
        if typ == TYPE_FLOAT32:
            arr = np.frombuffer(block, dtype="<f4", count=count).reshape(shape)
            items[name] = (arr.reshape(-1) if arr.shape[0] == 1 else arr).copy()
        elif typ == TYPE_INTGEMM8:
            q = np.frombuffer(block, dtype=np.int8, count=count)
            (quant_mult,) = struct.unpack_from("<f", block, count)
            w = q.astype(np.float32) / np.float32(quant_mult)
            rows, cols = shape
            # Stored transposed except the embedding matrix (see docstring).
            items[name] = w.reshape(rows, cols) if name == "Wemb" else w.reshape(cols, rows)
        elif typ == TYPE_INT8 and name == "special:model.yml":
            model_yaml = block.split(b"\0", 1)[0].decode("utf-8")
        else:
            raise MarianFormatError(f"{path}: item {name!r} has unsupported type {typ:#x}")
    return items, model_yaml


@dataclass(frozen=True)
class Shortlist:
    """A Marian lexical shortlist (``lex.50.50.*.s2t.bin``, browsermt/marian-dev
    ``src/data/shortlist.h`` ``BinaryShortlistGenerator``).

    Attributes:
        first_num: the ``first_num`` most frequent target ids are always allowed (50).
        best_num: translations kept per source id when the file was made (50).
        offsets: int64 (source_vocab + 1,): ``targets[offsets[s]:offsets[s+1]]`` are the
            candidate target ids for source id ``s``.
        targets: int64 (n,): concatenated candidate lists.
    """

    first_num: int
    best_num: int
    offsets: np.ndarray
    targets: np.ndarray

    def allowed_ids(self, source_ids: Sequence[int]) -> np.ndarray:
        """Target ids the decoder may choose for this source sentence.

        The first ``first_num`` ids, plus the candidates of every source id, padded to a
        multiple of 8 with the smallest unused ids from ``first_num`` up (as Marian does
        for its int8 GEMM).

        Args:
            source_ids: the source token ids (incl. ``</s>``).

        Returns:
            int64 array (k,), sorted ascending, k a multiple of 8.
        """
        allowed = set(range(self.first_num))
        n_src = len(self.offsets) - 1
        for s in source_ids:
            if 0 <= s < n_src:
                allowed.update(self.targets[self.offsets[s] : self.offsets[s + 1]].tolist())
        pad = -len(allowed) % 8
        candidate = self.first_num
        while pad:
            if candidate not in allowed:
                allowed.add(candidate)
                pad -= 1
            candidate += 1
        return np.array(sorted(allowed), dtype=np.int64)


def read_shortlist(path: str | Path) -> Shortlist:
    """Read a binary lexical shortlist.

    Layout: six u64 (magic 0xF11A48D5013417F5, checksum, firstNum, bestNum, nOffsets,
    nTargets), ``u64 offsets[nOffsets]``, ``u32 targets[nTargets]``.

    Raises:
        MarianFormatError: wrong magic number or size.
    """
    data = Path(path).read_bytes()
    if len(data) < 48:
        raise MarianFormatError(f"{path}: too short to be a shortlist file")
    magic, _checksum, first_num, best_num, n_off, n_list = struct.unpack_from("<6Q", data, 0)
    if magic != SHORTLIST_MAGIC:
        raise MarianFormatError(f"{path}: bad shortlist magic {magic:#x}")
    if len(data) != 48 + 8 * n_off + 4 * n_list:
        raise MarianFormatError(f"{path}: size {len(data)} does not match its header")
    offsets = np.frombuffer(data, dtype="<u8", count=n_off, offset=48).astype(np.int64)
    targets = np.frombuffer(data, dtype="<u4", count=n_list, offset=48 + 8 * n_off)
    return Shortlist(int(first_num), int(best_num), offsets, targets.astype(np.int64))
