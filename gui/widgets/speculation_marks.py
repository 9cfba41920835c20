"""How speculative decoding's tokens are marked (issue 21): one colour-blind-safe scheme
(Okabe & Ito 2008 colours) where the *shape* carries the meaning and the colour repeats it,
so the marks read without colour too:

- **accepted** — a drafted token the target kept: a blue line under the chip;
- **resampled** — the target rejected the draft here and chose this token itself (from
  norm(max(0, p − q)) under sampling, its argmax under greedy verification): a vermillion
  outline around the chip;
- **bonus** — every drafted token was accepted and this one came from p alone: a
  reddish-purple corner flag;
- **rejected** — the drafted token the target refused, shown as a hollow ghost chip with
  its text struck through, right after the token the target put in its place.

The painting helpers here draw on a chip's rectangle; the token chips
(``gui.widgets.token_flow``), their legend in the stream's header and the Speculation tab
(``gui.widgets.speculation_view``) share them, so a mark means the same everywhere.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QPolygon

from core.events import DraftToken, SpeculationRound, StepEvent

#: the marks' colours (Okabe & Ito): blue, vermillion, reddish purple
MARK_COLORS = {"accepted": "#0072B2", "resampled": "#D55E00", "bonus": "#CC79A7", "rejected": "#D55E00"}

#: what each mark means (tooltips, the legend)
MARK_HELP = {
    "accepted": "accepted (blue underline): the draft proposed this token and the target accepted it "
    "(u < p/q; under greedy verification: it is the target's argmax)",
    "resampled": "resampled (vermillion outline): the target rejected the drafted token here and chose this one "
    "itself, from norm(max(0, p − q)) (greedy verification: its argmax)",
    "bonus": "bonus (purple corner flag): every drafted token of the round was accepted and the target added this "
    "one from p alone",
    "rejected": "rejected (struck through, hollow): a drafted token the target refused; the token before it is "
    "what the target emitted at that position",
}


#: the tooltip line of a token from a near-tie round (greedy verification)
NEAR_TIE_NOTE = ("near-tie (dotted line above): the target's top-2 logits were less than 1e-4 apart in this round; "
                 "scoring several positions in one call may pick another token than single steps would")


def draw_near_tie(p: QPainter, rect: QRect) -> None:
    """A dotted line above a chip: its round's verification was a near-tie."""
    pen = QPen(QColor("black"), 1.5, Qt.PenStyle.DotLine)
    p.setPen(pen)
    p.drawLine(rect.left() + 2, rect.top() - 2, rect.right() - 2, rect.top() - 2)


def draw_mark(p: QPainter, rect: QRect, kind: str) -> None:
    """Draw the mark of ``kind`` ("accepted" | "resampled" | "bonus"; anything else: none)
    on a chip at ``rect`` (after its fill and text)."""
    if kind == "accepted":  # a line under the chip, in the gap below it
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(MARK_COLORS["accepted"]))
        p.drawRect(QRect(rect.left() + 1, rect.bottom() + 1, rect.width() - 2, 2))
    elif kind == "resampled":
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(QColor(MARK_COLORS["resampled"]), 2))
        p.drawRoundedRect(rect.adjusted(1, 1, -1, -1), 3, 3)
    elif kind == "bonus":
        s = max(6, rect.height() // 3)
        tri = QPolygon([QPoint(rect.right() - s, rect.top()), QPoint(rect.right(), rect.top()),
                        QPoint(rect.right(), rect.top() + s)])
        p.setPen(QPen(QColor("white"), 1))
        p.setBrush(QColor(MARK_COLORS["bonus"]))
        p.drawPolygon(tri)


def draw_ghost(p: QPainter, rect: QRect, text: str, text_color: QColor) -> None:
    """A rejected draft token: a hollow dashed chip, its text in ``text_color`` struck
    through in vermillion."""
    p.setBrush(Qt.BrushStyle.NoBrush)
    pen = QPen(text_color, 1, Qt.PenStyle.DashLine)
    p.setPen(pen)
    p.drawRoundedRect(rect.adjusted(0, 0, -1, -1), 4, 4)
    p.setPen(text_color)
    p.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
    p.setPen(QPen(QColor(MARK_COLORS["rejected"]), 1.5))
    y = rect.center().y() + 1
    p.drawLine(rect.left() + 3, y, rect.right() - 3, y)


def rejected_token(r: SpeculationRound) -> DraftToken | None:
    """The drafted token the target judged and refused in round ``r`` (at position
    ``r.n_accepted`` of the draft), or None (all accepted, or nothing drafted)."""
    for t in r.drafted:
        if t.judged and not t.accepted:
            return t
    return None


def draft_line(t: DraftToken) -> str:
    """One drafted token's numbers: ``' cat'  q 0.80  p 0.20  min(1, p/q) 0.25  u 0.70``."""
    u = "–" if t.u is None else f"{t.u:.2f}"
    return f"{t.text!r}  q {t.q:.3f}  p {t.p:.3f}  min(1, p/q) {t.ratio:.3f}  u {u}"


def ghost_tooltip(r: SpeculationRound, t: DraftToken) -> str:
    """The tooltip of round ``r``'s rejected draft token ``t``."""
    instead = (f"the target chose {r.emitted_text!r} here instead" if r.emitted_id is not None
               else "the target ended the text here instead (end of text)")
    lines = [f"rejected draft token {t.text!r} (round {r.round}, step {r.step + r.n_accepted})", draft_line(t),
             instead, "", MARK_HELP["rejected"]]
    later = [d.text for d in r.drafted if not d.judged]
    if later:
        lines.insert(3, "not judged after it: " + " ".join(repr(x) for x in later))
    return "\n".join(lines)


def step_mark_line(ev: StepEvent) -> str:
    """The tooltip line explaining ``ev``'s speculation mark ("" for a plain token)."""
    if not ev.speculation:
        return ""
    return f"speculative round {ev.spec_round}: {MARK_HELP.get(ev.speculation, ev.speculation)}"


def legend_html() -> str:
    """The marks as one short line of rich text (under the token stream's chips; its tooltip,
    :func:`legend_tooltip`, defines them)."""
    c = MARK_COLORS
    return (
        "speculative decoding: "
        f"<span style='color:{c['accepted']}; text-decoration: underline'>accepted</span> "
        f"<span style='color:{c['resampled']}'>[resampled]</span> "
        f"<span style='color:{c['bonus']}'>◥bonus</span> "
        f"<span style='color:{c['rejected']}; text-decoration: line-through'>rejected</span>"
    )


def legend_tooltip() -> str:
    """Every mark's definition, one per line."""
    return "Speculative decoding's marks:\n" + "\n".join(f"• {MARK_HELP[k]}" for k in MARK_HELP)
