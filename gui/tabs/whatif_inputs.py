"""How each tab masks its input for a what-if (``gui.tabs.whatif``), and runs it.

- :class:`SpeechMask`: **Mask** on, a left drag across the waveform selects the span to
  silence (its edges can then be dragged); off, the waveform pans as before.
- :class:`ImageMask`: **Mask** on, a box dragged on the image is the region to blank; off, a
  dragged box is the region to read, as before.
- :class:`SourceDrop`: select words in the source text and press **Drop selection**: the
  source tokens they overlap are dropped (struck through in the text box).

Each one implements ``mask_changed`` (draws the mask); the tab mixes it in before
:class:`~gui.tabs.base.DecodeTab`, whose ``whatif_fn`` runs the task model's ``what_if``
with the mask (or ``no_input``) on the tab's ``task_input``.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QPushButton, QTextEdit, QToolButton

from core.catalog import SAMPLE_RATE

#: a span shorter than this (seconds) is a click, not a mask
MIN_SPAN_S = 0.02
MASK_BRUSH = (213, 94, 0, 60)  # Okabe & Ito vermillion, translucent


class SpeechMask:
    """Silence a span of the waveform (see the module docstring). Needs ``self.wave`` built on a
    :class:`~gui.widgets.span_select.SpanViewBox` (``self.wave_box``) and ``self.audio``."""

    mask_hint = "press Mask, then drag across the waveform to silence a span"

    def make_mask_button(self) -> QToolButton:
        """The Mask toggle for the files row."""
        self.mask_button = QToolButton()
        self.mask_button.setText("Mask")
        self.mask_button.setCheckable(True)
        self.mask_button.setToolTip("On: drag across the waveform to select a span to silence, then press What if? "
                                    "(the What if tab below). Off: a drag pans the waveform.")
        self.mask_button.toggled.connect(self._mask_mode)
        return self.mask_button

    def install_span_mask(self) -> None:
        """The span item on the waveform and the drag handling (after ``self.wave`` is built)."""
        import pyqtgraph as pg

        self.mask_span = pg.LinearRegionItem(values=(0, 0), movable=True, brush=pg.mkBrush(*MASK_BRUSH),
                                             pen=pg.mkPen("#D55E00", width=2))
        self.mask_span.setZValue(10)
        self.mask_span.hide()
        self.mask_span.setToolTip("silenced by What if? — drag its edges to change it")
        self.wave.addItem(self.mask_span)
        self.wave_box.spanChanging.connect(self._span_changing)
        self.wave_box.spanSelected.connect(self.mask_span_seconds)
        self.mask_span.sigRegionChangeFinished.connect(self._span_edited)

    def _mask_mode(self, on: bool) -> None:
        self.wave_box.selecting = bool(on)
        if on:
            self.statusMessage.emit("Mask: drag across the waveform to select the span to silence")

    def _span_changing(self, x0: float, x1: float) -> None:
        self.mask_span.blockSignals(True)
        self.mask_span.setRegion((x0, x1))
        self.mask_span.blockSignals(False)
        self.mask_span.show()

    def _span_edited(self) -> None:
        x0, x1 = self.mask_span.getRegion()
        if self.whatif_mask is not None and (x0, x1) != self.whatif_mask:
            self.mask_span_seconds(x0, x1)

    def mask_span_seconds(self, t0: float, t1: float) -> bool:
        """Mask the span ``t0``..``t1`` seconds (clipped to the audio); False for an empty span."""
        if not self.has_input():
            return False
        dur = len(self.audio) / SAMPLE_RATE
        t0, t1 = max(0.0, min(t0, t1)), min(dur, max(t0, t1))
        if t1 - t0 < MIN_SPAN_S:
            self.mask_changed(self.whatif_mask)
            return False
        self.set_mask((t0, t1), f"silence {t0:.2f}–{t1:.2f} s")
        return True

    def mask_changed(self, mask: Any) -> None:
        self.mask_span.blockSignals(True)
        if mask is None:
            self.mask_span.hide()
        else:
            self.mask_span.setRegion(mask)
            self.mask_span.show()
        self.mask_span.blockSignals(False)


class ImageMask:
    """Blank a region of the image (see the module docstring). Needs the OCR tab's ``view``,
    ``set_region``, ``image``, ``lines`` and ``region``."""

    mask_hint = "press Mask, then drag a box on the image to blank it"

    def make_mask_button(self) -> QToolButton:
        """The Mask toggle for the buttons row (beside Pan)."""
        self.mask_button = QToolButton()
        self.mask_button.setText("Mask")
        self.mask_button.setCheckable(True)
        self.mask_button.setToolTip("On: a box dragged on the image is blanked by What if? (the What if tab below). "
                                    "Off: a dragged box is the region to read.")
        self.mask_button.toggled.connect(self._mask_mode)
        return self.mask_button

    def _mask_mode(self, on: bool) -> None:
        if on and self.pan_button.isChecked():
            self.pan_button.setChecked(False)
        if on:
            self.statusMessage.emit("Mask: drag a box on the image to blank it, then press What if?")

    def image_dragged(self, region: tuple[int, int, int, int]) -> None:
        """A box dragged on the image: the mask in mask mode, else the region to read."""
        if self.mask_button.isChecked():
            x, y, w, h = (int(v) for v in region)
            self.set_mask((x, y, w, h), f"blank {w}×{h} px at ({x}, {y})")
        else:
            self.set_region(region)

    def mask_changed(self, mask: Any) -> None:
        self.view.set_mask(mask)


class SourceDrop:
    """Drop source words (see the module docstring). Needs the translation tab's ``text_edit``,
    ``text()`` and ``shortlist()``; the model's ``tokens_in`` / ``source_spans``."""

    mask_hint = "select words in the source text, then press Drop selection"

    def make_drop_button(self) -> QPushButton:
        """The Drop selection button for the files row."""
        self.drop_button = QPushButton("Drop selection")
        self.drop_button.setToolTip("Drop the source words you selected in the text: What if? (the What if tab "
                                    "below) translates their sentences again without them")
        self.drop_button.clicked.connect(self.drop_selection)
        self.text_edit.textChanged.connect(self._source_edited)
        return self.drop_button

    def drop_selection(self) -> bool:
        """Mask the source tokens the text box's selection overlaps. False (a message) when
        nothing is selected or no model is loaded."""
        cur = self.text_edit.textCursor()
        return self.drop_characters(cur.selectionStart(), cur.selectionEnd())

    def drop_characters(self, start: int, end: int) -> bool:
        """Mask the source tokens overlapping characters ``start``..``end`` of the text."""
        if self.model is None or not self.has_input():
            self.statusMessage.emit("Load a model and type a text first.")
            return False
        if end <= start:
            self.statusMessage.emit("Select the words to drop in the source text first.")
            return False
        text = self.text()
        positions = self.model.tokens_in(text, start, end)
        if not positions:
            self.statusMessage.emit("The selection holds no source token: select words.")
            return False
        spans = self.model.source_spans(text)
        words: list[list[int]] = []  # [start, end] of each run of touching pieces: the words
        for p in positions:
            a, b = spans[p]
            if words and words[-1][1] == a:
                words[-1][1] = b
            else:
                words.append([a, b])
        self.set_mask(tuple(positions), "drop " + " ".join(repr(text[a:b]) for a, b in words))
        return True

    def _source_edited(self) -> None:
        if self.whatif_mask is not None:
            self.set_mask(None)

    def mask_changed(self, mask: Any) -> None:
        sels = []
        if mask is not None and self.model is not None:
            spans = self.model.source_spans(self.text())
            fmt = QTextCharFormat()
            fmt.setFontStrikeOut(True)
            fmt.setBackground(QColor(*MASK_BRUSH))
            for p in mask:
                if p < len(spans) and spans[p] is not None:
                    sel = QTextEdit.ExtraSelection()
                    c = QTextCursor(self.text_edit.document())
                    c.setPosition(spans[p][0])
                    c.setPosition(spans[p][1], QTextCursor.MoveMode.KeepAnchor)
                    sel.cursor, sel.format = c, fmt
                    sels.append(sel)
        self.text_edit.setExtraSelections(sels)

    def dropped_ranges(self) -> list[tuple[int, int]]:
        """The character ranges struck through in the text box."""
        return [(s.cursor.selectionStart(), s.cursor.selectionEnd()) for s in self.text_edit.extraSelections()]
