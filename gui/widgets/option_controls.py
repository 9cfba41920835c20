"""Small controls of the options panel: a slider coupled to a spin box, an eliding label
and a collapsible section with a one-line summary."""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, QSize, Qt, Signal
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractSlider,
    QAbstractSpinBox,
    QDoubleSpinBox,
    QGridLayout,
    QLabel,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QToolButton,
    QWidget,
)

from .layouts import hbox, vbox


class SliderSpin(QWidget):
    """A horizontal slider coupled to a spin box (int or float).

    The slider moves in ``step`` increments between ``minimum`` and ``maximum``; the
    spin box shows ``decimals`` digits (0 = integers). ``valueChanged(float)`` fires
    on every change from either control. ``committed()`` follows it when the change was
    the user's last word: a keyboard step, a click on the groove or a wheel notch on the
    slider (its ``actionTriggered``, except a drag's moves), the release of a dragged
    slider, and the end of an edit in the spin box; a value set by code never commits.
    """

    valueChanged = Signal(float)
    committed = Signal()

    def __init__(
        self,
        minimum: float,
        maximum: float,
        step: float,
        decimals: int = 0,
        special: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._min, self._max, self._step = float(minimum), float(maximum), float(step)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, round((self._max - self._min) / self._step))
        self.slider.setMinimumWidth(80)
        if decimals:
            self.spin: QAbstractSpinBox = QDoubleSpinBox()
            self.spin.setDecimals(decimals)
            self.spin.setSingleStep(step)
        else:
            self.spin = QSpinBox()
            self.spin.setSingleStep(max(1, int(step)))
        self.spin.setRange(minimum, maximum)
        if special:
            self.spin.setSpecialValueText(special)  # shown at the minimum, e.g. "off"
        self.spin.setKeyboardTracking(False)
        self.spin.setMinimumWidth(72)
        hbox((self.slider, 1), self.spin, parent=self)
        self.slider.valueChanged.connect(self._from_slider)
        self.spin.valueChanged.connect(self._from_spin)
        self._commit_next = False  # a user's slider action is about to change the value
        self.slider.actionTriggered.connect(self._slider_action)
        self.slider.sliderReleased.connect(self.committed)
        self.spin.editingFinished.connect(self.committed)

    def value(self) -> float:
        """The current value (as shown in the spin box)."""
        return float(self.spin.value())

    def setValue(self, value: float) -> None:
        """Set both controls (clamped to the range); emits ``valueChanged`` if it changed."""
        self.spin.setValue(value)

    def setToolTip(self, text: str) -> None:  # noqa: N802
        super().setToolTip(text)
        self.slider.setToolTip(text)
        self.spin.setToolTip(text)

    def _from_slider(self, pos: int) -> None:
        commit, self._commit_next = self._commit_next, False
        v = self._min + pos * self._step
        if abs(v - self.value()) > 1e-9:
            self.spin.setValue(v)  # valueChanged goes out from _from_spin
            if commit:
                self.committed.emit()

    def isDragged(self) -> bool:  # noqa: N802
        """Whether the user holds the slider's handle (a drag in progress)."""
        return self.slider.isSliderDown()

    def _slider_action(self, action: int) -> None:
        # sent before the value changes; sliderPosition() is already the new one
        dragging = action == QAbstractSlider.SliderAction.SliderMove.value and self.slider.isSliderDown()
        self._commit_next = not dragging and self.slider.sliderPosition() != self.slider.value()

    def _from_spin(self, v: float) -> None:
        pos = round((float(v) - self._min) / self._step)
        with QSignalBlocker(self.slider):
            self.slider.setValue(pos)
        self.valueChanged.emit(float(v))


class ElidedLabel(QLabel):
    """A one-line label that elides its text (…) instead of asking for more width."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(0, super().minimumSizeHint().height())

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setPen(self.palette().color(self.foregroundRole()))
        text = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, self.contentsRect().width())
        p.drawText(self.contentsRect(), int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), text)


class Section(QWidget):
    """A collapsible section: a checkable arrow button (the title), a summary, the body."""

    def __init__(self, title: str, tooltip: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = title
        self.button = QToolButton()
        self.button.setText(title)
        self.button.setCheckable(True)
        self.button.setChecked(True)
        self.button.setAutoRaise(True)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setArrowType(Qt.ArrowType.DownArrow)
        self.button.setStyleSheet("QToolButton { font-weight: bold; border: none; padding: 1px 2px; }")
        self.button.setToolTip(f"{tooltip}\n(click to show or hide)")
        self.summary = ElidedLabel()
        pal = self.summary.palette()
        pal.setColor(QPalette.ColorRole.WindowText, pal.color(QPalette.ColorRole.PlaceholderText))
        self.summary.setPalette(pal)
        self.body = QWidget()
        self.grid = QGridLayout(self.body)
        self.grid.setContentsMargins(18, 0, 2, 4)
        self.grid.setHorizontalSpacing(8)
        self.grid.setVerticalSpacing(3)
        self.grid.setColumnStretch(1, 1)
        vbox(hbox(self.button, (self.summary, 1)), self.body, spacing=0, parent=self)
        self.button.toggled.connect(self.setExpanded)
        self._marked = False

    def isExpanded(self) -> bool:  # noqa: N802
        return self.button.isChecked()

    def setExpanded(self, on: bool) -> None:  # noqa: N802
        if self.button.isChecked() != on:
            self.button.setChecked(on)  # comes back here through toggled
            return
        self.button.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)

    def set_marked(self, marked: bool) -> None:
        """A dot after the title: a value in this section differs from the preset."""
        self._marked = marked
        self.button.setText(f"{self.title} •" if marked else self.title)

    def is_marked(self) -> bool:
        return self._marked
