"""The emitted tokens as chips, each tinted (viridis, fixed levels) by its probability, by
its rank bucket in the raw distribution (top-1 / top-10 / top-100 / beyond, as GLTR does) or
by the raw distribution's entropy; a combo box in the header picks the mode and the legend
beside it follows.

Tokens are appended live as ``StepEvent``s arrive; a ``SegmentEvent`` starts a new
line with a grey label in front of its tokens (e.g. "0.0–30.0 s · language en (98%)").
Clicking a chip selects that step (``stepSelected(int)``); hovering shows its
probability and the top alternatives. In beam search the live beams (``BeamEvent``)
are listed above the stream, best first. The scroll area is at least
``MIN_VISIBLE_ROWS`` chip rows high; it follows the newest chip while decoding (unless
the user scrolled away from it or selected a step) and scrolls a selected chip into view.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QEvent, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QLinearGradient, QPainter, QPen, QTextCursor, QTextOption
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from core.events import BeamEvent, Finished, SegmentEvent, StepEvent

from .follow import follow_run
from .colors import (
    COLOR_MODES,
    ENTROPY_SCALE,
    LUT,
    RANK_BUCKETS,
    RANK_LEVELS,
    entropy_color,
    prob_color,
    rank_color,
    text_color_on,
)

_PAD_X, _PAD_Y = 4, 2
_GAP_WORD, _GAP_SUBWORD, _LINE_GAP = 6, 2, 4
#: chip rows the token stream's scroll area always shows (its minimum height)
MIN_VISIBLE_ROWS = 3


def display_text(text: str) -> str:
    """How a token's text is drawn on its chip: leading space dropped, whitespace made visible."""
    shown = text[1:] if text.startswith(" ") else text
    shown = shown.replace("\n", "↵").replace("\t", "⇥")
    if shown == "":
        return "␣" if text else "∅"
    if shown.strip() == "":
        return "␣" * len(shown)
    return shown


@dataclass
class _Item:
    kind: str  # "token" | "segment"
    text: str
    rect: QRect
    event: StepEvent | None = None
    width: int = 0  # pixels, measured once


#: a whisper timestamp token's text ("<|3.80|>")
_TIMESTAMP = re.compile(r"<\|\d+(?:\.\d+)?\|>")


def live_text(token_texts: list[str]) -> str:
    """Detokenised text of token display texts: SentencePiece's word-start mark ``▁``
    becomes a space (so the text wraps at words) and whisper's timestamp tokens
    ("<|3.80|>") are left out, as in the final text; nothing else changes."""
    return "".join(t for t in token_texts if not _TIMESTAMP.fullmatch(t)).replace("▁", " ")


def chip_color(ev: StepEvent, mode: str = "probability") -> QColor:
    """The colour of ``ev``'s chip in colouring ``mode`` (one of ``COLOR_MODES``)."""
    if mode == "rank":
        return rank_color(ev.rank)
    if mode == "entropy":
        return entropy_color(ev.raw_entropy)
    return prob_color(ev.prob)


def rank_text(rank: int) -> str:
    """A raw rank for people: "1", "37", "> 1000" (ranks beyond 1000 are not counted)."""
    return "> 1000" if rank > 1000 else str(rank)


def format_tooltip(ev: StepEvent, n_alternatives: int = 5) -> str:
    """Tooltip text for a token: its probabilities, rank, entropies and the top alternatives."""
    lines = [
        f"step {ev.step}: {ev.text!r}",
        f"p = {ev.prob:.3f} (processed)   raw p = {ev.raw_prob:.3f}   raw rank {rank_text(ev.rank)}",
        f"entropy = {ev.entropy:.2f} nats   raw entropy = {ev.raw_entropy:.2f} nats, "
        f"varentropy = {ev.raw_varentropy:.2f} nats²",
    ]
    if ev.stages:
        lines.append(f"kept after the chain: {ev.kept} tokens")
    if ev.mu is not None:
        lines.append(f"mirostat μ = {ev.mu:.2f} bits")
    if ev.topk:
        lines.append("alternatives:")
        for tp in ev.topk[:n_alternatives]:
            mark = "▶" if tp.id == ev.token_id else "  "
            lines.append(f" {mark} {tp.text!r}  {tp.prob:.3f}")
    return "\n".join(lines)


