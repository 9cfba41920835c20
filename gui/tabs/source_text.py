"""The Translation tab's source text: the text box and reading ``.txt`` files.

A file that is not a UTF-8 ``.txt`` file, or holds no text, is refused with a message that
names it (by its name, never its full path) and says what to do.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QPlainTextEdit

from .base import local_files

TEXT_SUFFIXES = (".txt",)


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
