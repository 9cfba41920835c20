"""Each long-form window's decoding attempts (issue 14 §3; ``core.events.AttemptEvent``).

openai/whisper ``transcribe()`` decodes a window again at the next temperature when its
text compresses too well (a repetition loop), its average log-probability is too low or
(whisper.cpp) its token entropy is too low, and skips a window that looks silent. This view
lists every attempt — window span, temperature, compression ratio, average log-probability,
no-speech probability, entropy, verdict and why — one row each, tinted and with an icon:

- accepted: plain (a green tick);
- fallback: orange, a warning icon; "repetition" (red, a reload icon) when it was the
  compression ratio or the entropy that crossed its threshold;
- silence: grey, a muted-speaker icon (the window was skipped).

Clicking a row opens that attempt "as a lane": its tokens side by side with the attempt
that replaced it (or that it replaced), aligned by token id as the fork diff aligns two
branches (``gui.widgets.fork_diff``'s two-row canvas: row #k = attempt k).
"""

from __future__ import annotations

import textwrap

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QScrollArea,
    QSplitter,
    QStyle,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.events import AttemptEvent
from core.tasks.longform import LongFormOptions
from core.tasks.longform_verdicts import silence_rule

from .fork_diff import AlignCanvas, align  # the fork diff's two-row chip canvas
from .popup_button import read_only_table

COLUMNS = ("window", "try", "T", "compr.", "avg logp", "no-speech", "entropy", "verdict", "why")
#: row tint and icon per kind of attempt (Okabe & Ito orange / vermillion, a light grey)
KIND_STYLE = {
    "accepted": (None, QStyle.StandardPixmap.SP_DialogApplyButton),
    "fallback": ("#fbe3b5", QStyle.StandardPixmap.SP_MessageBoxWarning),
    "repetition": ("#f6c6b4", QStyle.StandardPixmap.SP_BrowserReload),
    "silence": ("#dddddd", QStyle.StandardPixmap.SP_MediaVolumeMuted),
}
EMPTY = ("No long-form run yet. Choose windows 'long-form' (or 'auto' with audio over 30 s): each window's "
         "attempts show here, with the thresholds that made it fall back.")


def attempt_kind(ev: AttemptEvent) -> str:
    """"accepted", "silence", "repetition" (failed on compression ratio or token entropy:
    a repetition loop) or "fallback" (failed on average log-probability only)."""
    if ev.verdict == "silence":
        return "silence"
    if ev.verdict == "accepted":
        return "accepted"
    return "repetition" if any("repetition" in r for r in ev.reasons) else "fallback"


def verdict_text(ev: AttemptEvent) -> str:
    """The verdict column: what happened to the attempt."""
    kind = attempt_kind(ev)
    if kind == "silence":
        return "skipped: silence"
    if kind == "accepted":
        return "accepted"
    what = "repetition loop" if kind == "repetition" else "failed"
    return f"{what}, kept (last temperature)" if ev.kept_in_transcript else f"{what} → redone"


