"""The compute types a model may load with (torch-free: the CLI and the window read it before
any model loads).

- ``"float32"``: the default; the same ids as transformers' ``generate()``.
- ``"int8"``: Whisper and the bundled Bergamot translation models: linear layers with int8
  weights (one scale per output row) and activations quantised per call, as CTranslate2's int8
  (``core.backends.int8``; which layers: ``core.backends.whisper_models``,
  ``core.backends.marian_net.INT8_ENCODER`` / ``INT8_DECODER``).
"""

from __future__ import annotations

__all__ = ["DTYPES", "INT8_TASKS", "check_dtype"]

#: the compute types, default first
DTYPES = ("float32", "int8")

#: the tasks whose models run in int8 (Whisper's lean decoder, Bergamot tiny11); the others run in float32
INT8_TASKS = ("transcribe", "stream", "translate")


def check_dtype(dtype: str) -> str:
    """``dtype`` if it is one of ``DTYPES``.

    Raises:
        ValueError: any other value, naming the valid ones.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return dtype
