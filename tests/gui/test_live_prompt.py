"""The Live mode's prompt length (issue 23, session 14 H1): a spin box beside the policy picker
sets how many tokens of the text committed before the buffer prompt each LocalAgreement decode
("all": every one of them); kept in QSettings; off for align-att and fixed-window, which take no
prompt length."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from gui.tabs.speech import SpeechTab


class NoDecoder:
    """make_driver only builds the policy: nothing decodes here."""


@pytest.fixture
def tab(qtbot, settings):
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    yield t
    t.shutdown()


def _pick(live, spec: str) -> None:
    live.policy_combo.setCurrentIndex(live.policy_combo.findData(spec))


def test_the_prompt_length_spin_box_reaches_the_local_agreement_policy(qtbot, tab):
    live = tab.live_mode
    spin = live.prompt_spin
    _pick(live, "local-agreement:2")
    assert spin.isEnabled()
    spin.setValue(90)
    assert live.make_driver(NoDecoder(), 1.0).policy.prompt_tokens == 90
    spin.setValue(spin.minimum())  # the special value: all the text before the buffer
    assert spin.text() == "prompt: all"
    assert live.make_driver(NoDecoder(), 1.0).policy.prompt_tokens is None
    tip = spin.toolTip()
    assert "200 characters" in tip and "whisper_streaming" in tip and "all" in tip


@pytest.mark.parametrize("spec", ["align-att:25", "fixed-window"])
def test_the_prompt_length_is_off_for_policies_without_one(qtbot, tab, spec):
    live = tab.live_mode
    live.prompt_spin.setValue(45)
    _pick(live, spec)
    assert not live.prompt_spin.isEnabled()
    assert "local-agreement only" in live.prompt_spin.toolTip()
    driver = live.make_driver(NoDecoder(), 1.0)  # the policy is built without a prompt length
    assert not hasattr(driver.policy, "prompt_tokens")
    _pick(live, "local-agreement:2")
    assert live.prompt_spin.isEnabled()


def test_the_prompt_length_is_kept_in_qsettings(qtbot, tab):
    live = tab.live_mode
    live.prompt_spin.setValue(60)
    tab.save_settings(QSettings())
    other = SpeechTab()
    qtbot.addWidget(other)
    other.restore_settings(QSettings())
    assert other.live_mode.prompt_spin.value() == 60
    live.prompt_spin.setValue(live.prompt_spin.minimum())  # "all" is kept too
    tab.save_settings(QSettings())
    other.restore_settings(QSettings())
    assert other.live_mode.prompt_spin.text() == "prompt: all"
    assert other.live_mode.make_driver(NoDecoder(), 1.0).policy.prompt_tokens is None
    other.shutdown()


@pytest.mark.parametrize("model_name", ["whisper-tiny.en", "whisper-base"])
def test_the_default_prompt_length_reaches_the_live_policy_for_each_model(qtbot, tab, model_name):
    """With nothing saved, the spin box shows the default (``local_agreement.PROMPT_TOKENS``:
    session 14 kept "all" for both bundled models, see its docstring) and a live session's
    LocalAgreement gets it, as ``stream`` without --prompt-tokens does."""
    from core.streaming.local_agreement import PROMPT_TOKENS, LocalAgreement

    from .fakes import FakeSpeechModel

    tab.model = FakeSpeechModel()
    tab.model.name = model_name
    live = tab.live_mode
    assert live.policy() == "local-agreement:2"
    assert live.prompt_tokens() == PROMPT_TOKENS == LocalAgreement().prompt_tokens
    assert live.prompt_spin.text() == ("prompt: all" if PROMPT_TOKENS is None else f"prompt: {PROMPT_TOKENS}")
    assert live.make_driver(NoDecoder(), 1.0).policy.prompt_tokens == PROMPT_TOKENS
