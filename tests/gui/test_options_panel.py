"""The options panel grows without getting worse (issue 11): the sampler chain (reorder by
drag and by keys, switch stages off, dim/disable with reasons), presets (apply, marks,
Reset, save/load), validation errors, settings, and the panel at 1280x800."""

from __future__ import annotations

import json
import random

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QSlider,
    QWidget,
)

from core.options import (
    DEFAULT_SAMPLER_ORDER,
    LLAMA_CPP_SAMPLER_ORDER,
    PENALTY_STAGES,
    STAGES,
    WARPER_STAGES,
    DecodingOptions,
)
from core.tasks.presets import (
    BUILTIN_PRESETS,
    NOT_SAVED,
    builtin_preset,
    load_preset,
    load_user_presets,
    save_user_preset,
)
from gui.main_window import MainWindow
from gui.widgets.options_panel import (
    ENCODER_STAGES,
    FIELD_HELP,
    MARKED_FIELDS,
    SECTIONS,
    OptionsPanel,
)
from gui.widgets.sampler_chain import STAGE_HELP, stage_is_off


@pytest.fixture
def panel(qtbot, tmp_path):
    p = OptionsPanel(debounce_ms=40, presets_dir=tmp_path / "presets")
    qtbot.addWidget(p)
    return p


def _collect(panel):
    got = []
    panel.optionsChanged.connect(got.append)
    return got


def _settle(qtbot, got, n=1):
    """Wait for ``n`` emissions, then long enough that a second one would have come."""
    qtbot.waitUntil(lambda: len(got) >= n, timeout=3000)
    qtbot.wait(150)


def _subset(o: DecodingOptions, names=MARKED_FIELDS) -> dict:
    return {k: getattr(o, k) for k in names}


# ------------------------------------------------------------------ the chain
def test_reorder_by_drop_changes_sampler_order_and_emits_once(qtbot, panel):
    got = _collect(panel)
    chain = panel.chain
    src, dst = chain.row_of("top_k"), chain.row_of("temperature")
    assert src > dst  # transformers' order: temperature before top-k
    # a drop ends in QListWidget.dropEvent with one model row move (Qt 6)
    assert chain.list.model().moveRow(QModelIndex(), src, QModelIndex(), dst)
    order = panel.options().sampler_order
    assert order.index("top_k") == order.index("temperature") - 1
    assert order != DEFAULT_SAMPLER_ORDER and sorted(order) == sorted(STAGES)
    _settle(qtbot, got)
    assert len(got) == 1 and got[0].sampler_order == order


def test_alt_up_and_alt_down_move_the_selected_stage(qtbot, panel):
    panel.setOptions(DecodingOptions(strategy="sample"))
    got = _collect(panel)
    chain = panel.chain
    chain.list.setCurrentItem(chain.stage_item("min_p"))
    row = chain.row_of("min_p")
    after = chain.order()[row + 1]
    qtbot.keyClick(chain.list, Qt.Key.Key_Down, Qt.KeyboardModifier.AltModifier)
    assert chain.row_of("min_p") == row + 1
    assert panel.options().sampler_order.index("min_p") == panel.options().sampler_order.index(after) + 1
    assert chain.list.currentItem() is chain.stage_item("min_p")  # still selected: press again to go on
    _settle(qtbot, got)
    assert len(got) == 1 and got[0].sampler_order.index("min_p") == row + 1
    qtbot.keyClick(chain.list, Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)
    qtbot.keyClick(chain.list, Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)
    assert chain.row_of("min_p") == row - 1
    _settle(qtbot, got, 2)
    assert len(got) == 2 and got[1].sampler_order.index("min_p") == row - 1
    # a plain arrow key only moves the selection
    qtbot.keyClick(chain.list, Qt.Key.Key_Down)
    assert chain.row_of("min_p") == row - 1


def test_order_buttons_set_transformers_and_llama_cpp_order(qtbot, panel):
    got = _collect(panel)
    panel.chain.llama_button.click()
    assert panel.options().sampler_order == LLAMA_CPP_SAMPLER_ORDER
    panel.chain.transformers_button.click()
    assert panel.options().sampler_order == DEFAULT_SAMPLER_ORDER
    _settle(qtbot, got)
    assert len(got) == 1  # both clicks inside the debounce: one emission


