"""core.tasks.writers writes what openai/whisper ``whisper/utils.py`` writes.

Every expected string below was derived by reading whisper's code (the function named in
the comment beside it) for the hand-made result here; no model is loaded.
"""

from __future__ import annotations

import json

import pytest

from core.tasks.writers import (
    FORMATS,
    format_timestamp,
    get_writer,
    render,
    subtitle_cues,
    word_subtitles,
    write_result,
)


def word(text: str, start: float, end: float) -> dict:
    return {"word": text, "start": start, "end": end, "probability": 0.9}


def segment(i: int, start: float, end: float, text: str, words: list[dict] | None) -> dict:
    seg = {"id": i, "seek": 0, "start": start, "end": end, "text": text, "tokens": [50364 + i],
           "temperature": 0.0, "avg_logprob": -0.2, "compression_ratio": 1.1, "no_speech_prob": 0.01}
    if words is not None:
        seg["words"] = words
    return seg


WORDS = [
    [word(" Hello", 0.0, 0.4), word(" world,", 0.5, 0.9), word(" this", 1.0, 1.2), word(" is", 1.2, 1.3),
     word(" a", 1.3, 1.4), word(" test.", 1.5, 2.4)],
    [word(" Second", 3.0, 3.4), word(" -->", 3.4, 3.5), word(" segment", 3.5, 4.0), word(" here.", 4.1, 4.8)],
    [word(" Late", 3725.6, 3725.9), word(" one.", 3726.0, 3726.9)],  # past one hour, > 3 s after "here."
]
SPANS = [(0.0, 2.5, " Hello world, this is a test."), (2.5, 5.0, " Second --> segment\there."),
         (3725.5, 3727.0, " Late one.")]


def make_result(with_words: bool) -> dict:
    segments = [segment(i, s, e, t, WORDS[i] if with_words else None) for i, (s, e, t) in enumerate(SPANS)]
    return {"text": "".join(t for _, _, t in SPANS), "segments": segments, "language": "en"}


PLAIN = make_result(with_words=False)
WITH_WORDS = make_result(with_words=True)


# --- format_timestamp (whisper utils.format_timestamp) ---------------------------------

@pytest.mark.parametrize("seconds, hours, marker, expected", [
    (0.0, False, ".", "00:00.000"),
    (1.5, True, ",", "00:00:01,500"),           # srt style: hours always, comma
    (59.9996, False, ".", "01:00.000"),         # 59999.6 ms rounds up and carries into the minutes
    (1.0005, False, ".", "00:01.000"),          # 1.0005 * 1000 is 1000.4999... in floats: rounds down
    (3661.2346, False, ".", "01:01:01.235"),    # hours shown once non-zero, 2 digits
    (360000.0, False, ".", "100:00:00.000"),    # 100 h: {:02d} does not cut digits
])
def test_format_timestamp(seconds, hours, marker, expected):
    assert format_timestamp(seconds, always_include_hours=hours, decimal_marker=marker) == expected


def test_format_timestamp_rejects_negative():
    with pytest.raises(ValueError, match="negative"):
        format_timestamp(-0.001)


# --- segment-level files (WriteTXT, WriteVTT, WriteSRT, WriteTSV, WriteJSON) ------------

def test_txt():
    # WriteTXT: print(segment["text"].strip()) per segment; the tab stays.
    assert render(PLAIN, "txt") == "Hello world, this is a test.\nSecond --> segment\there.\nLate one.\n"


def test_vtt_segments():
    # WriteVTT: print("WEBVTT\n") then f"{start} --> {end}\n{text}\n" per cue (print adds "\n");
    # iterate_result without words: text stripped, "-->" written "->"; hours only when non-zero.
    assert render(PLAIN, "vtt") == (
        "WEBVTT\n\n"
        "00:00.000 --> 00:02.500\nHello world, this is a test.\n\n"
        "00:02.500 --> 00:05.000\nSecond -> segment\there.\n\n"
        "01:02:05.500 --> 01:02:07.000\nLate one.\n\n")


def test_srt_segments():
    # WriteSRT: numbered from 1, always_include_hours=True, decimal_marker=",".
    assert render(PLAIN, "srt") == (
        "1\n00:00:00,000 --> 00:00:02,500\nHello world, this is a test.\n\n"
        "2\n00:00:02,500 --> 00:00:05,000\nSecond -> segment\there.\n\n"
        "3\n01:02:05,500 --> 01:02:07,000\nLate one.\n\n")


