"""The verifying call of speculative decoding (``core.speculative.verify.position_rows``): a
backend that refuses ``all_positions=True`` is verified one position per call, with the same
tokens as plain greedy decoding."""

from __future__ import annotations

import pytest

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import Finished
from core.options import DecodingOptions
from core.speculative.branch import BranchDraft

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class NoAllPositions:
    """A backend without ``all_positions`` (as an older or foreign backend)."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def step(self, *args, **kw):
        if "all_positions" in kw:
            raise TypeError("step() got an unexpected keyword argument 'all_positions'")
        self.calls += 1
        return self.inner.step(*args, **kw)


def _finished(engine, encoded, prompt, options, **kw):
    return next(e for e in engine.run(encoded, prompt, options, **kw) if isinstance(e, Finished))


def test_a_backend_without_all_positions_is_verified_one_position_per_call(tiny_models):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    encoded = backend.encode({**tiny.inputs, "source_len": 30})
    greedy = _finished(Engine(backend), encoded, tiny.prompt, DecodingOptions(max_new_tokens=20))
    refusing = NoAllPositions(backend)
    branch = BranchDraft(list(tiny.prompt.prompt_ids) + list(greedy.token_ids))  # drafts greedy's own tokens
    spec = _finished(Engine(refusing), encoded, tiny.prompt,
                     DecodingOptions(strategy="speculative", draft="branch", draft_tokens=3, max_new_tokens=20),
                     draft=branch)
    assert len(greedy.token_ids) > 3 and spec.token_ids == greedy.token_ids
    assert refusing.calls >= len(spec.token_ids)  # one decoder call per position
    assert spec.stats.speculative.draft_tokens > 0  # the one-position path verified drafted tokens