def test_switching_a_stage_off_keeps_its_value(qtbot, panel):
    panel.setOptions(DecodingOptions(strategy="sample", top_k=40, min_p=0.05))
    got = _collect(panel)
    item = panel.chain.stage_item("top_k")
    assert item.text() == "top-k 40" and not panel.chain.is_dimmed("top_k")
    item.setCheckState(Qt.CheckState.Unchecked)  # what a click on the tick box does
    o = panel.options()
    assert o.disabled_stages == ("top_k",) and o.top_k == 40
    assert panel.controls["top_k"].value() == 40
    assert "Switched off" in item.toolTip()
    assert panel.labels["top_k"].font().italic() and "Switched off" in panel.labels["top_k"].toolTip()
    _settle(qtbot, got)
    assert len(got) == 1 and got[0].disabled_stages == ("top_k",) and got[0].top_k == 40
    item.setCheckState(Qt.CheckState.Checked)
    assert panel.options().disabled_stages == () and panel.options().top_k == 40


def test_stages_at_their_off_value_are_dimmed_and_show_their_value(panel):
    panel.strategy_buttons["sample"].setChecked(True)
    chain = panel.chain
    assert chain.is_dimmed("top_k") and chain.stage_item("top_k").text() == "top-k off"
    assert chain.stage_item("top_k").font().italic()
    panel.controls["top_k"].setValue(40)
    assert not chain.is_dimmed("top_k") and chain.stage_item("top_k").text() == "top-k 40"
    panel.text_controls["bad_words"].setText("cat, dog")
    assert chain.stage_item("bad_words").text() == "bad words cat, dog" and not chain.is_dimmed("bad_words")
    panel.controls["dynatemp_range"].setValue(0.5)
    assert chain.stage_item("temperature").text() == "dynamic temperature 1 ± 0.5"


@pytest.mark.parametrize("strategy", ["greedy", "beam", "diverse_beam", "contrastive"])
def test_warpers_are_disabled_with_a_reason_when_not_sampling(panel, strategy):
    panel.strategy_buttons[strategy].setChecked(True)
    chain = panel.chain
    for stage in WARPER_STAGES:
        item = chain.stage_item(stage)
        assert not item.flags() & Qt.ItemFlag.ItemIsEnabled, stage
        assert "sampling only" in chain.reason(stage) and "sampling only" in item.toolTip()
    for stage in PENALTY_STAGES:
        assert chain.stage_item(stage).flags() & Qt.ItemFlag.ItemIsEnabled, stage
    assert not panel.controls["min_p"].isEnabled()
    assert "sampling only" in panel.controls["min_p"].toolTip()
    panel.strategy_buttons["sample"].setChecked(True)
    assert all(chain.stage_item(s).flags() & Qt.ItemFlag.ItemIsEnabled for s in WARPER_STAGES)
    assert panel.controls["min_p"].isEnabled() and chain.reason("min_p") == ""


def test_contrastive_uses_top_k_as_candidates(panel):
    panel.strategy_buttons["contrastive"].setChecked(True)
    o = panel.options()
    assert o.strategy == "contrastive" and o.top_k == 4  # top-k was off: contrastive needs candidates
    assert panel.controls["top_k"].isEnabled() and panel.contrastive_top_k.isVisibleTo(panel)
    panel.contrastive_top_k.setValue(7)
    assert panel.controls["top_k"].value() == 7 and panel.options().top_k == 7
    assert panel.controls["penalty_alpha"].isEnabled() and not panel.controls["mirostat_tau"].isVisibleTo(panel)


