"""The generator worker: events in order, errors as messages, cancel between events."""

from __future__ import annotations

import itertools
import threading

from PySide6.QtCore import QThread

from gui.worker import GeneratorWorker, start_worker, user_message


def test_events_arrive_in_order_in_gui_thread(qtbot):
    got, threads = [], []

    def gen(cancel):
        yield from range(5)

    def on_event(x):
        got.append(x)
        threads.append(QThread.currentThread())

    worker_threads = []

    def gen2(cancel):
        worker_threads.append(threading.get_ident())
        yield from gen(cancel)

    handle = start_worker(gen2, on_event=on_event)
    qtbot.waitUntil(lambda: not handle.running, timeout=5000)
    assert got == [0, 1, 2, 3, 4]
    gui_thread = QThread.currentThread()
    assert all(t == gui_thread for t in threads)  # callbacks ran in the GUI thread
    assert worker_threads and worker_threads[0] != threading.get_ident()  # the generator did not


def test_signals_strict_order(qtbot):
    worker = GeneratorWorker(lambda cancel: iter(["a", "b"]))
    with qtbot.waitSignals([worker.event, worker.event, worker.finished], order="strict", timeout=2000):
        worker.work()


def test_error_becomes_user_message(qtbot):
    def gen(cancel):
        yield 1
        raise ValueError("the audio is empty; record something")

    errors, events = [], []
    done = []
    handle = start_worker(gen, on_event=events.append, on_error=errors.append, on_finished=lambda: done.append(1))
    qtbot.waitUntil(lambda: bool(done), timeout=5000)
    assert events == [1]
    assert errors == ["the audio is empty; record something"]
    assert not handle.running


def test_user_message_names_unexpected_errors():
    assert user_message(KeyError("x")).startswith("KeyError")
    assert user_message(RuntimeError("no model")) == "no model"


def test_cancel_stops_an_endless_generator(qtbot):
    seen_cancel = []
    produced = []

    def gen(cancel):
        for i in itertools.count():
            seen_cancel.append(cancel())
            produced.append(i)
            yield i
            QThread.msleep(5)

    got, done = [], []
    handle = start_worker(gen, on_event=got.append, on_finished=lambda: done.append(1))
    qtbot.waitUntil(lambda: len(got) >= 3, timeout=5000)
    handle.abort()
    assert handle.abort_requested
    qtbot.waitUntil(lambda: bool(done), timeout=5000)
    n = len(produced)
    qtbot.wait(50)
    assert len(produced) == n  # the generator stopped
    assert seen_cancel[0] is False
    assert len(got) <= n  # events queued after abort were dropped, never invented


def test_thread_ends_without_the_gui_event_loop(qtbot):
    """Window close and app exit wait for worker threads from the GUI thread, which then
    processes no events: the thread must end on its own once the generator is done
    (it used to wait for the GUI thread's queued finished() and so ran into the timeout,
    and Qt then destroyed a running QThread at exit)."""
    seen = []
    handle = start_worker(lambda cancel: iter(range(3)), on_event=seen.append, name="t")
    assert handle.wait(10000)  # no qtbot.wait / processEvents before this
    qtbot.waitUntil(lambda: not handle.running, timeout=5000)  # the queued callbacks still run
    assert seen == [0, 1, 2]
