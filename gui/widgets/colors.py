"""One sequential colormap (viridis) with fixed levels 0..1 for probabilities and attention."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

#: the colormap every view uses, so a colour means the same number everywhere
COLORMAP = pg.colormap.get("viridis")
#: (256, 4) uint8 RGBA lookup table for ImageItem.setLookupTable
LUT = COLORMAP.getLookupTable(0.0, 1.0, 256, alpha=True)


def prob_color(p: float) -> QColor:
    """Viridis colour of a probability ``p`` (clipped to 0..1)."""
    if not np.isfinite(p):
        p = 0.0
    r, g, b, a = LUT[int(round(min(max(p, 0.0), 1.0) * 255))]
    return QColor(int(r), int(g), int(b), int(a))


def text_color_on(bg: QColor) -> QColor:
    """Black or white, whichever reads better on ``bg`` (relative luminance > 0.45 -> black)."""
    lum = (0.2126 * bg.redF() + 0.7152 * bg.greenF() + 0.0722 * bg.blueF())
    return QColor(0, 0, 0) if lum > 0.45 else QColor(255, 255, 255)
