"""The Translation tab's text analysis (``gui.tabs.translation``): the sentences and source
tokens of the text for the loaded model, and the info line under the text box.

The analysis (``gui.tabs.source_text.TextAnalysis``) is computed once per text and model:
at once for a text up to :data:`ASYNC_ANALYSIS_CHARS` characters (a 100 kB text takes ~40 ms
to split and tokenise; the info line, the heatmap's columns and every re-decode need it),
else on a worker thread started by the tab's run controller (slot "analyse": a later text's
analysis supersedes it), whose result the tab hears of through ``on_ready``.

:class:`SourceAnalysis` is an object of the tab (``tab.analysis``); it reads the tab's
``model``, ``text()``, ``has_input()``, ``is_preview()``, ``previews``, ``info_label``,
``controller`` and ``statusMessage``.
"""

from __future__ import annotations

from typing import Any, Callable

from .source_text import TextAnalysis

EMPTY_MESSAGE = "Nothing to translate — type or paste text, drop a .txt file here, or press Sample."
WARNING_STYLE = "color: #8a5300;"
#: texts longer than this are split and tokenised on a worker thread (100 kB took ~0.7 s)
ASYNC_ANALYSIS_CHARS = 20_000


class SourceAnalysis:
    """The text's analysis for the loaded model, and the info line (see the module docstring).

    Args:
        tab: the ``TranslationTab``.
        on_ready: called on the GUI thread when a worker's analysis of the current text
            arrived (the tab then decodes if it waited for it).
    """

    def __init__(self, tab: Any, on_ready: Callable[[], None]) -> None:
        self.tab, self.on_ready = tab, on_ready
        self.analysed: TextAnalysis | None = None  # the current text's, for the loaded model
        self.analysing: tuple | None = None  # the key a worker thread is analysing
        self.notes_shown: list[str] = []  # warnings about the text in the info line

    def current(self, text: str) -> TextAnalysis | None:
        """The analysis of ``text`` for the loaded model if it is at hand, else None."""
        a = self.analysed
        return a if a is not None and a.key == (id(self.tab.model), text) else None

    def of(self, text: str) -> TextAnalysis:
        """The analysis of ``text`` for the loaded model (computed here if not at hand).

        Raises:
            ValueError: empty text (from the model).
        """
        if self.current(text) is None:
            self.analysed = TextAnalysis.of(self.tab.model, text)
        if self.analysed.error is not None:
            raise ValueError(self.analysed.error)
        return self.analysed

    def notes(self, text: str) -> list[str]:
        """The model's warnings about ``text`` when its analysis is at hand ([] otherwise)."""
        a = self.current(text)
        return list(a.notes) if a is not None else []

    def ready_for(self, text: str) -> bool:
        """Whether the text's analysis is at hand, or short enough to do here at once."""
        if self.current(text) is not None:
            return True
        if len(text) <= ASYNC_ANALYSIS_CHARS:
            self.analysed = TextAnalysis.of(self.tab.model, text)
            return True
        return False

    def start(self, text: str) -> None:
        """Split and tokenise ``text`` on a worker thread (once per text and model)."""
        from ..run_controller import Callbacks

        model = self.tab.model
        key = (id(model), text)
        if self.analysing == key:
            return
        self.analysing = key
        self.tab.controller.start("analyse", lambda cancel: iter([TextAnalysis.of(model, text)]),
                                  Callbacks(self._ready), name="translation-analysis")

    def _ready(self, result: TextAnalysis) -> None:
        key = result.key
        if self.analysing == key:
            self.analysing = None
        if key != (id(self.tab.model), self.tab.text()):
            return  # the text or model changed meanwhile; its own analysis is under way
        self.analysed = result
        self.update_info()
        self.on_ready()

    def pending(self) -> bool:
        """Whether a long text is being split on the worker thread."""
        return self.analysing is not None

    def update_info(self) -> None:
        """The info line: characters, sentences and source tokens, and warnings about the
        text (control characters removed, no word the model knows). Starts the analysis of
        a long text."""
        tab = self.tab
        if not tab.has_input():
            tab.info_label.setText(EMPTY_MESSAGE)
            tab.info_label.setStyleSheet("")
            self.notes_shown = []
            return
        text = tab.text()
        extra = ""
        notes: list[str] = []
        if tab.model is not None:
            if not self.ready_for(text):
                self.start(text)
                extra = " · splitting into sentences…"
            else:
                try:
                    a = self.of(text)
                    n_sent, n_tok = a.n_sentences, a.n_tokens
                    extra = f" · {n_sent:,} sentence{'s' if n_sent != 1 else ''} · {n_tok:,} source tokens"
                except ValueError as exc:
                    extra = f" · {exc}"
                notes = self.notes(text)
        if tab.is_preview():
            extra += (f" · the box shows the first {tab.previews.preview_chars:,} (read-only); "
                      "the whole text is translated")
        tab.info_label.setText(f"{len(text):,} characters{extra}" + "".join(f"\n⚠ {n}" for n in notes))
        tab.info_label.setStyleSheet(WARNING_STYLE if notes else "")
        if notes and notes != self.notes_shown:
            tab.statusMessage.emit(notes[0])
        self.notes_shown = notes
