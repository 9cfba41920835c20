"""The clicked beam-tree node's details: its hypothesis (the path's text, its own token
underlined), its numbers, the top-k of the beam row it was chosen from at its step (the
existing top-k chart) and that row's cross-attention averaged over layers and heads (a
strip of viridis cells scaled to its maximum, as the heatmap's rows are).
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QTextDocument
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from core.events import BeamNode, BeamRowReport, StepEvent

from .colors import prob_color
from .layouts import vbox
from .token_text import live_text
from .topk_chart import TopKChart

HINT = "Click a node to see its hypothesis, top-k and cross-attention."


class AttentionStrip(QWidget):
    """One cross-attention row (float32 (source_len,)) as a strip of viridis cells, scaled so
    its maximum is 1 (as the heatmap's rows), with the peak named below it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._row: np.ndarray | None = None
        self._labels: list[str] | None = None
        self._unit, self._scale, self._offset = "column", 1.0, 0
        self.setMinimumHeight(40)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(300, 44)

    def set_row(self, row: np.ndarray | None, labels: list[str] | None = None, unit: str = "column",
                scale: float = 1.0, offset: int = 0) -> None:
        """Show ``row`` (None: empty); ``labels`` name the columns (e.g. source tokens), else the
        peak is told as ``(offset + column) * scale`` in ``unit``."""
        self._row = None if row is None else np.asarray(row, dtype=np.float32).reshape(-1)
        self._labels, self._unit, self._scale, self._offset = labels, unit, float(scale), int(offset)
        self.setToolTip(f"the cross-attention of the row the node came from, averaged over layers and heads "
                        f"and scaled to its maximum; columns: {unit}")
        self.update()

    def row(self) -> np.ndarray | None:
        return self._row

    def peak_text(self) -> str:
        """Where the row peaks, for people ("" when empty)."""
        row = self._row
        if row is None or not row.size:
            return ""
        i = int(np.argmax(row))
        col = self._offset + i
        if self._labels is not None and 0 <= col < len(self._labels):
            where = repr(self._labels[col])
        elif self._scale != 1.0:
            where = f"{col * self._scale:.2f} (column {col})"
        else:
            where = f"column {col}"
        return f"attention peak: {where}"

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        fm = p.fontMetrics()
        w, h = self.width(), self.height()
        bar_h = max(8, h - fm.height() - 4)
        row = self._row
        if row is None or not row.size:
            p.setPen(self.palette().placeholderText().color())
            p.drawText(QRectF(0, 0, w, h), Qt.AlignmentFlag.AlignCenter, "cross-attention of the clicked node")
            p.end()
            return
        m = float(row.max())
        levels = row / m if m > 0 else row
        cw = w / len(levels)
        p.setPen(Qt.PenStyle.NoPen)
        for i, v in enumerate(levels):  # at most a few thousand cells, painted on demand
            p.setBrush(prob_color(float(v)))
            p.drawRect(QRectF(i * cw, 0, cw + 0.5, bar_h))
        p.setPen(self.palette().windowText().color())
        p.drawText(QRectF(2, bar_h + 2, w - 4, fm.height()), Qt.AlignmentFlag.AlignLeft,
                   fm.elidedText(self.peak_text(), Qt.TextElideMode.ElideRight, w - 4))
        p.end()


class NodeDetails(QWidget):
    """Hypothesis text, numbers, top-k and attention of one node (``show_node``); a hint when none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.hypothesis_label = QLabel(HINT)
        self.hypothesis_label.setWordWrap(True)
        self.hypothesis_label.setTextFormat(Qt.TextFormat.RichText)
        self.hypothesis_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hypothesis_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.hypothesis_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.info_label = QLabel()
        self.info_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.info_label.setWordWrap(True)  # "… · normalised -0.035 · best: the output" was cut even at 1920 px
        self.topk = TopKChart(limit=8)
        self.topk.setMinimumSize(220, 110)
        self.attention = AttentionStrip()
        vbox(self.hypothesis_label, self.info_label, (self.topk, 1), self.attention, margins=(4, 2, 4, 2), spacing=2,
             parent=self)
        # wide enough for the top-k chart's legend ("raw (softmax of logits)  processed (after
        # filters)"), which was cut at 1280 x 800 (issue 19 §6)
        fm = self.topk.fontMetrics()
        legend = (6 + 26 + fm.horizontalAdvance("raw (softmax of logits)") + 12 + 22
                  + fm.horizontalAdvance("processed (after filters)") + 6)
        self.topk.setMinimumWidth(max(260, legend))
        self.setMinimumWidth(max(280, legend + 8))
        self._set_node_shown(False)

    def _set_node_shown(self, shown: bool) -> None:
        """The chart and the strip only with a node (without one, the hint alone: the chart's
        own placeholder speaks of tokens and did not fit)."""
        self.topk.setVisible(shown)
        self.attention.setVisible(shown)

    def show_node(self, node: BeamNode | None, texts: list[str] = (), report: BeamRowReport | None = None,
                  axis: tuple[list[str] | None, str, float] = (None, "column", 1.0), source_offset: int = 0,
                  best: bool = False, n_columns: int = 0) -> None:
        """Show ``node`` (None or the root: the hint): ``texts`` are the token texts of its path
        after the root, ``report`` its row's report at its step, ``axis`` the input's columns
        (labels, unit, units per column), ``source_offset`` where its segment's start and
        ``n_columns`` how many the input has (0: unknown; the attention is cut there)."""
        if node is None or node.parent is None:
            self.hypothesis_label.setText(HINT)
            self.info_label.setText("")
            self.info_label.setToolTip("")
            self.topk.set_step(None)
            self.attention.set_row(None)
            self._set_node_shown(False)
            return
        self._set_node_shown(True)
        before = live_text(list(texts[:-1])).lstrip()
        last = live_text(list(texts[-1:]))
        gap = " " if before and last[:1].isspace() else ""  # the word's space stays outside the underline
        self.hypothesis_label.setText(f"{_html(before)}{gap}<b><u>{_html(last.strip() or last)}</u></b>")
        info = node_info(node, best)
        self.info_label.setText(info)
        self.info_label.setToolTip(info.replace(" · ", "\n"))
        self.topk.set_step(_step_event(node, report))
        labels, unit, scale = axis
        att = report.attention if report is not None else None
        if att is not None and n_columns > source_offset:
            att = att[: n_columns - source_offset]
        self.attention.set_row(att, labels, unit, scale, source_offset)

    def hypothesis_shown(self) -> str:
        """The hypothesis as shown (plain text)."""
        doc = QTextDocument()
        doc.setHtml(self.hypothesis_label.text())
        return doc.toPlainText()


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def node_info(node: BeamNode, best: bool = False) -> str:
    p = math.exp(node.logprob) if math.isfinite(node.logprob) else 0.0
    parts = [f"step {node.step}", node.status + (" (EOS)" if node.eos else ""), f"row {node.row}",
             f"p {p:.3f}", f"log p {node.logprob:.3f}", f"score {node.score:.3f}",
             f"normalised {node.normalized:.3f}"]
    if node.group:
        parts.append(f"group {node.group}")
    if best:
        parts.append("best: the output")
    return " · ".join(parts)


def _step_event(node: BeamNode, report: BeamRowReport | None) -> StepEvent | None:
    """The top-k chart's view of a node: the distribution of the row it came from at its step
    (processed, the raw one behind it), with the node's token as the chosen one."""
    if report is None:
        return None
    p = math.exp(node.logprob) if math.isfinite(node.logprob) else 0.0
    topk = list(report.topk)
    raw_topk = list(report.raw_topk) or topk
    raw_p = next((t.prob for t in raw_topk if t.id == node.token), 0.0)
    return StepEvent(step=node.step, token_id=node.token, text=node.text, prob=p, raw_prob=raw_p, topk=topk,
                     raw_topk=raw_topk, entropy=float(report.entropy))
