"""Whisper's language detection shown (issue 14 section 4): the language probabilities at
<|startoftranscript|> as top-5 horizontal bars, and the field that restricts the candidates.

- :class:`LanguageBars`: a small QPainter view of one window's ``SegmentEvent.language_probs``
  ((code, probability) best first; the softmax over the language tokens, or over the
  candidate languages). :meth:`LanguageBars.follow` makes it a view over a ``RunState``:
  it shows the window of the current step (the selected one, else the newest) of the
  current branch, and empties when the run is cleared. Hidden while there is nothing to
  show (English-only models have no language tokens), so the waveform keeps the room. A
  clear keeps the bars' room (hidden, not laid out again) until the next run's first frame
  says whether it has language probabilities, or :data:`KEEP_ROOM_MS` pass: a re-decode
  after a slider move hid them and showed them again ~50 ms later, and each time the
  waveform beside them was resized (its plot laid out and its axes drawn again) in the
  frames that must be quick (issue 22).
- :class:`CandidatesEdit`: a line edit "en, de, fr" (empty = all languages); codes the
  loaded model does not know are marked and named in its tooltip (the decode refuses them
  with a one-line error too).
"""

from __future__ import annotations

import re
from typing import Sequence

from PySide6.QtCore import QEvent, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QLineEdit, QSizePolicy, QWidget

from .colors import prob_color

#: how many bars the view draws
TOP_N = 5
#: after a clear, the bars' room is kept at most this long (ms) for the next run's first frame
KEEP_ROOM_MS = 1500
_CANDIDATES_TIP = ("candidate languages: detect the spoken language among these codes only, e.g. \"en, de, fr\" "
                   "(the softmax runs over their language tokens, as whisper and faster-whisper users restrict it); "
                   "empty = all the model's languages. English-only models ignore it.")


def parse_candidates(text: str) -> tuple[str, ...]:
    """Codes in ``text`` ("en, de fr" -> ("en", "de", "fr")): split at commas and spaces,
    lower-cased, repeats dropped, order kept; () for blank text."""
    return tuple(dict.fromkeys(c.lower() for c in re.split(r"[,\s;]+", text) if c))


class CandidatesEdit(QLineEdit):
    """The candidate-languages field.

    Signals:
        candidatesChanged(tuple): the parsed codes after an edit that changed them (Enter or
            focus out); () = all languages.
    """

    candidatesChanged = Signal(tuple)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText("all languages")
        self.setToolTip(_CANDIDATES_TIP)
        self.setClearButtonEnabled(True)
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance("all languages") + 28)  # the text and clear button
        self.setMaximumWidth(150)
        self._known: set[str] | None = None  # None: no model loaded, accept anything
        self._last: tuple[str, ...] = ()
        self.editingFinished.connect(self._finished)
        self.textChanged.connect(lambda _t: self._mark())

    def codes(self) -> tuple[str, ...]:
        """The parsed codes; () = all languages."""
        return parse_candidates(self.text())

    def unknown(self) -> list[str]:
        """Codes the loaded model does not know ([] before a model is loaded)."""
        return [c for c in self.codes() if self._known is not None and c not in self._known]

    def set_languages(self, languages: Sequence[str] | None) -> None:
        """The loaded model's language codes (None: not known yet)."""
        self._known = set(languages) if languages is not None else None
        self._mark()

    def set_codes(self, codes: Sequence[str] | str, notify: bool = False) -> None:
        """Show ``codes`` ("en, de" or a sequence); ``notify``: emit candidatesChanged if they changed."""
        self.blockSignals(True)
        self.setText(", ".join(parse_candidates(codes if isinstance(codes, str) else " ".join(codes))))
        self.blockSignals(False)
        self._mark()
        if notify:
            self._finished()
        else:
            self._last = self.codes()

    def _finished(self) -> None:
        codes = self.codes()
        if codes != self._last:
            self._last = codes
            self.candidatesChanged.emit(codes)

    def _mark(self) -> None:
        bad = self.unknown()
        self.setStyleSheet("QLineEdit { border: 1px solid #d55e00; }" if bad else "")
        self.setToolTip(f"unknown language code(s): {', '.join(bad)}. " + _CANDIDATES_TIP if bad else _CANDIDATES_TIP)


