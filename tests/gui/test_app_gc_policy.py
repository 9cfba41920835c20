"""The window puts the memory policy (gui/memory_policy.py) in force before the window exists,
and the garbage-collection policy (gui/gc_policy.py) once it exists (issue 19 §3, memory and
GUI stalls on long runs)."""

from __future__ import annotations

import gui.app as app


def test_the_window_puts_the_memory_policy_first_and_the_gc_policy_with_its_window(monkeypatch):
    import gui.gc_policy as gc_policy
    import gui.main_window as main_window
    import gui.memory_policy as memory_policy
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
    monkeypatch.setattr(app, "create_application", lambda argv: App())
    monkeypatch.setattr(main_window, "MainWindow", Window)
    monkeypatch.setattr(worker, "wait_all", lambda ms: True)
    monkeypatch.setattr(gc_policy, "install", lambda window: seen.append(("gc policy", type(window).__name__)))
    monkeypatch.setattr(memory_policy, "install", lambda: seen.append("memory policy") or {})
    assert app.run_window(["decoding-explorer", "--no-autoload"]) == 0
    assert seen == ["memory policy", ("window", False), "show", ("gc policy", "Window")]
