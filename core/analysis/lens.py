"""The logit lens over decoded steps (nostalgebraist 2020, "interpreting GPT: the logit lens").

The engine reports, with ``DecodingOptions.capture_lens``, one ``core.events.LensEntry``
per decoder layer on every ``StepEvent`` (``StepEvent.lens``): the layer's output put
through the model's final norm and output projection, as a raw distribution (the hard
rules applied, nothing else), its top-k, and the emitted token's log-probability there.
The last entry is the output layer: the model's own raw distribution (``raw_prob``,
``raw_topk``).

This module turns those entries into what the views and traces show (plain Python and
numpy; no torch, so the GUI imports it at start):

* :func:`deltas`: what each layer promoted or suppressed the emitted token by, the change
  of its log-probability from the layer before (the llm-transparency-tool's per-layer
  contribution to the chosen token);
* :func:`grid`: layers x steps arrays of the top-1 probability, the emitted token's
  probability and the deltas, for a heatmap;
* :func:`lens_json`: the ``--logit-lens`` entries of the CLI's JSON trace.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from core.events import LensEntry, StepEvent


def deltas(lens: Sequence[LensEntry]) -> list[float | None]:
    """Per layer, ``logprob[i] - logprob[i - 1]`` of the emitted token (nats; > 0: layer
    ``i`` promoted it, < 0: suppressed it). None for the first layer (nothing before it)
    and where either side is not finite (a hard rule forbids the token, or it is unknown)."""
    out: list[float | None] = []
    for i, e in enumerate(lens):
        if i == 0:
            out.append(None)
            continue
        a, b = lens[i - 1].logprob, e.logprob
        out.append(b - a if math.isfinite(a) and math.isfinite(b) else None)
    return out


def grid(steps: Sequence[StepEvent], n_layers: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layers x steps arrays of ``steps``' lenses.

    Args:
        steps: the steps, one column each, in order.
        n_layers: rows (default: the longest lens among ``steps``).

    Returns:
        (top, chosen, delta), each float32 (n_layers, len(steps)), row ``i`` = layer ``i``
        (the last row the output layer): the top-1 probability, the emitted token's
        probability (exp of its log-probability) and :func:`deltas`; NaN where a step has
        no lens (or no such layer, or no delta).
    """
    rows = n_layers if n_layers is not None else max((len(s.lens) for s in steps), default=0)
    top = np.full((rows, len(steps)), np.nan, np.float32)
    chosen = np.full_like(top, np.nan)
    delta = np.full_like(top, np.nan)
    for j, s in enumerate(steps):
        for i, (e, d) in enumerate(zip(s.lens[:rows], deltas(s.lens[:rows]))):
            top[i, j] = e.prob
            chosen[i, j] = math.exp(e.logprob) if not math.isnan(e.logprob) else np.nan
            delta[i, j] = np.nan if d is None else d
    return top, chosen, delta


def lens_json(lens: Sequence[LensEntry], digits: int = 6) -> list[dict]:
    """The ``"lens"`` list of one token in the CLI's JSON trace: per decoder layer
    ``{"layer", "id", "text", "prob", "logprob"}`` (``logprob``: the emitted token's, None
    where it is -inf or unknown, since JSON has no infinities)."""
    return [
        {
            "layer": e.layer,
            "id": e.id,
            "text": e.text,
            "prob": round(e.prob, digits),
            "logprob": round(e.logprob, digits) if math.isfinite(e.logprob) else None,
        }
        for e in lens
    ]