def test_encoder_stages_are_disabled_outside_translation(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    for tab in (w.speech_tab, w.ocr_tab):
        p = tab.options_panel
        for stage in ENCODER_STAGES:
            assert not p.chain.stage_item(stage).flags() & Qt.ItemFlag.ItemIsEnabled, (tab.title, stage)
            assert "translation only" in p.chain.reason(stage)
            assert "translation only" in p.chain.stage_item(stage).toolTip()
        assert not p.controls["encoder_repetition_penalty"].isEnabled()
        assert "translation only" in p.controls["encoder_no_repeat_ngram_size"].toolTip()
        # a value set anyway (e.g. by a preset) is switched off, so the run does not fail
        p.setOptions(DecodingOptions(encoder_repetition_penalty=1.5))
        assert "encoder_repetition_penalty" in p.options().disabled_stages
    p = w.translation_tab.options_panel
    for stage in ENCODER_STAGES:
        assert p.chain.stage_item(stage).flags() & Qt.ItemFlag.ItemIsEnabled and p.chain.reason(stage) == ""
    assert p.controls["encoder_repetition_penalty"].isEnabled()
    p.setOptions(DecodingOptions(encoder_repetition_penalty=1.5))
    assert p.options().disabled_stages == ()
    for i in range(w.tabs.count()):
        w.tabs.widget(i).shutdown()


def test_the_registry_drives_the_chain_rows_and_the_panel(panel):
    """Every stage of the registry (core.processors.stages) is a chain row with its label,
    help and kind; every field it declares a control for is in the panel, in its section,
    with its help as tooltip; a stage's row is dimmed exactly when the registry says it is
    off (the chain builder reads the same is_off: tests/core/test_stages.py)."""
    from core.processors.stages import REGISTRY

    chain = panel.chain
    assert chain.order() == STAGES
    for s in REGISTRY:
        item = chain.stage_item(s.name)
        assert STAGE_HELP[s.name] == s.help and s.help in item.toolTip()
        assert ("every strategy" in item.toolTip()) == (s.strategies is None)
        for f in s.fields:
            if f.control is not None or f.text_control:
                ctl = panel.controls.get(f.name) or panel.text_controls[f.name]
                assert FIELD_HELP[f.name] == f.help and f.help in ctl.toolTip(), f.name
                assert panel.sections[s.section].isAncestorOf(ctl), f.name
            if f.control is not None:
                lo, hi = f.control[:2]
                assert (panel.controls[f.name].spin.minimum(), panel.controls[f.name].spin.maximum()) == (lo, hi)
    rng = random.Random(0)
    picks = {"top_k": [0, 20], "min_p": [0.0, 0.05], "repetition_penalty": [1.0, 1.2], "tfs": [1.0, 0.9],
             "watermark_delta": [0.0, 2.0], "bad_words": [(), ("cat",)], "dynatemp_range": [0.0, 0.3]}
    for _ in range(8):
        o = DecodingOptions(strategy="sample", **{k: rng.choice(v) for k, v in picks.items()}).validate()
        panel.setOptions(o)
        for s in REGISTRY:
            assert chain.is_dimmed(s.name) == stage_is_off(s.name, o) == s.is_off(o), s.name


def test_the_watermark_is_one_more_stage_in_the_window(panel):
    """Added with one class and one registry entry: a chain row, two controls, a summary."""
    assert "watermark" in panel.chain.order() and panel.chain.is_dimmed("watermark")
    panel.setOptions(DecodingOptions(watermark_delta=2.0))
    assert not panel.chain.is_dimmed("watermark")
    assert panel.chain.stage_item("watermark").text().startswith("watermark δ 2")
    assert panel.options().watermark_delta == 2.0
    assert "Kirchenbauer et al. 2023" in panel.controls["watermark_delta"].toolTip()
    assert "watermark" in panel.sections["Constraints"].summary.text()


# ------------------------------------------------------------------ presets
def test_every_builtin_preset_applies_exactly_and_unmarked(panel):
    for preset in BUILTIN_PRESETS:
        assert preset.description and len(preset.description.splitlines()) == 1
        assert panel.setPreset(preset.name)
        want = preset.apply(panel.options())
        assert _subset(panel.options()) == _subset(want), preset.name  # no control clamps a preset value
        assert panel.changed_fields() == set(), preset.name
        assert not panel.reset_button.isEnabled()


def test_llama_cpp_preset_values_and_order():
    o = builtin_preset("llama.cpp defaults").apply()
    assert (o.strategy, o.temperature, o.top_k, o.top_p, o.min_p) == ("sample", 0.8, 40, 0.95, 0.05)
    assert o.sampler_order == LLAMA_CPP_SAMPLER_ORDER
    t = builtin_preset("transformers defaults").apply()
    assert (t.strategy, t.temperature, t.top_k, t.top_p) == ("sample", 1.0, 50, 1.0)
    assert builtin_preset("openai/whisper defaults").apply().strategy == "greedy"


def test_picking_a_preset_marks_changes_and_reset_restores(qtbot, panel):
    got = _collect(panel)
    combo = panel.preset_combo
    i = combo.findData("llama.cpp defaults")
    combo.setCurrentIndex(i)
    combo.activated.emit(i)  # what picking it in the box does
    _settle(qtbot, got)
    assert len(got) == 1
    o = got[0]
    assert (o.temperature, o.top_k, o.top_p, o.min_p, o.sampler_order) == (0.8, 40, 0.95, 0.05, LLAMA_CPP_SAMPLER_ORDER)
    assert panel.presetName() == "llama.cpp defaults" and "common.h" in combo.toolTip()
    panel.controls["top_k"].setValue(20)
    panel.chain.set_stage_enabled("min_p", False)
    assert panel.changed_fields() == {"top_k", "disabled_stages"}
    assert panel.is_marked("top_k") and "•" in panel.labels["top_k"].text()
    assert not panel.is_marked("top_p")
    assert panel.chain.stage_item("top_k").font().bold() and panel.chain.stage_item("min_p").font().bold()
    assert not panel.chain.stage_item("top_p").font().bold()
    assert panel.sections["Filters"].is_marked() and not panel.sections["Penalties"].is_marked()
    assert "40" in panel.labels["top_k"].toolTip()  # the preset's value
    assert panel.reset_button.isEnabled()
    _settle(qtbot, got, 2)
    panel.reset_button.click()
    _settle(qtbot, got, 3)
    assert len(got) == 3
    assert got[-1].top_k == 40 and got[-1].disabled_stages == ()
    assert panel.changed_fields() == set() and not panel.is_marked("top_k")
    assert not panel.sections["Filters"].is_marked() and not panel.reset_button.isEnabled()


def test_preset_keeps_seed_and_max_tokens(panel):
    panel.setOptions(DecodingOptions(seed=7, max_new_tokens=55))
    panel.setPreset("precise")
    o = panel.options()
    assert (o.seed, o.max_new_tokens) == (7, 55)
    assert (o.temperature, o.top_p, o.top_k, o.repetition_penalty) == (0.7, 0.1, 40, 1.18)
    panel.setPreset("openai/whisper defaults")
    assert panel.options().max_new_tokens == 224  # whisper's sample_len: the preset names it


def test_user_preset_round_trips_through_a_file(tmp_path):
    opts = DecodingOptions(
        strategy="sample", temperature=0.9, min_p=0.07, dry_multiplier=0.8, bad_words=("um", "uh"),
        logit_bias=(("yes", 2.5),), sampler_order=LLAMA_CPP_SAMPLER_ORDER, disabled_stages=("top_k",),
        seed=3, top_k_report=5,
    )
    path = save_user_preset(tmp_path, "My speech / preset", opts, "for podcasts")
    assert path.parent == tmp_path and path.suffix == ".json"
    data = json.loads(path.read_text())
    assert data["name"] == "My speech / preset" and not set(NOT_SAVED) & set(data["options"])
    preset = load_preset(path)
    assert (preset.name, preset.description, preset.builtin) == ("My speech / preset", "for podcasts", False)
    back = preset.apply()
    assert _subset(back) == _subset(opts)
    assert [p.name for p in load_user_presets(tmp_path)] == ["My speech / preset"]
    with pytest.raises(ValueError, match="built-in"):
        save_user_preset(tmp_path, "llama.cpp defaults", opts)
    with pytest.raises(ValueError, match="name"):
        save_user_preset(tmp_path, "  ", opts)


def test_panel_save_as_and_load_in_a_new_panel(qtbot, tmp_path):
    d = tmp_path / "presets"
    p1 = OptionsPanel(presets_dir=d)
    qtbot.addWidget(p1)
    p1.setPreset("creative")
    p1.controls["top_k"].setValue(30)
    p1.text_controls["logit_bias"].setText("hello=-3, world=1.5")
    p1.chain.move_stage("min_p", -3)
    want = p1.options()
    p1.save_preset_as("mine")
    assert p1.presetName() == "mine" and p1.changed_fields() == set()
    assert p1.preset_combo.findData("mine") >= 0
    assert p1.preset_combo.itemText(p1.preset_combo.findData("mine")) == "mine (yours)"
    p2 = OptionsPanel(presets_dir=d)
    qtbot.addWidget(p2)
    assert p2.setPreset("mine")
    assert _subset(p2.options()) == _subset(want)
    assert p2.options().logit_bias == (("hello", -3.0), ("world", 1.5))


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', "JSON object"),
        ('{"options": {}}', "name"),
        ('{"name": "x"}', "options"),
        ('{"name": "x", "options": {"tempreature": 0.5}}', "unknown option.*tempreature"),
        ('{"name": "x", "options": {"top_k": "forty"}}', "top_k.*wrong type"),
        ('{"name": "x", "options": {"top_p": 2.0}}', "top_p must be in"),
        ('{"name": "x", "options": {"sampler_order": ["top_k", "nope"]}}', "unknown stage"),
        ('{"name": "x", "options": {"logit_bias": [["a"]]}}', "logit_bias"),
    ],
)
def test_broken_preset_files_raise_a_clear_value_error(tmp_path, content, match):
    path = tmp_path / "broken.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=match) as info:
        load_preset(path)
    assert "broken.json" in str(info.value)
    with pytest.raises(ValueError, match="broken.json"):
        load_user_presets(tmp_path)
    errors: list[str] = []
    assert load_user_presets(tmp_path, errors) == [] and len(errors) == 1


