"""The window's C-heap policy (issue 19 §3: the memory a 1-hour recording takes).

torch allocates its tensors with glibc's ``malloc``. glibc serves a block of at least the
"mmap threshold" (128 kB at start) with its own ``mmap`` and unmaps it on ``free``, but
each time such a block is freed it RAISES the threshold to that block's size (up to
32 MB). After the first 30 s window the encoder's transient tensors (3-12 MB each) then
come from the heap arenas: freed, they stay resident and fragment the arenas, and each
thread that allocates (the decoding worker, the spill thread, the GUI) may get an arena of
its own (up to 8 per core). Measured on a long-form run of the hour with whisper-base
(tests/bench/bench_gui_stall.py --case hour): the arenas held 47 MB free after opening
the recording, 270 MB after 14 minutes of audio, 415 MB at the end, and resident memory
swung by 100-200 MB between windows (peak 2,077 MB).

The policy, set once at startup (``mallopt``; Linux with glibc only, a no-op elsewhere):
  - ``M_MMAP_THRESHOLD`` fixed at :data:`MMAP_THRESHOLD` (1 MB): blocks at least that
    large (the encoder's transients, each window's cross-attention keys/values: 3 MB a
    layer with base) always come from ``mmap`` and go back to the system when freed;
    fixing it also stops the dynamic raise. Per-step tensors (logits 207 kB, attention rows
    288 kB, the growing self-attention cache) stay in the heap.
  - ``M_ARENA_MAX`` = :data:`ARENA_MAX` (2): fewer arenas, less memory stranded free in
    arenas of threads that allocated once.
Measured (the same bench, 150 s of decoding, ~10 minutes of audio): with this policy the
arenas held 85-100 MB free after 80-315 s of audio (glibc's default: 134 MB, then 270, then
415 at the end). A 128 kB threshold kept them at ~44 MB but cost ~2 s more system CPU per
120 s of audio (page faults); 1 MB costs ~1 s (5 %); 4 MB let the arenas grow to 280 MB free.
``MALLOC_ARENA_MAX`` / ``MALLOC_MMAP_THRESHOLD_`` in the environment still win: the policy
leaves a setting the user made there alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

#: blocks at least this large (bytes) always come from mmap
MMAP_THRESHOLD = 1024 * 1024
#: malloc arenas at most
ARENA_MAX = 2

_applied: dict[str, int] = {}


def install(platform: str = sys.platform, environ=os.environ) -> dict[str, int]:
    """Put the policy (module docstring) in force for this process; call it early, before
    the worker threads start (an arena a thread already has stays).

    Args:
        platform: ``sys.platform`` (tests pass another).
        environ: the environment; a setting given there (``MALLOC_ARENA_MAX``,
            ``MALLOC_MMAP_THRESHOLD_``) is left as the user made it.

    Returns:
        the settings applied, e.g. ``{"arena_max": 2, "mmap_threshold": 1048576}``; ``{}``
        off Linux, where the C library is not glibc, or where ``mallopt`` refused.
    """
    global _applied
    if not platform.startswith("linux"):
        return {}
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc only (musl has a mallopt that ignores these)
    except (OSError, AttributeError):
        return {}
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    applied = {}
    if "MALLOC_ARENA_MAX" not in environ and mallopt(M_ARENA_MAX, ARENA_MAX) == 1:
        applied["arena_max"] = ARENA_MAX
    if "MALLOC_MMAP_THRESHOLD_" not in environ and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1:
        applied["mmap_threshold"] = MMAP_THRESHOLD
    _applied = applied
    return dict(applied)


def applied() -> dict[str, int]:
    """The settings the last :func:`install` applied (``{}`` before it or where none)."""
    return dict(_applied)
