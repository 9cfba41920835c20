"""Prompt lookup: a draft that costs almost nothing (transformers' ``prompt_lookup_num_tokens``,
``PromptLookupCandidateGenerator``; llama.cpp's n-gram lookup, ``common/ngram-cache``).

The last n tokens (n from ``max_ngram`` down to ``min_ngram``) are looked up in what is
already known: the decoder's ids so far (the prompt: Whisper's previous-window text in
long-form, an initial prompt, the forced tokens; and every token generated), then the
``extra`` sequences (translation: the source ids, where the source and target share one
vocabulary, as the bundled Bergamot models do). The continuation of the most recent earlier
match is proposed, up to ``gamma`` tokens. The draft is deterministic (q is one-hot): the
standard acceptance rule still holds.

In the decoder's own ids only n >= 2 is tried (``own_min_ngram``): a single repeated token
(" the", ",", a timestamp) is a poor guess of what follows it, and on speech these one-token
matches drafted almost always wrongly (whisper-base, bundled clip: 0.92x of plain greedy with
n = 1 allowed, 1.00x without). n = 1 is kept for the ``extra`` sequences, where one shared
piece of a name or a number in the source predicts its continuation well.
"""

from __future__ import annotations

from typing import Sequence

import torch


def find_continuation(seq: Sequence[int], key: Sequence[int], gamma: int, before: int | None = None) -> list[int]:
    """The up to ``gamma`` tokens that follow the most recent occurrence of ``key`` in
    ``seq`` that starts before ``before`` (default: anywhere but the very end), or [].

    Args:
        seq: the token ids searched.
        key: the n-gram (n >= 1).
        gamma: how many continuation tokens at most.
        before: only occurrences starting at an index < ``before``; an occurrence must leave
            at least one token after it.
    """
    n = len(key)
    last = len(seq) - n - 1 if before is None else min(before - 1, len(seq) - n - 1)
    first = key[0]
    key = list(key)
    for start in range(last, -1, -1):
        if seq[start] == first and list(seq[start:start + n]) == key:
            return list(seq[start + n:start + n + gamma])
    return []


class NgramDraft:
    """Prompt lookup (see the module docstring).

    Args:
        extra: further sequences to search after the decoder's own ids (translation: the
            source ids), target vocabulary.
        max_ngram, min_ngram: the n-gram sizes tried, longest first (3 .. 1).
        own_min_ngram: the shortest n-gram looked up in the decoder's own ids (2; see the
            module docstring); ``min_ngram`` applies to the ``extra`` sequences.

    Attributes:
        name: "ngram". deterministic: True.
    """

    name = "ngram"
    deterministic = True

    def __init__(self, extra: Sequence[Sequence[int]] = (), max_ngram: int = 3, min_ngram: int = 1,
                 own_min_ngram: int = 2):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.extra = [list(int(t) for t in s) for s in extra if len(s)]
        self.max_ngram, self.min_ngram, self.own_min_ngram = max_ngram, min_ngram, max(1, own_min_ngram)

    def propose(self, ids: Sequence[int], gamma: int, process=None) -> tuple[list[int], torch.Tensor | None]:
        """Up to ``gamma`` tokens continuing ``ids`` (prompt + emitted ids), q None (one-hot)."""
        ids = [int(t) for t in ids]
        for n in range(min(self.max_ngram, len(ids)), self.min_ngram - 1, -1):
            key = ids[-n:]
            if n >= self.own_min_ngram:
                found = find_continuation(ids, key, gamma, before=len(ids) - n)
                if found:
                    return found, None
            for seq in self.extra:
                found = find_continuation(seq, key, gamma, before=len(seq))
                if found:
                    return found, None
        return [], None

    def rollback(self, n_ids: int) -> None:
        """Nothing to forget: the lookup is recomputed from the ids each round."""
