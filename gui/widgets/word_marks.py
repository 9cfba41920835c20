"""Word timing drawn on the plots: word bands on a waveform, the DTW path on the heatmap.

- :class:`WordBands`: one translucent band per word over its span (seconds) on a waveform
  plot, labelled with the word at the top (two staggered rows, each label where it fits;
  hovering names the word under the mouse); neighbouring words alternate two tints. While
  decoding, the newest word is *open* (its end is not known until the next word or the
  end of text arrives, so it runs to the end of its 30 s window): drawn hatched, its label
  ending in "…". Clicking a band emits the step of the word's first token.
- :class:`DtwPath`: the DTW path (token row -> frame) of each window as one line over
  the cross-attention heatmap (x: seconds, y: the token's row).

Both take plain data (``core.analysis.alignment.Word`` / ``WindowPath``, numpy only) and
draw with a few long-lived pyqtgraph items, reused from one update to the next.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem

from core.catalog import FRAME_S

#: alternate tints of neighbouring words, and the open (still decoding) word's
_TINTS = (QColor(0, 158, 115, 60), QColor(86, 180, 233, 60))
_OPEN = QColor(230, 159, 0, 70)
_EDGE = QColor(0, 90, 70, 160)
PATH_COLOR = "#ff4dff"  # magenta: not in viridis, not the red of the selected row


class WordBands(QObject):
    """Word spans on ``plot`` (a pyqtgraph PlotWidget or PlotItem whose x axis is seconds).

    Signals:
        wordClicked(int): the step of the first token of the word band that was clicked.
    """

    wordClicked = Signal(int)

    def __init__(self, plot, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.plot = plot.getPlotItem() if hasattr(plot, "getPlotItem") else plot
        self._bands: list[QGraphicsRectItem] = []
        self._labels: list[pg.TextItem] = []
        self._words: list = []
        self._open = False
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self._rows: list[int] = []  # each word's label row (0 top, 1 below it; -1 hidden)
        self.plot.vb.sigRangeChanged.connect(lambda *_a: self._place())
        self.plot.vb.sigResized.connect(lambda *_a: self._place())
        self.plot.scene().sigMouseMoved.connect(self._hover)

    # ---------------------------------------------------------------- API
    def set_words(self, words: Sequence, open_last: bool = False) -> None:
        """Draw ``words`` (objects with ``word``, ``start``, ``end`` seconds, ``prob`` and
        ``steps``); ``open_last``: the last word is still being decoded (hatched, "…")."""
        self._words = list(words)
        self._open = bool(open_last and self._words)
        while len(self._bands) < len(self._words):
            band = QGraphicsRectItem()
            band.setZValue(-5)
            label = pg.TextItem(anchor=(0, 0), color="#1b4d3e")
            font = label.textItem.font()
            font.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
            label.setFont(font)
            label.setZValue(5)
            self.plot.addItem(band, ignoreBounds=True)
            self.plot.addItem(label, ignoreBounds=True)
            self._bands.append(band)
            self._labels.append(label)
        for i, (band, label) in enumerate(zip(self._bands, self._labels)):
            shown = i < len(self._words)
            band.setVisible(shown)
            label.setVisible(shown)
            if not shown:
                continue
            w = self._words[i]
            is_open = self._open and i == len(self._words) - 1
            color = _OPEN if is_open else _TINTS[i % 2]
            brush = QBrush(color, Qt.BrushStyle.BDiagPattern if is_open else Qt.BrushStyle.SolidPattern)
            band.setBrush(brush)
            pen = QPen(_EDGE if not is_open else QColor(230, 159, 0), 1,
                       Qt.PenStyle.DashLine if is_open else Qt.PenStyle.SolidLine)
            pen.setCosmetic(True)
            band.setPen(pen)
            text = w.word.strip() + ("…" if is_open else "")
            label.setText(text)
            tip = (f"{w.word.strip()!r}  {w.start:.2f}–{w.end:.2f} s · p {w.prob:.2f}"
                   + ("\nstill decoding: its end comes with the next word or the end of text" if is_open else "")
                   + "\nclick: select its first token")
            band.setToolTip(tip)
            label.setToolTip(tip)
        self._place()

    def clear(self) -> None:
        """Remove every band."""
        self.set_words([])

    def words(self) -> list:
        """The words drawn, in order."""
        return list(self._words)

    def spans(self) -> list[tuple[float, float]]:
        """(start, end) seconds of each band drawn."""
        return [(b.rect().left(), b.rect().right()) for b in self._bands[: len(self._words)]]

    def labels(self) -> list[str]:
        """The text of each band's label."""
        return [lab.textItem.toPlainText() for lab in self._labels[: len(self._words)]]

    def is_open(self) -> bool:
        """Whether the last band is the open (still decoding) word."""
        return self._open

    def word_at(self, seconds: float):
        """The word whose band holds ``seconds`` (the later one where two touch), or None."""
        hit = None
        for w in self._words:
            if w.start <= seconds <= w.end:
                hit = w
        return hit

    def shown_labels(self) -> list[int]:
        """Indices of the words whose label is shown at the current zoom."""
        return [i for i, r in enumerate(self._rows[: len(self._words)]) if r >= 0]

    def label_row(self, i: int) -> int:
        """Word ``i``'s label row: 0 at the top, 1 below it, -1 hidden (no room)."""
        return self._rows[i] if i < len(self._rows) else -1

    def hover_text(self, seconds: float) -> str:
        """What hovering at ``seconds`` shows: the word there, its span and probability ("" for none)."""
        w = self.word_at(seconds)
        if w is None:
            return ""
        return f"{w.word.strip()!r}  {w.start:.2f}–{w.end:.2f} s · p {w.prob:.2f} (click: select its first token)"

    # ------------------------------------------------------------ internals
    def _place(self) -> None:
        """Bands the full height of the view; labels at its top (inside), in two staggered
        rows: a label is shown where it fits, in the first row whose previous label ends
        before this word starts (it may run over the narrow words after it, whose own labels
        go to the other row or wait for a closer zoom; hovering names any word)."""
        (_x0, _x1), (y0, y1) = self.plot.vb.viewRange()
        px = self.plot.vb.viewPixelSize()[0] if self.plot.vb.width() > 0 else 0.0  # seconds per pixel
        py = abs(self.plot.vb.viewPixelSize()[1]) if self.plot.vb.height() > 0 else 0.0
        ends = [-float("inf"), -float("inf")]  # where each row's last label ends (seconds)
        self._rows = []
        for w, band, label in zip(self._words, self._bands, self._labels):
            band.setRect(QRectF(w.start, y0, max(w.end - w.start, 1e-3), y1 - y0))
            rect = label.textItem.boundingRect()
            width = rect.width() * px
            row = next((r for r in (0, 1) if w.start >= ends[r] + 2 * px), -1) if px > 0 else -1
            if row == 1 and (y1 - y0) < 2.2 * rect.height() * py:
                row = -1  # too flat for a second row
            self._rows.append(row)
            label.setVisible(row >= 0)
            if row >= 0:
                ends[row] = w.start + width
                label.setPos(w.start, y1 - row * rect.height() * 0.8 * py)

    def _hover(self, pos) -> None:
        """The mouse moved over the plot: name the word under it in the tooltip."""
        if not self._words:
            return
        vb = self.plot.vb
        if not vb.sceneBoundingRect().contains(pos):
            return
        text = self.hover_text(vb.mapSceneToView(pos).x())
        views = self.plot.scene().views()
        if views:
            from PySide6.QtGui import QCursor
            from PySide6.QtWidgets import QToolTip

            if text:
                QToolTip.showText(QCursor.pos(), text, views[0])
            else:
                QToolTip.hideText()

    def _clicked(self, mev) -> None:
        if not self._words or mev.button() != Qt.MouseButton.LeftButton:
            return
        vb = self.plot.vb
        if not vb.sceneBoundingRect().contains(mev.scenePos()):
            return
        w = self.word_at(vb.mapSceneToView(mev.scenePos()).x())
        if w is not None and w.steps:
            self.wordClicked.emit(int(w.steps[0]))


