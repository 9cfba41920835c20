"""Run a generator off the GUI thread, one Qt signal per yielded event.

Modelled on pyapp-kit/superqt ``utils/_qthreading.py`` (``GeneratorWorker``): the
worker lives in its own ``QThread`` (``worker.moveToThread(thread)``,
``thread.started.connect(worker.work)``, ``finished`` -> ``thread.quit`` /
``deleteLater``) and checks an abort flag between yields, so a cancel takes effect
after the current decoding step at the latest.

The generator function receives a ``cancel`` callable (``() -> bool``) it may pass on
to long-running code (``SpeechModel.decode(..., cancel=cancel)``).
"""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Any, Callable, Iterator

from PySide6.QtCore import QObject, QThread, Signal, Slot

log = logging.getLogger(__name__)

GeneratorFn = Callable[[Callable[[], bool]], Iterator[Any]]


def user_message(exc: BaseException) -> str:
    """A one-paragraph message for the user from an exception.

    ``ValueError``/``RuntimeError``/``OSError`` and our own exceptions (defined in
    ``core``) carry messages
    written for users; anything else is prefixed with its type so a bug report can
    name it.
    """
    text = str(exc).strip()
    ours = type(exc).__module__.split(".")[0] == "core"  # e.g. core.audio.AudioError
    if (ours or isinstance(exc, (ValueError, RuntimeError, OSError))) and text:
        return text
    name = type(exc).__name__
    return f"{name}: {text}" if text else f"Unexpected error ({name})."


class GeneratorWorker(QObject):
    """Iterates ``fn(cancel)`` and emits each item as ``event``.

    Signals:
        event(object): one per yielded item, in order.
        error(str): the generator raised; the message is meant for the user.
        finished(): always emitted last (after completion, error or cancel).

    ``abort()`` is thread-safe; the flag is checked between items and handed to the
    generator as ``cancel``.
    """

    event = Signal(object)
    error = Signal(str)
    finished = Signal()

    def __init__(self, fn: GeneratorFn, name: str = "worker") -> None:
        super().__init__()
        self._fn = fn
        self._abort = threading.Event()
        self.name = name

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
        try:
            gen = self._fn(self._abort.is_set)
            for item in gen:
                if self._abort.is_set():
                    close = getattr(gen, "close", None)
                    if close is not None:
                        close()
                    break
                self.event.emit(item)
        except Exception as exc:  # noqa: BLE001 - reported to the user in the window
            if not self._abort.is_set():
                message = user_message(exc)
                if message == str(exc).strip():  # an expected, user-facing error
                    log.info("%s: %s", self.name, message)
                else:  # a bug: keep the traceback for the report
                    log.error("%s failed:\n%s", self.name, traceback.format_exc())
                self.error.emit(message)
        finally:
            self.finished.emit()
            # end this worker thread's event loop now, so QThread.wait() returns without the
            # GUI thread having to process the queued finished() first (window close, exit);
            # never the main thread's (work() called directly, as in tests)
            if threading.current_thread() is not threading.main_thread():
                QThread.currentThread().quit()


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
    ) -> None:
        super().__init__()
        self.worker: GeneratorWorker | None = worker
        self.thread: QThread | None = thread
        self._on_event = on_event
        self._on_error = on_error
        self._on_finished = on_finished
        self.running = True
        self._aborted = False
        worker.event.connect(self._event)
        worker.error.connect(self._error)
        worker.finished.connect(self._finished)

    @Slot(object)
    def _event(self, item: Any) -> None:
        if self._on_event is not None and not self._aborted:
            self._on_event(item)

    @Slot(str)
    def _error(self, message: str) -> None:
        if self._on_error is not None and not self._aborted:
            self._on_error(message)

    @Slot()
    def _finished(self) -> None:
        self.running = False
        thread, self.thread, self.worker = self.thread, None, None
        if thread is not None:
            thread.quit()
            thread.wait(5000)
        _live.discard(self)
        if self._on_finished is not None:
            self._on_finished()

    def abort(self) -> None:
        """Ask the generator to stop after its current item; events still queued are dropped."""
        self._aborted = True
        if self.worker is not None:
            self.worker.abort()

    @property
    def abort_requested(self) -> bool:
        """True once ``abort()`` was called."""
        return self._aborted

    def wait(self, msecs: int = 10000) -> bool:
        """Block until the thread ends (used on window close). True if it ended."""
        thread = self.thread
        if thread is None:
            return True
        return thread.wait(msecs)


_live: set[WorkerHandle] = set()


def start_worker(
    fn: GeneratorFn,
    *,
    on_event: Callable[[Any], None] | None = None,
    on_error: Callable[[str], None] | None = None,
    on_finished: Callable[[], None] | None = None,
    name: str = "worker",
) -> WorkerHandle:
    """Start ``fn(cancel)`` in a new ``QThread``; return a handle to abort/wait on it.

    Must be called from a thread with a Qt event loop (the GUI thread): the callbacks
    run in that thread, one call per event, then ``on_error`` (if it raised) and
    ``on_finished`` last. The handle keeps the thread alive until it finishes.
    """
    thread = QThread()
    thread.setObjectName(name)
    worker = GeneratorWorker(fn, name=name)
    worker.moveToThread(thread)
    handle = WorkerHandle(worker, thread, on_event, on_error, on_finished)
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