def test_tsv():
    # WriteTSV: header, round(1000 * t) integer ms, tabs in text -> spaces, "-->" kept.
    assert render(PLAIN, "tsv") == (
        "start\tend\ttext\n"
        "0\t2500\tHello world, this is a test.\n"
        "2500\t5000\tSecond --> segment here.\n"
        "3725500\t3727000\tLate one.\n")


def test_json_round_trip():
    # WriteJSON: json.dump(result) - defaults, so ASCII-escaped and no trailing newline.
    result = dict(WITH_WORDS, text=" café")
    text = render(result, "json")
    assert json.loads(text) == result
    assert "caf\\u00e9" in text and not text.endswith("\n")


# --- word-level cues (SubtitlesWriter.iterate_result) -----------------------------------

def test_words_one_cue_per_segment():
    # No line options: preserve_segments, one cue per segment timed by its first and last
    # word; the text is the words joined (first one stripped), "-->" NOT replaced.
    assert render(WITH_WORDS, "vtt") == (
        "WEBVTT\n\n"
        "00:00.000 --> 00:02.400\nHello world, this is a test.\n\n"
        "00:03.000 --> 00:04.800\nSecond --> segment here.\n\n"
        "01:02:05.600 --> 01:02:06.900\nLate one.\n\n")
    # write_result's word_timestamps=False (whisper's CLI without --word_timestamps): segment cues.
    assert render(WITH_WORDS, "vtt", word_timestamps=False) == render(PLAIN, "vtt")


def test_highlight_words():
    # highlight_words: one cue per word, re.sub(r"^(\s*)(.*)$", r"\1<u>\2</u>") on that word,
    # a plain cue for each gap between words inside a subtitle ("last != start"), none
    # between subtitles (last restarts at each subtitle's start).
    result = {"segments": [
        segment(0, 0.0, 1.5, " Hi there friend.", [word(" Hi", 0.0, 0.3), word(" there", 0.5, 0.9),
                                                   word(" friend.", 0.9, 1.5)]),
        segment(1, 1.5, 2.5, " Bye.", [word(" Bye.", 2.0, 2.5)])]}
    assert render(result, "vtt", highlight_words=True) == (
        "WEBVTT\n\n"
        "00:00.000 --> 00:00.300\n<u>Hi</u> there friend.\n\n"
        "00:00.300 --> 00:00.500\nHi there friend.\n\n"
        "00:00.500 --> 00:00.900\nHi <u>there</u> friend.\n\n"
        "00:00.900 --> 00:01.500\nHi there <u>friend.</u>\n\n"
        "00:02.000 --> 00:02.500\n<u>Bye.</u>\n\n")


def test_highlight_keeps_line_break_outside_tag():
    # "\nthere" is a word starting a line: (\s*) takes the "\n", so the tag opens after it.
    cues = list(subtitle_cues({"segments": [segment(0, 0.0, 1.0, " ab cd", [word(" ab", 0.0, 0.5),
                                                                           word(" cd", 0.5, 1.0)])]},
                              highlight_words=True, max_line_width=3))
    assert cues == [("00:00.000", "00:00.500", "<u>ab</u>\ncd"), ("00:00.500", "00:01.000", "ab\n<u>cd</u>")]


def test_line_width_and_count():
    # Both set: segments are not kept. A line breaks when line_len + len(word) > 20 (the
    # word's leading space counts); a cue breaks at the 3rd line or before a pause > 3 s.
    assert render(WITH_WORDS, "vtt", max_line_width=20, max_line_count=2) == (
        "WEBVTT\n\n"
        "00:00.000 --> 00:03.500\nHello world, this is\na test. Second -->\n\n"
        "00:03.500 --> 00:04.800\nsegment here.\n\n"
        "01:02:05.600 --> 01:02:06.900\nLate one.\n\n")


def test_long_pause_starts_a_cue():
    # long_pause = timing["start"] - last > 3.0 with last = the previous word's START:
    # "two" starts 3.1 s after "one" starts (only 2.9 s after it ends) -> new cue;
    # "three" starts 2.9 s after "two" starts -> same cue, same line (width 100).
    result = {"segments": [segment(0, 0.0, 6.2, " one two three", [
        word(" one", 0.0, 0.2), word(" two", 3.1, 3.3), word(" three", 6.0, 6.2)])]}
    assert render(result, "vtt", max_line_width=100, max_line_count=5) == (
        "WEBVTT\n\n00:00.000 --> 00:00.200\none\n\n00:03.100 --> 00:06.200\ntwo three\n\n")