def test_panel_lists_good_presets_and_reports_broken_ones(qtbot, tmp_path):
    save_user_preset(tmp_path, "good", DecodingOptions(strategy="sample", top_p=0.8))
    (tmp_path / "bad.json").write_text('{"name": "bad", "options": {"top_p": 5}}')
    p = OptionsPanel(presets_dir=tmp_path)
    qtbot.addWidget(p)
    assert p.preset_combo.findData("good") >= 0 and p.preset_combo.findData("bad") < 0
    assert "bad.json" in p.error_label.text() and p.error_label.isVisibleTo(p)


# ------------------------------------------------------------------ validation, tooltips
def test_invalid_combination_shows_an_error_and_emits_nothing(qtbot, panel):
    got = _collect(panel)
    panel.strategy_buttons["diverse_beam"].setChecked(True)
    panel.controls["num_beams"].setValue(4)
    panel.controls["num_beam_groups"].setValue(3)
    qtbot.waitUntil(lambda: "multiple of num_beam_groups" in panel.error_label.text(), timeout=3000)
    assert got == [] and panel.error_label.isVisibleTo(panel)
    panel.controls["num_beam_groups"].setValue(2)
    _settle(qtbot, got)
    assert len(got) == 1 and got[0].num_beam_groups == 2 and panel.error_label.text() == ""
    panel.text_controls["logit_bias"].setText("hello")
    qtbot.waitUntil(lambda: "text=value" in panel.error_label.text(), timeout=3000)


