"""The decoding-options panel: a preset row over collapsible sections in a scroll area.

Sections: **Strategy** (the six strategies, the seed, max tokens, mirostat τ/η and
contrastive α/top-k when those are chosen), **Filters** (the sampler chain,
:class:`~gui.widgets.sampler_chain.SamplerChain`, and the values of temperature and the
filters), **Penalties**, **Beam** and **Constraints** (bad words, logit bias, min new
tokens, length decay). Each header is a checkable tool button with an arrow and a
one-line summary of what is active, so a collapsed section still says what it does.

Emits ``optionsChanged(DecodingOptions)`` debounced (a single-shot ``QTimer``, 250 ms by
default) so dragging a slider or a chain stage re-decodes once, not per pixel. Controls
that the chosen strategy (or the tab) does not use are disabled but keep their values,
with the reason in their tooltips. Invalid combinations (e.g. beams not a multiple of the
beam groups) are shown in ``error_label`` and nothing is emitted.

Presets (``core.tasks.presets``): the box lists the built-in presets and the user's (JSON files
in :func:`default_presets_dir`); picking one applies it, values that differ from it are
marked (bold label with a dot, bold chain row, a dot on the section header), Reset
restores them and "Save as…" stores the current options as a user preset.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterable

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QRadioButton,
    QScrollArea,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from core.options import (
    BEAM_STRATEGIES,
    SAMPLING_STRATEGIES,
    STRATEGIES,
    WARPER_STAGES,
    DecodingOptions,
)
from core.tasks.presets import (
    BUILTIN_PRESETS,
    KEPT_FIELDS,
    Preset,
    load_user_presets,
    save_user_preset,
)

from .sampler_chain import (
    FIELD_STAGE,
    STAGE_FIELDS,
    SamplerChain,
    stage_is_off,
    stage_summary,
)

from .option_controls import Section, SliderSpin
from .option_specs import (  # noqa: F401 (ENCODER_STAGES, NO_SOURCE_IDS: re-exported for the tabs)
    _INT_FIELDS,
    _ONLY_FOR,
    BEAM_SPECS,
    CONSTRAINT_SPECS,
    CONTRASTIVE_DEFAULT_TOP_K,
    CONTRASTIVE_SPECS,
    DEFAULT_EXPANDED,
    ENCODER_STAGES,
    FIELD_HELP,
    FILTER_SPECS,
    MARKED_FIELDS,
    MIROSTAT_SPECS,
    NO_SOURCE_IDS,
    PENALTY_SPECS,
    SECTION_STAGES,
    SECTIONS,
    STRATEGY_HELP,
    STRATEGY_SPECS,
    default_presets_dir,
    format_logit_bias,
    parse_bad_words,
    parse_logit_bias,
)


class OptionsPanel(QWidget):
    """Edits a ``DecodingOptions``; emits ``optionsChanged`` after ``debounce_ms`` of quiet.

    Args:
        options: the options shown first (default ``DecodingOptions()``).
        debounce_ms: quiet time before ``optionsChanged``.
        presets_dir: where user presets are read and saved; None: :func:`default_presets_dir`.

    Signals:
        optionsChanged(object): the new validated ``DecodingOptions``.
    """

    optionsChanged = Signal(object)

    def __init__(
        self,
        options: DecodingOptions | None = None,
        debounce_ms: int = 250,
        parent: QWidget | None = None,
        presets_dir: str | Path | None = None,
    ) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(debounce_ms)
        self._timer.timeout.connect(self._emit)
        self._base = options or DecodingOptions()
        self._unavailable: dict[str, str] = {}
        self._presets: list[Preset] = list(BUILTIN_PRESETS)
        self._preset: Preset = BUILTIN_PRESETS[0]
        self._preset_ref: DecodingOptions = self._preset.apply()
        self._presets_dir: Path | None = Path(presets_dir) if presets_dir is not None else default_presets_dir()
        self.preset_errors: list[str] = []
        self._notice = ""  # shown in the error label while there is no other error
        self._changed: set[str] = set()

        self.controls: dict[str, SliderSpin] = {}
        self.text_controls: dict[str, QLineEdit] = {}
        self.labels: dict[str, QLabel] = {}
        self._label_text: dict[str, str] = {}
        self._field_section: dict[str, str] = {}

        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 4)
        outer.setSpacing(3)
        outer.addLayout(self._build_preset_row())
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #b00020;")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        outer.addWidget(self.error_label)

        content = QWidget()
        content.setObjectName("optionsContent")
        col = QVBoxLayout(content)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(2)
        self.sections: dict[str, Section] = {}
        for name, build, tip in (
            ("Strategy", self._build_strategy, "How the next token is chosen, and its own parameters"),
            ("Filters", self._build_filters, "The sampler chain: its order, which stages are on, and their values"),
            ("Penalties", self._build_penalties, "Penalties on repeating the output or copying the source"),
            ("Beam", self._build_beam, "Beam search and diverse beam search"),
            ("Constraints", self._build_constraints, "Forbidden words, biased texts and length rules"),
        ):
            sec = Section(name, tip)
            build(sec)
            self.sections[name] = sec
            col.addWidget(sec)
        col.addStretch(1)
        self.scroll = QScrollArea()
        self.scroll.setWidget(content)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        outer.addWidget(self.scroll, 1)
        self._content = content
        self.setExpandedSections(DEFAULT_EXPANDED)

        self.strategy_group.idToggled.connect(self._strategy_toggled)
        self.chain.changed.connect(self._changed_by_user)
        self.chain.stageActivated.connect(self.show_stage)
        self._reload_presets()
        self.setOptions(self._base)

    # ------------------------------------------------------------------ building
    def _build_preset_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(4)
        title = QLabel("<b>Decoding options</b>")
        row.addWidget(title)
        row.addSpacing(6)
        plabel = QLabel("preset:")
        row.addWidget(plabel)
        self.preset_combo = QComboBox()
        self.preset_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.preset_combo.setMinimumContentsLength(14)
        self.preset_combo.activated.connect(self._preset_picked)
        plabel.setBuddy(self.preset_combo)
        row.addWidget(self.preset_combo, 1)
        self.save_preset_button = QToolButton()
        self.save_preset_button.setText("Save as…")
        self.save_preset_button.setToolTip("Save the current options as a preset of your own (a JSON file)")
        self.save_preset_button.clicked.connect(self._ask_save_preset)
        row.addWidget(self.save_preset_button)
        self.reset_button = QToolButton()
        self.reset_button.setText("Reset")
        self.reset_button.clicked.connect(self.reset)
        row.addWidget(self.reset_button)
        return row

    def _add_slider(self, sec: Section, spec: tuple, row: int | None = None) -> SliderSpin:
        field, label, lo, hi, step, dec, special = spec
        grid = sec.grid
        row = grid.rowCount() if row is None else row
        lab = QLabel(label)
        ctl = SliderSpin(lo, hi, step, dec, special)
        lab.setBuddy(ctl.spin)
        grid.addWidget(lab, row, 0)
        grid.addWidget(ctl, row, 1)
        self.controls[field] = ctl
        self.labels[field] = lab
        self._label_text[field] = label
        self._field_section[field] = sec.title
        ctl.valueChanged.connect(self._changed_by_user)
        return ctl

    def _build_strategy(self, sec: Section) -> None:
        self.strategy_group = QButtonGroup(self)
        self.strategy_buttons: dict[str, QRadioButton] = {}
        box = QWidget()
        g = QGridLayout(box)
        g.setContentsMargins(0, 0, 0, 0)
        g.setHorizontalSpacing(10)
        g.setVerticalSpacing(0)
        for i, name in enumerate(STRATEGIES):
            b = QRadioButton(name.replace("_", " "))
            b.setToolTip(STRATEGY_HELP[name])
            self.strategy_group.addButton(b, i)
            self.strategy_buttons[name] = b
            g.addWidget(b, i // 3, i % 3)
        g.setColumnStretch(3, 1)
        lab = QLabel("strategy")
        lab.setToolTip("How the next token is chosen; hover a choice for its definition and source")
        self.labels["strategy"] = lab
        self._label_text["strategy"] = "strategy"
        self._field_section["strategy"] = "Strategy"
        sec.grid.addWidget(lab, 0, 0, Qt.AlignmentFlag.AlignTop)
        sec.grid.addWidget(box, 0, 1)
        for spec in STRATEGY_SPECS:
            self._add_slider(sec, spec)
        row = sec.grid.rowCount()
        self.labels["seed"] = QLabel("seed")
        self._label_text["seed"] = "seed"
        self._field_section["seed"] = "Strategy"
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setKeyboardTracking(False)
        self.seed_spin.setMinimumWidth(96)
        self.seed_spin.valueChanged.connect(self._changed_by_user)
        self.labels["seed"].setBuddy(self.seed_spin)
        sec.grid.addWidget(self.labels["seed"], row, 0)
        sec.grid.addWidget(self.seed_spin, row, 1, Qt.AlignmentFlag.AlignLeft)
        #: rows shown only for their strategy
        self._strategy_rows: dict[str, list[QWidget]] = {"mirostat": [], "contrastive": []}
        for spec in MIROSTAT_SPECS:
            ctl = self._add_slider(sec, spec)
            self._strategy_rows["mirostat"] += [ctl, self.labels[spec[0]]]
        for spec in CONTRASTIVE_SPECS:
            ctl = self._add_slider(sec, spec)
            self._strategy_rows["contrastive"] += [ctl, self.labels[spec[0]]]
        # contrastive search's candidates: the same field as top-k in Filters, mirrored here
        row = sec.grid.rowCount()
        lab = QLabel("candidates (top-k)")
        self.contrastive_top_k = SliderSpin(1, 100, 1, 0)
        self.contrastive_top_k.setToolTip(
            "Contrastive search: the k most probable tokens are the candidates of each step (Su et al. 2022; "
            "transformers top_k). The same value as top-k in Filters."
        )
        lab.setToolTip(self.contrastive_top_k.toolTip())
        lab.setBuddy(self.contrastive_top_k.spin)
        sec.grid.addWidget(lab, row, 0)
        sec.grid.addWidget(self.contrastive_top_k, row, 1)
        self._strategy_rows["contrastive"] += [self.contrastive_top_k, lab]
        self.contrastive_top_k.valueChanged.connect(self._mirror_top_k)

    def _build_filters(self, sec: Section) -> None:
        self.chain = SamplerChain()
        sec.grid.addWidget(self.chain, 0, 0, 1, 2)
        for spec in FILTER_SPECS:
            self._add_slider(sec, spec)
        self.controls["top_k"].valueChanged.connect(self._mirror_top_k_back)

    def _build_penalties(self, sec: Section) -> None:
        for spec in PENALTY_SPECS:
            self._add_slider(sec, spec)

    def _build_beam(self, sec: Section) -> None:
        for spec in BEAM_SPECS:
            self._add_slider(sec, spec)

    def _build_constraints(self, sec: Section) -> None:
        for field, label, placeholder in (
            ("bad_words", "bad words", "word, another word"),
            ("logit_bias", "logit bias", "text=value, e.g. yes=5, no=-5"),
        ):
            row = sec.grid.rowCount()
            lab = QLabel(label)
            edit = QLineEdit()
            edit.setPlaceholderText(placeholder)
            edit.setClearButtonEnabled(True)
            lab.setBuddy(edit)
            sec.grid.addWidget(lab, row, 0)
            sec.grid.addWidget(edit, row, 1)
            self.text_controls[field] = edit
            self.labels[field] = lab
            self._label_text[field] = label
            self._field_section[field] = "Constraints"
            edit.textChanged.connect(self._changed_by_user)
        for spec in CONSTRAINT_SPECS:
            self._add_slider(sec, spec)

    # ------------------------------------------------------------------ API
    @property
    def debounce_ms(self) -> int:
        """Milliseconds of quiet before ``optionsChanged`` fires."""
        return self._timer.interval()

    def strategy(self) -> str:
        """The selected strategy name."""
        return STRATEGIES[max(0, self.strategy_group.checkedId())]

    def options(self) -> DecodingOptions:
        """The options the controls show, validated. Encoder stages given a value where the
        tab has no source ids are switched off (``disabled_stages``), as the chain shows.

        Raises:
            ValueError: from ``DecodingOptions.validate`` (e.g. beams not a multiple of the
                beam groups) or an unreadable logit-bias entry.
        """
        o = self._collect()
        forced = [s for s in self._unavailable if o.stage_enabled(s) and not stage_is_off(s, o)]
        if forced:
            o = replace(o, disabled_stages=tuple(s for s in o.sampler_order if s in set(o.disabled_stages) | set(forced)))
        return o.validate()

    def setOptions(self, options: DecodingOptions, emit: bool = False) -> None:  # noqa: N802
        """Show ``options`` (validated first). Emits ``optionsChanged`` (debounced) only if ``emit``.

        Raises:
            ValueError: if ``options`` do not validate.
        """
        options = options.validate()
        self._base = options
        self._last_valid = options
        widgets = [*self.controls.values(), self.contrastive_top_k, self.seed_spin, self.strategy_group,
                   *self.text_controls.values()]
        blockers = [QSignalBlocker(w) for w in widgets]
        try:
            self.strategy_buttons[options.strategy].setChecked(True)
            for field, ctl in self.controls.items():
                ctl.setValue(getattr(options, field))
            self.contrastive_top_k.setValue(max(1, options.top_k))
            self.seed_spin.setValue(options.seed if options.seed is not None else 0)
            self.text_controls["bad_words"].setText(", ".join(options.bad_words))
            self.text_controls["logit_bias"].setText(format_logit_bias(options.logit_bias))
            self.chain.set_chain(options.sampler_order, options.disabled_stages)
        finally:
            del blockers
        self._set_error("")
        self._refresh()
        if emit:
            self._timer.start()

    def last_valid_options(self) -> DecodingOptions:
        """The options last shown by :meth:`setOptions` or emitted (valid, unlike what an
        invalid combination on screen gives)."""
        return self._last_valid

    def flush(self) -> None:
        """Emit a pending debounced change now (e.g. before closing)."""
        if self._timer.isActive():
            self._timer.stop()
            self._emit()

    def setUnavailableStages(self, reasons: dict[str, str]) -> None:  # noqa: N802
        """Stages this tab cannot run (stage -> reason): disabled in the chain and in their
        sections, with the reason in the tooltips."""
        self._unavailable = dict(reasons)
        self.chain.set_unavailable(reasons)
        self._refresh()

    # -- presets
    def presets(self) -> list[Preset]:
        """The presets in the box: built-in, then the user's."""
        return list(self._presets)

    def presetName(self) -> str:  # noqa: N802
        """The chosen preset's name."""
        return self._preset.name

    def preset_values(self) -> DecodingOptions:
        """What the chosen preset sets, with the fields it leaves alone as they are now
        (the values Reset restores and the marks compare with)."""
        return self._reference(self._collect_or_base())

    def setPreset(self, name: str, apply: bool = True) -> bool:  # noqa: N802
        """Choose preset ``name``; ``apply``: show its values (emits ``optionsChanged``),
        else only compare with it (restoring settings). False if there is no such preset."""
        preset = next((p for p in self._presets if p.name == name), None)
        if preset is None:
            return False
        self._preset = preset
        self._preset_ref = preset.apply()
        self._select_preset_item(name)
        if apply:
            self.setOptions(self._reference(self._collect_or_base()), emit=True)
        else:
            self._refresh()
        return True

    def reset(self) -> None:
        """Restore the chosen preset's values (emits ``optionsChanged``)."""
        self.setOptions(self._reference(self._collect_or_base()), emit=True)

    def changed_fields(self) -> set[str]:
        """The option fields whose values differ from the chosen preset's."""
        return set(self._changed)

    def is_marked(self, field: str) -> bool:
        """Whether ``field``'s label is marked as changed from the preset."""
        return self.labels[field].font().bold()

    def presets_dir(self) -> Path | None:
        """Where user presets are read and saved."""
        return self._presets_dir

    def set_presets_dir(self, directory: str | Path | None) -> None:
        """Read user presets from ``directory`` instead (the preset box is rebuilt)."""
        self._presets_dir = Path(directory) if directory is not None else None
        self._reload_presets()
        self._refresh()

    def save_preset_as(self, name: str, description: str = "") -> Path:
        """Save the current options as user preset ``name`` and choose it.

        Raises:
            ValueError: no presets folder, an empty or built-in name, or invalid options.
        """
        if self._presets_dir is None:
            raise ValueError("there is no folder to keep presets in")
        options = self.options()
        path = save_user_preset(self._presets_dir, name, options, description or f"Saved from {self._preset.name}.")
        self._reload_presets()
        self.setPreset(name.strip(), apply=False)
        return path

    # -- sections
    def expandedSections(self) -> list[str]:  # noqa: N802
        """The names of the open sections."""
        return [n for n, s in self.sections.items() if s.isExpanded()]

    def setExpandedSections(self, names: Iterable[str]) -> None:  # noqa: N802
        """Open the sections named, close the others."""
        names = set(names)
        for n, s in self.sections.items():
            s.setExpanded(n in names)

    def show_stage(self, stage: str) -> None:
        """Open the section with ``stage``'s controls, scroll there and focus the first."""
        field = STAGE_FIELDS.get(stage, (stage,))[0]
        widget = self.controls.get(field) or self.text_controls.get(field)
        if widget is None:
            return
        self.sections[self._field_section[field]].setExpanded(True)
        (widget.spin if isinstance(widget, SliderSpin) else widget).setFocus()
        # scroll once the opened section is laid out
        QTimer.singleShot(0, self, lambda: self.scroll.ensureWidgetVisible(widget))

    # ------------------------------------------------------------- internals
    def _collect(self) -> DecodingOptions:
        """The options the controls show, not validated.

        Raises:
            ValueError: an unreadable logit-bias entry.
        """
        values: dict = {"strategy": self.strategy()}
        for field, ctl in self.controls.items():
            v = ctl.value()
            values[field] = int(round(v)) if field in _INT_FIELDS else round(v, 6)
        values["seed"] = int(self.seed_spin.value())
        values["bad_words"] = parse_bad_words(self.text_controls["bad_words"].text())
        values["logit_bias"] = parse_logit_bias(self.text_controls["logit_bias"].text())
        values["sampler_order"] = self.chain.order()
        values["disabled_stages"] = self.chain.disabled()
        return replace(self._base, **values)

    def _collect_or_base(self) -> DecodingOptions:
        try:
            return self._collect()
        except ValueError:
            return self._base

    def _reference(self, current: DecodingOptions) -> DecodingOptions:
        keep = {f: getattr(current, f) for f in KEPT_FIELDS if f not in self._preset.values}
        return replace(self._preset_ref, **keep)

    def _reload_presets(self) -> None:
        errors: list[str] = []
        user = load_user_presets(self._presets_dir, errors) if self._presets_dir is not None else []
        self.preset_errors = errors
        self._presets = [*BUILTIN_PRESETS, *user]
        if self._preset.name not in {p.name for p in self._presets}:
            self._preset = BUILTIN_PRESETS[0]
            self._preset_ref = self._preset.apply()
        else:  # a re-saved user preset has new values
            self._preset = next(p for p in self._presets if p.name == self._preset.name)
            self._preset_ref = self._preset.apply()
        with QSignalBlocker(self.preset_combo):
            self.preset_combo.clear()
            for p in BUILTIN_PRESETS:
                self._add_preset_item(p)
            if user:
                self.preset_combo.insertSeparator(self.preset_combo.count())
                for p in user:
                    self._add_preset_item(p)
        self._select_preset_item(self._preset.name)
        self.save_preset_button.setEnabled(self._presets_dir is not None)
        self._notice = ("Some presets could not be read: " + "; ".join(errors)) if errors else ""
        self._set_error("")

    def _add_preset_item(self, p: Preset) -> None:
        label = p.name if p.builtin else f"{p.name} (yours)"
        self.preset_combo.addItem(label, p.name)
        tip = p.description if p.builtin else f"{p.description}\n{p.path}"
        self.preset_combo.setItemData(self.preset_combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)

    def _select_preset_item(self, name: str) -> None:
        i = self.preset_combo.findData(name)
        if i >= 0:
            with QSignalBlocker(self.preset_combo):
                self.preset_combo.setCurrentIndex(i)
        self.preset_combo.setToolTip(f"<b>{self._preset.name}</b>: {self._preset.description}"
                                     "<br>Values that differ from the preset are marked •; Reset restores them.")

    def _preset_picked(self, index: int) -> None:
        name = self.preset_combo.itemData(index)
        if name:
            self.setPreset(name, apply=True)

    def _ask_save_preset(self) -> None:
        current = "" if self._preset.builtin else self._preset.name
        name, ok = QInputDialog.getText(self, "Save preset", "Name of the preset:", text=current)
        if not ok or not name.strip():
            return
        try:
            self.save_preset_as(name)
        except (ValueError, OSError) as exc:
            self._set_error(f"Preset not saved: {exc}")

    def _strategy_toggled(self, _id: int, on: bool) -> None:
        if not on:
            return
        if self.strategy() == "contrastive" and self.controls["top_k"].value() < 1:
            self.controls["top_k"].setValue(CONTRASTIVE_DEFAULT_TOP_K)  # contrastive search needs candidates
        self._changed_by_user()

    def _mirror_top_k(self, v: float) -> None:
        if self.controls["top_k"].value() != v:
            self.controls["top_k"].setValue(v)  # emits: counts as the user's change

    def _mirror_top_k_back(self, v: float) -> None:
        with QSignalBlocker(self.contrastive_top_k):
            self.contrastive_top_k.setValue(max(1.0, v))

    def _set_error(self, text: str) -> None:
        text = text or self._notice
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    def _changed_by_user(self, *_args) -> None:
        self._refresh()
        self._timer.start()  # restart: fires once after the last change

    def _field_reason(self, field: str, strategy: str) -> str | None:
        """Why ``field`` is not used now, or None."""
        if field == "top_k" and strategy == "contrastive":
            return None
        stage = FIELD_STAGE.get(field)
        if stage is not None:
            return self.chain.unavailable_reason(stage, strategy)
        only = _ONLY_FOR.get(field)
        if only and strategy not in only:
            return f"used by: {', '.join(only)}"
        return None

    def _refresh(self) -> None:
        """Enable/disable, tooltips, marks, the chain's view and the section summaries."""
        strategy = self.strategy()
        self.labels["strategy"].setToolTip("How the next token is chosen; hover a choice for its definition and source")
        for field, lab in self.labels.items():
            if field == "strategy":
                continue
            widget = self.seed_spin if field == "seed" else self.controls.get(field) or self.text_controls[field]
            reason = self._field_reason(field, strategy)
            widget.setEnabled(reason is None)
            lab.setEnabled(reason is None)
            tip = FIELD_HELP[field] + (f"\n\nNot used now: {reason}" if reason else "")
            widget.setToolTip(tip)
            lab.setToolTip(tip)
            lab.setStatusTip(reason or "")
        for name, widgets in self._strategy_rows.items():
            for w in widgets:
                w.setVisible(strategy == name)
                if strategy != name:
                    w.setEnabled(False)
        self.contrastive_top_k.setEnabled(strategy == "contrastive")
        current = self._collect_or_base()
        ref = self._reference(current)
        self._changed = {f for f in MARKED_FIELDS if getattr(current, f) != getattr(ref, f)}
        unticked = set(current.disabled_stages)
        for field, lab in self.labels.items():
            marked = field in self._changed
            switched_off = FIELD_STAGE.get(field) in unticked
            font = lab.font()
            if font.bold() != marked or font.italic() != switched_off:
                font.setBold(marked)
                font.setItalic(switched_off)  # its stage is unticked in the chain: the value is kept
                lab.setFont(font)
            if switched_off:
                lab.setToolTip(f"{lab.toolTip()}\n\nSwitched off in the chain (Filters); the value is kept.")
            lab.setText(f"{self._label_text[field]} •" if marked else self._label_text[field])
            if marked and field not in ("sampler_order", "disabled_stages"):
                was = getattr(ref, field)
                shown = format_logit_bias(was) if field == "logit_bias" else (", ".join(was) if field == "bad_words" else was)
                lab.setToolTip(f"{lab.toolTip()}\n\nChanged: the preset '{self._preset.name}' has {shown!r}")
        changed_stages = {FIELD_STAGE[f] for f in self._changed if f in FIELD_STAGE}
        changed_stages |= set(current.disabled_stages) ^ set(ref.disabled_stages)
        self.chain.update_view(current, changed_stages)
        by_section = {n: False for n in SECTIONS}
        for f in self._changed:
            if f in ("sampler_order", "disabled_stages"):
                by_section["Filters"] = True
            elif f in self._field_section:
                by_section[self._field_section[f]] = True
        for n, sec in self.sections.items():
            sec.set_marked(by_section[n])
        self._update_summaries(current)
        n = len(self._changed)
        self.reset_button.setEnabled(n > 0)
        self.reset_button.setToolTip(
            f"Restore the values of the preset '{self._preset.name}'"
            + (f" ({n} changed: {', '.join(sorted(self._changed))})" if n else " (nothing changed)")
        )

    def _active(self, o: DecodingOptions, stages: Iterable[str]) -> list[str]:
        return [
            stage_summary(s, o)
            for s in stages
            if o.stage_enabled(s) and not stage_is_off(s, o) and self.chain.unavailable_reason(s, o.strategy) is None
        ]

    def _update_summaries(self, o: DecodingOptions) -> None:
        s = self.sections
        strat = o.strategy.replace("_", " ")
        extra = {
            "sample": f"seed {o.seed}",
            "mirostat": f"τ {o.mirostat_tau:g}, η {o.mirostat_eta:g}",
            "contrastive": f"α {o.penalty_alpha:g}, top-k {o.top_k}",
        }.get(o.strategy)
        s["Strategy"].summary.setText(f"{strat}{', ' + extra if extra else ''}, max {o.max_new_tokens} tokens")
        if o.strategy in SAMPLING_STRATEGIES:
            active = self._active(o, [st for st in o.sampler_order if st in WARPER_STAGES])
            s["Filters"].summary.setText(" → ".join(active) if active else "no filter on")
        else:
            s["Filters"].summary.setText(f"not used by {strat} (sampling only)")
        for name in ("Penalties", "Constraints"):
            order = [st for st in o.sampler_order if st in SECTION_STAGES[name]]
            active = self._active(o, order)
            s[name].summary.setText(", ".join(active) if active else "none")
        if o.strategy in BEAM_STRATEGIES:
            beam = f"{o.num_beams} beams, length penalty {o.length_penalty:g}"
            if o.strategy == "diverse_beam":
                beam += f", {o.num_beam_groups} groups, diversity {o.diversity_penalty:g}"
            s["Beam"].summary.setText(beam)
        else:
            s["Beam"].summary.setText(f"not used by {strat}")
        for sec in s.values():
            sec.summary.setToolTip(sec.summary.text())

    def _emit(self) -> None:
        try:
            options = self.options()
        except ValueError as exc:
            self._set_error(str(exc))
            return
        self._notice = ""
        self._set_error("")
        self._last_valid = options
        self.optionsChanged.emit(options)

