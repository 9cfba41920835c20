"""The Translation tab: type, paste or drop text, pick a direction, watch it translate.

Models: the bundled Bergamot tiny11 directions (en→pt, pt→en; ~1 s to load) or any
transformers seq2seq translation model typed into the direction box (hub id or local
directory; ``core.tasks.translation.TranslationModel.load``, imported in the loader
thread so the window never waits for torch). Decoding re-runs 600 ms after the text
stops changing and whenever an option changes (from the cached encoder output).

Cross-attention heatmap: rows = target tokens, columns = source tokens. Multi-sentence
input is one continuous stream; the sentences' source tokens are laid side by side, so
each sentence's rows light up its own block of columns (a block diagonal that shows which
sentence a token belongs to). The columns, the default (alignment) view and the hover
marks are ``gui.tabs.translation_columns`` (:attr:`TranslationTab.columns`).

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
thread; the decode starts when that is done (``gui.tabs.translation_text``,
:attr:`TranslationTab.analysis`, which also writes the info line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QWidget

from core.catalog import TRANSLATION_BUNDLED as BUNDLED
from core.catalog import TRANSLATION_DEFAULT as DEFAULT_MODEL
from core.catalog import TRANSLATION_MODELS
from core.dtypes import DTYPES
from core.events import StepEvent
from core.inputs.types import TextInput
from core.options import DecodingOptions

from .base import SAMPLES_DIR, DecodeTab, RunFn, first_file
from .source_text import (  # noqa: F401  (column_label is used from here)
    TEXT_SUFFIXES,
    TextPreviews,
    column_label,
    not_a_text_file,
    read_text_file,
)
from .translation_columns import COLUMN_AXIS, SourceColumns
from .translation_input_area import SHORTLIST_TEXT, TranslationInputArea  # noqa: F401 - SHORTLIST_TEXT re-exported
from .translation_text import ASYNC_ANALYSIS_CHARS, EMPTY_MESSAGE, SourceAnalysis  # noqa: F401
from .whatif_inputs import SourceDrop

#: what the direction box shows for the bundled models
DIRECTION_LABELS = {name: d.label for name, d in TRANSLATION_MODELS.items()}
DEBOUNCE_MS = 600


def first_text_sample(directory: Path = SAMPLES_DIR) -> Path | None:
    """The first ``.txt`` (by name) in ``assets/samples/``, or None."""
    return first_file(TEXT_SUFFIXES, directory)


class TranslationTab(DecodeTab):
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
    mask_hint = SourceDrop.mask_hint
    dtypes = DTYPES
    dtype_tooltip = (
        "Compute type of the model's weights. float32: the default, the same ids as the native engine "
        "(the bundled weights are int8 originally, dequantised). int8: the encoder, the cross-attention "
        "keys/values, the decoder's feed-forward layers and the output projection with int8 weights (one "
        "scale per output row) and activations quantised per call (fbgemm): faster, with slightly different "
        "ids. Bundled en → pt / pt → en only. Changing it reloads the model."
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        self._decode_when_analysed = False
        #: the text box's previews of long texts (``gui.tabs.source_text``)
        self.previews = TextPreviews()
        self._models: dict[tuple, Any] = {}  # loaded models by (name, target language, dtype), reused on switch
        self._load_dtype = "float32"  # the dtype picked when the running load started
        #: the text's sentences and source tokens, and the info line (gui/tabs/translation_text.py)
        self.analysis = SourceAnalysis(self, self._analysis_ready)
        self.mask = SourceDrop(self)  # the what-if's dropped source words (gui/tabs/whatif_inputs.py)
        super().__init__(parent)
        self._text_timer = QTimer(self)
        self._text_timer.setSingleShot(True)
        self._text_timer.setInterval(DEBOUNCE_MS)
        self._text_timer.timeout.connect(self._text_settled)
        self.text_edit.textChanged.connect(self._text_timer.start)
        self.text_edit.textChanged.connect(self._lock_preview)
        #: the heatmap's source-token columns, default view and hover marks (gui/tabs/translation_columns.py)
        self.columns = SourceColumns(self)
        self.hover_label = self.columns.hover_label
        self.stream.stepHovered.connect(self.hover_step)
        self.heatmap.rowHovered.connect(self.hover_step)
        self._update_info()

    # ------------------------------------------------------------ input area
    def build_input(self) -> QWidget:
        area = TranslationInputArea(self)  # the rows and the text box (gui/tabs/translation_input_area.py)
        self.text_edit, self.info_label, self.target_edit = area.text_edit, area.info_label, area.target_edit
        self.shortlist_check, self.drop_button, self.clear_button = area.shortlist_check, area.drop_button, area.clear_button
        self.shortlist_check.toggled.connect(self._shortlist_toggled)
        return area

    def drop_selection(self) -> bool:
        """Drop selection: mask the source tokens the text box's selection overlaps (``SourceDrop``)."""
        return self.mask.drop_selection()

    def dropped_ranges(self) -> list[tuple[int, int]]:
        """The character ranges struck through in the text box."""
        return self.mask.dropped_ranges()

    def configure_heatmap(self) -> None:
        self.heatmap.set_columns(COLUMN_AXIS, 1.0, labels=[])

    # --------------------------------------------------------------- input
    def text(self) -> str:
        """The source text (all of it, also when the box shows a preview of a long text)."""
        return self.previews.full_text(self.text_edit.toPlainText())

    def set_text(self, text: str) -> None:
        """Replace the source text as one undoable edit (Ctrl+Z restores the old text);
        decodes after the debounce, like typing. A long text is shown as a read-only
        preview (see the module docstring)."""
        cursor = QTextCursor(self.text_edit.document())
        cursor.beginEditBlock()
        cursor.select(QTextCursor.SelectionType.Document)
        cursor.insertText(self.previews.shown_text(text))
        cursor.endEditBlock()

    def is_preview(self) -> bool:
        """Whether the box shows a read-only preview of a long text."""
        return self.previews.is_preview(self.text_edit.toPlainText())

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
            self.columns.reset([])
            self.hover_step(None)
            return
        self.request_decode()

    def _update_info(self) -> None:
        self.analysis.update_info()

    def _analysis_ready(self) -> None:
        """A long text's analysis arrived: the decode that waited for it starts."""
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
        return self.analysis.pending()

    def text_notes(self) -> list[str]:
        """The warnings the info line shows about the current text ([] if none)."""
        return list(self.analysis.notes_shown)

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
        self._load_dtype = self.model_dtype()  # read here, in the GUI thread; the worker loads with it
        bundled = self.model_name(name) in BUNDLED
        self.shortlist_check.setEnabled(bundled)
        self.target_edit.setEnabled(not bundled)
        super().load_model(name)

    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        target = None if name in BUNDLED else self.target_language()
        dtype = self._load_dtype
        key = (name, target, dtype)
        cached = self._models.get(key)
        if cached is not None:
            return cached
        from core.tasks.translation import (
            TranslationModel,  # torch is imported here, off the GUI thread
        )

        model = TranslationModel.load(name, progress=progress, target_language=target, dtype=dtype)
        self._models[key] = model
        return model

    def kept_models(self) -> list[Any]:
        """The loaded models this tab keeps for a switch back (``gui.gc_policy`` runs no full
        collection to free one of them)."""
        return list(self._models.values())

    def model_loaded(self, model: Any) -> None:
        self.shortlist_check.setEnabled(bool(getattr(model, "supports_shortlist", False)))
        self.target_edit.setEnabled(getattr(model, "target_language", None) is not None)
        if getattr(model, "target_language", None) and not self.target_edit.text().strip():
            self.target_edit.setText(model.target_language)
        self.columns.view_set_for = None
        self._update_info()

    def _shortlist_toggled(self, _on: bool) -> None:
        self.statsChanged.emit(self.stats_dict(None))
        self.request_decode()

    # --------------------------------------------------------------- decode
    def task_input(self, purpose: str = "decode") -> TextInput:
        """The text with the shortlist choice."""
        return TextInput(self.text(), self.shortlist())

    def decode_fn(self, options: DecodingOptions) -> RunFn:
        """The columns follow the text's analysis, then the base decode."""
        fn = super().decode_fn(options)
        a = self.analysis.of(self.text())  # ValueError (empty) is shown by the base class
        self.columns.reset(a.tokens, a.boundaries, labels=a.labels)
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
        if self.model is not None and not self.analysis.ready_for(self.text()):
            self._decode_when_analysed = True  # decodes when the worker thread has split the text
            self.stop_decode()
            self.analysis.start(self.text())
            self._update_info()
            self.busyChanged.emit(True, "Splitting the text into sentences…")
            return
        self._decode_when_analysed = False
        super().request_decode()

    def take_event(self, ev: Any) -> None:
        self.columns.step_seen(ev)  # a new model's first step sets the heatmap's default view
        super().take_event(ev)

    def cancelled_text(self, steps: list[StepEvent]) -> str:
        """A cancelled run's text: each sentence's tokens decoded by the model's tokenizer
        (not the raw pieces "▁Um▁pequeno"), joined with the input's sentence separators."""
        model = self.model
        if model is None or not steps:
            return super().cancelled_text(steps)
        by_segment: dict[int, list[int]] = {}
        for ev in steps:
            by_segment.setdefault(ev.segment, []).append(ev.token_id)
        analysed = self.analysis.current(self.text())
        chunks = analysed.chunks if analysed is not None else []
        out = []
        for seg, ids in sorted(by_segment.items()):
            sep = chunks[seg].separator if seg < len(chunks) else " "
            out.append(model.backend.decode(ids).strip() + sep)
        return "".join(out).strip()

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Cancel everything and wait for the worker threads (the text splitter's too)."""
        super().shutdown(wait_ms)
        self._decode_when_analysed = False

    # ---------------------------------------------------------------- hover
    def hover_step(self, step: int | None) -> list[int]:
        """Mark the source tokens that target token ``step`` attends to most; None clears the
        marks (``SourceColumns.hover``). Returns the marked column indices."""
        return self.columns.hover(step)

    def hovered_columns(self) -> list[int]:
        """The source columns marked by the last hover."""
        return self.columns.hovered()

    # ---------------------------------------------------------------- stats
    def status_model_name(self, name: str) -> str:
        """``name``, with "· shortlist" while the vocabulary shortlist is on."""
        return f"{name} · shortlist" if self.shortlist() else name

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
        self.text_edit.setPlainText(self.previews.shown_text(str(text)))
        self.text_edit.blockSignals(False)
        self._lock_preview()
        self._update_info()
