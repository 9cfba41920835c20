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


def test_retract_takes_an_attempts_steps_back(qtbot):
    """A long-form attempt that was not kept: its steps (window 1 from step 3 on) go, the
    earlier window's stay, the next attempt is numbered from the same step."""
    import dataclasses

    run = RunState()
    retracted = []
    run.stepsRetracted.connect(lambda b, s: retracted.append((b, s)))
    for i, w in enumerate(WORDS[:3]):
        run.add(make_step(i, w))
    for i, w in enumerate(WORDS[3:6], start=3):
        run.add(dataclasses.replace(make_step(i, w), segment=1))
    assert run.retract(1, 3) == 3
    assert retracted == [(0, 3)] and [ev.step for ev in run.steps()] == [0, 1, 2] and run.latest() == 2
    assert run.retract(1, 3) == 0 and retracted == [(0, 3)]  # nothing left to take back: no signal
    run.add(dataclasses.replace(make_step(3, " cat"), segment=1))
    assert run.text(0) == "The quick brown cat" and run.latest() == 3
