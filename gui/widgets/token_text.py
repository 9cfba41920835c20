"""How a token's text is shown: on its chip (:func:`display_text`) and in the running text
(:func:`live_text`). Plain strings in, plain strings out (no Qt).
"""

from __future__ import annotations

import codecs
import re
from typing import Callable


def display_text(text: str) -> str:
    """How a token's text is drawn on its chip: leading space dropped, whitespace made visible."""
    shown = text[1:] if text.startswith(" ") else text
    shown = shown.replace("\n", "↵").replace("\t", "⇥")
    if shown == "":
        return "␣" if text else "∅"
    if shown.strip() == "":
        return "␣" * len(shown)
    return shown


def _hex_bytes(err: UnicodeDecodeError) -> tuple[str, int]:
    return "".join(f"<0x{b:02X}>" for b in err.object[err.start:err.end]), err.end


codecs.register_error("decoding_explorer_hexbytes", _hex_bytes)


def byte_text(text: str, raw: bytes | None) -> str:
    """``text`` of a token, readable where it is part of a multi-byte UTF-8 character: with
    its raw bytes ``raw`` (a byte-level BPE token's, or None when unknown) and a "\ufffd" in
    the text, the bytes that are no whole character are written as ``<0xE2><0x80>`` (as
    llama.cpp and HF tokenizers' byte fallback show them), the rest as text. Otherwise
    ``text`` unchanged."""
    if raw is None or "\ufffd" not in text:
        return text
    return raw.decode("utf-8", errors="decoding_explorer_hexbytes")


def readable_text(token_bytes: Callable[[int], bytes | None] | None, token_id: int, text: str) -> str:
    """:func:`byte_text` of a token, its bytes asked of ``token_bytes`` (None: ``text``) only
    when the text has a "\ufffd"; a failing lookup leaves ``text``."""
    if token_bytes is None or "\ufffd" not in text:
        return text
    try:
        return byte_text(text, token_bytes(int(token_id)))
    except Exception:  # noqa: BLE001 - a tokenizer that cannot say: the text as it was
        return text


#: a whisper timestamp token's text ("<|3.80|>")
_TIMESTAMP = re.compile(r"<\|\d+(?:\.\d+)?\|>")


def live_text(token_texts: list[str]) -> str:
    """Detokenised text of token display texts: SentencePiece's word-start mark ``▁``
    becomes a space (so the text wraps at words) and whisper's timestamp tokens
    ("<|3.80|>") are left out, as in the final text; nothing else changes."""
    return "".join(t for t in token_texts if not _TIMESTAMP.fullmatch(t)).replace("▁", " ")
