"""A dismissible red banner at the top of a tab: what went wrong and what to do."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget


class ErrorBanner(QFrame):
    """A dismissible red banner with a message that says what went wrong and what to do."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.setStyleSheet(
            "#errorBanner { background: #fdecea; border: 1px solid #f5c2c0; border-radius: 4px; }"
            "#errorBanner QLabel { color: #611a15; }"
        )
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.setAutoRaise(True)
        close.clicked.connect(self.hide)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 4, 4)
        lay.addWidget(QLabel("⚠"))
        lay.addWidget(self.label, 1)
        lay.addWidget(close)
        self.hide()

    def show_message(self, text: str) -> None:
        """Show ``text`` (plain text)."""
        self.label.setText(text)
        self.show()

    def message(self) -> str:
        """The text shown ("" when hidden)."""
        return "" if self.isHidden() else self.label.text()