def test_every_control_has_a_definition_and_a_source(panel):
    sources = ("transformers", "llama.cpp", "et al.", "webui", "openai/whisper", "torch", "arXiv", "Keskar")
    fields = [*panel.controls, *panel.text_controls, "seed"]
    assert set(fields) == set(FIELD_HELP)
    for field in fields:
        widget = panel.seed_spin if field == "seed" else panel.controls.get(field) or panel.text_controls[field]
        tip = widget.toolTip()
        assert FIELD_HELP[field] in tip and any(s in tip for s in sources), field
        assert panel.labels[field].toolTip(), field
    assert "Nguyen et al. 2024" in panel.controls["min_p"].toolTip() and "MinPLogitsWarper" in panel.controls["min_p"].toolTip()
    for name, b in panel.strategy_buttons.items():
        assert len(b.toolTip()) > 30, name
    for stage in STAGES:
        assert STAGE_HELP[stage] in panel.chain.stage_item(stage).toolTip(), stage
    for w in (panel.preset_combo, panel.reset_button, panel.save_preset_button, panel.chain.llama_button):
        assert w.toolTip()


def test_double_click_on_a_stage_opens_its_controls(panel):
    panel.setExpandedSections([])
    panel.chain.stageActivated.emit("dry")
    assert panel.sections["Penalties"].isExpanded()
    assert panel.controls["dry_multiplier"].isVisibleTo(panel)


