"""Decoding lanes in the window (issue 13, section 1): the Lanes tab beside the heatmap.

With the fake models (tests/gui/fakes_lanes.py: per strategy other words, so the lanes
differ where known): lanes appear and grow live, aligned to lane 1 with the differences
outlined and gaps drawn, their log-probability, time, tokens and agreement, the reference
metric, clicks, and how lanes share the tab's one decoding thread (an option change stops
them, lanes asked for during a run wait, Esc cancels them, another input clears them). Then
the real Bergamot en-pt model in the Translation tab (chrF equal to sacrebleu's) and the
room the view gets at 1280 x 800 in all three tabs.
"""

from __future__ import annotations

import math

import jiwer
import pytest
from PySide6.QtCore import QPoint, Qt

from core.options import DecodingOptions
from gui.tabs.ocr import OCRTab

from .fakes import WORDS
from .tab_helpers import TONE, decoded, speech_tab
from .fakes_lanes import FakeLanesOCR, FakeLanesSpeech, lane_words

SPECS = ["greedy", "beam:5", "sample:T=0.8", "min-p:0.1"]


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeLanesSpeech())


def _run_lanes(qtbot, tab, specs=SPECS):
    view = tab.lanes.view
    view.set_specs(specs)
    with qtbot.waitSignal(tab.lanes.state.finished, timeout=5000):
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tab.lanes.handle is None and not tab.is_busy(), timeout=5000)
    view.refresh()


def test_lanes_appear_aligned_with_the_differences_marked(qtbot, tab):
    decoded(qtbot, tab)
    encodes = tab.model.encode_count
    _run_lanes(qtbot, tab)
    view, state = tab.lanes.view, tab.lanes.state
    assert tab.inspector_tabs.currentWidget() is view
    assert tab.inspector_tabs.tabText(tab.inspector_tabs.indexOf(view)) == "Lanes"
    assert tab.model.encode_count == encodes  # the input's encoder output is shared
    opts = tab.model.lanes_calls[-1]
    assert [o.strategy for o in opts] == ["greedy", "beam", "sample", "sample"]
    assert opts[1].num_beams == 5 and opts[2].temperature == 0.8 and opts[3].min_p == 0.1
    # every lane's tokens, in order
    for k, lane in enumerate(state.lanes):
        assert [e.text for e in lane.steps] == lane_words(opts[k])
        assert lane.text == "".join(lane_words(opts[k])).strip()
    # aligned to lane 1: the sampled lane's " red" faces " brown", its missing " lazy" a gap;
    # min-p's inserted " cat" gets its own column, where the other lanes have gaps
    cols = state.columns()
    texts = [[state.lanes[k].steps[i].text if i is not None else None for k, i in enumerate(c)] for c in cols]
    assert [" brown", " brown", " red", " brown"] in texts
    assert [" lazy", " lazy", None, " lazy"] in texts
    assert [None, None, None, " cat"] in texts
    assert [" fox", " fox", " fox", " fox"] in texts
    chips = view.canvas.chips()
    assert len(chips) == sum(len(lane.steps) for lane in state.lanes)
    marked = {(lane, ev.text) for _r, lane, ev, differs in chips if differs}
    # a lane's token is outlined where it differs from lane 1's; lane 1's where any lane differs
    assert marked == {(0, " brown"), (2, " red"), (0, " lazy"), (3, " cat")}
    assert {lane for _r, lane in view.canvas.gaps()} == {0, 1, 2}  # the gaps facing " cat", and lane 3's " lazy"
    # chips of one column share its x; rows go lane by lane
    by_col = {}
    for rect, lane, ev, _d in chips:
        by_col.setdefault(rect.x(), []).append((lane, rect.y()))
    for entries in by_col.values():
        ys = [y for _lane, y in sorted(entries)]
        assert ys == sorted(ys)


