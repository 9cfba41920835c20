"""A QTabWidget that repaints only when its own layout changes (issue 22: no GUI-thread stall
over 50 ms while decoding).

``QTabWidget`` answers every ``LayoutRequest`` with ``setUpLayout()``, which ends in
``update()`` of the whole tab widget (and ``updateGeometry()``). A LayoutRequest reaches it
whenever any widget inside a page calls ``updateGeometry()`` (``QLayout::activate`` passes it
on to every enclosing layout): one ``QLabel.setText`` in the token stream, the step strip's
legend, the language bars. While a run decodes that happened several times per frame, and
each time every widget of the window was painted again (the main window's tab widget covers
it all): ~85 paint events, the pyqtgraph plots and their axes among them, 5-30 ms of the GUI
thread's CPU per repaint.

:class:`QuietTabWidget` keeps what ``setUpLayout`` reads (its size, the tab bar's and the
corner widgets' size hints and the current tab's rectangle, the pages' size hints and
limits, the tab count, the current tab) from the last request it passed on; a request that
finds them all as they were changes nothing of its layout and is not passed to
``QTabWidget``. A request that finds any changed is handled as before (laid out, repainted,
the parents told), and so are those that come while it is hidden.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QStackedWidget, QTabWidget, QWidget


class QuietTabWidget(QTabWidget):
    """A ``QTabWidget`` that lets a LayoutRequest through only when something its own layout
    depends on changed (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout_key: tuple | None = None
        self._skipped = 0

    def layout_requests_skipped(self) -> int:
        """How many LayoutRequests changed nothing of the tab widget's layout (not repainted)."""
        return self._skipped

    def _key(self) -> tuple:
        """What ``QTabWidget::setUpLayout`` reads, and what the parents' layouts read of it."""
        bar = self.tabBar()
        stack = self.findChild(QStackedWidget, "qt_tabwidget_stackedwidget")
        corners = []
        for corner in (Qt.Corner.TopLeftCorner, Qt.Corner.TopRightCorner):
            w = self.cornerWidget(corner)
            corners.append(None if w is None else (w.isVisibleTo(self), w.sizeHint().toTuple(),
                                                   w.minimumSizeHint().toTuple()))
        pages = None if stack is None else (stack.sizeHint().toTuple(), stack.minimumSizeHint().toTuple(),
                                            stack.minimumSize().toTuple(), stack.maximumSize().toTuple())
        return (self.size().toTuple(), self.count(), self.currentIndex(), bar.isVisibleTo(self),
                bar.sizeHint().toTuple(), bar.minimumSizeHint().toTuple(), bar.tabRect(self.currentIndex()).getRect(),
                tuple(corners), pages)

    def event(self, e: QEvent) -> bool:  # noqa: D102 - QWidget.event
        if e.type() == QEvent.Type.LayoutRequest:
            if not self.isVisible():  # QTabWidget only marks itself dirty; it lays out when shown
                self._layout_key = None
                return super().event(e)
            key = self._key()
            if key == self._layout_key:
                self._skipped += 1
                return QWidget.event(self, e)  # QTabWidget's layout and repaint left out
            self._layout_key = key
        return super().event(e)

    def resizeEvent(self, e) -> None:  # noqa: N802
        self._layout_key = None  # QTabWidget lays out on a resize; the next request compares afresh
        super().resizeEvent(e)
