"""Logits processors: small callables ``(input_ids, scores) -> scores`` (one class per rule,
as transformers ``generation/logits_process.py``), the stage registry that declares them
(``core.processors.stages``, torch-free) and the list that composes them
(``core.processors.pipeline``: ``ProcessorList``, ``build_processors``).

This package module imports nothing heavy: ``core.processors.stages`` is read by the window,
which must not load torch. The names below are loaded from their modules on first use.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "NEG_INF": "core.processors.warpers", "Temperature": "core.processors.warpers",
    "TopK": "core.processors.warpers", "TopP": "core.processors.warpers",
    "NoRepeatNGram": "core.processors.penalties", "RepetitionPenalty": "core.processors.penalties",
    "SuppressTokens": "core.processors.rules", "BeginSuppressTokens": "core.processors.rules",
    "HARD_RULES": "core.processors.rules", "rules_for": "core.processors.chain",
    "ChainContext": "core.processors.chain", "chain_stages": "core.processors.chain",
    "LogitsProcessor": "core.processors.pipeline", "ProcessorList": "core.processors.pipeline",
    "build_processors": "core.processors.pipeline", "split_hard_rules": "core.processors.pipeline",
    "apply_processors": "core.processors.pipeline", "stage_name": "core.processors.pipeline",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'core.processors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