# ------------------------------------------------------------------ settings, window
def test_new_options_preset_and_sections_persist(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    p = w.translation_tab.options_panel
    p.setPreset("llama.cpp defaults")
    p.setOptions(p.options().with_(
        min_p=0.1, dry_multiplier=0.8, bad_words=("cat",), logit_bias=(("yes", 2.0),),
        disabled_stages=("top_k",), encoder_no_repeat_ngram_size=3, num_beam_groups=3, mirostat_tau=4.0,
    ))
    p.chain.move_stage("temperature", -2)
    p.setExpandedSections(["Penalties", "Constraints"])
    want = p.options()
    w.close()
    w2 = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w2)
    p2 = w2.translation_tab.options_panel
    assert _subset(p2.options()) == _subset(want)
    assert p2.options().sampler_order != LLAMA_CPP_SAMPLER_ORDER
    assert p2.presetName() == "llama.cpp defaults"
    assert p2.changed_fields() >= {"min_p", "sampler_order", "disabled_stages"}
    assert sorted(p2.expandedSections()) == ["Constraints", "Penalties"]
    for win in (w, w2):
        for i in range(win.tabs.count()):
            win.tabs.widget(i).shutdown()


_CONTROL_TYPES = (QAbstractSpinBox, QSlider, QLineEdit, QComboBox, QAbstractButton, QListWidget, QLabel)


def _clipped(panel: OptionsPanel) -> list[str]:
    """Visible controls smaller than their minimum size hint, or outside the panel."""
    bad = []
    for w in panel.findChildren(QWidget):
        if not isinstance(w, _CONTROL_TYPES) or not w.isVisibleTo(panel):
            continue
        if type(w).__name__ == "ElidedLabel" or (isinstance(w, QLabel) and w.wordWrap()):
            continue  # made to shorten their text
        if isinstance(w.parentWidget(), (QAbstractSpinBox, QComboBox)):
            continue  # a spin box's own line edit: the spin box is checked
        hint = w.minimumSizeHint()
        if w.width() < hint.width() or w.height() < hint.height():
            bad.append(f"{type(w).__name__} {w.objectName() or getattr(w, 'text', lambda: '')()!r}: "
                       f"{w.width()}x{w.height()} < {hint.width()}x{hint.height()}")
    return bad


def test_panel_is_usable_inside_the_window_at_1280x800(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    qtbot.waitExposed(w)
    for tab in (w.speech_tab, w.ocr_tab, w.translation_tab):
        w.tabs.setCurrentWidget(tab)
        p = tab.options_panel
        p.setExpandedSections(SECTIONS)
        p.strategy_buttons["diverse_beam"].setChecked(True)  # the most rows in Strategy and Beam
        qtbot.wait(30)
        assert p.isVisible() and p.width() >= p.minimumSizeHint().width()
        # no sideways scrolling: the content fits the width; everything else scrolls down
        assert not p.scroll.horizontalScrollBar().isVisible(), tab.title
        assert p.scroll.verticalScrollBar().isVisible()
        assert p.scroll.viewport().height() >= 150, (tab.title, p.scroll.viewport().height())
        assert _clipped(p) == [], tab.title
        # the preset row stays in view whatever is scrolled
        for b in (p.preset_combo, p.save_preset_button, p.reset_button):
            top_left = b.mapTo(p, b.rect().topLeft())
            assert p.rect().contains(top_left) and p.rect().contains(top_left + b.rect().bottomRight()), tab.title
        # scrolling reaches the last control
        last = p.controls["length_decay_factor"]
        p.scroll.ensureWidgetVisible(last)
        vp = p.scroll.viewport()
        pos = last.mapTo(vp, last.rect().topLeft())
        assert 0 <= pos.y() and pos.y() + last.height() <= vp.height()
    for i in range(w.tabs.count()):
        w.tabs.widget(i).shutdown()
