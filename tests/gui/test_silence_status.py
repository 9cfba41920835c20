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
    assert said and said[-1] == (f"Decoded: {len(KEPT)} tokens, {len(KEPT)} kept (eos) · "
                                 "1 window skipped as silence (no-speech 0.90, 0 dBFS)")


def test_fixed_window_status_names_the_window_skipped_as_silence(qtbot, fixed_tab):
    decoded(qtbot, fixed_tab, audio=np.zeros(30 * 16000, np.float32), name="silence")
    assert fixed_tab.messages[-1] == "Decoded: 0 tokens (eos) · 1 window skipped as silence (no-speech 0.95, −inf dBFS)"
    assert "skipped as silence" in fixed_tab.banner.message()
