"""How the translation task reads a text (no model call here, only the tokenizer): control
characters removed, the parts in a script the model cannot read left out, sentences cut into
encoder inputs of at most ``MAX_SENTENCE_TOKENS`` tokens, and where each source token lies in
the text. ``TranslationModel`` keeps one :class:`SourceReader` per model (``model.reader``)
and its public text methods (``chunks``, ``source_tokens``, ``text_notes``, ...) are the
reader's.
"""

from __future__ import annotations

import threading
import unicodedata

from core.tasks.translation_chunks import (
    PreparedText,
    SourceChunk,
    cut_ids,
    spans_of,
    text_notes,
    tokens_overlapping,
)
from core.tasks.translation_text import blank_spans, clean_text, split_text, unreadable_runs

#: sentences longer than this many SentencePiece tokens are decoded in chunks, as
#: bergamot-translator's ``max-length-break`` (128) does
MAX_SENTENCE_TOKENS = 128


class SourceReader:
    """A model's reading of texts (``core.tasks.translation_sources.Source``: its tokenizer).

    The last text's split is kept (thread-safe), so the info line, the columns and the decode
    split a long text once; so is which characters the tokenizer reads as unknown.
    """

    def __init__(self, source):
        self.source = source
        self._lock = threading.Lock()
        self._last: tuple | None = None  # (text, PreparedText or the ValueError it gave)
        self._char_readable: dict[str, bool] = {}

    def chunks(self, text: str) -> list[SourceChunk]:
        """Split ``text`` into encoder inputs: control characters removed, the parts in a
        script the model cannot read left out (:meth:`unreadable_spans`), sentences of at
        most ``MAX_SENTENCE_CHARS`` characters (``core.tasks.translation_text.split_text``),
        each of at most ``MAX_SENTENCE_TOKENS`` tokens.

        Raises:
            ValueError: not a string; empty or whitespace-only text; nothing the tokenizer reads.
        """
        return self.prepared(text).chunks

    def prepared(self, text: str) -> PreparedText:
        """The :class:`PreparedText` of ``text`` (the last one kept: see the class). Raises as :meth:`chunks`."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        with self._lock:
            last = self._last
            if last is not None and last[0] is text or (last is not None and last[0] == text):
                if isinstance(last[1], ValueError):
                    raise ValueError(str(last[1]))
                return last[1]
        try:
            prepared = self.split(text)
        except ValueError as exc:
            with self._lock:
                self._last = (text, exc)
            raise
        with self._lock:
            self._last = (text, prepared)
        return prepared

    def split(self, text: str) -> PreparedText:
        """``text`` split anew (not kept; :meth:`prepared` keeps it). Raises as :meth:`chunks`."""
        cleaned, removed = clean_text(text)
        spans = self.unreadable_spans(cleaned)
        readable = blank_spans(cleaned, spans)
        if spans and not any(ch.isalnum() for ch in readable):
            spans, readable = [], cleaned  # nothing readable is left: the model gets it all (and a warning)
        sentences, n_cut = split_text(readable)
        if not sentences:
            raise ValueError("the text is empty (or only white space); type or paste something to translate")
        out: list[SourceChunk] = []
        offset = 0
        for si, (sentence, sep) in enumerate(sentences):
            lead, ids, trail = self.source.split(sentence)
            budget = MAX_SENTENCE_TOKENS - len(lead) - len(trail)
            parts = cut_ids(ids, max(8, budget), lambda i: self.source.pieces([i])[0]) if ids else []
            for pi, part in enumerate(parts):
                chunk_ids = tuple(lead) + tuple(part) + tuple(trail)
                out.append(SourceChunk(sentence if len(parts) == 1 else self.source.part_text(part), chunk_ids, si,
                                       sep if pi == len(parts) - 1 else " ", offset))
                offset += len(chunk_ids)
        if not out:
            raise ValueError("the text holds nothing the tokenizer can read; give words to translate")
        return PreparedText(out, n_cut, removed, [cleaned[a:b] for a, b in spans])

    def unreadable_spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character spans of ``text`` in a script the model cannot read: runs
        of characters the tokenizer reads as the unknown piece (Arabic, Hebrew, Chinese,
        Japanese for the English Bergamot models), with the punctuation and spaces between
        them (``core.tasks.translation_text.unreadable_runs``)."""
        return unreadable_runs(text, self._unreadable_char)

    def _unreadable_char(self, ch: str) -> bool:
        """Whether ``ch`` is a letter, mark or digit the tokenizer reads as the unknown piece
        (emoji and symbols stay in the text: they are no script, and read as <unk> as before)."""
        if unicodedata.category(ch)[0] not in "LMN":
            return False
        known = self._char_readable.get(ch)
        if known is None:
            _lead, ids, _trail = self.source.split(ch)
            known = self.source.unk_id not in ids
            self._char_readable[ch] = known
        return not known

    def text_notes(self, text: str) -> list[str]:
        """Sentences for the user about what the model will make of ``text``: control
        characters removed (:func:`clean_text`); parts in a script the model cannot read,
        left out (:meth:`unreadable_spans`); sentences longer than ``MAX_SENTENCE_CHARS``
        cut; or no word the model knows (every source piece is unknown, e.g. emoji only) /
        no letters or digits at all. [] for ordinary or empty text."""
        return text_notes(text, self.prepared, self._has_known_piece)

    def _has_known_piece(self, chunks: list[SourceChunk]) -> bool:
        """Whether any source id is a real piece: not unknown, not special, not a bare "▁"."""
        special = self.source.special_ids
        return any(i not in special and piece.strip("▁ ") for c in chunks
                   for i, piece in zip(c.ids, self.source.pieces(list(c.ids))))

    def source_tokens(self, text: str) -> list[str]:
        """SentencePiece pieces of the whole input, each sentence followed by ``</s>`` —
        the cross-attention columns, indexed by ``source_offset + column``.

        Raises:
            ValueError: empty or whitespace-only text.
        """
        return [p for c in self.chunks(text) for p in self.source.pieces(list(c.ids))]

    def source_spans(self, text: str) -> list[tuple[int, int] | None]:
        """Where each source token (:meth:`source_tokens`, the same order) lies in ``text``:
        (start, end) character offsets, or None for a token that is no text there (``</s>``,
        an unknown piece, a language token, T5's task prefix).

        Each piece (``▁`` read as a space, outer spaces stripped) is looked up in ``text``
        from the end of the previous one, at most 64 characters on; a piece the tokenizer
        normalised beyond recognition gets None.
        """
        return spans_of(text, self.chunks(text), self.source)

    def tokens_in(self, text: str, start: int, end: int, whole_words: bool = True) -> list[int]:
        """The source token positions (:meth:`source_tokens` indices) whose characters overlap
        ``text[start:end]`` (a selection in the text box); with ``whole_words``, every piece
        of a word any of them belongs to ("pp" of "apples" gives "▁apple" and "s": a piece
        continues the word before it when it touches it, has no "▁" and starts with a letter
        or digit, so "today" and its "." stay apart)."""
        return tokens_overlapping(self.source_spans(text), self.source_tokens(text), start, end, whole_words)
