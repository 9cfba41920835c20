"""A label that keeps to one line per line of its text: each line is cut with "…" to the
width it is given, the whole text in its tooltip (issue 19 §6: the speech tab's input label
wrapped "long10.wav · 600.00 s · 16 kHz mono" into three cramped lines at 1280 x 800)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """A plain-text QLabel whose lines are elided to its width instead of wrapped.

    :meth:`setText` keeps the full text (:meth:`full_text`, and :meth:`text` returns it, as a
    QLabel's would); what is drawn is :meth:`shown_text`. The tooltip is the full text unless
    one was set with :meth:`setToolTip` after the text.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self._own_tip = False
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(False)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802
        self._full = str(text)
        self._own_tip = False
        super().setToolTip(self._full if self._elided() else "")
        self._refit()

    def setToolTip(self, tip: str) -> None:  # noqa: N802
        self._own_tip = bool(tip)
        super().setToolTip(tip)

    def text(self) -> str:
        """The full text (not cut)."""
        return self._full

    def full_text(self) -> str:
        return self._full

    def shown_text(self) -> str:
        """The text as drawn (each line cut to the width)."""
        return super().text()

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(40, super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:  # noqa: N802
        """The whole text's size (a QLabel's would be the cut text's: a label laid out narrow
        once, e.g. while its tab was hidden, would ask for no more room afterwards)."""
        fm = self.fontMetrics()
        m = self.contentsMargins()
        width = max((fm.horizontalAdvance(line) for line in self._full.split("\n")), default=0)
        return QSize(width + m.left() + m.right() + 2 * self.margin() + 1, super().sizeHint().height())

    def resizeEvent(self, e) -> None:  # noqa: N802
        super().resizeEvent(e)
        self._refit()

    def _elided(self) -> bool:
        fm = self.fontMetrics()
        width = max(10, self.contentsRect().width())
        return any(fm.horizontalAdvance(line) > width for line in self._full.split("\n"))

    def _refit(self) -> None:
        fm = self.fontMetrics()
        width = max(10, self.contentsRect().width())
        shown = "\n".join(fm.elidedText(line, Qt.TextElideMode.ElideRight, width) for line in self._full.split("\n"))
        if shown != super().text():
            super().setText(shown)
        if not self._own_tip:
            super().setToolTip(self._full if self._elided() else "")
