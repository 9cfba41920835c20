"""Load torch's shared libraries ahead of time, without holding the GIL (issue 22: "model load
with no stall > 100 ms").

The first model load imports torch in the loader thread. Python loads an extension module
(``torch._C``) with ``dlopen`` while it holds the GIL, and that ``dlopen`` maps and relocates
libtorch (libtorch_cpu alone is hundreds of MB; a CUDA build adds libtorch_cuda and the CUDA
libraries) and runs its static initialisers (thousands of operator registrations): one call
of 400-800 ms here, all of it with the GIL held, so the GUI thread's every Python slot (a
timer, a paint handler) waited that long. ``ctypes.CDLL(path)`` holds the GIL too.

A foreign function called through ``ctypes.CDLL`` releases the GIL for the call. So
:func:`load_libraries` calls libc's ``dlopen`` that way for the libraries torch's import would
load: ``libtorch_global_deps`` (``RTLD_GLOBAL``, as torch loads it) and ``libtorch`` (which
pulls in libtorch_cpu and, in a CUDA build, libtorch_cuda). They stay loaded; torch's own
import later finds them loaded (same soname) and only binds ``torch._C``. Nothing of torch is
imported here (``sys.modules`` stays without it).

It runs in the model loader's worker thread, right before the load imports torch
(``gui.tabs.model_load``), not on a thread of its own: while a ``dlopen`` runs, glibc makes a
``pthread_create`` in another thread wait for it (the loader's lock), and the GUI thread
starting the loader's QThread then stalled for 200 ms. A second caller waits for the first
(a lock whose wait releases the GIL); later calls return at once.

A CUDA build with ``LD_LIBRARY_PATH`` set is left to torch's import (it loads its CUDA wheels'
libraries by path before libtorch, so that they win over copies found on that path). Set
``DECODING_EXPLORER_NO_PRELOAD=1`` to turn it off (torch then loads as it did before).
Errors are never raised: a library that cannot be loaded here is loaded by torch's import as
before, and :func:`loaded` says what was.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading

#: torch's libraries, in the order torch's import loads them, with their dlopen modes
LIBRARIES = (("libtorch_global_deps.so", os.RTLD_GLOBAL), ("libtorch.so", os.RTLD_LOCAL))

_lock = threading.Lock()
_done = False
_loaded: list[str] = []
_errors: list[str] = []


def enabled() -> bool:
    """Whether a preload may run: Linux, ``DECODING_EXPLORER_NO_PRELOAD`` unset, torch not
    imported yet."""
    return (sys.platform.startswith("linux") and not os.environ.get("DECODING_EXPLORER_NO_PRELOAD")
            and "torch" not in sys.modules)


def torch_library_dir() -> str | None:
    """torch's ``lib`` folder (found without importing torch), or None without torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "lib")
    return path if os.path.isdir(path) else None


def _dlopen():
    """libc's ``dlopen`` as a ctypes foreign function: the GIL is released while it runs."""
    libc = ctypes.CDLL(None)  # the process's own symbols (libc's dlopen among them); already mapped
    fn = libc.dlopen
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return fn


def load_libraries() -> list[str]:
    """Load torch's shared libraries here with the GIL released (once per process; a
    concurrent caller waits for the first). A no-op where :func:`enabled` says no. Never raises:
    what cannot be loaded here torch's import loads (and reports) as before.

    Returns:
        the names of the libraries loaded (:func:`loaded`).
    """
    global _done
    with _lock:  # (acquiring a threading.Lock releases the GIL while it waits)
        if _done or not enabled():
            _done = True
            return list(_loaded)
        _done = True
        try:
            lib = torch_library_dir()
            if lib is None:
                return []
            if os.environ.get("LD_LIBRARY_PATH") and os.path.exists(os.path.join(lib, "libtorch_cuda.so")):
                # torch's import loads its CUDA wheels' libraries by path first, so that they win
                # over copies on LD_LIBRARY_PATH; a dlopen of libtorch before that would not
                _errors.append("skipped: a CUDA build with LD_LIBRARY_PATH set (torch's import loads it)")
                return []
            dlopen = _dlopen()
            for name, mode in LIBRARIES:
                path = os.path.join(lib, name)
                if not os.path.exists(path):
                    continue
                if dlopen(path.encode(), os.RTLD_NOW | mode):
                    _loaded.append(name)
                else:
                    _errors.append(name)  # torch's import loads it (and says why it cannot)
        except Exception as exc:  # noqa: BLE001 - never fatal: torch's import does the load
            _errors.append(f"{type(exc).__name__}: {exc}")
        return list(_loaded)


def loaded() -> list[str]:
    """The libraries :func:`load_libraries` loaded (names)."""
    return list(_loaded)


def errors() -> list[str]:
    """The libraries it could not load (torch's import loads them itself), and any error."""
    return list(_errors)