def test_summary_gives_logprob_time_tokens_and_agreement(qtbot, tab):
    decoded(qtbot, tab)
    _run_lanes(qtbot, tab)
    view, state = tab.lanes.view, tab.lanes.state
    rows = view.summary()
    assert [r[0] for r in rows] == [f"{k + 1}  {s}" for k, s in enumerate(SPECS)]
    for k, (row, lane) in enumerate(zip(rows, state.lanes)):
        assert lane.logprob == pytest.approx(sum(math.log(e.prob) for e in lane.steps))
        assert row[1] == f"{lane.logprob:.2f}".replace("-", "−")
        assert row[2].endswith(" s") and lane.time_s is not None and lane.time_s >= 0
        assert row[3] == str(len(lane.steps))
        assert row[4] == "—"  # no reference
    m = state.agreement()
    assert m[0, 1] == 1.0 and m[0, 2] < 1.0 and m[0, 3] < 1.0
    assert rows[2][5] == f"{m[0, 2]:.2f}"
    assert view.agreement_label.text().startswith(f"agreement {state.mean_agreement():.2f}")
    assert any(msg.startswith("Lanes: 4 lanes") and "agreement" in msg for msg in tab.messages)


def test_reference_gives_each_lane_its_wer(qtbot, tab):
    decoded(qtbot, tab)
    _run_lanes(qtbot, tab)
    view, state = tab.lanes.view, tab.lanes.state
    ref = "The quick brown fox jumps over the lazy dog!"
    view.set_reference(ref)
    norm = jiwer.Compose([jiwer.ToLowerCase(), jiwer.RemovePunctuation(), jiwer.RemoveMultipleSpaces(), jiwer.Strip(),
                          jiwer.ReduceToListOfListOfWords()])
    rows = view.summary()
    assert view.table.horizontalHeaderItem(4).text() == "WER"
    for lane, row in zip(state.lanes, rows):
        direct = jiwer.wer(ref, lane.text, reference_transform=norm, hypothesis_transform=norm)
        assert lane.score.name == "wer" and lane.score.value == pytest.approx(direct)
        assert row[4] == f"{100 * direct:.1f}%"
    assert state.lanes[0].score.value == 0.0 and state.lanes[2].score.value > 0
    assert "best WER: lane 1" in view.agreement_label.text()
    # typing: scored after a short pause; a reference of punctuation only is refused
    qtbot.keyClicks(view.reference_edit, "")
    view.reference_edit.setText("?!")
    qtbot.waitUntil(lambda: state.reference == "?!", timeout=2000)
    assert all(lane.score is None for lane in state.lanes)
    assert "the reference text is empty" in view.agreement_label.text()


def test_reference_from_a_file(qtbot, tab, tmp_path):
    decoded(qtbot, tab)
    _run_lanes(qtbot, tab, ["greedy", "sample:T=0.8"])
    f = tmp_path / "ref.txt"
    f.write_text("The quick red fox jumps over the dog.\n", encoding="utf-8")
    assert tab.lanes.view.load_reference(str(f)) == ""
    assert tab.lanes.view.reference_edit.text() == "The quick red fox jumps over the dog."
    assert tab.lanes.state.lanes[1].score.value == 0.0 and tab.lanes.state.lanes[0].score.value > 0
    assert "Could not read" in tab.lanes.view.load_reference(str(tmp_path / "missing.txt"))


def test_lanes_grow_live_and_interleaved(qtbot, tab):
    decoded(qtbot, tab)
    tab.model.delay_s = 0.03
    state = tab.lanes.state
    grows = []
    state.grew.connect(lambda: grows.append([len(lane.steps) for lane in state.lanes]))
    tab.lanes.view.set_specs(["greedy", "sample:T=0.8", "min-p:0.1"])
    with qtbot.waitSignal(state.finished, timeout=10000):
        tab.lanes.view.request_run()
        qtbot.waitUntil(lambda: state.lanes and all(2 <= len(lane.steps) for lane in state.lanes), timeout=5000)
        assert all(lane.running for lane in state.lanes)  # all grow, none finished yet
        assert tab.is_decoding() and tab.lanes.view.summary()[0][2] == "…"
    # the model got several batches (one per frame), not one at the end
    assert len(grows) >= 3 and grows[-1] == [len(lane.steps) for lane in state.lanes]


def test_a_beam_lane_shows_its_search_until_its_tokens_come(qtbot, tab):
    decoded(qtbot, tab)
    tab.model.delay_s = 0.03
    state = tab.lanes.state
    tab.lanes.view.set_specs(["greedy", "beam:3"])
    seen = []
    state.grew.connect(lambda: seen.append(tab.lanes.view.summary()[1][3]))
    with qtbot.waitSignal(state.finished, timeout=10000):
        tab.lanes.view.request_run()
    assert any("beam step" in s for s in seen)
    assert state.lanes[1].beams is None and [e.text for e in state.lanes[1].steps] == WORDS


