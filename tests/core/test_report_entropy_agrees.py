"""R1 review of eb54d4c (core/report.py): the report's entropy of a dense row is documented as
``entropy_nats`` of the distribution (``_Dist.entropy``), but since eb54d4c the report sums over
the nonzero entries with numpy while ``entropy_nats``/``varentropy_nats`` still sum the whole
row with torch.dot: the last bits differ (171 of 200 random Whisper-sized rows here; the report's
numbers also changed against the session's start, which the commit does not say).
Proof script: /work/notes/s12/r1/entropy_bits.py. Fixed: ``entropy_nats``/``varentropy_nats``
on a numpy row through ``_nonzero_moments`` (one code path)."""

from __future__ import annotations

import torch

from core import report


def test_the_reports_entropy_of_a_dense_row_is_entropy_nats():
    g = torch.Generator().manual_seed(0)
    differ = 0
    for i in range(20):
        logits = torch.randn(51865, generator=g) * (1 + i % 7)
        logits[torch.randint(0, 51865, (90,), generator=g)] = -float("inf")  # suppressed tokens
        p = torch.softmax(logits, -1)
        d = report._Dist(p)
        e = report.entropy_nats(p)
        differ += d.entropy() != e or d.varentropy() != report.varentropy_nats(p, e)
    assert differ == 0
