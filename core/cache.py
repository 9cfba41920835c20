"""The decoder's calls and its KV cache, kept between runs for forks (as openai/whisper's
``Inference`` owns the cache in ``decoding.py``).

``KeptCaches`` remembers, per encoder output, the token ids the last batch-1 run fed and the
KV cache it ended with (``KeptCache``), for the ``max_items`` most recent encoder outputs (so
each segment of a segmented input has its own). ``Inference`` is one run's side of it: it
takes a kept cache whose ids share a prefix with the run's prompt + forced ids (truncated
to that prefix, ``Backend.truncate_cache``), runs the decoder step by step, reorders the
cache for beams, and at the end keeps what the run's cache holds if the run stayed batch 1.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from core.backends.base import Backend, EncoderOutput, StepOutput


@dataclass
class KeptCache:
    """The KV cache a batch-1 run ended with, for the next run to reuse.

    Attributes:
        encoded: the encoder output it was computed on (reuse needs the same object).
        ids: int64 (n,): the token ids the cache holds, prompt first (every token fed, in order).
        cache: the backend's cache after feeding ``ids`` (batch 1).
        hidden: float32 (n_i, d_model) chunks, n in all: the decoder's last-layer hidden
            states of those positions (for a contrastive continuation), or None if the
            backend gives none.
        run_ids: the whole run the cache comes from: prompt + generated ids (+ the EOS id
            when it ended by EOS), or None; a later speculative run's "branch" draft (a fork
            of that run) drafts from it.
    """

    encoded: EncoderOutput
    ids: torch.Tensor
    cache: Any
    hidden: list[torch.Tensor] | None
    run_ids: list[int] | None = None

    def extend(self, input_ids: torch.Tensor, new_ids: torch.Tensor, out: StepOutput) -> KeptCache | None:
        """This record after a step that fed ``new_ids`` (the last columns of ``input_ids``),
        or None once the run is not batch 1 (its cache is then not kept)."""
        if input_ids.shape[0] != 1:
            return None
        self.ids, self.cache = input_ids[0], out.cache
        if self.hidden is not None and out.hidden_states is None:
            self.hidden = None
        elif self.hidden is not None:
            self.hidden.append(out.hidden_states[0, -new_ids.shape[1]:])
        return self


class KeptCaches:
    """``id(encoded)`` -> the ``KeptCache`` of its last batch-1 run, least recently stored first.

    Args:
        max_items: how many encoder outputs keep a cache; 0 keeps none. One lean Whisper-base
            cache is about 11 MB (448 positions preallocated).
    """

    def __init__(self, max_items: int = 4):
        self.max_items = int(max_items)
        self.items: OrderedDict[int, KeptCache] = OrderedDict()

    def take(self, backend: Backend, encoded: EncoderOutput, known: Sequence[int], prompt_len: int,
             batch: int) -> tuple[Any, int, torch.Tensor | None]:
        """The kept cache of ``encoded`` truncated for a run that feeds ``known`` (prompt +
        forced ids) first, or (None, 0, None) when it cannot be reused: none kept for this
        object, a batch > 1 first step, a backend without ``truncate_cache``, or a shared
        prefix shorter than the prompt or than 2 tokens.

        Returns:
            (cache holding the first ``reused`` ids of ``known``, reused, their hidden states
            float32 (1, reused, d_model) or None). The kept cache is handed over (the
            backend may change it in place), so it leaves the store. One shared token is
            left to feed again, so the first step has logits.
        """
        kept, truncate = self.items.get(id(encoded)), getattr(backend, "truncate_cache", None)
        if kept is None or kept.encoded is not encoded or batch != 1 or truncate is None:
            return None, 0, None
        shared = 0
        for a, b in zip(kept.ids.tolist(), known):
            if a != b:
                break
            shared += 1
        if shared < prompt_len or shared < 2:  # another prompt, or nothing but the start token
            return None, 0, None
        reused = shared - 1  # feed the last shared token again: the first step needs its logits
        del self.items[id(encoded)]
        hidden = torch.cat(kept.hidden, dim=0)[None, :reused] if kept.hidden else None
        return truncate(kept.cache, reused), reused, hidden

    def keep(self, kept: KeptCache) -> None:
        """Store ``kept`` for its encoder output, dropping the oldest beyond ``max_items``."""
        self.items[id(kept.encoded)] = kept  # kept.encoded stays referenced, so its id is not reused
        self.items.move_to_end(id(kept.encoded))
        while len(self.items) > self.max_items:
            self.items.popitem(last=False)


class Inference:
    """One run's decoder calls and KV cache.

    Args:
        backend: the model's ``Backend``.
        store: the engine's ``KeptCaches``.
        encoded: the encoder output of this run.
        known: prompt + forced ids, the tokens the run feeds first whatever the strategy does.
        prompt_len: how many of ``known`` are the prompt.
        batch: the strategy's first-step batch size.
        reuse: take a kept cache (see ``KeptCaches.take``).
        capture_attention, capture_lens: passed to ``Backend.step`` (the lens only when asked,
            so backends without it never see the argument).
        kv_cache: False runs without a KV cache, as a decoder without one does: every step
            feeds the whole prefix (``input_ids``) to an empty cache (``truncate_cache(cache, 0)``
            while the batch size stays, else ``init_cache``), so step t costs about t times a
            cached step (quadratic in all) and gives the same logits; the step's hidden states
            are those of the positions it adds, as with the cache. No kept cache is taken
            or kept; ``truncate`` (speculative decoding) is refused.

    Attributes:
        reused: positions of ``known`` the taken cache already holds (0: a fresh cache).
        reused_hidden: their hidden states, float32 (1, reused, d_model), or None.
    """

    def __init__(self, backend: Backend, store: KeptCaches, encoded: EncoderOutput, known: Sequence[int],
                 prompt_len: int, batch: int, *, reuse: bool, capture_attention: bool, capture_lens: bool,
                 kv_cache: bool = True):
        self.backend, self.store, self.encoded = backend, store, encoded
        self.kv_cache = bool(kv_cache)
        self.cache, self.reused, self.reused_hidden = (
            store.take(backend, encoded, known, prompt_len, batch) if reuse and kv_cache else (None, 0, None))
        self._capture_attention = capture_attention
        self._empty_batch: int | None = None  # without the KV cache: the batch size of self.cache
        self._lens_kw = {"capture_lens": True} if capture_lens else {}
        # what this run's cache holds, while it is batch 1 and never reordered (kept at the end)
        hidden = ([] if not self.reused else None if self.reused_hidden is None else [self.reused_hidden[0]])
        self._kept: KeptCache | None = KeptCache(
            encoded, torch.tensor(list(known)[:self.reused], dtype=torch.long), None, hidden) if kv_cache else None

    def start(self, batch: int) -> None:
        """A fresh cache for ``batch`` hypotheses unless one was taken."""
        if self.cache is None:
            self.cache = self.backend.init_cache(self.encoded, batch)
            self._empty_batch = batch
        if self._kept is not None:
            self._kept.cache = self.cache

    def step(self, input_ids: torch.Tensor, new_ids: torch.Tensor, **backend_kw) -> StepOutput:
        """Feed ``new_ids`` (the last columns of ``input_ids``, int64 (batch, n)) and return the
        backend's ``StepOutput`` (logits float32 (batch, vocab), cross-attention, the new cache).
        ``backend_kw`` go to ``Backend.step`` as they are (speculative decoding's
        ``all_positions=True``). Without the KV cache (``kv_cache=False``) the whole of
        ``input_ids`` is fed to a fresh cache instead of ``new_ids``.

        Raises:
            RuntimeError: the lens was asked for and the backend gives none.
            TypeError: the backend does not take one of ``backend_kw``.
        """
        n_new = new_ids.shape[1]
        if not self.kv_cache:  # no cache: the decoder re-reads the whole prefix
            self.cache, new_ids = self._emptied(input_ids.shape[0]), input_ids
        try:
            out = self.backend.step(new_ids, self.cache, self._capture_attention, **self._lens_kw, **backend_kw)
        except TypeError as exc:
            if self._lens_kw and "capture_lens" in str(exc):
                raise RuntimeError(f"{self.backend.name} gives no logit lens; turn capture_lens off") from exc
            raise
        if not self.kv_cache and out.hidden_states is not None and out.hidden_states.shape[1] > n_new:
            # the positions this step adds, as with the cache (the prefix's were handed on before)
            out = dataclasses.replace(out, hidden_states=out.hidden_states[:, -n_new:])
        self._kept = self._kept.extend(input_ids, new_ids, out) if self._kept is not None else None
        return out

    def _emptied(self, batch: int) -> Any:
        """Without the KV cache: an empty cache for ``batch`` hypotheses. The last step's cache
        emptied by ``truncate_cache(cache, 0)`` while the batch size stays (what ``init_cache``
        computes once per input, such as cross-attention keys/values, is kept); a new one from
        ``init_cache`` for the first step, a new batch size or a backend without
        ``truncate_cache``."""
        truncate = getattr(self.backend, "truncate_cache", None)
        if self.cache is not None and truncate is not None and self._empty_batch == batch:
            return truncate(self.cache, 0)
        self._empty_batch = batch
        return self.backend.init_cache(self.encoded, batch)

    def advance(self, out: StepOutput, beam_idx: torch.Tensor | None) -> None:
        """Continue from ``out``'s cache, its rows reordered by ``beam_idx`` (beam search,
        contrastive rows; a reordered cache is not kept)."""
        self.cache = out.cache
        if not self.kv_cache:
            return  # the next step starts from a fresh cache
        if beam_idx is not None:
            self._kept = None
            self.cache = self.backend.reorder_cache(self.cache, beam_idx)

    def truncate(self, length: int) -> None:
        """Cut the cache back to its first ``length`` positions (speculative decoding: the
        drafted tokens the target rejected), and what is kept of the run with it.

        Raises:
            AttributeError: the backend has no ``truncate_cache``.
            RuntimeError: the run has no KV cache (``kv_cache=False``).
        """
        if not self.kv_cache:
            raise RuntimeError("a run without the KV cache has no cache to truncate (speculative decoding needs it)")
        self.cache = self.backend.truncate_cache(self.cache, length)
        kept = self._kept
        if kept is not None:
            kept.ids, kept.cache = kept.ids[:length], self.cache
            if kept.hidden:
                kept.hidden = [torch.cat(kept.hidden, dim=0)[:length]]

    def finish(self, run_ids: Sequence[int] | None = None) -> None:
        """Keep the run's cache for the next run on the same encoder output, if the run stayed
        batch 1, fed something and the backend can truncate caches; with it ``run_ids`` (the
        whole run: prompt, generated ids, EOS), for a fork's branch draft."""
        kept = self._kept
        if kept is not None and len(kept.ids) > 0 and getattr(self.backend, "truncate_cache", None) is not None:
            kept.run_ids = None if run_ids is None else [int(t) for t in run_ids]
            self.store.keep(kept)
