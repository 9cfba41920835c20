"""Review findings on core.streaming (issue 23): token texts after a committed prefix that ends
inside a character."""

from __future__ import annotations

from core.streaming.decoder import WhisperDecoder

#: token id -> bytes (a byte-level BPE as Whisper's: a CJK character may span two tokens)
PIECES = {1: b"hello ", 2: "字".encode()[:2], 3: "字".encode()[2:], 4: b" ok"}


class _Backend:
    @staticmethod
    def decode(ids):
        return b"".join(PIECES[i] for i in ids).decode("utf-8", errors="replace")


class _Model:
    backend = _Backend()


def _decoder() -> WhisperDecoder:
    dec = WhisperDecoder.__new__(WhisperDecoder)
    dec.model = _Model()
    return dec


def test_token_texts_after_a_prefix_that_ends_inside_a_character():
    """AlignAtt (and fixed-window) commit every emitted token, so the committed tokens forced
    into the next decode may end inside a character: the token completing it has the
    character's text, not the whole buffer's committed text again."""
    texts = _decoder()._texts([1, 2], [3, 4])
    assert texts == ["字", " ok"], texts


def test_token_texts_of_a_character_split_over_new_tokens():
    texts = _decoder()._texts([1], [2, 3, 4])
    assert texts == ["", "字", " ok"], texts