class AttemptsView(QWidget):
    """The attempts table over the compare pane (see the module docstring).

    Signals:
        attemptOpened(int, int): (window, attempt) the user opened.
    """

    attemptOpened = Signal(int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._attempts: list[AttemptEvent] = []
        self.rule = LongFormOptions()  # the run's thresholds, for the rule that skipped a window (set_rule)
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        self.table = read_only_table(COLUMNS, stretch_last=True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.cellClicked.connect(lambda row, _col: self.open_row(row))
        for i, tip in enumerate(("the window's span in the audio (s)", "attempt number (0 = first try)",
                                 "temperature (0 = the options' strategy, > 0 = sampling)",
                                 "gzip compression ratio of the text (high = repetition)",
                                 "average log-probability of the tokens and end-of-text",
                                 "no-speech probability at <|startoftranscript|>",
                                 "entropy (nats) of the last 32 tokens' counts (low = repetition)",
                                 "what happened to the attempt", "the thresholds it crossed")):
            self.table.horizontalHeaderItem(i).setToolTip(tip)
        self.compare_title = QLabel("Click an attempt to see it beside the attempt that replaced it.")
        self.compare_title.setWordWrap(True)
        self.compare_title.setTextFormat(Qt.TextFormat.RichText)
        self.canvas = AlignCanvas()
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.canvas)
        compare = QWidget()
        cl = QVBoxLayout(compare)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.compare_title)
        cl.addWidget(scroll, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(compare)
        split.setSizes([200, 120])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.note)
        lay.addWidget(split, 1)

    # ------------------------------------------------------------ data
    def set_rule(self, lf: LongFormOptions) -> None:
        """The long-form options of the run whose attempts come next: a window skipped as silence
        names the rule that skipped it with these thresholds."""
        self.rule = lf

    def clear(self) -> None:
        self._attempts = []
        self.table.setRowCount(0)
        self.canvas.set_columns([], (0, 0), set())
        self.note.setText(EMPTY)
        self.compare_title.setText("Click an attempt to see it beside the attempt that replaced it.")

    def add(self, ev: AttemptEvent) -> None:
        """Append one attempt's row."""
        self._attempts.append(ev)
        row = self.table.rowCount()
        self.table.insertRow(row)
        kind = attempt_kind(ev)
        tint, icon = KIND_STYLE[kind]
        ns = "–" if ev.no_speech_prob is None else f"{ev.no_speech_prob:.2f}"
        why, rule_tip = "; ".join(ev.reasons), ""
        if kind == "silence":  # which rule skipped it, Whisper's or the loudness one: short here, in full as the tip
            why, rule_tip = silence_rule(ev.no_speech_prob, ev.avg_logprob, ev.loudest_db, self.rule)
        cells = (f"{ev.start:.2f}–{ev.end:.2f} s", str(ev.attempt), f"{ev.temperature:g}",
                 f"{ev.compression_ratio:.2f}", f"{ev.avg_logprob:.2f}", ns, f"{ev.entropy:.2f}",
                 verdict_text(ev), why)
        for col, text in enumerate(cells):
            item = QTableWidgetItem(text)
            tip = f"{text}\n\n{ev.text or '(no text)'}" if col == len(cells) - 1 or col == 0 else text
            if rule_tip and col in (7, len(cells) - 1):  # a plain-text tip is not wrapped by Qt
                tip = f"{textwrap.fill(rule_tip, 100)}\n\n{ev.text or '(no text)'}"
            item.setToolTip(tip)
            if tint is not None:
                item.setBackground(QBrush(QColor(tint)))
                item.setForeground(QBrush(QColor("#000000")))
            if col == 7:
                item.setIcon(self.style().standardIcon(icon))
            self.table.setItem(row, col, item)
        failed = [a for a in self._attempts if attempt_kind(a) != "accepted"]
        windows = {a.segment for a in self._attempts}
        self.note.setText(f"{len(windows)} window{'s' if len(windows) != 1 else ''}, {len(self._attempts)} attempts; "
                          f"{sum(a.verdict == 'fallback' for a in failed)} fell back, "
                          f"{sum(a.verdict == 'silence' for a in failed)} skipped as silence. "
                          "Click a row to open that attempt beside its replacement.")

    def attempts(self) -> list[AttemptEvent]:
        """Every attempt listed, in order."""
        return list(self._attempts)

    def row_kind(self, row: int) -> str:
        return attempt_kind(self._attempts[row])

    def partner(self, ev: AttemptEvent) -> AttemptEvent | None:
        """The attempt ``ev`` is compared with: for a failed one the attempt of its window
        that replaced it (the next one); for one that replaced others, the one before it."""
        same = [a for a in self._attempts if a.segment == ev.segment]
        if ev.verdict != "accepted" or not ev.kept_in_transcript:
            return next((a for a in same if a.attempt == ev.attempt + 1), None)
        return next((a for a in same if a.attempt == ev.attempt - 1), None)

    # ------------------------------------------------------------ opening
    def open_row(self, row: int) -> None:
        """Show attempt ``row`` beside its partner (:meth:`partner`) in the compare pane."""
        if not 0 <= row < len(self._attempts):
            return
        ev = self._attempts[row]
        other = self.partner(ev)
        self.table.selectRow(row)
        a, b = (ev, other) if other is None or other.attempt > ev.attempt else (other, ev)
        steps_b = list(b.steps) if b is not None else []
        self.canvas.set_columns(align(list(a.steps), steps_b), (a.attempt, b.attempt if b else a.attempt + 1), set())
        win = f"window {ev.segment} ({ev.start:.2f}–{ev.end:.2f} s)"
        first = (f"<b style='color:#0072B2'>#{a.attempt}</b> T={a.temperature:g} {verdict_text(a)}"
                 + (f" — {_html('; '.join(a.reasons))}" if a.reasons else ""))
        if b is None:
            second = ("nothing replaced it (skipped as silence)" if a.verdict == "silence"
                      else "nothing replaced it (the last temperature)")
        else:
            second = f"<b style='color:#D55E00'>#{b.attempt}</b> T={b.temperature:g} {verdict_text(b)}"
        self.compare_title.setText(f"{win}: {first}<br>{second}")
        self.attemptOpened.emit(ev.segment, ev.attempt)

    def shown_pair(self) -> tuple[list[str], list[str]]:
        """The token texts of the two rows of the compare pane (top, bottom; gaps left out)."""
        cols = self.canvas.columns
        return ([c.a.text for c in cols if c.a is not None], [c.b.text for c in cols if c.b is not None])


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
