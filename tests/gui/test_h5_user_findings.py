"""Session 13, H5: what a new user hit in the window at 1280x800 (findings left by session 12's
H6, and the click-through's own; scripts and screenshots in /work/notes/s13/h5/), each as a
test that failed before its fix."""

from __future__ import annotations

from core.options import DecodingOptions

from .fakes import FakeSpeechModel
from .tab_helpers import TONE, decoded, show_align_att_wait, shown_window


def test_a_beam_run_leaves_the_inspector_splitter_where_it_was(qtbot, settings):
    """Before: the beam tree's tool row ("150 nodes · 25 steps" and the legend on one line) made
    the inspector's minimum width 885 px once a beam run had filled it: the bottom splitter moved
    from [485, 783] to [383, 885] and stayed there after the next greedy run (the tree's page
    keeps its minimum while hidden), squeezing the top-k chart."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = FakeSpeechModel()
    decoded(qtbot, tab, TONE)
    before = tab.bottom_splitter.sizes()
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.options_panel.setOptions(DecodingOptions(strategy="beam", num_beams=5), emit=True)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    tab.inspector_tabs.setCurrentWidget(tab.beam_tree)
    qtbot.wait(50)
    assert len(tab.beam_tree.nodes()) > 20
    assert tab.inspector_tabs.minimumSizeHint().width() <= before[1], tab.inspector_tabs.minimumSizeHint()
    assert tab.bottom_splitter.sizes() == before
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.options_panel.setOptions(DecodingOptions(), emit=True)
    qtbot.wait(50)
    assert tab.bottom_splitter.sizes() == before
    tab.shutdown()


def test_the_live_word_table_shows_its_four_columns_at_1280x800(qtbot, settings):
    """Before: the Live tab's word table got a quarter of the view (~200 px) while its columns
    (word, end, commit, latency) needed ~220: "latency" was cut and behind a horizontal
    scroll bar (session 12's H6; speech_en.wav played as live input with align-att)."""
    from core.streaming import Committed, StreamToken

    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    view = tab.live_mode.view
    tab.inspector_tabs.setCurrentWidget(view)
    words = [" open", " the", " door", " recognition", " system.", " listening."]
    t = 0.0
    for i, word in enumerate(words):
        t += 0.6
        tok = StreamToken(100 + i, word, t)
        view.take(Committed(tokens=(tok,), audio_s=t + 1.2, wall_s=t + 1.3, audio_end_s=t, latency_s=1.2,
                            word_latencies=(1.2,)))
    view.flush()
    qtbot.wait(50)
    table = view.table
    assert table.rowCount() == len(words)
    head = table.horizontalHeader()
    assert not table.horizontalScrollBar().isVisible(), ([head.sectionSize(i) for i in range(4)], table.width(), table.viewport().width(), table.minimumWidth(), table.horizontalScrollBar().maximum(), view.width())
    fm = table.fontMetrics()
    assert head.sectionSize(3) >= fm.horizontalAdvance("latency")
    assert w.minimumSizeHint().width() <= 1280
    assert tab.bottom_splitter.sizes()[1] >= tab.inspector_tabs.minimumSizeHint().width()
    tab.shutdown()


def test_the_live_buffer_lane_is_in_view_without_scrolling_at_1280x800(qtbot, settings):
    """Before: since the Live view's column scrolls (f8a72be), the column took the height its
    parts would like (text ~400 px, lane ~270 px: 728 px) rather than the view's 179 px: only the
    transcript box showed, the buffer lane and its legend were below the fold, behind a
    scroll bar, although their minimums fit (session 12's live_decision_1280x800.png too)."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    view = tab.live_mode.view
    tab.inspector_tabs.setCurrentWidget(view)
    qtbot.wait(50)
    area = view.column_scroll
    assert not area.verticalScrollBar().isVisible(), (area.widget().height(), area.viewport().height())
    bottom = view.legend.mapTo(area.viewport(), view.legend.rect().bottomLeft()).y()
    assert bottom <= area.viewport().height()
    assert view.lane.height() >= view.lane.minimumHeight()


def test_an_align_att_wait_does_not_cut_the_live_column_on_the_right_at_1280x800(qtbot, settings):
    """Before: AlignAtt's decision heatmap (its note line alone 342 px) made the Live column
    685 px wide in a 489 px area whose horizontal scrolling is off: the transcript, the lane and
    the legend were cut on the right (tiny.en, speech_en.wav played as live input, align-att)."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    view = tab.live_mode.view
    tab.inspector_tabs.setCurrentWidget(view)
    show_align_att_wait(qtbot, view)
    assert view.decision.isVisible()
    area = view.column_scroll
    assert area.widget().width() <= area.viewport().width(), (area.widget().width(), area.viewport().width())
    assert w.height() <= 800


def test_a_new_run_or_live_session_does_not_show_the_last_runs_figures(qtbot, settings, monkeypatch, tmp_path):
    """Before: the status bar said "Decoded: 24 tokens (eos)" for up to 6 s into the next run
    (a slider move, a live session), beside "Decoding…"; and while a file played as live input,
    its statistics were the last offline run's ("encode cached · 18.9 ms/token · … RTF 0.06")."""
    import numpy as np
    import soundfile as sf

    import gui.tabs.live as live_mod
    from core.streaming import Hypothesis

    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = FakeSpeechModel(delay_s=0.05)
    decoded(qtbot, tab, TONE)
    bar = w.statusBar()
    assert bar.currentMessage().startswith("Decoded:")
    tab.options_panel.setOptions(DecodingOptions(temperature=0.5), emit=True)  # a slider move
    qtbot.waitUntil(lambda: tab.is_decoding() and len(tab.run.steps()) >= 1, timeout=5000)
    assert not bar.currentMessage().startswith("Decoded:"), bar.currentMessage()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    assert bar.currentMessage().startswith("Decoded:")
    old_stats = w.stats_label.text()
    assert "ms/token" in old_stats and "–" not in old_stats.split("·")[1]

    class SlowDecoder:  # a live decode that takes a while and says nothing
        def decode(self, audio, start_s, previous=(), forced=(), stop=None):
            import time

            time.sleep(0.05)
            return Hypothesis((), finished=True)

    monkeypatch.setattr(live_mod.LiveMode, "make_decoder", lambda self, model, options: SlowDecoder())
    path = tmp_path / "n.wav"
    sf.write(path, (0.1 * np.random.default_rng(1).standard_normal(16000 * 3)).astype(np.float32), 16000)
    assert tab.live_mode.play_file(path, speed=4.0)
    qtbot.waitUntil(lambda: tab.live_mode.session is not None and tab.live_mode.session.started, timeout=5000)
    assert not bar.currentMessage().startswith("Decoded:"), bar.currentMessage()
    assert w.stats_label.text() != old_stats, old_stats
    qtbot.waitUntil(lambda: not tab.live_mode.running(), timeout=15_000)
    tab.shutdown()


def _cut_combos(window) -> list[str]:
    """Visible combo boxes whose current text is wider than where it is drawn and is not drawn
    cut with "…" (a plain QComboBox clips it mid-letter)."""
    from PySide6.QtWidgets import QComboBox, QStyle, QStyleOptionComboBox

    from gui.widgets.elided_combo import ElidedComboBox

    bad = []
    for c in window.findChildren(QComboBox):
        if not c.isVisible() or c.isEditable() or not c.currentText():
            continue
        opt = QStyleOptionComboBox()
        c.initStyleOption(opt)
        room = c.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, opt,
                                        QStyle.SubControl.SC_ComboBoxEditField, c).width()
        if c.fontMetrics().horizontalAdvance(c.currentText()) > room - 2:
            if not (isinstance(c, ElidedComboBox) and c.shown_text().endswith("…")):
                bad.append(f"{c.currentText()!r}: {room} px")
    return bad


