"""The Live view's legend lists AlignAtt's "too close to the end" marks only under align-att
(session 15: it listed them under every policy, where they never appear, and the extra wrapped
line made the column scroll at 1280x800)."""

from __future__ import annotations

from .tab_helpers import shown_window


def _pick(live, spec: str) -> None:
    live.policy_combo.setCurrentIndex(live.policy_combo.findData(spec))


def test_the_align_att_marks_are_in_the_legend_under_align_att_only(qtbot, settings):
    w = shown_window(qtbot, settings)
    live = w.speech_tab.live_mode
    legend = live.view.legend
    for spec, listed in (("local-agreement:2", False), ("align-att:25", True), ("fixed-window", False),
                         ("local-agreement:2", False)):
        _pick(live, spec)
        assert ("AlignAtt" in legend.text()) is listed, spec
        assert "word end" in legend.text() and "trimmed" in legend.text()
    _pick(live, "local-agreement:2")
    qtbot.wait(50)
    one_line = legend.fontMetrics().lineSpacing() * 1.5
    assert legend.heightForWidth(legend.width()) < one_line, "without AlignAtt's entry the legend is one line at 1280 px"
    w.speech_tab.shutdown()
