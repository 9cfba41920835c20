"""What the GUI test files that drive a speech tab with a fake model share: the tone
input, a tab at 1280x800 that records its errors and status messages, a decode that
waits until the run has ended, and the main window shown at 1280x800."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from gui.tabs.speech import SpeechTab

TONE = (0.1 * np.sin(np.arange(16000) / 16000 * 2 * np.pi * 220)).astype(np.float32)
"""One second of a 220 Hz tone at 16 kHz, float32."""


def speech_tab(qtbot, model: Any) -> Iterator[SpeechTab]:
    """A shown SpeechTab (1280x800, 20 ms debounce) using ``model``, with ``errors`` and
    ``messages`` lists collecting its signals; shut down afterwards. Use with ``yield from``
    in a fixture."""
    t = SpeechTab()
    qtbot.addWidget(t)
    t.resize(1280, 800)
    t.show()
    t.options_panel._timer.setInterval(20)
    t.errors, t.messages = [], []
    t.errorOccurred.connect(t.errors.append)
    t.statusMessage.connect(t.messages.append)
    t.model = model
    yield t
    t.shutdown()


def decoded(qtbot, tab, audio=TONE, name="tone") -> None:
    """Set ``audio`` and wait for its run to finish."""
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(audio, name)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)


def shown_window(qtbot, settings):
    """The main window (no model loaded, ``settings`` its QSettings) resized to 1280x800 and
    shown; closed with the test."""
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    return w


#: what the Live view's two session lines read in a session that fell behind (the layout tests)
FELL_BEHIND = "Decoding fell behind real time by 2.2 s: the waiting audio was decoded in one step."


def show_session_lines(view, stats: str, message: str | None = None) -> None:
    """Show the Live view ``view``'s stats line (``stats``) and, when given, its message line,
    as a live session does (the layout tests measure the column with them)."""
    view.stats_label.setText(stats)
    view.stats_label.show()
    if message is not None:
        view.message_label.setText(message)
        view.message_label.show()


def show_align_att_wait(qtbot, view, n: int = 310) -> None:
    """Give the Live view ``view`` one scripted AlignAtt wait: the decode " this is a test ."
    over ``n`` buffer frames, the "." attending frame n - 2 (inside the last 25 frames), and let
    it draw."""
    from core.streaming import StreamToken, Waited

    from .fakes import make_step

    steps = tuple(make_step(i, t, n_frames=n) for i, t in enumerate([" this", " is", " a", " test", "."]))
    view.take(Waited(token=StreamToken(13, ".", 6.2), frame=n - 2, limit=n - 25, audio_s=6.3, n_frames=n,
                     steps=steps))
    view.flush()
    qtbot.wait(50)
