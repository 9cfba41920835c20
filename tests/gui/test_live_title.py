"""The Live view's title names what is streamed; a long file name is elided in the middle
(full name in the tooltip) so it cannot widen the view (session 15: a 90-character name widened
the Live view from 783 to 933 px in a 1280-px window, taking the top-k pane's space)."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from gui.widgets.live_view import TITLE_PX, LiveView


def test_a_long_name_is_elided_and_does_not_widen_the_view(qtbot):
    view = LiveView()
    qtbot.addWidget(view)
    view.show()
    view.reset("take 3")
    QApplication.processEvents()
    short_w = view.minimumSizeHint().width()  # the layout's floor: what a long title pushes up
    assert "take 3" in view.title.text() and view.title.toolTip() == ""
    name = "a_very_long_recording_name_from_the_field_trip_to_the_lighthouse_museum_2026-11-26_final.wav"
    view.reset(name)
    QApplication.processEvents()
    assert view.minimumSizeHint().width() <= short_w + TITLE_PX, (view.minimumSizeHint().width(), short_w)
    assert name not in view.title.text() and "…" in view.title.text()
    assert view.title.text().endswith("final.wav") and view.title.toolTip() == name
