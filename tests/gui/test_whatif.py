"""Input what-ifs in the tabs (issue 13, section 3): masking by mouse (a span on the waveform,
a region on the image in Mask mode, dropped source words), What if? / No input in a worker,
the what-if branch, the What if view's cells, the token-stream marks, cancel, and the layout
at 1280×800.

Speech and OCR use the fakes of tests/gui/fakes_whatif.py; translation the bundled Bergamot
en-pt (about a second to load, as tests/gui/test_translation_tab.py); one test the real tiny.en.
"""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from core.options import DecodingOptions
from gui.tabs.speech import SpeechTab
from gui.widgets.whatif_view import DEPEND_COLOR, PRIOR_COLOR

from .fakes import WORDS
from .tab_helpers import TONE, decoded, speech_tab
from .fakes_whatif import LOST_P, FakeWhatIfOCR, FakeWhatIfSpeech


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeWhatIfSpeech())


def _ran(qtbot, tab, action):
    """Run a what-if and wait until its result is shown."""
    tab.whatif_result = None
    assert action() is not False
    qtbot.waitUntil(lambda: tab.whatif_result is not None and not tab.is_decoding(), timeout=5000)
    return tab.whatif_result


def _wave_event(tab, kind, seconds, button=Qt.MouseButton.LeftButton):
    """A mouse event on the waveform at ``seconds`` (mid height)."""
    vb = tab.wave_box
    y = sum(vb.viewRange()[1]) / 2
    pos = QPointF(tab.wave.mapFromScene(vb.mapViewToScene(QPointF(seconds, y))))
    buttons = Qt.MouseButton.NoButton if kind == QEvent.Type.MouseButtonRelease else button
    ev = QMouseEvent(kind, pos, tab.wave.viewport().mapToGlobal(pos), button, buttons, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(tab.wave.viewport(), ev)


def _drag_wave(qtbot, tab, t0, t1):
    _wave_event(tab, QEvent.Type.MouseButtonPress, t0)
    for k in range(1, 6):
        _wave_event(tab, QEvent.Type.MouseMove, t0 + (t1 - t0) * k / 5)
        qtbot.wait(5)
    _wave_event(tab, QEvent.Type.MouseButtonRelease, t1)


# ------------------------------------------------------------------ speech (fake model)
def test_mask_button_then_a_drag_on_the_waveform_selects_the_span(qtbot, tab):
    decoded(qtbot, tab)
    x_range = tab.wave_box.viewRange()[0]
    _drag_wave(qtbot, tab, 0.3, 0.45)  # Mask off: the waveform pans, nothing is masked
    assert tab.whatif_mask is None and not tab.mask_span.isVisible()
    tab.wave.setXRange(*x_range, padding=0)
    qtbot.mouseClick(tab.mask_button, Qt.MouseButton.LeftButton)
    assert tab.mask_button.isChecked() and tab.wave_box.selecting
    _drag_wave(qtbot, tab, 0.3, 0.45)
    t0, t1 = tab.whatif_mask
    px = (x_range[1] - x_range[0]) / tab.wave_box.width()  # one pixel in seconds
    assert abs(t0 - 0.3) < 3 * px and abs(t1 - 0.45) < 3 * px
    assert tab.mask_span.isVisible() and tab.mask_span.getRegion() == pytest.approx((t0, t1))
    assert "silence 0.30–0.45 s" in tab.whatif_view.mask_text() and tab.whatif_view.whatif_button.isEnabled()
    assert tab.inspector_tabs.currentWidget() is tab.whatif_view
    # dragging the span's edge changes the mask
    tab.mask_span.setRegion((0.5, 0.7))
    tab.mask_span.sigRegionChangeFinished.emit(tab.mask_span)
    assert tab.whatif_mask == pytest.approx((0.5, 0.7))
    # a click (no span) keeps the mask
    _drag_wave(qtbot, tab, 0.2, 0.2)
    assert tab.whatif_mask == pytest.approx((0.5, 0.7))


def test_what_if_decodes_in_the_worker_and_shows_the_branch_and_the_changes(qtbot, tab):
    decoded(qtbot, tab)
    root = tab.run.steps()
    threads = []
    real = tab.model.what_if

    def spy(*args, **kwargs):
        for ev in real(*args, **kwargs):
            threads.append(threading.current_thread() is threading.main_thread())
            yield ev

    tab.model.what_if = spy
    assert tab.mask_span_seconds(0.32, 0.38)  # over " fox" (word 3: 0.3–0.4 s)
    r = _ran(qtbot, tab, lambda: qtbot.mouseClick(tab.whatif_view.whatif_button, Qt.MouseButton.LeftButton))
    assert threads and not any(threads)  # the model ran in the worker thread only
    assert tab.errors == [] and r.kind == "mask" and r.parent == 0 and r.branch == 1
    assert tab.model.whatif_calls[0][0] == "mask" and tab.model.whatif_calls[0][2] == tuple(e.token_id for e in root)
    # the what-if is a branch of the run; the run stays shown
    b = tab.run.branch(1)
    assert b.label() == "what if: silence 0.32–0.38 s" and tab.run.current_branch() == 0
    assert tab.run.text(1) == "The quick brown jumps over the lazy dog." and b.finished is not None
    assert [e.step for e in tab.run.branch_steps(1)] == list(range(len(WORDS) - 1))
    assert tab.stream.text() == "".join(WORDS).strip()
    # the view: one cell per token, " fox" flagged, its Δp annotation, the diff
    cells = tab.whatif_view.cells()
    assert [c.shift.text for c in cells] == WORDS
    flagged = [c for c in cells if c.flagged]
    assert [c.shift.text for c in flagged] == [" fox"] and flagged[0].note.endswith(f"→{LOST_P:.2f}")
    assert "1</b> of 11 tokens depended" in tab.whatif_view.summary_text()
    assert "<s" in tab.whatif_view.diff_text() and "fox" in tab.whatif_view.diff_text()
    # the token stream marks the token that depended on the masked part
    marks = tab.stream.flow.marks()
    assert list(marks) == [3] and marks[3][0] == DEPEND_COLOR.lower() and "depended" in marks[3][1]
    assert "1 of 11 tokens depended" in tab.messages[-1]
    # the fork diff compares the branch with the run; the branch tree lists it
    tab.fork_diff.set_branch(1)
    assert tab.fork_diff.pair() == (0, 1) and any(c.differs for c in tab.fork_diff.columns())
    # clicking a cell selects that step of the run
    tab.whatif_view.stepClicked.emit(5)
    assert tab.run.selected() == 5 and tab.topk.event_shown() is root[5]


def test_no_input_marks_the_tokens_the_prior_explains(qtbot, tab):
    decoded(qtbot, tab)
    r = _ran(qtbot, tab, lambda: qtbot.mouseClick(tab.whatif_view.noinput_button, Qt.MouseButton.LeftButton))
    assert r.kind == "prior" and r.branch is None and len(tab.run.branches()) == 1
    prone = [c.shift.text for c in tab.whatif_view.cells() if c.flagged]
    assert prone == [" over", " the", "."]
    assert all("⚠" in c.note for c in tab.whatif_view.cells() if c.flagged)
    marks = tab.stream.flow.marks()
    assert sorted(marks) == [6, 7, 10] and {c for c, _t in marks.values()} == {PRIOR_COLOR.lower()}
    assert "3</b> of 11 tokens are hallucination-prone" in tab.whatif_view.summary_text()
    assert "hallucination-prone" in tab.messages[-1]


def test_marks_belong_to_the_scored_branch_and_a_new_input_clears_the_mask(qtbot, tab):
    decoded(qtbot, tab)
    tab.mask_span_seconds(0.32, 0.38)
    _ran(qtbot, tab, tab.run_what_if)
    assert list(tab.stream.flow.marks()) == [3]
    tab.show_branch(1)
    assert tab.stream.flow.marks() == {} and tab.stream.text() == tab.run.text(1)
    tab.show_branch(0)
    assert list(tab.stream.flow.marks()) == [3]
    # another option: a new run; the result goes, the mask stays (same input)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.options_panel.setOptions(DecodingOptions(max_new_tokens=64), emit=True)
    assert tab.whatif_result is None and tab.stream.flow.marks() == {} and tab.whatif_view.cells() == []
    assert tab.whatif_mask == pytest.approx((0.32, 0.38)) and tab.mask_span.isVisible()
    # another input: the mask goes too
    decoded(qtbot, tab, TONE * 0.5, "quieter")
    assert tab.whatif_mask is None and not tab.mask_span.isVisible() and "none" in tab.whatif_view.mask_text()


def test_a_saved_exploration_keeps_the_what_if_branch(qtbot, tab, tmp_path):
    decoded(qtbot, tab)
    tab.mask_span_seconds(0.32, 0.38)
    _ran(qtbot, tab, tab.run_what_if)
    path = tmp_path / "whatif.json"
    assert tab.save_exploration(str(path))
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.request_decode()  # the same options: the what-if branch stays (issue 19)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    assert len(tab.run.branches()) == 2 and tab.open_exploration(str(path)), tab.errors
    b = tab.run.branch(1)
    assert b.label() == "what if: silence 0.32–0.38 s" and b.forced_ids == () and b.input_change
    assert tab.run.text(1) == "The quick brown jumps over the lazy dog."


def test_what_if_is_refused_without_a_mask_or_while_decoding(qtbot, tab):
    assert tab.run_what_if() is False and "Load a model" in tab.messages[-1]
    decoded(qtbot, tab)
    assert not tab.whatif_view.whatif_button.isEnabled()
    assert tab.run_what_if() is False and "Mask part of the input first" in tab.messages[-1]
    tab.model.delay_s = 0.05
    tab.mask_span_seconds(0.1, 0.2)
    tab.options_panel.setOptions(DecodingOptions(max_new_tokens=64), emit=True)
    qtbot.waitUntil(tab.is_decoding, timeout=3000)
    assert tab.run_what_if() is False and "still decoding" in tab.messages[-1]
    assert tab.run_no_input() is False


def test_cancelling_a_what_if_leaves_the_run_as_it_was(qtbot, tab):
    decoded(qtbot, tab)
    fin = tab.run.branch(0).finished
    tab.model.whatif_delay_s = 0.1
    tab.mask_span_seconds(0.0, 0.15)
    assert tab.run_what_if()
    qtbot.waitUntil(lambda: len(tab.run.branches()) == 2 and len(tab.run.branch(1).own) >= 1, timeout=5000)
    assert tab.cancel()
    assert not tab.is_busy() and tab.run.branch(0).finished is fin and not fin.cancelled
    assert tab.stream.text() == "".join(WORDS).strip() and tab.run.branch(1).note == "cancelled"
    assert tab.whatif_view.noinput_button.isEnabled() and tab.whatif_result is None
    qtbot.waitUntil(tab.workers_idle, timeout=5000)
    r = _ran(qtbot, tab, tab.run_no_input)  # the next one runs
    assert r.kind == "prior"


def test_what_if_view_fits_at_1280x800(qtbot, tab):
    decoded(qtbot, tab)
    tab.mask_span_seconds(0.32, 0.38)
    _ran(qtbot, tab, tab.run_what_if)
    tab.inspector_tabs.setCurrentWidget(tab.whatif_view)
    qtbot.wait(20)
    v = tab.whatif_view
    assert v.isVisible() and v.height() >= 150 and v.width() >= 400, v.size()
    for b in (v.whatif_button, v.noinput_button, v.clear_button, tab.mask_button):
        assert b.isVisible() and b.width() >= b.minimumSizeHint().width()
    assert all(v.canvas.rect().contains(c.rect) for c in v.cells())
    v.clear_button.click()
    assert tab.whatif_mask is None and tab.stream.flow.marks() == {} and v.cells() == []


# ------------------------------------------------------------------ OCR (fake model)
def test_ocr_mask_mode_blanks_a_region_and_read_a_region_still_works(qtbot):
    from gui.tabs.ocr import OCRTab

    from .fakes_ocr import LINE_TEXT
    from .test_ocr_tab import _mouse, text_image

    t = OCRTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.model = model = FakeWhatIfOCR()
    img = text_image(("First line", "Second", "The third line"))
    with qtbot.waitSignal(t.decodeFinished, timeout=5000):
        t.set_image(img, "three lines")
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=5000)
    lines = model.detect(img)
    n = len(LINE_TEXT)

    def drag(box):
        x0, y0, x1, y1 = box
        _mouse(t.view, QEvent.Type.MouseButtonPress, (x0, y0))
        _mouse(t.view, QEvent.Type.MouseMove, ((x0 + x1) / 2, (y0 + y1) / 2))
        _mouse(t.view, QEvent.Type.MouseMove, (x1, y1))
        _mouse(t.view, QEvent.Type.MouseButtonRelease, (x1, y1))

    # Mask mode: the drag is the mask, not a region to read
    t.mask_button.click()
    b1, b2 = lines[1].box, lines[2].box
    drag((b1[0] + 2, b1[1] + 2, b1[0] + 30, b2[1] + 6))  # over lines 2 and 3
    assert t.region is None and t.whatif_mask is not None and t.view.mask_rect() is not None
    x, y, w, h = t.whatif_mask
    assert abs(x - b1[0] - 2) <= 2 and abs(y + h - b2[1] - 6) <= 2
    t.whatif_result = None
    assert t.run_what_if()
    qtbot.waitUntil(lambda: t.whatif_result is not None and not t.is_decoding(), timeout=5000)
    r = t.whatif_result
    assert model.whatif_calls == [("mask", t.whatif_mask)] and r.done.segments == (1, 2)
    steps = t.run.branch_steps(r.branch)
    assert [e.step for e in steps] == list(range(3 * n - 2)) and [e.segment for e in steps][n:] == [1] * (n - 1) + [2] * (n - 1)
    assert "".join(e.text for e in steps if e.segment == 1) == LINE_TEXT[1:]
    assert sorted(t.stream.flow.marks()) == [n, 2 * n]  # each re-read line's first character depended on the mask
    # Mask off: a drag reads that region, as before
    t.mask_button.click()
    with qtbot.waitSignal(t.decodeFinished, timeout=5000):
        drag((lines[0].box[0] - 4, lines[0].box[1] - 4, lines[0].box[2] + 4, lines[0].box[3] + 4))
    assert t.region is not None and model.decode_regions[-1] == t.region
    # the read region is another input: the mask went
    assert t.whatif_mask is None and t.view.mask_rect() is None
    r = None
    t.whatif_result = None
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=5000)
    assert t.run_no_input()
    qtbot.waitUntil(lambda: t.whatif_result is not None and not t.is_decoding(), timeout=5000)
    assert t.whatif_result.kind == "prior" and [c.shift.text for c in t.whatif_view.cells() if c.flagged] == ["1", "2"]
    t.shutdown()


