"""Word timing in the Speech tab (issue 14 section 2): words by DTW over the alignment
heads' cross-attention (``core.analysis.alignment``, as openai/whisper ``timing.py``),
recomputed as tokens arrive and drawn as bands on the waveform, with the DTW path over
the heatmap and a picker of the heads it aligns on.

Cost and threads: aligning 100 tokens of a 30 s window (1500 frames) takes ~0.25 s of
numpy (the median filter over 8 heads x 100 x 1500 and DTW), too long for the GUI thread
(< 100 ms), so each alignment runs in a worker thread, started by the tab's run controller
(``gui.run_controller``, slot "align"; the end-of-text rows slot "end-rows"), which also
cancels them with the tab's other workers. Updates are coalesced: at most one
alignment runs at a time; tokens that arrive meanwhile ask for one more when it ends, and
that one starts no sooner than a frame later (``DELAY_MS``). When a run ends the end-of-text
rows (``SpeechModel.end_attention``: the window's prompt and tokens fed again, a model
call) are computed in a worker too, then the final alignment is drawn with them.

A controller, no widget of its own besides the bar under the heatmap: it subscribes to the
tab's ``RunState`` and signals, and needs only ``model.alignment_heads``,
``model.alignment(steps, end_attention=, heads=)`` and ``model.end_attention(...)``.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QWidget

from ..widgets.alignment_heads import WHAT as HEADS_WHAT
from ..widgets.alignment_heads import AlignmentHeadPicker
from ..widgets.popup_button import popup_button
from ..widgets.word_marks import PATH_COLOR, DtwPath, WordBands

#: ms to wait after a token before aligning (coalesces a frame's tokens into one update)
DELAY_MS = 40
CHECK_TIP = ("Word timing: when each word was heard, found by dynamic time warping (DTW) over the "
             "cross-attention of the alignment heads (the heads whose attention follows time), as "
             "openai/whisper timing.py does. Updated live as tokens arrive; the words are drawn on the "
             "waveform (click one to select its first token) and the DTW path on the cross-attention heatmap.")


def word_timing_checkbox() -> QCheckBox:
    """The "word timing" box of the speech tab's input row (off by default)."""
    box = QCheckBox("word timing")
    box.setToolTip(CHECK_TIP)
    return box


