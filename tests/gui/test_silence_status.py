"""The Speech tab's status after a run says what was skipped as silence (issue 19 §4): 31 s of
silence said "Decoded: 6 tokens" while the text was empty. Fakes: the long-form fake's second
window is skipped as silence (no-speech 0.9); a fixed-window fake skips its one window."""

from __future__ import annotations

import numpy as np
import pytest

from core.events import Finished, RunStats, SegmentEvent

from .fakes import FakeSpeechModel
from .fakes_longform import KEPT, FakeLongFormModel
from .tab_helpers import decoded, speech_tab


class SilentFixedModel(FakeSpeechModel):
    """A fixed-window decode whose only window is skipped as silence (as ``SpeechModel.decode``
    marks it: the label ends "skipped as silence", no StepEvent)."""

    def decode(self, audio, options, *, language="auto", task="transcribe", cancel=None, **_kw):
        self.decode_calls += 1
        yield SegmentEvent(segment=0, label="0.0–30.0 s · no speech 95% · skipped as silence", source_len=50,
                           total=1, kind="window", no_speech_prob=0.95,
                           warning="0.0–30.0 s skipped as silence: no-speech probability 0.95 > 0.6")
        yield Finished(text="", token_ids=[], stats=RunStats(audio_s=len(audio) / 16000))


@pytest.fixture
def lf_tab(qtbot):
    yield from speech_tab(qtbot, FakeLongFormModel())


@pytest.fixture
def fixed_tab(qtbot):
    yield from speech_tab(qtbot, SilentFixedModel())


def test_long_form_status_names_the_window_skipped_as_silence(qtbot, lf_tab):
    lf_tab.longform_panel.mode_combo.setCurrentIndex(1)  # long-form
    decoded(qtbot, lf_tab)
    said = [m for m in lf_tab.messages if "skipped as silence" in m]
    # the rule that skipped it, with its thresholds (before: "(no-speech 0.90, 0 dBFS)", a loud window
    # "skipped as silence" with no word of which rule)
    assert said and said[-1] == (f"Decoded: {len(KEPT)} tokens, {len(KEPT)} kept (eos) · 1 window skipped as "
                                 "silence (Whisper's rule: no-speech 0.90 > 0.6 and avg log-prob -1.60 < -1)")


def test_the_status_and_the_attempts_name_the_rule_with_the_panels_thresholds(qtbot, lf_tab):
    """Not hard-coded 0.6 / -1: the thresholds the run used (the fake skips its window at no-speech 0.9,
    average log-probability -1.6, loudest 20 ms 0 dBFS)."""
    panel = lf_tab.longform_panel
    panel.threshold_spins["no_speech_threshold"].setValue(0.7)
    panel.threshold_spins["logprob_threshold"].setValue(-1.5)
    panel.mode_combo.setCurrentIndex(1)  # long-form
    decoded(qtbot, lf_tab)
    said = [m for m in lf_tab.messages if "skipped as silence" in m]
    assert said and said[-1].endswith("(Whisper's rule: no-speech 0.90 > 0.7 and avg log-prob -1.60 < -1.5)")
    view = lf_tab.attempts_view
    row = next(r for r in range(view.table.rowCount()) if view.row_kind(r) == "silence")
    why = view.table.item(row, 8)
    assert why.text() == "Whisper's rule: no-speech probability 0.90 > 0.7 and average log-probability -1.60 < -1.5"
    tip = " ".join(why.toolTip().split())  # wrapped at 100 characters
    assert "openai/whisper transcribe()" in tip and "no_speech_threshold (0.7) AND" in tip
    assert "logprob_threshold (-1.5)" in tip and "0.6" not in tip
    # the level the old note showed ("0 dBFS"), said for what it is
    assert "loudest 20 ms is 0 dBFS (the RMS level of the window's loudest 20 ms frame" in tip
    assert view.table.item(row, 7).text() == "skipped: silence" and view.table.item(row, 7).toolTip().startswith(
        "Skipped by Whisper's own rule")


def test_fixed_window_status_names_the_window_skipped_as_silence(qtbot, fixed_tab):
    decoded(qtbot, fixed_tab, audio=np.zeros(30 * 16000, np.float32), name="silence")
    assert fixed_tab.messages[-1] == ("Decoded: 0 tokens (eos) · 1 window skipped as silence "
                                      "(loudness rule: no-speech 0.95 > 0.6 and loudest 20 ms −inf < −50 dBFS)")
    assert "skipped as silence" in fixed_tab.banner.message()
