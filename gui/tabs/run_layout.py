"""The run tab's panes (``gui.tabs.run.RunTab``)::

    ┌ input area (subclass) ──────────┬ options panel ─────────┐
    ├ token stream (strip: entropy, varentropy, kept, μ) ──────┤
    ├ top-k | chain stages ───────────┬ inspector tabs ────────┤

Three ``QSplitter``s (top, bottom, main) under the error banner, with their default sizes
for a 1400 x 900 window (the settings replace them, ``gui.tabs.base``).
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from ..widgets.step_strip import STRIP_HEIGHT


def build_splitters(input_area: QWidget, options_panel: QWidget, stream: QWidget, inspector: QWidget,
                    inspector_tabs: QWidget, main_sizes: tuple[int, int, int]
                    ) -> tuple[QSplitter, QSplitter, QSplitter]:
    """The three splitters (top: input | options; bottom: top-k | inspector tabs; main:
    top, stream, bottom), not collapsible, at their default sizes: ``main_sizes`` (pixels
    of the three rows), the token stream's row grown to fit the step strip above its chips."""
    top = QSplitter(Qt.Orientation.Horizontal)
    top.addWidget(input_area)
    top.addWidget(options_panel)
    top.setStretchFactor(0, 3)
    top.setStretchFactor(1, 2)
    bottom = QSplitter(Qt.Orientation.Horizontal)
    bottom.addWidget(inspector)
    bottom.addWidget(inspector_tabs)
    bottom.setStretchFactor(0, 2)
    bottom.setStretchFactor(1, 3)
    main = QSplitter(Qt.Orientation.Vertical)
    main.addWidget(top)
    main.addWidget(stream)
    main.addWidget(bottom)
    main.setStretchFactor(0, 2)
    main.setStretchFactor(1, 1)
    main.setStretchFactor(2, 3)
    for s in (top, bottom, main):
        s.setChildrenCollapsible(False)
    # defaults for a 1400 x 900 window (restore_settings replaces them). The token stream
    # pane gets room for the step strip above its chips (the strip shrinks before the chips
    # do), taken from the other two panes, with a margin: a 1280 x 800 window scales the
    # panes to ~0.86 of these sizes
    room = stream.minimumSizeHint().height() + STRIP_HEIGHT
    main.setSizes(pane_at_least(list(main_sizes), 1, math.ceil(room / 0.85)))
    top.setSizes([800, 560])
    bottom.setSizes([520, 840])
    return top, bottom, main


def lay_out(tab: QWidget, banner: QWidget, main: QSplitter) -> None:
    """``tab``'s layout: the banner above the main splitter."""
    lay = QVBoxLayout(tab)
    lay.setContentsMargins(4, 4, 4, 4)
    lay.addWidget(banner)
    lay.addWidget(main, 1)


def pane_at_least(sizes: list[int], i: int, need: int) -> list[int]:
    """``sizes`` (splitter pane heights) with pane ``i`` grown to ``need`` pixels, the other
    panes giving up the difference in proportion to their sizes (the total stays)."""
    deficit = need - sizes[i]
    others = [j for j in range(len(sizes)) if j != i]
    pool = sum(sizes[j] for j in others)
    if deficit <= 0 or pool <= 0:
        return list(sizes)
    out = list(sizes)
    out[i] = need
    for j in others:
        out[j] = max(1, sizes[j] - round(deficit * sizes[j] / pool))
    return out
