"""The controls of the decoding-options panel's five sections (gui/widgets/options_panel.py).

**Strategy** (the strategies, the seed, max tokens, mirostat τ/η, contrastive α/top-k and
speculative decoding's draft, draft tokens and verification when those are chosen),
**Filters** (the sampler chain and the values of temperature and the filters), **Penalties**, **Beam** and **Constraints** (bad words, logit bias, min new tokens,
length decay). :class:`OptionSections` builds them, says why a control is not used by a
strategy (:meth:`OptionSections.reason_unused`) and writes each section header's one-line
summary of what is active (:meth:`OptionSections.update_summaries`). The panel reads and
writes the values, marks them against the preset and emits the options.
"""

from __future__ import annotations

from typing import Callable, Iterable

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QRadioButton,
    QSpinBox,
    QWidget,
)

from core.options import BEAM_STRATEGIES, SAMPLING_STRATEGIES, STRATEGIES, WARPER_STAGES, DecodingOptions

from .option_controls import Section, SliderSpin
from .option_specs import (
    AMATEUR_CHOICES,
    BEAM_SPECS,
    CHECK_HELP,
    CHECK_SPECS,
    CONSTRAINT_SPECS,
    CONTRASTIVE_SPECS,
    DRAFT_CHOICES,
    FILTER_SPECS,
    MIROSTAT_SPECS,
    ONLY_FOR,
    PENALTY_SPECS,
    SECTION_STAGES,
    SPECULATIVE_SPECS,
    STRATEGY_HELP,
    STRATEGY_SPECS,
    VERIFICATION_CHOICES,
)
from .sampler_chain import FIELD_STAGE, SamplerChain, stage_is_off, stage_summary


