"""Whisper's special tokens and its tokenizer, read from a Hugging Face ``tokenizer.json``
(what the CTranslate2 packages ship; ``core.backends.whisper_ct2`` converts their weights).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from core.backends.ct2_format import CT2FormatError

_TIMESTAMP_STEP_S = 0.02
_LANG_TOKEN = re.compile(r"^<\|([a-z]{2,3}(?:_[a-z]+)?)\|>$")


@dataclass(frozen=True)
class WhisperSpecialTokens:
    """Ids of Whisper's special tokens, read from a Hugging Face ``tokenizer.json``.

    Attributes:
        sot: <|startoftranscript|>.   eot: <|endoftext|>.
        transcribe, translate: task tokens.
        notimestamps: <|notimestamps|>; timestamp tokens start right after it.
        no_speech: <|nospeech|> (newer vocabularies) or <|nocaptions|>; None if absent.
        sot_prev: <|startofprev|> (previous-text prompt), None if absent.
        sot_lm: <|startoflm|>, None if absent.
        lang_to_id: "<|en|>" -> id, in id order (as transformers' ``generation_config.lang_to_id``).
    """

    sot: int
    eot: int
    transcribe: int
    translate: int
    notimestamps: int
    no_speech: int | None
    sot_prev: int | None
    sot_lm: int | None
    lang_to_id: dict[str, int]

    @property
    def timestamp_begin(self) -> int:
        """Id of <|0.00|>; timestamp k (k * 20 ms) is ``timestamp_begin + k``."""
        return self.notimestamps + 1


def whisper_special_tokens(tokenizer_json: Mapping[str, Any]) -> WhisperSpecialTokens:
    """Find Whisper's special token ids in a parsed ``tokenizer.json``.

    Language tokens are the added tokens between <|startoftranscript|> and <|translate|>
    (openai/whisper ``tokenizer.py`` lays them out that way).

    Raises:
        CT2FormatError: a required special token is missing (not a Whisper tokenizer).
    """
    added = {tok["content"]: int(tok["id"]) for tok in tokenizer_json.get("added_tokens", [])}
    vocab = tokenizer_json.get("model", {}).get("vocab", {})

    def find(token: str, required: bool = True) -> int | None:
        if token in added:
            return added[token]
        if token in vocab:
            return int(vocab[token])
        if required:
            raise CT2FormatError(f"tokenizer.json has no {token} token: it is not a Whisper tokenizer.")
        return None

    sot, translate = find("<|startoftranscript|>"), find("<|translate|>")
    lang_to_id = {
        tok: i
        for tok, i in sorted(added.items(), key=lambda kv: kv[1])
        if sot < i < translate and _LANG_TOKEN.match(tok)
    }
    no_speech = find("<|nospeech|>", required=False)
    if no_speech is None:
        no_speech = find("<|nocaptions|>", required=False)
    return WhisperSpecialTokens(
        sot=sot,
        eot=find("<|endoftext|>"),
        transcribe=find("<|transcribe|>"),
        translate=translate,
        notimestamps=find("<|notimestamps|>"),
        no_speech=no_speech,
        sot_prev=find("<|startofprev|>", required=False),
        sot_lm=find("<|startoflm|>", required=False),
        lang_to_id=lang_to_id,
    )


def whisper_special_tokens_of(tokenizer: Any) -> WhisperSpecialTokens:
    """:func:`whisper_special_tokens` of a loaded transformers Whisper tokenizer, read from its
    added tokens and vocabulary lookups, without serialising it: ``json.loads`` of
    ``tokenizer.backend_tokenizer.to_str()`` (a 3.9 MB string) gives the same ids but holds the
    GIL for 100 ms and more.

    Raises:
        CT2FormatError: a required special token is missing (not a Whisper tokenizer).
    """
    backend = tokenizer.backend_tokenizer
    added = [{"content": tok.content, "id": int(i)} for i, tok in backend.get_added_tokens_decoder().items()]
    return whisper_special_tokens({"added_tokens": added, "model": {"vocab": _VocabLookup(backend)}})


class _VocabLookup(Mapping[str, int]):
    """The backend tokenizer's ``token_to_id`` as a read-only mapping (membership and lookup;
    iteration goes over the whole vocabulary)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def __getitem__(self, token: str) -> int:
        token_id = self.backend.token_to_id(token)
        if token_id is None:
            raise KeyError(token)
        return int(token_id)

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self.backend.token_to_id(token) is not None

    def __iter__(self):
        return iter(self.backend.get_vocab())

    def __len__(self) -> int:
        return self.backend.get_vocab_size()


