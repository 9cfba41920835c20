"""R1 review (session 14): the Live view's prompt spin box (acf8a2c) is locked while a live
session runs and unlocked when it ends, as its commit says; no other test saw either (both
lines of gui/tabs/live.py could be deleted with tests/gui/test_live_prompt.py and
test_live_mode.py still passing)."""

from __future__ import annotations

from tests.gui.test_live_mode import _dialogs_never_block, _noise_wav, mic_tab, scripted  # noqa: F401 (fixtures)


def test_the_prompt_length_is_locked_while_a_live_session_runs_and_unlocked_after(qtbot, mic_tab, scripted, tmp_path):
    tab, live = mic_tab, mic_tab.live_mode
    live.policy_combo.setCurrentIndex(live.policy_combo.findData("local-agreement:2"))
    live.prompt_spin.setValue(45)
    assert live.prompt_spin.isEnabled()
    assert tab.play_file_as_live(_noise_wav(tmp_path / "noise.wav", 4.0), speed=2.0)
    assert live.running() and not live.prompt_spin.isEnabled()  # the session's policy is built: no change now
    with qtbot.waitSignal(tab.decodeFinished, timeout=20_000):  # the file becomes the input, decoded offline
        qtbot.waitUntil(lambda: not live.running(), timeout=20_000)
    assert live.prompt_spin.isEnabled() and live.prompt_spin.value() == 45  # unlocked, the value kept
