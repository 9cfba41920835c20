"""Run a generator off the GUI thread, one Qt signal per yielded event.

Modelled on pyapp-kit/superqt ``utils/_qthreading.py`` (``GeneratorWorker``): the
worker lives in its own ``QThread`` (``worker.moveToThread(thread)``,
``thread.started.connect(worker.work)``, ``finished`` -> ``thread.quit`` /
``deleteLater``) and checks an abort flag between yields, so a cancel takes effect
after the current decoding step at the latest.

The generator function receives a ``cancel`` callable (``() -> bool``) it may pass on
to long-running code (``SpeechModel.decode(..., cancel=cancel)``).

A fast generator cannot flood the GUI thread: items go into a locked queue and the
worker posts one ``ready`` signal only when the queue turns non-empty; the GUI thread
drains what has accumulated, at most ``DRAIN_BUDGET_S`` of callbacks at a time (the rest
follows on the next turn of the event loop, after timers and paints). So there is never
more than one posted event per worker waiting, however many items it yields.

Two ways to take the items (``start_worker``): callbacks (``on_event``, ``on_error``,
``on_finished``; small jobs), or **pull** (``on_ready``): the owner (the run controller,
``gui.run_controller``) takes items one at a time with :meth:`WorkerHandle.next_item`
straight from the worker's queue, in its own time-sliced pump; the generator's error and
the end of the thread come through the same queue, in order, as :class:`WorkerFailed` and
:class:`WorkerEnded`. Pulled, an item waits in one queue only.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import deque
from typing import Any, Callable, Iterator

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

log = logging.getLogger(__name__)

GeneratorFn = Callable[[Callable[[], bool]], Iterator[Any]]
#: seconds of item callbacks the GUI thread runs per turn of its event loop
DRAIN_BUDGET_S = 0.02


def user_message(exc: BaseException) -> str:
    """A one-paragraph message for the user from an exception.

    ``ValueError``/``RuntimeError``/``OSError`` and our own exceptions (defined in
    ``core``) carry messages
    written for users; anything else is prefixed with its type so a bug report can
    name it.
    """
    text = str(exc).strip()
    ours = type(exc).__module__.split(".")[0] == "core"  # e.g. core.inputs.audio.AudioError
    if (ours or isinstance(exc, (ValueError, RuntimeError, OSError))) and text:
        return text
    name = type(exc).__name__
    return f"{name}: {text}" if text else f"Unexpected error ({name})."


class WorkerFailed:
    """Pulled after the items a generator yielded before it raised: the message for the user."""

    def __init__(self, message: str) -> None:
        self.message = message


class WorkerEnded:
    """Pulled last: the worker's thread has ended (``handle.running`` is False from now on)."""

    def __init__(self, handle: "WorkerHandle") -> None:
        self.handle = handle


#: what :meth:`WorkerHandle.next_item` returns when no item waits
NOTHING = object()


class Mailbox:
    """The locked queue between a worker thread and the GUI thread (a plain object: it
    outlives the worker's QObject, which is deleted when its thread ends)."""

    def __init__(self) -> None:
        self._queue: deque = deque()
        self._lock = threading.Lock()
        self._signalled = False

    def put(self, item: Any) -> bool:
        """Queue ``item``; True when the queue turned non-empty (the reader should be woken)."""
        with self._lock:
            self._queue.append(item)
            wake = not self._signalled
            self._signalled = True
        return wake

    def take(self) -> list[Any]:
        """Every queued item, oldest first, emptying the queue."""
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
            self._signalled = False
        return items

    def pop(self) -> Any:
        """The oldest queued item, or :data:`NOTHING`."""
        with self._lock:
            if not self._queue:
                self._signalled = False
                return NOTHING
            item = self._queue.popleft()
            if not self._queue:
                self._signalled = False
            return item

    def __len__(self) -> int:
        return len(self._queue)