def test_clicking_a_chip_shows_its_topk(qtbot, tab):
    decoded(qtbot, tab)
    _run_lanes(qtbot, tab)
    canvas = tab.lanes.view.canvas
    rect, lane, ev, _d = next(c for c in canvas.chips() if c[1] == 2 and c[2].text == " red")
    qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton, pos=rect.center())
    assert tab.topk.event_shown() is ev and canvas.selected == (2, ev.step)
    assert tab.messages[-1].startswith("Lane 3 (sample:T=0.8), step 2")


def test_bad_specs_are_marked_and_cannot_run(qtbot, tab):
    decoded(qtbot, tab)
    view = tab.lanes.view
    view.set_specs(["greedy", "beam:x"])
    assert not view.run_button.isEnabled() and "whole number" in view.spec_boxes[1].toolTip()
    view.spec_boxes[1].setCurrentText("beam:3")
    assert view.run_button.isEnabled()
    # a spec that parses but does not fit the panel's options is refused with a message
    tab.options_panel.setOptions(DecodingOptions(num_beams=4, num_beam_groups=2))
    assert not tab.lanes.run(["greedy", "diverse-beam:groups=3"])
    assert "Cannot run the lanes" in tab.errors[-1] and "multiple of num_beam_groups" in tab.errors[-1]
    # two to four lanes
    view.set_specs(SPECS)
    assert not view.add_button.isEnabled() and len(view.spec_boxes) == 4
    view.remove_lane()
    view.remove_lane()
    view.remove_lane()
    assert len(view.spec_boxes) == 2 and not view.remove_button.isEnabled()


def test_current_means_the_panels_options(qtbot, tab):
    decoded(qtbot, tab)
    tab.options_panel.setOptions(DecodingOptions(strategy="sample", temperature=1.3, top_k=7, max_new_tokens=6))
    _run_lanes(qtbot, tab, ["current", "greedy"])
    cur, greedy = tab.model.lanes_calls[-1]
    assert (cur.strategy, cur.temperature, cur.top_k, cur.max_new_tokens) == ("sample", 1.3, 7, 6)
    assert greedy.strategy == "greedy" and greedy.max_new_tokens == 6  # the panel is every lane's base
    assert len(tab.lanes.state.lanes[1].steps) == 6


def test_an_option_change_stops_the_lanes_and_decodes(qtbot, tab):
    decoded(qtbot, tab)
    tab.model.delay_s = 0.05
    state = tab.lanes.state
    tab.lanes.view.set_specs(["greedy", "sample:T=0.8"])
    tab.lanes.view.request_run()
    qtbot.waitUntil(lambda: state.lanes and len(state.lanes[0].steps) >= 1, timeout=5000)
    calls = tab.model.decode_calls
    with qtbot.waitSignal(tab.decodeFinished, timeout=10000):
        tab.options_panel.setOptions(DecodingOptions(max_new_tokens=5), emit=True)
    assert tab.model.decode_calls == calls + 1
    assert all(lane.finished is not None and lane.finished.cancelled for lane in state.lanes)
    qtbot.waitUntil(tab.workers_idle, timeout=5000)
    assert tab.lanes.handle is None and not tab.is_busy()


def test_lanes_asked_for_during_a_run_start_when_it_ends(qtbot, tab):
    tab.model.delay_s = 0.03
    with qtbot.waitSignal(tab.decodeFinished, timeout=10000):
        tab.set_audio(TONE, "tone")
        qtbot.waitUntil(tab.is_decoding, timeout=2000)
        assert tab.lanes.run(["greedy", "beam:2"])
        assert tab.lanes.pending() and tab.lanes.handle is None
        assert "when the current run ends" in tab.messages[-1]
    with qtbot.waitSignal(tab.lanes.state.finished, timeout=10000):
        pass
    assert [lane.spec for lane in tab.lanes.state.lanes] == ["greedy", "beam:2"]


def test_cancel_stops_the_lanes_keeping_their_tokens(qtbot, tab):
    decoded(qtbot, tab)
    tab.model.delay_s = 0.05
    state = tab.lanes.state
    tab.lanes.view.set_specs(["greedy", "sample:T=0.8"])
    tab.lanes.view.request_run()
    qtbot.waitUntil(lambda: state.lanes and len(state.lanes[1].steps) >= 2, timeout=5000)
    assert tab.is_busy()
    assert tab.cancel()
    assert not tab.is_busy() and all(lane.finished.cancelled for lane in state.lanes)
    assert all(len(lane.steps) >= 2 for lane in state.lanes) and "Lanes cancelled" in tab.messages
    assert [row[2] for row in tab.lanes.view.summary()] == ["stopped", "stopped"]
    qtbot.waitUntil(tab.workers_idle, timeout=5000)
    assert tab.run.branch(0).finished is not None and not tab.run.branch(0).finished.cancelled  # the run shown was not touched


