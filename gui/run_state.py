"""What a tab's decode run has produced so far, and which step the user looks at.

The model side of the views (napari's ``components/`` next to ``_qt/``): no widgets, only
data and signals. The tab fills it from the worker's events (``RunTab._on_event``); the
tabs and views ask it for a step, the newest step or the selection instead of keeping
copies of their own. Views that follow a run (branch tree, lanes) subscribe to its signals.

A new run :meth:`~RunState.clear`\\ s the steps but keeps the selection: after an option
change the same step stays selected and is shown again when the new run reaches it.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from core.events import StepEvent


class RunState(QObject):
    """The StepEvents of the current run by step index, the newest step and the selected one.

    Signals:
        stepAdded(object): a StepEvent was added (the run's newest token).
        selectionChanged(object): the selected step changed (an int, or None: follow the newest).
        cleared(): the steps were forgotten (a new run starts, or the input went away).
    """

    stepAdded = Signal(object)
    selectionChanged = Signal(object)
    cleared = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._steps: dict[int, StepEvent] = {}
        self._latest: int | None = None
        self._selected: int | None = None

    # ------------------------------------------------------------ changes
    def add(self, ev: StepEvent) -> None:
        """Keep ``ev`` (it replaces an earlier event of the same step) as the newest step."""
        self._steps[ev.step] = ev
        self._latest = ev.step
        self.stepAdded.emit(ev)

    def clear(self) -> None:
        """Forget the steps and the newest step; the selection stays (see the module docstring)."""
        self._steps.clear()
        self._latest = None
        self.cleared.emit()

    def select(self, step: int | None) -> None:
        """Select ``step`` (None: no selection, the views follow the newest step)."""
        if step != self._selected:
            self._selected = step
            self.selectionChanged.emit(step)

    # ------------------------------------------------------------ queries
    def step(self, step: int | None) -> StepEvent | None:
        """The event of ``step``, or None (not in this run, or ``step`` is None)."""
        return None if step is None else self._steps.get(step)

    def steps(self) -> list[StepEvent]:
        """The run's events in step order."""
        return [self._steps[k] for k in sorted(self._steps)]

    def steps_in_segment(self, segment: int) -> list[int]:
        """The steps of segment ``segment`` (a sentence, an OCR line, a 30 s window), in order."""
        return sorted(s for s, ev in self._steps.items() if ev.segment == segment)

    def latest(self) -> int | None:
        """The newest step of the run, or None before the first."""
        return self._latest

    def selected(self) -> int | None:
        """The step the user selected, or None (follow the newest)."""
        return self._selected

    def current(self) -> int | None:
        """The step the views show: the selected one, else the newest."""
        return self._selected if self._selected is not None else self._latest

    def __len__(self) -> int:
        return len(self._steps)

    def __contains__(self, step: object) -> bool:
        return step in self._steps