class GeneratorWorker(QObject):
    """Iterates ``fn(cancel)`` and emits each item as ``event``.

    Signals:
        event(object): one per yielded item, in order (for direct listeners; a
            ``WorkerHandle`` drains the queue instead, see ``ready``).
        ready(): the item queue turned non-empty (emitted once until :meth:`take` empties it).
        error(str): the generator raised; the message is meant for the user.
        finished(): always emitted last (after completion, error or cancel).

    ``abort()`` is thread-safe; the flag is checked between items and handed to the
    generator as ``cancel``.
    """

    event = Signal(object)
    ready = Signal()
    error = Signal(str)
    finished = Signal()

    def __init__(self, fn: GeneratorFn, name: str = "worker") -> None:
        super().__init__()
        self._fn = fn
        self._abort = threading.Event()
        self.name = name
        self.mailbox = Mailbox()
        #: pulled (``start_worker(on_ready=)``): the error and the end go into the queue too
        self.pull = False

    def _push(self, item: Any) -> None:
        if self.mailbox.put(item):
            self.ready.emit()

    def take(self) -> list[Any]:
        """Every queued item, oldest first, emptying the queue (thread-safe)."""
        return self.mailbox.take()

    @property
    def abort_requested(self) -> bool:
        """True once ``abort()`` was called."""
        return self._abort.is_set()

    def abort(self) -> None:
        """Ask the worker to stop after the current item (thread-safe)."""
        self._abort.set()

    @Slot()
    def work(self) -> None:
        """Run the generator to the end, an error or an abort. Runs in the worker thread."""
        gen = None
        try:
            gen = self._fn(self._abort.is_set)
            for item in gen:
                if self._abort.is_set():
                    close = getattr(gen, "close", None)
                    if close is not None:
                        close()
                    break
                self.event.emit(item)
                self._push(item)
        except Exception as exc:  # noqa: BLE001 - reported to the user in the window
            if not self._abort.is_set():
                message = user_message(exc)
                if message == str(exc).strip():  # an expected, user-facing error
                    log.info("%s: %s", self.name, message)
                else:  # a bug: keep the traceback for the report
                    log.error("%s failed:\n%s", self.name, traceback.format_exc())
                if self.pull:
                    self._push(WorkerFailed(message))
                self.error.emit(message)
        finally:
            # Let go of the generator and its function now: a decode's closure holds the tab's
            # model, and this QObject's Python side may outlive the run (deleteLater, a
            # handle): a replaced model must be freed by reference counting, without a full
            # garbage collection (300-500 ms with the GIL held, the window stalled; issue 22).
            # (``item`` too: a frame can outlive its run, e.g. linked from a traceback that an
            # import during the load saved, and then keeps its locals)
            gen = item = self._fn = None
            if self.pull:
                self._push(_END)
            self.finished.emit()
            # end this worker thread's event loop now, so QThread.wait() returns without the
            # GUI thread having to process the queued finished() first (window close, exit);
            # never the main thread's (work() called directly, as in tests)
            if threading.current_thread() is not threading.main_thread():
                QThread.currentThread().quit()


class _Error:
    """The generator's error message, queued behind the items it yielded first."""

    def __init__(self, message: str) -> None:
        self.message = message


_END = object()  # a pulled worker's last item: its generator is done


