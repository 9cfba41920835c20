"""A shortlist output head for a draft: logits only for the N most frequent token ids, so a
draft step reads a fraction of the output projection (71% of whisper-tiny's per-token
weights are that projection). Tokens off the list are never drafted; the target still
decides every token (``Backend.step(..., head_ids=...)``: -inf off the list).

The frequency source is the tokenizer itself, no corpus needed:

- byte-level BPE (Whisper, GPT-2): after the 256 byte tokens, ids are in merge order, and BPE
  merges the most frequent pair of its training corpus first, so a lower id is a more
  frequent token (tiny.en's first ids: "Ġt", "Ġa", "he", ... ; 5000 "Ġentirely", 20000
  "ĠJunior"); the 256 byte tokens are kept too (every text can be spelled with them);
- SentencePiece unigram (Bergamot): pieces are stored by descending log-probability, so
  again the lowest ids are the most frequent.

Every special token (transformers' added tokens: Whisper's end of text, timestamps,
language and task tokens; SentencePiece control pieces) is always on the list, so the
draft can propose an end or a timestamp; so are ids the caller names (``keep``: e.g. the
run's prompt and forced ids).
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

DEFAULT_SIZE = 8192
"""Shortlist size by default (the issue's 4-8k most frequent ids)."""


def special_ids(backend: Any) -> set[int]:
    """The special token ids of ``backend``'s tokenizer (transformers' added tokens and
    special ids; SentencePiece control and unknown pieces); empty if it says none."""
    tok = getattr(backend, "tokenizer", None)
    out: set[int] = set()
    if tok is None:
        return out
    added = getattr(tok, "added_tokens_decoder", None)
    if isinstance(added, dict):
        out.update(int(i) for i in added)
    out.update(int(i) for i in getattr(tok, "all_special_ids", ()) or ())
    if hasattr(tok, "is_control"):
        size = int(tok.get_piece_size())
        out.update(i for i in range(size) if tok.is_control(i) or tok.is_unknown(i))
    return out


def frequent_ids(backend: Any, size: int = DEFAULT_SIZE, *, keep: Iterable[int] = ()) -> torch.Tensor:
    """The shortlist of ``backend``'s vocabulary: int64 (k,) sorted ids: the ``size`` lowest
    ordinary ids (the most frequent, see the module docstring), every special id and
    ``keep``; k >= ``size`` unless the vocabulary is smaller.

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"a shortlist needs at least one id, got size {size}")
    vocab = int(backend.vocab_size)
    special = special_ids(backend)
    ordinary = [i for i in range(vocab) if i not in special]
    chosen = set(ordinary[:size]) | {i for i in special if i < vocab} | {int(i) for i in keep if 0 <= int(i) < vocab}
    return torch.tensor(sorted(chosen), dtype=torch.long)


def coverage(ids: Iterable[int], shortlist: torch.Tensor) -> float:
    """The fraction of ``ids`` on ``shortlist`` (1.0 for no ids)."""
    ids = list(ids)
    if not ids:
        return 1.0
    on = set(shortlist.tolist())
    return sum(int(i) in on for i in ids) / len(ids)
