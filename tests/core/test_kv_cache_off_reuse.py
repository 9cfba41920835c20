"""With the KV cache off (``DecodingOptions.kv_cache=False``) ``core.cache.Inference`` re-feeds
the whole prefix every step, but builds the backend's cache once per batch size and empties it
with ``truncate_cache(cache, 0)`` (a Bergamot cache holds the cross-attention keys/values and the
shortlist's projection: rebuilt every step, the decoder curve timed that work too), and hands on
the hidden states of the positions the step adds only (as with the cache)."""

from __future__ import annotations

import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend
from core.cache import Inference, KeptCaches
from core.engine import Engine
from core.events import Finished
from core.options import DecodingOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _CountingInit:
    """A backend that counts ``init_cache`` calls."""

    def __init__(self, backend):
        self._backend, self.inits = backend, 0

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def init_cache(self, encoded, batch_size):
        self.inits += 1
        return self._backend.init_cache(encoded, batch_size)


@pytest.mark.parametrize("strategy,extra", [("greedy", {}), ("beam", {"num_beams": 3})])
def test_without_the_cache_the_backend_cache_is_built_once_per_batch_size(tiny_models, strategy, extra):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    opts = DecodingOptions(strategy=strategy, max_new_tokens=8, top_k_report=3, **extra)
    encoded = backend.encode(tiny.inputs)
    cached = next(e for e in Engine(backend).run(encoded, tiny.prompt, opts) if isinstance(e, Finished))
    counting = _CountingInit(backend)
    events = list(Engine(counting).run(encoded, tiny.prompt, opts.with_(kv_cache=False)))
    fin = next(e for e in events if isinstance(e, Finished))
    assert fin.token_ids == cached.token_ids
    assert len(fin.token_ids) >= 3
    assert counting.inits == 1  # beam search starts with its num_beams rows and keeps them


def test_without_the_cache_a_step_hands_on_the_new_positions_hidden_states(tiny_models):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    encoded = backend.encode(tiny.inputs)
    prompt = list(tiny.prompt.prompt_ids)
    inference = Inference(backend, KeptCaches(), encoded, prompt, len(prompt), 1, reuse=False,
                          capture_attention=False, capture_lens=False, kv_cache=False)
    inference.start(1)
    ids = torch.tensor([prompt])
    out = inference.step(ids, ids)
    assert out.hidden_states.shape[1] == len(prompt)
    for _ in range(3):
        inference.advance(out, None)
        ids = torch.cat([ids, out.logits.argmax(-1, keepdim=True)], dim=1)
        out = inference.step(ids, ids[:, -1:])
        assert out.hidden_states.shape[1] == 1  # the new position only, as with the cache


def test_bergamot_without_the_cache_gives_the_same_ids_and_builds_one_cache():
    from core.backends.marian_tiny import load_bergamot

    backend = load_bergamot("en-pt", shortlist=True)
    encoded = backend.encode(backend.source_ids("The children were playing happily in the garden."))
    opts = DecodingOptions(strategy="greedy", max_new_tokens=40, top_k_report=1)
    cached = next(e for e in Engine(backend).run(encoded, backend.decoder_prompt(encoded), opts)
                  if isinstance(e, Finished))
    counting = _CountingInit(backend)
    off = next(e for e in Engine(counting).run(encoded, backend.decoder_prompt(encoded), opts.with_(kv_cache=False))
               if isinstance(e, Finished))
    assert off.token_ids == cached.token_ids
    assert counting.inits == 1
