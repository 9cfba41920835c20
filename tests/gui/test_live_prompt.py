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
    from gui.tabs.live import PROMPT_OFF_TIP, PROMPT_TIP

    assert live.prompt_spin.toolTip() == PROMPT_OFF_TIP != PROMPT_TIP  # says why it is off
    driver = live.make_driver(NoDecoder(), 1.0)  # the policy is built without a prompt length
    assert not hasattr(driver.policy, "prompt_tokens")
    _pick(live, "local-agreement:2")
    assert live.prompt_spin.isEnabled() and live.prompt_spin.toolTip() == PROMPT_TIP


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


def test_the_default_prompt_length_is_every_models_and_reaches_the_live_policy(qtbot, tab):
    """With nothing saved, the spin box shows the default (``local_agreement.PROMPT_TOKENS``) and
    a live session's LocalAgreement gets it, as ``stream`` without --prompt-tokens does, whichever
    bundled model is loaded: session 14 found no per-model difference to keep (the module's
    docstring), so the default is one value for every model, and a length the user picked stays
    when the model changes. (Before: the test was parametrised on a model name that it set and
    never read, so it could not fail on the model.)"""
    from core.catalog import WHISPER_MODELS
    from core.streaming.local_agreement import PROMPT_TOKENS, LocalAgreement

    from .fakes import FakeSpeechModel

    names = [m.display for m in WHISPER_MODELS.values()]
    assert {"whisper-tiny.en", "whisper-base"} <= set(names)
    live = tab.live_mode

    def loaded(name: str) -> int | None:
        """The prompt length a live session's policy gets with model ``name`` loaded."""
        model = FakeSpeechModel()
        model.name = name
        tab.model = model
        tab.modelReady.emit(model)  # as a load ends (gui/tabs/model_load.py)
        assert tab.model.name == name and live.policy() == "local-agreement:2"
        return live.make_driver(NoDecoder(), 1.0).policy.prompt_tokens

    assert live.prompt_tokens() == PROMPT_TOKENS == LocalAgreement().prompt_tokens
    assert live.prompt_spin.text() == ("prompt: all" if PROMPT_TOKENS is None else f"prompt: {PROMPT_TOKENS}")
    assert {name: loaded(name) for name in names} == {name: PROMPT_TOKENS for name in names}
    live.prompt_spin.setValue(90)  # the user's length: a model change does not reset it
    assert {name: loaded(name) for name in reversed(names)} == {name: 90 for name in names}
