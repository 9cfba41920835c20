"""The CTranslate2 ``model.bin`` format: a reader of its variables, aliases and dtypes.

The format reference is CTranslate2 itself: the writer is
``ctranslate2/specs/model_spec.py::ModelSpec._serialize`` and the reader
``src/models/model.cc::Model::load`` (OpenNMT/CTranslate2, MIT). Only float formats convert
to float32 exactly (float32, float16, bfloat16); int8/int16 variables are refused because
their quantization lost information. ``core.backends.whisper_ct2`` maps the variables onto
a transformers Whisper model.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

SUPPORTED_BINARY_VERSION = 6
"""Newest CT2 ``model.bin`` binary version this reader understands (CTranslate2 4.x writes 6)."""

# DataType enum of include/ctranslate2/types.h (order used by model_spec._dtype_to_type_id).
_DTYPE_NAMES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")
_ITEM_SIZE = {"float32": 4, "int8": 1, "int16": 2, "int32": 4, "float16": 2, "bfloat16": 2}
_NUMPY_DTYPE = {
    "float32": np.dtype("<f4"),
    "int8": np.dtype("i1"),
    "int16": np.dtype("<i2"),
    "int32": np.dtype("<i4"),
    "float16": np.dtype("<f2"),
    "bfloat16": np.dtype("<u2"),  # raw bits; widened to float32 in _to_float32
}
_QUANTIZED = ("int8", "int16")

# Whisper's fixed front end (openai/whisper audio.py): 16 kHz, 10 ms hop, 30 s windows.



class CT2FormatError(ValueError):
    """The bytes are not a CTranslate2 Whisper ``model.bin`` this reader can convert."""


class CT2QuantizedModelError(CT2FormatError):
    """The CT2 model stores int8/int16 weights; converting them back would be lossy."""


@dataclass
class CT2ModelBin:
    """Parsed contents of a CTranslate2 ``model.bin``.

    Attributes:
        binary_version: file format version (1..6).
        spec_name: model specification name, e.g. "WhisperSpec" ("" for version 1).
        spec_revision: revision of that specification.
        variables: name -> numpy array in the stored dtype (float16/float32/int8/...; bfloat16
            is kept as its raw uint16 bits, see ``dtypes``). Arrays are read-only views of
            the input buffer.
        dtypes: name -> CT2 dtype name ("float32", "int8", "int16", "int32", "float16",
            "bfloat16").
        aliases: alias name -> name of the variable it shares (e.g. the decoder output
            projection tied to the token embeddings).
    """

    binary_version: int
    spec_name: str
    spec_revision: int
    variables: dict[str, np.ndarray]
    dtypes: dict[str, str]
    aliases: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> np.ndarray:
        """Return variable ``name`` (following aliases); raises CT2FormatError if absent."""
        target = self.aliases.get(name, name)
        if target not in self.variables:
            raise CT2FormatError(
                f"CT2 model.bin has no variable {name!r}: it is not a complete "
                f"{self.spec_name or 'CTranslate2'} model."
            )
        return self.variables[target]

    def float32(self, name: str) -> torch.Tensor:
        """Variable ``name`` as a new float32 tensor (exact for float16/bfloat16 sources)."""
        target = self.aliases.get(name, name)
        return _to_float32(self.get(name), self.dtypes[target])

    def scalar(self, name: str) -> int | float:
        """A rank-0 variable (e.g. ``encoder/num_heads``) as a Python number."""
        value = self.get(name)
        if value.size != 1:
            raise CT2FormatError(f"CT2 variable {name!r} should be a scalar, got shape {value.shape}.")
        return value.reshape(()).item()


def _to_float32(array: np.ndarray, dtype: str) -> torch.Tensor:
    if dtype == "bfloat16":
        # bfloat16 is the top half of a float32: shift the bits up (exact).
        bits = array.astype(np.uint32) << 16
        return torch.from_numpy(bits.view(np.float32))
    if dtype in ("float16", "float32"):
        return torch.from_numpy(array.astype(np.float32))  # astype copies: writable, owned
    raise CT2QuantizedModelError(f"cannot convert a {dtype} variable to float32 without its scale")


class _Cursor:
    """Little-endian reader over a bytes-like object that reports truncation clearly."""

    def __init__(self, data: memoryview):
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> memoryview:
        if self.pos + n > len(self.data):
            raise CT2FormatError(
                f"CT2 model.bin is truncated: needed {n} bytes for {what} at byte {self.pos}, "
                f"but the file has {len(self.data)} bytes. Re-download or re-convert the model."
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size, what))[0]

    def string(self, what: str) -> str:
        # uint16 length (including the trailing NUL), then the bytes (model_spec._write_string).
        length = self.unpack("<H", f"the length of {what}")
        raw = bytes(self.take(length, what))
        return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def read_ct2_model_bin(source: bytes | bytearray | memoryview | str | Path) -> CT2ModelBin:
    """Parse a CTranslate2 ``model.bin`` (binary versions 1..6).

    Layout (all little-endian; see ``ctranslate2/specs/model_spec.py::_serialize``):
    uint32 binary version; [v>=2: uint16-length-prefixed NUL-terminated spec name, uint32
    spec revision]; uint32 variable count; per variable: name (same string encoding),
    uint8 rank, rank x uint32 dims, then for v>=4 uint8 dtype id (0 f32, 1 i8, 2 i16,
    3 i32, 4 f16, 5 bf16) and uint32 byte count, or for v<4 uint8 item size (4 -> f32,
    2 -> i16, 1 -> i8) and uint32 element count; raw data; then [v>=3: uint32 alias count,
    pairs of strings alias -> variable name].

    Args:
        source: the file's bytes (e.g. several split parts joined in memory) or a path.

    Returns:
        CT2ModelBin whose arrays are zero-copy views of ``source``.

    Raises:
        CT2FormatError: unknown/newer binary version, truncated data, unknown dtype id,
            byte count not matching the shape, or trailing garbage.
        CT2QuantizedModelError: a tensor (rank >= 1) is stored as int8 or int16, or a
            quantization scale is present (a lossy int8/int16 conversion).
    """
    if isinstance(source, (str, Path)):
        source = Path(source).read_bytes()
    cur = _Cursor(memoryview(source).cast("B"))
    version = cur.unpack("<I", "the binary version")
    if version == 0 or version > SUPPORTED_BINARY_VERSION:
        raise CT2FormatError(
            f"Unsupported CT2 model.bin binary version {version}: this reader supports versions "
            f"1 to {SUPPORTED_BINARY_VERSION}. The file is either not a CTranslate2 model or was "
            "written by a newer CTranslate2; convert the original checkpoint with "
            "transformers instead."
        )
    spec_name, revision = "", 1
    if version >= 2:
        spec_name = cur.string("the spec name")
        revision = cur.unpack("<I", "the spec revision")
    count = cur.unpack("<I", "the variable count")
    variables: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for index in range(count):
        name = cur.string(f"the name of variable #{index}")
        rank = cur.unpack("<B", f"the rank of {name!r}")
        shape = tuple(cur.unpack("<I", f"dimension {d} of {name!r}") for d in range(rank))
        if version >= 4:
            type_id = cur.unpack("<B", f"the dtype of {name!r}")
            if type_id >= len(_DTYPE_NAMES):
                raise CT2FormatError(f"CT2 variable {name!r} has unknown dtype id {type_id}.")
            dtype = _DTYPE_NAMES[type_id]
            num_bytes = cur.unpack("<I", f"the byte count of {name!r}")
        else:
            item_size = cur.unpack("<B", f"the item size of {name!r}")
            legacy = {4: "float32", 2: "int16", 1: "int8"}  # model.cc::get_dtype_from_item_size
            if item_size not in legacy:
                raise CT2FormatError(f"CT2 variable {name!r} has unknown item size {item_size}.")
            dtype = legacy[item_size]
            num_bytes = cur.unpack("<I", f"the element count of {name!r}") * item_size
        expected = int(np.prod(shape, dtype=np.int64)) * _ITEM_SIZE[dtype]
        if num_bytes != expected:
            raise CT2FormatError(
                f"CT2 variable {name!r}: {num_bytes} bytes stored but shape {shape} of {dtype} "
                f"needs {expected}. The file is corrupt."
            )
        raw = cur.take(num_bytes, f"the data of {name!r}")
        if rank >= 1 and dtype in _QUANTIZED:
            raise CT2QuantizedModelError(
                f"This CTranslate2 model stores {dtype} weights (variable {name!r}); converting "
                "quantized weights back to float would be lossy and does not reproduce the "
                "original model. Use a float16/float32 CT2 conversion (ct2-transformers-converter "
                "--quantization float16) or the original transformers checkpoint."
            )
        if name.endswith("_scale"):
            raise CT2QuantizedModelError(
                f"This CTranslate2 model holds quantization scales ({name!r}): it was quantized "
                "(lossy). Use a float16/float32 CT2 conversion or the original checkpoint."
            )
        variables[name] = np.frombuffer(raw, dtype=_NUMPY_DTYPE[dtype]).reshape(shape)
        dtypes[name] = dtype
    aliases: dict[str, str] = {}
    if version >= 3:
        for index in range(cur.unpack("<I", "the alias count")):
            alias = cur.string(f"alias #{index}")
            aliases[alias] = cur.string(f"the target of alias {alias!r}")
    if cur.pos != len(cur.data):
        raise CT2FormatError(
            f"CT2 model.bin has {len(cur.data) - cur.pos} unexpected bytes after its last record "
            f"(at byte {cur.pos}); the file is corrupt or several parts were joined wrongly."
        )
    return CT2ModelBin(version, spec_name, revision, variables, dtypes, aliases)
