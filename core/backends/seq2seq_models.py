"""Transformers seq2seq translation models (hub id or local directory): their conventions.

:func:`load_seq2seq` loads one into a :class:`LoadedSeq2Seq`; the translation
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

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from core.backends.hub import Seq2SeqLoadError, from_pretrained, resolve, start_and_eos
from core.catalog import TRANSLATION_BUNDLED

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


def load_seq2seq(name_or_path: str, progress: Callable[[str], None] | None = None):
    """Load a transformers translation model by hub id or local directory.

    Args:
        name_or_path: a Hugging Face id ("Helsinki-NLP/opus-mt-en-de", "t5-small",
            "facebook/m2m100_418M", "facebook/nllb-200-distilled-600M"; needs the internet
            or the HF cache) or a directory saved with ``save_pretrained`` (model and
            tokenizer).
        progress: optional callback receiving short status strings.

    Returns:
        ``LoadedSeq2Seq`` (float32, eval mode, eager attention).

    Raises:
        Seq2SeqLoadError: the name is neither a directory nor a hub id; the download failed
            (offline: the message says to pass a local directory); a directory is incomplete;
            the model is not an encoder-decoder.
    """
    report = progress or (lambda _m: None)
    name = resolve(
        name_or_path, Seq2SeqLoadError,
        not_a_directory="{name} is not a directory; pass a translation model directory saved with "
                        "save_pretrained (config.json, weights and tokenizer files).",
        unknown=f"unknown translation model {{name}}: use {' or '.join(TRANSLATION_BUNDLED)} (bundled), a Hugging "
                "Face id such as 'Helsinki-NLP/opus-mt-en-de', or a local directory saved with save_pretrained.",
        is_hub_id=lambda n: "/" in n or n in ("t5-small", "t5-base", "t5-large"),
    )
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    t0 = time.perf_counter()
    report(f"loading {name.given}")

    def load(source: str):
        config = AutoConfig.from_pretrained(source)
        if not getattr(config, "is_encoder_decoder", False):
            raise Seq2SeqLoadError(
                f"{name.given} is a {config.model_type} model, not an encoder-decoder translation model; "
                "use a MarianMT, T5, M2M100 or NLLB model."
            )
        model = AutoModelForSeq2SeqLM.from_pretrained(source, attn_implementation="eager", dtype="float32")
        return model, AutoTokenizer.from_pretrained(source)

    model, tokenizer = from_pretrained(name, Seq2SeqLoadError, load, kind="translation",
                                       files="config.json, weights and tokenizer files",
                                       otherwise=f"use the bundled {' / '.join(TRANSLATION_BUNDLED)}")
    model = model.float().eval()
    cfg, gen = model.config, model.generation_config
    family = family_of(cfg.model_type, tokenizer)
    start, eos = start_and_eos(name.given, Seq2SeqLoadError, cfg, gen, cfg.eos_token_id)
    suppress = {int(w[0]) for w in (gen.bad_words_ids or []) if len(w) == 1}
    suppress.update(int(t) for t in (gen.suppress_tokens or []))
    limit = getattr(cfg, "max_position_embeddings", None)
    many = family in ("m2m100", "nllb")
    return LoadedSeq2Seq(
        model=model, tokenizer=tokenizer, name=name.display, family=family, decoder_start_token_id=start,
        eos_token_id=eos, pad_token_id=cfg.pad_token_id, suppress_tokens=tuple(sorted(suppress)),
        max_new_tokens=int(limit) - 2 if family in ("marian", "m2m100", "nllb") and limit else None,
        languages=languages_of(tokenizer),
        default_prefix=T5_DEFAULT_PREFIX if family == "t5" else "",
        default_target_language=getattr(tokenizer, "tgt_lang", None) if many else None,
        load_s=time.perf_counter() - t0,
    )