def test_another_input_clears_the_lanes(qtbot, tab):
    decoded(qtbot, tab)
    _run_lanes(qtbot, tab)
    assert tab.lanes.state.lanes
    decoded(qtbot, tab, TONE * 0.5, "quieter")
    assert tab.lanes.state.lanes == [] and tab.lanes.view.hint.isVisible()


def test_ocr_tab_lanes_agree(qtbot):
    from .test_ocr_tab import text_image

    t = OCRTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.model = FakeLanesOCR()
    try:
        with qtbot.waitSignal(t.decodeFinished, timeout=10000):
            t.set_image(text_image(), "lines")
        qtbot.waitUntil(lambda: not t.is_busy(), timeout=10000)
        _run_lanes(qtbot, t, ["greedy", "beam:3", "sample:T=0.8"])
        state = t.lanes.state
        assert [lane.text for lane in state.lanes] == [t.run.branch(0).finished.text] * 3
        assert not any(d for *_x, d in t.lanes.view.canvas.chips()) and state.mean_agreement() == 1.0
        assert t.lanes.view.table.horizontalHeaderItem(4).text() == "CER"
        t.lanes.view.set_reference(state.lanes[0].text)
        assert all(lane.score.name == "cer" and lane.score.value == 0.0 for lane in state.lanes)
    finally:
        t.shutdown()


@pytest.mark.parametrize("which", ["speech", "ocr", "translation"])
def test_room_at_1280x800(qtbot, settings, which):
    """In every tab of the window at 1280 x 800 the Lanes view shows its boxes, the summary
    and at least one block of 4 lanes."""
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    tab = {"speech": w.speech_tab, "ocr": w.ocr_tab, "translation": w.translation_tab}[which]
    w.tabs.setCurrentWidget(tab)
    tab.inspector_tabs.setCurrentWidget(tab.lanes.view)
    view = tab.lanes.view
    qtbot.waitUntil(lambda: view.isVisible(), timeout=2000)
    assert view.run_button.isVisible() and view.reference_edit.isVisible()
    assert all(b.isVisible() for b in view.spec_boxes)
    right = view.run_button.mapTo(view, QPoint(view.run_button.width(), 0)).x()
    assert right <= view.width()  # the row fits
    h = view.canvas.fontMetrics().height() + 8
    assert view.scroll.viewport().height() >= 4 * (h + 2) or view.hint.isVisible()
    assert view.splitter.height() >= 4 * h
    w.close()


@pytest.mark.e2e
def test_translation_lanes_on_bergamot(qtbot):
    from sacrebleu.metrics import CHRF

    from gui.tabs.translation import TranslationTab

    t = TranslationTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.options_panel._timer.setInterval(20)
    t._text_timer.setInterval(50)
    try:
        with qtbot.waitSignal(t.modelReady, timeout=120_000):
            t.load_model("en-pt")
        qtbot.waitUntil(lambda: not t.is_busy(), timeout=120_000)
        with qtbot.waitSignal(t.decodeFinished, timeout=120_000):
            t.set_text("The weather is nice today. Where is the train station?")
        qtbot.waitUntil(lambda: not t.is_busy(), timeout=120_000)
        _run_lanes(qtbot, t, SPECS)
        state = t.lanes.state
        encodes = t.model.encode_count
        for lane in state.lanes:
            alone = list(t.model.decode(t.text(), lane.options))[-1]
            assert lane.text == alone.text and lane.token_ids == alone.token_ids
        assert t.model.encode_count == encodes
        ref = "O tempo está bom hoje. Onde fica a estação de comboios?"
        t.lanes.view.set_reference(ref)
        for lane in state.lanes:
            assert lane.score.name == "chrf"
            assert lane.score.value == pytest.approx(CHRF().sentence_score(lane.text, [ref]).score)
        assert t.lanes.view.table.horizontalHeaderItem(4).text() == "chrF"
        assert t.run.branch(0).finished.text == state.lanes[0].text  # the greedy run and lane 1 agree
    finally:
        t.shutdown()
