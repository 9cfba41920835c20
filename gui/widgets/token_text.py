"""How a token's text is shown: on its chip (:func:`display_text`) and in the running text
(:func:`live_text`). Plain strings in, plain strings out (no Qt).
"""

from __future__ import annotations

import re


def display_text(text: str) -> str:
    """How a token's text is drawn on its chip: leading space dropped, whitespace made visible."""
    shown = text[1:] if text.startswith(" ") else text
    shown = shown.replace("\n", "↵").replace("\t", "⇥")
    if shown == "":
        return "␣" if text else "∅"
    if shown.strip() == "":
        return "␣" * len(shown)
    return shown


#: a whisper timestamp token's text ("<|3.80|>")
_TIMESTAMP = re.compile(r"<\|\d+(?:\.\d+)?\|>")


def live_text(token_texts: list[str]) -> str:
    """Detokenised text of token display texts: SentencePiece's word-start mark ``▁``
    becomes a space (so the text wraps at words) and whisper's timestamp tokens
    ("<|3.80|>") are left out, as in the final text; nothing else changes."""
    return "".join(t for t in token_texts if not _TIMESTAMP.fullmatch(t)).replace("▁", " ")