class LanguageBars(QWidget):
    """Top-5 language probabilities of one window as horizontal bars (viridis, fixed scale 0..1)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._probs: tuple[tuple[str, float], ...] = ()
        self._window: int | None = None
        self._restricted = False
        self._run = None
        self._hint: QSize | None = None  # sizeHint, computed once per title and font
        self._room_timer = QTimer(self)  # a clear's kept room goes when it fires
        self._room_timer.setSingleShot(True)
        self._room_timer.timeout.connect(lambda: self._keep_room(False))
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        self.setMinimumHeight(self.sizeHint().height())
        self.setVisible(False)

    # ------------------------------------------------------------ data
    def set_probs(self, probs: Sequence[Sequence], window: int | None = None, restricted: bool = False) -> None:
        """Show ``probs`` ((code, probability) best first; lists from a saved exploration too)
        of window ``window``; ``restricted``: they are over candidate languages only."""
        probs = tuple((str(c), float(p)) for c, p in probs)
        if probs:
            self._keep_room(False)  # shown: the room is the bars' own again
        if (probs, window, restricted) == (self._probs, self._window, self._restricted):
            return
        title = self.title()
        self._probs, self._window, self._restricted = probs, window, restricted
        self.setVisible(bool(probs))
        if self.title() != title:
            self._hint = None
            self.updateGeometry()  # the title's width may have changed
        lines = [f"{c}: {p:.4f}" for c, p in probs]
        self.setToolTip("Whisper's language probabilities at <|startoftranscript|>"
                        + (f" (window {window + 1})" if window is not None else "")
                        + (", over the candidate languages only" if restricted else "") + ":\n" + "\n".join(lines))
        self.update()

    def bars(self) -> list[tuple[str, float]]:
        """The (code, probability) pairs drawn, top to bottom (at most ``TOP_N``)."""
        return list(self._probs[:TOP_N])

    def title(self) -> str:
        """The heading drawn above the bars."""
        head = "language" if self._window is None else f"language · window {self._window + 1}"
        return head + (" (candidates)" if self._restricted else "")

    # ------------------------------------------------------------ a view over RunState
    def follow(self, run, candidates: CandidatesEdit | None = None) -> None:
        """Show the language probabilities of the window of ``run``'s current step; refresh on
        its steps (once per frame), selection, branch changes and clear. ``candidates``: the field whose
        codes mark the bars as restricted."""
        self._run, self._candidates = run, candidates
        run.stepsAdded.connect(lambda _branch, _steps: self.refresh())  # once per frame
        run.selectionChanged.connect(lambda _s: self.refresh())
        run.currentBranchChanged.connect(lambda _b: self.refresh())
        run.cleared.connect(self._cleared)

    def _cleared(self) -> None:
        """The run was cleared: empty and hidden, but the room kept (see the module docstring)."""
        if not self.isHidden():
            self._keep_room(True)
        self.refresh()

    def _keep_room(self, keep: bool) -> None:
        """Keep the bars' room in the layout while hidden (``keep``), or give it back."""
        if keep:
            self._room_timer.start(KEEP_ROOM_MS)
        else:
            self._room_timer.stop()
        policy = self.sizePolicy()
        if policy.retainSizeWhenHidden() != keep:
            policy.setRetainSizeWhenHidden(keep)
            self.setSizePolicy(policy)

    def keeps_room(self) -> bool:
        """Whether the bars' room is kept while they are hidden (after a clear, for the next run)."""
        return self.sizePolicy().retainSizeWhenHidden()

    def refresh(self) -> None:
        """Re-read the followed RunState (cheap: a few dict look-ups). A frame whose step has no
        language probabilities gives the room kept at a clear to the waveform."""
        run = self._run
        if run is None:
            return
        if self.keeps_room() and run.step(run.current()) is not None:
            self._keep_room(False)  # the new run's first frame has come: it decides
        segs = {s.segment: s for s in run.segments()}
        ev = run.step(run.current())
        window = ev.segment if ev is not None else min(segs, default=None)
        seg = segs.get(window)
        probs = getattr(seg, "language_probs", ()) if seg is not None else ()
        restricted = self._candidates is not None and bool(self._candidates.codes())
        self.set_probs(probs or (), window if probs else None, restricted)

    # ------------------------------------------------------------ painting
    def sizeHint(self) -> QSize:  # noqa: N802
        """The title's width (150-240 px) by the bars' height; computed once per title and font
        (layouts ask for it many times per frame)."""
        if self._hint is None:
            lh = self.fontMetrics().height()
            bold = QFont(self.font())
            bold.setBold(True)
            title_w = QFontMetrics(bold).horizontalAdvance(self.title()) + 8
            self._hint = QSize(min(240, max(150, title_w)), 6 + (lh + 2) + TOP_N * (lh + 3))
        return QSize(self._hint)

    def changeEvent(self, e) -> None:  # noqa: N802
        if e.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._hint = None
        super().changeEvent(e)

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fg = self.palette().windowText().color()
        fm = p.fontMetrics()
        lh = fm.height()
        w = self.width()
        bold = QFont(p.font())
        bold.setBold(True)
        p.setFont(bold)
        p.setPen(fg)
        p.drawText(QRectF(2, 2, w - 4, lh), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                   fm.elidedText(self.title(), Qt.TextElideMode.ElideRight, w - 4))
        p.setFont(self.font())
        code_w = fm.horizontalAdvance("haw") + 6
        num_w = fm.horizontalAdvance("0.000") + 4
        bar_x, bar_w = 2 + code_w, max(10, w - 4 - code_w - num_w)
        row_h = lh + 3
        for i, (code, prob) in enumerate(self.bars()):
            y = 4 + lh + i * row_h
            p.setPen(fg)
            p.drawText(QRectF(2, y, code_w, row_h), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, code)
            p.setPen(QPen(QColor(150, 150, 150), 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(bar_x, y + 2, bar_w, row_h - 4))  # the 0..1 scale
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(prob_color(prob))
            p.drawRect(QRectF(bar_x, y + 2, bar_w * min(max(prob, 0.0), 1.0), row_h - 4))
            p.setPen(fg)
            p.drawText(QRectF(bar_x + bar_w + 2, y, num_w, row_h),
                       Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, f"{prob:.3f}")
        p.end()