class TokenFlow(QWidget):
    """Painted chips that wrap like text. One chip per ``StepEvent``; segment labels start lines.

    Signals:
        stepSelected(int): the user clicked the chip of that step.
        stepHovered(object): the mouse moved over the chip of a step (its index), or off
            the chips (None).
    """

    stepSelected = Signal(int)
    stepHovered = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._items: list[_Item] = []
        self._tops: list[int] = []  # rect.top() of each item, non-decreasing (for bisect)
        self._by_step: dict[int, int] = {}
        self._selected: int | None = None
        self._mode = "probability"
        self._marks: dict[int, tuple[QColor, str]] = {}  # step -> (bar colour, tooltip line): what-if marks
        self._cursor = QPoint(_GAP_WORD, _LINE_GAP)
        self._width = 400
        f = QFont(self.font())
        f.setPointSizeF(max(f.pointSizeF(), 10.0) + 1)
        self.setFont(f)
        self._fm = QFontMetrics(f)
        self._label_font = QFont(f)
        self._label_font.setItalic(True)
        self._label_font.setPointSizeF(f.pointSizeF() - 2)
        self._label_fm = QFontMetrics(self._label_font)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        self.setMinimumHeight(self._line_h() + 2 * _LINE_GAP)

    # ------------------------------------------------------------- layout
    def _line_h(self) -> int:
        return self._fm.height() + 2 * _PAD_Y

    def _place(self, item: _Item, gap: int, newline: bool) -> None:
        if not item.width:
            fm = self._label_fm if item.kind == "segment" else self._fm
            item.width = fm.horizontalAdvance(item.text) + 2 * _PAD_X
        w = item.width
        h = self._line_h()
        x, y = self._cursor.x(), self._cursor.y()
        if newline and x > _GAP_WORD:
            x, y = _GAP_WORD, y + h + _LINE_GAP
        elif x > _GAP_WORD:
            x += gap
        if x + w > self._width - _GAP_WORD and x > _GAP_WORD:
            x, y = _GAP_WORD, y + h + _LINE_GAP
        item.rect = QRect(x, y, w, h)
        self._cursor = QPoint(x + w, y)
        self._tops.append(y)

    def _gap_for(self, item: _Item) -> int:
        if item.kind == "token" and item.event is not None and not item.event.text.startswith(" "):
            return _GAP_SUBWORD
        return _GAP_WORD

    def _relayout(self) -> None:
        self._cursor = QPoint(_GAP_WORD, _LINE_GAP)
        self._tops = []
        for item in self._items:
            self._place(item, self._gap_for(item), newline=item.kind == "segment")
        self._update_height()

    def _update_height(self) -> None:
        h = self._cursor.y() + self._line_h() + 2 * _LINE_GAP
        if self.minimumHeight() != h:
            self.setMinimumHeight(h)
        self.update()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        if event.size().width() != self._width:
            self._width = max(80, event.size().width())
            self._relayout()
        super().resizeEvent(event)

    def sizeHint(self) -> QSize:
        return QSize(self._width, self.minimumHeight())

    # ---------------------------------------------------------------- API
    def clear(self) -> None:
        """Remove all chips and the selection."""
        self._items.clear()
        self._tops.clear()
        self._by_step.clear()
        self._selected = None
        self._cursor = QPoint(_GAP_WORD, _LINE_GAP)
        self._update_height()

    def add_segment(self, label: str) -> None:
        """Start a new line headed by ``label``."""
        item = _Item("segment", label, QRect())
        self._items.append(item)
        self._place(item, _GAP_WORD, newline=True)  # the tokens follow on the label's line
        self._update_height()

    def append(self, ev: StepEvent) -> None:
        """Add one token chip for ``ev``."""
        self.append_many([ev])

    def append_many(self, events: list[StepEvent]) -> None:
        """Add one chip per event, then lay out and repaint once (a frame's batch)."""
        for ev in events:
            item = _Item("token", display_text(ev.text), QRect(), ev)
            self._by_step[ev.step] = len(self._items)
            self._items.append(item)
            self._place(item, self._gap_for(item), newline=False)
        self._update_height()

    def _visible_range(self, top: int, bottom: int) -> range:
        """Indices of the items whose rows may intersect the band [top, bottom] (pixels):
        found by bisection, so painting and hit tests cost O(visible), not O(all tokens)."""
        h = self._line_h()
        lo = bisect.bisect_left(self._tops, top - h)
        hi = bisect.bisect_right(self._tops, bottom)
        return range(lo, hi)

    def token_count(self) -> int:
        """Number of token chips."""
        return len(self._by_step)

    def rows_height(self, rows: int) -> int:
        """Height in pixels that ``rows`` rows of chips take (with the gaps around them)."""
        return rows * (self._line_h() + _LINE_GAP) + _LINE_GAP

    def last_step(self) -> int | None:
        """The step of the newest chip, or None."""
        for it in reversed(self._items):
            if it.kind == "token" and it.event is not None:
                return it.event.step
        return None

    def steps(self) -> list[StepEvent]:
        """The StepEvents shown, in order."""
        return [it.event for it in self._items if it.kind == "token" and it.event is not None]

    def segment_labels(self) -> list[str]:
        """The labels that start the segments' lines ("sentence 1", "line 2", ...), in order."""
        return [it.text for it in self._items if it.kind == "segment"]

    def chip_rect(self, step: int) -> QRect | None:
        """The chip of ``step`` in widget pixels (None if absent)."""
        i = self._by_step.get(step)
        return None if i is None else QRect(self._items[i].rect)

    def step_at(self, pos: QPoint) -> int | None:
        """The step whose chip is under ``pos`` (widget pixels), or None."""
        for i in self._visible_range(pos.y(), pos.y()):
            it = self._items[i]
            if it.kind == "token" and it.rect.contains(pos) and it.event is not None:
                return it.event.step
        return None

    def selected_step(self) -> int | None:
        """The highlighted step, or None."""
        return self._selected

    def set_selected(self, step: int | None) -> None:
        """Highlight ``step`` without emitting ``stepSelected``."""
        self._selected = step if step in self._by_step else None
        self.update()

    def set_color_mode(self, mode: str) -> None:
        """Colour the chips by ``mode`` ("probability", "rank" or "entropy"); repaints."""
        if mode not in COLOR_MODES:
            raise ValueError(f"colour mode must be one of {', '.join(COLOR_MODES)}, got {mode!r}")
        if mode != self._mode:
            self._mode = mode
            self.update()

    def color_mode(self) -> str:
        """The colouring mode."""
        return self._mode

    def chip_color(self, step: int) -> QColor | None:
        """The fill colour of the chip of ``step`` in the current mode (None if absent)."""
        i = self._by_step.get(step)
        ev = None if i is None else self._items[i].event
        return None if ev is None else chip_color(ev, self._mode)

    def set_marks(self, marks: dict[int, tuple[str, str]]) -> None:
        """Underline the chips of some steps: step -> (colour, a line for the tooltip). The
        what-ifs (``gui.tabs.whatif``) mark the tokens that depended on a masked part of the
        input, or that the decoder's prior alone explains. The marks stay until replaced
        (also across ``clear``, as the steps do not change when a branch is replayed)."""
        self._marks = {int(k): (QColor(c), str(t)) for k, (c, t) in marks.items()}
        self.update()

    def marks(self) -> dict[int, tuple[str, str]]:
        """step -> (colour name, tooltip line) of the marked chips."""
        return {k: (c.name(), t) for k, (c, t) in self._marks.items()}

    # ------------------------------------------------------------- events
    def mousePressEvent(self, event) -> None:  # noqa: N802
        step = self.step_at(event.position().toPoint())
        if step is not None and event.button() == Qt.MouseButton.LeftButton:
            self.set_selected(step)
            self.stepSelected.emit(step)
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        self.stepHovered.emit(self.step_at(event.position().toPoint()))
        super().mouseMoveEvent(event)

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.stepHovered.emit(None)
        super().leaveEvent(event)

    def event(self, e) -> bool:
        if e.type() == e.Type.ToolTip:
            step = self.step_at(e.pos())
            if step is not None:
                ev = self._items[self._by_step[step]].event
                mark = self._marks.get(step)
                QToolTip.showText(e.globalPos(), format_tooltip(ev) + (f"\n{mark[1]}" if mark else ""), self)
            else:
                QToolTip.hideText()
                e.ignore()
            return True
        return super().event(e)

    def paintEvent(self, _event) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        clip = _event.rect()
        for i in self._visible_range(clip.top(), clip.bottom()):
            it = self._items[i]
            if not it.rect.intersects(clip):
                continue
            if it.kind == "segment":
                p.setFont(self._label_font)
                p.setPen(self.palette().placeholderText().color())
                p.drawText(it.rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, it.text)
                continue
            ev = it.event
            bg = chip_color(ev, self._mode)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(bg)
            p.drawRoundedRect(it.rect, 4, 4)
            if ev.step == self._selected:
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.setPen(QPen(QColor("#ff3b30"), 2.5))
                p.drawRoundedRect(it.rect.adjusted(-1, -1, 1, 1), 5, 5)
            p.setFont(self.font())
            p.setPen(text_color_on(bg))
            p.drawText(it.rect, Qt.AlignmentFlag.AlignCenter, it.text)
            mark = self._marks.get(ev.step)
            if mark is not None:  # a what-if mark: a thick bar along the chip's bottom edge
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(mark[0])
                p.drawRoundedRect(QRect(it.rect.left() + 1, it.rect.bottom() - 3, it.rect.width() - 2, 4), 2, 2)
        p.end()


