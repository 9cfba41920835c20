"""Loading transformers seq2seq translation models (hub id or local directory).

The translation task (``core.tasks.translation``) decodes these through
``core.backends.hf.HFSeq2SeqBackend``; this module is where the transformers model and
tokenizer classes are touched (DESIGN.md: only ``core/backends`` does that). It knows the
three families' conventions, as transformers' ``generate()`` applies them:

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
from pathlib import Path
from typing import Any, Callable

FAMILIES = ("marian", "t5", "m2m100", "nllb", "other")
#: T5's task prefix when none is given (the translation task of the original checkpoints)
T5_DEFAULT_PREFIX = "translate English to German: "


class Seq2SeqLoadError(ValueError):
    """A translation model could not be found, downloaded or read (the message says what to do)."""


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


def _family(model_type: str) -> str:
    if model_type == "marian":
        return "marian"
    if model_type in ("t5", "mt5", "umt5"):
        return "t5"
    if model_type == "m2m_100":
        return "m2m100"
    if model_type == "nllb-moe":
        return "nllb"
    return "other"


def _languages(tokenizer: Any) -> list[str]:
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


def load_seq2seq(name_or_path: str, progress: Callable[[str], None] | None = None) -> LoadedSeq2Seq:
    """Load a transformers translation model by hub id or local directory.

    Args:
        name_or_path: a Hugging Face id ("Helsinki-NLP/opus-mt-en-de", "t5-small",
            "facebook/m2m100_418M", "facebook/nllb-200-distilled-600M"; needs the internet
            or the HF cache) or a directory saved with ``save_pretrained`` (model and
            tokenizer).
        progress: optional callback receiving short status strings.

    Returns:
        LoadedSeq2Seq (float32, eval mode, eager attention so cross-attention is returned).

    Raises:
        Seq2SeqLoadError: the name is neither a directory nor a hub id; the download failed
            (offline: the message says to pass a local directory); a directory is incomplete;
            the model is not an encoder-decoder.
    """
    report = progress or (lambda _m: None)
    name_or_path = str(name_or_path).strip()
    path = Path(name_or_path).expanduser()
    is_local = path.is_dir()
    if not is_local:
        looks_like_path = name_or_path.startswith((".", "/", "~")) or path.exists() or "\\" in name_or_path
        if looks_like_path:
            raise Seq2SeqLoadError(
                f"{name_or_path!r} is not a directory; pass a translation model directory saved with "
                "save_pretrained (config.json, weights and tokenizer files)."
            )
        if "/" not in name_or_path and name_or_path not in ("t5-small", "t5-base", "t5-large"):
            raise Seq2SeqLoadError(
                f"unknown translation model {name_or_path!r}: use en-pt or pt-en (bundled), a Hugging Face id "
                "such as 'Helsinki-NLP/opus-mt-en-de', or a local directory saved with save_pretrained."
            )
    source = str(path) if is_local else name_or_path
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    t0 = time.perf_counter()
    report(f"loading {name_or_path}")
    try:
        config = AutoConfig.from_pretrained(source)
        if not getattr(config, "is_encoder_decoder", False):
            raise Seq2SeqLoadError(
                f"{name_or_path} is a {config.model_type} model, not an encoder-decoder translation model; "
                "use a MarianMT, T5, M2M100 or NLLB model."
            )
        model = AutoModelForSeq2SeqLM.from_pretrained(source, attn_implementation="eager", dtype="float32")
        tokenizer = AutoTokenizer.from_pretrained(source)
    except Seq2SeqLoadError:
        raise
    except (OSError, ValueError) as exc:
        if is_local:
            raise Seq2SeqLoadError(
                f"{path} is not a complete translation model directory (config.json, weights and tokenizer "
                f"files are needed): {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            ) from exc
        raise Seq2SeqLoadError(
            f"The translation model {name_or_path!r} could not be downloaded (no internet access, or no such "
            "model on the Hugging Face Hub). Pass a local directory instead: a model saved with "
            "save_pretrained() (model + tokenizer), or use the bundled en-pt / pt-en."
        ) from exc
    model = model.float().eval()
    cfg, gen = model.config, model.generation_config
    family = _family(cfg.model_type)
    if family == "m2m100" and "nllb" in type(tokenizer).__name__.lower():
        family = "nllb"
    start = cfg.decoder_start_token_id if cfg.decoder_start_token_id is not None else gen.decoder_start_token_id
    eos = gen.eos_token_id if gen.eos_token_id is not None else cfg.eos_token_id
    if isinstance(eos, (list, tuple)):
        eos = eos[0]
    if start is None or eos is None:
        raise Seq2SeqLoadError(f"{name_or_path}: the config has no decoder_start_token_id / eos_token_id")
    suppress = {int(w[0]) for w in (gen.bad_words_ids or []) if len(w) == 1}
    suppress.update(int(t) for t in (gen.suppress_tokens or []))
    limit = getattr(cfg, "max_position_embeddings", None)
    max_new = int(limit) - 2 if family in ("marian", "m2m100", "nllb") and limit else None
    languages = _languages(tokenizer)
    display = path.name if is_local else name_or_path
    return LoadedSeq2Seq(
        model=model, tokenizer=tokenizer, name=display, family=family, decoder_start_token_id=int(start),
        eos_token_id=int(eos), pad_token_id=cfg.pad_token_id, suppress_tokens=tuple(sorted(suppress)),
        max_new_tokens=max_new, languages=languages,
        default_prefix=T5_DEFAULT_PREFIX if family == "t5" else "",
        default_target_language=getattr(tokenizer, "tgt_lang", None) if family in ("m2m100", "nllb") else None,
        load_s=time.perf_counter() - t0,
    )
