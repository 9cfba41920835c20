"""Arrays moved out of memory into a temporary file, read back on demand.

A long recording's run keeps one cross-attention array per token: whisper-base's is
6 layers × 8 heads × 1500 frames, 288 kB in float32, about 2 GB for an hour of speech.
Only the window on screen needs it in memory; the others are read again when the user
goes to them (or word timing aligns them). :class:`SpillFile` keeps such arrays in an
unnamed temporary file as float16 (half the bytes, a relative error ≤ 2⁻¹¹ ≈ 4.9e-4,
far below what a heatmap colour or a DTW path resolves) and hands back a small
:class:`Spilled` handle; ``Spilled.load()`` rebuilds the float32 array.

The file lives in the page cache (the operating system writes it out and drops it under
memory pressure), not in the process's resident memory, and is deleted when the last
handle to it goes. Writes and reads use ``os.pwrite`` / ``os.pread`` at fixed offsets, so
any thread may read while another spills.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import tempfile
import threading

import numpy as np

__all__ = ["SpillFile", "Spilled", "STORE_DTYPE", "load_many", "release_free_memory"]

#: the dtype arrays are kept in on disk
STORE_DTYPE = np.float16


class SpillFile:
    """An append-only temporary file of float16 arrays.

    Args:
        directory: where the unnamed file is made (default: the system's temp directory).

    Attributes:
        nbytes: bytes written so far.
    """

    def __init__(self, directory: str | None = None) -> None:
        self._file = tempfile.TemporaryFile(dir=directory)  # unlinked at once: gone when closed
        self._fd = self._file.fileno()
        self._lock = threading.Lock()
        self.nbytes = 0

    def put(self, array: np.ndarray) -> "Spilled":
        """Write ``array`` (any shape, values within float16's range, e.g. attention 0..1)
        as float16 and return its handle.

        Raises:
            ValueError: ``array`` has non-finite values after the float16 conversion (a
                value beyond ±65504): it cannot be kept this way.
            OSError: the file could not be written (disk full).
        """
        a = np.ascontiguousarray(array, dtype=STORE_DTYPE)
        if a.size and not np.isfinite(a).all():
            raise ValueError(f"array of shape {a.shape} has values float16 cannot hold (beyond ±65504 or NaN)")
        data = a.tobytes()
        with self._lock:
            offset = self.nbytes
            self.nbytes += len(data)
        done = 0
        while done < len(data):
            done += os.pwrite(self._fd, data[done:], offset + done)
        return Spilled(self, offset, a.shape)

    def read(self, offset: int, shape: tuple[int, ...]) -> np.ndarray:
        """float32 array of ``shape`` stored at byte ``offset`` (see :meth:`put`)."""
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(STORE_DTYPE).itemsize
        buf = bytearray()
        while len(buf) < n:
            chunk = os.pread(self._fd, n - len(buf), offset + len(buf))
            if not chunk:
                raise OSError(f"spill file ended at byte {offset + len(buf)}; expected {n} bytes from {offset}")
            buf += chunk
        return np.frombuffer(bytes(buf), dtype=STORE_DTYPE).astype(np.float32).reshape(shape)

    def close(self) -> None:
        """Delete the file now (handles to it can no longer be loaded)."""
        self._file.close()


def load_many(handles: list["Spilled"]) -> list[np.ndarray]:
    """``[h.load() for h in handles]`` with one read and one conversion per run of handles
    that lie back to back in the same file (a window's steps, spilled together): far fewer
    calls that release the GIL, each of which may wait for a busy decoding thread."""
    out: list[np.ndarray | None] = [None] * len(handles)
    order = sorted(range(len(handles)), key=lambda i: (id(handles[i]._store), handles[i]._offset))
    k = 0
    while k < len(order):
        first = handles[order[k]]
        run, end = [order[k]], first._offset + first.nbytes_stored
        while k + len(run) < len(order):
            nxt = handles[order[k + len(run)]]
            if nxt._store is not first._store or nxt._offset != end:
                break
            run.append(order[k + len(run)])
            end += nxt.nbytes_stored
        n_values = (end - first._offset) // np.dtype(STORE_DTYPE).itemsize
        flat = first._store.read(first._offset, (n_values,))
        pos = 0
        for i in run:
            size = int(np.prod(handles[i].shape, dtype=np.int64))
            out[i] = flat[pos : pos + size].reshape(handles[i].shape)
            pos += size
        k += len(run)
    return out  # type: ignore[return-value]


class Spilled:
    """A handle to one array in a :class:`SpillFile` (a few dozen bytes in memory).

    Attributes:
        shape: the array's shape.
        nbytes_float32: what the array takes in memory once loaded.
    """

    __slots__ = ("_store", "_offset", "shape")

    def __init__(self, store: SpillFile, offset: int, shape: tuple[int, ...]) -> None:
        self._store, self._offset, self.shape = store, int(offset), tuple(int(s) for s in shape)

    @property
    def nbytes_stored(self) -> int:
        """Bytes it takes in the file."""
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(STORE_DTYPE).itemsize

    @property
    def nbytes_float32(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * 4

    def load(self) -> np.ndarray:
        """The array again: float32, ``shape``, values rounded to float16 (a new array each call).

        Raises:
            OSError / ValueError: the file was closed or cannot be read.
        """
        return self._store.read(self._offset, self.shape)

    def __reduce__(self):
        # pickling or deep-copying a handle gives the array itself (the file is this process's)
        return (np.array, (self.load(),))

    def __repr__(self) -> str:
        return f"Spilled(shape={self.shape}, offset={self._offset})"


_libc = None


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the operating system (glibc ``malloc_trim(0)``).

    Freed arrays of a few hundred kB land in malloc's arenas, not back with the system:
    after a long run's attention moved to disk the process's resident memory would not
    shrink (measured: 490 MB free inside the arenas after 6 minutes of speech with base).
    Returns True if memory was released; False where there is no glibc (macOS, Windows,
    musl) or nothing to release. Measured: 8 ms for a 430 MB heap, half of it free.
    """
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
            _libc.malloc_trim.restype = ctypes.c_int
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return False
    return bool(_libc.malloc_trim(0))
