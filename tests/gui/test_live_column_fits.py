"""Session 15, H3 (retaking the README's Live screenshot): at 1280x800 the Live view's column
(transcript, buffer lane, legend) needed 182 px in a 178 px scroll area during a session (text
60 + lane 90 + the legend's two wrapped lines 26 + spacing), so it scrolled by 4 px and the
legend's second line ("■▼ AlignAtt: too close to the end…") was cut at the bottom. The transcript's
minimum is now 52 px (still two lines of text)."""

from __future__ import annotations

from .tab_helpers import FELL_BEHIND, show_session_lines, shown_window


def test_the_live_column_fits_its_area_at_1280x800_during_a_session(qtbot, settings):
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    view = tab.live_mode.view
    tab.inspector_tabs.bring(view)
    view.reset("speech_en.wav played as live input")  # as File → Play file as live input starts one
    view.set_active(True)
    show_session_lines(view, "RTF 0.51 · latency mean 2.19 s / p90 3.00 s · 4 of 26 tentative tokens revised")
    qtbot.wait(100)
    area = view.column_scroll
    legend = view.legend
    assert legend.height() >= legend.heightForWidth(legend.width())  # its wrapped lines (session 14)
    bottom = legend.mapTo(area.viewport(), legend.rect().bottomLeft()).y()
    assert area.verticalScrollBar().maximum() == 0 and bottom < area.viewport().height(), (
        f"the column scrolls by {area.verticalScrollBar().maximum()} px: the legend ends at {bottom} px "
        f"of a {area.viewport().height()} px area")
    text = view.text
    two_lines = 2 * text.fontMetrics().lineSpacing() + 2 * text.frameWidth() + 2 * text.document().documentMargin()
    assert text.minimumHeight() >= two_lines, (  # a shorter window scrolls the column, the transcript keeps two lines
        f"the transcript's minimum is {text.minimumHeight()} px, two lines need {two_lines:.0f}")
    tab.shutdown()


def test_under_local_agreement_the_column_fits_with_the_fell_behind_message_too(qtbot, settings):
    """Session 15: a session that fell behind shows one more line (the message), and the column
    scrolled again by ~20 px; under local-agreement the legend is now one line (AlignAtt's marks
    are listed under align-att only), which makes room for it."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    view = tab.live_mode.view
    tab.inspector_tabs.bring(view)
    tab.live_mode.policy_combo.setCurrentIndex(tab.live_mode.policy_combo.findData("local-agreement:2"))
    view.reset("speech_en.wav played as live input")
    view.set_active(True)
    show_session_lines(view, "RTF 0.51 · latency mean 2.19 s / p90 3.00 s · 4 of 26 tentative tokens revised",
                       FELL_BEHIND)
    qtbot.wait(100)
    area = view.column_scroll
    assert area.verticalScrollBar().maximum() == 0, f"the column scrolls by {area.verticalScrollBar().maximum()} px"
    tab.shutdown()
