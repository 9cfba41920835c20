"""The compute types a model may load with (torch-free: the CLI and the window read it before
any model loads).

- ``"float32"``: the default; the same ids as transformers' ``generate()``.
- ``"int8"``: Whisper and the bundled Bergamot translation models: linear layers with int8
  weights (one scale per output row) and activations quantised per call, as CTranslate2's int8
  (``core.backends.int8``; which layers: ``core.backends.whisper_models``,
  ``core.backends.marian_net.INT8_ENCODER`` / ``INT8_DECODER``).
- ``"float16"`` / ``"bfloat16"`` (``HALF_DTYPES``): Whisper only: every weight in that type and the
  encoder and decoder computed in it (logits and events still float32). Made for a GPU; on a CPU
  bfloat16 runs about as fast as float32 and float16 about 4x slower (tiny.en, one thread, torch
  2.14: 24 / 27 / 72 ms per token). ``--precision-flips`` marks the steps where float32 would have
  chosen another token (``core.precision``).

``DTYPES`` are the compute types a backend takes (``check_dtype``); ``MODEL_DTYPES`` what a
model loads with (the CLI's ``--dtype`` choices): those and ``HALF_DTYPES``.
"""

from __future__ import annotations

__all__ = ["DTYPES", "HALF_DTYPES", "HALF_TASKS", "INT8_TASKS", "MODEL_DTYPES", "check_dtype",
           "check_model_dtype"]

#: the compute types a backend takes, default first
DTYPES = ("float32", "int8")

#: the half-precision types a Whisper model loads in (weights cast; see the module docstring)
HALF_DTYPES = ("float16", "bfloat16")

#: every type a model loads with: the CLI's ``--dtype`` choices
MODEL_DTYPES = DTYPES + HALF_DTYPES

#: the tasks whose models load in half precision (Whisper, one command)
HALF_TASKS = ("transcribe",)

#: the tasks whose models run in int8 (Whisper's lean decoder, Bergamot tiny11); the others run in float32
INT8_TASKS = ("transcribe", "stream", "translate")


def check_dtype(dtype: str, choices: tuple[str, ...] | None = None) -> str:
    """``dtype`` if it is one of ``choices`` (default ``DTYPES``).

    Raises:
        ValueError: any other value, naming the valid ones.
    """
    choices = DTYPES if choices is None else choices
    if dtype not in choices:
        raise ValueError(f"dtype must be one of {', '.join(choices)}, got {dtype!r}")
    return dtype


def check_model_dtype(dtype: str) -> str:
    """``dtype`` if it is one of ``MODEL_DTYPES`` (:func:`check_dtype` over those).

    Raises:
        ValueError: any other value, naming the valid ones.
    """
    return check_dtype(dtype, MODEL_DTYPES)
