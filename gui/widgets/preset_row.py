"""The preset row of the decoding-options panel (gui/widgets/options_panel.py): the preset
box, "Save as…" and Reset, and the chosen preset behind them.

The box lists the built-in presets (``core.tasks.presets``) and the user's (JSON files in a
folder, by default :func:`~gui.widgets.option_specs.default_presets_dir`). The panel
compares the options shown with :meth:`PresetRow.reference` (what the chosen preset sets,
the fields it leaves alone as they are) to mark changed values, and Reset restores it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QInputDialog, QLabel, QToolButton, QWidget

from core.options import DecodingOptions
from core.tasks.presets import BUILTIN_PRESETS, KEPT_FIELDS, Preset, load_user_presets

from .elided_combo import ElidedComboBox


class PresetRow:
    """The row's widgets (``row``: a QHBoxLayout) and the preset choice.

    Args:
        directory: where user presets are read and saved; None: nowhere ("Save as…" off).
        on_pick: called with a preset's name when the user picks it in the box.
        on_save: called when "Save as…" is clicked; on_reset: when Reset is.

    Attributes:
        presets: built-in, then the user's; preset: the chosen one; directory: the user
            presets' folder or None; errors: why user preset files could not be read.
    """

    def __init__(self, directory: Path | None, on_pick: Callable[[str], None], on_save: Callable[[], None],
                 on_reset: Callable[[], None]) -> None:
        self.presets: list[Preset] = list(BUILTIN_PRESETS)
        self.preset: Preset = BUILTIN_PRESETS[0]
        self._values: DecodingOptions = self.preset.apply()
        self.directory = directory
        self.errors: list[str] = []
        self._on_pick = on_pick
        row = self.row = QHBoxLayout()
        row.setSpacing(4)
        title = QLabel("<b>Decoding options</b>")
        row.addWidget(title)
        row.addSpacing(6)
        plabel = QLabel("preset:")
        row.addWidget(plabel)
        self.combo = ElidedComboBox()  # a long name is cut with "…" (the list shows it in full)
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(14)
        self.combo.activated.connect(self._picked)
        plabel.setBuddy(self.combo)
        row.addWidget(self.combo, 1)
        self.save_button = QToolButton()
        self.save_button.setText("Save as…")
        self.save_button.setToolTip("Save the current options as a preset of your own (a JSON file)")
        self.save_button.clicked.connect(on_save)
        row.addWidget(self.save_button)
        self.reset_button = QToolButton()
        self.reset_button.setText("Reset")
        self.reset_button.clicked.connect(on_reset)
        row.addWidget(self.reset_button)

    def reference(self, current: DecodingOptions) -> DecodingOptions:
        """What the chosen preset sets, with the fields it leaves alone taken from ``current``."""
        keep = {f: getattr(current, f) for f in KEPT_FIELDS if f not in self.preset.values}
        return replace(self._values, **keep)

    def choose(self, name: str) -> bool:
        """Make preset ``name`` the chosen one and show it in the box; False if there is none."""
        preset = next((p for p in self.presets if p.name == name), None)
        if preset is None:
            return False
        self.preset = preset
        self._values = preset.apply()
        self.select_item(name)
        return True

    def reload(self) -> None:
        """Read the user presets again (``errors`` says which could not be read) and rebuild
        the box; the chosen preset stays when it still exists (a re-saved one with its new
        values), else the first built-in one is chosen."""
        errors: list[str] = []
        user = load_user_presets(self.directory, errors) if self.directory is not None else []
        self.errors = errors
        self.presets = [*BUILTIN_PRESETS, *user]
        if self.preset.name not in {p.name for p in self.presets}:
            self.preset = BUILTIN_PRESETS[0]
            self._values = self.preset.apply()
        else:  # a re-saved user preset has new values
            self.preset = next(p for p in self.presets if p.name == self.preset.name)
            self._values = self.preset.apply()
        with QSignalBlocker(self.combo):
            self.combo.clear()
            for p in BUILTIN_PRESETS:
                self._add_item(p)
            if user:
                self.combo.insertSeparator(self.combo.count())
                for p in user:
                    self._add_item(p)
        self.select_item(self.preset.name)
        self.save_button.setEnabled(self.directory is not None)

    def ask_name(self, parent: QWidget) -> str | None:
        """Ask the user for the name to save a preset under (a modal dialog); None if
        cancelled or blank."""
        current = "" if self.preset.builtin else self.preset.name
        name, ok = QInputDialog.getText(parent, "Save preset", "Name of the preset:", text=current)
        if not ok or not name.strip():
            return None
        return name

    def _add_item(self, p: Preset) -> None:
        label = p.name if p.builtin else f"{p.name} (yours)"
        self.combo.addItem(label, p.name)
        tip = p.description if p.builtin else f"{p.description}\n{p.path}"
        self.combo.setItemData(self.combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)

    def select_item(self, name: str) -> None:
        """Show preset ``name`` as the box's current item (no signal) and the chosen
        preset's description in its tooltip."""
        i = self.combo.findData(name)
        if i >= 0:
            with QSignalBlocker(self.combo):
                self.combo.setCurrentIndex(i)
        self.combo.setToolTip(f"<b>{self.preset.name}</b>: {self.preset.description}"
                              "<br>Values that differ from the preset are marked •; Reset restores them.")

    def _picked(self, index: int) -> None:
        name = self.combo.itemData(index)
        if name:
            self._on_pick(name)
