"""Whisper's special tokens and its tokenizer, read from a Hugging Face ``tokenizer.json``
(what the CTranslate2 packages ship; ``core.backends.whisper_ct2`` converts their weights).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
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


def build_whisper_tokenizer(tokenizer_json: Mapping[str, Any], vocab_size: int):
    """A ``transformers.WhisperTokenizer`` (tokenizers-backed) built from parsed JSON, in memory.

    If the vocabulary lacks the 1501 timestamp tokens (<|0.00|> .. <|30.00|>, e.g. the
    tiny.en package's tokenizer.json), they are added after <|notimestamps|> as in the
    hub tokenizers, so every model output id has a token string.

    Args:
        tokenizer_json: parsed Hugging Face tokenizer.json of a Whisper model.
        vocab_size: the model's output vocabulary size (rows of the embedding matrix).

    Returns:
        WhisperTokenizer with eos/bos/unk/pad = <|endoftext|> and the special added tokens
        registered as extra special tokens.
    """
    import tokenizers
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
    backend = tokenizers.Tokenizer.from_str(json.dumps(data))
    extra = [t["content"] for t in added if t.get("special") and t["content"] != "<|endoftext|>"]
    return WhisperTokenizer(
        tokenizer_object=backend,
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=extra,
    )
