"""The decoding-options panel: a preset row over collapsible sections in a scroll area.

Sections (built by :class:`~gui.widgets.option_sections.OptionSections`): **Strategy**,
**Filters** (the sampler chain, :class:`~gui.widgets.sampler_chain.SamplerChain`),
**Penalties**, **Beam** and **Constraints**. Each header is a checkable tool button with an
arrow and a one-line summary of what is active, so a collapsed section still says what it does.

Emits ``optionsChanged(DecodingOptions)`` debounced (a single-shot ``QTimer``, 250 ms by
default) so a burst of changes re-decodes once. A slider the user steps (keyboard, a click
on its groove, a wheel notch) or lets go, or a number entered in its box (Enter, leaving
the box), emits at the next turn of the event loop
(``SliderSpin.committed``); while its handle is dragged, changes coalesce for
``DRAG_MS`` (about two frames) so a drag does not start a decode per pixel. Controls
that the chosen strategy (or the tab) does not use are disabled but keep their values,
with the reason in their tooltips. Invalid combinations (e.g. beams not a multiple of the
beam groups) are shown in ``error_label`` and nothing is emitted.

Presets (``core.tasks.presets``; the row is :class:`~gui.widgets.preset_row.PresetRow`):
the box lists the built-in presets and the user's (JSON files in :func:`default_presets_dir`);
picking one applies it, values that differ from it are marked (bold label with a dot, bold
chain row, a dot on the section header), Reset restores them and "Save as…" stores the
current options as a user preset.
"""


from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterable

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from core.options import STRATEGIES, DecodingOptions
from core.tasks.presets import Preset, save_user_preset

from .option_controls import SliderSpin
from .option_sections import OptionSections
from .option_specs import (  # noqa: F401 (ENCODER_STAGES, NO_SOURCE_IDS: re-exported for the tabs)
    CHOICE_HELP,
    CONTRASTIVE_DEFAULT_TOP_K,
    DEFAULT_EXPANDED,
    ENCODER_STAGES,
    FIELD_HELP,
    INT_FIELDS,
    MARKED_FIELDS,
    NO_SOURCE_IDS,
    SECTIONS,
    default_presets_dir,
    format_logit_bias,
    parse_bad_words,
    parse_logit_bias,
)
from .preset_row import PresetRow
from .sampler_chain import FIELD_STAGE, STAGE_FIELDS, stage_is_off


