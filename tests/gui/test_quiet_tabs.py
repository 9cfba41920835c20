"""A change inside a tab that leaves the tab widget's own layout as it was does not repaint the
whole window (issue 22, "no GUI-thread stall > 50 ms while decoding"): a QTabWidget answers
every LayoutRequest with ``update()`` of itself, so one label's ``setText`` deep in the
Speech tab (its ``updateGeometry`` climbs the layouts up to the tab widget) repainted every
widget of the window, the plots and their axes too, several times per decoded frame. A real
change of the tab widget's layout (tab titles, tabs shown, a page's minimum size) still lays
it out."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from gui.inspector import InspectorTabs
from gui.widgets.quiet_tabs import QuietTabWidget

from .tab_helpers import shown_window


class Paints(QObject):
    """Counts the paint events each watched widget gets."""

    def __init__(self, widgets) -> None:
        super().__init__()
        self.counts = {w: 0 for w in widgets}
        for w in widgets:
            w.installEventFilter(self)

    def eventFilter(self, obj, ev) -> bool:  # noqa: N802
        if ev.type() == QEvent.Type.Paint and obj in self.counts:
            self.counts[obj] += 1
        return False

    def reset(self) -> None:
        self.counts = dict.fromkeys(self.counts, 0)


def settle(qtbot, ms: int = 60) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(ms // 3)


def test_a_size_neutral_change_deep_in_the_speech_tab_does_not_repaint_the_rest_of_the_window(qtbot, settings):
    w = shown_window(qtbot, settings)
    qtbot.waitExposed(w)
    tab = w.speech_tab
    far = [tab.options_panel, tab.model_combo, w.tabs.tabBar()]  # nowhere near the token stream
    settle(qtbot)
    paints = Paints(far)
    settle(qtbot)
    paints.reset()
    for _ in range(3):  # as a frame does: a widget in the token stream asks its layouts again
        tab.stream.updateGeometry()
        settle(qtbot)
    assert paints.counts == dict.fromkeys(far, 0)


def test_the_inspector_tabs_are_quiet_too():
    assert issubclass(InspectorTabs, QuietTabWidget)


def test_a_real_layout_change_still_lays_the_tab_widget_out(qtbot):
    tabs = QuietTabWidget()
    qtbot.addWidget(tabs)
    page = QWidget()
    QVBoxLayout(page).addWidget(QLabel("page"))
    tabs.addTab(page, "a")
    tabs.addTab(QLabel("other"), "b")
    tabs.resize(400, 300)
    tabs.show()
    qtbot.waitExposed(tabs)
    settle(qtbot)
    bar = tabs.tabBar()
    before = bar.width()
    tabs.setTabText(0, "a much longer title than before")  # the tab bar grows
    settle(qtbot)
    assert bar.width() > before and bar.width() >= bar.sizeHint().width()
    tabs.setTabVisible(1, False)
    settle(qtbot)
    assert bar.width() == min(bar.sizeHint().width(), tabs.width())
    page.setMinimumHeight(500)  # the page needs more than the tab widget has: the window must hear of it
    settle(qtbot)
    assert tabs.minimumSizeHint().height() >= 500
    tabs.resize(400, 700)
    settle(qtbot)
    assert page.height() >= 500
