"""The Translation tab's source text: the text box and reading ``.txt`` files.

A file that is not a UTF-8 ``.txt`` file, or holds no text, is refused with a message that
names it (by its name, never its full path) and says what to do.

A long text is shown as a bounded preview (:class:`TextPreviews`): Qt lays out a line of
1 MB in about 0.9 s on the GUI thread, a preview of its first 10,000 characters in ~15 ms.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QPlainTextEdit

from .base import local_files

TEXT_SUFFIXES = (".txt",)
#: a text longer than this (characters), or with a line longer than LONG_LINE_CHARS, is previewed
LARGE_TEXT_CHARS = 200_000
LONG_LINE_CHARS = 20_000
#: how much of a long text the preview shows (characters)
PREVIEW_CHARS = 10_000


class TextPreviews:
    """The text box's previews of long texts: what the box shows for a text, and the whole
    text behind a preview the box shows.

    A preview is the text's first ``preview_chars`` characters (cut at a space) and a last
    line saying how long the whole text is, with a short hash of it, so that each long text
    has its own preview. The box's undo stack holds previews like any text, so Ctrl+Z after
    Clear brings a long text back whole. The last ``keep`` long texts are remembered.
    """

    def __init__(self, preview_chars: int = PREVIEW_CHARS, large_chars: int = LARGE_TEXT_CHARS,
                 long_line_chars: int = LONG_LINE_CHARS, keep: int = 16) -> None:
        self.preview_chars = int(preview_chars)
        self.large_chars = int(large_chars)
        self.long_line_chars = int(long_line_chars)
        self.keep = int(keep)
        self._full: OrderedDict[str, str] = OrderedDict()  # preview -> whole text

    def is_large(self, text: str) -> bool:
        """Whether ``text`` is shown as a preview: longer than ``large_chars`` or with a line
        longer than ``long_line_chars``."""
        if len(text) > self.large_chars:
            return True
        if len(text) <= self.long_line_chars:
            return False
        start = 0
        while start < len(text):  # the longest line, without splitting the text into a list
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            if end - start > self.long_line_chars:
                return True
            start = end + 1
        return False

    def shown_text(self, text: str) -> str:
        """What the box shows for ``text``: the text itself, or its preview."""
        if not self.is_large(text):
            return text
        cut = text.rfind(" ", self.preview_chars // 2, self.preview_chars)
        head = text[: cut if cut > 0 else self.preview_chars]
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        preview = (f"{head} […]\n\n[Preview: the first {len(head):,} of {len(text):,} characters (text {digest}). "
                   "The whole text is translated; this box is read-only for so long a text. Clear or open another "
                   "file to type.]")
        self._full[preview] = text
        self._full.move_to_end(preview)
        while len(self._full) > self.keep:
            self._full.popitem(last=False)
        return preview

    def full_text(self, shown: str) -> str:
        """The whole text behind what the box shows (``shown`` itself unless it is a preview)."""
        return self._full.get(shown, shown)

    def is_preview(self, shown: str) -> bool:
        """Whether ``shown`` is a preview of a long text."""
        return shown in self._full


def not_a_text_file(path: Path) -> str | None:
    """Why ``path`` is not opened as text (its ending is not .txt), or None."""
    if path.suffix.lower() in TEXT_SUFFIXES:
        return None
    return (f"{path.name} is not a text file: the Translation tab reads UTF-8 .txt files. "
            "Drop or open a .txt file.")


def read_text_file(path: str | Path) -> str:
    """UTF-8 text of ``path``.

    Raises:
        ValueError: not a .txt file, unreadable, not UTF-8, or empty (only white space);
            the message names the file by its name and says what to do.
    """
    p = Path(path)
    reason = not_a_text_file(p)
    if reason:
        raise ValueError(reason)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{p.name} is not UTF-8 text; save it as UTF-8 and try again.") from None
    except OSError as exc:
        raise ValueError(f"Could not read {p.name}: {(exc.strerror or str(exc)).rstrip('.')}. "
                         "Check that the file exists and that you may read it.") from None
    if not text.strip():
        raise ValueError(f"{p.name} is empty: it holds no text to translate. Open a .txt file with text in it.")
    return text


class SourceTextEdit(QPlainTextEdit):
    """The source text box; dropped local files are reported (``filesDropped``) instead of
    inserting their URLs (the tab opens one, or says why it cannot). Dropped text is
    inserted as usual."""

    filesDropped = Signal(list)

    def dragEnterEvent(self, e) -> None:  # noqa: N802
        if local_files(e.mimeData()):
            e.acceptProposedAction()
        else:
            super().dragEnterEvent(e)

    def dragMoveEvent(self, e) -> None:  # noqa: N802
        if local_files(e.mimeData()):
            e.acceptProposedAction()
        else:
            super().dragMoveEvent(e)

    def dropEvent(self, e) -> None:  # noqa: N802
        paths = local_files(e.mimeData())
        if paths:
            e.acceptProposedAction()
            self.filesDropped.emit(paths)
        else:
            super().dropEvent(e)


def column_label(piece: str) -> str:
    """A source token as an axis label: the SentencePiece piece with its ``▁`` kept (word start)."""
    return piece if piece else "∅"


@dataclass(frozen=True)
class TextAnalysis:
    """What the tab needs of a text for one model, made once per text and model (on a
    worker thread for a long text: for 1 MB, 18,000 sentences and 256,000 tokens, splitting
    takes ~1.5 s and even counting and labelling ~40 ms).

    Attributes:
        key: (id of the model, the text).
        chunks: the model's ``SourceChunk`` s (``TranslationModel.chunks``).
        tokens: the source tokens (the heatmap's columns).
        notes: the model's warnings about the text (``TranslationModel.text_notes``).
        error: why the text cannot be translated (empty text), or None.
        labels: the tokens' column labels; boundaries: the column where each sentence
            after the first starts; n_sentences, n_tokens: counts for the info line.
    """

    key: tuple
    chunks: list = field(default_factory=list)
    tokens: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    error: str | None = None
    labels: list = field(default_factory=list)
    boundaries: list = field(default_factory=list)
    n_sentences: int = 0
    n_tokens: int = 0

    @classmethod
    def of(cls, model: Any, text: str) -> "TextAnalysis":
        """Analyse ``text`` for ``model`` (never raises for bad text: ``error`` says why)."""
        key = (id(model), text)
        try:
            chunks = model.chunks(text)
            tokens = model.source_tokens(text)
        except ValueError as exc:
            return cls(key, error=str(exc))
        notes_of = getattr(model, "text_notes", None)
        try:
            notes = list(notes_of(text)) if notes_of is not None else []
        except ValueError:
            notes = []
        return cls(key, chunks, tokens, notes, None, [column_label(t) for t in tokens],
                   [c.source_offset for c in chunks[1:]], len({c.sentence for c in chunks}),
                   sum(len(c.ids) for c in chunks))
