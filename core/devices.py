"""The devices a model runs on (``--device``; torch imported only when a device is resolved).

- ``"auto"``: ``"cuda"`` when ``torch.cuda.is_available()``, else ``"cpu"``;
- ``"cpu"``, ``"cuda"`` (the first CUDA device), ``"mps"`` (Apple silicon).

On a device other than the CPU the model's weights, the encoder input, the KV cache and each
decoder step are on the device; each step's outputs (logits, the captured cross-attention and
hidden state) are copied to the host, where the processors, strategies and events run (events
carry CPU numpy). Whisper (``transcribe``) only, for now.
"""

from __future__ import annotations

__all__ = ["DEVICES", "DEVICE_TASKS", "DeviceError", "device_problem", "resolve_device", "run_device"]

#: the ``--device`` choices, default first
DEVICES = ("auto", "cpu", "cuda", "mps")

#: the commands whose model moves to a device other than the CPU
DEVICE_TASKS = ("transcribe",)


class DeviceError(ValueError):
    """A device was asked for that this machine does not have (the message says what to use)."""


def device_problem(name: str) -> str | None:
    """One line saying why ``name`` cannot be used here ("no CUDA device: torch.cuda.is_available()
    is False; use --device cpu"), else None. ``"auto"`` and ``"cpu"`` always can."""
    if name not in DEVICES:
        return f"device must be one of {', '.join(DEVICES)}, got {name!r}"
    if name == "cuda":
        import torch

        if not torch.cuda.is_available():
            return "no CUDA device: torch.cuda.is_available() is False; use --device cpu"
    if name == "mps":
        import torch

        if not torch.backends.mps.is_available():
            return "no MPS device: torch.backends.mps.is_available() is False; use --device cpu"
    return None


def resolve_device(name: str = "auto") -> str:
    """The torch device string for ``name``: "auto" -> "cuda" if available else "cpu".

    Raises:
        DeviceError: an unknown name, or a device this machine lacks (``device_problem``'s line).
    """
    problem = device_problem(name)
    if problem is not None:
        raise DeviceError(problem)
    if name == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def run_device(command: str | None, name: str = "auto", dtype: str = "float32") -> str:
    """The torch device a ``command`` run with ``--device name --dtype dtype`` uses: "cpu" for
    the commands outside ``DEVICE_TASKS`` and for int8 under "auto" (its int8 products are CPU
    kernels), else :func:`resolve_device` (the CLI and the trace's rerun block share this rule).

    Raises:
        DeviceError: as :func:`resolve_device`.
    """
    name = name or "auto"
    if command not in DEVICE_TASKS or (name == "auto" and dtype == "int8"):
        return "cpu"
    return resolve_device(name)
