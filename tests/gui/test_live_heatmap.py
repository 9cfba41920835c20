"""AlignAtt's decision on a cross-attention heatmap (issue 23 §3: "For AlignAtt, the heatmap
marks the 'too close to the end' frames and the token that waited"): the Live view shows the
last decode that waited as a heatmap (rows: the tokens of that decode, then the token that
waited; columns: the buffer's encoder frames; the alignment heads' mean attention, the rows the
rule looked at), with the zone [limit, n_frames) as an orange band and the waiting token's row
outlined."""

from __future__ import annotations

import numpy as np

from core.events import StepEvent
from core.streaming import StreamToken, Waited

N_FRAMES, F = 100, 25


def _step(step: int, text: str, peak: int, n: int = N_FRAMES + 150) -> StepEvent:
    row = np.full(n, 0.01, np.float32)
    row[peak] = 1.0
    return StepEvent(step=step, token_id=100 + step, text=text, prob=0.9, raw_prob=0.9, topk=[], raw_topk=[],
                     entropy=0.1, cross_attention=row, segment=0, source_offset=0)


def _waited(texts=(" over", " the", " hills"), peaks=(10, 40, 90)) -> Waited:
    steps = tuple(_step(i, t, p) for i, (t, p) in enumerate(zip(texts, peaks)))
    token = StreamToken(steps[-1].token_id, texts[-1], float("nan"), peaks[-1])
    return Waited(token, peaks[-1], N_FRAMES - F, 2.0, N_FRAMES, steps)


def test_the_heatmap_marks_a_zone_of_columns_and_a_row(qtbot):
    from gui.widgets.attention_heatmap import AttentionHeatmap

    hm = AttentionHeatmap()
    qtbot.addWidget(hm)
    hm.set_columns("time in the buffer (s)", 0.02)
    hm.append_steps(list(_waited().steps))
    assert hm.zone() is None
    hm.mark_zone(75, 100, row=2, label="waits")
    assert hm.zone() == (75, 100, 2)
    hm.mark_zone(None)
    assert hm.zone() is None
    hm.mark_zone(75, 100, row=2)
    hm.clear(columns=True)
    assert hm.zone() is None  # a new run's rows are not marked with the old zone


def test_the_live_view_shows_align_atts_decision_on_a_heatmap(qtbot, tmp_path):
    from gui.widgets.live_view import LiveView

    view = LiveView()
    qtbot.addWidget(view)
    view.resize(1000, 700)
    view.show()
    assert view.decision.isHidden()  # LocalAgreement / fixed-window: no decision to show
    view.take(_waited())
    view.flush()
    hm = view.decision
    assert not hm.isHidden()
    assert hm.row_count() == 3 and hm.zone() == (N_FRAMES - F, N_FRAMES, 2)
    m = hm.matrix()
    assert [int(np.argmax(r)) for r in m] == [10, 40, 90]  # the waiting token's row peaks inside the zone
    assert "“hills”" in view.decision_label.text() and "waits" in view.decision_label.text()
    assert view.grab().save(str(tmp_path / "live_align_att_heatmap.png"))
    # a later wait replaces the rows and the zone
    view.take(_waited((" a", " b", " c", " d"), (5, 20, 60, 95)))
    view.flush()
    assert hm.row_count() == 4 and hm.zone() == (N_FRAMES - F, N_FRAMES, 3)
    view.reset()
    assert hm.row_count() == 0 and hm.zone() is None and hm.isHidden()


def test_a_wait_without_rows_leaves_the_heatmap_alone(qtbot):
    """A decoder that gives no attention (a fake, a backend without it): the lane's band only."""
    from gui.widgets.live_view import LiveView

    view = LiveView()
    qtbot.addWidget(view)
    w = _waited()
    view.take(Waited(w.token, w.frame, w.limit, w.audio_s))
    view.flush()
    assert view.decision.isHidden() and view.decision.row_count() == 0


def test_the_decision_line_shows_the_waiting_token_as_written(qtbot):
    """A token with '&' or '<' (" AT&T", "<b>") reads as written on the decision line, not as
    an HTML entity ("&amp;") nor as markup (the line is plain text)."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import Qt as GuiQt

    from gui.widgets.live_view import LiveView

    view = LiveView()
    qtbot.addWidget(view)
    for token in (" AT&T", " <b>"):
        view.take(_waited((" over", token), (10, 90)))
        view.flush()
        label = view.decision_label
        shown = label.text() if label.textFormat() == Qt.TextFormat.PlainText or not GuiQt.mightBeRichText(
            label.text()) else None
        assert shown is not None and f"“{token.strip()}”" in shown, label.text()
