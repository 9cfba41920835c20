"""The window's C-heap policy (gui/memory_policy.py, issue 19 §3: a 1-hour recording's memory):
large blocks always come from mmap (so freeing them gives the pages back at once), the
threshold does not rise after a large block is freed, and few malloc arenas. Checked in a
fresh interpreter (the policy is process-wide), through glibc's own counters (mallinfo2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest


GLIBC = sys.platform.startswith("linux")

PROBE = textwrap.dedent("""
    import ctypes, json, sys
    sys.path.insert(0, sys.argv[2])
    libc = ctypes.CDLL("libc.so.6")
    if not hasattr(libc, "mallinfo2"):
        print(json.dumps({"skip": "no mallinfo2"})); sys.exit(0)
    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                    "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    applied = {}
    if sys.argv[1] == "on":
        from gui import memory_policy
        applied = memory_policy.install()
    p = libc.malloc(24 << 20)  # mmapped; freeing it raises glibc's dynamic threshold to 24 MB
    libc.free(p)
    before = libc.mallinfo2().hblkhd
    q = libc.malloc(8 << 20)
    mmapped = libc.mallinfo2().hblkhd - before
    libc.free(q)
    print(json.dumps({"applied": applied, "mmapped": mmapped}))
""")


def probe(mode: str) -> dict:
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}  # the user's settings win
    out = subprocess.run([sys.executable, "-c", PROBE, mode, root], capture_output=True, text=True, check=True, env=env)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    return res


@pytest.mark.skipif(not GLIBC, reason="the policy is glibc's (Linux); a no-op elsewhere")
def test_a_freed_large_block_does_not_send_the_next_ones_to_the_heap():
    # glibc's default: after a 24 MB block is freed, an 8 MB one comes from the heap (and its
    # pages stay resident, fragmented, after it is freed): what made the hour's RSS swing
    assert probe("off")["mmapped"] == 0
    on = probe("on")
    assert on["mmapped"] >= 8 << 20
    assert on["applied"] == {"arena_max": 2, "mmap_threshold": 1 << 20}


def test_the_policy_is_a_no_op_off_linux():
    from gui import memory_policy

    assert memory_policy.install(platform="darwin") == {}
    assert memory_policy.install(platform="win32") == {}