class OptionSections:
    """The five sections (:class:`~gui.widgets.option_controls.Section`) and their controls.

    Args:
        owner: the panel (parent of the strategy button group).
        on_change: called (with the control's value, or none) whenever the user changes a
            control.

    Attributes:
        sections: section name -> Section, in panel order.
        controls: option field -> SliderSpin; text_controls: "bad_words" / "logit_bias" ->
            QLineEdit; labels: field -> its QLabel ("strategy" and "seed" too);
            label_text: field -> the label's plain text; field_section: field -> section name.
        strategy_group / strategy_buttons: the strategy radio buttons (id = index in
            ``STRATEGIES``); seed_spin; chain: the SamplerChain; contrastive_top_k: the
            mirror of top-k shown under contrastive search; checks: "kv_cache" -> its
            QCheckBox (on/off switches that are no stage); choices: "draft" (an editable
            combo box) and "verification" -> QComboBox (speculative decoding); strategy_rows:
            strategy -> widgets shown only for it.
    """

    def __init__(self, owner: QWidget, on_change: Callable[..., None]) -> None:
        self._owner = owner
        self._on_change = on_change
        self.controls: dict[str, SliderSpin] = {}
        self.text_controls: dict[str, QLineEdit] = {}
        self.choices: dict[str, QComboBox] = {}
        self.checks: dict[str, QCheckBox] = {}
        self.labels: dict[str, QLabel] = {}
        self.label_text: dict[str, str] = {}
        self.field_section: dict[str, str] = {}
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

    # ------------------------------------------------------------------ building
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
        self.label_text[field] = label
        self.field_section[field] = sec.title
        ctl.valueChanged.connect(self._on_change)
        return ctl

    def _build_strategy(self, sec: Section) -> None:
        self.strategy_group = QButtonGroup(self._owner)
        self.strategy_buttons: dict[str, QRadioButton] = {}
        box = QWidget()
        g = QGridLayout(box)
        g.setContentsMargins(0, 0, 0, 0)
        g.setHorizontalSpacing(10)
        g.setVerticalSpacing(0)
        for i, name in enumerate(STRATEGIES):
            b = QRadioButton(name.replace("_", " "))
            b.setToolTip(STRATEGY_HELP.get(name, name))
            self.strategy_group.addButton(b, i)
            self.strategy_buttons[name] = b
            g.addWidget(b, i // 3, i % 3)
        g.setColumnStretch(3, 1)
        lab = QLabel("strategy")
        lab.setToolTip("How the next token is chosen; hover a choice for its definition and source")
        self.labels["strategy"] = lab
        self.label_text["strategy"] = "strategy"
        self.field_section["strategy"] = "Strategy"
        sec.grid.addWidget(lab, 0, 0, Qt.AlignmentFlag.AlignTop)
        sec.grid.addWidget(box, 0, 1)
        for spec in STRATEGY_SPECS:
            self._add_slider(sec, spec)
        row = sec.grid.rowCount()
        self.labels["seed"] = QLabel("seed")
        self.label_text["seed"] = "seed"
        self.field_section["seed"] = "Strategy"
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setKeyboardTracking(False)
        self.seed_spin.setMinimumWidth(96)
        self.seed_spin.valueChanged.connect(self._on_change)
        self.labels["seed"].setBuddy(self.seed_spin)
        sec.grid.addWidget(self.labels["seed"], row, 0)
        sec.grid.addWidget(self.seed_spin, row, 1, Qt.AlignmentFlag.AlignLeft)
        for field, text in CHECK_SPECS:  # the KV cache switch (DecodingOptions.kv_cache)
            box = QCheckBox(text)
            box.setToolTip(CHECK_HELP[field])
            box.toggled.connect(self._on_change)
            sec.grid.addWidget(box, sec.grid.rowCount(), 1, Qt.AlignmentFlag.AlignLeft)
            self.checks[field] = box
            self.field_section[field] = sec.title
        #: rows shown only for their strategy
        self.strategy_rows: dict[str, list[QWidget]] = {"mirostat": [], "contrastive": [], "speculative": []}
        for spec in MIROSTAT_SPECS:
            ctl = self._add_slider(sec, spec)
            self.strategy_rows["mirostat"] += [ctl, self.labels[spec[0]]]
        for spec in CONTRASTIVE_SPECS:
            ctl = self._add_slider(sec, spec)
            self.strategy_rows["contrastive"] += [ctl, self.labels[spec[0]]]
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
        self.strategy_rows["contrastive"] += [self.contrastive_top_k, lab]
        self.contrastive_top_k.valueChanged.connect(self._mirror_top_k)
        self._build_speculative(sec)

    def _add_choice(self, sec: Section, field: str, label: str, items: tuple, editable: bool,
                    strategy: str | None = "speculative") -> QComboBox:
        row = sec.grid.rowCount()
        lab = QLabel(label)
        box = QComboBox()
        box.setEditable(editable)
        for value, tip in items:
            box.addItem(value, value)
            box.setItemData(box.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        lab.setBuddy(box)
        sec.grid.addWidget(lab, row, 0)
        sec.grid.addWidget(box, row, 1)
        self.choices[field] = box
        self.labels[field] = lab
        self.label_text[field] = label
        self.field_section[field] = sec.title
        if editable:
            box.currentTextChanged.connect(self._on_change)
        else:
            box.currentIndexChanged.connect(self._on_change)
        if strategy is not None:  # shown under that strategy only
            self.strategy_rows[strategy] += [box, lab]
        return box

    def _build_speculative(self, sec: Section) -> None:
        """Speculative decoding's rows: the draft (editable), draft tokens (auto / N), verification."""
        self._add_choice(sec, "draft", "draft", DRAFT_CHOICES, editable=True)
        for spec in SPECULATIVE_SPECS:
            ctl = self._add_slider(sec, spec)
            self.strategy_rows["speculative"] += [ctl, self.labels[spec[0]]]
        self._add_choice(sec, "verification", "verification", VERIFICATION_CHOICES, editable=False)

    def check_text(self, field: str) -> str:
        """The plain text of the check box of ``field`` ("KV cache")."""
        return dict(CHECK_SPECS)[field]

    def choice_value(self, field: str) -> str:
        """The value a choice box shows: the draft's text, the verification's data."""
        box = self.choices[field]
        return box.currentText().strip() if box.isEditable() else str(box.currentData())

    def set_choice(self, field: str, value: str) -> None:
        """Show ``value`` in the choice box of ``field`` (an editable box takes any text)."""
        box = self.choices[field]
        i = box.findData(value)
        if i >= 0:
            box.setCurrentIndex(i)
        if box.isEditable():
            box.setCurrentText(value)

    def _build_filters(self, sec: Section) -> None:
        self.chain = SamplerChain()
        sec.grid.addWidget(self.chain, 0, 0, 1, 2)
        for spec in FILTER_SPECS:
            self._add_slider(sec, spec)
        self.controls["top_k"].valueChanged.connect(self._mirror_top_k_back)

    def _build_penalties(self, sec: Section) -> None:
        for spec in PENALTY_SPECS:
            if spec[0] == "cd_alpha":  # contrastive decoding's amateur (an editable box) above its α and β
                box = self._add_choice(sec, "contrastive_amateur", "CD amateur", AMATEUR_CHOICES, editable=True,
                                       strategy=None)
                box.lineEdit().setPlaceholderText("off")
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
            self.label_text[field] = label
            self.field_section[field] = "Constraints"
            edit.textChanged.connect(self._on_change)
        for spec in CONSTRAINT_SPECS:
            self._add_slider(sec, spec)

    def _mirror_top_k(self, v: float) -> None:
        if self.controls["top_k"].value() != v:
            self.controls["top_k"].setValue(v)  # emits: counts as the user's change

    def _mirror_top_k_back(self, v: float) -> None:
        with QSignalBlocker(self.contrastive_top_k):
            self.contrastive_top_k.setValue(max(1.0, v))

    # ------------------------------------------------------------------ state
    def reason_unused(self, field: str, strategy: str, chain_strategy: str | None = None) -> str | None:
        """Why ``field`` is not used under ``strategy`` (its stage is unavailable to the tab
        or the strategy, or the field belongs to other strategies), or None.
        ``chain_strategy``: the strategy the chain is built for (speculative decoding's
        verification, ``DecodingOptions.chain_strategy``; default ``strategy``)."""
        chain_strategy = chain_strategy or strategy
        if field == "top_k" and strategy == "contrastive":
            return None
        stage = FIELD_STAGE.get(field)
        if stage is not None:
            return self.chain.unavailable_reason(stage, chain_strategy)
        only = ONLY_FOR.get(field)
        if only and strategy not in only and chain_strategy not in only:
            return f"used by: {', '.join(only)}"
        return None

    def _active(self, o: DecodingOptions, stages: Iterable[str]) -> list[str]:
        return [
            stage_summary(s, o)
            for s in stages
            if o.stage_enabled(s) and not stage_is_off(s, o)
            and self.chain.unavailable_reason(s, getattr(o, "chain_strategy", o.strategy)) is None
        ]

    def update_summaries(self, o: DecodingOptions) -> None:
        """Write each section header's one-line summary of what ``o`` has active."""
        s = self.sections
        strat = o.strategy.replace("_", " ")
        extra = {
            "sample": f"seed {o.seed}",
            "mirostat": f"τ {o.mirostat_tau:g}, η {o.mirostat_eta:g}",
            "contrastive": f"α {o.penalty_alpha:g}, top-k {o.top_k}",
            "speculative": (f"{getattr(o, 'draft', '')}, γ {getattr(o, 'draft_tokens', 0) or 'auto'}, "
                            f"{getattr(o, 'verification', 'greedy')} verification"),
        }.get(o.strategy)
        s["Strategy"].summary.setText(f"{strat}{', ' + extra if extra else ''}, max {o.max_new_tokens} tokens"
                                      + ("" if getattr(o, "kv_cache", True) else ", no KV cache"))
        if getattr(o, "chain_strategy", o.strategy) in SAMPLING_STRATEGIES:
            active = self._active(o, [st for st in o.sampler_order if st in WARPER_STAGES])
            s["Filters"].summary.setText(" → ".join(active) if active else "no filter on")
        else:
            s["Filters"].summary.setText(f"temperature and filters not used by {strat} (sampling only); the other stages apply")
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
