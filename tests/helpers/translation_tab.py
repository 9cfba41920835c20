"""A Translation tab on the real bundled Bergamot model, as the GUI tests open it."""

from __future__ import annotations

from typing import Iterator

SLOW_MS = 120_000


def loaded_translation_tab(qtbot, size: tuple[int, int], direction: str = "en-pt") -> Iterator:
    """Yield a ``TranslationTab`` of ``size`` (width, height px) with ``direction`` loaded,
    short debounce timers and its errors collected in ``tab.errors``; shut down afterwards.
    For a pytest fixture: ``yield from loaded_translation_tab(qtbot, (1280, 800))``."""
    from gui.tabs.translation import TranslationTab

    t = TranslationTab()
    qtbot.addWidget(t)
    t.resize(*size)
    t.options_panel._timer.setInterval(20)
    t._text_timer.setInterval(50)
    t.errors = []
    t.errorOccurred.connect(t.errors.append)
    with qtbot.waitSignal(t.modelReady, timeout=SLOW_MS):
        t.load_model(direction)
    qtbot.waitUntil(lambda: not t.is_busy(), timeout=SLOW_MS)
    yield t
    t.shutdown()
