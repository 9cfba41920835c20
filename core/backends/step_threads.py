"""Several threads for a decoder step over few rows, without OpenMP's cost per operation.

A one-token decoder step is a chain of ~200 small operations (layer norms, one-row products,
softmaxes, GELU over 1,536 values, ...) and a few that stream tens of megabytes (the output
projection: 384 x 51,865 floats for tiny.en, 80 MB). With two intra-op threads torch opens an
OpenMP parallel region in about 25 of the small operations per step (tiny.en float32; 45 with
int8, where each of fbgemm's one-row int8 products opens one), each waking the second thread
for a few microseconds of work (GELU over 1,536 values: 8 us on one thread, 43 us on two),
while MKL runs the one-row products (the big ones included) on one thread anyway: a one-row
``mm`` opens no parallel region at any thread count. So a second thread made the step slower
(tiny.en 10.3 -> 11.3 ms on a quiet machine), and on a machine whose other core is busy each
region waits for that core (the step took 170 ms).

``StepThreads`` turns that around for a step over at most ``MAX_ROWS`` rows: torch runs the step
on one thread (the calling thread's OpenMP and MKL counts 1 on entry, the previous counts back
on exit, for that thread only: 1.7 us for the pair), and the products that stream the most memory are cut into parts that run at
the same time, one on the calling thread and the others on worker threads (``parallel``): the
output projection by blocks of vocabulary columns, the cross-attention by heads, and the float
products over at least ``SPLIT_MIN_BYTES`` of weights (fc1, fc2, the fused q/k/v) by blocks of
output columns. Each part
is the same kernel on a slice of the same matrix, writing its slice of the output: the
results are bit-identical to the one-thread step (column blocks must start on a 16-float
boundary for that, see ``column_edges``; the tests check it; for several rows MKL may round the
split product differently, as its own threading did before). Per step this costs one hand-over
per split product (11-20 us) instead of a parallel region per operation, and a part no worker has
started when the caller has finished its own is run by the caller.

Steps over more than ``MAX_ROWS`` rows (a long re-fed prefix, the KV cache off) keep torch's
threads: their products are matrix-matrix products that MKL splits well.

The worker threads are daemon threads, started on first use and kept (one fewer than the
largest thread count seen); each runs its parts with one torch thread, in the caller's
inference/grad mode.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable, Sequence

import torch

__all__ = ["MAX_ROWS", "SPLIT_MIN_BYTES", "StepThreads", "column_edges", "one_thread", "parallel"]

#: steps over at most this many rows (batch x new positions) run as described above; more rows
#: keep torch's own threads
MAX_ROWS = 8
#: a float product inside the layers is split across threads when its weight has at least this
#: many bytes (read at each step): a hand-over to a worker costs 11-20 us (``parallel`` of two
#: empty parts, on a loaded machine) plus a chance of waiting for a busy core. Measured on this
#: 2-core machine at load 6-7 (``bench_decoder_step.py --ab --variants split,split-layers``, three
#: runs), splitting base's fc1/fc2 (4.2 MB) and q/k/v (3.1 MB) as well made the step slower on the
#: wall clock every time (min 16.4 -> 28.1, 35.0 -> 40.7, 18.8 -> 30.6 ms) for a step-thread CPU
#: time that moved by -0.7, -1.4 and +0.6 ms; tiny.en's (2.4 and 1.8 MB) cost CPU time too (6.56 ->
#: 6.98 ms). So only bigger layers are split (whisper-small's fc1: 9.4 MB); 0 splits every one
SPLIT_MIN_BYTES = 8_000_000
#: column blocks start on multiples of this many floats (64 bytes): MKL then writes each block's
#: slice of the output with the kernel, and the rounding, of the whole product (an unaligned
#: slice of the output changed the last bit of some sums)
ALIGN = 16

_inbox: "queue.SimpleQueue[tuple]" = queue.SimpleQueue()
_workers: list[threading.Thread] = []
_start_lock = threading.Lock()


def _forget_workers() -> None:
    """In a forked child: the parent's worker threads do not exist there; start afresh."""
    global _inbox, _start_lock
    _inbox = queue.SimpleQueue()
    _workers.clear()
    _start_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def _find_thread_setter() -> Callable[[int], int] | None:
    """A function setting torch's thread count for the calling thread only: the OpenMP runtime's
    ``omp_set_num_threads`` and MKL's ``MKL_Set_Num_Threads_Local`` (MKL's own count, which its
    batched products use: with OpenMP's alone, ``bmm`` still opened parallel regions inside the
    step), as ``torch.set_num_threads`` sets them; it returns MKL's previous
    thread-local count (0: MKL's process-wide one) for the restore. None where either is not at
    hand (another platform's build) or setting it does not change ``torch.get_num_threads()`` on
    the calling thread.

    ``torch.set_num_threads`` also sets the process-wide count a thread gets at its first torch
    call: with it, a thread started during another thread's step (the GUI starts a thread per
    run) kept one thread for good.
    """
    try:
        import ctypes

        omp = ctypes.CDLL(None).omp_set_num_threads
        torch_cpu = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
        cpu = ctypes.CDLL(torch_cpu)  # the library torch loaded (the same handle: no second copy)
        # MKL's C interface (by value); the lower-case names are its Fortran one (by reference)
        mkl, mkl_max = cpu.MKL_Set_Num_Threads_Local, cpu.MKL_Get_Max_Threads
        omp.argtypes, omp.restype = [ctypes.c_int], None
        mkl.argtypes, mkl.restype = [ctypes.c_int], ctypes.c_int
        mkl_max.argtypes, mkl_max.restype = [], ctypes.c_int
    except (OSError, AttributeError, ImportError):
        return None

    def setter(n: int, mkl_count: int | None = None) -> int:
        omp(n)
        return mkl(n if mkl_count is None else mkl_count)

    seen: list = []

    def probe() -> None:  # on a throwaway thread: its count only
        try:
            before = torch.get_num_threads()  # torch's lazy per-thread set-up first
            kept = setter(before + 1)
            seen.append(torch.get_num_threads() == before + 1 and mkl_max() == before + 1)
            setter(before, kept)
        except Exception:  # noqa: BLE001 - any failure: not usable
            seen.append(False)

    t = threading.Thread(target=probe, name="decoder-step-probe", daemon=True)
    t.start()
    t.join()
    return setter if seen == [True] else None


