"""The Speech tab's language and task controls (gui/tabs/speech.py): the spoken language
('auto' = detected), the languages detection may choose among, the task (transcribe or
translate to English) and Whisper's timestamp tokens; what they add to every decode, and
how they are kept in the settings and in a saved exploration.
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QCheckBox, QComboBox

from core.catalog import WHISPER_TASKS as TASKS
from core.catalog import is_english_only

#: shown before a multilingual model has loaded (then replaced by model.languages)
COMMON_LANGUAGES = ("en", "de", "es", "fr", "it", "pt", "nl", "pl", "ru", "zh", "ja", "ko")


class LanguageTask:
    """The language combo, candidate-languages field, task combo and timestamps box.

    Args:
        on_change: called when the user changes one of them (the tab decodes again).

    Attributes:
        language_combo, candidates_edit (a ``CandidatesEdit``), task_combo, timestamps_check.
    """

    def __init__(self, on_change: Callable[[], None]) -> None:
        from ..widgets.language_bars import CandidatesEdit

        self.language_combo = QComboBox()
        self.language_combo.addItems(["auto", *COMMON_LANGUAGES])
        self.language_combo.setToolTip("spoken language ('auto' = detect from the first 30 s)")
        self.language_combo.currentIndexChanged.connect(lambda _i: on_change())
        self.candidates_edit = CandidatesEdit()
        self.candidates_edit.candidatesChanged.connect(lambda _c: on_change())
        self.task_combo = QComboBox()
        self.task_combo.addItems(list(TASKS))
        self.task_combo.setToolTip("transcribe in the spoken language, or translate to English")
        self.task_combo.currentIndexChanged.connect(lambda _i: on_change())
        self.timestamps_check = QCheckBox("timestamps")
        self.timestamps_check.setToolTip("decode with Whisper's timestamp tokens (<|0.00|> ... <|2.60|>): timestamps in "
                                         "pairs, never decreasing, the first at most 1.0 s in")
        self.timestamps_check.toggled.connect(lambda _on: on_change())

    def language(self) -> str:
        """The chosen language ('auto' or a code; 'en' for English-only models)."""
        return self.language_combo.currentText() if self.language_combo.isEnabled() else "en"

    def task(self) -> str:
        """'transcribe' or 'translate'."""
        return self.task_combo.currentText() if self.task_combo.isEnabled() else "transcribe"

    def extras(self) -> dict:
        """``timestamps=True`` when the box is ticked, ``candidate_languages`` when the field has
        codes and the model is multilingual (nothing otherwise)."""
        extras: dict = {"timestamps": True} if self.timestamps_check.isChecked() else {}
        if self.candidates_edit.isEnabled() and self.candidates_edit.codes():
            extras["candidate_languages"] = self.candidates_edit.codes()
        return extras

    def show_model(self, model: Any) -> None:
        """List a loaded model's languages ("auto" + its languages, or "en" for an English-only
        model), keeping the chosen one when the model has it."""
        langs = list(getattr(model, "languages", []) or [])
        cur = self.language_combo.currentText()
        self.language_combo.blockSignals(True)
        self.language_combo.clear()
        self.language_combo.addItems(["auto", *langs] if getattr(model, "multilingual", False) else ["en"])
        i = self.language_combo.findText(cur)
        self.language_combo.setCurrentIndex(max(0, i))
        self.language_combo.blockSignals(False)
        self.candidates_edit.set_languages(langs if getattr(model, "multilingual", False) else None)

    def follow_model(self, model: Any, name: str) -> None:
        """Enable the controls for ``model`` (its ``multilingual``) or, with no model loaded
        (None), for the model named ``name`` (English-only names: ``core.catalog.is_english_only``)."""
        self.set_multilingual(bool(getattr(model, "multilingual", True)) if model is not None
                              else not is_english_only(name))

    def set_multilingual(self, multi: bool) -> None:
        """Enable language, candidates and task for a multilingual model; for an English-only
        one disable them (saying why) and set the task to transcribe."""
        for c in (self.language_combo, self.task_combo, self.candidates_edit):
            c.setEnabled(multi)
            c.setToolTip(c.toolTip() if multi else "English-only model: transcribes English only")
        if not multi:
            self.task_combo.blockSignals(True)
            self.task_combo.setCurrentText("transcribe")
            self.task_combo.blockSignals(False)

    def settings(self) -> dict:
        """The input settings a saved exploration keeps: language, task, timestamps, candidates."""
        return {"language": self.language(), "task": self.task(), "timestamps": self.timestamps_check.isChecked(),
                "language_candidates": ", ".join(self.candidates_edit.codes())}

    def apply_settings(self, settings: dict) -> None:
        """Show :meth:`settings` of a saved exploration (no decode is asked for)."""
        for key, combo in (("language", self.language_combo), ("task", self.task_combo)):
            i = combo.findText(str(settings.get(key, "")))
            if i >= 0 and combo.isEnabled():
                combo.blockSignals(True)
                combo.setCurrentIndex(i)
                combo.blockSignals(False)
        self.timestamps_check.blockSignals(True)
        self.timestamps_check.setChecked(bool(settings.get("timestamps", False)))
        self.timestamps_check.blockSignals(False)
        self.candidates_edit.set_codes(str(settings.get("language_candidates", "")))

    def save(self, s: QSettings) -> None:
        """Keep the controls in the window's settings (``speech/...``)."""
        s.setValue("speech/language", self.language_combo.currentText())
        s.setValue("speech/task", self.task_combo.currentText())
        s.setValue("speech/timestamps", self.timestamps_check.isChecked())
        s.setValue("speech/language_candidates", ", ".join(self.candidates_edit.codes()))

    def restore(self, s: QSettings) -> None:
        """Show what :meth:`save` kept (no decode is asked for by the combos)."""
        for key, combo in (("speech/language", self.language_combo), ("speech/task", self.task_combo)):
            v = s.value(key)
            if v is not None:
                combo.blockSignals(True)
                i = combo.findText(str(v))
                if i >= 0:
                    combo.setCurrentIndex(i)
                combo.blockSignals(False)
        self.timestamps_check.blockSignals(True)
        self.timestamps_check.setChecked(str(s.value("speech/timestamps", False)).lower() == "true")
        self.timestamps_check.blockSignals(False)
        self.candidates_edit.set_codes(str(s.value("speech/language_candidates", "") or ""))
