"""core/cache.py: the KV caches kept for forks (KeptCaches) and one run's side of them (Inference).

The engine-level behaviour (same tokens with and without reuse, what a fork reuses) is in
test_fork.py; these check the store's rules with a fake backend whose cache is a list of ids.
"""

from __future__ import annotations

import torch

from core.backends.base import EncoderOutput, StepOutput
from core.cache import Inference, KeptCache, KeptCaches


class ListBackend:
    """A backend whose cache is the list of ids fed so far."""

    name = "list"

    def init_cache(self, encoded, batch_size):
        return []

    def step(self, new_ids, cache, output_attentions):
        fed = cache + new_ids[0].tolist()
        return StepOutput(logits=torch.zeros(new_ids.shape[0], 4), cross_attention=None, cache=fed)

    def truncate_cache(self, cache, length):
        return cache[:length]

    def reorder_cache(self, cache, beam_idx):
        return list(cache)


def _encoded() -> EncoderOutput:
    return EncoderOutput(torch.zeros(1, 2, 3), 2, {})


def _kept(encoded, ids) -> KeptCache:
    return KeptCache(encoded, torch.tensor(ids), list(ids), None)


def test_take_truncates_to_the_shared_prefix_and_hands_the_cache_over():
    store, enc = KeptCaches(2), _encoded()
    store.keep(_kept(enc, [1, 5, 6, 7]))
    cache, reused, hidden = store.take(ListBackend(), enc, [1, 5, 6, 9], prompt_len=1, batch=1)
    assert (cache, reused, hidden) == ([1, 5], 2, None)  # 3 shared, the last one fed again
    assert id(enc) not in store.items


def test_take_refuses_what_cannot_be_reused():
    backend, enc = ListBackend(), _encoded()
    store = KeptCaches(2)
    store.keep(_kept(enc, [1, 5, 6]))
    assert store.take(backend, _encoded(), [1, 5, 6], 1, 1) == (None, 0, None)  # another encoder output
    assert store.take(backend, enc, [1, 5, 6], 1, 3) == (None, 0, None)  # a batch > 1 first step
    assert store.take(backend, enc, [2, 5, 6], 1, 1) == (None, 0, None)  # another prompt
    assert store.take(backend, enc, [1, 9], 1, 1) == (None, 0, None)  # only the start token shared
    assert id(enc) in store.items  # nothing was handed over


def test_the_store_keeps_the_most_recent_encoder_outputs():
    store = KeptCaches(2)
    encs = [_encoded() for _ in range(3)]
    for e in encs:
        store.keep(_kept(e, [1, 2]))
    assert list(store.items) == [id(encs[1]), id(encs[2])]
    assert len(KeptCaches(0).items) == 0


def test_inference_keeps_a_batch_1_run_and_drops_a_reordered_one():
    backend, store, enc = ListBackend(), KeptCaches(2), _encoded()
    run = Inference(backend, store, enc, [1], 1, 1, reuse=True, capture_attention=False, capture_lens=False)
    run.start(1)
    ids = torch.tensor([[1]])
    out = run.step(ids, ids)
    run.advance(out, None)
    ids2 = torch.tensor([[1, 3]])
    run.step(ids2, ids2[:, -1:])
    run.finish()
    assert store.items[id(enc)].ids.tolist() == [1, 3] and store.items[id(enc)].cache == [1, 3]

    other = _encoded()
    run = Inference(backend, store, other, [1], 1, 1, reuse=True, capture_attention=False, capture_lens=False)
    run.start(1)
    out = run.step(ids, ids)
    run.advance(out, torch.tensor([0]))  # beams reorder the cache: it is not kept
    run.finish()
    assert id(other) not in store.items
