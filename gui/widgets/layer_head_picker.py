"""The two boxes that pick which decoder layer and attention head a view of cross-attention
shows ("average": the mean over them); the heatmap's header holds them."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

AVERAGE = "average"


class LayerHeadPicker:
    """A layer box and a head box (:attr:`layer_combo`, :attr:`head_combo`), each listing
    "average" then the indices once the model's shape is known (:meth:`ensure`)."""

    def __init__(self) -> None:
        self.layer_combo = QComboBox()
        self.head_combo = QComboBox()
        self.shape: tuple[int, int] | None = None  # (layers, heads) listed
        for c, what in ((self.layer_combo, "decoder layer"), (self.head_combo, "attention head")):
            c.addItem(AVERAGE)
            c.setToolTip(f"{what} whose cross-attention is shown ('average' = mean over all)")

    def ensure(self, layers: int, heads: int) -> None:
        """List ``layers`` layers and ``heads`` heads (no signal; a pick beyond them falls
        back to "average")."""
        if self.shape == (layers, heads):
            return
        self.shape = (layers, heads)
        for combo, n in ((self.layer_combo, layers), (self.head_combo, heads)):
            cur = combo.currentIndex()
            combo.blockSignals(True)
            combo.clear()
            combo.addItem(AVERAGE)
            combo.addItems([str(i) for i in range(n)])
            combo.setCurrentIndex(cur if 0 <= cur <= n else 0)
            combo.blockSignals(False)

    def pick(self, layer: int | None, head: int | None) -> None:
        """Pick ``layer`` and ``head`` (None: the average), as the user would."""
        self.layer_combo.setCurrentIndex(0 if layer is None else layer + 1)
        self.head_combo.setCurrentIndex(0 if head is None else head + 1)

    def selection(self) -> tuple[int | None, int | None]:
        """(layer, head) picked; None means averaged."""
        li, hi = self.layer_combo.currentIndex(), self.head_combo.currentIndex()
        return (None if li <= 0 else li - 1, None if hi <= 0 else hi - 1)
