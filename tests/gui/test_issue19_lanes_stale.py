"""Lanes of an earlier run are marked, not shown as the current one's (issue 19 §5): after a
model switch the Lanes table kept the old model's lanes unmarked ("stopped", 0 tokens), and
after ticking timestamps the previous run's lanes stayed unmarked. They are kept (the user's
work) and marked "earlier run (model X)" until lanes run again. Fake models."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from core.options import DecodingOptions

from .fakes_lanes import FakeLanesSpeech
from .tab_helpers import decoded, speech_tab


class TimestampsLanesSpeech(FakeLanesSpeech):
    """The lanes fake that takes (and ignores) ``timestamps=``, as the speech model does."""

    def decode(self, audio, options, *, timestamps=False, **kwargs):
        return super().decode(audio, options, **kwargs)


class OtherModel(TimestampsLanesSpeech):
    name = "other-whisper"


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, TimestampsLanesSpeech())


def _run_lanes(qtbot, tab, specs=("greedy", "beam:2")):
    view = tab.lanes.view
    view.set_specs(list(specs))
    with qtbot.waitSignal(tab.lanes.state.finished, timeout=5000):
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tab.lanes.handle is None and not tab.is_busy(), timeout=5000)
    view.refresh()


def test_a_model_switch_marks_the_lanes_as_an_earlier_run(qtbot, tab, monkeypatch):
    tab.model_loaded(tab.model)  # the language box as a loaded English-only model sets it
    decoded(qtbot, tab)
    _run_lanes(qtbot, tab)
    state, view = tab.lanes.state, tab.lanes.view
    before = [lane.token_ids for lane in state.lanes]
    assert state.earlier == "" and not view.earlier_label.isVisibleTo(view)
    monkeypatch.setattr(tab, "load_model_object", lambda name, progress: OtherModel())
    with qtbot.waitSignal(tab.decodeFinished, timeout=10000):
        tab.load_model("other-whisper")
    qtbot.waitUntil(lambda: not tab.is_busy(), timeout=5000)
    assert tab.model.name == "other-whisper"
    # kept, not deleted, and marked
    assert [lane.token_ids for lane in state.lanes] == before
    assert state.earlier == "model fake-whisper"
    rows = view.summary()
    assert all("earlier run (model fake-whisper)" in row[0] for row in rows)
    assert view.earlier_label.isVisibleTo(view) and "model fake-whisper" in view.earlier_label.text()
    assert "Run lanes" in view.earlier_label.text()
    # running them again on the new model clears the mark
    _run_lanes(qtbot, tab)
    assert state.earlier == "" and not view.earlier_label.isVisibleTo(view)
    assert not any("earlier" in row[0] for row in view.summary())


def test_ticking_timestamps_marks_the_lanes(qtbot, tab):
    decoded(qtbot, tab)
    _run_lanes(qtbot, tab)
    with qtbot.waitSignal(tab.decodeFinished, timeout=10000):
        tab.timestamps_check.setChecked(True)
    assert tab.lanes.state.earlier == "timestamps off"
    assert all("earlier run (timestamps off)" in row[0] for row in tab.lanes.view.summary())


def test_a_slider_move_keeps_the_lanes_current(qtbot, tab):
    decoded(qtbot, tab)
    _run_lanes(qtbot, tab)
    with qtbot.waitSignal(tab.decodeFinished, timeout=10000):
        tab.options_panel.setOptions(DecodingOptions(max_new_tokens=5), emit=True)
    assert tab.lanes.state.earlier == "" and tab.lanes.state.lanes
