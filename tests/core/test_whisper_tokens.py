"""Whisper's tokenizer built from tokenizer.json in short steps (issue 22, "model load with no
stall > 100 ms"): it must be the same tokenizer as the whole-file parse it replaces.

Reference: the previous build, kept here verbatim in :func:`_reference_tokenizer`
(``tokenizers.Tokenizer.from_str(json.dumps(data))`` handed to ``WhisperTokenizer``), on the
two bundled tokenizer.json files (tiny.en lacks the timestamp tokens; base has them).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from core.backends import whisper_tokens
from core.backends.whisper_tokens import (
    build_whisper_tokenizer,
    parse_tokenizer_json,
    whisper_special_tokens,
    whisper_special_tokens_of,
)

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    " She sells sea shells by the sea shore!  Twice.",
    "Ça va? L'été dernier, nous sommes allés à la plage.",
    "Der Fußgänger überquert die Straße bei Grün.",
    "¿Dónde está la biblioteca? Ñandú, pingüino.",
    "Привет, как дела? Съешь же ещё этих мягких французских булок.",
    "你好，世界。今天天气很好。",
    "こんにちは、世界。カタカナとひらがな。",
    "안녕하세요 세계",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "Emoji 🙂🚀 and tabs\tand\nnewlines\r\n",
    "<|startoftranscript|><|en|><|transcribe|><|notimestamps|> Hello<|endoftext|>",
    "<|0.00|> Hi there.<|1.50|><|1.50|> Bye.<|3.00|>",
    "numbers 1234567890 3.14159 -42 1e10 $5.99 50%",
    "",
    " ",
    "a" * 300,
]


def _tokenizer_json(name: str) -> Path:
    from core.catalog import WHISPER_MODELS

    entry = WHISPER_MODELS[name]
    module, rel = entry.tokenizer
    return Path(__import__(entry.modules[module]).__file__).parent / rel


def _reference_tokenizer(data: dict, vocab_size: int):
    """The build before issue 22's change: one json.dumps, one Rust parse, transformers' copy."""
    import tokenizers
    from transformers import WhisperTokenizer

    special = whisper_tokens.whisper_special_tokens(data)
    data = dict(data)
    added = list(data.get("added_tokens", []))
    present = {int(tok["id"]) for tok in added}
    for token_id in range(special.timestamp_begin, vocab_size):
        if token_id not in present:
            added.append({
                "id": token_id, "content": "<|%.2f|>" % ((token_id - special.timestamp_begin) * 0.02),
                "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False,
            })
    data["added_tokens"] = added
    backend = tokenizers.Tokenizer.from_str(json.dumps(data))
    extra = [t["content"] for t in added if t.get("special") and t["content"] != "<|endoftext|>"]
    return WhisperTokenizer(
        tokenizer_object=backend, unk_token="<|endoftext|>", bos_token="<|endoftext|>",
        eos_token="<|endoftext|>", pad_token="<|endoftext|>", extra_special_tokens=extra,
    )


VOCAB_SIZE = {"tiny.en": 51864, "base": 51865}


@pytest.fixture(scope="module", params=["tiny.en", "base"])
def pair(request):
    """(ours, reference, vocab_size) for one bundled model."""
    path = _tokenizer_json(request.param)
    vocab_size = VOCAB_SIZE[request.param]
    ours = build_whisper_tokenizer(parse_tokenizer_json(path), vocab_size)
    reference = _reference_tokenizer(json.loads(path.read_bytes()), vocab_size)
    return ours, reference, vocab_size


@pytest.mark.parametrize("name", ["tiny.en", "base"])
def test_parse_tokenizer_json_equals_json_loads(name):
    """Parsed in pieces, from a path, bytes, text, minified text, and the older merges format
    ("a b" strings): always what json.loads gives."""
    path = _tokenizer_json(name)
    raw = path.read_bytes()
    expected = json.loads(raw)
    assert parse_tokenizer_json(path) == expected
    assert parse_tokenizer_json(str(path)) == expected
    assert parse_tokenizer_json(raw) == expected
    assert parse_tokenizer_json(raw.decode("utf-8")) == expected
    minified = json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
    assert parse_tokenizer_json(minified) == expected
    old = copy.deepcopy(expected)
    old["model"]["merges"] = [" ".join(m) for m in old["model"]["merges"]]
    assert parse_tokenizer_json(json.dumps(old)) == old
    # "vocab" inside an added token before the model: found first, then rejected; parsed whole
    odd = copy.deepcopy(expected)
    odd["added_tokens"][0]["content"] = '"vocab": {"x": 1}, "merges": []'
    assert parse_tokenizer_json(json.dumps(odd)) == odd


@pytest.mark.parametrize("name", ["tiny.en", "base"])
def test_the_build_neither_serialises_nor_copies_the_whole_tokenizer(monkeypatch, name):
    """No json.dumps of the 3.9 MB document (its Rust parse follows it), and no deep copy of a
    ``tokenizers.Tokenizer`` (transformers' copy = serialise + parse): each held the GIL for
    100-500 ms during a model load in the window."""
    import tokenizers

    dumped: list[int] = []
    real_dumps = json.dumps

    class _Json:
        def __getattr__(self, name):
            return getattr(json, name)

        @staticmethod
        def dumps(obj, *args, **kwargs):
            text = real_dumps(obj, *args, **kwargs)
            dumped.append(len(text))
            return text

    copied: list[str] = []
    real_deepcopy = copy.deepcopy

    def deepcopy(obj, memo=None, _nil=[]):  # noqa: B006 (copy.deepcopy's own signature)
        if isinstance(obj, tokenizers.Tokenizer):
            copied.append(type(obj).__name__)
        return real_deepcopy(obj, memo)

    data = parse_tokenizer_json(_tokenizer_json(name))
    monkeypatch.setattr(whisper_tokens, "json", _Json())
    monkeypatch.setattr(copy, "deepcopy", deepcopy)
    tokenizer = build_whisper_tokenizer(data, VOCAB_SIZE[name])
    assert tokenizer.convert_tokens_to_ids("<|endoftext|>") == {"tiny.en": 50256, "base": 50257}[name]
    assert max(dumped, default=0) < 500_000, f"json.dumps of {max(dumped)} characters"
    assert copied == []


def test_same_backend_tokenizer(pair):
    """The whole backend serialisation is equal: model, added tokens, pre/post-processing."""
    ours, reference, _ = pair
    assert json.loads(ours.backend_tokenizer.to_str()) == json.loads(reference.backend_tokenizer.to_str())
    assert ours.added_tokens_decoder == reference.added_tokens_decoder
    assert ours.all_special_ids == reference.all_special_ids
    assert ours.all_special_tokens == reference.all_special_tokens
    assert len(ours) == len(reference)


def test_every_id_decodes_the_same(pair):
    """All ids of the model's vocabulary: token strings, and text with and without specials."""
    ours, reference, vocab_size = pair
    ids = list(range(vocab_size))
    assert ours.convert_ids_to_tokens(ids) == reference.convert_ids_to_tokens(ids)
    assert [ours.decode([i]) for i in ids] == [reference.decode([i]) for i in ids]
    assert ours.decode(ids) == reference.decode(ids)
    assert ours.decode(ids, skip_special_tokens=True) == reference.decode(ids, skip_special_tokens=True)
    assert ours.decode(ids, decode_with_timestamps=True) == reference.decode(ids, decode_with_timestamps=True)


def test_sentences_encode_the_same(pair):
    """Several languages and scripts, special and timestamp tokens in the text, the prompt."""
    ours, reference, _ = pair
    for text in SENTENCES:
        for specials in (False, True):
            expected = reference(text, add_special_tokens=specials).input_ids
            assert ours(text, add_special_tokens=specials).input_ids == expected, text
            assert ours.decode(expected) == reference.decode(expected), text
    for kwargs in ({}, {"language": "en", "task": "transcribe"}, {"predict_timestamps": True}):
        if kwargs.get("language") and "<|fr|>" not in ours.get_vocab():
            continue
        ours.set_prefix_tokens(**kwargs)
        reference.set_prefix_tokens(**kwargs)
        assert ours.prefix_tokens == reference.prefix_tokens
        assert ours(SENTENCES[0]).input_ids == reference(SENTENCES[0]).input_ids


def test_special_tokens_of_a_loaded_tokenizer_need_no_serialisation(pair):
    """The ids read from the tokenizer's added tokens and lookups equal those read from its
    serialised JSON (what whisper_models.complete_whisper_config parsed)."""
    ours, reference, _ = pair
    expected = whisper_special_tokens(json.loads(reference.backend_tokenizer.to_str()))
    assert whisper_special_tokens_of(ours) == expected
    assert whisper_special_tokens_of(reference) == expected
