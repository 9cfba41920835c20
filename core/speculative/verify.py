"""The target's verifying decoder call of speculative decoding (``core.speculative.loop``):
the next-token logits after each of the last positions of a sequence, in one call when the
backend gives every position's logits (``Backend.step(..., all_positions=True)``), else one
position per call (the same numbers as plain decoding, no speed-up).
"""

from __future__ import annotations

import dataclasses

import torch

from core.backends.base import StepOutput
from core.cache import Inference


def position_rows(inference: Inference, seq: list[int], fed: int, need: int, all_positions: bool,
                  backend_name: str) -> tuple[list[StepOutput], bool]:
    """Feed ``seq[fed:]`` (the cache holds ``seq[:fed]``) and advance ``inference``.

    Args:
        inference: the run's decoder calls and KV cache (batch 1).
        seq: the whole token sequence (prompt + tokens + the drafted ones).
        fed: how many of ``seq`` the cache already holds.
        need: how many of the last positions of ``seq`` to return logits for.
        all_positions: try the backend's ``all_positions=True`` (one call for all).
        backend_name: for the error message.

    Returns:
        (rows, all_positions): one ``StepOutput`` per each of the last ``need`` positions (its
        ``logits`` the next-token logits after that position, its ``cross_attention`` that
        position's when the backend gives it); ``all_positions`` False once the backend refused
        it (a TypeError naming it), so later calls go one position at a time.

    Raises:
        RuntimeError: the backend took ``all_positions=True`` but gave no ``position_logits``.
    """
    input_ids = torch.tensor([seq], dtype=torch.long)
    if all_positions:
        try:
            out = inference.step(input_ids, input_ids[:, fed:], all_positions=True)
        except TypeError as exc:
            if "all_positions" not in str(exc):
                raise
            all_positions = False
        else:
            inference.advance(out, None)
            if out.position_logits is None:
                raise RuntimeError(f"{backend_name} took all_positions=True but gave no position_logits")
            logits = out.position_logits[:, -need:]
            attention = getattr(out, "position_cross_attention", None)
            rows = []
            for j in range(need):
                if attention is not None:
                    cross = attention[:, attention.shape[1] - need + j]
                else:
                    cross = out.cross_attention if j == need - 1 else None
                rows.append(dataclasses.replace(out, logits=logits[:, j], cross_attention=cross, cache=None,
                                                hidden_states=None, lens_logits=None, position_logits=None))
            return rows, True
    # one position per call: the same numbers as plain decoding, no speed-up
    first = len(seq) - need + 1
    rows = []
    for end in range(first, len(seq) + 1):
        out = inference.step(input_ids[:, :end], input_ids[:, fed:end])
        inference.advance(out, None)
        fed = end
        rows.append(out)
    return rows, all_positions
