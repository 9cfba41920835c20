"""A run tab's model load (``gui.tabs.run.RunTab.load_model``): the run controller's client
for it and the relay that carries the loader's progress text into the GUI thread.
"""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal

from ..worker import WorkerHandle


class LoadingTab(Protocol):
    """What the load tells its tab (``gui.tabs.run.RunTab`` has it)."""

    def model_ready(self, model: Any) -> None: ...

    def show_error(self, message: str) -> None: ...

    def model_load_ended(self) -> None: ...


class ProgressRelay(QObject):
    """Carries progress text from a worker thread into the GUI thread (queued signal)."""

    text = Signal(str)


class ModelLoad:
    """The run controller's client for a model load: the model, or the error, then the end."""

    def __init__(self, tab: LoadingTab, name: str) -> None:
        self.tab, self.name = tab, name

    def on_event(self, model: Any) -> None:
        """The loaded model: the tab takes it (``RunTab.model_ready``)."""
        self.tab.model_ready(model)

    def on_error(self, message: str) -> None:
        """The load failed: the banner says which model and why."""
        self.tab.show_error(f"Could not load model {self.name!r}: {message}")

    def on_end(self, _handle: WorkerHandle) -> None:
        """The load's worker ended (loaded, failed or cancelled)."""
        self.tab.model_load_ended()
