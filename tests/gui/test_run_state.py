"""RunState: the run's steps and the selection, the model the tabs' views query."""

from __future__ import annotations

from gui.run_state import RunState

from .fakes import WORDS, make_step


def test_steps_latest_and_selection(qtbot):
    run = RunState()
    added, selections, cleared = [], [], []
    run.stepAdded.connect(added.append)
    run.selectionChanged.connect(selections.append)
    run.cleared.connect(lambda: cleared.append(True))
    assert len(run) == 0 and run.latest() is None and run.current() is None
    events = [make_step(i, w) for i, w in enumerate(WORDS[:3])]
    for ev in events:
        run.add(ev)
    assert added == events and len(run) == 3 and 1 in run and 7 not in run
    assert run.steps() == events and run.step(1) is events[1] and run.step(None) is None and run.step(9) is None
    assert run.latest() == 2 and run.current() == 2 and run.steps_in_segment(0) == [0, 1, 2]
    run.select(1)
    run.select(1)  # no change, no signal
    assert selections == [1] and run.selected() == 1 and run.current() == 1
    run.clear()  # a new run: the steps go, the selection stays
    assert cleared == [True] and len(run) == 0 and run.latest() is None and run.selected() == 1
    run.select(None)
    assert selections == [1, None] and run.current() is None


def test_tab_fills_the_run_state(qtbot):
    """A decode fills the tab's RunState; a click selects in it; a new input clears it."""
    import numpy as np

    from gui.tabs.speech import SpeechTab

    from .fakes import FakeSpeechModel

    tab = SpeechTab()
    qtbot.addWidget(tab)
    tab.model = FakeSpeechModel()
    audio = (0.1 * np.sin(np.arange(16000) / 16000 * 2 * np.pi * 220)).astype(np.float32)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(audio, "tone")
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    assert [ev.text for ev in tab.run.steps()] == WORDS and tab.run.latest() == len(WORDS) - 1
    tab.select_step(3)
    assert tab.run.selected() == 3 == tab.selected_step() and tab.topk.step() == 3
    tab.discard_input()
    assert len(tab.run) == 0
    tab.shutdown()
