"""The window's plots never build pyqtgraph's right-click menu (ViewBoxMenu).

Every plot in the window had its menu turned off after construction
(``setMenuEnabled(False)``): pyqtgraph built a ViewBoxMenu (a QMenu with sub-menus and
widgets) for each ViewBox and at once dropped it with ``menu.setParent(None)``. A full GUI test
run segfaulted inside that ``setParent(None)`` while a SpeechTab was being built (session 14,
``tests/gui`` under a gc.callbacks probe); pyqtgraph's own history has PySide segfaults around
these parent-less menus (pyqtgraph PRs #2502, #2512, #2518, #2522). Built with
``enableMenu=False`` (pyqtgraph #814: the menu is then never made) the path is gone, and the
window is cheaper to build.
"""

from __future__ import annotations

import importlib

import pytest

from tests.gui.tab_helpers import shown_window

# the module (the package's name ``ViewBox`` is the class)
viewbox_module = importlib.import_module("pyqtgraph.graphicsItems.ViewBox.ViewBox")


@pytest.fixture
def menus_built(monkeypatch):
    built = []
    original = viewbox_module.ViewBoxMenu

    def counting(view):
        built.append(type(view).__name__)
        return original(view)

    monkeypatch.setattr(viewbox_module, "ViewBoxMenu", counting)
    return built


def test_the_main_window_and_its_views_build_no_viewbox_menu(qtbot, settings, menus_built):
    w = shown_window(qtbot, settings)
    # every tab, and the views built on demand: the live view, the speculation view, the step strip
    for i in range(w.tabs.count()):
        w.tabs.setCurrentIndex(i)
    from gui.widgets.live_view import LiveView
    from gui.widgets.step_strip import StepStrip

    for extra in (LiveView(), StepStrip()):
        qtbot.addWidget(extra)
    assert w.speech_tab.speculation_view is not None and w.speech_tab.heatmap is not None
    assert menus_built == []
