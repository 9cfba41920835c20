"""The note a view of a run shows while it holds an EARLIER run than the one the user watches
(a live session decodes into the Live view; the token stream, top-k and heatmap keep the last
offline run, which stays explorable): one look for the note, and the views dimmed under it."""

from __future__ import annotations

from PySide6.QtWidgets import QGraphicsOpacityEffect, QWidget

from .elided_label import ElidedLabel

#: the note's colour (Okabe & Ito vermillion, as the other warnings) and the dimmed views' opacity
NOTE_STYLE = "color: #D55E00; font-style: italic;"
DIMMED_OPACITY = 0.45


def note_label() -> ElidedLabel:
    """A hidden one-line label for the note (cut with "…" when narrow, the whole note its tooltip)."""
    label = ElidedLabel("")
    label.setStyleSheet(NOTE_STYLE)
    label.hide()
    return label


def show_note(label: ElidedLabel, note: str | None, dimmed: QWidget | None = None) -> None:
    """Show ``note`` in ``label`` (None: hide it) and dim ``dimmed`` while it shows."""
    label.setText(note or "")
    label.setVisible(bool(note))
    if dimmed is not None:
        if note and dimmed.graphicsEffect() is None:
            effect = QGraphicsOpacityEffect(dimmed)
            effect.setOpacity(DIMMED_OPACITY)
            dimmed.setGraphicsEffect(effect)
        elif dimmed.graphicsEffect() is not None:
            dimmed.setGraphicsEffect(None)
