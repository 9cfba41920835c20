"""The translation task's source chunks and what is said about them (no model call here).

- :class:`SourceChunk`: one encoder input (a sentence, or a piece of a long one);
  :class:`PreparedText`: a text split into chunks; :class:`SentenceResult`: one chunk
  translated (``TranslationModel.sentences``).
- :func:`cut_ids`: an over-long sentence's ids cut before word starts.
- :func:`text_notes`: the sentences the info line says about a text.
- :func:`spans_of`, :func:`tokens_overlapping`: where source tokens lie in the text, and
  which ones a selection touches (the what-if's dropped words).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from core.tasks.translation_text import MAX_SENTENCE_CHARS, clean_text, script_names


@dataclass(frozen=True)
class SourceChunk:
    """One unit the encoder sees: a sentence, or a piece of an over-long sentence.

    Attributes:
        text: the source text of this chunk ("" when the chunk was cut inside a sentence
            at token level; then only ``ids`` matter).
        ids: SentencePiece ids incl. the final ``</s>``.
        sentence: index of the sentence it belongs to.
        separator: what to put after its translation when joining ("", " ", "\\n").
        source_offset: position of its first token in the whole input's token list.
    """

    text: str
    ids: tuple[int, ...]
    sentence: int
    separator: str
    source_offset: int


@dataclass(frozen=True)
class PreparedText:
    """A text split for the model: its chunks, how many sentences were cut at the length cap,
    how many control characters were removed, and the parts it cannot read (their text)."""

    chunks: list[SourceChunk]
    n_cut: int
    removed_controls: int
    unreadable: list[str]


@dataclass(frozen=True)
class SentenceResult:
    """One translated chunk of :meth:`TranslationModel.sentences`.

    Attributes:
        index: the chunk's index (0-based); total: how many chunks the text has.
        chunk: the source chunk (its ``separator`` goes after the translation).
        text: the chunk's translation, stripped.
        finished: the engine's Finished for the chunk (token ids, reason, stats).
    """

    index: int
    total: int
    chunk: SourceChunk
    text: str
    finished: object


def cut_ids(ids: list[int], max_len: int, piece: Callable[[int], str]) -> list[list[int]]:
    """Cut ``ids`` into pieces of at most ``max_len``, preferring to cut before a word
    start (a piece beginning with ``▁``) in the second half of each piece."""
    out = []
    while len(ids) > max_len:
        cut = max_len
        for j in range(max_len, max_len // 2, -1):
            if piece(ids[j]).startswith("▁"):
                cut = j
                break
        out.append(ids[:cut])
        ids = ids[cut:]
    out.append(ids)
    return out


def replace_ids(chunk: SourceChunk, ids) -> SourceChunk:
    """``chunk`` with other source ids (a what-if's shortened or empty source)."""
    return dataclasses.replace(chunk, ids=tuple(int(i) for i in ids))


def text_notes(text: str, prepare: Callable[[str], PreparedText], known_piece: Callable[[list], bool]) -> list[str]:
    """Sentences for the user about what the model will make of ``text`` (see
    ``TranslationModel.text_notes``). ``prepare``: the text split for the model (raises
    ValueError for empty text); ``known_piece``: whether chunks hold a piece the model knows."""
    notes = []
    cleaned, removed = clean_text(text)
    if removed:
        notes.append(
            "1 control character (such as NUL) was replaced by a space before translating." if removed == 1
            else f"{removed} control characters (such as NUL) were replaced by spaces before translating."
        )
    try:
        prepared = prepare(text)
    except ValueError:
        return notes
    chunks = prepared.chunks
    if prepared.unreadable:
        runs = prepared.unreadable
        n = sum(len(r) for r in runs)
        scripts = script_names("".join(runs))
        sample = runs[0] if len(runs[0]) <= 24 else runs[0][:23] + "…"
        notes.append(
            f"The model cannot read {' or '.join(scripts[:2]) or 'some characters'} ({len(runs)} "
            f"part{'s' if len(runs) != 1 else ''}, {n} characters, e.g. \"{sample}\"): it has no pieces for "
            "them, so they are left out and the rest is translated. Use a model for that language to "
            "translate them."
        )
    if prepared.n_cut:
        notes.append(
            f"{prepared.n_cut} sentence{'s were' if prepared.n_cut != 1 else ' was'} longer than "
            f"{MAX_SENTENCE_CHARS} characters and cut at a comma, other clause mark or space into pieces "
            "translated one by one."
        )
    if not known_piece(chunks):
        notes.append(
            "The text has no words the model knows (only emoji or symbols it reads as unknown pieces), "
            "so the translation will be meaningless; type words in the source language."
        )
    elif not any(ch.isalnum() for ch in cleaned):
        notes.append(
            "The text has no letters or digits, so the translation will be a guess; type words in the "
            "source language."
        )
    return notes


def spans_of(text: str, chunks: list[SourceChunk], source) -> list[tuple[int, int] | None]:
    """Where each source token of ``chunks`` lies in ``text`` (see
    ``TranslationModel.source_spans``); ``source``: the model's ``translation_sources`` adapter."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    lead, prefix, _trail = source.split("")
    n_prefix = len(lead) + len(prefix)  # T5's "translate English to German: " is no text of the input
    for chunk in chunks:
        for k, (tid, piece) in enumerate(zip(chunk.ids, source.pieces(list(chunk.ids)))):
            s = piece.replace("▁", " ").strip()
            special = tid in source.special_ids or k < n_prefix
            j = -1 if special or not s else text.find(s, cursor, cursor + 64 + len(s))
            if j < 0:
                spans.append(None)
                continue
            spans.append((j, j + len(s)))
            cursor = j + len(s)
    return spans


def tokens_overlapping(spans: list[tuple[int, int] | None], pieces: list[str], start: int, end: int,
                       whole_words: bool = True) -> list[int]:
    """The token positions whose ``spans`` overlap ``start``..``end`` (see
    ``TranslationModel.tokens_in``); ``pieces``: the tokens' pieces."""
    hit = {i for i, sp in enumerate(spans) if sp is not None and sp[0] < end and start < sp[1]}
    if not whole_words or not hit:
        return sorted(hit)

    def joins(i: int) -> bool:  # piece i continues the word of piece i - 1
        a, b = spans[i - 1] if i > 0 else None, spans[i]
        return (a is not None and b is not None and a[1] == b[0] and not pieces[i].startswith("▁")
                and pieces[i][:1].isalnum())

    for i in sorted(hit):
        j = i
        while joins(j):
            j -= 1
            hit.add(j)
        j = i + 1
        while j < len(spans) and joins(j):
            hit.add(j)
            j += 1
    return sorted(hit)
