"""The token chips (``TokenFlow``): one painted chip per ``StepEvent``, wrapping like text,
segment labels starting lines, each chip tinted by its probability, rank bucket or the raw
entropy (``gui.widgets.colors``); clicking selects a step, hovering shows its tooltip
(:func:`format_tooltip`). The token stream (``gui.widgets.token_stream``) scrolls it.

Speculative decoding's tokens carry a mark (``StepEvent.speculation``: accepted, resampled,
bonus; ``gui.widgets.speculation_marks``), and a drafted token the target rejected is a
hollow, struck-through *ghost* chip right after the token emitted in its place
(:meth:`TokenFlow.add_ghosts`; not a step: clicking it selects the step it follows).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from core.events import StepEvent

from .colors import COLOR_MODES, entropy_color, prob_color, rank_color, text_color_on
from .speculation_marks import draw_ghost, draw_mark, draw_near_tie, step_mark_line
from .token_text import display_text, readable_text

_PAD_X, _PAD_Y = 4, 2
_GAP_WORD, _GAP_SUBWORD = 6, 2
#: pixels between chip rows (and above the first)
LINE_GAP = 4


@dataclass
class _Item:
    kind: str  # "token" | "segment" | "ghost" (a rejected draft token after ``event``'s chip)
    text: str
    rect: QRect
    event: StepEvent | None = None
    width: int = 0  # pixels, measured once
    tip: str = ""  # a ghost's tooltip
    key: object = None  # a ghost's identity (its round): placing it again replaces it


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


def format_tooltip(ev: StepEvent, n_alternatives: int = 5, token_bytes=None) -> str:
    """Tooltip text for a token: its probabilities, rank, entropies and the top alternatives.
    ``token_bytes`` (token id -> raw bytes, or None): tokens that are part of a multi-byte UTF-8
    character are written as <0xE2><0x80> instead of "\ufffd"."""
    lines = [
        f"step {ev.step}: {readable_text(token_bytes, ev.token_id, ev.text)!r}",
        f"p = {ev.prob:.3f} (processed)   raw p = {ev.raw_prob:.3f}   raw rank {rank_text(ev.rank)}",
        f"entropy = {ev.entropy:.2f} nats   raw entropy = {ev.raw_entropy:.2f} nats, "
        f"varentropy = {ev.raw_varentropy:.2f} nats²",
    ]
    if ev.stages:
        lines.append(f"kept after the chain: {ev.kept} tokens")
    if ev.mu is not None:
        lines.append(f"mirostat μ = {ev.mu:.2f} bits")
    if ev.speculation:
        lines.append(step_mark_line(ev))
    if ev.topk:
        lines.append("alternatives:")
        for tp in ev.topk[:n_alternatives]:
            mark = "▶" if tp.id == ev.token_id else "  "
            lines.append(f" {mark} {readable_text(token_bytes, tp.id, tp.text)!r}  {tp.prob:.3f}")
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
        #: token id -> raw bytes (the tab's model's ``token_bytes``) for the tooltip, or None
        self.token_bytes = None
        self._tops: list[int] = []  # rect.top() of each item, non-decreasing (for bisect)
        self._by_step: dict[int, int] = {}
        self._selected: int | None = None
        self._mode = "probability"
        self._marks: dict[int, tuple[QColor, str]] = {}  # step -> (bar colour, tooltip line): what-if marks
        self._notes: dict[int, str] = {}  # step -> a near-tie round's tooltip line (dotted line above the chip)
        self._cursor = QPoint(_GAP_WORD, LINE_GAP)
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
        self.setMinimumHeight(self._line_h() + 2 * LINE_GAP)

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
            x, y = _GAP_WORD, y + h + LINE_GAP
        elif x > _GAP_WORD:
            x += gap
        if x + w > self._width - _GAP_WORD and x > _GAP_WORD:
            x, y = _GAP_WORD, y + h + LINE_GAP
        item.rect = QRect(x, y, w, h)
        self._cursor = QPoint(x + w, y)
        self._tops.append(y)

    def _gap_for(self, item: _Item) -> int:
        if item.kind == "ghost" or (item.kind == "token" and item.event is not None
                                    and not item.event.text.startswith(" ")):
            return _GAP_SUBWORD
        return _GAP_WORD

    def _relayout(self, start: int = 0) -> None:
        """Place the items from index ``start`` on again (those before it stay)."""
        if start <= 0:
            self._cursor = QPoint(_GAP_WORD, LINE_GAP)
        else:
            r = self._items[start - 1].rect
            self._cursor = QPoint(r.x() + r.width(), r.y())
        del self._tops[max(0, start):]
        for item in self._items[max(0, start):]:
            self._place(item, self._gap_for(item), newline=item.kind == "segment")
        self._update_height()

    def _update_height(self) -> None:
        h = self._cursor.y() + self._line_h() + 2 * LINE_GAP
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
        """Remove all chips, their near-tie notes and the selection."""
        self._items.clear()
        self._notes.clear()
        self._tops.clear()
        self._by_step.clear()
        self._selected = None
        self._cursor = QPoint(_GAP_WORD, LINE_GAP)
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
            item = _Item("token", display_text(readable_text(self.token_bytes, ev.token_id, ev.text)), QRect(), ev)
            self._by_step[ev.step] = len(self._items)
            self._items.append(item)
            self._place(item, self._gap_for(item), newline=False)
        self._update_height()

    def add_ghosts(self, ghosts: list[tuple[int, object, str, str]]) -> int:
        """Show rejected draft tokens: (step, key, token text, tooltip) each, as a ghost chip
        right after the chip of that step (and after the ghosts already there); a ghost with
        the same ``key`` (its round) is replaced. Steps without a chip are skipped. Lays out
        again from the first changed chip only (usually the newest ones). Returns the ghosts
        placed."""
        by_step: dict[int, list[tuple[object, str, str]]] = {}
        for step, key, text, tip in ghosts:
            if step in self._by_step:
                by_step.setdefault(step, []).append((key, text, tip))
        if not by_step:
            return 0
        keys = {key for new in by_step.values() for key, _t, _tip in new}
        start = min(self._by_step[s] for s in by_step)
        tail, placed, i = self._items[start:], [], 0
        while i < len(tail):
            it = tail[i]
            i += 1
            if it.kind == "ghost" and it.key in keys:
                continue  # placed again below
            placed.append(it)
            if it.kind == "token" and it.event is not None and it.event.step in by_step:
                while i < len(tail) and tail[i].kind == "ghost":  # the ghosts already after it stay first
                    if tail[i].key not in keys:
                        placed.append(tail[i])
                    i += 1
                placed += [_Item("ghost", display_text(text), QRect(), it.event, tip=tip, key=key)
                           for key, text, tip in by_step[it.event.step]]
        self._items[start:] = placed
        for k in range(start, len(self._items)):
            it = self._items[k]
            if it.kind == "token" and it.event is not None:
                self._by_step[it.event.step] = k
        self._relayout(start)
        return sum(len(v) for v in by_step.values())

    def add_notes(self, notes: dict[int, str]) -> None:
        """Mark the chips of some steps as a near-tie round's (step -> tooltip line): a
        dotted line above each; they go with :meth:`clear`."""
        self._notes.update({int(k): str(v) for k, v in notes.items()})
        self.update()

    def notes(self) -> dict[int, str]:
        """step -> near-tie tooltip line."""
        return dict(self._notes)

    def ghosts(self) -> list[tuple[int, str]]:
        """(step it follows, text) of each ghost chip, in order."""
        return [(it.event.step, it.text) for it in self._items if it.kind == "ghost" and it.event is not None]

    def ghost_rect(self, step: int) -> QRect | None:
        """The ghost chip after ``step``'s chip, in widget pixels (None if none)."""
        i = self._by_step.get(step)
        if i is None or i + 1 >= len(self._items) or self._items[i + 1].kind != "ghost":
            return None
        return QRect(self._items[i + 1].rect)

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
        return rows * (self._line_h() + LINE_GAP) + LINE_GAP

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

    def chip_text(self, step: int) -> str | None:
        """The text drawn on the chip of ``step`` (partial UTF-8 bytes as <0xE2><0x80>), or None."""
        i = self._by_step.get(step)
        return self._items[i].text if i is not None else None

    def chip_rect(self, step: int) -> QRect | None:
        """The chip of ``step`` in widget pixels (None if absent)."""
        i = self._by_step.get(step)
        return None if i is None else QRect(self._items[i].rect)

    def _item_at(self, pos: QPoint) -> _Item | None:
        for i in self._visible_range(pos.y(), pos.y()):
            it = self._items[i]
            if it.kind != "segment" and it.rect.contains(pos) and it.event is not None:
                return it
        return None

    def step_at(self, pos: QPoint) -> int | None:
        """The step whose chip (or the ghost after it) is under ``pos`` (widget pixels), or None."""
        it = self._item_at(pos)
        return None if it is None else it.event.step

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
            it = self._item_at(e.pos())
            if it is not None and it.kind == "ghost":
                QToolTip.showText(e.globalPos(), it.tip, self)
            elif it is not None:
                ev = it.event
                mark = self._marks.get(ev.step)
                note = self._notes.get(ev.step)
                tip = format_tooltip(ev, token_bytes=self.token_bytes)
                QToolTip.showText(e.globalPos(), tip + (f"\n{mark[1]}" if mark else "")
                                  + (f"\n{note}" if note else ""), self)
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
            if it.kind == "ghost":
                p.setFont(self.font())
                draw_ghost(p, it.rect, it.text, self.palette().placeholderText().color())
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
            if ev.speculation:
                draw_mark(p, it.rect, ev.speculation)
                if ev.step in self._notes:
                    draw_near_tie(p, it.rect)
            mark = self._marks.get(ev.step)
            if mark is not None:  # a what-if mark: a thick bar along the chip's bottom edge
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(mark[0])
                p.drawRoundedRect(QRect(it.rect.left() + 1, it.rect.bottom() - 3, it.rect.width() - 2, 4), 2, 2)
        p.end()