class WorkerHandle(QObject):
    """A running ``GeneratorWorker`` and its ``QThread``, owned by the GUI thread.

    The handle lives in the thread that created it, so the callbacks given to
    ``start_worker`` run there (queued connections), whatever they are (functions,
    lambdas or methods). ``running`` is False after ``finished``.
    """

    def __init__(
        self,
        worker: GeneratorWorker,
        thread: QThread,
        on_event: Callable[[Any], None] | None,
        on_error: Callable[[str], None] | None,
        on_finished: Callable[[], None] | None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.worker: GeneratorWorker | None = worker
        self.thread: QThread | None = thread
        self._on_event = on_event
        self._on_error = on_error
        self._on_finished = on_finished
        self.running = True
        self._aborted = False
        self._backlog: deque = deque()  # items taken from the worker, not yet handed on
        self._drain_scheduled = False
        self._ending = False  # the thread ended; complete once the backlog is handed on
        self._on_ready = on_ready
        self._source: Mailbox | None = worker.mailbox  # pulled: the queue next_item takes from
        self._thread_ref = thread
        if on_ready is not None:
            worker.pull = True
            worker.ready.connect(self._ready)
            worker.finished.connect(self._thread_done)
        else:
            worker.ready.connect(self._drain)
            worker.error.connect(self._error)
            worker.finished.connect(self._finished)

    # ------------------------------------------------------------ pulled
    @property
    def pulled(self) -> bool:
        """The owner takes the items with :meth:`next_item` (``start_worker(on_ready=)``)."""
        return self._on_ready is not None

    @Slot()
    def _ready(self) -> None:
        if self._on_ready is not None:
            self._on_ready()

    @Slot()
    def _thread_done(self) -> None:
        thread, self._thread_ref, self.thread, self.worker = self._thread_ref, None, None, None
        _end_thread(thread)
        if self._on_ready is not None:
            self._on_ready()  # the end may be waiting behind nothing

    def waiting(self) -> bool:
        """Pulled mode: items (or the end) wait to be taken."""
        return self.queued() > 0

    def queued(self) -> int:
        """Pulled mode: how many items (the end included) wait to be taken."""
        return len(self._source) if self._source is not None else 0

    def next_item(self) -> Any:
        """Pulled mode: the worker's oldest item, a :class:`WorkerFailed` (the generator
        raised) or a :class:`WorkerEnded` (last; ``running`` turns False), or :data:`NOTHING`
        when none waits. After :meth:`abort` the items still queued are skipped (the error
        too); the end still comes."""
        src = self._source
        while True:
            item = src.pop() if src is not None else NOTHING
            if item is NOTHING:
                return NOTHING
            if item is _END:
                thread, self._thread_ref = self._thread_ref, None
                _end_thread(thread)
                self._source = None
                self.running = False
                _live.discard(self)
                return WorkerEnded(self)
            if not self._aborted:
                return item

    @Slot()
    def _drain(self) -> None:
        """Hand queued items to ``on_event`` for at most ``DRAIN_BUDGET_S`` seconds; what is
        left is handed on at the next turn of the event loop (after timers and paints). The
        error and the end of the run come after every item yielded before them."""
        self._drain_scheduled = False
        if self.worker is not None:
            self._backlog.extend(self.worker.take())
        deadline = time.perf_counter() + DRAIN_BUDGET_S
        while self._backlog:
            item = self._backlog.popleft()
            if isinstance(item, _Error):
                if self._on_error is not None and not self._aborted:
                    self._on_error(item.message)
            elif self._on_event is not None and not self._aborted:
                self._on_event(item)
            if time.perf_counter() > deadline:
                break
        if self._backlog:
            if not self._drain_scheduled:
                self._drain_scheduled = True
                QTimer.singleShot(0, self, self._drain)
        elif self._ending:
            self._ending = False
            self._complete()

    @Slot(str)
    def _error(self, message: str) -> None:
        if self.worker is not None:
            self._backlog.extend(self.worker.take())  # the items yielded before the error come first
        self._backlog.append(_Error(message))

    @Slot()
    def _finished(self) -> None:
        worker, thread, self.thread, self.worker = self.worker, self.thread, None, None
        if worker is not None:
            self._backlog.extend(worker.take())
        if thread is not None:
            thread.quit()
            thread.wait(5000)
        self._ending = True
        self._drain()

    def _complete(self) -> None:
        """The thread has ended and every item was handed on: ``running`` turns False."""
        self.running = False
        _live.discard(self)
        if self._on_finished is not None:
            self._on_finished()

    def abort(self) -> None:
        """Ask the generator to stop after its current item; events still queued are dropped."""
        self._aborted = True
        self._backlog.clear()
        if self.worker is not None:
            self.worker.abort()

    @property
    def abort_requested(self) -> bool:
        """True once ``abort()`` was called."""
        return self._aborted

    def wait(self, msecs: int = 10000) -> bool:
        """Block until the thread ends (used on window close). True if it ended; items it
        yielded may still be waiting to be handed on (``running`` stays True until then)."""
        thread = self.thread
        if thread is None:
            return True
        return thread.wait(msecs)


_live: set[WorkerHandle] = set()


def _end_thread(thread: QThread | None) -> None:
    """Quit ``thread`` and wait for it (its generator is done; it ends at once)."""
    if thread is None:
        return
    try:
        thread.quit()
        thread.wait(5000)
    except RuntimeError:  # already ended and deleted (deleteLater)
        pass


def start_worker(
    fn: GeneratorFn,
    *,
    on_event: Callable[[Any], None] | None = None,
    on_error: Callable[[str], None] | None = None,
    on_finished: Callable[[], None] | None = None,
    on_ready: Callable[[], None] | None = None,
    name: str = "worker",
) -> WorkerHandle:
    """Start ``fn(cancel)`` in a new ``QThread``; return a handle to abort/wait on it.

    Must be called from a thread with a Qt event loop (the GUI thread): the callbacks
    run in that thread, one call per event, then ``on_error`` (if it raised) and
    ``on_finished`` last. The handle keeps the thread alive until it finishes.

    With ``on_ready`` (pull mode) the other callbacks are not used: ``on_ready()`` is
    called in the GUI thread when items wait, and the owner takes them with
    :meth:`WorkerHandle.next_item` (the error and the end included).
    """
    thread = QThread()
    thread.setObjectName(name)
    worker = GeneratorWorker(fn, name=name)
    worker.moveToThread(thread)
    handle = WorkerHandle(worker, thread, on_event, on_error, on_finished, on_ready)
    thread.started.connect(worker.work)
    worker.finished.connect(worker.deleteLater)
    thread.finished.connect(thread.deleteLater)
    _live.add(handle)
    thread.start()
    return handle


def wait_all(msecs: int = 60000) -> bool:
    """Abort every running worker and wait for their threads (app exit). True if all ended."""
    handles = list(_live)
    for h in handles:
        h.abort()
    return all(h.wait(msecs) for h in handles)
