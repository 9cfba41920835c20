"""Contrastive decoding in the chain-stage view (issue 21): the expert, the amateur and the
contrast side by side for the selected step, the tokens the amateur talked the expert out of
marked, on a hand-made step, on a tiny model's run and on the bundled clip with whisper-base."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from core.events import StageReport, StepEvent, TokenProb
from gui.widgets.stage_columns import contrast_of
from gui.widgets.stage_view import GONE, KEPT, REMOVED, StageView

NOTE = "amateur layer 3 of 6 (auto, JS 0.0123)"


def _step() -> StepEvent:
    """' light' chosen: the expert preferred ' lights' (0.6), which the amateur liked even more
    (0.8); the contrast cut ' lamp' (below the plausibility cut) and top-k then kept two."""
    cands = (TokenProb(11, " lights", 0.6), TokenProb(12, " light", 0.3), TokenProb(13, " lamp", 0.1))
    cd = StageReport("contrastive_decoding", 2, 0.9, np.array([0.2, 0.8, 0.0], np.float32),
                     amateur=np.array([0.8, 0.1, 0.1], np.float32), note=NOTE)
    rep = StageReport("repetition_penalty", 2, 1.0, np.array([0.25, 0.75, 0.0], np.float32))
    return StepEvent(step=4, token_id=12, text=" light", prob=0.75, raw_prob=0.3, topk=[], raw_topk=[],
                     entropy=0.5, stages=(cd, rep), stage_candidates=cands)


def _view(qtbot) -> StageView:
    view = StageView()
    qtbot.addWidget(view)
    view.resize(700, 300)
    view.show()
    return view


def test_the_expert_the_amateur_and_the_contrast_stand_side_by_side(qtbot):
    view = _view(qtbot)
    view.set_step(_step())
    assert view.column_names() == ["raw", "amateur", "contrastive_decoding", "repetition_penalty"]
    assert view.header_text(1) == "amateur\nlayer 3 of 6\n(auto)"
    assert view.header_text(2).startswith("contrastive decoding\nkept 2")
    # the amateur's column: its probabilities, never "removed"
    assert [view.cell(r, 1).prob for r in range(3)] == pytest.approx([0.8, 0.1, 0.1])
    assert view.cell_text(0, 1) == "0.800"
    assert all(view.cell(r, 1).state == KEPT for r in range(3))
    # the contrast's column: ' lights' talked out of (↓), ' light' promoted (↑), ' lamp' cut
    assert view.cell_text(0, 2) == "0.200 ↓" and view.cell_text(1, 2) == "0.800 ↑"
    assert view.cell(2, 2).state == REMOVED and view.cell(2, 3).state == GONE  # compared with the expert, not the amateur
    tip = view.model.data(view.model.index(0, 2), role=3)  # ToolTipRole
    assert "talked the expert out of" in tip and "expert p 0.6000" in tip and "amateur p 0.8000" in tip
    assert "the amateur gives p 0.8 (" in view.model.data(view.model.index(0, 1), role=3)
    # and in words, under the title
    line = view.contrast_text()
    assert "talked the expert out of ' lights' (0.60 → 0.20)" in line and "toward ' light'" in line and NOTE in line
    # later stages do not mark
    assert view.cell_text(0, 3) == "0.250"


def test_a_step_without_an_amateur_has_no_amateur_column_nor_line(qtbot):
    view = _view(qtbot)
    ev = _step()
    plain = dataclasses.replace(ev, stages=ev.stages[1:])
    view.set_step(plain)
    assert view.column_names() == ["raw", "repetition_penalty"] and view.contrast_text() == ""
    agree = dataclasses.replace(ev, stages=(StageReport(
        "contrastive_decoding", 3, 1.0, np.array([0.7, 0.2, 0.1], np.float32),
        amateur=np.array([0.4, 0.3, 0.3], np.float32), note="amateur tiny.en"),))
    view.set_step(agree)
    assert "agrees with the expert" in view.contrast_text() and "amateur tiny.en" in view.contrast_text()
    assert view.header_text(1) == "amateur\ntiny.en\n "
    assert all("↓" not in view.cell_text(r, 2) for r in range(3))


def test_a_saved_exploration_keeps_the_amateur():
    from gui.exploration import step_from_json, step_to_json

    ev = _step()
    back = step_from_json(step_to_json(ev))
    assert back.stages[0].amateur == pytest.approx(ev.stages[0].amateur) and back.stages[0].note == NOTE
    assert back.stages[1].amateur is None and back.stages[1].note == ""


def test_a_tiny_models_dola_run_shows_in_the_view(qtbot):
    """A real run (tiny random Whisper, layer:auto): the view's amateur and contrast columns are
    the StageReport's numbers, and the marks follow them."""
    from core.backends.hf import HFSeq2SeqBackend
    from core.engine import Engine
    from core.options import DecodingOptions
    from tests.core.test_contrastive_decoding import _tiny_whisper

    tiny = _tiny_whisper(3, decoder_layers=4)
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind)
    options = DecodingOptions(contrastive_amateur="layer:auto", max_new_tokens=10, top_k_report=6)
    steps = [e for e in Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, options)
             if isinstance(e, StepEvent)]
    view = _view(qtbot)
    seen_out = False
    for ev in steps:
        view.set_step(ev)
        assert view.column_names()[:3] == ["raw", "amateur", "contrastive_decoding"]
        st = ev.stages[0]
        assert [view.cell(r, 1).prob for r in range(len(ev.stage_candidates))] == pytest.approx(st.amateur.tolist())
        con = contrast_of(ev)
        assert con is not None and ev.stage_candidates[con.promoted].id == ev.token_id  # greedy takes the contrast's best
        marked = [r for r in range(len(ev.stage_candidates)) if view.cell_text(r, 2).endswith("↓")]
        assert marked == sorted(con.talked_out)
        seen_out |= bool(marked)
    assert seen_out  # the amateur talked the expert out of something in this run


