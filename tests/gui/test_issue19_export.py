"""File → Export of a plain (no timestamps) speech run (issue 19 §5): txt needs no times;
srt/vtt/tsv/json use each 30 s window's bounds, or the word timing when it is on
(``core.tasks.writers.window_result``). Fakes, no model."""

from __future__ import annotations

import json

import pytest

from core.tasks.writers import render, window_result

from .fakes_longform import FakeLongFormModel
from .fakes_words import FakeWordModel
from .tab_helpers import decoded, speech_tab

TEXT = "The quick brown fox jumps over the lazy dog."


class _WordModel(FakeWordModel):
    """The word-timing fake with no timestamp segments (a plain decode)."""

    def segments(self, events):
        return []


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, FakeLongFormModel())


@pytest.fixture
def word_tab(qtbot):
    yield from speech_tab(qtbot, _WordModel())


def test_a_plain_run_exports_every_format(qtbot, tab, tmp_path):
    tab.longform_panel.mode_combo.setCurrentIndex(2)  # fixed 30 s: no timestamp tokens
    decoded(qtbot, tab)
    for fmt in ("txt", "srt", "vtt", "tsv", "json"):
        assert tab.export_transcript(str(tmp_path / f"x.{fmt}")), (fmt, tab.errors[-1:])
    assert (tmp_path / "x.txt").read_text() == TEXT + "\n"
    # the one 30 s window, cut at the end of the 1 s clip
    assert (tmp_path / "x.srt").read_text() == f"1\n00:00:00,000 --> 00:00:01,000\n{TEXT}\n\n"
    assert (tmp_path / "x.vtt").read_text() == f"WEBVTT\n\n00:00.000 --> 00:01.000\n{TEXT}\n\n"
    assert (tmp_path / "x.tsv").read_text() == f"start\tend\ttext\n0\t1000\t{TEXT}\n"
    result = json.loads((tmp_path / "x.json").read_text())
    assert result["text"] == TEXT and [(s["start"], s["end"]) for s in result["segments"]] == [(0.0, 1.0)]
    assert any("Exported 1 segment" in m for m in tab.messages)


def test_with_word_timing_the_cues_follow_the_words(qtbot, word_tab, tmp_path):
    tab = word_tab
    tab.word_timing_check.setChecked(True)
    decoded(qtbot, tab)
    qtbot.waitUntil(lambda: not tab.word_timing.busy() and tab.word_timing.final, timeout=5000)
    words = tab.word_timing.alignment.words
    assert len(words) == 9
    assert tab.export_transcript(str(tmp_path / "w.json"))
    seg, = json.loads((tmp_path / "w.json").read_text())["segments"]
    assert [w["word"] for w in seg["words"]] == [w.word for w in words]
    assert seg["start"] == pytest.approx(words[0].start, abs=1e-3)
    assert seg["end"] == pytest.approx(words[-1].end, abs=1e-3)
    assert tab.export_transcript(str(tmp_path / "w.srt"))
    first = (tmp_path / "w.srt").read_text().splitlines()[1]
    assert first != "00:00:00,000 --> 00:00:01,000" and first.startswith("00:00:00,")


def test_window_result_one_segment_per_window():
    result = window_result([(0.0, 30.0, " Hello there."), (30.0, 41.5, " General Kenobi.")], "en")
    assert result["text"] == "Hello there. General Kenobi."
    assert render(result, "srt") == ("1\n00:00:00,000 --> 00:00:30,000\nHello there.\n\n"
                                     "2\n00:00:30,000 --> 00:00:41,500\nGeneral Kenobi.\n\n")
    assert render(result, "txt") == "Hello there.\nGeneral Kenobi.\n"
    words = [[{"word": " Hello", "start": 1.0, "end": 1.4, "probability": 0.9},
              {"word": " there.", "start": 1.4, "end": 2.0, "probability": 0.8}],
             [{"word": " General", "start": 31.0, "end": 31.5, "probability": 0.9},
              {"word": " Kenobi.", "start": 31.5, "end": 32.25, "probability": 0.7}]]
    timed = window_result([(0.0, 30.0, " Hello there."), (30.0, 41.5, " General Kenobi.")], "en", words=words)
    assert [(s["start"], s["end"]) for s in timed["segments"]] == [(1.0, 2.0), (31.0, 32.25)]
    assert render(timed, "vtt") == ("WEBVTT\n\n00:01.000 --> 00:02.000\nHello there.\n\n"
                                    "00:31.000 --> 00:32.250\nGeneral Kenobi.\n\n")


def test_window_result_skips_empty_windows_and_checks_times():
    result = window_result([(0.0, 30.0, ""), (30.0, 35.0, " Hi.")], "en")
    assert [s["text"] for s in result["segments"]] == [" Hi."] and result["segments"][0]["id"] == 0
    with pytest.raises(ValueError, match="window 0 .*ends before it starts"):
        window_result([(5.0, 1.0, "x")], "en")
    with pytest.raises(ValueError, match="words for 1 windows but 2 windows"):
        window_result([(0.0, 1.0, "a"), (1.0, 2.0, "b")], "en", words=[[]])

