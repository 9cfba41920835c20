"""The bundled OCR reader's vocabulary and english_g2's CTC decoding.

Vocabulary (:class:`OCRVocab`): id 0 ``<pad>``, 1 ``<s>`` (start), 2 ``</s>`` (end), then
english_g2's characters in EasyOCR's order (:data:`ENGLISH_G2_CHARACTERS`). The CTC head
of english_g2 has its own classes: blank = 0, then the same characters
(:func:`ctc_greedy_decode`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from core.backends.base import DecoderPrompt, EncoderOutput

if TYPE_CHECKING:
    import torch

#: english_g2's character set, in EasyOCR's order (``easyocr/config.py``,
#: ``recognition_models['gen2']['english_g2']['characters']``). CTC blank is id 0 of
#: the CTC head, so CTC class ``i + 1`` is ``ENGLISH_G2_CHARACTERS[i]``.
ENGLISH_G2_CHARACTERS = (
    "0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \u20ac"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)


class OCRVocab:
    """Character vocabulary with three special tokens.

    Ids: 0 ``<pad>``, 1 ``<s>``, 2 ``</s>``, then one id per character.

    Args:
        characters: the characters, each exactly once.

    Raises:
        ValueError: if ``characters`` is empty or repeats a character.
    """

    PAD, BOS, EOS = 0, 1, 2
    SPECIALS = ("<pad>", "<s>", "</s>")

    def __init__(self, characters: str = ENGLISH_G2_CHARACTERS):
        if not characters:
            raise ValueError("OCRVocab needs at least one character.")
        if len(set(characters)) != len(characters):
            raise ValueError("OCRVocab characters must be unique; got duplicates.")
        self.characters = characters
        self._id = {c: i + len(self.SPECIALS) for i, c in enumerate(characters)}

    def __len__(self) -> int:
        return len(self.SPECIALS) + len(self.characters)

    def __contains__(self, char: str) -> bool:
        return char in self._id

    def encode(self, text: str, add_special: bool = True) -> list[int]:
        """Token ids of ``text``: ``[<s>] + chars + [</s>]`` when ``add_special``.

        Raises:
            ValueError: if ``text`` contains a character outside the vocabulary.
        """
        missing = sorted({c for c in text if c not in self._id})
        if missing:
            raise ValueError(
                f"Text contains characters the OCR vocabulary lacks: {missing!r}; "
                "remove or replace them (the vocabulary is english_g2's characters)."
            )
        ids = [self._id[c] for c in text]
        return [self.BOS, *ids, self.EOS] if add_special else ids

    def token_text(self, token_id: int) -> str:
        """Display text of one id (special tokens as ``<s>`` etc.).

        Raises:
            ValueError: if the id is out of range.
        """
        if not 0 <= token_id < len(self):
            raise ValueError(f"Token id {token_id} is outside the vocabulary (0..{len(self) - 1}).")
        if token_id < len(self.SPECIALS):
            return self.SPECIALS[token_id]
        return self.characters[token_id - len(self.SPECIALS)]

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``; special tokens are skipped, decoding stops at none."""
        n = len(self.SPECIALS)
        return "".join(self.characters[i - n] for i in map(int, token_ids) if n <= i < len(self))

    def to_json(self) -> dict:
        """JSON-serialisable description (written as ``vocab.json``)."""
        return {"specials": list(self.SPECIALS), "characters": self.characters}

    @classmethod
    def from_json(cls, data: dict) -> "OCRVocab":
        """Inverse of :meth:`to_json`.

        Raises:
            ValueError: if the special tokens differ from this class's.
        """
        if list(data.get("specials", [])) != list(cls.SPECIALS):
            raise ValueError(f"vocab.json specials {data.get('specials')} != {list(cls.SPECIALS)}.")
        return cls(data["characters"])


def ctc_greedy_decode(ctc_logits: torch.Tensor, characters: str = ENGLISH_G2_CHARACTERS) -> list[str]:
    """Best-path CTC decoding (Graves et al. 2006): argmax per column, merge repeats,
    drop blanks (id 0). ``ctc_logits`` float32 (B, T, len(characters) + 1)."""
    best = ctc_logits.argmax(-1)
    texts = []
    for row in best.tolist():
        prev, chars = 0, []
        for k in row:
            if k != prev and k != 0:
                chars.append(characters[k - 1])
            prev = k
        texts.append("".join(chars))
    return texts


def bundled_prompt(encoded: EncoderOutput) -> DecoderPrompt:
    """The bundled reader's decoder prompt for a line of ``encoded.source_len`` encoder columns:
    ``<s>``, ``</s>`` ends, ``<pad>`` and ``<s>`` suppressed, at most ``source_len + 8`` characters."""
    return DecoderPrompt(prompt_ids=(OCRVocab.BOS,), eos_token_id=OCRVocab.EOS,
                         suppress_tokens=(OCRVocab.PAD, OCRVocab.BOS),
                         max_new_tokens=int(encoded.source_len) + 8)