def test_combo_texts_are_whole_or_cut_with_an_ellipsis(qtbot, settings):
    """Before: at 1280x800 the Live policy picker showed "local-ag" (49 px for
    "local-agreement:2", at any window size) and the preset box "Decoding Explorer default",
    clipped mid-letter."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    combo = tab.live_mode.policy_combo
    for size in ((1280, 800), (1400, 900), (1920, 1080)):
        w.resize(*size)
        for i in range(combo.count()):
            combo.setCurrentIndex(i)
            qtbot.wait(20)
            assert _cut_combos(w) == [], (size, _cut_combos(w))
    w.resize(1400, 900)  # the window's first size
    qtbot.wait(20)
    combo.setCurrentIndex(0)
    assert combo.currentText() == "local-agreement:2" and not combo.shown_text().endswith("…")


def test_an_elided_combo_shows_its_placeholder(qtbot):
    from gui.widgets.elided_combo import ElidedComboBox

    c = ElidedComboBox()
    qtbot.addWidget(c)
    c.setPlaceholderText("no takes yet")
    c.resize(200, 24)
    c.show()
    assert c.currentIndex() < 0 and c.shown_text() == "no takes yet"
    c.addItem("take 1")
    c.setCurrentIndex(0)
    assert c.shown_text() == "take 1"


def test_a_tabs_status_message_stays_with_its_tab(qtbot, settings):
    """Before: after the OCR tab's run, the Translation tab (switched to) said "Decoded: 102
    tokens (eos)" in its status bar, the OCR run's message; a tab decoding in the background
    wrote its messages over the current tab's."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.model = FakeSpeechModel()
    decoded(qtbot, tab, TONE)
    bar = w.statusBar()
    assert bar.currentMessage().startswith("Decoded:")
    w.tabs.setCurrentWidget(w.translation_tab)
    assert bar.currentMessage() == ""
    tab.statusMessage.emit("Decoded: 3 tokens (eos)")  # the speech tab, now in the background
    assert bar.currentMessage() == ""
    w.translation_tab.statusMessage.emit("Opened text.txt")
    assert bar.currentMessage() == "Opened text.txt"
    tab.shutdown()


