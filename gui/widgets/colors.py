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


# ------------------------------------------------------------------ token colouring modes
#: how the token stream colours its chips (``chip_color``)
COLOR_MODES = ("probability", "rank", "entropy")
#: GLTR's rank buckets (Gehrmann et al. 2019): the chosen token was the model's favourite,
#: in its top 10, its top 100, or further down (upper rank bound, label)
RANK_BUCKETS = ((1, "top-1"), (10, "top-10"), (100, "top-100"), (None, "beyond 100"))
#: viridis level of each rank bucket: bright = the model's favourite, as in probability mode
RANK_LEVELS = (1.0, 0.62, 0.3, 0.0)
#: raw entropy (nats) at which the entropy colouring saturates (fixed, so a colour means
#: the same entropy in every run)
ENTROPY_SCALE = 4.0

#: Okabe & Ito (2008) colour-blind-safe colours for the step strip's curves
SERIES_COLORS = {
    "entropy": "#0072B2",  # blue
    "varentropy": "#E69F00",  # orange
    "kept": "#009E73",  # bluish green
    "mu": "#CC79A7",  # reddish purple
    "ms": "#999999",  # grey: the decoder's ms per step (StepEvent.time_ms)
}
#: the sampled-picks outline over the top-k bars (Okabe & Ito vermillion)
SAMPLE_COLOR = "#D55E00"


def rank_bucket(rank: int) -> int:
    """Index into ``RANK_BUCKETS`` of a 1-based rank (0 = top-1 … 3 = beyond 100)."""
    for i, (bound, _label) in enumerate(RANK_BUCKETS):
        if bound is not None and rank <= bound:
            return i
    return len(RANK_BUCKETS) - 1


def rank_color(rank: int) -> QColor:
    """Viridis colour of a rank bucket: yellow for top-1 down to dark purple beyond 100."""
    return prob_color(RANK_LEVELS[rank_bucket(rank)])


def entropy_level(entropy: float) -> float:
    """0..1 colour level of a raw entropy (nats): 1 = certain (0 nats), 0 = ``ENTROPY_SCALE`` or more."""
    if not np.isfinite(entropy):
        return 0.0
    return 1.0 - min(max(entropy / ENTROPY_SCALE, 0.0), 1.0)


def entropy_color(entropy: float) -> QColor:
    """Viridis colour of a raw entropy: bright when the model was sure, dark when it hesitated
    (the same direction as probability mode)."""
    return prob_color(entropy_level(entropy))