def build_whisper_tokenizer(tokenizer_json: Mapping[str, Any], vocab_size: int):
    """A ``transformers.WhisperTokenizer`` (tokenizers-backed) built from parsed JSON, in memory.

    If the vocabulary lacks the 1501 timestamp tokens (<|0.00|> .. <|30.00|>, e.g. the
    tiny.en package's tokenizer.json), they are added after <|notimestamps|> as in the
    hub tokenizers, so every model output id has a token string.

    Built in short steps, none holding the GIL for long (issue 22: a window stays responsive
    while a model loads): see :func:`_backend_tokenizer`; the result serialises exactly as a
    ``Tokenizer.from_str`` of the whole JSON would (tests/core/test_whisper_tokens.py).
    Base, one load, garbage collector paused as in the window: 260-270 -> 90-100 ms of CPU,
    the longest single step ~45 ms of CPU (building the BPE model).

    Args:
        tokenizer_json: parsed Hugging Face tokenizer.json of a Whisper model
            (:func:`parse_tokenizer_json` parses one in pieces).
        vocab_size: the model's output vocabulary size (rows of the embedding matrix).

    Returns:
        WhisperTokenizer with eos/bos/unk/pad = <|endoftext|> and the special added tokens
        registered as extra special tokens.
    """
    from transformers import WhisperTokenizer

    special = whisper_special_tokens(tokenizer_json)
    data = dict(tokenizer_json)
    added = list(data.get("added_tokens", []))
    present = {int(tok["id"]) for tok in added}
    for token_id in range(special.timestamp_begin, vocab_size):
        if token_id not in present:
            added.append(
                {
                    "id": token_id,
                    "content": "<|%.2f|>" % ((token_id - special.timestamp_begin) * _TIMESTAMP_STEP_S),
                    "single_word": False,
                    "lstrip": False,
                    "rstrip": False,
                    "normalized": True,
                    "special": False,
                }
            )
    data["added_tokens"] = added
    backend = _backend_tokenizer(data)
    extra = [t["content"] for t in added if t.get("special") and t["content"] != "<|endoftext|>"]
    kwargs = dict(
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=extra,
    )
    # transformers deep-copies a ``tokenizer_object`` (a whole serialise + parse); this one is
    # ours alone, so the wrapper hands over the object itself (see :class:`_NoCopy`)
    tokenizer = WhisperTokenizer(tokenizer_object=_NoCopy(backend), **kwargs)
    if tokenizer.backend_tokenizer is not backend:  # a transformers that no longer copies it
        tokenizer = WhisperTokenizer(tokenizer_object=backend, **kwargs)
    return tokenizer


