"""Logits processors: small callables ``(input_ids, scores) -> scores`` (one class per rule,
as transformers ``generation/logits_process.py``), the stage registry that declares them
(``core.processors.stages``, torch-free) and the list that composes them
(``core.processors.pipeline``: ``ProcessorList``, ``build_processors``).

This package module imports nothing heavy: ``core.processors.stages`` is read by the window,
which must not load torch. The names below are loaded from their modules on first use.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "core.processors.warpers": ("NEG_INF", "Temperature", "TopK", "TopP"),
    "core.processors.penalties": ("NoRepeatNGram", "RepetitionPenalty"),
    "core.processors.rules": ("SuppressTokens", "BeginSuppressTokens", "HARD_RULES"),
    "core.processors.chain": ("rules_for", "ChainContext", "chain_stages"),
    "core.processors.pipeline": ("LogitsProcessor", "ProcessorList", "build_processors", "split_hard_rules",
                                 "apply_processors", "stage_name"),
}
"""The names this package hands on, by the module that defines them (imported on first use)."""

_LAZY = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'core.processors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
