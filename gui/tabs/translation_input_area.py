"""The Translation tab's input area (``gui.tabs.translation``): the direction / model row
(with the target language of M2M100/NLLB models), the shortlist option with Drop selection,
Open…, Sample and Clear, then the text box and its info line.

:class:`TranslationInputArea` is the widget the tab's ``build_input`` returns
(``RunTab.input_area``); it builds the rows with the tab's public pieces:
``make_model_picker`` / ``make_file_buttons`` / ``load_picked_model`` (``DecodeTab``),
``open_dropped``, ``clear_text`` and the tab's ``mask`` (``SourceDrop``).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from .base import SAMPLES_DIR
from .source_text import SourceTextEdit

SHORTLIST_TEXT = "shortlist (faster, renormalised over ~hundreds of candidates)"


class TranslationInputArea(QWidget):
    """The Translation tab's input area (see the module docstring).

    Attributes (the tab shares them): ``text_edit`` (``SourceTextEdit``), ``info_label``,
    ``target_edit``, ``shortlist_check``, ``drop_button``, ``clear_button``.
    """

    def __init__(self, tab: Any) -> None:
        """The model row, the options/files row, then the text box and its info line."""
        super().__init__()
        self.text_edit = SourceTextEdit()
        self.text_edit.setPlaceholderText("Type or paste text to translate, or drop a .txt file here…")
        self.text_edit.filesDropped.connect(tab.open_dropped)
        self.info_label = QLabel("")
        self.info_label.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addWidget(QLabel("<b>Input</b> — source text (translates as you type)"))
        lay.addLayout(self._build_model_row(tab))
        lay.addLayout(self._build_files_row(tab))
        lay.addWidget(self.text_edit, 1)
        lay.addWidget(self.info_label)

    def _build_model_row(self, tab: Any) -> QHBoxLayout:
        """The direction / model picker, the target language (M2M100/NLLB) and Load."""
        tab.make_model_picker(
            "en → pt / pt → en: the bundled Bergamot tiny11 models (offline). Or type a transformers "
            "translation model id (Helsinki-NLP/opus-mt-en-de, t5-small, facebook/m2m100_418M) or a local "
            "folder saved with save_pretrained, and press Enter or Load."
        )
        self.target_edit = QLineEdit()
        self.target_edit.setPlaceholderText("target lang")
        self.target_edit.setMaximumWidth(110)
        self.target_edit.setToolTip("M2M100/NLLB models only: target language code (pt, de, por_Latn, ...); "
                                    "press Enter to apply")
        self.target_edit.returnPressed.connect(tab.load_picked_model)
        row = QHBoxLayout()
        row.addWidget(QLabel("direction / model"))
        row.addWidget(tab.model_combo, 1)
        row.addWidget(self.target_edit)
        row.addWidget(tab.dtype_combo)  # float32 / int8 (core.dtypes.DTYPES)
        row.addWidget(tab.load_button)
        return row

    def _build_files_row(self, tab: Any) -> QHBoxLayout:
        """The shortlist option, then Open…, Sample and Clear."""
        self.shortlist_check = QCheckBox(SHORTLIST_TEXT)
        self.shortlist_check.setToolTip(
            "Bundled models: compute each step's logits only for the sentence's lexical shortlist (a few "
            "hundred candidate tokens) — faster, and what the native Bergamot engine does; the probabilities "
            "shown are then renormalised over those candidates instead of the full 32k vocabulary."
        )
        tab.make_file_buttons("Open a UTF-8 .txt file (Ctrl+O); or drop one on the text box",
                              f"Load the sample text from {SAMPLES_DIR}")
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Clear the text (Ctrl+Z in the text box brings it back)")
        self.clear_button.clicked.connect(tab.clear_text)
        row = QHBoxLayout()
        row.addWidget(self.shortlist_check)
        row.addStretch(1)
        self.drop_button = tab.mask.make_drop_button(self.text_edit)  # the what-if's dropped words
        row.addWidget(self.drop_button)
        row.addWidget(tab.open_button)
        row.addWidget(tab.sample_button)
        row.addWidget(self.clear_button)
        return row
