"""The two protocols of two-model decoding.

``Draft``: what speculative decoding asks of a draft (``model:NAME``, ``ngram``,
``early-exit:L``, ``branch``). ``Companion``: a second model decoding the same input in
lock-step with the target, its ids mapped into the target's vocabulary (a draft model,
contrastive decoding's amateur).
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

import torch

Process = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``process(input_ids, logits) -> scores``: the run's processor chain (hard rules,
penalties, filters, the strategy's temperature) applied to one position, exactly as in
plain decoding. ``input_ids`` int64 (1, n): prompt + generated ids up to that position
(target vocabulary); ``logits`` float32 (1, target vocab); returns float32 (1, target vocab)
processed scores (softmax gives the distribution)."""


class Draft(Protocol):
    """A source of draft tokens for speculative decoding.

    Attributes:
        name: as the user wrote it ("ngram", "model:tiny.en", "early-exit:4", "branch").
        deterministic: q is one-hot (n-gram lookup, a branch): the standard rule still holds
            (accept with probability p(token)), and ``propose`` returns ``q`` None.
    """

    name: str
    deterministic: bool

    def propose(self, ids: Sequence[int], gamma: int, process: Process) -> tuple[list[int], torch.Tensor | None]:
        """Up to ``gamma`` draft tokens continuing ``ids`` (prompt + every token emitted so
        far, target vocabulary), and their distributions.

        Args:
            ids: the target's ids so far (prompt first).
            gamma: how many tokens to draft at most (>= 1).
            process: the run's chain (see ``Process``), to apply to the draft's own logits
                so that q is shaped exactly as p is.

        Returns:
            (draft ids in the target's vocabulary, possibly fewer than ``gamma`` or none;
            q float32 (n, target vocab): the draft's processed distribution at each of those
            positions, or None for a deterministic draft).
        """
        ...

    def rollback(self, n_ids: int) -> None:
        """The target kept only the first ``n_ids`` ids of the sequence (prompt included):
        forget anything drafted beyond it (cut the draft's KV cache back)."""
        ...


class Companion(Protocol):
    """A second model on the same input, stepping alongside the target (its own encoder
    output and KV cache), its logits mapped into the target's vocabulary.

    Attributes:
        name: the model's name ("tiny.en").
        target_vocab_size: the target's vocabulary size (the mapped logits' width).
    """

    name: str
    target_vocab_size: int

    def logits(self, ids: Sequence[int], n_last: int = 1) -> torch.Tensor:
        """The companion's next-token logits after each of the last ``n_last`` positions of
        ``ids`` (target ids, prompt first), float32 (n_last, target vocab); target ids the
        companion has no token for get -inf. It feeds only the ids its cache has not seen
        and cuts its cache back first when ``ids`` leaves the path it followed.

        Raises:
            ValueError: an id of ``ids`` has no counterpart in the companion's vocabulary.
        """
        ...
