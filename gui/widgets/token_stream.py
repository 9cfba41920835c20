"""The emitted tokens as chips, each tinted (viridis, fixed levels) by its probability, by
its rank bucket in the raw distribution (top-1 / top-10 / top-100 / beyond, as GLTR does) or
by the raw distribution's entropy; a combo box in the header picks the mode and the legend
beside it follows.

Given the run (``gui.run_state.RunState``) the view follows it (``gui.widgets.follow``):
its steps once per frame, the selection, the end of the shown branch (``branchFinished``)
and the what-ifs' marks (``marksChanged``). Tokens are appended live as ``StepEvent``s arrive; a ``SegmentEvent`` starts a new
line with a grey label in front of its tokens (e.g. "0.0–30.0 s · language en (98%)").
Clicking a chip selects that step (``stepSelected(int)``); hovering shows its
probability and the top alternatives. In beam search the live beams (``BeamEvent``)
are listed above the stream, best first. The scroll area is at least
``MIN_VISIBLE_ROWS`` chip rows high; it follows the newest chip while decoding (unless
the user scrolled away from it or selected a step) and scrolls a selected chip into view.

Speculative decoding: the chips carry the marks of ``gui.widgets.speculation_marks``
(accepted, resampled, bonus) and each rejected draft token follows, struck through, the
token emitted in its place; a line under the chips then shows the marks' legend. The tokens
of a round whose verification was a near-tie carry a dotted line above them. The rejected tokens
come from the run's rounds (``RunState.roundsAdded``, ``RunState.round_of``).

The chips are ``gui.widgets.token_flow.TokenFlow``, the legend
``gui.widgets.color_legend.ColorLegend``, the text helpers ``gui.widgets.token_text``.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QPoint, QRect, Qt, Signal
from PySide6.QtGui import QTextCursor, QTextOption
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
    QVBoxLayout,
    QWidget,
)

from core.events import BeamEvent, Finished, SegmentEvent, StepEvent

from .color_legend import ColorLegend
from .colors import COLOR_MODES
from .earlier_run import note_label, show_note
from .follow import follow_run
from .speculation_marks import NEAR_TIE_NOTE, ghost_tooltip, legend_html, legend_tooltip, rejected_token
from .token_flow import LINE_GAP, TokenFlow
from .token_text import live_text

#: chip rows the token stream's scroll area always shows (its minimum height)
MIN_VISIBLE_ROWS = 3


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
        #: "last offline run: … — live decode is in the Live view" (set_earlier_note)
        self.earlier_note = note_label()
        header = QHBoxLayout()
        header.addWidget(self.title)
        header.addSpacing(8)
        header.addWidget(self.earlier_note, 1)
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
        #: the speculation marks' legend, shown once a speculative token is in the stream
        self.spec_legend = QLabel(legend_html())
        self.spec_legend.setToolTip(legend_tooltip())
        self.spec_legend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens
        self.spec_legend.hide()

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
        lay.addWidget(self.spec_legend)
        lay.addWidget(self.text_label)
        self._text_parts: list[str] = []
        self._run = run
        if run is not None:  # the run's steps, segments, beams and selection, once per frame
            follow_run(run, self)
            run.beamsAdded.connect(lambda beams: self.set_beams(beams[-1]))
            run.roundsAdded.connect(lambda _branch, rounds: self.add_rounds(rounds))
            # after follow_run's replay (connected first, so called first): every round's ghost again
            run.currentBranchChanged.connect(lambda _branch: self.add_rounds(run.rounds()))
            run.stepsRetracted.connect(
                lambda branch, _step: self.add_rounds(run.rounds()) if branch == run.current_branch() else None)
            # the end of the shown branch: when its run ends, and after a replay of a branch that ended
            run.branchFinished.connect(self._show_end)
            run.currentBranchChanged.connect(self._show_end)
            run.marksChanged.connect(self.set_marks)  # the what-ifs' marks

    def _show_end(self, branch: int) -> None:
        """Show the end of ``branch`` (if it is the run's current branch and it ended)."""
        run = self._run
        if branch == run.current_branch():
            fin = run.branch(branch).finished
            if fin is not None:
                self.finish(fin)

    # ---------------------------------------------------------------- API
    def clear(self) -> None:
        """Forget the previous run."""
        self.flow.clear()
        self.beams.clear()
        self.beams.hide()
        self._text_parts.clear()
        self._set_text("")
        self.count_label.setText("")
        self.spec_legend.hide()
        self.cleared.emit()

    def add_rounds(self, rounds: list) -> int:
        """Show the rejected draft token of each speculation round (``SpeculationRound``)
        after the token emitted in its place (rounds whose tokens are not shown are
        skipped). Returns the ghost chips placed."""
        ghosts, notes = [], {}
        for r in rounds:
            t = rejected_token(r)
            if t is not None:  # after the target's token at that position; it ended the text: after the last one
                step = r.step + r.n_accepted - (1 if r.emitted_id is None else 0)
                ghosts.append((step, (r.segment, r.round), t.text, ghost_tooltip(r, t)))
            if r.near_tie:
                for s in range(r.step, r.step + r.n_accepted + (r.emitted_id is not None)):
                    notes[s] = NEAR_TIE_NOTE
        if notes:
            self.flow.add_notes(notes)
        return self.flow.add_ghosts(ghosts) if ghosts else 0

    def set_marks(self, marks: dict[int, tuple[str, str]]) -> None:
        """Underline the chips of some steps (``TokenFlow.set_marks``)."""
        self.flow.set_marks(marks)

    def set_earlier_note(self, note: str | None) -> None:
        """Say in the header that the tokens are an earlier run's (e.g. the last offline run
        during a live session) and dim them; None: the note goes and the tokens are bright."""
        show_note(self.earlier_note, note, self.flow)

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
        if self.spec_legend.isHidden() and any(ev.speculation for ev in events):
            self.spec_legend.show()
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
        self.scroll.ensureVisible(c.x(), c.y(), 10, r.height() // 2 + LINE_GAP + 1)

    def chip_visible(self, step: int) -> bool:
        """Whether the chip of ``step`` lies fully inside the scroll area's viewport."""
        r = self.flow.chip_rect(step)
        if r is None:
            return False
        vp = self.scroll.viewport()
        top_left = self.flow.mapFrom(vp, QPoint(0, 0))
        return QRect(top_left, vp.size()).adjusted(0, -1, 0, 1).contains(r)
