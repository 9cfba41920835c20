"""A branch draft: a token sequence the user already has drafts the run that follows it.

After a fork at step s, the old branch's tokens after s draft the new branch; in long-form
temperature fallback, a failed attempt's tokens draft the next attempt. Where the two runs
agree the target accepts whole stretches per call; where they part, the draft is realigned
when they resynchronise: the current suffix (the last ``max_ngram`` .. ``min_ngram`` tokens) is
found again in the reference, the occurrence nearest to where the alignment was, and the
reference's continuation from there is proposed. The draft is deterministic (q is one-hot).
"""

from __future__ import annotations

from typing import Sequence

import torch


class BranchDraft:
    """Draft from a reference token sequence.

    Args:
        reference: the reference ids in the target's vocabulary, ideally prompt first and the
            old run's generated ids after it (with its EOS id at the end when it ended by EOS,
            so the target can accept the end as well). A reference without the prompt works
            too: it is then aligned by its n-grams only.
        aligned: the reference is position-aligned with the run's ids (index i of both is the
            same position), as for a fork of the same prompt; False: align by n-grams only.
        max_ngram, min_ngram: the suffix lengths tried when realigning, longest first.

    Attributes:
        name: "branch". deterministic: True.
    """

    name = "branch"
    deterministic = True

    def __init__(self, reference: Sequence[int], aligned: bool = True, max_ngram: int = 4, min_ngram: int = 2):
        self.reference = [int(t) for t in reference]
        self.offset: int | None = 0 if aligned else None  # ids index - reference index
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def _aligned(self, ids: list[int]) -> int | None:
        """The reference index of the token after ``ids`` under the current alignment, if the
        last tokens of ``ids`` agree with the reference there."""
        if self.offset is None:
            return None
        pos = len(ids) - self.offset
        k = min(self.min_ngram, len(ids))
        if 0 < pos <= len(self.reference) and pos >= k and self.reference[pos - k:pos] == ids[len(ids) - k:]:
            return pos
        return None

    def _realign(self, ids: list[int]) -> int | None:
        """Find the current suffix again in the reference (nearest to the old alignment)."""
        expected = len(ids) - (self.offset or 0)
        for n in range(min(self.max_ngram, len(ids)), self.min_ngram - 1, -1):
            key = ids[-n:]
            hits = [i + n for i in range(len(self.reference) - n) if self.reference[i:i + n] == key]
            if hits:
                pos = min(hits, key=lambda h: (abs(h - expected), h))
                self.offset = len(ids) - pos
                return pos
        return None

    def propose(self, ids: Sequence[int], gamma: int, process=None) -> tuple[list[int], torch.Tensor | None]:
        """Up to ``gamma`` reference tokens continuing ``ids``, q None (one-hot); [] when the
        run's suffix is nowhere in the reference."""
        ids = [int(t) for t in ids]
        pos = self._aligned(ids)
        if pos is None:
            pos = self._realign(ids)
        if pos is None:
            return [], None
        return self.reference[pos:pos + gamma], None

    def rollback(self, n_ids: int) -> None:
        """Nothing to cut: the alignment is checked against the ids each round."""
