"""The status bar's "Decoded: N tokens" goes when the input it was about goes. Before: after
Clear in the Translation tab (or Discard in the Speech tab) the message stayed for its 6 s
although the views were empty (MainWindow.show_message's timeout was the only thing ending it)."""

from __future__ import annotations

from .fakes import FakeSpeechModel
from .tab_helpers import TONE, decoded, shown_window


def test_clearing_the_translation_input_clears_the_decoded_message(qtbot, settings, translation_en_pt):
    w = shown_window(qtbot, settings)
    tab = w.translation_tab
    w.tabs.setCurrentWidget(tab)
    tab.options_panel._timer.setInterval(20)
    tab._text_timer.setInterval(50)
    tab.model = translation_en_pt
    with qtbot.waitSignal(tab.decodeFinished, timeout=60_000):
        tab.set_text("The weather is nice today.")
    qtbot.waitUntil(lambda: not tab.is_decoding() and not w.busy_bar.isVisible(), timeout=60_000)
    sb = w.statusBar()
    assert sb.currentMessage().startswith("Decoded:"), sb.currentMessage()
    tab.clear_text()
    # the text box's debounce (50 ms here), then the run and its message go: well inside the 6 s
    qtbot.waitUntil(lambda: tab.stream.token_count() == 0, timeout=2000)
    assert sb.currentMessage() == "" and sb.toolTip() == ""
    # typing again decodes again and says so
    with qtbot.waitSignal(tab.decodeFinished, timeout=60_000):
        tab.set_text("Where is the train station?")
    qtbot.waitUntil(lambda: not tab.is_decoding() and not w.busy_bar.isVisible(), timeout=60_000)
    assert sb.currentMessage().startswith("Decoded:")
    tab.shutdown()


def test_discarding_the_speech_input_clears_the_decoded_message(qtbot, settings):
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    w.tabs.setCurrentWidget(tab)
    tab.options_panel._timer.setInterval(20)
    tab.model = FakeSpeechModel()
    decoded(qtbot, tab, TONE)
    qtbot.waitUntil(lambda: not w.busy_bar.isVisible(), timeout=5000)
    sb = w.statusBar()
    assert sb.currentMessage().startswith("Decoded:"), sb.currentMessage()
    tab.discard_input()
    assert not tab.has_input() and sb.currentMessage() == "" and sb.toolTip() == ""
    tab.shutdown()
