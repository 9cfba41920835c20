"""The refine button on long audio (issue 19 §2): its progress in the word-timing bar
("refining words i/n"), refine's own failure message (not wrapped twice), and a long-form
run refined (no "fixed 30 s windows" refusal; ``longform=True`` reaches the model)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from core.analysis.refine import RefineError

from .fakes_words import FakeWordModel
from .tab_helpers import decoded, speech_tab


class ProgressModel(FakeWordModel):
    """Refine reports progress word by word and waits at 2/n until ``go`` is set; ``fail``
    makes it raise refine's own error instead."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.go = threading.Event()
        self.fail = False
        self.refine_kwargs = []

    def refine_words(self, audio, steps, words, options, *, cancel=None, progress=None, **kwargs):
        self.refine_kwargs.append(dict(kwargs))
        n = len(words)
        for done in range(n + 1):
            progress(done, n)
            if done == 2:
                assert self.go.wait(10)
            if self.fail and done == 2:
                raise RefineError(f"refine failed on word 3 {words[2].word.strip()!r} "
                                  f"({words[2].start:.2f}–{words[2].end:.2f} s): the encoder broke")
        return [dataclasses.replace(w, start=w.start + 0.01) for w in words]


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, ProgressModel(delay_s=0.02))


def _ready(qtbot, tab):
    tab.word_timing_check.setChecked(True)
    decoded(qtbot, tab)
    qtbot.waitUntil(lambda: not tab.is_decoding() and not tab.word_timing.busy() and tab.word_timing.final,
                    timeout=10000)


def test_refine_progress_shows_in_the_bar(qtbot, tab):
    _ready(qtbot, tab)
    refine, n = tab.word_timing.refine, len(tab.word_timing.alignment.words)
    refine.button.click()
    qtbot.waitUntil(lambda: f"refining words 2/{n}" in tab.word_timing.status.text(), timeout=5000)
    with qtbot.waitSignal(refine.refined, timeout=5000):
        tab.model.go.set()
    assert "refined" in tab.word_timing.status.text()


def test_refine_failure_says_refines_own_words(qtbot, tab):
    _ready(qtbot, tab)
    tab.model.fail = True
    tab.model.go.set()
    tab.word_timing.refine.button.click()
    qtbot.waitUntil(lambda: "refine failed on word 3" in tab.word_timing.status.text(), timeout=5000)
    text = tab.word_timing.status.text()
    assert "the encoder broke" in text and "refine failed: refine failed" not in text
    assert "span must run forward" not in text and tab.word_timing.refine.button.text() == "refine"


def test_a_long_form_run_is_refined_in_its_own_windows(qtbot, tab):
    """Before: "refine works on fixed 30 s windows for now" and nothing ran."""
    _ready(qtbot, tab)
    tab.long_form.is_run = True  # the run is long-form (as LongForm.decode_fn marks it)
    refine = tab.word_timing.refine
    assert refine.refusal() == ""
    tab.model.go.set()
    with qtbot.waitSignal(refine.refined, timeout=5000):
        refine.button.click()
    assert tab.model.refine_kwargs[-1].get("longform") is True
