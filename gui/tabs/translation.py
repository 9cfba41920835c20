"""The Translation tab: type, paste or drop text, pick a direction, watch it translate.

Models: the bundled Bergamot tiny11 directions (en→pt, pt→en; ~1 s to load) or any
transformers seq2seq translation model typed into the direction box (hub id or local
directory; ``core.tasks.translation.TranslationModel.load``, imported in the loader
thread so the window never waits for torch). Decoding re-runs 600 ms after the text
stops changing and whenever an option changes (from the cached encoder output).

Cross-attention heatmap: rows = target tokens, columns = source tokens (SentencePiece
pieces, ``▁`` marks a word start, ``</s>`` ends each sentence). Multi-sentence input is
one continuous stream; the sentences' source tokens are laid side by side, so each
sentence's rows light up its own block of columns (a block diagonal that shows which
sentence a token belongs to). The default view is the alignment view: the last decoder
layer, head 0 for the bundled tiny11 models (their first decoder layer lags one token
and is not an alignment); hub models start on the average over layers and heads.
Hovering a target token (a heatmap row or a chip in the token stream) marks the source
tokens it attends to most (every column within 80 % of the row's maximum).

Clear, Open… and drops replace the text as one undoable edit (Ctrl+Z brings the old text
back). A file that is not a UTF-8 .txt file, or is empty, is refused with a message and
the text stays as it was (``gui.tabs.source_text``). The info line under the text says
when control characters were removed, parts are in a script the model cannot read,
sentences were cut at the length cap, or the text has no word the model knows
(``TranslationModel.text_notes``).

Long texts never block the window (issue 19 §3: opening 1 MB on one line stalled it for
2.5 s). A text over ``LARGE_TEXT_CHARS`` characters, or with a line over
``LONG_LINE_CHARS``, is shown as a read-only preview of its first ``PREVIEW_CHARS``
characters (Qt lays out a 1 MB line in ~0.9 s); the tab keeps the whole text, translates
all of it, and Clear / Ctrl+Z work as for any text (``gui.tabs.source_text.TextPreviews``).
A text over ``ASYNC_ANALYSIS_CHARS`` is split into sentences and tokenised on a worker
thread; the decode starts when that is done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
from PySide6.QtCore import QSettings, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.catalog import TRANSLATION_BUNDLED as BUNDLED
from core.catalog import TRANSLATION_DEFAULT as DEFAULT_MODEL
from core.catalog import TRANSLATION_MODELS
from core.events import StepEvent
from core.inputs.types import TextInput
from core.options import DecodingOptions

from .base import SAMPLES_DIR, DecodeTab, RunFn, first_file
from .source_text import (  # noqa: F401  (column_label is used from here)
    TEXT_SUFFIXES,
    SourceTextEdit,
    TextAnalysis,
    TextPreviews,
    column_label,
    not_a_text_file,
    read_text_file,
)
from .whatif_inputs import SourceDrop

#: what the direction box shows for the bundled models
DIRECTION_LABELS = {name: d.label for name, d in TRANSLATION_MODELS.items()}
DEBOUNCE_MS = 600
#: hovering a token marks the source columns whose (row-normalised) attention is >= this
HOVER_THRESHOLD = 0.8
#: alignment view of the bundled tiny11 models: (last decoder layer, head 0)
TINY11_ALIGNMENT = (1, 0)
#: heatmap column axis label (pyqtgraph renders axis labels as HTML: escape "</s>")
COLUMN_AXIS = "source token (▁ = word start, &lt;/s&gt; = end of sentence)"
SHORTLIST_TEXT = "shortlist (faster, renormalised over ~hundreds of candidates)"
EMPTY_MESSAGE = "Nothing to translate — type or paste text, drop a .txt file here, or press Sample."
WARNING_STYLE = "color: #8a5300;"
#: texts longer than this are split and tokenised on a worker thread (100 kB took ~0.7 s)
ASYNC_ANALYSIS_CHARS = 20_000
#: sentence separator lines are drawn for at most this many sentences
MAX_SEPARATORS = 1000


def first_text_sample(directory: Path = SAMPLES_DIR) -> Path | None:
    """The first ``.txt`` (by name) in ``assets/samples/``, or None."""
    return first_file(TEXT_SUFFIXES, directory)


class TranslationTab(SourceDrop, DecodeTab):
    """Text translation (see module docstring)."""

    title = "Translation"
    settings_key = "translation"
    #: room for four sentences of chips and two lines of text under them
    main_splitter_sizes = (270, 215, 365)
    file_kind, file_suffixes, open_title = "Text", TEXT_SUFFIXES, "Open text"
    sample_suffixes = TEXT_SUFFIXES
    sample_missing = "No sample text found: put a .txt file into {folder}."
    bundled_models, default_model = BUNDLED, DEFAULT_MODEL
    empty_model_message = "Enter a direction (en → pt, pt → en), a transformers model id or a local folder."
    encoder_reads = None  # the source text has token ids: the encoder stages of the chain apply

    def __init__(self, parent: QWidget | None = None) -> None:
        self._analysed: TextAnalysis | None = None  # the current text's, for the loaded model
        self._analysing: tuple | None = None  # the key a worker thread is analysing
        self._decode_when_analysed = False
        self._analysis_handle = None  # the worker splitting a long text (gui.worker)
        self._previews = TextPreviews()
        self._models: dict[tuple, Any] = {}  # loaded models by (name, target language), reused on switch
        self._source_tokens: list[str] = []
        self._hovered: int | None = None
        self._hover_columns: list[int] = []
        self._view_set_for: Any = None
        self._notes_shown: list[str] = []  # warnings about the text in the info line
        super().__init__(parent)
        self._text_timer = QTimer(self)
        self._text_timer.setSingleShot(True)
        self._text_timer.setInterval(DEBOUNCE_MS)
        self._text_timer.timeout.connect(self._text_settled)
        self.text_edit.textChanged.connect(self._text_timer.start)
        self.text_edit.textChanged.connect(self._lock_preview)
        self.stream.stepHovered.connect(self.hover_step)
        self.heatmap.rowHovered.connect(self.hover_step)
        self.hover_label = QLabel("")
        self.hover_label.setStyleSheet("color: #b35900;")
        self.hover_label.setToolTip("hover a target token (heatmap row or token chip) to see the source tokens it attends to")
        self.heatmap.add_below(self.hover_label)
        self._update_info()

    # ------------------------------------------------------------ input area
    def build_input(self) -> QWidget:
        """The model row, the options/files row, then the text box and its info line."""
        self.text_edit = SourceTextEdit()
        self.text_edit.setPlaceholderText("Type or paste text to translate, or drop a .txt file here…")
        self.text_edit.filesDropped.connect(self.open_dropped)
        self.info_label = QLabel("")
        self.info_label.setWordWrap(True)
        w = QWidget()
        lay = QVBoxLayout(w)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addWidget(QLabel("<b>Input</b> — source text (translates as you type)"))
        lay.addLayout(self._build_model_row())
        lay.addLayout(self._build_files_row())
        lay.addWidget(self.text_edit, 1)
        lay.addWidget(self.info_label)
        return w

    def _build_model_row(self) -> QHBoxLayout:
        """The direction / model picker, the target language (M2M100/NLLB) and Load."""
        self.make_model_picker(
            "en → pt / pt → en: the bundled Bergamot tiny11 models (offline). Or type a transformers "
            "translation model id (Helsinki-NLP/opus-mt-en-de, t5-small, facebook/m2m100_418M) or a local "
            "folder saved with save_pretrained, and press Enter or Load."
        )
        self.target_edit = QLineEdit()
        self.target_edit.setPlaceholderText("target lang")
        self.target_edit.setMaximumWidth(110)
        self.target_edit.setToolTip("M2M100/NLLB models only: target language code (pt, de, por_Latn, ...); "
                                    "press Enter to apply")
        self.target_edit.returnPressed.connect(self.load_picked_model)
        row = QHBoxLayout()
        row.addWidget(QLabel("direction / model"))
        row.addWidget(self.model_combo, 1)
        row.addWidget(self.target_edit)
        row.addWidget(self.load_button)
        return row

    def _build_files_row(self) -> QHBoxLayout:
        """The shortlist option, then Open…, Sample and Clear."""
        self.shortlist_check = QCheckBox(SHORTLIST_TEXT)
        self.shortlist_check.setToolTip(
            "Bundled models: compute each step's logits only for the sentence's lexical shortlist (a few "
            "hundred candidate tokens) — faster, and what the native Bergamot engine does; the probabilities "
            "shown are then renormalised over those candidates instead of the full 32k vocabulary."
        )
        self.shortlist_check.toggled.connect(self._shortlist_toggled)
        self.make_file_buttons("Open a UTF-8 .txt file (Ctrl+O); or drop one on the text box",
                               f"Load the sample text from {SAMPLES_DIR}")
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Clear the text (Ctrl+Z in the text box brings it back)")
        self.clear_button.clicked.connect(self.clear_text)
        row = QHBoxLayout()
        row.addWidget(self.shortlist_check)
        row.addStretch(1)
        row.addWidget(self.make_drop_button())  # the what-if's dropped words (gui/tabs/whatif_inputs.py)
        row.addWidget(self.open_button)
        row.addWidget(self.sample_button)
        row.addWidget(self.clear_button)
        return row

    def configure_heatmap(self) -> None:
        self.heatmap.set_columns(COLUMN_AXIS, 1.0, labels=[])

    # --------------------------------------------------------------- input
    def text(self) -> str:
        """The source text (all of it, also when the box shows a preview of a long text)."""
        return self._previews.full_text(self.text_edit.toPlainText())

    def set_text(self, text: str) -> None:
        """Replace the source text as one undoable edit (Ctrl+Z restores the old text);
        decodes after the debounce, like typing. A long text is shown as a read-only
        preview (see the module docstring)."""
        cursor = QTextCursor(self.text_edit.document())
        cursor.beginEditBlock()
        cursor.select(QTextCursor.SelectionType.Document)
        cursor.insertText(self._previews.shown_text(text))
        cursor.endEditBlock()

    def is_preview(self) -> bool:
        """Whether the box shows a read-only preview of a long text."""
        return self._previews.is_preview(self.text_edit.toPlainText())

    def _lock_preview(self) -> None:
        self.text_edit.setReadOnly(self.is_preview())

    def clear_text(self) -> None:
        """Clear: empty the text box (undoable)."""
        self.set_text("")

    def has_input(self) -> bool:
        return bool(self.text().strip())

    def shortlist(self) -> bool:
        """Whether the shortlist option is on (and applies to the loaded model)."""
        return self.shortlist_check.isChecked() and self.shortlist_check.isEnabled()

    def _text_settled(self) -> None:
        self._update_info()
        if not self.has_input():
            if self._decode_when_analysed:
                self._decode_when_analysed = False
                self.busyChanged.emit(self.is_busy(), "")
            self.stop_decode()
            self.clear_run()
            self._reset_columns([])
            self.hover_step(None)
            return
        self.request_decode()

    def _update_info(self) -> None:
        """The info line: characters, sentences and source tokens, and warnings about the
        text (control characters removed, no word the model knows)."""
        if not self.has_input():
            self.info_label.setText(EMPTY_MESSAGE)
            self.info_label.setStyleSheet("")
            self._notes_shown = []
            return
        text = self.text()
        extra = ""
        notes: list[str] = []
        if self.model is not None:
            if not self._analysis_ready_for(text):
                self._start_analysis(text)
                extra = " · splitting into sentences…"
            else:
                try:
                    self._analysis(text)
                    n_sent, n_tok = self._analysed.n_sentences, self._analysed.n_tokens
                    extra = f" · {n_sent:,} sentence{'s' if n_sent != 1 else ''} · {n_tok:,} source tokens"
                except ValueError as exc:
                    extra = f" · {exc}"
                notes = self._text_notes(text)
        if self.is_preview():
            extra += (f" · the box shows the first {self._previews.preview_chars:,} (read-only); "
                      "the whole text is translated")
        self.info_label.setText(f"{len(text):,} characters{extra}" + "".join(f"\n⚠ {n}" for n in notes))
        self.info_label.setStyleSheet(WARNING_STYLE if notes else "")
        if notes and notes != self._notes_shown:
            self.statusMessage.emit(notes[0])
        self._notes_shown = notes

    def _analysis(self, text: str) -> tuple[list[Any], list[str]]:
        """(sentence chunks, source tokens) of ``text`` for the loaded model, computed once per
        text and model (a 100 kB text takes ~40 ms to split and tokenise; the info line,
        the heatmap's columns and every re-decode need them).

        Raises:
            ValueError: empty text (from the model).
        """
        key = (id(self.model), text)
        if self._analysed is None or self._analysed.key != key:
            self._analysed = TextAnalysis.of(self.model, text)
        if self._analysed.error is not None:
            raise ValueError(self._analysed.error)
        return self._analysed.chunks, self._analysed.tokens

    def _text_notes(self, text: str) -> list[str]:
        if self._analysed is not None and self._analysed.key == (id(self.model), text):
            return list(self._analysed.notes)
        return []

    def _analysis_ready_for(self, text: str) -> bool:
        """Whether the text's analysis is at hand, or short enough to do here at once."""
        if self._analysed is not None and self._analysed.key == (id(self.model), text):
            return True
        if len(text) <= ASYNC_ANALYSIS_CHARS:
            self._analysed = TextAnalysis.of(self.model, text)
            return True
        return False

    def _start_analysis(self, text: str) -> None:
        """Split and tokenise ``text`` on a worker thread (once per text and model);
        :meth:`_analysis_ready` takes the result on the GUI thread."""
        model = self.model
        key = (id(model), text)
        if self._analysing == key:
            return
        self._analysing = key
        from ..worker import start_worker

        self._analysis_handle = start_worker(lambda cancel: iter([TextAnalysis.of(model, text)]),
                                             on_event=self._analysis_ready, name="translation-analysis")

    def _analysis_ready(self, result: TextAnalysis) -> None:
        key = result.key
        if self._analysing == key:
            self._analysing = None
        if key != (id(self.model), self.text()):
            return  # the text or model changed meanwhile; its own analysis is under way
        self._analysed = result
        self._update_info()
        if self._decode_when_analysed:
            self._decode_when_analysed = False
            self.request_decode()

    def is_decoding(self) -> bool:
        """A decode is running, or waits for a long text to be split (see the module docstring)."""
        return self._decode_when_analysed or super().is_decoding()

    def cancel(self) -> bool:
        """Cancel as the base class does, and a decode waiting for a long text's split."""
        waiting = self._decode_when_analysed
        self._decode_when_analysed = False
        done = super().cancel()
        if waiting and not done:
            self.busyChanged.emit(False, "")
            self.statusMessage.emit("Cancelled before the first sentence (the text was still being split)")
        return done or waiting

    def analysis_pending(self) -> bool:
        """Whether a long text is being split on the worker thread (the decode waits for it)."""
        return self._analysing is not None

    def text_notes(self) -> list[str]:
        """The warnings the info line shows about the current text ([] if none)."""
        return list(self._notes_shown)

    # --------------------------------------------------------------- files
    def refusal(self, path: Path | None) -> str | None:
        """Only .txt files are opened (the text stays as it was)."""
        return None if path is None else not_a_text_file(path)

    def read_file(self, path: Path) -> bool:
        """Put the UTF-8 text of ``path`` in the text box as one undoable edit. False (a
        banner, and the text left as it was) for a file that is not UTF-8, unreadable or
        empty."""
        try:
            text = read_text_file(path)
        except ValueError as exc:
            self.show_error(str(exc))
            return False
        self.clear_error()
        self.set_text(text)
        self.statusMessage.emit(f"Opened {path.name}")
        return True

    # --------------------------------------------------------------- model
    def model_name(self, text: str) -> str:
        """The model behind the direction box's text ("en → pt" -> "en-pt"; others as typed)."""
        t = text.strip()
        return next((name for name, label in DIRECTION_LABELS.items() if t == label), t)

    def model_label(self, name: str) -> str:
        return DIRECTION_LABELS.get(name, name)

    def target_language(self) -> str | None:
        """The target language typed for M2M100/NLLB models, or None."""
        t = self.target_edit.text().strip()
        return t or None

    def load_model(self, name: str) -> None:
        bundled = self.model_name(name) in BUNDLED
        self.shortlist_check.setEnabled(bundled)
        self.target_edit.setEnabled(not bundled)
        super().load_model(name)

    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        target = None if name in BUNDLED else self.target_language()
        key = (name, target)
        cached = self._models.get(key)
        if cached is not None:
            return cached
        from core.tasks.translation import (
            TranslationModel,  # torch is imported here, off the GUI thread
        )

        model = TranslationModel.load(name, progress=progress, target_language=target)
        self._models[key] = model
        return model

    def model_loaded(self, model: Any) -> None:
        self.shortlist_check.setEnabled(bool(getattr(model, "supports_shortlist", False)))
        self.target_edit.setEnabled(getattr(model, "target_language", None) is not None)
        if getattr(model, "target_language", None) and not self.target_edit.text().strip():
            self.target_edit.setText(model.target_language)
        self._view_set_for = None
        self._update_info()

    def _shortlist_toggled(self, _on: bool) -> None:
        self.statsChanged.emit(self._stats_dict(None))
        self.request_decode()

    # --------------------------------------------------------------- decode
    def task_input(self, purpose: str = "decode") -> TextInput:
        """The text with the shortlist choice."""
        return TextInput(self.text(), self.shortlist())

    def decode_fn(self, options: DecodingOptions) -> RunFn:
        """The columns follow the text's analysis, then the base decode."""
        fn = super().decode_fn(options)
        chunks, tokens = self._analysis(self.text())  # ValueError (empty) is shown by the base class
        self._reset_columns(tokens, self._analysed.boundaries, labels=self._analysed.labels)
        self.hover_step(None)
        self._update_info()
        return fn

    def input_settings(self) -> dict:
        return {"shortlist": self.shortlist()}

    def apply_input_settings(self, settings: dict) -> None:
        if "shortlist" in settings and self.shortlist_check.isEnabled():
            self.shortlist_check.blockSignals(True)
            self.shortlist_check.setChecked(bool(settings["shortlist"]))
            self.shortlist_check.blockSignals(False)

    def request_decode(self) -> None:
        if not self.has_input():
            self._update_info()
            return
        if self.model is not None and not self._analysis_ready_for(self.text()):
            self._decode_when_analysed = True  # decodes when the worker thread has split the text
            self.stop_decode()
            self._start_analysis(self.text())
            self._update_info()
            self.busyChanged.emit(True, "Splitting the text into sentences…")
            return
        self._decode_when_analysed = False
        super().request_decode()

    def _reset_columns(self, tokens: list[str], boundaries: list[int] | None = None,
                       labels: list[str] | None = None) -> None:
        """Make the heatmap's columns exactly ``tokens`` (the widget only ever grows them);
        draw a line at each column index in ``boundaries`` (where a sentence starts).
        ``labels``: the tokens' column labels when already made (``column_label``)."""
        self._source_tokens = tokens
        self.heatmap.reset_columns(COLUMN_AXIS, 1.0, labels=labels if labels is not None else
                                   [column_label(t) for t in tokens])
        if boundaries is not None and len(boundaries) > MAX_SEPARATORS:
            boundaries = []  # sub-pixel lines (the view is windowed per sentence) that cost ~30 ms a repaint
        self.heatmap.set_column_separators(list(boundaries or []))  # a white line between sentences' tokens

    def _on_event(self, ev: Any) -> None:
        if isinstance(ev, StepEvent) and ev.cross_attention is not None and self._view_set_for is not self.model:
            self._set_alignment_view(ev.cross_attention.shape)
        super()._on_event(ev)

    def _set_alignment_view(self, shape: tuple[int, ...]) -> None:
        """Default heatmap view for a new model: the alignment head (bundled tiny11:
        last decoder layer, head 0) or the average (hub models)."""
        self._view_set_for = self.model
        if getattr(self.model, "bundled", False):
            layer, head = shape[0] - 1, TINY11_ALIGNMENT[1]
            self.heatmap.set_view(
                layer, head, shape=(shape[0], shape[1]),
                note=f"alignment view: layer {layer} (last), head {head} · rows normalised to max",
                tip="The last decoder layer's head 0 aligns target and source tokens. The first decoder layer "
                    "lags one token behind, so it is not an alignment. Each row is divided by its maximum.",
            )
        else:
            self.heatmap.set_view(None, None, shape=(shape[0], shape[1]),
                                  note="average over layers and heads · rows normalised to max")

    def cancelled_text(self, steps: list[StepEvent]) -> str:
        """A cancelled run's text: each sentence's tokens decoded by the model's tokenizer
        (not the raw pieces "▁Um▁pequeno"), joined with the input's sentence separators."""
        model = self.model
        if model is None or not steps:
            return super().cancelled_text(steps)
        by_segment: dict[int, list[int]] = {}
        for ev in steps:
            by_segment.setdefault(ev.segment, []).append(ev.token_id)
        analysed = self._analysed
        chunks = analysed.chunks if analysed is not None and analysed.key == (id(model), self.text()) else []
        out = []
        for seg, ids in sorted(by_segment.items()):
            sep = chunks[seg].separator if seg < len(chunks) else " "
            out.append(model.backend.decode(ids).strip() + sep)
        return "".join(out).strip()

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Cancel everything and wait for the worker threads, the text splitter's too."""
        super().shutdown(wait_ms)
        self._decode_when_analysed = False
        if self._analysis_handle is not None:
            self._analysis_handle.wait(wait_ms)

    # ---------------------------------------------------------------- hover
    def hover_step(self, step: int | None) -> list[int]:
        """Mark the source tokens that target token ``step`` attends to most (columns within
        ``HOVER_THRESHOLD`` of its row's maximum); None clears the marks.

        Returns:
            the marked column indices (into the source tokens).
        """
        if step == self._hovered and (step is None or self._hover_columns):
            return list(self._hover_columns)
        self._hovered = step
        self._hover_columns = []
        row = self.heatmap.row_of(step)
        if row is None or row >= self.heatmap.row_count():
            self.heatmap.mark_columns(None, [])
            self.hover_label.setText("")
            return []
        values = self.heatmap.matrix()[row]
        first = self.heatmap.column_offset()  # a windowed heatmap (long input) draws one sentence's columns
        cols = [first + int(c) for c in np.flatnonzero(values >= HOVER_THRESHOLD * max(float(values.max()), 1e-9))]
        self.heatmap.mark_columns(row, cols)
        self._hover_columns = cols
        ev = self.run.step(step)
        target = ev.text if ev is not None else "?"
        sources = " ".join(self._source_tokens[c] for c in cols if c < len(self._source_tokens))
        self.hover_label.setText(f"hover: target {target!r} ← source {sources}")
        return list(cols)

    def hovered_columns(self) -> list[int]:
        """The source columns marked by the last hover."""
        return list(self._hover_columns)

    # ---------------------------------------------------------------- stats
    def _stats_dict(self, fin):
        d = super()._stats_dict(fin)
        if d.get("model") and self.shortlist():
            d["model"] = f"{d['model']} · shortlist"
        return d

    # ------------------------------------------------------------ settings
    def save_settings(self, s: QSettings) -> None:
        super().save_settings(s)
        s.setValue("translation/shortlist", self.shortlist_check.isChecked())
        s.setValue("translation/target_language", self.target_edit.text())
        s.setValue("translation/text", self.text())

    def restore_settings(self, s: QSettings) -> None:
        super().restore_settings(s)
        self.shortlist_check.blockSignals(True)
        self.shortlist_check.setChecked(str(s.value("translation/shortlist", False)).lower() in ("1", "true"))
        self.shortlist_check.blockSignals(False)
        self.target_edit.setText(str(s.value("translation/target_language", "") or ""))
        text = s.value("translation/text")
        if text is None:  # first start: the sample text
            p = first_text_sample()
            text = read_text_file(p) if p is not None else ""
        self.text_edit.blockSignals(True)
        self.text_edit.setPlainText(self._previews.shown_text(str(text)))
        self.text_edit.blockSignals(False)
        self._lock_preview()
        self._update_info()
