"""Long-form transcription in the Speech tab (issue 14 §3; gui/tabs/longform.py): the
windows choice, attempts taken back from the views, the Attempts view and its compare pane,
the window marks, File → Export, settings, forks refused. Fakes (tests/gui/fakes_longform.py)
and one real tiny.en run."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, Qt

from gui.tabs import longform as longform_module
from gui.tabs.speech import SpeechTab

from .fakes_longform import KEPT, LOOP, SILENT, TEXT, FakeLongFormModel
from .tab_helpers import TONE, decoded, speech_tab


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeLongFormModel())


def _longform(tab) -> None:
    tab.longform_panel.mode_combo.setCurrentIndex(1)  # long-form


def test_failed_attempts_are_taken_back_and_listed(qtbot, tab):
    _longform(tab)
    decoded(qtbot, tab)
    assert len(tab.model.transcribe_calls) == 1 and tab.model.decode_calls == 0
    # only the kept attempt's tokens stay: the loop (window 0, T=0) and the silent window went
    assert [ev.text for ev in tab.run.steps()] == KEPT
    assert tab.stream.token_count() == len(KEPT) == tab.heatmap.row_count() == tab.strip.point_count()
    assert tab.stream.text() == TEXT
    assert [lab for lab in tab.stream.segment_labels() if "seek" in lab] == ["0.00–30.00 s · seek 0",
                                                                             "30.00–32.00 s · seek 3000"]
    view = tab.attempts_view
    assert [a.attempt for a in view.attempts()] == [0, 1, 0] and view.table.rowCount() == 3
    assert [view.row_kind(r) for r in range(3)] == ["repetition", "accepted", "silence"]
    assert [view.table.item(r, 7).text() for r in range(3)] == [
        "repetition loop → redone", "accepted", "skipped: silence"]
    assert view.table.item(0, 2).text() == "0" and view.table.item(1, 2).text() == "0.2"
    assert view.table.item(0, 3).text() == "3.10" and view.table.item(2, 5).text() == "0.90"
    assert view.table.item(0, 0).background().color().name() != view.table.item(1, 0).background().color().name()
    assert tab.inspector_tabs.isTabVisible(tab.inspector_tabs.indexOf(view))
    assert tab.inspector_tabs.tabText(tab.inspector_tabs.indexOf(view)) == "Attempts ⚠2"
    marks = tab.window_marks.marks()
    assert marks[0][:2] == ("repetition", "repetition → T=0.2") and marks[0][2:] == (0.0, 30.0)
    assert marks[1][:2] == ("silence", "silence — skipped")
    assert len(tab.window_marks._items) == 2 * 2 * 2  # 2 windows x (span + label) x 2 plots


def test_clicking_a_failed_attempt_shows_it_beside_its_replacement(qtbot, tab):
    _longform(tab)
    decoded(qtbot, tab)
    tab.show_attempts()
    view = tab.attempts_view
    opened = []
    view.attemptOpened.connect(lambda w, a: opened.append((w, a)))
    rect = view.table.visualItemRect(view.table.item(0, 0))
    qtbot.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert opened == [(0, 0)]
    assert view.shown_pair() == (LOOP, KEPT)
    assert "#0" in view.compare_title.text() and "#1" in view.compare_title.text()
    view.open_row(2)  # the silent window: nothing replaced it
    assert view.shown_pair() == (SILENT, []) and "silence" in view.compare_title.text()


def test_export_writes_the_kept_segments(qtbot, tab, tmp_path, monkeypatch):
    _longform(tab)
    decoded(qtbot, tab)
    path = tmp_path / "talk.srt"
    monkeypatch.setattr(longform_module, "ask_export_path", lambda parent, suggested: str(path))
    assert tab.export_transcript()
    assert path.read_text(encoding="utf-8") == (
        "1\n00:00:00,000 --> 00:00:02,000\nThe quick brown fox\n\n"
        "2\n00:00:02,000 --> 00:00:04,500\njumps over the lazy dog.\n\n")
    assert tab.export_transcript(str(tmp_path / "talk.txt"))
    assert (tmp_path / "talk.txt").read_text() == "The quick brown fox\njumps over the lazy dog.\n"
    assert not tab.export_transcript(str(tmp_path / "talk.doc")) and ".srt" in tab.errors[-1]


def test_export_of_a_plain_run_says_what_to_do(qtbot, tab, tmp_path):
    assert not tab.export_transcript(str(tmp_path / "x.srt"))
    assert tab.errors[-1].startswith("Nothing to export yet")
    tab.longform_panel.mode_combo.setCurrentIndex(2)  # fixed 30 s: a plain decode, no times
    decoded(qtbot, tab)
    assert tab.model.decode_calls == 1 and not tab.model.transcribe_calls
    # issue 19 §5: timed by its 30 s window (tests/gui/test_issue19_export.py)
    assert tab.export_transcript(str(tmp_path / "x.srt")) and (tmp_path / "x.srt").exists()
    assert not tab.inspector_tabs.isTabVisible(tab.inspector_tabs.indexOf(tab.attempts_view))


def test_auto_is_long_form_only_over_30_s(qtbot, tab):
    assert tab.longform_panel.mode() == "auto"
    decoded(qtbot, tab)  # 1 s: plain windows
    assert tab.model.decode_calls == 1 and not tab.model.transcribe_calls
    import numpy as np

    decoded(qtbot, tab, audio=np.tile(TONE, 31), name="long tone")
    assert len(tab.model.transcribe_calls) == 1


def test_settings_persist_and_reach_transcribe(qtbot, tab, settings):
    panel = tab.longform_panel
    _longform(tab)
    panel.condition_check.setChecked(False)
    panel.prompt_edit.setText("Glossary: Whisper.")
    panel.temperatures_edit.setText("0, 0.5")
    panel.threshold_checks["entropy_threshold"].setChecked(False)
    panel.threshold_spins["logprob_threshold"].setValue(-0.5)
    decoded(qtbot, tab)
    lf = tab.model.transcribe_calls[-1]
    assert (lf.condition_on_previous_text, lf.initial_prompt, lf.temperatures) == (False, "Glossary: Whisper.",
                                                                                  (0.0, 0.5))
    assert lf.entropy_threshold is None and lf.logprob_threshold == -0.5 and lf.compression_ratio_threshold == 2.4
    assert lf.silence_db == -50.0
    tab.save_settings(settings)
    settings.sync()
    other = SpeechTab()
    qtbot.addWidget(other)
    other.restore_settings(QSettings(settings.fileName(), QSettings.Format.IniFormat))
    assert other.longform_panel.settings() == panel.settings()
    assert other.longform_panel.mode() == "long-form" and other.longform_panel.options() == lf
    other.shutdown()


def test_bad_temperatures_are_one_line_in_the_banner(qtbot, tab):
    _longform(tab)
    tab.longform_panel.temperatures_edit.setText("0, hot")
    tab.set_audio(TONE, "tone")
    qtbot.waitUntil(lambda: bool(tab.errors), timeout=5000)
    assert "'hot' is not a number" in tab.errors[-1] and "\n" not in tab.errors[-1]


def test_forks_go_back_to_the_long_form_windows_and_lanes_are_refused(qtbot, tab):
    _longform(tab)
    decoded(qtbot, tab)
    assert tab.fork(2, [tab.model.backend.tokenize(" cat")[0]], " cat")
    qtbot.waitUntil(lambda: len(tab.run.branches()) == 2 and tab.run.branch(1).finished is not None, timeout=5000)
    assert tab.model.fork_longform == [True]  # SpeechModel.fork(longform=True): the run's seek and prompts
    with pytest.raises(RuntimeError, match="Lanes decode fixed 30 s windows"):
        tab.lanes_fn([])


def test_file_export_reaches_the_speech_tab_only(qtbot, settings, monkeypatch):
    from gui.main_window import MainWindow

    win = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(win)
    calls = []
    monkeypatch.setattr(win.speech_tab, "export_transcript", lambda path=None: calls.append(path) or True)
    assert win.export_action in win.menuBar().actions()[0].menu().actions()
    win.tabs.setCurrentWidget(win.speech_tab)
    win.export_action.trigger()
    assert calls == [None]
    win.tabs.setCurrentWidget(win.ocr_tab)
    assert not win.export_transcript() and calls == [None]
    assert "Speech tab" in win.statusBar().currentMessage()


@pytest.mark.e2e
def test_real_tiny_en_long_form_equals_transcribe(qtbot, whisper_tiny_en):
    """A > 30 s clip (the bundled sample three times) decoded long-form in the tab ends with
    the text SpeechModel.transcribe gives."""
    import numpy as np

    from core.inputs.audio import open_audio
    from core.events import Finished
    from core.options import DecodingOptions
    from core.tasks.longform import LongFormOptions
    from gui.tabs.speech import first_sample

    audio = open_audio(first_sample()).audio
    clip = np.concatenate([audio] * max(2, int(np.ceil(31 * 16000 / len(audio)))))[: 31 * 16000]  # > 30 s is enough
    t = SpeechTab()
    qtbot.addWidget(t)
    t.model = whisper_tiny_en
    with qtbot.waitSignal(t.decodeFinished, timeout=600_000) as blocker:
        t.set_audio(clip, "sample x3")
    qtbot.waitUntil(lambda: not t.is_decoding(), timeout=600_000)
    fin = blocker.args[0]
    want = next(ev for ev in whisper_tiny_en.transcribe(clip, t.options_panel.options(), LongFormOptions(),
                                                         language="en") if isinstance(ev, Finished))
    assert t.long_form.is_run and fin.text == want.text and fin.text
    assert t.attempts_view.table.rowCount() >= 2  # at least two windows
    kept = sum(a.kept_tokens if a.kept_in_transcript else 0 for a in t.attempts_view.attempts())
    assert kept <= len(t.run.steps())
    assert isinstance(t.options_panel.options(), DecodingOptions)
    t.shutdown()


def test_word_timing_aligns_the_transcript_without_each_window_tail(qtbot, tab):
    import dataclasses

    _longform(tab)
    decoded(qtbot, tab)
    steps = list(tab.run.steps())
    i = next(k for k, a in enumerate(tab.long_form.attempts) if a.kept_in_transcript)
    accepted = tab.long_form.attempts[i]
    assert tab.alignment_input(steps)[0] == steps  # the whole window is in the transcript
    tab.long_form.attempts[i] = dataclasses.replace(accepted, kept_tokens=8)  # the last 3 tokens: a tail decoded again
    kept, rows = tab.alignment_input(steps)
    assert [ev.step for ev in kept] == [ev.step for ev in steps][:8]
    assert rows[0] is accepted.steps[8].cross_attention  # the end row: the query after the last kept token


def test_progress_counts_seconds_of_a_long_form_run(qtbot, tab):
    _longform(tab)
    seen = []
    tab.progressChanged.connect(lambda done, total: seen.append((done, total)))
    messages = []
    tab.busyChanged.connect(lambda busy, message: messages.append(message))
    decoded(qtbot, tab)
    total = int(len(tab.audio) / 16000)
    assert seen[:2] == [(0, max(1, total)), (30, max(1, total))]  # window 1 at 0 s, window 2 at its seek (30 s)
    assert any(m.startswith("Decoding window 2 (30 of") for m in messages)
