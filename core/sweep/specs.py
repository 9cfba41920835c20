"""Strategy specs of a sweep: the lanes' grammar (``core.tasks.lane_spec``) plus seed ranges.

``sample:T=0.8,seed=0..4`` is five runs, seeds 0 to 4 (both ends included); every other
spec is one run. A :class:`Run` keeps the spec as written (the strategy the summary reports,
its seeds pooled as a mean with its spread) and the options of one seed.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace

from core.options import DecodingOptions
from core.tasks.lane_spec import parse_lane_spec

#: ``seed=A..B`` inside a spec (A <= B, whole numbers)
_SEED_RANGE = re.compile(r"(?<![\w-])seed=(\d+)\.\.(\d+)")
#: the most seeds one range may ask for (a typo such as 0..10000 would run for days)
MAX_SEEDS = 1000


@dataclass(frozen=True)
class Run:
    """One strategy x seed of a sweep.

    Attributes:
        spec: the strategy as written on the command line (seed range included).
        seed: the seed of this run (the options' seed).
        options: the validated decoding options.
    """

    spec: str
    seed: int | None
    options: DecodingOptions


def expand(specs: list[str], base: DecodingOptions | None = None) -> list[Run]:
    """The runs of ``specs`` in order, a seed range expanded to one run per seed. A sweep keeps
    no cross-attention or logit lens (its traces are the CLI's without ``--attention``), so
    both are off in every run's options, whatever ``base`` says: the options hash of a run is
    the same from the CLI and from code.

    Raises:
        ValueError: a bad spec (``parse_lane_spec``'s message), a reversed or huge seed range,
            two ranges in one spec, the same spec twice, or no spec.
    """
    if not specs:
        raise ValueError("give at least one strategy (e.g. --strategies greedy beam:5 'sample:T=0.8,seed=0..4')")
    if len(set(specs)) != len(specs):
        twice = next(s for s in specs if specs.count(s) > 1)
        raise ValueError(f"strategy {twice!r} is given twice; give each once")
    base = replace(base or DecodingOptions(), capture_attention=False, capture_lens=False)
    runs: list[Run] = []
    for spec in specs:
        ranges = _SEED_RANGE.findall(spec)
        if len(ranges) > 1:
            raise ValueError(f"strategy {spec!r}: one seed range per strategy")
        if not ranges:
            options = parse_lane_spec(spec, base)
            runs.append(Run(spec, options.seed, options))
            continue
        lo, hi = int(ranges[0][0]), int(ranges[0][1])
        if hi < lo:
            raise ValueError(f"strategy {spec!r}: seed={lo}..{hi} is reversed; write seed={hi}..{lo}")
        if hi - lo + 1 > MAX_SEEDS:
            raise ValueError(f"strategy {spec!r}: seed={lo}..{hi} asks for {hi - lo + 1} runs; at most {MAX_SEEDS}")
        for seed in range(lo, hi + 1):
            options = parse_lane_spec(_SEED_RANGE.sub(f"seed={seed}", spec), base)
            runs.append(Run(spec, seed, options))
    return runs


def options_hash(task: str, model: str, options: DecodingOptions, settings: dict | None = None) -> str:
    """SHA-256 (64 hex digits) of what besides the input decides a row: the task, the model,
    the full decoding options and the task's settings (language, dtype, shortlist, ...)."""
    doc = {"task": task, "model": model, "options": options.to_dict(), "settings": settings or {}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8")).hexdigest()
