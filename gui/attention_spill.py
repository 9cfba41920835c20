"""Cross-attention of steps out of view moves to disk (``gui.run_state``'s memory on long
inputs): a Whisper step carries layers x heads x 1500 frames of attention (288 kB in float32
with base; about 2 GB for an hour of speech). :class:`AttentionSpill` keeps the events whose
large attention is still in memory and, when their window is out of view, hands them to ONE
background thread that writes them to a temporary file as float16
(``StepEvent.spill_attention``, ``core.spill``); reading ``cross_attention`` loads it back.
On the GUI thread each numpy call would wait for the decoding worker to hand back the GIL
(1.6-2.2 s per window, measured).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable

from core.events import StepEvent
from core.spill import SpillFile, release_free_memory

#: cross-attention arrays at least this large (bytes in memory) are moved to disk once their
#: window is out of view: Whisper's (tiny 144 kB, base 288 kB per step); translation and OCR
#: rows (a few kB) stay in memory
SPILL_MIN_BYTES = 32 * 1024

SPILL_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attention-spill")


def spill_all(events: list[StepEvent], store: SpillFile) -> int:
    """Move ``events``' attention into ``store`` (on the spill thread), then give the freed
    heap back to the system. Returns the bytes freed."""
    freed = 0
    for ev in events:
        try:
            freed += ev.spill_attention(store, SPILL_MIN_BYTES)
        except OSError:  # the disk is full: this one stays in memory, as before
            pass
    if freed:
        release_free_memory()  # else the freed arrays stay in malloc's arenas, counted as resident
    return freed



class AttentionSpill:
    """The events of one exploration whose large attention (:data:`SPILL_MIN_BYTES`) is still
    in memory, and the spill jobs on the background thread. A new exploration takes a new
    one (its file goes with the last event holding it)."""

    def __init__(self, events: Iterable = ()) -> None:
        self.store: SpillFile | None = None  # made on the first spill
        #: events whose attention is not spilled yet (the growing branch's, kept attempts' rows)
        self.in_memory: list = [ev for ev in events if ev.attention_nbytes >= SPILL_MIN_BYTES]
        self.jobs: list[Future] = []  # spill jobs not known to be done

    def keep(self, ev) -> None:
        """Spill ``ev``'s attention with its segment's steps (:meth:`out_of_view`) if it is large."""
        if ev.attention_nbytes >= SPILL_MIN_BYTES:
            self.in_memory.append(ev)

    def out_of_view(self, keep_segs: set) -> int:
        """Spill the kept events except those of the segments in ``keep_segs``; the bytes
        that will be freed."""
        go = [ev for ev in self.in_memory if ev.segment not in keep_segs]
        self.in_memory = [ev for ev in self.in_memory if ev.segment in keep_segs]
        return self.spill(go)

    def spill(self, events: list[StepEvent]) -> int:
        """Hand ``events``' large attention to the spill thread; the bytes that will be freed."""
        events = [ev for ev in events if ev.attention_nbytes >= SPILL_MIN_BYTES]
        if not events:
            return 0
        if self.store is None:
            self.store = SpillFile()
        self.jobs = [f for f in self.jobs if not f.done()]
        self.jobs.append(SPILL_THREAD.submit(spill_all, events, self.store))
        return sum(ev.attention_nbytes for ev in events)

    def wait(self, timeout: float | None = None) -> int:
        """Wait until the jobs are done; the bytes they freed.

        Raises:
            TimeoutError: not done within ``timeout`` seconds.
        """
        freed = sum(f.result(timeout) for f in self.jobs)
        self.jobs = []
        return freed
