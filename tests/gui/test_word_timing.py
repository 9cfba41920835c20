"""Word timing in the Speech tab (issue 14 section 2): the "word timing" box, word bands on
the waveform growing as tokens arrive, the DTW path over the heatmap, the alignment-head
picker (the path moves with the heads), clicking a band selects its first token; the fake
model of tests/gui/fakes_words.py (real alignment code on made-up attention), and the real
bundled tiny.en on the sample clip."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from PySide6.QtCore import QPointF, Qt

from core.events import StepEvent
from gui.tabs.speech import first_sample
from gui.widgets.alignment_heads import AlignmentHeadPicker

from .fakes import WORDS
from .fakes_words import DEFAULT_HEADS, SHAPE, FakeWordModel
from .tab_helpers import TONE, decoded, speech_tab


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeWordModel(delay_s=0.08))  # slow enough for live updates on a loaded machine


def _settled(qtbot, tab, timeout=5000):
    qtbot.waitUntil(lambda: not tab.is_decoding() and not tab.word_timing.busy(), timeout=timeout)


def _click_wave(qtbot, tab, seconds):
    """A left click on the input waveform at ``seconds`` (mid-height), with the mouse."""
    vb = tab.wave.getPlotItem().vb
    (_x0, _x1), (y0, y1) = vb.viewRange()
    scene = vb.mapViewToScene(QPointF(seconds, (y0 + y1) / 2))
    pos = tab.wave.mapFromScene(scene)
    qtbot.mouseClick(tab.wave.viewport(), Qt.MouseButton.LeftButton, pos=pos)


# ------------------------------------------------------------------ the picker
def test_picker_ticks_the_defaults_all_and_single_heads(qtbot):
    picker = AlignmentHeadPicker()
    qtbot.addWidget(picker)
    picker.set_model_heads(4, 6, [(3, 1), (1, 0), (2, 5)])
    assert picker.shape() == (4, 6) and picker.heads() == [(1, 0), (2, 5), (3, 1)] and picker.is_default()
    assert picker.button(1, 0).font().bold() and not picker.button(0, 0).font().bold()
    assert "follows time" in picker.toolTip() or "follow time" in picker.toolTip()
    assert picker.summary_text() == "3 of 24 heads (default)"
    seen = []
    picker.headsChanged.connect(seen.append)
    picker.all_button.click()
    assert len(picker.heads()) == 24 and seen[-1] == picker.heads() and picker.summary_text() == "24 of 24 heads (all)"
    picker.default_button.click()
    assert picker.is_default() and len(seen) == 2
    qtbot.mouseClick(picker.button(0, 4), Qt.MouseButton.LeftButton)
    assert (0, 4) in picker.heads() and seen[-1] == picker.heads() and not picker.is_default()
    picker.set_heads([], emit=False)
    assert "at least one head" in picker.summary.text() and len(seen) == 3


# ------------------------------------------------------------------ live bands, the end, the path
def test_bands_grow_during_the_run_then_close_with_the_end_of_text(qtbot, tab):
    tab.word_timing_check.setChecked(True)
    assert tab.word_timing.bar.isVisibleTo(tab)
    live = []
    tab.word_timing.aligned.connect(lambda a: live.append(
        (len(tab.run.steps()), len(a.words), tab.word_timing.final, tab.word_timing.bands.is_open())))
    decoded(qtbot, tab)
    _settled(qtbot, tab)
    during = [x for x in live if not x[2]]
    assert len(during) >= 2, live  # updated while decoding, not once at the end (>= 2: fewer on a loaded machine)
    counts = [n for _steps, n, _f, _o in during]
    assert counts == sorted(counts) and counts[0] < counts[-1]  # the bands grow with the tokens
    assert any(is_open for *_x, is_open in during)  # the newest word drawn open while decoding
    assert live[-1][2] and tab.model.end_calls == 1  # the final alignment used the end-of-text row
    bands = tab.word_timing.bands
    words = tab.model.words(tab.run.steps(), end_attention=tab.model.end_attention(TONE, tab.run.steps(), None))
    assert [w.word for w in bands.words()] == [w.word for w in words]
    assert "".join(w.word for w in words) == "".join(WORDS)
    assert np.allclose(bands.spans(), [(w.start, w.end) for w in words])
    assert bands.labels()[0] == "The" and not bands.is_open()
    # token i is heard at frames 4i..4i+4 (80 ms each), so the words start there; "jumps" is two tokens
    assert [round(w.start, 2) for w in words] == [0.0, 0.08, 0.16, 0.24, 0.32, 0.48, 0.56, 0.64, 0.72]
    assert words[-1].end == pytest.approx(0.80)  # "dog." ends where "." starts (timing.py keeps the word's end)
    assert tab.word_timing.status.text().endswith("(end of text)")
    # unticking removes the bands and the path
    tab.word_timing_check.setChecked(False)
    assert bands.words() == [] and len(tab.word_timing.path.points()[0]) == 0
    assert not tab.word_timing.bar.isVisibleTo(tab)


def test_the_dtw_path_is_drawn_over_the_heatmap_and_moves_with_the_heads(qtbot, tab):
    tab.word_timing_check.setChecked(True)
    decoded(qtbot, tab)
    _settled(qtbot, tab)
    xs, ys = tab.word_timing.path.curve.getData()
    assert len(xs) > len(WORDS) and np.all(np.diff(xs) >= 0) and np.all(np.diff(ys) >= 0)  # monotonic
    assert ys[0] == 0.5 and ys[-1] == tab.heatmap.row_count() - 0.5  # first row to last row
    assert xs[0] == pytest.approx(0.01) and xs[-1] <= tab.heatmap.column_count() * 0.02
    # where the path enters row r is the start of token r (frame 4r: x = 0.08 r + 0.01)
    enter = [xs[np.argmax(ys == r + 0.5)] for r in range(4)]
    assert enter == pytest.approx([0.01, 0.09, 0.17, 0.25])
    picker = tab.word_timing.picker
    assert picker.shape() == SHAPE and picker.heads() == DEFAULT_HEADS
    with qtbot.waitSignal(tab.word_timing.aligned, timeout=5000):
        picker.set_heads([(0, 0)])  # a head that hears the audio backwards
    assert tab.model.alignment_calls[-1] == [(0, 0)]
    xs2, ys2 = tab.word_timing.path.curve.getData()
    assert not np.array_equal(xs2, xs) or not np.array_equal(ys2, ys)  # the path moved
    assert [w.start for w in tab.word_timing.bands.words()] != [w.start for w in tab.model.words(tab.run.steps())]
    with qtbot.waitSignal(tab.word_timing.aligned, timeout=5000):
        picker.default_button.click()
    assert np.array_equal(tab.word_timing.path.curve.getData()[0], xs)  # back where it was


def test_clicking_a_word_band_selects_its_first_token(qtbot, tab):
    tab.word_timing_check.setChecked(True)
    decoded(qtbot, tab)
    _settled(qtbot, tab)
    words = tab.word_timing.bands.words()
    jumps = next(w for w in words if len(w.steps) > 1)  # " jump" + "s"
    _click_wave(qtbot, tab, (jumps.start + jumps.end) / 2)
    assert tab.selected_step() == jumps.steps[0]
    assert tab.topk.step() == jumps.steps[0] and tab.heatmap.selection() is not None
    _click_wave(qtbot, tab, (words[1].start + words[1].end) / 2)
    assert tab.selected_step() == words[1].steps[0] == 1


def test_off_by_default_and_nothing_computed(qtbot, tab):
    assert not tab.word_timing_check.isChecked() and "DTW" in tab.word_timing_check.toolTip()
    decoded(qtbot, tab)
    assert tab.model.alignment_calls == [] and tab.model.end_calls == 0
    assert tab.word_timing.bands.words() == []
    with qtbot.waitSignal(tab.word_timing.aligned, timeout=5000):  # ticked after a run: aligned at once
        tab.word_timing_check.setChecked(True)
    _settled(qtbot, tab)
    assert tab.word_timing.final and len(tab.word_timing.bands.words()) == 9


# ------------------------------------------------------------------ the real tiny.en
@pytest.mark.e2e
def test_real_tiny_en_bands_equal_the_models_words_with_end_of_text(qtbot, whisper_tiny_en):
    model = whisper_tiny_en
    gen = speech_tab(qtbot, model)
    tab = next(gen)
    try:
        tab.word_timing_check.setChecked(True)
        audio, rate = sf.read(first_sample(), dtype="float32")
        with qtbot.waitSignal(tab.decodeFinished, timeout=120_000):
            tab.set_audio(audio, "sample")
        _settled(qtbot, tab, timeout=120_000)
        assert tab.word_timing.final
        steps = [ev for ev in tab.run.steps() if isinstance(ev, StepEvent)]
        options = tab.run.branch(0).options
        expected = model.words(steps, end_attention=model.end_attention(audio, steps, options), audio=audio)
        bands = tab.word_timing.bands
        assert [w.word for w in bands.words()] == [w.word for w in expected] and len(expected) > 10
        assert np.allclose(bands.spans(), [(w.start, w.end) for w in expected])
        assert tab.word_timing.picker.heads() == model.alignment_heads
        xs, ys = tab.word_timing.path.curve.getData()
        assert len(xs) > 0 and ys[-1] == tab.heatmap.row_count() - 0.5
    finally:
        next(gen, None)


def test_refine_button_draws_the_refined_words(qtbot, tab):
    tab.word_timing_check.setChecked(True)
    refine = tab.word_timing.refine
    refine.button.click()  # before any run: refused, with the reason
    assert "finished run" in tab.word_timing.status.text()
    decoded(qtbot, tab)
    _settled(qtbot, tab)
    before = tab.word_timing.bands.spans()
    with qtbot.waitSignal(refine.refined, timeout=5000):
        refine.button.click()
    after = tab.word_timing.bands.spans()
    assert tab.model.refine_calls == 1 and len(after) == len(before)
    assert all(abs(a0 - b0 - 0.05) < 1e-9 and abs(a1 - b1 - 0.05) < 1e-9 for (a0, a1), (b0, b1) in zip(after, before))
    assert "refined" in tab.word_timing.status.text() and refine.button.text() == "refine"
