"""Box layouts written as one call: the items in order, the margins and the spacing.

``hbox(a, b, STRETCH, c, spacing=2)`` stands for the six lines of ``QHBoxLayout()``,
``setContentsMargins``, ``setSpacing`` and one ``addWidget`` / ``addStretch`` each, which the
widgets otherwise write again for every row of buttons.
"""

from __future__ import annotations

from typing import Union

from PySide6.QtWidgets import QBoxLayout, QHBoxLayout, QLayout, QVBoxLayout, QWidget

STRETCH = object()
"""An item of :func:`hbox` / :func:`vbox`: a stretch of factor 1 (``addStretch(1)``)."""

Item = Union[QWidget, QLayout, "tuple[QWidget | QLayout, int]", int, object]
"""A widget, a layout, ``(widget or layout, stretch factor)``, an ``int`` (a fixed space of
that many pixels, ``addSpacing``) or :data:`STRETCH`."""


def _fill(box: QBoxLayout, items: tuple[Item, ...], margins: tuple[int, int, int, int], spacing: int | None):
    box.setContentsMargins(*margins)
    if spacing is not None:
        box.setSpacing(spacing)
    for item in items:
        stretch = 0
        if isinstance(item, tuple):
            item, stretch = item
        if item is STRETCH:
            box.addStretch(1)
        elif isinstance(item, bool) or not isinstance(item, (int, QWidget, QLayout)):
            raise TypeError(f"a layout item must be a widget, a layout, (item, stretch), an int or STRETCH, got {item!r}")
        elif isinstance(item, int):
            box.addSpacing(item)
        elif isinstance(item, QLayout):
            box.addLayout(item, stretch)
        else:
            box.addWidget(item, stretch)
    return box


def hbox(*items: Item, margins: tuple[int, int, int, int] = (0, 0, 0, 0), spacing: int | None = None,
         parent: QWidget | None = None) -> QHBoxLayout:
    """A horizontal box of ``items`` (see :data:`Item`), installed on ``parent`` when given.

    Args:
        margins: the contents margins (left, top, right, bottom) in pixels.
        spacing: the spacing between items in pixels; None: the style's.

    Raises:
        TypeError: an item of another kind.
    """
    return _fill(QHBoxLayout(parent) if parent is not None else QHBoxLayout(), items, margins, spacing)


def vbox(*items: Item, margins: tuple[int, int, int, int] = (0, 0, 0, 0), spacing: int | None = None,
         parent: QWidget | None = None) -> QVBoxLayout:
    """A vertical box of ``items``; as :func:`hbox`."""
    return _fill(QVBoxLayout(parent) if parent is not None else QVBoxLayout(), items, margins, spacing)
