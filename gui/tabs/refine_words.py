"""The word-timing bar's **refine** button: the finished run's DTW words refined on demand
in the manner of stable-ts ``refine()`` (``core.analysis.refine`` through
``SpeechModel.refine_words``: spans around each word boundary muted, the run's own tokens
forced through the muted audio, each boundary moved to where the word's probability starts
to drop). It re-encodes the audio ~25 times per 30 s window, so it runs in a worker; a second
click cancels it; the bar says "refining words i/n" as it goes. A long-form run's words are
refined within their own window's audio (``longform=True``: the run's seek-cut windows).
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QToolButton

TIP = ("Refine the word boundaries (stable-ts refine()): mute the audio around each boundary, force this run's "
       "tokens through it and move the boundary to where the word's probability drops. About 20 encoder passes "
       "per 30 s window, seconds to a minute; click again to cancel.")


class RefineAction(QObject):
    """A "refine" button added to ``controller``'s bar (``gui.tabs.word_timing.WordTimingController``).

    Signals:
        refined(list): the refined words (``core.analysis.alignment.Word``), drawn as the bands.
    """

    refined = Signal(list)
    #: (words done, words in all), emitted from the worker thread (queued to the GUI thread)
    progressed = Signal(int, int)

    def __init__(self, controller):
        super().__init__(controller)
        self.controller = controller
        self.button = QToolButton()
        self.button.setText("refine")
        self.button.setToolTip(TIP)
        self.button.clicked.connect(self.toggle)
        controller.bar.layout().addWidget(self.button)
        self.progressed.connect(self._progress)
        self._active = False  # a refine runs and was not cancelled

    def running(self) -> bool:
        """A refine runs (the tab's run controller, slot "refine") and was not cancelled."""
        return self._active

    def refusal(self) -> str:
        """Why refine cannot run now ("" if it can)."""
        c, tab = self.controller, self.controller.tab
        if c.alignment is None or not c.final or not c.alignment.words:
            return "refine needs a finished run's words: let the run end with word timing on"
        if tab.run.current_branch() != 0:
            return "refine works on the run itself, not on a fork: select the first branch"
        return ""

    def toggle(self) -> None:
        """Start refining the drawn words, or cancel a refine that is running."""
        if self.running():
            self.controller.tab.controller.abort("refine")
            self._finish("refine cancelled")
            return
        c, tab = self.controller, self.controller.tab
        why = self.refusal()
        if why:
            c.show_status(why)
            return
        model, audio, steps, words = tab.model, tab.audio, list(tab.run.steps()), list(c.alignment.words)
        options = tab.run.branch(0).options
        kw = dict(tab.decode_extras())  # longform=True on a long-form run: its own windows
        kw.update(language=tab.language(), task=tab.task())
        emit = self.progressed.emit
        last = [-1]

        def progress(done: int, total: int) -> None:  # worker thread: one signal per change
            if done != last[0]:
                last[0] = done
                emit(done, total)

        def gen(cancel):  # refined, then moved off silence as the drawn words are (core.analysis.silence)
            from core.analysis.silence import snap_words

            yield snap_words(model.refine_words(audio, steps, words, replace(options, capture_attention=True),
                                                cancel=cancel, progress=progress, **kw), audio)

        tab.controller.start("refine", gen, self, name="refine")  # a client of the run controller
        self._active = True
        self.button.setText("cancel refine")
        c.show_status(f"refining words 0/{len(words)}: muting around each word boundary…")

    def _progress(self, done: int, total: int) -> None:
        if self.running():
            self.controller.show_status(f"refining words {done}/{total}…")

    # the run controller's client
    def on_event(self, words) -> None:
        """The refined words (the worker's one item)."""
        self._got(words)

    def on_error(self, message: str) -> None:
        """Refine failed (its message for the user)."""
        self._failed(message)

    def on_end(self, _handle) -> None:
        """The refine worker ended."""

    def _failed(self, message: str) -> None:
        """Refine's own message ("refine failed on word 37 ..." / "... in window 2 ..."), else prefixed."""
        self._finish(message if message.startswith("refine failed") else f"refine failed: {message}")

    def _got(self, words) -> None:
        c = self.controller
        c.bands.set_words(words, open_last=False)
        self._finish(f"{len(words)} words refined (stable-ts refine)")
        self.refined.emit(list(words))

    def _finish(self, note: str) -> None:
        self._active = False
        self.button.setText("refine")
        self.controller.show_status(note)
