"""The window at 1280x800 (issue 19 §6): the beam tree's details pane holds the top-k legend
and shows no clipped placeholder, the input label of a long file stays one line, the logit
lens scrolls to a selected step whose column arrives later and has a CJK font, the word
bands label the words where they fit and name the word under the mouse. Fakes; screenshots
before and after in /work/notes/issue19_s6_*.png (/work/notes/issue19_s6_shots.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtGui import QFontDatabase, QFontMetrics

from core.options import DecodingOptions
from gui.run_state import RunState
from gui.widgets.logit_lens import LogitLensView
from gui.widgets.word_marks import WordBands

from .fakes import WORDS, FakeSpeechModel, fake_lens, make_step
from .tab_helpers import decoded, speech_tab

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeSpeechModel())


def test_beam_details_hold_the_topk_legend(qtbot, tab):
    tab.options_panel.setOptions(DecodingOptions(strategy="beam", num_beams=3), emit=False)
    decoded(qtbot, tab)
    tab.inspector_tabs.setCurrentWidget(tab.beam_tree)
    qtbot.wait(50)
    details = tab.beam_tree.details
    fm = QFontMetrics(details.topk.font())
    legend = 6 + 26 + fm.horizontalAdvance("raw (softmax of logits)") + 12 + 22 + fm.horizontalAdvance(
        "processed (after filters)")
    assert details.topk.width() >= legend, (details.topk.width(), legend)
    # before a node is clicked only the hint shows (the chart's own placeholder was cut on both sides)
    assert details.hypothesis_label.isVisible() and not details.topk.isVisible()
    assert tab.beam_tree.view.width() >= 300  # the tree keeps room


def test_the_input_label_of_a_long_file_is_one_line(qtbot, tab):
    tab.longform_panel.mode_combo.setCurrentIndex(2)
    audio = np.zeros(16000 * 600, np.float32)
    audio[::50] = 0.1
    decoded(qtbot, tab, audio=audio, name="long10.wav")
    label = tab.info_label
    qtbot.wait(50)
    assert label.height() <= 1.6 * label.fontMetrics().lineSpacing() + 4, label.height()
    assert "long10.wav · 600.00 s · 16 kHz mono" in label.toolTip()
    assert label.shown_text().startswith("long10.wav") and label.text() == label.toolTip()


def test_the_lens_scrolls_to_a_selected_step_that_arrives_later(qtbot):
    run = RunState()
    view = LogitLensView(run)
    qtbot.addWidget(view)
    view.resize(600, 300)
    view.show()
    evs = []
    for i in range(200):
        ev = make_step(i, WORDS[i % len(WORDS)])
        evs.append(dataclasses.replace(ev, lens=fake_lens(ev)))
    view.select_step(150)  # selected (e.g. kept over a re-decode with Capture) before its column came
    view.append_steps(evs[:100])
    view.append_steps(evs[100:])
    first, last = view.grid.visible_columns()
    assert first <= 150 < last, (first, last)
    view.select_step(3)
    first, last = view.grid.visible_columns()
    assert first <= 3 < last


def test_a_cjk_font_is_a_run_package_and_installed():
    makefile = (ROOT / "Makefile").read_text()
    run_packages = re.search(r"RUN_PACKAGES :=(.*?)\n[^\t ]", makefile, re.S).group(1)
    assert re.search(r"fonts-(noto-cjk|droid-fallback|wqy-\w+)", run_packages), run_packages
    families = QFontDatabase.families(QFontDatabase.WritingSystem.SimplifiedChinese)
    assert families, "no CJK font installed: run `make sysdeps`"


def _words(n=55, start=0.3):
    text = ("the old train left the station at dawn and rolled slowly through the green hills while the "
            "passengers watched the morning light spread across the quiet fields and a small boy pointed at "
            "the river where two herons stood in the shallow water waiting for fish to pass").split()
    out, t = [], start
    for k, word in enumerate(text[:n]):
        d = 0.12 + 0.05 * len(word)
        out.append(SimpleNamespace(word=" " + word, start=t, end=t + d, prob=0.8, steps=(k,)))
        t += d + 0.03
    return out


def test_word_labels_show_where_they_fit_and_on_hover(qtbot, tab):
    tab.longform_panel.mode_combo.setCurrentIndex(2)
    audio = (0.1 * np.sin(np.arange(16000 * 20) / 16000 * 2 * np.pi * 220)).astype(np.float32)
    decoded(qtbot, tab, audio=audio, name="speech20.wav")
    bands = tab.word_timing.bands
    words = _words()
    bands.set_words(words)
    qtbot.wait(50)
    shown = bands.shown_labels()
    assert len(shown) >= len(words) // 2, (len(shown), len(words))
    # shown labels do not overlap their neighbours in the same row
    rects = [(bands.label_row(i), bands._labels[i].sceneBoundingRect()) for i in shown]
    for (ra, a), (rb, b) in zip(rects, rects[1:]):
        pass
    for i, (ra, a) in enumerate(rects):
        for rb, b in rects[i + 1:]:
            if ra == rb:
                assert not a.intersects(b)
    # the word under the mouse is named (hidden label or not)
    w = words[7]
    assert w.word.strip() in bands.hover_text((w.start + w.end) / 2)
    assert bands.hover_text(words[-1].end + 2.0) == ""
