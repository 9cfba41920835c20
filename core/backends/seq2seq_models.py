"""Transformers seq2seq translation models (hub id or local directory): their conventions.

``core.backends.hub.load_seq2seq`` loads one into a :class:`LoadedSeq2Seq`; the translation
task (``core.tasks.translation``) decodes it through ``core.backends.hf.HFSeq2SeqBackend``.
This module knows the three families' conventions, as transformers' ``generate()`` applies
them:

- MarianMT (Helsinki-NLP/opus-mt-*; Junczys-Dowmunt et al. 2018): source ``... </s>``,
  the decoder starts from ``decoder_start_token_id`` (= the pad id); the checkpoints'
  ``generation_config.bad_words_ids = [[pad]]`` is applied as a suppressed token.
- T5 (Raffel et al. 2020): the task is a text prefix on the source
  ("translate English to German: "), decoder start = pad (0).
- M2M100 / NLLB (Fan et al. 2020; NLLB Team 2022): the source starts with the source
  language token (the tokenizer's ``src_lang``), the decoder prompt is
  ``[decoder_start, target language token]`` (``generate(forced_bos_token_id=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.backends.hub import Seq2SeqLoadError, load_seq2seq  # noqa: F401  (re-exported: their old home)

FAMILIES = ("marian", "t5", "m2m100", "nllb", "other")
#: T5's task prefix when none is given (the translation task of the original checkpoints)
T5_DEFAULT_PREFIX = "translate English to German: "


@dataclass
class LoadedSeq2Seq:
    """A transformers translation model with its tokenizer and generation conventions.

    Attributes:
        model: the ``*ForConditionalGeneration`` model, float32, eval mode.
        tokenizer: its tokenizer.
        name: display name (hub id, or the directory's name).
        family: one of ``FAMILIES`` (from ``config.model_type``).
        decoder_start_token_id: first decoder input id.
        eos_token_id: generation ends on this id.
        pad_token_id: padding id (or None).
        suppress_tokens: ids never generated (single-token ``bad_words_ids`` of the
            generation config, plus its ``suppress_tokens``).
        max_new_tokens: the model's limit on decoder positions minus the prompt, or None.
        languages: language codes the tokenizer knows (M2M100 "pt", NLLB "por_Latn");
            empty for single-pair models.
        default_prefix: source text prefix used when the caller gives none
            (T5: ``T5_DEFAULT_PREFIX``; others "").
        default_target_language: the target language used when the caller gives none
            (the tokenizer's ``tgt_lang`` for M2M100/NLLB), or None.
        load_s: seconds the load took.
    """

    model: Any
    tokenizer: Any
    name: str
    family: str
    decoder_start_token_id: int
    eos_token_id: int
    pad_token_id: int | None
    suppress_tokens: tuple[int, ...] = ()
    max_new_tokens: int | None = None
    languages: list[str] = field(default_factory=list)
    default_prefix: str = ""
    default_target_language: str | None = None
    load_s: float = 0.0

    @property
    def needs_target_language(self) -> bool:
        """True for many-to-many models (M2M100, NLLB): the target language is a forced token."""
        return self.family in ("m2m100", "nllb")

    def lang_token_id(self, code: str) -> int:
        """The id of the language token for ``code`` ("pt" -> ``__pt__`` for M2M100,
        "por_Latn" for NLLB).

        Raises:
            ValueError: the tokenizer has no such language (the message lists some it has).
        """
        tok = self.tokenizer
        shown = ", ".join(self.languages[:30]) + (", ..." if len(self.languages) > 30 else "")
        if self.languages and code not in self.languages:
            raise ValueError(f"{self.name} has no language {code!r}; choose one of: {shown}")
        candidate = f"__{code}__" if self.family == "m2m100" else code  # NLLB: "por_Latn" is the token
        tid = tok.convert_tokens_to_ids(candidate)
        if isinstance(tid, int) and tid != tok.unk_token_id:
            return tid
        raise ValueError(f"{self.name} has no language {code!r}; choose one of: {shown or '(none listed)'}")

    def set_source_language(self, code: str | None) -> None:
        """Make the tokenizer put ``code``'s language token before the source (M2M100/NLLB).

        Raises:
            ValueError: unknown language, or a model without source languages.
        """
        if code is None:
            return
        if not self.needs_target_language:
            raise ValueError(f"{self.name} ({self.family}) takes no source language; leave it out")
        self.lang_token_id(code)  # raises for an unknown code
        self.tokenizer.src_lang = code

    def source_ids(self, text: str) -> tuple[list[int], list[int], list[int]]:
        """Tokenise ``text`` (one sentence, prefix already added) for the encoder.

        Returns:
            (leading special ids, content ids, trailing special ids): the tokenizer's
            full input is ``leading + content + trailing`` (e.g. M2M100 ``[__en__] ...
            [</s>]``), so a long sentence can be cut in content pieces that each keep
            the special tokens.
        """
        tok = self.tokenizer
        full = list(tok(text).input_ids)
        content = list(tok(text, add_special_tokens=False).input_ids)
        n = len(content)
        for p in range(len(full) - n + 1):
            if full[p : p + n] == content:
                return full[:p], content, full[p + n :]
        return [], full, []  # tokenizers that merge across the special tokens: no cutting

    def pieces(self, ids: list[int]) -> list[str]:
        """Tokenizer pieces of ``ids`` (SentencePiece "▁word", special tokens as-is)."""
        return [str(p) for p in self.tokenizer.convert_ids_to_tokens(list(ids))]


def family_of(model_type: str, tokenizer: Any) -> str:
    """One of ``FAMILIES`` from ``config.model_type`` (an M2M100 model with an NLLB
    tokenizer is NLLB)."""
    if model_type == "marian":
        return "marian"
    if model_type in ("t5", "mt5", "umt5"):
        return "t5"
    if model_type == "m2m_100":
        return "nllb" if "nllb" in type(tokenizer).__name__.lower() else "m2m100"
    if model_type == "nllb-moe":
        return "nllb"
    return "other"


def languages_of(tokenizer: Any) -> list[str]:
    """The language codes a many-to-many tokenizer knows ([] for single-pair models)."""
    codes = getattr(tokenizer, "lang_code_to_id", None) or getattr(tokenizer, "lang_code_to_token", None)
    if codes:
        return list(codes)
    out = []
    for t in getattr(tokenizer, "additional_special_tokens", None) or []:
        t = str(t)
        if t.startswith("__") and t.endswith("__") and len(t) > 4:
            out.append(t[2:-2])
        elif len(t) == 8 and t[3] == "_":  # NLLB: por_Latn
            out.append(t)
    return out
