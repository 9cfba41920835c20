"""How each tab masks its input for a what-if (``gui.tabs.whatif``), and runs it.

- :class:`SpeechMask`: **Mask** on, a left drag across the waveform selects the span to
  silence (its edges can then be dragged); off, the waveform pans as before.
- :class:`ImageMask`: **Mask** on, a box dragged on the image is the region to blank; off, a
  dragged box is the region to read, as before.
- :class:`SourceDrop`: select words in the source text and press **Drop selection**: the
  source tokens they overlap are dropped (struck through in the text box).

Each one is an object the tab owns (``tab.mask``), built with the tab and talking to it through
its public methods (``set_mask``, ``whatif_mask``, ``has_input``, ``statusMessage``). Its
``mask_changed`` draws the mask (:meth:`gui.tabs.base.DecodeTab.mask_changed` hands it on);
the tab's ``whatif_fn`` (``DecodeTab``) runs the task model's ``what_if`` with the mask (or
``no_input``) on the tab's ``task_input``.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QPushButton, QTextEdit, QToolButton

from core.catalog import SAMPLE_RATE

#: a span shorter than this (seconds) is a click, not a mask
MIN_SPAN_S = 0.02
MASK_BRUSH = (213, 94, 0, 60)  # Okabe & Ito vermillion, translucent


def mask_toggle(tooltip: str, toggled: Any) -> QToolButton:
    """A checkable "Mask" tool button with ``tooltip``; ``toggled(bool)`` is called on each change."""
    button = QToolButton()
    button.setText("Mask")
    button.setCheckable(True)
    button.setToolTip(tooltip)
    button.toggled.connect(toggled)
    return button


class SpeechMask:
    """Silence a span of the waveform (see the module docstring). The tab gives ``audio``,
    ``has_input``, ``set_mask``, ``whatif_mask`` and ``statusMessage``; :meth:`install_span_mask`
    takes the waveform built on a :class:`~gui.widgets.span_select.SpanViewBox`."""

    mask_hint = "press Mask, then drag across the waveform to silence a span"

    def __init__(self, tab: Any) -> None:
        self.tab = tab

    def make_mask_button(self) -> QToolButton:
        """The Mask toggle for the files row."""
        self.mask_button = mask_toggle(
            "On: drag across the waveform to select a span to silence, then press What if? "
            "(the What if tab below). Off: a drag pans the waveform.", self._mask_mode)
        return self.mask_button

    def install_span_mask(self, wave: Any, wave_box: Any) -> None:
        """The span item on ``wave`` (a ``pg.PlotWidget`` on the ``SpanViewBox`` ``wave_box``)
        and the drag handling."""
        import pyqtgraph as pg

        self.wave, self.wave_box = wave, wave_box
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
            self.tab.statusMessage.emit("Mask: drag across the waveform to select the span to silence")

    def _span_changing(self, x0: float, x1: float) -> None:
        self.mask_span.blockSignals(True)
        self.mask_span.setRegion((x0, x1))
        self.mask_span.blockSignals(False)
        self.mask_span.show()

    def _span_edited(self) -> None:
        x0, x1 = self.mask_span.getRegion()
        if self.tab.whatif_mask is not None and (x0, x1) != self.tab.whatif_mask:
            self.mask_span_seconds(x0, x1)

    def mask_span_seconds(self, t0: float, t1: float) -> bool:
        """Mask the span ``t0``..``t1`` seconds (clipped to the audio); False for an empty span."""
        if not self.tab.has_input():
            return False
        dur = len(self.tab.audio) / SAMPLE_RATE
        t0, t1 = max(0.0, min(t0, t1)), min(dur, max(t0, t1))
        if t1 - t0 < MIN_SPAN_S:
            self.mask_changed(self.tab.whatif_mask)
            return False
        self.tab.set_mask((t0, t1), f"silence {t0:.2f}–{t1:.2f} s")
        return True

    def mask_changed(self, mask: Any) -> None:
        """Draw ``mask`` ((t0, t1) seconds, or None) on the waveform."""
        self.mask_span.blockSignals(True)
        if mask is None:
            self.mask_span.hide()
        else:
            self.mask_span.setRegion(mask)
            self.mask_span.show()
        self.mask_span.blockSignals(False)


class ImageMask:
    """Blank a region of the image (see the module docstring). The OCR tab gives ``view``,
    ``pan_button``, ``set_region``, ``set_mask`` and ``statusMessage``."""

    mask_hint = "press Mask, then drag a box on the image to blank it"

    def __init__(self, tab: Any) -> None:
        self.tab = tab

    def make_mask_button(self) -> QToolButton:
        """The Mask toggle for the buttons row (beside Pan)."""
        self.mask_button = mask_toggle(
            "On: a box dragged on the image is blanked by What if? (the What if tab below). "
            "Off: a dragged box is the region to read.", self._mask_mode)
        return self.mask_button

    def _mask_mode(self, on: bool) -> None:
        if on and self.tab.pan_button.isChecked():
            self.tab.pan_button.setChecked(False)
        if on:
            self.tab.statusMessage.emit("Mask: drag a box on the image to blank it, then press What if?")

    def image_dragged(self, region: tuple[int, int, int, int]) -> None:
        """A box dragged on the image: the mask in mask mode, else the region to read."""
        if self.mask_button.isChecked():
            x, y, w, h = (int(v) for v in region)
            self.tab.set_mask((x, y, w, h), f"blank {w}×{h} px at ({x}, {y})")
        else:
            self.tab.set_region(region)

    def mask_changed(self, mask: Any) -> None:
        """Draw ``mask`` ((x, y, w, h) pixels, or None) on the image."""
        self.tab.view.set_mask(mask)


class SourceDrop:
    """Drop source words (see the module docstring). The translation tab gives ``text_edit``,
    ``text()``, ``model`` (its ``tokens_in`` / ``source_spans``), ``has_input``, ``set_mask``,
    ``whatif_mask`` and ``statusMessage``."""

    mask_hint = "select words in the source text, then press Drop selection"

    def __init__(self, tab: Any) -> None:
        self.tab = tab

    def make_drop_button(self, text_edit: Any = None) -> QPushButton:
        """The Drop selection button for the files row; an edit of ``text_edit`` (default: the
        tab's) clears the mask."""
        self.drop_button = QPushButton("Drop selection")
        self.drop_button.setToolTip("Drop the source words you selected in the text: What if? (the What if tab "
                                    "below) translates their sentences again without them")
        self.drop_button.clicked.connect(self.drop_selection)
        (text_edit if text_edit is not None else self.tab.text_edit).textChanged.connect(self._source_edited)
        return self.drop_button

    def drop_selection(self) -> bool:
        """Mask the source tokens the text box's selection overlaps. False (a message) when
        nothing is selected or no model is loaded."""
        cur = self.tab.text_edit.textCursor()
        return self.drop_characters(cur.selectionStart(), cur.selectionEnd())

    def drop_characters(self, start: int, end: int) -> bool:
        """Mask the source tokens overlapping characters ``start``..``end`` of the text."""
        tab = self.tab
        if tab.model is None or not tab.has_input():
            tab.statusMessage.emit("Load a model and type a text first.")
            return False
        if end <= start:
            tab.statusMessage.emit("Select the words to drop in the source text first.")
            return False
        text = tab.text()
        positions = tab.model.tokens_in(text, start, end)
        if not positions:
            tab.statusMessage.emit("The selection holds no source token: select words.")
            return False
        spans = tab.model.source_spans(text)
        words: list[list[int]] = []  # [start, end] of each run of touching pieces: the words
        for p in positions:
            a, b = spans[p]
            if words and words[-1][1] == a:
                words[-1][1] = b
            else:
                words.append([a, b])
        tab.set_mask(tuple(positions), "drop " + " ".join(repr(text[a:b]) for a, b in words))
        return True

    def _source_edited(self) -> None:
        if self.tab.whatif_mask is not None:
            self.tab.set_mask(None)

    def mask_changed(self, mask: Any) -> None:
        """Strike through the dropped source tokens (``mask``: their positions, or None)."""
        sels = []
        text_edit, model = self.tab.text_edit, self.tab.model
        if mask is not None and model is not None:
            spans = model.source_spans(self.tab.text())
            fmt = QTextCharFormat()
            fmt.setFontStrikeOut(True)
            fmt.setBackground(QColor(*MASK_BRUSH))
            for p in mask:
                if p < len(spans) and spans[p] is not None:
                    sel = QTextEdit.ExtraSelection()
                    c = QTextCursor(text_edit.document())
                    c.setPosition(spans[p][0])
                    c.setPosition(spans[p][1], QTextCursor.MoveMode.KeepAnchor)
                    sel.cursor, sel.format = c, fmt
                    sels.append(sel)
        text_edit.setExtraSelections(sels)

    def dropped_ranges(self) -> list[tuple[int, int]]:
        """The character ranges struck through in the text box."""
        return [(s.cursor.selectionStart(), s.cursor.selectionEnd()) for s in self.tab.text_edit.extraSelections()]