class WordTimingController(QObject):
    """Keeps the word bands, the DTW path and the head picker of a speech tab up to date.

    Args:
        tab: the ``SpeechTab`` (its ``run``, ``model``, ``wave``, ``heatmap``, ``audio``,
            ``select_step``, ``language()``/``task()``/``decode_extras()`` and signals).
        check: the "word timing" checkbox that switches it on.

    Signals:
        aligned(object): an ``Alignment`` was drawn (``final`` tells whether it used the
            end-of-text rows).
    """

    aligned = Signal(object)

    def __init__(self, tab, check: QCheckBox) -> None:
        super().__init__(tab)
        self.tab, self.check = tab, check
        self.picker = AlignmentHeadPicker()
        self.bar = self._build_bar()
        from .refine_words import RefineAction

        self.refine = RefineAction(self)  # the bar's "refine" button (stable-ts refine, on demand)
        tab.heatmap.add_below(self.bar)
        self.bands = WordBands(tab.wave, self)
        self.path = DtwPath(tab.heatmap)
        self.alignment = None  # the last Alignment drawn
        self.final = False  # it used the end-of-text rows
        self._again = False  # tokens arrived while the alignment worker ran
        self._end_rows: tuple[tuple[int, ...], dict] | None = None  # (token ids they belong to, rows)
        self._model_seen = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DELAY_MS)
        self._timer.timeout.connect(self._start)
        run = tab.run
        run.stepsAdded.connect(lambda _branch, _steps: self.schedule())  # once per frame
        run.cleared.connect(self._cleared)
        run.currentBranchChanged.connect(lambda _b: self.schedule())
        run.stepsRetracted.connect(lambda *_a: self.schedule())  # a long-form attempt taken back
        tab.decodeFinished.connect(lambda fin: self._run_ended(fin))
        tab.forkFinished.connect(lambda _b: self._run_ended(None))
        check.toggled.connect(self._toggled)
        self.picker.headsChanged.connect(lambda _h: self.schedule())
        self.bands.wordClicked.connect(tab.select_step)
        self.bar.setVisible(check.isChecked())

    # ---------------------------------------------------------------- API
    def enabled(self) -> bool:
        """The box is ticked and the model can align (it has alignment heads)."""
        return self.check.isChecked() and bool(getattr(self.tab.model, "alignment_heads", None))

    def busy(self) -> bool:
        """An alignment or the end-of-text rows are being computed (or one is due)."""
        workers = self.tab.controller
        return self._timer.isActive() or workers.alive("align") or workers.alive("end-rows")

    def schedule(self) -> None:
        """Align again soon (coalesced: one alignment at a time, a frame apart)."""
        if not self.enabled():
            return
        self._sync_model()
        if self.tab.controller.alive("align"):
            self._again = True
        elif not self._timer.isActive():
            self._timer.start()

    def clear(self) -> None:
        """Forget the drawn words and path."""
        self.alignment, self.final = None, False
        self.bands.clear()
        self.path.clear()

    # ------------------------------------------------------------ internals
    def _build_bar(self) -> QWidget:
        """"Word timing · DTW path ━ · 8 of 24 heads (default) [alignment heads ▾]" under the heatmap."""
        bar = QWidget()
        lay = QHBoxLayout(bar)
        lay.setContentsMargins(0, 0, 0, 0)
        legend = QLabel(f"<b>Word timing</b> · DTW path <span style='color:{PATH_COLOR}'>━━</span>")
        legend.setToolTip(CHECK_TIP)
        self.status = QLabel("")
        self.status.setToolTip(HEADS_WHAT)
        self.heads_button = popup_button("alignment heads", HEADS_WHAT, self.picker)
        self.picker.headsChanged.connect(lambda _h: self.show_status())
        lay.addWidget(legend)
        lay.addWidget(self.status, 1)
        lay.addWidget(self.heads_button)
        return bar

    def show_status(self, note: str = "") -> None:
        text = self.picker.summary_text()
        if self.alignment is not None:
            text += f" · {len(self.alignment.words)} words" + (" (end of text)" if self.final else " (live)")
        self.status.setText(text + (f" · {note}" if note else ""))

    def _sync_model(self) -> None:
        """A new model: its layers x heads grid (from the steps' cross-attention once there
        are steps), its alignment heads ticked; the same model keeps the user's ticks."""
        model = self.tab.model
        heads = [tuple(h) for h in model.alignment_heads]
        shape = _shape_from_steps(self.tab.run.steps(), heads)
        if model is self._model_seen and shape == self.picker.shape():
            return
        ticked = self.picker.heads() if model is self._model_seen else None
        self._model_seen = model
        self.picker.set_model_heads(*shape, heads)
        if ticked is not None:
            self.picker.set_heads(ticked, emit=False)
        self.show_status()

    def _toggled(self, on: bool) -> None:
        self.bar.setVisible(on)
        if not on:
            self._timer.stop()
            self.clear()
            return
        self.schedule()
        fin = self.tab.run.branch(self.tab.run.current_branch()).finished
        if fin is not None and not getattr(fin, "cancelled", False):
            self._run_ended(fin)

    def _cleared(self) -> None:
        self._timer.stop()
        self._again = False
        if self.refine.running():
            self.refine.toggle()  # a new run: the refine of the old one is cancelled
        for slot in ("align", "end-rows"):
            self.tab.controller.abort(slot)
        self._end_rows = None
        self.clear()
        self.show_status()

    def _start(self) -> None:
        """Align the current branch's steps in a worker."""
        from ..run_controller import Callbacks

        if not self.enabled():
            return
        steps = list(self.tab.run.steps())
        heads = self.picker.heads()
        if not steps or not heads:
            self.clear()
            self.show_status("no tokens yet" if heads else "")
            return
        if any(not ev.has_attention for ev in steps):  # spilled rows are not read back for this
            self.clear()
            self.show_status("this run has no cross-attention: decode again")
            return
        model, audio = self.tab.model, self.tab.audio
        ids = tuple(ev.token_id for ev in steps)
        end = self._end_rows[1] if self._end_rows is not None and self._end_rows[0] == ids else None
        longform = getattr(self.tab, "long_form", None)
        if longform is not None:  # a long-form run: its transcript's steps, the end rows its attempts carry
            steps, rows = longform.alignment_input(steps)
            end = rows if rows is not None else end
        growing = self.tab.run.branch(self.tab.run.current_branch()).finished is None

        def gen(_cancel):
            yield model.alignment(steps, end_attention=end, heads=heads, audio=audio)  # words moved off silence

        client = Callbacks(lambda a: self._show(a, end is not None, growing), self.show_status, self._job_done)
        self.tab.controller.start("align", gen, client, name="word-timing")

    def _job_done(self) -> None:
        if self._again:
            self._again = False
            self.schedule()

    def _show(self, alignment, final: bool, growing: bool) -> None:
        if not self.check.isChecked():
            return
        self.alignment, self.final = alignment, final
        self.bands.set_words(alignment.words, open_last=growing and not final)
        self.path.set_paths(alignment.paths)
        self.show_status()
        self.aligned.emit(alignment)

    def _run_ended(self, fin) -> None:
        """A run (or fork) ended: compute the end-of-text rows in a worker, then align with them."""
        from dataclasses import replace

        from ..run_controller import Callbacks

        if not self.enabled() or (fin is not None and getattr(fin, "cancelled", False)):
            return
        tab = self.tab
        longform = getattr(tab, "long_form", None)
        if longform is not None and longform.is_run and tab.run.current_branch() == 0:
            self.schedule()  # a long-form run's attempts carry their end-of-text rows
            return
        steps = list(tab.run.steps())
        if not steps or tab.audio is None:
            return
        model, audio = tab.model, tab.audio
        options = tab.run.branch(0).options
        kw = dict(language=tab.language(), task=tab.task(), **tab.decode_extras())
        ids = tuple(ev.token_id for ev in steps)

        def gen(_cancel):
            opts = options if options is not None else _default_options()
            yield model.end_attention(audio, steps, replace(opts, capture_attention=True), **kw)

        def got(rows):
            if tuple(ev.token_id for ev in self.tab.run.steps()) == ids:
                self._end_rows = (ids, rows)
                self.schedule()

        # a start in the slot cancels the rows of an earlier run still being computed
        self.tab.controller.start("end-rows", gen, Callbacks(got, self.show_status), name="end-attention")


def _default_options():
    from core.options import DecodingOptions

    return DecodingOptions()


def _shape_from_steps(steps, heads) -> tuple[int, int]:
    """(decoder layers, heads) from a step's cross-attention (layers, heads, frames), else
    the smallest grid holding ``heads``."""
    for ev in steps:
        att = getattr(ev, "cross_attention", None)
        if att is not None and getattr(att, "ndim", 0) == 3:
            return int(att.shape[0]), int(att.shape[1])
    return (max((h[0] for h in heads), default=0) + 1, max((h[1] for h in heads), default=0) + 1)