@pytest.mark.e2e
def test_the_bundled_clip_with_dola_screenshot(qtbot, whisper_base, tmp_path):
    """whisper-base on the bundled clip with layer:auto: a step where the amateur talked the
    expert out of a token is shown as the user would see it (screenshot under tmp_path)."""
    from pathlib import Path

    from core.inputs.audio import load_audio
    from core.options import DecodingOptions

    clip = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"
    events = list(whisper_base.decode(load_audio(str(clip)), DecodingOptions(contrastive_amateur="layer:auto"),
                                      language="en", task="transcribe"))
    steps = [e for e in events if isinstance(e, StepEvent)]
    talked = [e for e in steps if (c := contrast_of(e)) is not None and c.talked_out]
    assert talked, "DoLa changed no step of the clip"
    view = _view(qtbot)
    view.resize(760, 340)
    view.set_step(talked[0])
    assert "talked the expert out of" in view.contrast_text() and "of 6 (auto, JS" in view.contrast_text()
    assert view.grab().save(str(tmp_path / "h3_contrastive_stage_view.png"))


# ------------------------------------------------------------------ the options panel and the chain
def test_the_panel_sets_the_amateur_and_says_where_it_applies(qtbot, tmp_path):
    from PySide6.QtCore import Qt

    from core.options import DecodingOptions
    from gui.widgets.options_panel import OptionsPanel

    panel = OptionsPanel(debounce_ms=40, presets_dir=tmp_path / "presets")
    qtbot.addWidget(panel)
    box = panel.choices["contrastive_amateur"]
    assert box.currentText() == "" and box.lineEdit().placeholderText() == "off"
    assert panel.options().contrastive_amateur == ""
    assert "DoLa, Chuang et al. 2023" in box.toolTip() and "Li et al. 2022" in box.toolTip()
    box.setCurrentText("layer:auto")
    panel.controls["cd_alpha"].setValue(0.2)
    o = panel.options()
    assert (o.contrastive_amateur, o.cd_alpha, o.cd_beta) == ("layer:auto", 0.2, 0.5)
    assert panel.chain.stage_item("contrastive_decoding").text() == "DoLa layer:auto, α 0.2"
    # beam search: not used, and why
    panel.strategy_buttons["beam"].setChecked(True)
    assert not box.isEnabled() and "greedy and sampling only" in box.toolTip()
    item = panel.chain.stage_item("contrastive_decoding")
    assert not item.flags() & Qt.ItemFlag.ItemIsEnabled and "strategies greedy, sample, mirostat" in item.toolTip()
    # validate() refuses an amateur with beam search: the panel's options leave the disabled box out
    # (it keeps its text for the strategies it applies to)
    o = panel.options()
    assert (o.strategy, o.contrastive_amateur) == ("beam", "") and box.currentText() == "layer:auto"
    panel.strategy_buttons["greedy"].setChecked(True)
    assert box.isEnabled() and panel.chain.reason("contrastive_decoding") == ""
    assert panel.options().contrastive_amateur == "layer:auto"
    # options loaded into the panel show in the box
    panel.setOptions(DecodingOptions(contrastive_amateur="tiny.en", cd_beta=1.0))
    assert box.currentText() == "tiny.en" and panel.options().cd_beta == 1.0
