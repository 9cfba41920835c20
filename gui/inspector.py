"""The inspector tabs of a run tab: the views of a run beside the top-k chart.

The run tab (``gui.tabs.run.RunTab``) builds them: Attention, Fork diff, Branches, What if,
Beam tree, Logit lens, Lanes (and the Speech tab's Attempts). A view is a widget that takes
the run's model (``gui.run_state.RunState``) in its constructor and subscribes to it; the
tab adds it here with one line (:meth:`InspectorTabs.add_view`).
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from .widgets.quiet_tabs import QuietTabWidget


class InspectorTabs(QuietTabWidget):
    """A ``QTabWidget`` (document mode) of views, some offered only when they apply; a change
    inside a view that leaves the tabs' layout as it was repaints only that view
    (:class:`gui.widgets.quiet_tabs.QuietTabWidget`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDocumentMode(True)

    def add_view(self, widget: QWidget, title: str, tip: str = "", shown: bool = True) -> int:
        """Add ``widget`` as a tab titled ``title`` (tooltip ``tip``); hidden unless ``shown``.
        Returns its index."""
        i = self.addTab(widget, title)
        if tip:
            self.setTabToolTip(i, tip)
        if not shown:
            self.setTabVisible(i, False)
        return i

    def offer(self, widget: QWidget, on: bool, fallback: QWidget | None = None) -> None:
        """Show ``widget``'s tab (brought to the front when it newly appears), or hide it
        (the current tab moves to ``fallback`` if it was the one shown)."""
        i = self.indexOf(widget)
        if on and not self.isTabVisible(i):
            self.setTabVisible(i, True)
            self.setCurrentIndex(i)
        elif not on and self.isTabVisible(i):
            if self.currentIndex() == i and fallback is not None:
                self.setCurrentWidget(fallback)
            self.setTabVisible(i, False)

    def bring(self, widget: QWidget) -> None:
        """Make ``widget``'s tab the current one."""
        self.setCurrentWidget(widget)
