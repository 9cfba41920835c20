"""Transcripts and subtitles from a transcription result: txt, vtt, srt, tsv, json.

Follows openai/whisper ``whisper/utils.py`` (``format_timestamp``, ``WriteTXT``,
``WriteVTT``, ``WriteSRT``, ``WriteTSV``, ``WriteJSON``, ``get_writer`` and the word-level
cue logic of ``SubtitlesWriter.iterate_result``), and the option checks of whisper's CLI
(``whisper/transcribe.py::cli``). The text written is byte for byte what whisper writes
for the same result; ``tests/core/test_output_writers.py`` holds the expected strings.

The input is the dict openai/whisper ``transcribe()`` returns (and ``core/longform.py``)::

    {"text": str, "language": str,
     "segments": [{"id", "seek", "start": float s, "end": float s, "text": str, "tokens", ...,
                   "words": [{"word": str, "start": float s, "end": float s, "probability"}]}]}

``"words"`` is present only with word timestamps. Torch-free and Qt-free: the CLI writes
files with :func:`write_result`, the window's File → Export uses :func:`render`.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

FORMATS = ("txt", "vtt", "srt", "tsv", "json")

Cue = tuple[str, str, str]  # (start, end, text) with the times already formatted


def format_timestamp(seconds: float, always_include_hours: bool = False, decimal_marker: str = ".") -> str:
    """``[HH:]MM:SS.mmm`` for a time in seconds, rounded to the millisecond (Python's
    ``round``, so halves go to even). Hours appear when asked or when non-zero.

    As openai/whisper ``utils.format_timestamp``. Raises ``ValueError`` for a negative time.
    """
    if seconds < 0:
        raise ValueError(f"timestamp {seconds} s is negative; times must be >= 0 seconds")
    ms = round(seconds * 1000.0)
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1_000)
    hours_marker = f"{hours:02d}:" if always_include_hours or hours > 0 else ""
    return f"{hours_marker}{minutes:02d}:{secs:02d}{decimal_marker}{ms:03d}"


def has_words(result: dict) -> bool:
    """Whether the result carries word timings (whisper tests the first segment)."""
    segments = result.get("segments") or []
    return len(segments) > 0 and "words" in segments[0]


def _words(segment: dict) -> list[dict]:
    return segment.get("words") or []


def _first_word_start(segments: list[dict]) -> float | None:
    """The first word's start, else the first segment's (whisper ``utils.get_start``)."""
    default = segments[0]["start"] if segments else None
    return next((w["start"] for s in segments for w in _words(s)), default)


def word_subtitles(segments: list[dict], *, max_line_width: int | None = None,
                   max_line_count: int | None = None,
                   max_words_per_line: int | None = None) -> Iterator[list[dict]]:
    """Group word timings into subtitles: each a list of word dicts (copies) whose
    ``"word"`` texts joined give the cue text, ``"\\n"`` marking a line break.

    The inner ``iterate_subtitles`` of openai/whisper ``SubtitlesWriter.iterate_result``:
    segments are kept as cues unless both ``max_line_width`` and ``max_line_count`` are
    given; a line breaks when the next word would pass ``max_line_width`` characters; a
    cue breaks after ``max_line_count`` lines or before a pause > 3 s (only when segments
    are not kept); with segments kept, every ``max_words_per_line`` words start a new cue.
    """
    preserve_segments = max_line_count is None or max_line_width is None
    width = max_line_width or 1000
    per_line = max_words_per_line or 1000
    line_len = 0
    line_count = 1
    subtitle: list[dict] = []
    last = _first_word_start(segments) or 0.0
    for segment in segments:
        words = _words(segment)
        for chunk_start in range(0, len(words), per_line):
            for i, original in enumerate(words[chunk_start:chunk_start + per_line]):
                timing = dict(original)
                long_pause = not preserve_segments and timing["start"] - last > 3.0
                has_room = line_len + len(timing["word"]) <= width
                seg_break = i == 0 and len(subtitle) > 0 and preserve_segments
                if line_len > 0 and has_room and not long_pause and not seg_break:
                    line_len += len(timing["word"])  # the line goes on
                else:
                    timing["word"] = timing["word"].strip()  # a new line starts
                    cue_full = len(subtitle) > 0 and max_line_count is not None and (
                        long_pause or line_count >= max_line_count)
                    if cue_full or seg_break:  # a new cue starts
                        yield subtitle
                        subtitle = []
                        line_count = 1
                    elif line_len > 0:  # a new line in the same cue
                        line_count += 1
                        timing["word"] = "\n" + timing["word"]
                    line_len = len(timing["word"].strip())
                subtitle.append(timing)
                last = timing["start"]
    if subtitle:
        yield subtitle


def _underline(words: list[str], i: int) -> str:
    """The cue text with word ``i`` wrapped in ``<u>…</u>`` after its leading whitespace."""
    return "".join(re.sub(r"^(\s*)(.*)$", r"\1<u>\2</u>", w) if j == i else w for j, w in enumerate(words))


def subtitle_cues(result: dict, *, always_include_hours: bool = False, decimal_marker: str = ".",
                  use_words: bool | None = None, highlight_words: bool = False,
                  max_line_width: int | None = None, max_line_count: int | None = None,
                  max_words_per_line: int | None = None) -> Iterator[Cue]:
    """The ``(start, end, text)`` cues of a vtt/srt file, times formatted.

    As openai/whisper ``SubtitlesWriter.iterate_result``: with word timings, cues come from
    :func:`word_subtitles`; ``highlight_words`` then gives one cue per word with that word
    underlined, plus a plain cue filling any gap between words. Without word timings (or
    with ``use_words=False``) one cue per segment, ``-->`` in its text written ``->``.
    ``use_words=None`` uses words when the result has them, as whisper's writers do.
    """
    def stamp(seconds: float) -> str:
        return format_timestamp(seconds, always_include_hours, decimal_marker)

    segments = result["segments"]
    if use_words is None:
        use_words = has_words(result)
    if not use_words:
        for segment in segments:
            yield stamp(segment["start"]), stamp(segment["end"]), segment["text"].strip().replace("-->", "->")
        return
    for subtitle in word_subtitles(segments, max_line_width=max_line_width, max_line_count=max_line_count,
                                   max_words_per_line=max_words_per_line):
        start, end = stamp(subtitle[0]["start"]), stamp(subtitle[-1]["end"])
        text = "".join(w["word"] for w in subtitle)
        if not highlight_words:
            yield start, end, text
            continue
        last = start
        texts = [w["word"] for w in subtitle]
        for i, word in enumerate(subtitle):
            word_start, word_end = stamp(word["start"]), stamp(word["end"])
            if last != word_start:
                yield last, word_start, text
            yield word_start, word_end, _underline(texts, i)
            last = word_end


def to_txt(result: dict, **_options) -> str:
    """One line per segment, its text stripped (whisper ``WriteTXT``)."""
    return "".join(segment["text"].strip() + "\n" for segment in result["segments"])


def to_vtt(result: dict, **cue_options) -> str:
    """WebVTT: a ``WEBVTT`` header, then ``MM:SS.mmm --> MM:SS.mmm`` cues (whisper ``WriteVTT``)."""
    cues = subtitle_cues(result, always_include_hours=False, decimal_marker=".", **cue_options)
    return "WEBVTT\n\n" + "".join(f"{start} --> {end}\n{text}\n\n" for start, end, text in cues)


def to_srt(result: dict, **cue_options) -> str:
    """SubRip: numbered cues from 1, ``HH:MM:SS,mmm`` times (whisper ``WriteSRT``)."""
    cues = subtitle_cues(result, always_include_hours=True, decimal_marker=",", **cue_options)
    return "".join(f"{i}\n{start} --> {end}\n{text}\n\n" for i, (start, end, text) in enumerate(cues, start=1))


def to_tsv(result: dict, **_options) -> str:
    """``start<TAB>end<TAB>text`` with integer milliseconds, one row per segment, tabs in
    the text made spaces (whisper ``WriteTSV``)."""
    rows = ["start\tend\ttext\n"]
    for segment in result["segments"]:
        text = segment["text"].strip().replace("\t", " ")
        rows.append(f"{round(1000 * segment['start'])}\t{round(1000 * segment['end'])}\t{text}\n")
    return "".join(rows)


def to_json(result: dict, **_options) -> str:
    """The result itself as JSON, ASCII-escaped, no trailing newline (whisper ``WriteJSON``)."""
    return json.dumps(result)


def window_result(windows: Sequence[tuple[float, float, str]], language: str, *,
                  words: Sequence[Sequence[dict]] | None = None) -> dict:
    """The ``transcribe()``-style result of a run decoded without timestamp tokens (plain 30 s
    windows): one segment per window that has text, timed by the window's bounds, or by its
    words when ``words`` is given (the first word's start to the last word's end; the
    words go in the segment's ``"words"``, so subtitles follow them).

    Args:
        windows: per window ``(start s, end s, text)``, in order; the end is the window's
            end or the audio's, whichever is first.
        language: the language code the run decoded in.
        words: per window, its word dicts (``"word"``, ``"start"``, ``"end"`` in seconds,
            ``"probability"``), as openai/whisper's ``"words"``; one list per window.

    Raises:
        ValueError: a window that ends before it starts, or ``words`` for another number of
            windows.
    """
    if words is not None and len(words) != len(windows):
        raise ValueError(f"words for {len(words)} windows but {len(windows)} windows; give one word list per window")
    segments = []
    for i, (start, end, text) in enumerate(windows):
        if end < start:
            raise ValueError(f"window {i} ({start:.3f}–{end:.3f} s) ends before it starts")
        if not text.strip():
            continue
        segment = {"id": len(segments), "seek": round(start * 100), "start": float(start), "end": float(end),
                   "text": text if text.startswith(" ") else " " + text, "tokens": []}
        if words is not None:
            timed = [dict(w) for w in words[i]]
            if timed:
                segment["start"], segment["end"] = float(timed[0]["start"]), float(timed[-1]["end"])
            segment["words"] = timed
        segments.append(segment)
    return {"text": " ".join(s["text"].strip() for s in segments), "segments": segments, "language": language}


_RENDERERS: dict[str, Callable[..., str]] = {"txt": to_txt, "vtt": to_vtt, "srt": to_srt,
                                             "tsv": to_tsv, "json": to_json}
_WORD_OPTIONS = ("highlight_words", "max_line_count", "max_line_width", "max_words_per_line")


def check_options(*, word_timestamps: bool, highlight_words: bool = False, max_line_width: int | None = None,
                  max_line_count: int | None = None, max_words_per_line: int | None = None) -> None:
    """Reject what whisper's CLI rejects, warn where it warns (``whisper/transcribe.py::cli``).

    Raises ``ValueError`` when a word option is set without word timestamps, or a count is
    below 1. Warns (``UserWarning``) that ``max_line_count`` does nothing without
    ``max_line_width`` and ``max_words_per_line`` nothing with it.
    """
    values = {"highlight_words": highlight_words, "max_line_count": max_line_count,
              "max_line_width": max_line_width, "max_words_per_line": max_words_per_line}
    for name in _WORD_OPTIONS[1:]:
        value = values[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a whole number >= 1 (or None), got {value!r}")
    if not word_timestamps:
        for name in _WORD_OPTIONS:
            if values[name]:
                raise ValueError(f"{name} needs word timestamps; transcribe with word timestamps or drop {name}")
    if max_line_count and not max_line_width:
        warnings.warn("max_line_count has no effect without max_line_width", stacklevel=3)
    if max_words_per_line and max_line_width:
        warnings.warn("max_words_per_line has no effect with max_line_width", stacklevel=3)


def _check_result(result: dict) -> None:
    if not isinstance(result, dict):
        raise TypeError(f"result is a {type(result).__name__}, not a dict; pass the dict transcribe() returns")
    if "segments" not in result:
        raise ValueError("result has no 'segments'; pass the dict transcribe() returns")


def render(result: dict, fmt: str, *, word_timestamps: bool | None = None, highlight_words: bool = False,
           max_line_width: int | None = None, max_line_count: int | None = None,
           max_words_per_line: int | None = None) -> str:
    """One format's text (``fmt`` in :data:`FORMATS`) without writing a file.

    ``word_timestamps=None`` means: use word cues when the result has words (whisper's
    writers). ``False`` gives segment cues even if words are present; ``True`` needs them.
    Raises ``ValueError`` for an unknown format, a malformed result or a rejected option mix.
    """
    if fmt not in _RENDERERS:
        raise ValueError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
    _check_result(result)
    if word_timestamps is None:
        word_timestamps = has_words(result)
    elif word_timestamps and result["segments"] and not has_words(result):
        raise ValueError("word_timestamps is on but the result's segments have no 'words'; "
                         "transcribe with word timestamps")
    check_options(word_timestamps=word_timestamps, highlight_words=highlight_words, max_line_width=max_line_width,
                  max_line_count=max_line_count, max_words_per_line=max_words_per_line)
    return _RENDERERS[fmt](result, use_words=word_timestamps, highlight_words=highlight_words,
                           max_line_width=max_line_width, max_line_count=max_line_count,
                           max_words_per_line=max_words_per_line)


def write_result(result: dict, audio_path: str, output_dir: str, output_format: str, *,
                 word_timestamps: bool = False, highlight_words: bool = False,
                 max_line_width: int | None = None, max_line_count: int | None = None,
                 max_words_per_line: int | None = None) -> list[Path]:
    """Write ``<audio stem>.<ext>`` in ``output_dir`` (created if missing) for one format,
    or all five for ``"all"``; UTF-8, ``\\n`` line ends. Returns the paths written.

    As openai/whisper ``get_writer(output_format, output_dir)(result, audio_path, ...)``.
    ``word_timestamps`` is the transcription's flag: off, subtitles are one cue per segment
    and the word options are refused, as in whisper's CLI. Raises ``ValueError`` for an
    unknown format or a rejected option mix (nothing is written then).
    """
    if output_format != "all" and output_format not in FORMATS:
        raise ValueError(f"unknown output format {output_format!r}; use one of {', '.join(FORMATS)} or all")
    formats = FORMATS if output_format == "all" else (output_format,)
    options = {"word_timestamps": word_timestamps, "highlight_words": highlight_words,
               "max_line_width": max_line_width, "max_line_count": max_line_count,
               "max_words_per_line": max_words_per_line}
    texts = {fmt: render(result, fmt, **options) for fmt in formats}  # all checks before any file
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(audio_path).stem
    paths = []
    for fmt, text in texts.items():
        path = out / f"{stem}.{fmt}"
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        paths.append(path)
    return paths


def get_writer(output_format: str, output_dir: str) -> Callable[..., list[Path]]:
    """A callable ``(result, audio_path, **options) -> list[Path]`` writing that format
    (or ``"all"``) into ``output_dir``, as openai/whisper ``utils.get_writer``."""
    if output_format != "all" and output_format not in FORMATS:
        raise ValueError(f"unknown output format {output_format!r}; use one of {', '.join(FORMATS)} or all")

    def write(result: dict, audio_path: str, **options) -> list[Path]:
        return write_result(result, audio_path, output_dir, output_format, **options)

    return write
