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

Then the rest of what that import would ``dlopen`` with the GIL held (:data:`CUDA_LIBRARIES`,
:data:`PYTHON_LIBRARIES`; :func:`also_loaded` names them): a CUDA build's import loads its
wheels' libraries through ``ctypes.CDLL`` (the GIL held), two of which libtorch does not pull
in (libnvrtc-builtins, libcusolver: read from disk, out of the page cache, the first took
78 ms), and ``torch._C``'s own dependency libtorch_python (34 MB) is loaded by the import
system, the GIL held too. Each is found as torch's import finds it (the same folders, in the
same order, the first match), so its later ``dlopen`` of the same path finds it loaded. What
is left of the import's GIL hold is ``torch._C``'s init (its Python bindings: 60-100 ms of
CPU here), which no preload can take off.

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
import glob
import importlib.util
import os
import re
import sys
import threading

#: torch's libraries, in the order torch's import loads them, with their dlopen modes
LIBRARIES = (("libtorch_global_deps.so", os.RTLD_GLOBAL), ("libtorch.so", os.RTLD_LOCAL))

#: the CUDA wheels' libraries a CUDA build's import of torch loads (torch 2.14's
#: ``_preload_cuda_deps``, in its order: libcublasLt before libcublas) as (folder, glob pattern)
CUDA_LIBRARIES = (
    ("cublas", "libcublasLt.so.*[0-9]"), ("cublas", "libcublas.so.*[0-9]"), ("cudnn", "libcudnn.so.*[0-9]"),
    ("cuda_nvrtc", "libnvrtc.so.*[0-9]"), ("cuda_nvrtc", "libnvrtc-builtins.so.*[0-9]"),
    ("cuda_runtime", "libcudart.so.*[0-9]"), ("cuda_cupti", "libcupti.so.*[0-9]"), ("cufft", "libcufft.so.*[0-9]"),
    ("curand", "libcurand.so.*[0-9]"), ("nvjitlink", "libnvJitLink.so.*[0-9]"), ("cusparse", "libcusparse.so.*[0-9]"),
    ("cusparselt", "libcusparseLt.so.*[0-9]"), ("cusolver", "libcusolver.so.*[0-9]"), ("nccl", "libnccl.so.*[0-9]"),
    ("nvshmem", "libnvshmem_host.so.*[0-9]"), ("cufile", "libcufile.so.*[0-9]"), ("nvtx", "libnvToolsExt.so.*[0-9]"),
)
#: in torch's ``lib``: ``torch._C``'s dependency (its bindings to Python; its static
#: initialisers call no Python, so it loads without the GIL), loaded last
PYTHON_LIBRARIES = ("libtorch_python.so",)

_lock = threading.Lock()
_done = False
_loaded: list[str] = []
_also: list[str] = []
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


def _cuda_major(lib: str) -> str | None:
    """The CUDA major version torch was built for ("13"), read from ``torch/version.py``
    without importing torch; None for a CPU build or where it cannot be read."""
    try:
        with open(os.path.join(os.path.dirname(lib), "version.py"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    found = re.search(r"^cuda(?::[^=]*)?=\s*['\"](\d+)", text, re.MULTILINE)
    return found.group(1) if found else None


def cuda_library_paths(lib: str) -> list[str]:
    """The paths of :data:`CUDA_LIBRARIES` as torch's import finds them (``_get_cuda_dep_paths``:
    for each folder of ``sys.path`` in order, ``nvidia/<folder>/lib``, ``nvidia/cu<major>/lib``,
    ``<folder>/lib``; the first match), in its order; those found nowhere are left out. ``lib``
    is torch's ``lib`` folder (:func:`torch_library_dir`)."""
    major = _cuda_major(lib)
    paths = []
    for folder, pattern in CUDA_LIBRARIES:
        for root in sys.path:
            found = glob.glob(os.path.join(root, "nvidia", folder, "lib", pattern))
            if major is not None:
                found += glob.glob(os.path.join(root, "nvidia", f"cu{major}", "lib", pattern))
            found += glob.glob(os.path.join(root, folder, "lib", pattern))
            if found:
                paths.append(found[0])
                break
    return paths


def _mapped() -> str:
    """This process's mapped files (``/proc/self/maps``), '' where unreadable."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


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
            if "libtorch.so" in _loaded:
                # torch's import loads its CUDA wheels' libraries only where libtorch_global_deps
                # brought in libcudart (a CUDA build with the wheels installed)
                extra = cuda_library_paths(lib) if "libcudart.so" in _mapped() else []
                extra += [os.path.join(lib, name) for name in PYTHON_LIBRARIES]
                for path in extra:
                    if not os.path.exists(path):
                        continue
                    if dlopen(path.encode(), os.RTLD_NOW | os.RTLD_LOCAL):  # (ctypes.CDLL's mode)
                        _also.append(os.path.basename(path))
                    else:
                        _errors.append(os.path.basename(path))
        except Exception as exc:  # noqa: BLE001 - never fatal: torch's import does the load
            _errors.append(f"{type(exc).__name__}: {exc}")
        return list(_loaded)


def loaded() -> list[str]:
    """The libraries :func:`load_libraries` loaded (names)."""
    return list(_loaded)


def also_loaded() -> list[str]:
    """The other libraries :func:`load_libraries` loaded (or found loaded) after torch's own
    (the CUDA wheels' that torch's import would load, libtorch_python), in that order."""
    return list(_also)


def errors() -> list[str]:
    """The libraries it could not load (torch's import loads them itself), and any error."""
    return list(_errors)
