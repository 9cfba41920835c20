"""R1 (session 11): core/report.py _log_np cached one read-only 'tiny' row per distinct LENGTH;
a sparse row's support is passed to it (report.py:262), so every distinct support size (top-k/top-p
sampling, Bergamot shortlists) adds a row for the life of the process (48 MiB after 5000 sizes)."""
import torch

from core import report


def test_the_log_clamp_keeps_no_row_per_support_size():
    report._TINY.clear()
    vocab = 51865
    for n in (10, 11, 12, 500, 501):
        p = torch.zeros(vocab)
        p[:n] = 1.0 / n
        dist = report._Dist(p)
        assert dist.sparse
        dist.entropy()
    assert len(report._TINY) <= 2, sorted(k[0] for k in report._TINY)
    assert len(report._LOG_TINY) <= 2, sorted(report._LOG_TINY)


def test_a_grown_clamp_row_gives_the_same_entropy_as_a_fresh_one():
    """The cached rows are sliced from the longest asked: a short row's entropy after a long
    one equals its entropy from an empty cache (same bits)."""
    p = torch.zeros(32000)
    p[:7] = torch.tensor([0.5, 0.2, 0.1, 0.1, 0.05, 0.03, 0.02])
    report._TINY.clear()
    report._LOG_TINY.clear()
    fresh = (report._Dist(p).entropy(), report._Dist(p).varentropy())
    q = torch.full((51865,), 1.0 / 51865)
    report._Dist(q).entropy()
    assert (report._Dist(p).entropy(), report._Dist(p).varentropy()) == fresh