# ------------------------------------------------------------------ translation (Bergamot en-pt)
SLOW_MS = 240_000


@pytest.fixture
def translation(qtbot):
    from gui.tabs.translation import TranslationTab

    t = TranslationTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t._text_timer.setInterval(20)
    t.messages, t.errors = [], []
    t.statusMessage.connect(t.messages.append)
    t.errorOccurred.connect(t.errors.append)
    with qtbot.waitSignal(t.modelReady, timeout=SLOW_MS):
        t.load_model("en-pt")
    qtbot.waitUntil(lambda: not t.is_busy(), timeout=SLOW_MS)
    yield t
    t.shutdown()


def test_translation_drop_selection_then_what_if(qtbot, translation):
    t = translation
    text = "I bought three apples. The weather is nice today."
    with qtbot.waitSignal(t.decodeFinished, timeout=SLOW_MS):
        t.set_text(text)
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=SLOW_MS)
    root = t.run.steps()
    assert t.drop_selection() is False and "Select the words" in t.messages[-1]
    cur = t.text_edit.textCursor()
    start = text.index("apples")
    cur.setPosition(start + 1)  # a part of the word is enough
    cur.setPosition(start + 4, cur.MoveMode.KeepAnchor)
    t.text_edit.setTextCursor(cur)
    qtbot.mouseClick(t.drop_button, Qt.MouseButton.LeftButton)
    assert t.whatif_mask is not None and "drop 'apples'" in t.whatif_view.mask_text()
    assert t.dropped_ranges() == [(start, start + len("apples") - 1), (start + len("apples") - 1, start + len("apples"))]
    t.whatif_result = None
    qtbot.mouseClick(t.whatif_view.whatif_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: t.whatif_result is not None and not t.is_decoding(), timeout=SLOW_MS)
    assert t.errors == []
    r = t.whatif_result
    assert r.done.segments == (0,) and "maçã" not in t.run.text(r.branch)
    # the second sentence is the run's, renumbered after the re-translated first
    second = [e.token_id for e in root if e.segment == 1]
    assert [e.token_id for e in t.run.branch_steps(r.branch) if e.segment == 1] == second
    steps = t.run.branch_steps(r.branch)
    assert [e.step for e in steps] == list(range(len(steps)))
    apple = next(e.step for e in root if "maç" in e.text)
    assert apple in t.stream.flow.marks()
    # editing the text forgets the dropped words
    t.text_edit.insertPlainText(" ")
    assert t.whatif_mask is None and t.dropped_ranges() == []


