"""The run controller: one owner of the workers, one pump, events in order, two queues."""

from __future__ import annotations

import itertools
import time

from PySide6.QtCore import QThread

from gui.run_controller import RunController
from gui.run_state import RunState

from .fakes import make_step


class Client:
    def __init__(self):
        self.events, self.errors, self.ends = [], [], 0

    def on_event(self, ev):
        self.events.append(ev)

    def on_error(self, message):
        self.errors.append(message)

    def on_end(self, _handle):
        self.ends += 1


def test_events_error_and_end_reach_the_client_in_order(qtbot):
    c, client = RunController(), Client()

    def gen(cancel):
        yield from range(5)
        raise ValueError("the input is empty")

    c.start("decode", gen, client)
    qtbot.waitUntil(lambda: client.ends == 1, timeout=5000)
    assert client.events == [0, 1, 2, 3, 4] and client.errors == ["the input is empty"]
    assert c.idle() and c.handle("decode") is None and not c.active("decode")


def test_a_start_in_a_busy_slot_supersedes_and_deferred_starts_wait(qtbot):
    c, first, second = RunController(), Client(), Client()
    started = []

    def endless(cancel):
        for i in itertools.count():
            QThread.msleep(2)
            yield i

    c.start("decode", endless, first)
    qtbot.waitUntil(lambda: len(first.events) >= 2, timeout=5000)
    assert c.abort("decode") and not c.active("decode") and c.alive("decode")
    c.defer(lambda: started.append(c.start("decode", lambda cancel: iter(["b"]), second)))
    assert c.deferred() and not started  # waits for the aborted worker to end
    qtbot.waitUntil(lambda: second.ends == 1, timeout=5000)
    assert first.ends == 1 and started and second.events == ["b"] and not c.deferred()
    n = len(first.events)
    qtbot.wait(50)
    assert len(first.events) == n  # the aborted worker's queued events were dropped


def test_the_run_state_emits_once_per_frame(qtbot):
    """A frame listener (RunState.flush) runs once per pump turn: one stepsAdded for a batch."""
    c, run = RunController(), RunState()
    c.add_frame_listener(run.flush)
    batches = []
    run.stepsAdded.connect(lambda _b, steps: batches.append(len(steps)))

    class Feed(Client):
        def on_event(self, ev):
            run.add(ev)

    feed = Feed()
    c.start("decode", lambda cancel: iter([make_step(i, "w") for i in range(50)]), feed)
    qtbot.waitUntil(lambda: feed.ends == 1, timeout=5000)
    assert sum(batches) == 50 and len(batches) < 50 and len(run) == 50


def test_drain_stops_at_what_was_queued(qtbot):
    """drain() hands on what waits now; an endless fast worker cannot keep it going."""
    c, client = RunController(), Client()

    def endless(cancel):
        yield from itertools.count()

    handle = c.start("decode", endless, client)
    time.sleep(0.3)  # the GUI thread does not pump meanwhile: the worker fills its queue
    queued = handle.queued()
    assert queued > 0
    c.drain()  # returns
    assert client.events
    c.abort("decode")
    qtbot.waitUntil(lambda: client.ends == 1, timeout=5000)


def direct_worker_starts(root) -> list[str]:
    """'file:line' of each call of ``start_worker`` in gui/ outside the run controller (and
    the worker module that defines it)."""
    import ast
    from pathlib import Path

    found = []
    for p in sorted(Path(root, "gui").rglob("*.py")):
        if p.name in ("run_controller.py", "worker.py"):
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            f = getattr(node, "func", None)
            if isinstance(node, ast.Call) and (getattr(f, "id", None) or getattr(f, "attr", None)) == "start_worker":
                found.append(f"{p.relative_to(root)}:{node.lineno}")
    return found


def test_every_worker_of_the_tabs_starts_through_the_run_controller():
    """One owner starts, supersedes and cancels the workers (issue 20 §3): word timing's
    alignment and end rows, opening a file, splitting a long text go through
    ``RunController.start`` (before: 5 direct ``start_worker`` calls in gui/tabs)."""
    from pathlib import Path

    assert direct_worker_starts(Path(__file__).resolve().parents[2]) == []


def test_callbacks_client_gets_the_events_the_error_and_the_end(qtbot):
    from gui.run_controller import Callbacks

    c, seen = RunController(), []

    def gen(cancel):
        yield "rows"
        raise ValueError("no attention")

    c.start("end-rows", gen, Callbacks(seen.append, lambda m: seen.append(f"error: {m}"), lambda: seen.append("end")))
    qtbot.waitUntil(lambda: "end" in seen, timeout=5000)
    assert seen == ["rows", "error: no attention", "end"] and c.idle()
