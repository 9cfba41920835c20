"""H6 (session 12) click-through findings, each as a test. Screenshots and scripts:
/work/notes/s12/h6/ (clickthrough.py, part2.py, part3.py; before/ = 77a966d, after/ = this
session).

Finding 1 (already in 77a966d, not from this session's changes): at 1280x800, once AlignAtt's
last wait shows in the Live tab (the decision heatmap, minimum 160 px, and its note), the Live
view's minimum height grows from ~220 to ~380 px and the window's from ~720 to 882 px: the
window outgrows an 800 px screen and the splitter squeezes the token stream's entropy strip to
a 4 px sliver (tiny.en, speech_en.wav played as live input: after3/03_live_end_align-att.png,
1280x882; before3/03 the same). Fixed: the Live view's column scrolls. Finding 2 (a new input's
time axis) is in test_heatmap_rerun_range.py."""

from __future__ import annotations

from .tab_helpers import show_align_att_wait, shown_window


def test_an_align_att_wait_in_the_live_tab_keeps_the_window_within_1280x800(qtbot, settings):
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    w.tabs.setCurrentWidget(tab)
    view = tab.live_mode.view
    tab.inspector_tabs.setCurrentWidget(view)
    qtbot.wait(50)
    assert w.minimumSizeHint().height() <= 800  # before the wait (720 px here)
    show_align_att_wait(qtbot, view)
    assert view.decision.isVisible()
    assert w.minimumSizeHint().height() <= 800, w.minimumSizeHint().height()
    assert w.height() <= 800, w.height()
