"""QuietTabWidget still passes on the LayoutRequests that change what its parents read (R1
review of c7140a5): test_quiet_tabs' real-change test goes through QTabWidget's direct
``setUpLayout`` calls only (setTabText, setTabVisible, resize), so it passes with every
LayoutRequest dropped. Here the only way the news can travel is the LayoutRequest a page's
``updateGeometry`` sends up: a page that needs more room must grow the window around the tabs
(and a page that needs less must let it shrink), with no tab text, visibility or size change
in between."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from gui.widgets.quiet_tabs import QuietTabWidget


def settle(qtbot, ms: int = 60) -> None:
    for _ in range(3):
        QApplication.processEvents()
        qtbot.wait(ms // 3)


def test_a_page_that_needs_more_room_grows_the_window_around_the_tabs(qtbot):
    window = QWidget()
    qtbot.addWidget(window)
    tabs = QuietTabWidget()
    QVBoxLayout(window).addWidget(tabs)
    page = QWidget()
    QVBoxLayout(page).addWidget(QLabel("page"))
    tabs.addTab(page, "a")
    window.resize(400, 300)
    window.show()
    qtbot.waitExposed(window)
    settle(qtbot)
    assert window.height() < 500
    page.setMinimumHeight(600)  # only a LayoutRequest carries this to the tab widget's parents
    settle(qtbot)
    assert window.minimumSizeHint().height() >= 600
    assert window.height() >= 600 and page.height() >= 600