class ColorLegend(QWidget):
    """What a chip colour means in the current colouring mode: a viridis bar "p 0 … 1"
    (probability), four swatches (rank buckets) or a bar "H 0 … 4+ nats" (entropy)."""

    _TIPS = {
        "probability": "colour = probability of the chosen token (processed distribution), fixed scale 0..1",
        "rank": "colour = rank of the chosen token in the raw distribution, in GLTR's buckets: the model's "
                "favourite (top-1), its top 10, its top 100, or further down (Gehrmann et al. 2019)",
        "entropy": f"colour = entropy of the raw distribution at the step, nats, fixed scale 0..{ENTROPY_SCALE:g}: "
                   "bright = the model was sure, dark = it hesitated",
    }

    def __init__(self, mode: str = "probability", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._mode = ""
        self.setFixedHeight(18)
        self.set_mode(mode)

    def set_mode(self, mode: str) -> None:
        """Show the legend of colouring ``mode``."""
        if mode == self._mode:
            return
        self._mode = mode
        self.setToolTip(self._TIPS.get(mode, ""))
        fm = self.fontMetrics()
        if mode == "rank":
            w = fm.horizontalAdvance("rank ") + sum(fm.horizontalAdvance(t) + 18 for t in self._rank_labels())
        else:
            w = 170 if mode == "probability" else 200
        self.setFixedWidth(w + 4)
        self.update()

    def mode(self) -> str:
        return self._mode

    @staticmethod
    def _rank_labels() -> list[str]:
        return [label for _bound, label in RANK_BUCKETS]

    def text(self) -> str:
        """The legend as text (what it says in words)."""
        if self._mode == "rank":
            return "rank " + " · ".join(self._rank_labels())
        if self._mode == "entropy":
            return f"raw entropy 0 … {ENTROPY_SCALE:g}+ nats"
        return "p 0 … 1"

    def _bar(self, p: QPainter, left: str, right: str, reverse: bool) -> None:
        fm = p.fontMetrics()
        lw = fm.horizontalAdvance(left + " ") + 2
        rw = fm.horizontalAdvance(" " + right) + 2
        bar = QRect(lw, 3, self.width() - lw - rw, self.height() - 6)
        grad = QLinearGradient(bar.left(), 0, bar.right(), 0)
        for i in list(range(0, 256, 32)) + [255]:
            r, g, b, _a = LUT[255 - i if reverse else i]
            grad.setColorAt(i / 255, QColor(int(r), int(g), int(b)))
        p.fillRect(bar, grad)
        p.setPen(self.palette().windowText().color())
        p.drawText(QRect(0, 0, lw, self.height()), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, left + " ")
        p.drawText(QRect(bar.right() + 2, 0, rw, self.height()), Qt.AlignmentFlag.AlignVCenter, " " + right)

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        if self._mode == "rank":
            fm = p.fontMetrics()
            fg = self.palette().windowText().color()
            p.setPen(fg)
            x = fm.horizontalAdvance("rank ")
            p.drawText(QRect(0, 0, x, self.height()), Qt.AlignmentFlag.AlignVCenter, "rank ")
            for (bound, label), level in zip(RANK_BUCKETS, RANK_LEVELS):
                p.fillRect(QRect(x, 3, 12, self.height() - 6), prob_color(level))
                p.setPen(fg)
                tw = fm.horizontalAdvance(label)
                p.drawText(QRect(x + 14, 0, tw + 4, self.height()), Qt.AlignmentFlag.AlignVCenter, label)
                x += tw + 18
        elif self._mode == "entropy":
            self._bar(p, "H 0", f"{ENTROPY_SCALE:g}+ nats", reverse=True)
        else:
            self._bar(p, "p 0", "1", reverse=False)
        p.end()


#: the earlier name of the legend (probability mode only)
ColorBar = ColorLegend


class TokenStreamView(QWidget):
    """Token chips + live beams + the running text.

    Signals:
        stepSelected(int): the user clicked a token.
        stepHovered(object): the step whose chip is under the mouse, or None.
        colorModeChanged(str): the user (or ``set_color_mode``) picked another colouring.
        cleared(): the chips were removed (a new run, or the input went away).
    """

    stepSelected = Signal(int)
    stepHovered = Signal(object)
    colorModeChanged = Signal(str)
    cleared = Signal()

    #: the colouring modes as the combo box lists them
    MODE_LABELS = {"probability": "probability", "rank": "rank (GLTR)", "entropy": "entropy"}

    def __init__(self, run=None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.flow = TokenFlow()
        self.flow.stepSelected.connect(self.stepSelected)
        self.flow.stepHovered.connect(self.stepHovered)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self.flow)
        self.scroll.setFrameShape(QFrame.Shape.StyledPanel)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # chips wrap
        self.scroll.setMinimumHeight(self.flow.rows_height(MIN_VISIBLE_ROWS) + 2 * self.scroll.frameWidth())

        self.title = QLabel("<b>Token stream</b> — click a token to inspect its step")
        self.count_label = QLabel("")
        header = QHBoxLayout()
        header.addWidget(self.title)
        header.addStretch(1)
        header.addWidget(self.count_label)
        self.color_combo = QComboBox()
        for mode in COLOR_MODES:
            self.color_combo.addItem(self.MODE_LABELS[mode], mode)
        self.color_combo.setToolTip(
            "Colour the tokens by the chosen token's probability (processed distribution), by its rank "
            "in the raw distribution (GLTR's buckets: top-1, top-10, top-100, beyond) or by the raw "
            "distribution's entropy at the step"
        )
        self.color_combo.currentIndexChanged.connect(self._color_combo_changed)
        self.legend = ColorLegend("probability")
        self.strip_button = QToolButton()
        self.strip_button.setText("strip")
        self.strip_button.setCheckable(True)
        self.strip_button.setChecked(True)
        self.strip_button.setToolTip("show or hide the per-step strip (entropy, varentropy, kept tokens, μ)")
        self.strip_button.hide()  # until a strip is set
        self.strip_button.toggled.connect(self._strip_toggled)
        self._strip: QWidget | None = None
        header.addSpacing(10)
        header.addWidget(QLabel("colour"))
        header.addWidget(self.color_combo)
        header.addWidget(self.legend)
        header.addWidget(self.strip_button)

        self.beams = QListWidget()
        self.beams.setMaximumHeight(96)
        self.beams.setToolTip("live beams, best first: cumulative log-probability and text")
        self.beams.hide()

        # the decoded text: a read-only editor that wraps anywhere (a long unbroken word never
        # widens the window) and appends each frame's batch in O(batch)
        self.text_label = QPlainTextEdit()
        self.text_label.setReadOnly(True)
        self.text_label.setFrameShape(QFrame.Shape.NoFrame)
        self.text_label.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.text_label.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.text_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.text_label.setFixedHeight(2 * self.text_label.fontMetrics().lineSpacing() + 8)
        self.text_label.viewport().setAutoFillBackground(False)
        self.text_label.setToolTip("the decoded text (selectable)")

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(3)
        # the header and the strip below it share one item of the layout (no spacing between
        # them): a strip squeezed to nothing leaves the stream's minimum height as it was
        self._top = QVBoxLayout()
        self._top.setContentsMargins(0, 0, 0, 0)
        self._top.setSpacing(0)
        self._top.addLayout(header)
        lay.addLayout(self._top)
        lay.addWidget(self.beams)
        lay.addWidget(self.scroll, 1)
        lay.addWidget(self.text_label)
        self._text_parts: list[str] = []
        if run is not None:  # the run's steps, segments, beams and selection, once per frame
            follow_run(run, self)
            run.beamsAdded.connect(lambda beams: self.set_beams(beams[-1]))

    # ---------------------------------------------------------------- API
    def clear(self) -> None:
        """Forget the previous run."""
        self.flow.clear()
        self.beams.clear()
        self.beams.hide()
        self._text_parts.clear()
        self._set_text("")
        self.count_label.setText("")
        self.cleared.emit()

    def set_marks(self, marks: dict[int, tuple[str, str]]) -> None:
        """Underline the chips of some steps (``TokenFlow.set_marks``)."""
        self.flow.set_marks(marks)

    def set_strip(self, strip: QWidget) -> None:
        """Put ``strip`` (a thin per-step plot) between the header and the chips; the header's
        "strip" button shows and hides it. The strip should be able to shrink (its minimum
        height 0): the chips keep their ``MIN_VISIBLE_ROWS`` rows first."""
        if self._strip is not None:
            self._top.removeWidget(self._strip)
        self._strip = strip
        self._top.addWidget(strip)
        self.strip_button.show()
        strip.setVisible(self.strip_button.isChecked())

    def set_strip_visible(self, visible: bool) -> None:
        """Show or hide the strip (as the header's button does)."""
        self.strip_button.setChecked(visible)

    def strip_visible(self) -> bool:
        """Whether the strip is switched on (it is shown when the stream is)."""
        return self._strip is not None and self.strip_button.isChecked()

    def _strip_toggled(self, on: bool) -> None:
        if self._strip is not None:
            self._strip.setVisible(on)

    def set_color_mode(self, mode: str) -> None:
        """Colour the chips by ``mode`` ("probability", "rank" or "entropy") and show its legend."""
        self.flow.set_color_mode(mode)  # raises ValueError for an unknown mode
        i = self.color_combo.findData(mode)
        if i != self.color_combo.currentIndex():
            self.color_combo.setCurrentIndex(i)  # -> _color_combo_changed
            return
        self.legend.set_mode(mode)
        self.colorModeChanged.emit(mode)

    def color_mode(self) -> str:
        """The colouring mode of the chips."""
        return self.flow.color_mode()

    def _color_combo_changed(self, _i: int) -> None:
        mode = self.color_combo.currentData()
        self.flow.set_color_mode(mode)
        self.legend.set_mode(mode)
        self.colorModeChanged.emit(mode)

    def _set_text(self, text: str) -> None:
        self.text_label.setPlainText(text)

    def handle(self, ev) -> None:
        """Show one event (StepEvent, SegmentEvent, BeamEvent, Finished); others are ignored."""
        if isinstance(ev, StepEvent):
            self.append_step(ev)
        elif isinstance(ev, SegmentEvent):
            self.flow.add_segment(ev.label)
            if self._text_parts:  # each segment's text starts a paragraph (cheap to lay out)
                self._text_parts.append("\n")
                cursor = self.text_label.textCursor()
                cursor.movePosition(QTextCursor.MoveOperation.End)
                cursor.insertText("\n")
        elif isinstance(ev, BeamEvent):
            self.set_beams(ev)
        elif isinstance(ev, Finished):
            self.finish(ev)

    def append_step(self, ev: StepEvent) -> None:
        """Append one token (see :meth:`append_steps`)."""
        self.append_steps([ev])

    def append_steps(self, events: list[StepEvent]) -> None:
        """Append a batch of tokens (one frame's worth); scroll the newest into view if the
        previous newest chip was in view and no step is selected (the user did not scroll or
        click away). The text below grows by the batch's detokenised text."""
        if not events:
            return
        prev = self.flow.last_step()
        follow = self.flow.selected_step() is None and (prev is None or self.chip_visible(prev))
        self.flow.append_many(events)
        chunk = live_text([ev.text for ev in events])
        if not self._text_parts:
            chunk = chunk.lstrip()
        self._text_parts.extend(ev.text for ev in events)
        if chunk:
            cursor = self.text_label.textCursor()
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(chunk)
            self.text_label.ensureCursorVisible()
        self.count_label.setText(f"{self.flow.token_count()} tokens")
        if follow:
            self.scroll_to_step(events[-1].step)

    def set_beams(self, ev: BeamEvent) -> None:
        """List the live beams of a beam-search step (best first)."""
        self.beams.show()
        self.beams.clear()
        for i, h in enumerate(ev.beams):
            self.beams.addItem(f"#{i + 1}  {h.score:8.3f}  {h.text.strip() or '∅'}")
        for h in ev.finished[:3]:
            self.beams.addItem(f"done {h.score:8.3f}  {h.text.strip() or '∅'}")

    def finish(self, ev: Finished) -> None:
        """Show the final text (also when no StepEvents came, e.g. a beam run)."""
        text = ev.text.strip() if ev.text else live_text(self._text_parts).strip()
        self._set_text(text + ("  (cancelled)" if ev.cancelled else ""))
        self.count_label.setText(f"{self.flow.token_count()} tokens · {ev.reason}")

    def text(self) -> str:
        """The text shown below the chips."""
        return self.text_label.toPlainText()

    def token_count(self) -> int:
        """Number of token chips."""
        return self.flow.token_count()

    def segment_labels(self) -> list[str]:
        """The segment labels heading the chip lines, in order."""
        return self.flow.segment_labels()

    def set_text_visible(self, visible: bool) -> None:
        """Show or hide the decoded text below the chips (a tab that shows it elsewhere hides it);
        :meth:`text` returns it either way."""
        self.text_label.setVisible(visible)

    def select_step(self, step: int | None) -> None:
        """Highlight ``step`` (no signal) and scroll its chip into view."""
        self.flow.set_selected(step)
        if step is not None:
            self.scroll_to_step(step)

    def _sync_scroll_area(self) -> None:
        # The scroll area resizes the chips widget (and the scroll bar range) on a posted
        # LayoutRequest; do it now so ensureVisible sees the chips just added.
        QCoreApplication.sendEvent(self.scroll, QEvent(QEvent.Type.LayoutRequest))

    def scroll_to_step(self, step: int) -> None:
        """Scroll the chip of ``step`` fully into view (no-op if absent)."""
        r = self.flow.chip_rect(step)
        if r is None:
            return
        self._sync_scroll_area()
        c = r.center()
        self.scroll.ensureVisible(c.x(), c.y(), 10, r.height() // 2 + _LINE_GAP + 1)

    def chip_visible(self, step: int) -> bool:
        """Whether the chip of ``step`` lies fully inside the scroll area's viewport."""
        r = self.flow.chip_rect(step)
        if r is None:
            return False
        vp = self.scroll.viewport()
        top_left = self.flow.mapFrom(vp, QPoint(0, 0))
        return QRect(top_left, vp.size()).adjusted(0, -1, 0, 1).contains(r)
