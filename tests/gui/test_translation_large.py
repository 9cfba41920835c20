"""The Translation tab with long and odd inputs (issue 19 §3-§5), on the real bundled
Bergamot en-pt model: a 1 MB text on one line is split off the GUI thread and shown as a
bounded preview; text in a script the model cannot read is flagged in the window; Cancel
shows the decoded text, not raw SentencePiece pieces."""

from __future__ import annotations

import threading

import pytest

from gui.tabs.source_text import PREVIEW_CHARS
from tests.helpers.translation_tab import loaded_translation_tab
from tests.core.test_translation_robust import UNREADABLE, one_mb_line

pytestmark = pytest.mark.e2e

SLOW_MS = 120_000


@pytest.fixture
def tab(qtbot):
    yield from loaded_translation_tab(qtbot, (1280, 800))


def test_a_1mb_line_is_split_off_the_gui_thread_and_shown_as_a_preview(qtbot, tab, tmp_path):
    """Was: opening it blocked the GUI thread for 2.5 s (Qt laying out the 1 MB line, then
    splitting and tokenising it three times, then measuring 256k column labels)."""
    text = one_mb_line()
    threads = []
    split = tab.model.reader.split

    def recording(t):
        threads.append(threading.current_thread())
        return split(t)

    tab.model.reader.split = recording
    path = tmp_path / "t1mb_oneline.txt"
    path.write_text(text, encoding="utf-8")
    assert tab.read_file(path)
    shown = tab.text_edit.toPlainText()
    assert len(shown) < PREVIEW_CHARS + 400 and text.startswith(shown.split(" […]")[0])
    assert tab.text() == text and tab.is_preview() and tab.text_edit.isReadOnly()
    qtbot.waitUntil(lambda: tab.stream.token_count() > 0, timeout=SLOW_MS)
    assert threads and all(t is not threading.main_thread() for t in threads)
    info = tab.info_label.text()
    assert "18,429 sentences" in info and "1,000,000 characters" in info and "read-only" in info
    assert tab.errors == []
    tab.cancel()
    qtbot.waitUntil(tab.workers_idle, timeout=SLOW_MS)
    tab.grab().save(str(tmp_path / "translation_1mb.png"))


def test_clear_and_undo_bring_a_long_text_back_whole(qtbot, tab):
    text = one_mb_line()[:300_000]
    tab.set_text(text)
    assert tab.is_preview() and tab.text() == text
    tab.clear_text()
    assert tab.text() == "" and not tab.text_edit.isReadOnly()
    tab.text_edit.undo()
    assert tab.text() == text and tab.text_edit.isReadOnly()
    qtbot.keyClicks(tab.text_edit, "x")  # read-only: typing does not cut the preview into the text
    assert tab.text() == text
    tab.set_text("Good morning.")
    assert tab.text() == "Good morning." and not tab.is_preview() and not tab.text_edit.isReadOnly()


def test_a_short_text_is_not_previewed(tab):
    tab.set_text("Where is the train station? " * 100)
    assert not tab.is_preview() and tab.text_edit.toPlainText() == tab.text()


def test_unreadable_script_is_flagged_in_the_window(qtbot, tab):
    """Was: "-. -. -. -. -, -," and no word about it."""
    with qtbot.waitSignal(tab.decodeFinished, timeout=SLOW_MS) as blocker:
        tab.set_text(UNREADABLE["Arabic"] + " The end.")
    assert blocker.args[0].text == "O fim."
    assert "cannot read Arabic" in tab.info_label.text()
    assert any("cannot read Arabic" in n for n in tab.text_notes())


def test_cancel_shows_the_decoded_text_not_raw_pieces(qtbot, tab):
    """Was: "▁Um▁pequeno▁pássaro…" on the text line after Cancel."""
    text = "A small bird sang in the old tree near the river. " * 40
    tab.set_text(text)
    qtbot.waitUntil(lambda: tab.stream.token_count() >= 12, timeout=SLOW_MS)
    assert tab.cancel()
    fin = tab.run.branch(tab.run.current_branch()).finished
    assert fin is not None and fin.cancelled
    assert "▁" not in fin.text and "▁" not in tab.stream.text()
    assert fin.text.startswith("Um pequeno pássaro"), fin.text


def test_cancel_while_a_long_text_is_split_stops_the_waiting_decode(qtbot, tab):
    tab.set_text(one_mb_line()[:400_000])
    tab._text_timer.stop()
    tab.request_decode()
    assert tab.is_decoding() and tab.is_busy()  # waiting for the worker's split
    assert tab.cancel()
    assert not tab.is_decoding()
    qtbot.waitUntil(lambda: not tab.analysis_pending(), timeout=SLOW_MS)
    qtbot.wait(100)
    assert tab.stream.token_count() == 0 and not tab.is_decoding()  # no decode started after the split
    assert "sentences" in tab.info_label.text()
