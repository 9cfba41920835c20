"""The per-step report's own costs (issue 22: translation speed against the native engine)."""

from __future__ import annotations

import torch

from core.report import StepReporter, StepTensors


def test_the_reporter_asks_the_tokenizer_once_per_id():
    """Fails before: every top-k entry of every step asked ``token_text`` again (~11 calls a
    step, ~1.5 us each through SentencePiece); a run's lists name the same ids step after step."""
    asked: list[int] = []

    def token_text(i: int) -> str:
        asked.append(i)
        return f"t{i}"

    reporter = StepReporter(token_text, lambda ids: "", top_k_report=5, capture_attention=False, source_len=0)
    logits = torch.full((1, 32000), float("-inf"))
    logits[0, :40] = torch.linspace(4.0, 0.0, 40)
    probs = torch.softmax(logits, -1)
    for _ in range(3):
        report = reporter.row_report(StepTensors(probs, probs, None, []), 0)
    assert [t.text for t in report.raw_topk] == ["t0", "t1", "t2", "t3", "t4"]
    assert sorted(asked) == [0, 1, 2, 3, 4]
