"""The window limits glibc's malloc arenas before any thread starts (issue 19 §3, memory of
a 1-hour recording): each thread that allocates gets its own arena by default (up to 8 per
core), and memory a decode freed in one stays resident there. It also puts the
garbage-collection policy in force (gui/gc_policy.py) once the window exists."""

from __future__ import annotations

import sys

import pytest

import gui.app as app


def test_the_window_limits_malloc_arenas_before_creating_the_application(monkeypatch):
    order = []
    monkeypatch.setattr(app, "display_problem", lambda: None)
    monkeypatch.setattr(app, "xcb_problem", lambda: None)
    monkeypatch.setattr(app, "limit_malloc_arenas", lambda *a, **k: order.append("arenas") or True)

    def stop(argv):
        order.append("application")
        raise RuntimeError("stop here")

    monkeypatch.setattr(app, "create_application", stop)
    with pytest.raises(RuntimeError, match="stop here"):
        app.run_window(["decoding-explorer", "--no-autoload"])
    assert order == ["arenas", "application"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_limit_malloc_arenas_calls_mallopt_unless_the_user_set_the_variable(monkeypatch):
    calls = []

    class Libc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert app.limit_malloc_arenas(2, libc=Libc()) is True
    assert calls == [(app.M_ARENA_MAX, 2)]
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")  # the user's own choice wins
    assert app.limit_malloc_arenas(2, libc=Libc()) is False
    assert calls == [(app.M_ARENA_MAX, 2)]
    assert app.limit_malloc_arenas(2) in (True, False)  # the real libc (False off glibc): no error


def test_the_window_puts_the_gc_policy_in_force_with_its_window(monkeypatch):
    import gui.gc_policy as gc_policy
    import gui.main_window as main_window
    import gui.worker as worker

    seen = []

    class App:
        def __getattr__(self, name):
            return lambda *a, **k: 0

    class Window:
        def __init__(self, autoload):
            seen.append(("window", autoload))

        def show(self):
            seen.append("show")

    monkeypatch.setattr(app, "display_problem", lambda: None)
    monkeypatch.setattr(app, "xcb_problem", lambda: None)
    monkeypatch.setattr(app, "limit_malloc_arenas", lambda *a, **k: True)
    monkeypatch.setattr(app, "create_application", lambda argv: App())
    monkeypatch.setattr(main_window, "MainWindow", Window)
    monkeypatch.setattr(worker, "wait_all", lambda ms: True)
    monkeypatch.setattr(gc_policy, "install", lambda window: seen.append(("gc policy", type(window).__name__)))
    assert app.run_window(["decoding-explorer", "--no-autoload"]) == 0
    assert seen == [("window", False), "show", ("gc policy", "Window")]
