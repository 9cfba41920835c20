"""Language detection shown in the Speech tab (issue 14 section 4), with fakes: the top-5
language bars of the current window, the candidate-languages field (restricts the decode,
marks unknown codes, persists), nothing for an English-only model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PySide6.QtCore import QSettings

from core.events import SegmentEvent
from gui.run_state import RunState
from gui.widgets.language_bars import CandidatesEdit, LanguageBars, parse_candidates
from tests.gui.fakes import FakeSpeechModel, make_step
from tests.gui.tab_helpers import decoded, speech_tab

#: the fake's language logits (a few languages, English first by far)
LOGITS = {"en": 4.0, "de": 2.0, "fr": 1.5, "es": 1.0, "it": 0.5, "nl": 0.2, "ja": -1.0}


def distribution(codes) -> tuple[tuple[str, float], ...]:
    """Softmax of ``LOGITS`` over ``codes``, best first (as SpeechModel's SegmentEvent carries it)."""
    z = np.array([LOGITS[c] for c in codes])
    p = np.exp(z - z.max())
    p /= p.sum()
    return tuple(sorted(zip(codes, p.tolist()), key=lambda kv: -kv[1]))


class FakeMultilingual(FakeSpeechModel):
    """FakeSpeechModel as a multilingual model: its SegmentEvent carries the language
    probabilities over the candidate languages (all of ``LOGITS`` when none); records the
    candidates of each decode."""

    name = "fake-whisper-multilingual"
    multilingual = True
    languages = list(LOGITS)

    def __init__(self):
        super().__init__()
        self.candidate_calls: list = []

    def decode(self, audio, options, *, candidate_languages=None, timestamps=False, **kw):
        self.candidate_calls.append(candidate_languages)
        codes = list(candidate_languages) if candidate_languages else self.languages
        for ev in super().decode(audio, options, **kw):
            if isinstance(ev, SegmentEvent):
                ev = dataclasses.replace(ev, language_probs=distribution(codes))
            yield ev


@pytest.fixture
def model():
    return FakeMultilingual()


@pytest.fixture
def tab(qtbot, model):
    yield from speech_tab(qtbot, model)


def test_bars_show_the_top5_after_a_run(qtbot, tab, model):
    tab.model_loaded(model)
    assert not tab.language_bars.isVisible()  # nothing before the first run
    decoded(qtbot, tab)
    bars = tab.language_bars
    assert bars.isVisible()
    assert bars.bars() == list(distribution(list(LOGITS))[:5])
    assert [c for c, _p in bars.bars()] == ["en", "de", "fr", "es", "it"]
    assert bars.title() == "language · window 1"
    assert "en: 0." in bars.toolTip()
    assert model.candidate_calls == [None]


def test_candidates_restrict_the_decode_and_persist(qtbot, tab, model):
    tab.model_loaded(model)
    decoded(qtbot, tab)
    edit = tab.candidates_edit
    assert edit.isEnabled() and "candidate languages" in edit.toolTip()
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        edit.setText("DE, fr")
        edit.editingFinished.emit()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    assert model.candidate_calls[-1] == ("de", "fr")
    bars = tab.language_bars.bars()
    assert [c for c, _p in bars] == ["de", "fr"] and sum(p for _c, p in bars) == pytest.approx(1.0)
    assert tab.language_bars.title().endswith("(candidates)")
    assert tab.input_settings()["language_candidates"] == "de, fr"
    s = QSettings()
    tab.save_settings(s)
    other = restored_tab(qtbot, s)
    assert other.candidates_edit.codes() == ("de", "fr") and other.candidates_edit.text() == "de, fr"


def restored_tab(qtbot, s: QSettings):
    """A new SpeechTab with the settings ``s`` restored."""
    from gui.tabs.speech import SpeechTab

    t = SpeechTab()
    qtbot.addWidget(t)
    t.restore_settings(s)
    return t


def test_english_only_model_hides_bars_and_disables_the_field(qtbot):
    fake = FakeSpeechModel()
    gen = speech_tab(qtbot, fake)
    tab = next(gen)
    tab.candidates_edit.setText("de")
    tab.model_loaded(fake)
    assert not tab.candidates_edit.isEnabled()
    assert "candidate_languages" not in tab.decode_extras()
    decoded(qtbot, tab)
    assert not tab.language_bars.isVisible() and tab.language_bars.bars() == []
    gen.close()


def test_unknown_codes_are_marked():
    edit = CandidatesEdit()
    edit.set_languages(["en", "de", "fr"])
    edit.setText("en, xx de")
    assert edit.codes() == ("en", "xx", "de") and edit.unknown() == ["xx"]
    assert "d55e00" in edit.styleSheet() and "xx" in edit.toolTip()
    edit.setText("en, de")
    assert edit.unknown() == [] and edit.styleSheet() == ""
    assert parse_candidates(" en;DE ,, en fr ") == ("en", "de", "fr") and parse_candidates("  ") == ()


def test_bars_follow_the_selected_window(qtbot):
    run = RunState()
    bars = LanguageBars()
    qtbot.addWidget(bars)
    bars.follow(run)
    run.clear()
    assert bars.isHidden()
    run.add_segment(SegmentEvent(segment=0, label="0–30 s", language_probs=distribution(["en", "de"])))
    run.add(make_step(0, " Hello"))
    run.flush()  # the frame
    assert bars.bars()[0][0] == "en" and bars.title() == "language · window 1"
    run.add_segment(SegmentEvent(segment=1, label="30–60 s", language_probs=distribution(["de", "fr", "ja"])))
    run.add(dataclasses.replace(make_step(1, " Hallo"), segment=1))
    run.flush()
    assert [c for c, _p in bars.bars()] == ["de", "fr", "ja"] and bars.title() == "language · window 2"
    run.select(0)  # the user selects a token of window 1
    assert bars.bars()[0][0] == "en"
    # a saved exploration gives lists, not tuples
    bars.set_probs([["fr", 0.6], ["de", 0.4]], window=0)
    assert bars.bars() == [("fr", 0.6), ("de", 0.4)]
    run.clear()
    assert bars.bars() == [] and bars.isHidden()