class _NoCopy:
    """Hands ``tokenizer`` itself to the one ``copy.deepcopy`` that transformers'
    ``TokenizersBackend.__init__`` makes of its ``tokenizer_object``.

    That copy serialises the whole backend tokenizer to JSON and parses it again (about
    150 ms of CPU with the GIL held for Whisper's 3.9 MB tokenizer); a tokenizer built here
    for the new ``WhisperTokenizer`` alone needs no copy.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __deepcopy__(self, memo: dict) -> Any:
        return self.tokenizer


def _backend_tokenizer(data: Mapping[str, Any]):
    """A ``tokenizers.Tokenizer`` equal to ``Tokenizer.from_str(json.dumps(data))``, built in
    short steps: a model-less skeleton from (small) JSON, the BPE model from the parsed vocab
    and merges, then the added tokens in id order.

    ``json.dumps`` of the whole tokenizer.json and the Rust parse of it are one call each that
    holds the GIL for 100-500 ms (a window's GUI thread stalls that long during a model load);
    here the longest step is building the BPE model (about 55 ms of CPU for Whisper's 50,000
    merges). A tokenizer that is not BPE with explicit vocab and merges, or whose added tokens
    would not land on their ids, is parsed whole as before.
    """
    import tokenizers
    from tokenizers import AddedToken
    from tokenizers.models import BPE

    model = data.get("model") or {}
    vocab, merges = model.get("vocab"), model.get("merges")
    added = sorted(data.get("added_tokens") or [], key=lambda tok: int(tok["id"]))
    if (
        model.get("type") != "BPE"
        or not isinstance(vocab, dict)
        or not isinstance(merges, list)
        or not _ids_as_added(added, vocab)
    ):
        return tokenizers.Tokenizer.from_str(json.dumps(data))
    skeleton = {**data, "added_tokens": [], "model": {**model, "vocab": {}, "merges": []}}
    backend = tokenizers.Tokenizer.from_str(json.dumps(skeleton))
    pairs = [tuple(m) if not isinstance(m, str) else tuple(m.split(" ", 1)) for m in merges]
    backend.model = BPE(
        vocab=vocab,
        merges=pairs,
        dropout=model.get("dropout"),
        unk_token=model.get("unk_token"),
        continuing_subword_prefix=model.get("continuing_subword_prefix"),
        end_of_word_suffix=model.get("end_of_word_suffix"),
        fuse_unk=model.get("fuse_unk", False),
        byte_fallback=model.get("byte_fallback", False),
        ignore_merges=model.get("ignore_merges", False),
    )
    backend.add_tokens(
        [
            AddedToken(
                tok["content"],
                single_word=tok.get("single_word", False),
                lstrip=tok.get("lstrip", False),
                rstrip=tok.get("rstrip", False),
                normalized=tok.get("normalized", True),
                special=tok.get("special", False),
            )
            for tok in added
        ]
    )
    if any(backend.token_to_id(tok["content"]) != int(tok["id"]) for tok in added):
        return tokenizers.Tokenizer.from_str(json.dumps(data))
    return backend


def _ids_as_added(added: list[Mapping[str, Any]], vocab: Mapping[str, int]) -> bool:
    """Whether adding ``added`` (sorted by id) one by one to a model with ``vocab`` gives each
    its id: a token the vocabulary has keeps the vocabulary's id (tiny.en's <|endoftext|>,
    50256); any other takes the next id after the vocabulary and the tokens added so far."""
    next_id = len(vocab)
    for tok in added:
        token_id = int(tok["id"])
        if tok["content"] in vocab:
            if vocab[tok["content"]] != token_id:
                return False
        elif token_id == next_id:
            next_id += 1
        else:
            return False
    return True


def parse_tokenizer_json(source: str | bytes | bytearray | Path | Mapping[str, Any]) -> dict[str, Any]:
    """A Hugging Face ``tokenizer.json``, parsed: equal to ``json.loads`` of it, but the
    model's ``vocab`` and ``merges`` (nearly all of the file) are each parsed by their own
    call, so no single call holds the GIL for the whole file (Whisper's is 3.9 MB: about
    50-75 ms of CPU in one ``json.loads``; about half that per piece here).

    Args:
        source: a path (``Path``, or a ``str`` that does not start with "{"), the JSON text
            (``str``/``bytes``, UTF-8), or an already parsed mapping (returned as a dict).

    Raises:
        OSError: the file cannot be read.  json.JSONDecodeError / UnicodeDecodeError: not JSON.
    """
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, str) and not source.lstrip().startswith("{"):
        source = Path(source)
    if isinstance(source, Path):
        source = source.read_bytes()
    text = bytes(source).decode("utf-8") if not isinstance(source, str) else source
    pieces = _split_vocab_merges(text)
    if pieces is None:
        return json.loads(text)
    skeleton, vocab, merges = pieces
    model = skeleton.get("model")
    if not isinstance(model, dict) or model.get("vocab") != {} or model.get("merges") != []:
        return json.loads(text)  # the keys found were not the model's: parse it whole
    model["vocab"], model["merges"] = vocab, merges
    return skeleton


def _split_vocab_merges(text: str) -> tuple[dict[str, Any], Any, Any] | None:
    """(the document with an empty vocab and merges, vocab, merges), or None when the
    text does not have ``"model": {... "vocab": {...}, ... "merges": [...]`` in that order."""
    decoder = json.JSONDecoder()
    model_at = text.find('"model"')
    if model_at < 0:
        return None
    spans = []
    start = model_at
    for key, opener in (('"vocab"', "{"), ('"merges"', "[")):
        at = text.find(key, start)
        if at < 0:
            return None
        at = _skip_colon(text, at + len(key))
        if at is None or text[at] != opener:
            return None
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            return None
        spans.append((at, end, value))
        start = end
    (v0, v1, vocab), (m0, m1, merges) = spans
    try:
        skeleton = json.loads(text[:v0] + "{}" + text[v1:m0] + "[]" + text[m1:])
    except ValueError:
        return None
    return skeleton, vocab, merges


def _skip_colon(text: str, at: int) -> int | None:
    """Index of the value after ``at`` (whitespace, one ':', whitespace), or None."""
    n = len(text)
    while at < n and text[at] in " \t\r\n":
        at += 1
    if at >= n or text[at] != ":":
        return None
    at += 1
    while at < n and text[at] in " \t\r\n":
        at += 1
    return at if at < n else None
