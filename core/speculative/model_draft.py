"""A draft model for speculative decoding (``--draft tiny.en``, ``--draft ID_OR_DIR``): a
second, smaller model of the same tokenizer family drafts ``gamma`` tokens one step at a
time (Leviathan et al. 2023, Algorithm 1: ``Mq``), through a ``ModelCompanion``
(``core.speculative.companion``: its own encoder output and KV cache, ids mapped through
the token text).

q is the draft's *processed* distribution: the run's chain (``process``: hard rules,
penalties, filters, the verification strategy's temperature) applied to the draft's logits
in the target's vocabulary, exactly as p is shaped. Under sampling verification the draft
token is drawn from q with the draft's own seeded generator (the acceptance rule needs
x ~ q); under greedy verification it is q's argmax.

The draft stops early after a token it is unsure of (q(x) < ``confidence``; transformers'
``assistant_confidence_threshold``, default 0.4 there): the tokens after it would likely be
rejected and their draft steps wasted. The stopping rule looks at the draft's own tokens
only, so the acceptance rule's guarantees hold unchanged.
"""

from __future__ import annotations

from typing import Sequence

import torch

from core.speculative.companion import ModelCompanion
from core.speculative.draft import Process


DRAFT_CONFIDENCE = 0.4
"""The ``confidence`` of the model drafts the tasks build (transformers' default
``assistant_confidence_threshold``). Measured on whisper-base with tiny.en drafting, fixed
gamma 3, espeak speech (62 tokens): drafted/accepted 57/45 -> 54/45 (full head), 62/43 ->
57/43 (8192 shortlist), the same target calls; the bundled clip unchanged (alpha 1.0)."""


def draft_generator(seed: int | None) -> torch.Generator:
    """The draft's own generator: seeded from ``seed`` (offset so that its draws differ
    from the acceptance rule's, which uses ``seed`` itself), or from the OS."""
    g = torch.Generator()
    if seed is None:
        g.seed()
    else:
        g.manual_seed((int(seed) + 0x5EED) % (2 ** 63))
    return g


class ModelDraft:
    """``core.speculative.draft.Draft`` over a companion model (see the module docstring).

    Args:
        companion: the draft model beside the target.
        name: as the user wrote it (default ``"model:" + companion.name``).
        sample: draw the draft tokens from q (verification "sample"); False: argmax.
        seed: the seed of the draft's generator (``draft_generator``) when sampling.
        eos_token_id: the target's end of text: a draft stops after proposing it.
        confidence: stop drafting after a token whose q is below this (0 = never).

    Attributes:
        name, deterministic (False): as the protocol says.
        proposed: draft tokens proposed over the run; draft_calls: ``propose`` calls.
    """

    deterministic = False

    def __init__(self, companion: ModelCompanion, *, name: str | None = None, sample: bool = False,
                 seed: int | None = None, eos_token_id: int | None = None, confidence: float = 0.0):
        if not 0.0 <= confidence < 1.0:
            raise ValueError(f"confidence must be in [0, 1), got {confidence}")
        self.companion = companion
        self.confidence = float(confidence)
        self.name = name if name is not None else f"model:{companion.name}"
        self.sample = bool(sample)
        self.generator = draft_generator(seed) if sample else None
        self.eos_token_id = eos_token_id
        self.proposed = 0
        self.draft_calls = 0

    def propose(self, ids: Sequence[int], gamma: int, process: Process) -> tuple[list[int], torch.Tensor | None]:
        """Up to ``gamma`` tokens continuing ``ids`` (target vocabulary) and q float32
        (n, target vocab), the draft's processed distribution at each; fewer when the
        draft chooses the end of text, has nothing left it may propose (every score -inf) or
        cannot feed another position (its decoder's length limit)."""
        seq = [int(t) for t in ids]
        out: list[int] = []
        qs: list[torch.Tensor] = []
        self.draft_calls += 1
        for _ in range(max(0, int(gamma))):
            try:
                logits = self.companion.logits(seq, 1)  # (1, target vocab)
            except ValueError:
                break  # the draft cannot follow here (its decoder is full): the target goes on alone
            scores = process(torch.tensor([seq], dtype=torch.long), logits)
            if not bool(torch.isfinite(scores).any()):
                break  # nothing the draft has a token for is allowed here
            q = torch.softmax(scores.float(), dim=-1)[0]
            if self.sample:
                x = int(torch.multinomial(q, 1, generator=self.generator))
            else:
                x = int(scores[0].argmax())
            out.append(x)
            qs.append(q)
            seq.append(x)
            if x == self.eos_token_id or float(q[x]) < self.confidence:
                break
        self.proposed += len(out)
        return out, (torch.stack(qs) if qs else torch.zeros((0, self.companion.target_vocab_size)))

    def rollback(self, n_ids: int) -> None:
        """Nothing to do now: the companion compares the next ids with the path its cache
        followed and cuts itself back then (one cut, however many rollbacks)."""