def test_line_width_alone_wraps_inside_segments():
    # max_line_width without max_line_count: preserve_segments stays on, lines wrap at 12.
    assert render(WITH_WORDS, "srt", max_line_width=12) == (
        "1\n00:00:00,000 --> 00:00:02,400\nHello world,\nthis is a\ntest.\n\n"
        "2\n00:00:03,000 --> 00:00:04,800\nSecond -->\nsegment\nhere.\n\n"
        "3\n01:02:05,600 --> 01:02:06,900\nLate one.\n\n")


def test_max_words_per_line():
    # Chunks of max_words_per_line words: a chunk's first word is a seg_break, so a new cue.
    assert render(WITH_WORDS, "vtt", max_words_per_line=4) == (
        "WEBVTT\n\n"
        "00:00.000 --> 00:01.300\nHello world, this is\n\n"
        "00:01.300 --> 00:02.400\na test.\n\n"
        "00:03.000 --> 00:04.800\nSecond --> segment here.\n\n"
        "01:02:05.600 --> 01:02:06.900\nLate one.\n\n")


def test_word_subtitles_leaves_input_alone():
    before = json.dumps(WITH_WORDS)
    groups = list(word_subtitles(WITH_WORDS["segments"], max_line_width=20, max_line_count=2))
    assert [len(g) for g in groups] == [8, 2, 2]
    assert json.dumps(WITH_WORDS) == before  # words were copied before "\n" / strip


# --- files ------------------------------------------------------------------------------

def test_write_all(tmp_path):
    out = tmp_path / "new" / "dir"
    paths = write_result(WITH_WORDS, "/somewhere/talk.take1.wav", str(out), "all", word_timestamps=True)
    assert [p.name for p in paths] == [f"talk.take1.{ext}" for ext in FORMATS]
    for path, fmt in zip(paths, FORMATS):
        assert path.read_bytes().decode("utf-8") == render(WITH_WORDS, fmt, word_timestamps=True)


def test_write_one_and_get_writer(tmp_path):
    paths = write_result(PLAIN, "clip.flac", str(tmp_path), "srt")
    assert paths == [tmp_path / "clip.srt"] and sorted(tmp_path.iterdir()) == paths
    assert get_writer("tsv", str(tmp_path))(PLAIN, "clip.flac") == [tmp_path / "clip.tsv"]
    assert (tmp_path / "clip.tsv").read_text(encoding="utf-8") == render(PLAIN, "tsv")


# --- errors and warnings (whisper transcribe.py::cli) ------------------------------------

@pytest.mark.parametrize("option", [{"highlight_words": True}, {"max_line_width": 40}, {"max_line_count": 2},
                                    {"max_words_per_line": 5}])
def test_word_options_need_word_timestamps(tmp_path, option):
    # cli(): parser.error(f"--{option} requires --word_timestamps True"); nothing is written.
    with pytest.raises(ValueError, match="needs word timestamps"):
        write_result(WITH_WORDS, "a.wav", str(tmp_path / "out"), "all", **option)
    assert not (tmp_path / "out").exists()


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown output format 'doc'"):
        write_result(PLAIN, "a.wav", str(tmp_path), "doc")
    with pytest.raises(ValueError, match="unknown output format 'all'"):
        render(PLAIN, "all")
    with pytest.raises(ValueError, match="unknown output format"):
        get_writer("xml", str(tmp_path))
    with pytest.raises(ValueError, match="max_line_width must be a whole number"):
        render(WITH_WORDS, "vtt", max_line_width=0)
    with pytest.raises(ValueError, match="no 'words'"):
        write_result(PLAIN, "a.wav", str(tmp_path), "srt", word_timestamps=True)
    with pytest.raises(ValueError, match="no 'segments'"):
        render({"text": "hi"}, "txt")
    assert list(tmp_path.iterdir()) == []


def test_warnings_like_whisper():
    # cli(): warnings.warn for these two, not an error.
    with pytest.warns(UserWarning, match="max_line_count has no effect without max_line_width"):
        render(WITH_WORDS, "vtt", max_line_count=2)
    with pytest.warns(UserWarning, match="max_words_per_line has no effect with max_line_width"):
        render(WITH_WORDS, "vtt", max_words_per_line=2, max_line_width=30)