def _untipped_controls(window) -> list[str]:
    """Visible controls a user sets or presses (boxes, fields, sliders, buttons) without a
    tooltip on themselves or on the box they belong to (a spin box's or combo's own field)."""
    from PySide6.QtWidgets import (QAbstractButton, QAbstractSlider, QAbstractSpinBox, QComboBox, QLineEdit,
                                   QScrollBar, QTabBar)

    bad = []
    controls = [c for kind in (QAbstractButton, QAbstractSlider, QAbstractSpinBox, QComboBox, QLineEdit)
                for c in window.findChildren(kind)]
    for c in controls:
        if not c.isVisible() or isinstance(c, QScrollBar) or isinstance(c.parent(), (QTabBar, QScrollBar)):
            continue
        owner = c.parent()
        if isinstance(c, QLineEdit) and isinstance(owner, (QAbstractSpinBox, QComboBox)):
            continue  # the box's own field: the box has the tooltip
        if not c.toolTip():
            text = c.currentText() if isinstance(c, QComboBox) else getattr(c, "text", lambda: "")()
            bad.append(f"{type(c).__name__} {text!r} in {type(owner).__name__}")
    return bad


def test_every_control_in_every_view_says_what_it_does(qtbot, settings):
    """Before: the Lanes view's reference field had only a placeholder, no tooltip (a
    placeholder disappears as soon as one types)."""
    w = shown_window(qtbot, settings)
    bad = set()
    for t in (w.speech_tab, w.ocr_tab, w.translation_tab):
        w.tabs.setCurrentWidget(t)
        it = t.inspector_tabs
        for i in range(it.count()):
            if it.isTabVisible(i):
                it.setCurrentIndex(i)
                qtbot.wait(10)
                bad.update(f"{t.title}/{it.tabText(i)}: {x}" for x in _untipped_controls(w))
    assert sorted(bad) == []


def test_the_heatmaps_note_shows_whole_where_there_is_room(qtbot, settings):
    """The note above each tab's heatmap, cut with "…" only when narrow (since the Live fix
    above): squeezed once (a tab laid out while hidden), it stayed cut at "eac…" in the OCR tab
    at 1280x800 while a plain label's size hint was its elided text."""
    w = shown_window(qtbot, settings)
    for t in (w.ocr_tab, w.translation_tab):  # a note set while the tab is hidden (a model load)
        t.heatmap.set_view(None, None, note="alignment heads' mean · each row normalised to its max")
    for t in (w.speech_tab, w.ocr_tab, w.translation_tab):
        w.tabs.setCurrentWidget(t)
        t.inspector_tabs.setCurrentWidget(t.heatmap)
        qtbot.wait(20)
        info = t.heatmap.info
        assert info.shown_text() == info.text(), (t.title, info.shown_text())
    w.resize(700, 800)  # squeezed, then room again
    qtbot.wait(20)
    w.resize(1280, 800)
    qtbot.wait(20)
    info = w.translation_tab.heatmap.info
    assert info.shown_text() == info.text(), info.shown_text()