class DtwPath:
    """The DTW path of each window as one line over ``heatmap`` (an ``AttentionHeatmap``:
    x in seconds, one row per step, ``row_of(step)`` says which)."""

    def __init__(self, heatmap) -> None:
        self.heatmap = heatmap
        self.curve = pg.PlotCurveItem(pen=pg.mkPen(PATH_COLOR, width=2), connect="finite")
        self.curve.setZValue(8)
        self.curve.setToolTip("DTW path: for each audio frame, the token it was given to (openai/whisper timing.py)")
        heatmap.plot.addItem(self.curve, ignoreBounds=True)
        self._paths: list = []

    def set_paths(self, paths: Sequence, frame_s: float = FRAME_S) -> None:
        """Draw ``paths`` (``WindowPath``s); rows the heatmap does not show (another window
        in a windowed view, the end-of-text row) are left out."""
        self._paths = list(paths)
        self.redraw(frame_s)

    def redraw(self, frame_s: float = FRAME_S) -> None:
        """Draw the paths again on the heatmap's current rows."""
        xs, ys = self.points(frame_s)
        self.curve.setData(xs, ys, connect="finite")

    def points(self, frame_s: float = FRAME_S) -> tuple[np.ndarray, np.ndarray]:
        """(x seconds at the frame's middle, y at the row's middle) of the drawn line; NaN
        between windows."""
        xs: list[np.ndarray] = []
        ys: list[np.ndarray] = []
        for p in self._paths:
            row_of = [self.heatmap.row_of(s) if s >= 0 else None for s in p.steps]
            y = np.array([np.nan if row_of[r] is None else row_of[r] + 0.5 for r in p.rows], np.float64)
            x = (p.source_offset + p.frames + 0.5) * frame_s
            keep = ~np.isnan(y)
            if keep.any():
                xs += [x[keep], np.array([np.nan])]
                ys += [y[keep], np.array([np.nan])]
        if not xs:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(xs)[:-1], np.concatenate(ys)[:-1]

    def clear(self) -> None:
        """Remove the line."""
        self.set_paths([])