_UNSET = object()
_thread_setter: Any = _UNSET


def _set_this_threads_count(n: int, mkl_count: int | None = None) -> int:
    """torch's thread count ``n`` for the calling thread only (``_find_thread_setter``; MKL's
    thread-local count ``mkl_count`` if given, else ``n``) where the runtimes allow it, else
    ``torch.set_num_threads(n)`` (process-wide as well). Returns MKL's previous thread-local
    count (-1 with ``torch.set_num_threads``)."""
    global _thread_setter
    if _thread_setter is _UNSET:
        _thread_setter = _find_thread_setter()
    if _thread_setter is not None:
        return _thread_setter(n, mkl_count)
    torch.set_num_threads(n)
    return -1


def _work(ready: threading.Event) -> None:
    """A worker thread's loop: claim a part from the inbox (unless its caller ran it already), run
    it, reply with (index, ok, result or exception). ``ready`` is set once its count is set."""
    # this thread's OpenMP count: first torch's lazy per-thread set-up (which would otherwise run
    # at the first parallel operation), then 1 (without omp_set_num_threads at hand,
    # torch.set_num_threads, which also sets the process-wide count: the caller restores it)
    torch.get_num_threads()
    _set_this_threads_count(1)
    ready.set()
    while True:
        fn, claim, reply, inference, grad, index = _inbox.get()
        if not claim.acquire(blocking=False):
            continue  # the caller ran this part itself
        try:
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                reply.put((index, True, fn()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller, who re-raises it
            reply.put((index, False, e))


def _ensure_workers(n: int) -> None:
    """At least ``n`` worker threads are running (started here if not)."""
    if len(_workers) >= n:
        return
    with _start_lock:
        before = torch.get_num_threads()
        while len(_workers) < n:
            ready = threading.Event()
            t = threading.Thread(target=_work, args=(ready,), name=f"decoder-step-{len(_workers) + 1}", daemon=True)
            t.start()
            _workers.append(t)
            # wait until THIS worker has set its own count (torch.set_num_threads also sets the
            # process-wide count new threads start with, put back below): a hand-shake through the
            # shared inbox could be answered by an older idle worker, and a late start-up would
            # then set the process-wide count to 1 after the step put it back
            ready.wait()
        if _thread_setter is None:  # the workers set the process-wide count too: put it back
            torch.set_num_threads(before)


def _call(fn: Callable[[], Any], index: int) -> tuple[int, bool, Any]:
    try:
        return index, True, fn()
    except BaseException as e:  # noqa: BLE001 - re-raised once the others have finished
        return index, False, e


def parallel(parts: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run ``parts`` at the same time: ``parts[0]`` on the calling thread, the others on worker
    threads (each with one torch thread, in the caller's inference and grad mode); returns their
    results in order once all have finished.

    A part no worker has started by the time the caller has run ``parts[0]`` is run by the caller
    (each part is claimed once, by whoever comes first): on a machine whose other cores are busy
    the caller does not wait for a worker to be scheduled, the step then takes about its
    one-thread time.

    The parts must be independent (e.g. each writes its own slice of an output tensor).

    Raises:
        whatever a part raised (the first in ``parts`` order), after every part has finished.
    """
    if len(parts) == 1:
        return [parts[0]()]
    _ensure_workers(len(parts) - 1)
    reply: queue.SimpleQueue = queue.SimpleQueue()
    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()
    claims = [threading.Lock() for _ in parts]
    for index in range(1, len(parts)):
        _inbox.put((parts[index], claims[index], reply, inference, grad, index))
    results = [_call(parts[0], 0)]
    for index in range(1, len(parts)):
        if claims[index].acquire(blocking=False):  # not started by a worker: run it here
            results.append(_call(parts[index], index))
    results += [reply.get() for _ in range(len(parts) - len(results))]  # the workers' replies, in any order
    results.sort(key=lambda r: r[0])
    for _, ok, value in results:
        if not ok:
            raise value
    return [value for _, _, value in results]


def column_edges(n: int, parts: int) -> list[int]:
    """``parts + 1`` edges cutting ``n`` columns into ``parts`` blocks of about equal width, every
    inner edge a multiple of ``ALIGN`` (so each block's output slice starts 64-byte aligned)."""
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    inner = [min(n, ALIGN * round(n * i / parts / ALIGN)) for i in range(1, parts)]
    return [0] + inner + [n]


class StepThreads:
    """``with StepThreads(rows) as parts:`` around a decoder step over ``rows`` rows (batch x new
    positions). With more than one torch thread, ``rows <= MAX_ROWS`` and ``cpu`` (the step's
    tensors are on the CPU), torch runs one thread inside the block and ``parts`` is the thread
    count the big products may be split into (by ``parallel``); otherwise nothing changes and
    ``parts`` is 1. The previous thread count is restored on exit, also when the step raises.
    Only the calling thread's count changes (``omp_set_num_threads``; where that is not at
    hand, ``torch.set_num_threads``, which sets the count new threads start with too)."""

    __slots__ = ("parts", "_restore", "_mkl")

    def __init__(self, rows: int, cpu: bool = True):
        threads = torch.get_num_threads()
        self._restore = threads if threads > 1 and rows <= MAX_ROWS and cpu else 0
        self.parts = threads if self._restore else 1
        self._mkl = -1

    def __enter__(self) -> int:
        if self._restore:
            self._mkl = _set_this_threads_count(1)
        return self.parts

    def __exit__(self, *exc: object) -> None:
        if self._restore:
            _set_this_threads_count(self._restore, self._mkl if self._mkl >= 0 else None)


def one_thread(rows: int = 1) -> StepThreads:
    """``with one_thread(rows):`` runs torch on one thread inside the block, for the calling
    thread only, when ``rows`` <= ``MAX_ROWS`` (``StepThreads(rows)``: the previous count back on
    exit, also when the block raises; nothing changes where torch has one thread already, or
    for more rows).

    For per-token work over one row outside the decoder step, e.g. the engine's fill of
    suppressed ids over a (1, vocab) row and its report's maximum over (512, 101) chunks: with
    two threads each opens an OpenMP parallel region (2 per token), which wakes the other core
    for a few microseconds of work and, where that core is busy, waits for it.
    """
    return StepThreads(rows)