def test_a_popup_button_with_its_own_arrow_draws_one_arrow(qtbot):
    """Before: "long-form ▾" showed the text's arrow and the style's menu arrow beside it."""
    from PySide6.QtWidgets import QLabel

    from gui.widgets.popup_button import popup_button

    own = popup_button("long-form ▾", "settings", QLabel("x"))
    plain = popup_button("alignment heads", "heads", QLabel("y"))
    for b in (own, plain):
        qtbot.addWidget(b)
        b.show()
    assert "menu-indicator" in own.styleSheet() and "menu-indicator" not in plain.styleSheet()
    assert own.sizeHint().width() < plain.sizeHint().width() + 40  # no room kept for a second arrow


def test_the_lens_placeholder_has_no_scroll_bar_over_nothing(qtbot):
    """Before: with Capture off, a run's steps (without lens rows) gave the Logit lens's
    placeholder ("Tick “Capture” …") a horizontal scroll bar over 24 empty columns."""
    from gui.widgets.logit_lens import LogitLensView

    from .fakes import make_step

    view = LogitLensView()
    qtbot.addWidget(view)
    view.resize(700, 250)
    view.show()
    view.append_steps([make_step(i, f" w{i}") for i in range(40)])  # no lens rows
    qtbot.wait(20)
    assert view.layer_count() == 0
    assert view.grid.horizontalScrollBar().maximum() == 0


def test_a_long_status_message_is_cut_with_an_ellipsis_to_its_room(qtbot, settings):
    """Before: the live summary was clipped mid-word behind the busy bar at 1280x800 ("… · 0 o"),
    as only messages over 90 characters were shortened, whatever the room."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.statsChanged.emit({"model": "whisper-tiny.en", "dtype": "float32", "device": "CPU", "encode_ms": 671.0,
                           "ms_per_token": 29.2, "tokens_per_s": 34.2, "rtf": 0.18, "n_tokens": 24})
    tab.busyChanged.emit(True, "Decoding…")  # the busy bar and its label take room
    msg = ("Live: 23 words committed · RTF 0.28 · latency mean 1.19 s / p90 1.56 s · 0 of 1 tentative tokens "
           "revised")[:89]
    tab.statusMessage.emit(msg)
    qtbot.wait(20)
    bar = w.statusBar()
    room = min(x.geometry().left() for x in (w.busy_bar, w.busy_label, w.stats_label) if x.isVisible())
    shown = bar.currentMessage()
    assert bar.fontMetrics().horizontalAdvance(shown) <= room, (shown, room)
    assert shown.endswith("…") and msg.startswith(shown[:-1]) and bar.toolTip() == msg
    # the statistics grow while it shows (blank at a live session's end, then the decode's): cut again
    tab.statsChanged.emit({"model": "whisper-tiny.en", "dtype": "float32", "device": "CPU", "live": True,
                           "encode_ms": None, "ms_per_token": None, "tokens_per_s": None, "rtf": None,
                           "n_tokens": 0})
    tab.statusMessage.emit(msg)
    qtbot.wait(20)
    tab.statsChanged.emit({"model": "whisper-tiny.en", "dtype": "float32", "device": "CPU", "live": True,
                           "encode_ms": None, "ms_per_token": 19.8, "tokens_per_s": 50.6, "rtf": None,
                           "n_tokens": 11})
    qtbot.wait(20)
    room = min(x.geometry().left() for x in (w.busy_bar, w.busy_label, w.stats_label) if x.isVisible())
    shown = bar.currentMessage()
    assert bar.fontMetrics().horizontalAdvance(shown) <= room, (shown, room)
    tab.busyChanged.emit(False, "")


def test_a_clicked_beam_nodes_figures_are_not_cut(qtbot, settings):
    """Before: the clicked node's line ("step 3 · alive · row 0 · p 0.933 · log p -0.069 · score
    -0.833 · normalised … · best: the output") was one unwrapped line cut at the pane's edge,
    even at 1920x1080: "normalised" and "best: the output" were not seen."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = FakeSpeechModel()
    tab.options_panel.setOptions(DecodingOptions(strategy="beam", num_beams=3))
    decoded(qtbot, tab, TONE)
    tree = tab.beam_tree
    tab.inspector_tabs.setCurrentWidget(tree)
    tab.select_step(2)
    qtbot.wait(50)
    label = tree.info_label
    assert "normalised" in label.text()
    need = label.heightForWidth(label.width()) if label.wordWrap() else label.fontMetrics().horizontalAdvance(label.text())
    if label.wordWrap():
        assert label.height() >= need - 2, (label.height(), need)
    else:
        assert need <= label.width(), (need, label.width())
    assert w.height() <= 800 and w.minimumSizeHint().height() <= 800
    tab.shutdown()
