"""gui.widgets.layouts: a box layout in one call holds its items in order, with the given
margins, spacing and stretch factors, and refuses an item of another kind."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from gui.widgets.layouts import STRETCH, hbox, vbox


def test_hbox_and_vbox_hold_their_items_in_order(qtbot):
    owner = QWidget()
    qtbot.addWidget(owner)
    a, b, c = QLabel("a"), QLabel("b"), QLabel("c")
    row = hbox(a, STRETCH, (b, 3), 7, spacing=2)
    col = vbox(row, c, margins=(1, 2, 3, 4), spacing=0, parent=owner)

    assert isinstance(row, QHBoxLayout) and isinstance(col, QVBoxLayout)
    assert owner.layout() is col
    assert row.count() == 4 and row.spacing() == 2
    assert row.itemAt(0).widget() is a
    assert row.itemAt(1).spacerItem() is not None and row.stretch(1) == 1
    assert row.itemAt(2).widget() is b and row.stretch(2) == 3
    assert row.itemAt(3).spacerItem().sizeHint().width() == 7
    m = row.contentsMargins()
    assert (m.left(), m.top(), m.right(), m.bottom()) == (0, 0, 0, 0)
    assert col.itemAt(0).layout() is row and col.itemAt(1).widget() is c
    m = col.contentsMargins()
    assert (m.left(), m.top(), m.right(), m.bottom()) == (1, 2, 3, 4) and col.spacing() == 0


def test_an_item_of_another_kind_is_refused():
    with pytest.raises(TypeError, match="layout item"):
        hbox("text")