DRAG_MS = 30
"""While a slider's handle is held, ``optionsChanged`` waits for this many ms of stillness."""


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
        self._debounce_ms = debounce_ms
        self._sliders: list[SliderSpin] = []  # set once the sections are built
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(debounce_ms)
        self._timer.timeout.connect(self._emit)
        self._base = options or DecodingOptions()
        self._unavailable: dict[str, str] = {}
        self.preset_errors: list[str] = []
        self._notice = ""  # shown in the error label while there is no other error
        self._changed: set[str] = set()

        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 4)
        outer.setSpacing(3)
        self._row = PresetRow(Path(presets_dir) if presets_dir is not None else default_presets_dir(),
                              on_pick=lambda name: self.setPreset(name, apply=True), on_save=self._ask_save_preset,
                              on_reset=self.reset)
        self.preset_combo = self._row.combo
        self.save_preset_button = self._row.save_button
        self.reset_button = self._row.reset_button
        outer.addLayout(self._row.row)
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
        self._s = s = OptionSections(self, self._changed_by_user)
        self.sections = s.sections
        self.controls, self.text_controls, self.labels = s.controls, s.text_controls, s.labels
        self.strategy_group, self.strategy_buttons, self.seed_spin = s.strategy_group, s.strategy_buttons, s.seed_spin
        self.chain, self.contrastive_top_k = s.chain, s.contrastive_top_k
        self.choices = s.choices  # speculative decoding's draft and verification boxes
        self.checks = s.checks  # the KV cache switch
        for sec in self.sections.values():
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
        self._sliders = [*self.controls.values(), self.contrastive_top_k]
        for ctl in self._sliders:
            ctl.committed.connect(self._commit)
        self._reload_presets()
        self.setOptions(self._base)

    # ------------------------------------------------------------------ API
    @property
    def debounce_ms(self) -> int:
        """Milliseconds of quiet before ``optionsChanged`` fires after a change made by code,
        in a text field or in the chain (a slider's step or release, or a number entered in its
        box, emits at the next event-loop turn: see the module's docstring)."""
        return self._debounce_ms

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
                   *self.text_controls.values(), *self.choices.values(), *self.checks.values()]
        blockers = [QSignalBlocker(w) for w in widgets]
        try:
            self.strategy_buttons[options.strategy].setChecked(True)
            for field, ctl in self.controls.items():
                ctl.setValue(getattr(options, field))
            self.contrastive_top_k.setValue(max(1, options.top_k))
            self.seed_spin.setValue(options.seed if options.seed is not None else 0)
            self.text_controls["bad_words"].setText(", ".join(options.bad_words))
            self.text_controls["logit_bias"].setText(format_logit_bias(options.logit_bias))
            for field in self.choices:
                self._s.set_choice(field, getattr(options, field))
            for field, box in self.checks.items():
                box.setChecked(bool(getattr(options, field)))
            self.chain.set_chain(options.sampler_order, options.disabled_stages)
        finally:
            del blockers
        self._set_error("")
        self._refresh()
        if emit:
            self._timer.start(self._debounce_ms)

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
        return list(self._row.presets)

    def presetName(self) -> str:  # noqa: N802
        """The chosen preset's name."""
        return self._row.preset.name

    def preset_values(self) -> DecodingOptions:
        """What the chosen preset sets, with the fields it leaves alone as they are now
        (the values Reset restores and the marks compare with)."""
        return self._row.reference(self._collect_or_base())

    def setPreset(self, name: str, apply: bool = True) -> bool:  # noqa: N802
        """Choose preset ``name``; ``apply``: show its values (emits ``optionsChanged``),
        else only compare with it (restoring settings). False if there is no such preset."""
        if not self._row.choose(name):
            return False
        if apply:
            self.setOptions(self._row.reference(self._collect_or_base()), emit=True)
        else:
            self._refresh()
        return True

    def reset(self) -> None:
        """Restore the chosen preset's values (emits ``optionsChanged``)."""
        self.setOptions(self._row.reference(self._collect_or_base()), emit=True)

    def changed_fields(self) -> set[str]:
        """The option fields whose values differ from the chosen preset's."""
        return set(self._changed)

    def is_marked(self, field: str) -> bool:
        """Whether ``field``'s label is marked as changed from the preset."""
        return self.labels[field].font().bold()

    def presets_dir(self) -> Path | None:
        """Where user presets are read and saved."""
        return self._row.directory

    def set_presets_dir(self, directory: str | Path | None) -> None:
        """Read user presets from ``directory`` instead (the preset box is rebuilt)."""
        self._row.directory = Path(directory) if directory is not None else None
        self._reload_presets()
        self._refresh()

    def save_preset_as(self, name: str, description: str = "") -> Path:
        """Save the current options as user preset ``name`` and choose it.

        Raises:
            ValueError: no presets folder, an empty or built-in name, or invalid options.
        """
        if self._row.directory is None:
            raise ValueError("there is no folder to keep presets in")
        options = self.options()
        path = save_user_preset(self._row.directory, name, options, description or f"Saved from {self._row.preset.name}.")
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
        self.sections[self._s.field_section[field]].setExpanded(True)
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
            values[field] = int(round(v)) if field in INT_FIELDS else round(v, 6)
        values["seed"] = int(self.seed_spin.value())
        values["bad_words"] = parse_bad_words(self.text_controls["bad_words"].text())
        values["logit_bias"] = parse_logit_bias(self.text_controls["logit_bias"].text())
        for field in self.choices:
            values[field] = self._s.choice_value(field)
        for field, box in self.checks.items():
            values[field] = box.isChecked()
        strategy = values["strategy"]
        chain_strategy = self._s.choice_value("verification") if strategy == "speculative" else strategy
        if self._s.reason_unused("contrastive_amateur", strategy, chain_strategy) is not None:
            values["contrastive_amateur"] = ""  # a disabled box (beam...): validate() refuses an amateur there
        values["sampler_order"] = self.chain.order()
        values["disabled_stages"] = self.chain.disabled()
        return replace(self._base, **values)

    def _collect_or_base(self) -> DecodingOptions:
        try:
            return self._collect()
        except ValueError:
            return self._base

    def _reload_presets(self) -> None:
        self._row.reload()
        self.preset_errors = self._row.errors
        self._notice = ("Some presets could not be read: " + "; ".join(self._row.errors)) if self._row.errors else ""
        self._set_error("")

    def _ask_save_preset(self) -> None:
        name = self._row.ask_name(self)
        if name is None:
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

    def _set_error(self, text: str) -> None:
        text = text or self._notice
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    def _changed_by_user(self, *_args) -> None:
        self._refresh()
        dragging = any(ctl.isDragged() for ctl in self._sliders)
        self._timer.start(DRAG_MS if dragging else self._debounce_ms)  # restart: fires once after the last change

    def _commit(self) -> None:
        """A slider's change is the user's last word (a step, a release): emit at the next
        turn of the event loop (so the changes of this one turn go out together), if a change
        is pending."""
        if self._timer.isActive():
            self._timer.start(0)

    def _refresh(self) -> None:
        """Enable/disable, tooltips, marks, the chain's view and the section summaries."""
        strategy = self.strategy()
        chain_strategy = self._s.choice_value("verification") if strategy == "speculative" else strategy
        self.labels["strategy"].setToolTip("How the next token is chosen; hover a choice for its definition and source")
        for field, lab in self.labels.items():
            if field == "strategy":
                continue
            widget = (self.seed_spin if field == "seed"
                      else self.controls.get(field) or self.text_controls.get(field) or self.choices[field])
            reason = self._s.reason_unused(field, strategy, chain_strategy)
            widget.setEnabled(reason is None)
            lab.setEnabled(reason is None)
            tip = (FIELD_HELP.get(field) or CHOICE_HELP[field]) + (f"\n\nNot used now: {reason}" if reason else "")
            widget.setToolTip(tip)
            lab.setToolTip(tip)
            lab.setStatusTip(reason or "")
        for name, widgets in self._s.strategy_rows.items():
            for w in widgets:
                w.setVisible(strategy == name)
                if strategy != name:
                    w.setEnabled(False)
        self.contrastive_top_k.setEnabled(strategy == "contrastive")
        current = self._collect_or_base()
        ref = self._row.reference(current)
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
            lab.setText(f"{self._s.label_text[field]} •" if marked else self._s.label_text[field])
            if marked and field not in ("sampler_order", "disabled_stages"):
                was = getattr(ref, field)
                shown = format_logit_bias(was) if field == "logit_bias" else (", ".join(was) if field == "bad_words" else was)
                lab.setToolTip(f"{lab.toolTip()}\n\nChanged: the preset '{self._row.preset.name}' has {shown!r}")
        for field, box in self.checks.items():  # marked like the labels: bold with a dot when changed
            marked = field in self._changed
            box.setText(self._s.check_text(field) + (" •" if marked else ""))
            font = box.font()
            if font.bold() != marked:
                font.setBold(marked)
                box.setFont(font)
        changed_stages = {FIELD_STAGE[f] for f in self._changed if f in FIELD_STAGE}
        changed_stages |= set(current.disabled_stages) ^ set(ref.disabled_stages)
        self.chain.update_view(current, changed_stages)
        by_section = {n: False for n in SECTIONS}
        for f in self._changed:
            if f in ("sampler_order", "disabled_stages"):
                by_section["Filters"] = True
            elif f in self._s.field_section:
                by_section[self._s.field_section[f]] = True
        for n, sec in self.sections.items():
            sec.set_marked(by_section[n])
        self._s.update_summaries(current)
        n = len(self._changed)
        self.reset_button.setEnabled(n > 0)
        self.reset_button.setToolTip(
            f"Restore the values of the preset '{self._row.preset.name}'"
            + (f" ({n} changed: {', '.join(sorted(self._changed))})" if n else " (nothing changed)")
        )

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

