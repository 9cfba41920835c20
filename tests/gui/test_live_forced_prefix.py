"""The Live mode's forced prefix (session 15): a box beside the prompt length in the Live view's
head row sets LocalAgreement's ``forced_prefix`` (checked, the default: the words committed
inside the buffer are forced as each decode's start; unchecked: whisper_streaming's free
re-decode, the committed text's repeat dropped by word timing); kept in QSettings; off for
align-att and fixed-window, which take none; locked while a live session runs. As
test_live_prompt.py and test_r1_live_prompt_lock.py for the prompt length."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from gui.tabs.speech import SpeechTab
from tests.gui.test_live_mode import _dialogs_never_block, _noise_wav, mic_tab, scripted  # noqa: F401 (fixtures)
from tests.gui.test_live_prompt import NoDecoder, _pick, tab  # noqa: F401 (tab: a fixture)


def test_the_forced_prefix_box_reaches_the_local_agreement_policy(qtbot, tab):
    from core.streaming.local_agreement import FORCED_PREFIX, LocalAgreement

    live = tab.live_mode
    box = live.forced_check
    _pick(live, "local-agreement:2")
    assert box.isEnabled() and box.text() == "forced prefix"
    assert box.isChecked() == FORCED_PREFIX == LocalAgreement().forced_prefix is True  # the default: forced
    assert live.make_driver(NoDecoder(), 1.0).policy.forced_prefix is True
    box.setChecked(False)
    assert live.make_driver(NoDecoder(), 1.0).policy.forced_prefix is False
    box.setChecked(True)
    assert live.make_driver(NoDecoder(), 1.0).policy.forced_prefix is True
    tip = box.toolTip()
    assert "whisper_streaming" in tip and "committed" in tip and "word timing" in tip and "slower" in tip


@pytest.mark.parametrize("spec", ["align-att:25", "fixed-window"])
def test_the_forced_prefix_is_off_for_policies_without_one(qtbot, tab, spec):
    live = tab.live_mode
    live.forced_check.setChecked(False)
    _pick(live, spec)
    assert not live.forced_check.isEnabled()
    tip = live.forced_check.toolTip()  # says why it is off (the on tip names local-agreement too)
    assert "local-agreement only" in tip and "do not take it" in tip and "whisper_streaming" not in tip
    driver = live.make_driver(NoDecoder(), 1.0)  # the policy is built without a forced prefix
    assert not hasattr(driver.policy, "forced_prefix")
    _pick(live, "local-agreement:2")
    assert live.forced_check.isEnabled() and not live.forced_check.isChecked()  # the choice kept


def test_the_forced_prefix_is_kept_in_qsettings(qtbot, tab):
    live = tab.live_mode
    live.forced_check.setChecked(False)
    tab.save_settings(QSettings())
    other = SpeechTab()
    qtbot.addWidget(other)
    other.restore_settings(QSettings())
    assert not other.live_mode.forced_check.isChecked()
    assert other.live_mode.make_driver(NoDecoder(), 1.0).policy.forced_prefix is False
    live.forced_check.setChecked(True)  # checked is kept too
    tab.save_settings(QSettings())
    other.restore_settings(QSettings())
    assert other.live_mode.forced_check.isChecked()
    assert other.live_mode.make_driver(NoDecoder(), 1.0).policy.forced_prefix is True
    other.shutdown()


def test_the_forced_prefix_is_locked_while_a_live_session_runs_and_unlocked_after(qtbot, mic_tab, scripted, tmp_path):
    tab, live = mic_tab, mic_tab.live_mode
    _pick(live, "local-agreement:2")
    live.forced_check.setChecked(False)
    assert live.forced_check.isEnabled()
    assert tab.play_file_as_live(_noise_wav(tmp_path / "noise.wav", 4.0), speed=2.0)
    assert live.running() and not live.forced_check.isEnabled()  # the session's policy is built: no change now
    with qtbot.waitSignal(tab.decodeFinished, timeout=20_000):  # the file becomes the input, decoded offline
        qtbot.waitUntil(lambda: not live.running(), timeout=20_000)
    assert live.forced_check.isEnabled() and not live.forced_check.isChecked()  # unlocked, the choice kept
