"""The alignment-head picker: which (decoder layer, head) pairs word timing aligns on.

openai/whisper found that a few cross-attention heads of each model follow time: their
attention moves along the audio as the words are spoken (``_ALIGNMENT_HEADS`` in
``whisper/__init__.py``, used by ``timing.py``). Word timing runs DTW over the mean of
those heads. The picker shows the decoder's layers x heads as a grid of toggles with the
model's alignment heads ticked; the user can tick others (or all) and watch the DTW path
and the words move. A view only: it knows nothing of models or runs.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout, QWidget

WHAT = ("Alignment heads: the cross-attention heads whose attention follows time, moving along the audio "
        "as the words are spoken (openai/whisper lists them per model, _ALIGNMENT_HEADS; timing.py aligns "
        "on their mean). Word timing runs DTW over the heads ticked here.")
#: a ticked head's button (the model's own default heads are also bold)
_STYLE = ("QToolButton { padding: 0px; min-width: 20px; max-width: 22px; min-height: 16px; max-height: 18px; }"
          "QToolButton:checked { background: #c030c0; color: white; border: 1px solid #701070; }")


class AlignmentHeadPicker(QWidget):
    """A layers x heads grid of toggles, "default heads" and "all heads" buttons.

    Signals:
        headsChanged(list): the ticked (layer, head) pairs changed (sorted list of tuples);
            emitted once per user action (a click, a button), not while set programmatically
            through :meth:`set_heads` with ``emit=False``.
    """

    headsChanged = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._buttons: dict[tuple[int, int], QToolButton] = {}
        self._defaults: list[tuple[int, int]] = []
        self._shape = (0, 0)
        self.setToolTip(WHAT)
        self.grid = QGridLayout()
        self.grid.setSpacing(1)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.default_button = QPushButton("default heads")
        self.default_button.setToolTip("tick the model's own alignment heads (openai/whisper _ALIGNMENT_HEADS)")
        self.default_button.clicked.connect(self.use_default)
        self.all_button = QPushButton("all heads")
        self.all_button.setToolTip("tick every head of every decoder layer (most do not follow time: the words blur)")
        self.all_button.clicked.connect(self.use_all)
        self.summary = QLabel("no model")
        buttons = QHBoxLayout()
        buttons.addWidget(self.default_button)
        buttons.addWidget(self.all_button)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        title = QLabel("<b>Alignment heads</b> (rows: decoder layer, columns: head)")
        title.setToolTip(WHAT)
        lay.addWidget(title)
        lay.addLayout(self.grid)
        lay.addWidget(self.summary)
        lay.addLayout(buttons)
        self.setStyleSheet(_STYLE)

    # ---------------------------------------------------------------- API
    def set_model_heads(self, layers: int, heads: int, defaults: list[tuple[int, int]]) -> None:
        """Show a ``layers`` x ``heads`` grid with ``defaults`` (the model's alignment
        heads, (layer, head) pairs) ticked. Emits nothing."""
        self._defaults = sorted((int(a), int(b)) for a, b in defaults)
        if self._shape != (layers, heads):
            self._shape = (layers, heads)
            while self.grid.count():
                item = self.grid.takeAt(0)
                if item.widget() is not None:
                    item.widget().deleteLater()
            self._buttons.clear()
            for h in range(heads):
                label = QLabel(str(h))
                label.setAlignment(Qt.AlignmentFlag.AlignCenter)
                self.grid.addWidget(label, 0, h + 1)
            for layer in range(layers):
                self.grid.addWidget(QLabel(f"layer {layer}"), layer + 1, 0)
                for h in range(heads):
                    b = QToolButton()
                    b.setCheckable(True)
                    b.setText(str(h))
                    b.toggled.connect(self._toggled)
                    self._buttons[(layer, h)] = b
                    self.grid.addWidget(b, layer + 1, h + 1)
        for key, b in self._buttons.items():
            default = key in self._defaults
            font = b.font()
            font.setBold(default)
            b.setFont(font)
            b.setToolTip(f"decoder layer {key[0]}, head {key[1]}"
                         + (": one of the model's alignment heads" if default else "") + "\n" + WHAT)
        self.set_heads(self._defaults, emit=False)

    def heads(self) -> list[tuple[int, int]]:
        """The ticked (layer, head) pairs, sorted."""
        return sorted(k for k, b in self._buttons.items() if b.isChecked())

    def default_heads(self) -> list[tuple[int, int]]:
        """The model's alignment heads (as given to :meth:`set_model_heads`)."""
        return list(self._defaults)

    def shape(self) -> tuple[int, int]:
        """(decoder layers, heads per layer) of the grid."""
        return self._shape

    def button(self, layer: int, head: int) -> QToolButton:
        """The toggle of (``layer``, ``head``)."""
        return self._buttons[(layer, head)]

    def is_default(self) -> bool:
        """Whether exactly the model's alignment heads are ticked."""
        return self.heads() == self._defaults

    def set_heads(self, heads: list[tuple[int, int]], emit: bool = True) -> None:
        """Tick exactly ``heads`` (pairs outside the grid are ignored)."""
        wanted = {(int(a), int(b)) for a, b in heads}
        for key, b in self._buttons.items():
            b.blockSignals(True)
            b.setChecked(key in wanted)
            b.blockSignals(False)
        self._update_summary()
        if emit:
            self.headsChanged.emit(self.heads())

    def use_default(self) -> None:
        """Tick the model's alignment heads."""
        self.set_heads(self._defaults)

    def use_all(self) -> None:
        """Tick every head."""
        self.set_heads(list(self._buttons))

    def summary_text(self) -> str:
        """"8 of 24 heads (default)" and the like."""
        n, total = len(self.heads()), len(self._buttons)
        if not total:
            return "no model"
        what = " (default)" if self.is_default() else " (all)" if n == total else ""
        return f"{n} of {total} heads{what}"

    # ------------------------------------------------------------ internals
    def _toggled(self, _on: bool) -> None:
        self._update_summary()
        self.headsChanged.emit(self.heads())

    def _update_summary(self) -> None:
        text = self.summary_text()
        if self._buttons and not self.heads():
            text += " — tick at least one head to time the words"
        self.summary.setText(text)
