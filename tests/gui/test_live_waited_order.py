"""The Live view's transcript reads in stream order when AlignAtt both holds back a last word
and waits (R1 review of d942341): the held-back word is tentative (grey) and the token the
decode waited at comes after it. The view put the waited token before the tentative text,
which was right while AlignAtt had no tentative tokens: 'the [waits:s] hill'."""

from __future__ import annotations

from core.streaming import AlignAtt, StreamDriver
from gui.widgets.live_view import LiveView
from tests.core.test_streaming_align_att import Fake, _noise


def test_the_waited_token_follows_the_held_back_word(qtbot):
    hyps = [[(" the", 5), (" hill", 30), ("s", 42)],  # 1 s = 50 frames, limit 40: stops at "s"
            [(" the", 5), (" hill", 30), ("s", 42), (" rise", 70)]]
    driver = StreamDriver(AlignAtt(frames=10, step_s=1.0, min_buffer_s=0), Fake(hyps), max_lag_s=None)
    view = LiveView()
    qtbot.addWidget(view)
    for ev in driver.feed(_noise(1.0)):
        view.take(ev)
    assert view.spans() == [("committed", " the"), ("tentative", " hill"), ("waited", "s")]
    page = view._html()
    assert page.index(" hill") < page.index("[waits:s]")
