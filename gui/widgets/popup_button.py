"""Small shared Qt helpers: a tool button whose click pops up a widget, a read-only table."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QMenu,
    QTableWidget,
    QToolButton,
    QWidget,
    QWidgetAction,
)


def popup_button(text: str, tooltip: str, content: QWidget) -> QToolButton:
    """A QToolButton labelled ``text`` that shows ``content`` in a popup when clicked
    (a one-item QMenu holding it); the button owns the menu. A ``text`` ending in "▾" is its
    own arrow: the style's menu arrow is not drawn too ("long-form ▾" showed two)."""
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tooltip)
    button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    if text.rstrip().endswith("▾"):  # the text draws its arrow: not the style's second one beside it
        button.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
    menu = QMenu(button)
    action = QWidgetAction(menu)
    action.setDefaultWidget(content)
    menu.addAction(action)
    button.setMenu(menu)
    return button


def read_only_table(columns: list[str] | tuple[str, ...], *, stretch_last: bool) -> QTableWidget:
    """A QTableWidget with ``columns``, no row header, not editable, columns sized to their
    contents (the last one stretched when ``stretch_last``)."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(stretch_last)
    return table