# ------------------------------------------------------------------ real tiny.en
@pytest.mark.e2e
def test_real_tiny_en_silencing_door(qtbot):
    from gui.tabs.speech import first_sample

    from tests.core.test_whatif import DOOR_SPAN

    if first_sample() is None:
        pytest.skip("no bundled sample clip")
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    errors = []
    t.errorOccurred.connect(errors.append)
    with qtbot.waitSignal(t.modelReady, timeout=SLOW_MS):
        t.load_model("tiny.en")
    with qtbot.waitSignal(t.decodeFinished, timeout=SLOW_MS):
        t.load_sample()
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=SLOW_MS)
    root = t.run.steps()
    door = next(e.step for e in root if e.text == " door")
    assert t.mask_span_seconds(*DOOR_SPAN)
    t.whatif_result = None
    assert t.run_what_if()
    qtbot.waitUntil(lambda: t.whatif_result is not None and not t.is_decoding(), timeout=SLOW_MS)
    assert errors == []
    r = t.whatif_result
    assert door in t.stream.flow.marks() and "door" not in t.run.text(r.branch)
    cell = next(c for c in t.whatif_view.cells() if c.shift.step == door)
    assert cell.flagged and cell.shift.p_other < 0.1
    t.whatif_result = None
    assert t.run_no_input()
    qtbot.waitUntil(lambda: t.whatif_result is not None and not t.is_decoding(), timeout=SLOW_MS)
    you = next(e.step for e in root if e.text == " you")
    assert you in t.stream.flow.marks() and door not in t.stream.flow.marks()
    t.shutdown()
