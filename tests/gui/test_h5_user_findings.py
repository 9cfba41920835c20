"""Session 13, H5: what a new user hit in the window at 1280x800 (findings left by session 12's
H6, and the click-through's own; scripts and screenshots in /work/notes/s13/h5/), each as a
test that failed before its fix."""

from __future__ import annotations

from core.options import DecodingOptions

from .fakes import FakeSpeechModel
from .tab_helpers import TONE, decoded, shown_window


def test_a_beam_run_leaves_the_inspector_splitter_where_it_was(qtbot, settings):
    """Before: the beam tree's tool row ("150 nodes · 25 steps" and the legend on one line) made
    the inspector's minimum width 885 px once a beam run had filled it: the bottom splitter moved
    from [485, 783] to [383, 885] and stayed there after the next greedy run (the tree's page
    keeps its minimum while hidden), squeezing the top-k chart."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = FakeSpeechModel()
    decoded(qtbot, tab, TONE)
    before = tab.bottom_splitter.sizes()
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.options_panel.setOptions(DecodingOptions(strategy="beam", num_beams=5), emit=True)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    tab.inspector_tabs.setCurrentWidget(tab.beam_tree)
    qtbot.wait(50)
    assert len(tab.beam_tree.nodes()) > 20
    assert tab.inspector_tabs.minimumSizeHint().width() <= before[1], tab.inspector_tabs.minimumSizeHint()
    assert tab.bottom_splitter.sizes() == before
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.options_panel.setOptions(DecodingOptions(), emit=True)
    qtbot.wait(50)
    assert tab.bottom_splitter.sizes() == before
    tab.shutdown()
