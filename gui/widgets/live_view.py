"""The Live view: a streaming decode as it decides (issue 23 §3).

What a streaming run (``core.streaming``) yields is shown in three parts:

- the transcript: committed tokens solid, each commit followed by the audio time it was made
  at (``@3.2 s``); the tentative tail ghosted (grey, italic), replaced in place at every
  update (so a revision shows as the ghosted text changing); AlignAtt's token that waited,
  orange, after a pause mark;
- the buffer lane: the audio heard so far (its envelope, seconds of the stream on the x axis),
  the buffer the decoder sees now (a blue band from the buffer's start to the audio heard),
  every trim (a red dashed line labelled with its reason), each committed word's latency (a
  green bar from the word's end in the audio to its commit) and, for AlignAtt, the "too close
  to the end" frames (an orange band) with the token that waited;
- for AlignAtt, its last wait as a cross-attention heatmap (``decision``, an
  ``AttentionHeatmap``): the rows are the tokens of the decode that waited, then the token that
  waited (outlined), over the buffer's encoder frames; each row the alignment heads'
  attention as AlignAtt's rule read it (SimulStreaming's: z-scored per head and frame over the
  decode's rows, median filter 7 over frames, mean over heads, scaled to [0, 1]); the "too close to the end" frames are an orange
  band. Hidden until a policy waits (LocalAgreement and fixed-window never do);
- the words table: word, where it ends in the audio, when it was committed, its latency.

A stats line says the real-time factor, the mean and 90th-percentile commit latency, how many
tentative tokens were revised, and the last "fell behind" message.

The view is fed events (:meth:`LiveView.take`: cheap, it only records them) and draws once
per frame (:meth:`LiveView.flush`, a frame listener of the tab's run controller), so a burst
of events costs one redraw. It imports no model code.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHeaderView,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from core.catalog import FRAME_S, SAMPLE_RATE

#: the most pixels the streamed input's name takes in the view's title (longer: elided)
TITLE_PX = 260
#: the buffer lane's legend; AlignAtt's marks are listed only under align-att (``set_policy``:
#: under the other policies they never appear, and the line they took let the column scroll)
LEGEND = ('<span style="color:#4a6fa5">■</span> the buffer the decoder sees &nbsp; '
          '<span style="color:#c0392b">┆</span> trimmed &nbsp; '
          '<span style="color:#3f8f3f">●╲</span> word end → its commit (latency)')
LEGEND_ALIGN_ATT = (' &nbsp; <span style="color:#c77700">■▼</span> AlignAtt: too close to the end, the token '
                    'that waited')

COMMITTED_STYLE = "color:#1b1b1b;"
TENTATIVE_STYLE = "color:#9a9a9a; font-style:italic;"
WAITED_STYLE = "color:#c77700; font-style:italic;"
COMMIT_TIME_STYLE = "color:#4f7f3f; font-size:9pt;"
MESSAGE_STYLE = "color: #8a5300;"
#: the lane's rows (the waveform spans -1..1): word ends, and the commits below them
WORD_Y, COMMIT_Y = -1.12, -1.5
#: the lane shows the last this many seconds of the stream (a redraw costs the same at minute 1 and 60)
LANE_WINDOW_S = 30.0
#: the word table grows to fit its columns up to this width (px); past it, it scrolls
TABLE_MAX_W = 320
#: the transcript box shows the last this many commits (all are kept: :meth:`LiveView.committed_text`)
SHOWN_COMMITS = 120
LANE_TIP = (
    "The stream on a time axis (s). Grey: the audio heard so far. Blue band: the buffer the decoder sees now. "
    "Red dashed lines: where the buffer was trimmed (and why). Green: each committed word's end in the audio (a "
    "dot) joined to its commit (a tick below): the slant is its latency. Orange band (AlignAtt): the last frames, too close to the end to emit "
    "a token about; the orange mark is the token that waited there."
)
TEXT_TIP = (
    "Committed tokens (final) are solid, each commit followed by the audio time it was made at; the tentative "
    "tail is grey and italic and is replaced at every update until the policy commits it. Orange [waits: …]: "
    "the token AlignAtt held back because its attention reached the end of the buffer."
)


DECISION_TIP = (
    "AlignAtt's last decision (SimulStreaming): each row is a token of the last decode that waited, its "
    "alignment heads' cross-attention over the buffer's frames (20 ms each) as AlignAtt's rule reads it: "
    "each head z-scored per frame over the decode's rows, a median filter of 7 frames, the mean over heads, "
    "scaled to 0..1 (ufal/SimulStreaming). A token is emitted while its most-attended frame lies before the orange zone (the last frames "
    "of the buffer, too close to the end); the outlined last row is the token whose attention fell inside it: "
    "it was not emitted, decoding waits for more audio.")


@dataclass(frozen=True)
class LiveTick:
    """One chunk of audio fed to the streaming driver (what the worker yields beside its events).

    Attributes:
        chunk: the new samples (float32 (n,), 16 kHz).
        received_s: audio fed so far (s).
        start_s: where the decoder's buffer starts now (s).
        compute_s: seconds spent decoding so far.
        shown: tentative tokens shown so far; revised: how many of them were revised.
        decodes: decodes run so far.
    """

    chunk: np.ndarray = field(repr=False)
    received_s: float
    start_s: float
    compute_s: float
    shown: int = 0
    revised: int = 0
    decodes: int = 0


@dataclass(frozen=True)
class LiveWord:
    """A committed word: its text, where it ends in the audio, when it was committed (audio
    time and seconds since the stream began) and its latency (s)."""

    text: str
    end_s: float
    commit_s: float
    wall_s: float
    latency_s: float


def words_of(tokens) -> list[tuple[str, float]]:
    """(text, end_s) of each word of ``tokens`` (``core.streaming.StreamToken``): a word ends at
    the last token before one that starts with a space (as the driver counts its latencies)."""
    words, text = [], ""
    for i, t in enumerate(tokens):
        text += t.text
        if i + 1 == len(tokens) or tokens[i + 1].text.startswith(" "):
            words.append((text, float(t.end_s)))
            text = ""
    return words


class _ColumnLayout(QVBoxLayout):
    """The Live view's column (in its scroll area) without height-for-width: a scroll area
    sizes a height-for-width column to the heights its parts would like (text ~400 px, lane
    ~270 px: 728 px at 1280x800), so only the transcript showed and the buffer lane sat below
    the fold; without it the column fills the area and scrolls only below its minimums (H5,
    session 13). The wrapped legend's minimum height is its wrapped height at the column's
    width (set here on each layout): with its one-line minimum the column was laid out 13 px
    short at 1280x800 and the legend was drawn over the lane's axis title, its second line cut
    (session 14)."""

    def __init__(self, legend: QLabel) -> None:
        super().__init__()
        self._legend = legend

    def hasHeightForWidth(self) -> bool:  # noqa: N802
        return False

    def setGeometry(self, rect) -> None:  # noqa: N802
        m = self.contentsMargins()
        need = self._legend.heightForWidth(max(1, rect.width() - m.left() - m.right()))
        if need > 0 and need != self._legend.minimumHeight():
            self._legend.setMinimumHeight(need)  # the column's minimum grows: the scroll area scrolls
        super().setGeometry(rect)


class LiveView(QWidget):
    """The Live view (module docstring). Signals: ``stopRequested()`` (its ■ Stop button),
    ``updated()`` (after each redraw)."""

    stopRequested = Signal()
    updated = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("<b>Live</b> — tick Live and press Record, or File → Play file as live input")
        self.stop_button = QPushButton("■ Stop")
        self.stop_button.setToolTip("End the live input now: what is tentative is committed, the audio is kept")
        self.stop_button.clicked.connect(self.stopRequested)
        self.stop_button.setEnabled(False)
        self.stats_label = QLabel("")
        self.stats_label.setToolTip(
            "RTF: decoding seconds per second of audio (< 1 keeps up with real time). Latency: per committed "
            "word, from its end in the audio to its commit (audio time), mean and 90th percentile. Revised: "
            "tentative tokens that a later update changed, of all shown.")
        self.stats_label.hide()  # shown with the first audio heard
        self.message_label = QLabel("")
        self.message_label.setStyleSheet(MESSAGE_STYLE)
        self.message_label.setWordWrap(True)
        self.message_label.hide()
        self.text = QTextBrowser()
        self.text.setToolTip(TEXT_TIP)
        self.text.setMinimumHeight(52)  # two lines; with 60 the column scrolled at 1280x800, the legend cut (s15)
        self.lane = self._build_lane()
        from .attention_heatmap import AttentionHeatmap

        self.decision = AttentionHeatmap()
        self.decision.set_columns("time in the buffer (s)", FRAME_S)
        self.decision.set_view(None, None, note="alignment heads, z-scored over the rows, median 7, mean · scaled 0..1",
                               tip=DECISION_TIP)
        self.decision.setToolTip(DECISION_TIP)
        self.decision.setMinimumHeight(160)
        self.decision_label = QLabel("")
        self.decision_label.setWordWrap(True)
        self.decision_label.setTextFormat(Qt.TextFormat.PlainText)  # a token's '&' / '<' shows as written
        self.decision_label.setStyleSheet("color: #c77700;")
        self.decision.add_below(self.decision_label)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["word", "end", "commit", "latency"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setToolTip("Each committed word: where it ends in the audio (word timing, s), the audio time "
                              "of its commit (s), and the latency between them (s)")
        self.table.horizontalHeader().setMinimumSectionSize(30)
        self.table.verticalHeader().setDefaultSectionSize(18)
        self._fit_table()
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(self.stop_button)
        self._head = head
        self.legend = QLabel(LEGEND + LEGEND_ALIGN_ATT)
        self.legend.setStyleSheet("color: #666; font-size: 8pt;")
        self.legend.setWordWrap(True)  # never widens the window
        self.legend.setToolTip(LANE_TIP)
        body = QHBoxLayout()
        left = _ColumnLayout(self.legend)
        left.setContentsMargins(0, 0, 0, 0)  # the area is the frame: its minimum fits a 1280x800 window
        left.setSpacing(3)
        left.addWidget(self.text, 3)
        left.addWidget(self.lane, 2)
        left.addWidget(self.legend)
        left.addWidget(self.decision, 3)
        # the column scrolls when the view is shorter than its parts' minimums (text, lane, and
        # AlignAtt's decision heatmap: ~380 px), instead of raising the window's minimum height
        # (a 1280x800 window grew to 882 px once a wait showed)
        column = QWidget()
        column.setLayout(left)
        self.column_scroll = QScrollArea()
        self.column_scroll.setWidget(column)
        self.column_scroll.setWidgetResizable(True)
        self.column_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.column_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body.addWidget(self.column_scroll, 3)
        body.addWidget(self.table, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(3)
        lay.addLayout(head)
        lay.addWidget(self.stats_label)
        lay.addWidget(self.message_label)
        lay.addLayout(body, 1)
        self.reset()

    def _fit_table(self) -> None:
        """The word table's columns: the three numbers as wide as their header or "0000.00",
        whichever is wider (fixed: no row is read to size them), the word taking the rest (a
        long word is cut with "…"); the table at least that wide, up to :data:`TABLE_MAX_W`
        px. At 1280x800 the table's quarter of the view (~200 px) cut "latency" behind a
        horizontal scroll bar (H5, session 13); the text column gives the room."""
        t, head = self.table, self.table.horizontalHeader()
        fm = t.fontMetrics()
        pad = 2 * t.style().pixelMetric(t.style().PixelMetric.PM_HeaderMargin) + 8
        widths = [max(fm.horizontalAdvance(t.horizontalHeaderItem(j).text()), fm.horizontalAdvance("0000.00")) + pad
                  for j in (1, 2, 3)]
        head.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for j, width in enumerate(widths, start=1):
            head.setSectionResizeMode(j, QHeaderView.ResizeMode.Fixed)
            head.resizeSection(j, width)
        word = fm.horizontalAdvance("listening.") + pad
        need = word + sum(widths) + t.verticalScrollBar().sizeHint().width() + 2 * t.frameWidth()
        t.setMinimumWidth(min(need, TABLE_MAX_W))

    def _build_lane(self) -> pg.PlotWidget:
        lane = pg.PlotWidget(enableMenu=False)
        lane.setBackground(None)
        lane.setMinimumHeight(90)
        lane.hideButtons()
        lane.setMouseEnabled(x=True, y=False)
        lane.setLabel("bottom", "stream time (s)")
        lane.getAxis("left").setWidth(30)
        lane.getAxis("left").setTicks([[]])
        lane.setYRange(-1.7, 1.05, padding=0)
        lane.setToolTip(LANE_TIP)
        lane.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.wave_curve = lane.plot(pen=pg.mkPen("#9aa4ae"))
        self.buffer_band = pg.LinearRegionItem((0, 0), movable=False, brush=pg.mkBrush(74, 111, 165, 60),
                                               pen=pg.mkPen("#4a6fa5"))
        self.buffer_band.setZValue(-10)
        lane.addItem(self.buffer_band)
        self.zone_band = pg.LinearRegionItem((0, 0), movable=False, brush=pg.mkBrush(230, 159, 0, 70),
                                             pen=pg.mkPen(None))
        self.zone_band.setZValue(-9)
        lane.addItem(self.zone_band)
        self.latency_curve = lane.plot(pen=pg.mkPen("#3f8f3f", width=1.5), connect="pairs")
        self.word_dots = pg.ScatterPlotItem(size=6, brush=pg.mkBrush("#3f8f3f"), pen=None)
        lane.addItem(self.word_dots)
        self.waited_mark = pg.ScatterPlotItem(size=11, symbol="t", brush=pg.mkBrush("#c77700"), pen=None)
        lane.addItem(self.waited_mark)
        self.waited_label = pg.TextItem("", color="#c77700", anchor=(0.5, 1.0))
        lane.addItem(self.waited_label)
        return lane

    # ------------------------------------------------------------------ state
    def set_policy(self, spec: str) -> None:
        """Fit the legend to the streaming policy (``core.streaming`` spec, "align-att:25", ...):
        AlignAtt's "too close to the end" marks are listed under align-att only."""
        self.legend.setText(LEGEND + (LEGEND_ALIGN_ATT if spec.startswith("align-att") else ""))

    def reset(self, title: str = "") -> None:
        """Forget the last stream; ``title`` says what is streamed now ("take 3", a file)."""
        if title:  # a long file name is elided in the middle (full in the tooltip): it must
            # not widen the view past its share of a 1280-px window
            shown = self.title.fontMetrics().elidedText(title, Qt.TextElideMode.ElideMiddle, TITLE_PX)
            self.title.setText(f"<b>Live</b> · {html.escape(shown)}")
            self.title.setToolTip(title if shown != title else "")
        self._audio = np.zeros(16000 * 60, np.float32)  # the heard audio, grown by doubling
        self._n = 0
        self.heard_s = 0.0  #: audio heard so far (s)
        self.start_s = 0.0  #: the buffer's start (s)
        self.compute_s = 0.0
        self.shown = self.revised = self.decodes = 0
        self.commits: list[tuple[str, float]] = []  # (text, commit audio time) per Committed
        self.words: list[LiveWord] = []
        self.tentative = ""
        self.waited = None  # (the last core.streaming.Waited, buffer start, decodes), until a later decode
        self.last_wait = None  #: the last core.streaming.Waited (its heatmap stays after the wait is over)
        self._decision_of = None  # the Waited the decision heatmap shows
        if hasattr(self, "decision"):
            self.decision.clear(columns=True)
            self.decision.hide()
            self.decision_label.setText("")
        self.trims: list[tuple[float, str]] = []
        self.messages: list[str] = []
        self.skipped: list[tuple[float, float]] = []  # (from, to) s of audio left out to keep up
        self.finished = None  # core.streaming.StreamFinished
        self.first_commit_heard_s: float | None = None  #: audio heard when the first commit was shown
        for item in getattr(self, "_trim_items", []):
            self.lane.removeItem(item)
        self._trim_items: list = []
        self._trims_drawn = 0
        self._rows = 0
        self.table.setRowCount(0)
        self.message_label.hide()
        self.message_label.setText("")
        self._dirty = True
        self.flush()

    def add_control(self, widget: QWidget) -> None:
        """Put ``widget`` (a setting of the live session, e.g. LocalAgreement's prompt length) in
        the view's head row, before the Stop button."""
        self._head.insertWidget(self._head.indexOf(self.stop_button), widget)

    def set_active(self, on: bool) -> None:
        """A stream runs (its ■ Stop button is enabled)."""
        self.stop_button.setEnabled(on)

    def take(self, ev) -> None:
        """Record one item of the stream (a :class:`LiveTick` or a ``core.streaming`` event);
        drawn at the next :meth:`flush`."""
        from core.streaming import Committed, FellBehind, StreamFinished, Tentative, Trimmed, Waited

        if isinstance(ev, LiveTick):
            if len(ev.chunk):
                self._append(np.asarray(ev.chunk, dtype=np.float32))
            self.heard_s, self.start_s, self.compute_s = ev.received_s, ev.start_s, ev.compute_s
            self.shown, self.revised, self.decodes = ev.shown, ev.revised, ev.decodes
            if self.waited is not None and ev.decodes > self.waited[2]:
                self.waited = None  # a later decode: the wait is over (a new one says so again)
        elif isinstance(ev, Committed):
            self.commits.append((ev.text, ev.audio_s))
            words = words_of(ev.tokens)
            lats = list(ev.word_latencies) or [ev.latency_s] * len(words)
            for (text, end), lat in zip(words, lats):
                self.words.append(LiveWord(text, end, ev.audio_s, ev.wall_s, float(lat)))
        elif isinstance(ev, Tentative):
            self.tentative = ev.text
        elif isinstance(ev, Trimmed):
            self.start_s = ev.start_s
            self.trims.append((ev.start_s, ev.reason))
        elif isinstance(ev, Waited):
            self.waited = (ev, self.start_s, self.decodes)  # the tick before it counted its decode
            self.last_wait = ev
        elif isinstance(ev, FellBehind):
            self.messages.append(self.fell_behind_text(ev))
            if ev.skipped_s is not None:
                self.skipped.append(ev.skipped_s)
        elif isinstance(ev, StreamFinished):
            self.finished = ev
            self.compute_s, self.shown, self.revised, self.decodes = ev.decode_s, ev.tentative_shown, ev.revised, ev.decodes
            self.heard_s = max(self.heard_s, ev.audio_s)
            self.tentative, self.waited = "", None
        else:
            return
        self._dirty = True

    @staticmethod
    def fell_behind_text(ev) -> str:
        """A FellBehind for people: "skipped N s to keep up" when audio was left out, else that
        the waiting audio was decoded at once."""
        if ev.skipped_s is not None:
            a, b = ev.skipped_s
            return (f"Decoding fell behind real time: skipped {max(0.0, b - a):.1f} s to keep up ({a:.1f}–{b:.1f} s "
                    "left out of the live text; the recording keeps them).")
        return f"Decoding fell behind real time by {ev.lag_s:.1f} s: the waiting audio was decoded in one step."

    def note(self) -> str:
        """What falling behind did, for people ("" if it did not): the audio skipped to keep up
        (all of it), else the last time the waiting audio was decoded in one step."""
        if self.skipped:
            total = sum(max(0.0, b - a) for a, b in self.skipped)
            spans = ", ".join(f"{a:.1f}–{b:.1f}" for a, b in self.skipped[-3:])
            more = "…, " if len(self.skipped) > 3 else ""
            return (f"Decoding fell behind real time: skipped {total:.1f} s to keep up ({more}{spans} s left out of "
                    "the live text; the recording keeps them).")
        if self.messages:
            return self.messages[-1] + (f" ({len(self.messages)}×)" if len(self.messages) > 1 else "")
        return ""

    # ------------------------------------------------------------------ reading (tests, status bar)
    def _append(self, chunk: np.ndarray) -> None:
        if self._n + len(chunk) > len(self._audio):  # amortised O(1) per sample
            grown = np.zeros(max(2 * len(self._audio), self._n + len(chunk)), np.float32)
            grown[:self._n] = self._audio[:self._n]
            self._audio = grown
        self._audio[self._n:self._n + len(chunk)] = chunk
        self._n += len(chunk)

    def heard_audio(self) -> np.ndarray:
        """The audio fed to the decoder so far (float32 (n,), 16 kHz; a view, not a copy)."""
        return self._audio[:self._n]

    def committed_text(self) -> str:
        """The committed transcript so far."""
        return "".join(t for t, _s in self.commits).strip()

    def spans(self) -> list[tuple[str, str]]:
        """What the transcript shows, in order: ("committed", text) per commit, then
        ("tentative", text) and ("waited", token) when there are any (AlignAtt's waiting token
        follows the last word it holds back)."""
        out = [("committed", t) for t, _s in self.commits]
        if self.tentative:
            out.append(("tentative", self.tentative))
        if self.waited is not None:
            out.append(("waited", self.waited[0].token.text))
        return out

    def stats(self) -> dict:
        """``rtf``, ``latency_mean_s``, ``latency_p90_s`` (None before a word is committed),
        ``words``, ``revised``, ``shown``, ``heard_s``."""
        lat = np.asarray([w.latency_s for w in self.words], dtype=float)
        return {"rtf": self.compute_s / self.heard_s if self.heard_s > 0 else None,
                "latency_mean_s": float(lat.mean()) if lat.size else None,
                "latency_p90_s": float(np.percentile(lat, 90)) if lat.size else None,
                "words": int(lat.size), "revised": self.revised, "shown": self.shown, "heard_s": self.heard_s}

    def stats_text(self) -> str:
        """"RTF 0.31 · latency mean 1.20 s / p90 1.90 s · 3 of 40 tentative tokens revised"."""
        s = self.stats()

        def f(v, spec):
            return "–" if v is None else format(v, spec)

        return (f"RTF {f(s['rtf'], '.2f')} · latency mean {f(s['latency_mean_s'], '.2f')} s / p90 "
                f"{f(s['latency_p90_s'], '.2f')} s · {s['revised']} of {s['shown']} tentative tokens revised")

    # ------------------------------------------------------------------ drawing
    def flush(self) -> None:
        """Draw what was taken since the last flush (once per frame; nothing when nothing changed)."""
        if not self._dirty:
            return
        self._dirty = False
        if self.first_commit_heard_s is None and self.commits:
            self.first_commit_heard_s = self.heard_s
        self.text.setHtml(self._html())
        sb = self.text.verticalScrollBar()
        sb.setValue(sb.maximum())
        self._draw_lane()
        self._draw_decision()
        self._add_rows()
        self.stats_label.setText(self.stats_text() if self.heard_s > 0 else "")
        self.stats_label.setVisible(self.heard_s > 0)  # an empty line is room the column needs at 1280x800
        if self.messages:
            self.message_label.setText(self.note())
            self.message_label.show()
        self.updated.emit()

    def _html(self) -> str:
        parts = ["… "] if len(self.commits) > SHOWN_COMMITS else []
        for text, at in self.commits[-SHOWN_COMMITS:]:
            parts.append(f'<span style="{COMMITTED_STYLE}">{html.escape(text)}</span>'
                         f'<sub style="{COMMIT_TIME_STYLE}">@{at:.1f}s</sub>')
        if self.tentative:  # AlignAtt's held-back last word, then the token it waited at
            parts.append(f'<span style="{TENTATIVE_STYLE}">{html.escape(self.tentative)}</span>')
        if self.waited is not None:
            parts.append(f' <span style="{WAITED_STYLE}">[waits:{html.escape(self.waited[0].token.text)}]</span>')
        if not parts:
            parts.append(f'<span style="{TENTATIVE_STYLE}">listening…</span>' if self.heard_s > 0 else "")
        return f'<div style="font-size:large;">{"".join(parts)}</div>'

    def _draw_lane(self) -> None:
        last_commit = self.words[-1].commit_s if self.words else 0.0  # behind real time: after the audio fed
        right = max(self.heard_s, last_commit, 1.0)
        left = max(0.0, right - LANE_WINDOW_S)  # the last 30 s
        first = int(left * SAMPLE_RATE)
        audio = self._audio[first:self._n]
        if len(audio):
            from .waveform import envelope

            t, y = envelope(audio, SAMPLE_RATE, max_points=4000)
            peak = float(np.max(np.abs(y))) or 1.0
            self.wave_curve.setData(t + first / SAMPLE_RATE, y / peak)
        else:
            self.wave_curve.setData([], [])
        self.buffer_band.setRegion((self.start_s, max(self.heard_s, self.start_s)))
        for at, reason in self.trims[self._trims_drawn:]:
            line = pg.InfiniteLine(at, angle=90, movable=False, pen=pg.mkPen("#c0392b", style=Qt.PenStyle.DashLine),
                                   label=reason, labelOpts={"position": 0.92, "color": "#c0392b"})
            self.lane.addItem(line)
            self._trim_items.append(line)
        self._trims_drawn = len(self.trims)
        while self._trim_items and self._trim_items[0].value() < left:  # out of the window: gone
            self.lane.removeItem(self._trim_items.pop(0))
        # each word: a dot at its end in the audio, a line down to its commit (a tick): the fan of a
        # commit shows which words it made final and how late (the words of the window)
        xs, ys = [], []
        shown = self.words[self._first_shown_word(left):]
        for w in shown:
            xs += [w.end_s, w.commit_s]
            ys += [WORD_Y, COMMIT_Y]
        for at in sorted({w.commit_s for w in shown}):
            xs += [at, at]
            ys += [COMMIT_Y - 0.12, COMMIT_Y + 0.06]
        self.latency_curve.setData(xs, ys)
        self.word_dots.setData([w.end_s for w in shown], [WORD_Y] * len(shown))
        if self.waited is not None:
            ev, start, _n = self.waited
            self.zone_band.setRegion((start + ev.limit * FRAME_S, ev.audio_s))
            x = start + ev.frame * FRAME_S
            self.waited_mark.setData([x], [0.95])
            self.waited_label.setText(ev.token.text.strip() or ev.token.text)
            self.waited_label.setPos(x, 0.9)
        else:
            self.zone_band.setRegion((0, 0))
            self.waited_mark.setData([], [])
            self.waited_label.setText("")
        self.lane.setXRange(left, right, padding=0.01)

    def _draw_decision(self) -> None:
        """The last wait's rows on the decision heatmap, the zone and the waiting token marked
        (once per new wait; a wait without rows leaves it as it is)."""
        from dataclasses import replace

        ev = self.last_wait
        if ev is None or ev is self._decision_of or not ev.steps:
            return
        self._decision_of = ev
        n = ev.n_frames if ev.n_frames > ev.limit else max(len(ev.steps[-1].cross_attention), ev.limit + 1)
        steps = [replace(s, cross_attention=np.asarray(s.cross_attention)[..., :n]) for s in ev.steps]
        hm = self.decision
        hm.clear(columns=True)
        hm.set_columns("time in the buffer (s)", FRAME_S, n_columns=n)
        hm.append_steps(steps)
        hm.mark_zone(ev.limit, n, row=len(steps) - 1, label="waits ▸")
        token = ev.token.text.strip() or ev.token.text  # plain text (the label's format)
        self.decision_label.setText(
            f"AlignAtt's last wait, at {ev.audio_s:.1f} s: the next token “{token}” attends frame {ev.frame} "
            f"({ev.frame * FRAME_S:.2f} s into the buffer), inside the last {n - ev.limit} frames (orange, too close "
            f"to the end): it waits for audio. Rows: the {len(steps) - 1} tokens emitted in that decode, then it.")
        hm.show()

    def _first_shown_word(self, left: float) -> int:
        """The first word committed inside the lane's window (commits come in time order)."""
        lo, hi = 0, len(self.words)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.words[mid].commit_s < left:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _add_rows(self) -> None:
        new = self.words[self._rows:]
        if not new:
            return
        self.table.setRowCount(len(self.words))
        for i, w in enumerate(new, start=self._rows):
            for j, v in enumerate((w.text.strip(), f"{w.end_s:.2f}", f"{w.commit_s:.2f}", f"{w.latency_s:.2f}")):
                item = QTableWidgetItem(v)
                if j:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)
        self._rows = len(self.words)
        self.table.scrollToBottom()
