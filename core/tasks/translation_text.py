"""The translation task's text preparation (no model here): control characters, sentence
splitting with a hard cap on sentence length, and the parts a model cannot read.

- :func:`clean_text`: every run of control characters becomes one space.
- :func:`split_text`: lines, then sentences at ``. ! ? …`` (not after "Dr.", "Sr." ...), in
  one linear pass (a 480 kB line of abbreviations took 308 s in the old split, which
  re-split the growing sentence at every full stop); a sentence longer than
  :data:`MAX_SENTENCE_CHARS` is cut at its last clause mark (``, ; : )`` ...) or, failing
  that, its last space in the window's second half, else hard at the cap.
- :func:`unreadable_runs`: stretches of text in a script the model has no pieces for
  (Arabic, Hebrew, Chinese, Japanese for the English Bergamot models; characters whose
  pieces are the unknown token), with the punctuation and spaces between them, so the
  task can leave them out and translate the rest.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Callable, Iterable

#: a sentence longer than this many characters is cut at a clause mark or a space (about
#: 100 SentencePiece tokens of English, under bergamot-translator's max-length-break of 128)
MAX_SENTENCE_CHARS = 400
#: characters of the text before a full stop looked at for an abbreviation ("Dr.")
_ABBREV_WINDOW = 24

# Abbreviations after which a full stop does not end a sentence (English and Portuguese).
ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "sra", "srta", "jr", "st", "vs", "no", "nº",
    "dra", "eng", "av", "etc", "e.g", "i.e", "p.ex", "fig", "vol", "cap", "pág", "p",
}
# A sentence ends at . ! ? … (plus closing quotes/brackets) followed by white space and
# a capital letter, a digit, an opening quote/bracket or an inverted mark.
_BOUNDARY = re.compile(r"(?<=[.!?…])([\"'”’»)\]]*)\s+(?=[\"'“‘«(\[¿¡]?[A-ZÀ-ÖØ-Þ0-9])")
# a clause ends at , ; : ) ] » ” or a dash, followed by white space
_CLAUSE = re.compile(r"[,;:)\]»”’]\s|\s[–—-]\s")

# every Unicode control character (category Cc) except tab, line feed and carriage return
_CONTROL = re.compile("[" + "".join(
    re.escape(chr(c)) for c in range(0xA0)
    if unicodedata.category(chr(c)) == "Cc" and chr(c) not in "\t\n\r"
) + "]+")


def clean_text(text: str) -> tuple[str, int]:
    """``text`` without control characters, and how many were removed.

    Each run of control characters (Unicode category Cc: NUL, bell, escape, DEL, the C1
    codes; tab, line feed and carriage return are kept) becomes one space, so
    "Hello\\0world" reads "Hello world" instead of the model seeing an unknown piece.
    """
    n = 0

    def space(m: re.Match) -> str:
        nonlocal n
        n += len(m.group())
        return " "

    return _CONTROL.sub(space, text), n


def split_sentences(text: str) -> list[tuple[str, str]]:
    """Split text into sentences (:func:`split_text` without the count of cut sentences).

    Returns:
        list of (sentence, separator): the stripped sentence and the white space that
        followed it in a normalised form ("\\n" after the end of a line, " " otherwise,
        "" after the last one). Blank lines and white space are dropped.
    """
    return split_text(text)[0]


def split_text(text: str, max_chars: int = MAX_SENTENCE_CHARS) -> tuple[list[tuple[str, str]], int]:
    """Split text into sentences, each at most ``max_chars`` characters, in time linear in
    the text's length.

    Lines (paragraphs) are split first; within a line a sentence ends at ``.``, ``!``,
    ``?`` or ``…`` (with any closing quotes) followed by white space and a capital letter,
    digit or opening quote — except after a known abbreviation ("Dr.", "Sr.", ...). A
    longer sentence is cut (:func:`cap_sentence`); its pieces are joined by " ".

    Args:
        text: any text.
        max_chars: the cap on a sentence's length (characters, >= 2).

    Returns:
        (pairs, n_cut): the (sentence, separator) pairs of :func:`split_sentences`, and how
        many sentences were longer than ``max_chars`` and cut.
    """
    out: list[tuple[str, str]] = []
    n_cut = 0
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    for li, line in enumerate(lines):
        pieces: list[str] = []
        for sentence in _line_sentences(line):
            parts = cap_sentence(sentence, max_chars)
            n_cut += len(parts) > 1
            pieces.extend(parts)
        for pi, p in enumerate(pieces):
            sep = " " if pi < len(pieces) - 1 else ("\n" if li < len(lines) - 1 else "")
            out.append((p, sep))
    return out, n_cut


def _line_sentences(line: str) -> Iterable[str]:
    """The sentences of one stripped line (non-empty, stripped). Linear: only the last
    word before each candidate boundary is looked at."""
    start = 0
    for m in _BOUNDARY.finditer(line):
        end = m.start(1) if m.group(1) else m.start()  # the text before the closing quotes
        cut = m.end(1) if m.group(1) else m.start()
        if not m.group(1) and _last_word(line, start, end).rstrip(".").lower() in ABBREVIATIONS:
            continue
        piece = line[start:cut].strip()
        if piece:
            yield piece
        start = m.end()
    piece = line[start:].strip()
    if piece:
        yield piece


def _last_word(line: str, start: int, end: int) -> str:
    """The last white-space separated word of ``line[start:end]`` ("" if none), reading at
    most ``_ABBREV_WINDOW`` characters (a longer word is no abbreviation)."""
    lo = max(start, end - _ABBREV_WINDOW)
    words = line[lo:end].split()
    if not words:
        return ""
    if lo > start and not line[lo - 1].isspace() and len(words) == 1:
        return ""  # the window began inside a long word
    return words[-1]


def cap_sentence(sentence: str, max_chars: int = MAX_SENTENCE_CHARS) -> list[str]:
    """Cut ``sentence`` into pieces of at most ``max_chars`` characters: each cut falls after
    the last clause mark (``, ; : ) ] » ”`` or a spaced dash) in the second half of the
    window, else at its last space there, else hard at ``max_chars`` (a run without spaces:
    a URL, or text in a script written without them). Linear in the sentence's length.

    Returns:
        the stripped, non-empty pieces ([sentence] when it is short enough).

    Raises:
        ValueError: ``max_chars`` < 2.
    """
    if max_chars < 2:
        raise ValueError(f"max_chars must be >= 2, got {max_chars}")
    out: list[str] = []
    i, n = 0, len(sentence)
    while n - i > max_chars:
        lo, hi = i + max_chars // 2, i + max_chars
        cut = None
        for m in _CLAUSE.finditer(sentence, lo, hi):
            cut = m.start() + 1  # after the mark (or the space before a dash)
        if cut is None:
            j = sentence.rfind(" ", lo, hi)
            cut = j if j > i else hi
        piece = sentence[i:cut].strip()
        if piece:
            out.append(piece)
        i = cut
        while i < n and sentence[i].isspace():
            i += 1
    piece = sentence[i:].strip()
    if piece:
        out.append(piece)
    return out


def unreadable_runs(text: str, unreadable: Callable[[str], bool]) -> list[tuple[int, int]]:
    """Where ``text`` is in a script the model cannot read: (start, end) character spans
    that begin at an unreadable character and run on over unreadable characters, white
    space and punctuation up to the next readable letter or digit (so "你好，世界。The end."
    gives the span of "你好，世界。"; trailing white space is left out).

    Args:
        text: the text.
        unreadable: character -> whether the model has no piece for it (called once per
            distinct character; white space is never unreadable).

    Returns:
        the spans, in order, not overlapping ([] when every character is readable).
    """
    bad = {c for c in set(text) if not c.isspace() and unreadable(c)}
    if not bad:
        return []
    cls = "".join(re.escape(c) for c in sorted(bad))
    run = re.compile(f"[{cls}](?:[{cls}]|[^\\w]|_)*")
    spans = []
    for m in run.finditer(text):
        s, e = m.start(), m.end()
        while e > s and text[e - 1].isspace():
            e -= 1
        spans.append((s, e))
    return spans


def blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by as many spaces (character offsets stay put)."""
    if not spans:
        return text
    parts, last = [], 0
    for s, e in spans:
        parts.append(text[last:s])
        parts.append(" " * (e - s))
        last = e
    parts.append(text[last:])
    return "".join(parts)


def script_names(chars: Iterable[str]) -> list[str]:
    """Readable names of the scripts of ``chars``, most frequent first: "Arabic", "Hebrew",
    "Chinese (CJK)", "Japanese kana", "Korean", "emoji or symbols", ..."""
    counts: Counter[str] = Counter()
    for c in chars:
        if c.isspace():
            continue
        cat = unicodedata.category(c)
        if not cat.startswith("L"):
            if cat == "So" or cat.startswith("S"):
                counts["emoji or symbols"] += 1
            continue
        first = unicodedata.name(c, "").split(" ")[0]
        name = {"CJK": "Chinese (CJK)", "HIRAGANA": "Japanese kana", "KATAKANA": "Japanese kana",
                "HANGUL": "Korean"}.get(first, first.title() or "unnamed characters")
        counts[name] += 1
    return [name for name, _ in counts.most_common()]
