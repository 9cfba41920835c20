"""The decoding loop: backend step -> processors -> strategy -> events.

``Engine(backend).run(encoded, prompt, options)`` is a generator of plain-data events
(``core.events``): one ``StepEvent`` per emitted token (greedy, sampling), one
``BeamEvent`` per beam-search step followed by the best hypothesis's StepEvents, and a
final ``Finished``. The loop is short because each role is an object (openai/whisper
``decoding.py``): the backend runs the model, the processors shape the scores
(``core.processors``), the strategy chooses tokens and keeps hypotheses
(``core.strategies``), the reporter turns a step into events (``core.report``).

``EncoderCache`` keeps recent encoder outputs so that re-decoding the same input with
other options skips the encoder (DESIGN.md: "encoding happens once per input").

Forks and KV-cache reuse: ``run(..., forced_ids=...)`` forces the first generated tokens
(``core.strategies.forced``) and the strategy continues from there. The engine keeps the
last batch-1 run's fed token ids and final KV cache per encoder output (``KeptCache``, for
the ``kept_caches`` most recent encoder outputs, so each segment of a segmented input has
its own); a later run on the same ``encoded`` object whose prompt + forced ids share a
prefix with them takes that cache, truncated to the shared prefix
(``Backend.truncate_cache``), and feeds only the rest.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator, Sequence

import torch

from core.backends.base import Backend, DecoderPrompt, EncoderOutput
from core.events import Event, Finished, RunStats
from core.options import DecodingOptions
from core.processors import ChainContext, build_processors, split_hard_rules
from core.report import RowReport, StepReporter, StepTensors
from core.strategies import make_strategy
from core.strategies.forced import ForcedTokens, check_forced_ids


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
    """

    encoded: EncoderOutput
    ids: torch.Tensor
    cache: Any
    hidden: list[torch.Tensor] | None


class Engine:
    """Runs one decoding strategy over a backend.

    Args:
        backend: any ``core.backends.base.Backend``.
        kept_caches: how many encoder outputs keep the KV cache of their last batch-1
            run for reuse (``run``'s ``reuse_cache``); 0 keeps none. One lean Whisper-base
            cache is about 11 MB (448 positions preallocated).

    Attributes:
        kept: ``id(encoded)`` -> its ``KeptCache``, least recently stored first.
    """

    def __init__(self, backend: Backend, kept_caches: int = 4):
        self.backend = backend
        self.kept_caches = int(kept_caches)
        self.kept: OrderedDict[int, KeptCache] = OrderedDict()

    def run(
        self,
        encoded: EncoderOutput,
        prompt: DecoderPrompt,
        options: DecodingOptions,
        *,
        cancel: Callable[[], bool] | None = None,
        step_offset: int = 0,
        segment: int = 0,
        source_offset: int = 0,
        forced_ids: Sequence[int] = (),
        reuse_cache: bool = True,
    ) -> Iterator[Event]:
        """Decode ``encoded`` and yield events as they happen.

        Args:
            encoded: the encoder output (see ``Backend.encode``), reused as is.
            prompt: forced prefix, EOS id and hard rules.
            options: decoding options; validated here.
            cancel: polled between decoder steps; when it returns True the run ends with
                ``Finished(cancelled=True, reason="cancelled")``.
            step_offset, segment, source_offset: copied into the events (for inputs
                decoded in several segments).
            forced_ids: token ids forced as the first generated tokens (after the prompt),
                each reported as a StepEvent with ``forced=True`` and its probabilities
                under the model; then the options' strategy continues from prompt + forced
                ids (``core.strategies.forced``: what they count as for the processors and
                beam search's length penalty). They count against ``max_new_tokens``.
            reuse_cache: take the KV cache the last batch-1 run on this same ``encoded``
                object left (``self.kept[id(encoded)]``), truncated to the longest prefix its fed ids
                share with prompt + ``forced_ids`` (keeping one shared token to feed again,
                so the first step has logits), and feed only the rest. Forced tokens inside
                the reused part are not reported again: the first StepEvent is the first
                forced token after it (steps keep their numbers). Reuse happens only when
                the backend has ``truncate_cache``, the shared prefix covers the whole
                prompt and this run's first step is batch 1: greedy, sampling, mirostat,
                and any strategy after forced tokens (beam, diverse beam and contrastive
                search without forced ids start at batch > 1 and would reuse the prompt
                alone: they skip it). The cache a run ends with is kept whatever this flag
                says, when the run's last step was batch 1 (a run that went to beams or
                contrastive rows keeps nothing, and leaves the older kept cache, unless it
                took it). Reuse gives the same tokens and probabilities as no reuse (to
                float rounding).

        Yields:
            StepEvent / BeamEvent per step, then exactly one Finished whose
            ``token_ids`` are the generated ids (forced ids included; no prompt, no EOS)
            and whose stats give ``reused_tokens`` (cache positions reused) and
            ``first_token_s`` (seconds from the call to the first StepEvent).

        Raises:
            ValueError: for invalid options, an empty prompt, or a forced id that is EOS or
                outside the vocabulary.
        """
        requested = time.perf_counter()
        rules, processors = self.processors(encoded, prompt, options)
        max_new = min(options.max_new_tokens, prompt.max_new_tokens or options.max_new_tokens)
        forced = check_forced_ids(forced_ids, prompt.eos_token_id, self.backend.vocab_size)[:max_new]
        strategy = make_strategy(options)
        if forced:
            strategy = ForcedTokens(strategy, forced)
        report = StepReporter(
            self.backend.token_text, self.backend.decode, top_k_report=options.top_k_report,
            capture_attention=options.capture_attention, source_len=encoded.source_len,
            step_offset=step_offset, segment=segment, source_offset=source_offset,
        )
        row_reports: list[list[RowReport]] = []  # per step and beam row, for beam search's late StepEvents
        beams_from = 0  # the step of row_reports[0] (forced steps come first)
        started = time.perf_counter()
        input_ids = strategy.start(prompt.prompt_ids, prompt.eos_token_id, max_new)
        known = list(prompt.prompt_ids) + list(forced)
        cache, reused, reused_hidden = self._take_kept(encoded, known, len(prompt.prompt_ids), input_ids.shape[0],
                                                       reuse_cache)
        first_step = max(0, reused + 1 - len(prompt.prompt_ids))  # forced tokens the reused part already holds
        if first_step:
            input_ids = strategy.skip(first_step, reused_hidden)
        if cache is None:
            cache = self.backend.init_cache(encoded, strategy.batch_size)
        new_ids = input_ids[:, reused:]  # the prompt first, then one token per hypothesis per step
        # what this run's cache holds, while it is batch 1 and never reordered (kept at the end)
        kept: KeptCache | None = KeptCache(
            encoded, torch.tensor(known[:reused], dtype=torch.long), cache,
            None if reused and reused_hidden is None else [] if not reused else [reused_hidden[0]],
        )
        first_token_s = 0.0
        cancelled = False
        previous: StepTensors | None = None  # contrastive search reports a token one step late
        lens_kw = {"capture_lens": True} if options.capture_lens else {}  # backends without the lens never see it
        for t in itertools.count(first_step):
            if cancel is not None and cancel():
                cancelled = True
                break
            try:
                out = self.backend.step(new_ids, cache, options.capture_attention, **lens_kw)
            except TypeError as exc:
                if lens_kw and "capture_lens" in str(exc):
                    raise RuntimeError(f"{self.backend.name} gives no logit lens; turn capture_lens off") from exc
                raise
            kept = _extend(kept, input_ids, new_ids, out)
            # the raw distribution: logits with the hard rules alone
            raw_scores = rules(input_ids, out.logits)
            raw_probs = torch.softmax(raw_scores, dim=-1)
            # the processed scores the strategy chooses from (beam search works on log-probabilities),
            # keeping each stage's output for the sampler-chain view
            chain_input = rules(input_ids, torch.log_softmax(out.logits, dim=-1)) if strategy.uses_log_probs else raw_scores
            scores, stages = processors.trace(input_ids, chain_input)
            probs = torch.softmax(scores, dim=-1) if processors or strategy.uses_log_probs else raw_probs
            lens = _lens_logp(rules, input_ids, out.lens_logits) if options.capture_lens else None
            if options.capture_lens and lens is None:
                raise RuntimeError(f"{self.backend.name} gives no logit lens; turn capture_lens off")
            current = StepTensors(probs, raw_probs, out.cross_attention, stages, lens)
            update = strategy.update(input_ids, scores, probs, raw_probs, hidden_states=out.hidden_states)
            if update.emitted is not None:  # greedy / sampling / contrastive: the token is final now
                source = current if update.emitted.step == t else previous
                first_token_s = first_token_s or time.perf_counter() - requested
                emitted = update.emitted
                yield report.step_event(emitted, report.row_report(source, emitted.row, (emitted.token_id,)))
            if update.beams is not None:  # beam search: which beam wins is known at the end
                beams_from = beams_from if row_reports else t
                # the lens of a row keeps the tokens its candidates chose (one of them may be the output's)
                chosen: dict[int, list[int]] = {}
                for node in (update.nodes or ()) if lens is not None else ():
                    chosen.setdefault(node.row, []).append(node.token)
                row_reports.append([report.row_report(current, r, chosen.get(r, ()))
                                    for r in range(current.probs.shape[0])])
                yield report.beam_event(t, *update.beams, nodes=update.nodes, rows=row_reports[-1],
                                        best=update.best_node)
            if update.done:
                break
            previous = current
            cache = out.cache
            if update.beam_idx is not None:
                kept = None  # a reordered cache (beams, contrastive rows) is not kept
                cache = self.backend.reorder_cache(cache, update.beam_idx)
            input_ids, new_ids = update.input_ids, update.input_ids[:, -1:]
        if kept is not None and len(kept.ids) > 0 and getattr(self.backend, "truncate_cache", None) is not None:
            self._keep(kept)
        result = strategy.finalize()
        for rec in result.records:
            first_token_s = first_token_s or time.perf_counter() - requested
            yield report.step_event(rec, row_reports[rec.step - beams_from][rec.row])
        stats = RunStats(decode_s=time.perf_counter() - started, n_tokens=len(result.token_ids),
                         reused_tokens=reused, first_token_s=first_token_s)
        yield Finished(
            text=self.backend.decode(result.token_ids),
            token_ids=result.token_ids,
            stats=stats,
            cancelled=cancelled,
            reason="cancelled" if cancelled else result.reason,
        )

    def processors(self, encoded: EncoderOutput, prompt: DecoderPrompt, options: DecodingOptions) -> tuple[list, list]:
        """The hard rules and the processor chain that :meth:`run` would decode this prompt with.

        A task calls it for a segment it skips without decoding (speech: a window of digital
        silence), so that options which cannot apply to the input are refused whatever the
        input holds.

        Returns:
            (hard rules, the rest of the chain): the rules shape the raw distribution too,
            the rest only the processed one.

        Raises:
            ValueError: invalid options, an empty prompt, or a stage that cannot apply here
                (e.g. the encoder repetition penalty outside translation).
        """
        options.validate()
        if not prompt.prompt_ids:
            raise ValueError("the decoder prompt is empty; give at least the decoder start token")
        context = ChainContext(tokenize=self.backend.tokenize, encoder_input_ids=_source_ids(encoded, prompt))
        return split_hard_rules(build_processors(options, prompt, len(prompt.prompt_ids), context))

    def _take_kept(
        self, encoded: EncoderOutput, known: list[int], prompt_len: int, batch: int, reuse: bool
    ) -> tuple[Any, int, torch.Tensor | None]:
        """The kept cache truncated for a run that feeds ``known`` (prompt + forced ids)
        first, or (None, 0, None) when it cannot be reused (see ``run``'s ``reuse_cache``).

        Returns:
            (cache holding the first ``reused`` ids of ``known``, reused, their hidden states
            float32 (1, reused, d_model) or None). The kept cache is handed over (the
            backend may change it in place), so it leaves ``self.kept``.
        """
        kept, truncate = self.kept.get(id(encoded)), getattr(self.backend, "truncate_cache", None)
        if not reuse or kept is None or kept.encoded is not encoded or batch != 1 or truncate is None:
            return None, 0, None
        shared = 0
        for a, b in zip(kept.ids.tolist(), known):
            if a != b:
                break
            shared += 1
        if shared < prompt_len or shared < 2:  # another prompt, or nothing but the start token
            return None, 0, None
        reused = shared - 1  # feed the last shared token again: the first step needs its logits
        del self.kept[id(encoded)]
        hidden = torch.cat(kept.hidden, dim=0)[None, :reused] if kept.hidden else None
        return truncate(kept.cache, reused), reused, hidden

    def _keep(self, kept: KeptCache) -> None:
        """Store ``kept`` for its encoder output, dropping the oldest beyond ``kept_caches``."""
        self.kept[id(kept.encoded)] = kept  # kept.encoded stays referenced, so its id is not reused
        self.kept.move_to_end(id(kept.encoded))
        while len(self.kept) > self.kept_caches:
            self.kept.popitem(last=False)


def _extend(kept: KeptCache | None, input_ids: torch.Tensor, new_ids: torch.Tensor, out) -> KeptCache | None:
    """``kept`` after a step that fed ``new_ids`` (the last columns of ``input_ids``), or
    None once the run is not batch 1 (its cache is then not kept)."""
    if kept is None or input_ids.shape[0] != 1:
        return None
    kept.ids, kept.cache = input_ids[0], out.cache
    if kept.hidden is not None and out.hidden_states is None:
        kept.hidden = None
    elif kept.hidden is not None:
        kept.hidden.append(out.hidden_states[0, -new_ids.shape[1]:])
    return kept


def _lens_logp(rules, input_ids: torch.Tensor, lens_logits: torch.Tensor | None) -> torch.Tensor | None:
    """The logit lens as log-probabilities, float32 (batch, layers, vocab): each layer's
    logits with the hard rules (as the raw distribution), log_softmax; None without a lens."""
    if lens_logits is None:
        return None
    b, n_layers, vocab = lens_logits.shape
    scores = rules(input_ids.repeat_interleave(n_layers, dim=0), lens_logits.reshape(b * n_layers, vocab))
    return torch.log_softmax(scores, dim=-1).reshape(b, n_layers, vocab)


def _source_ids(encoded: EncoderOutput, prompt: DecoderPrompt) -> torch.Tensor | None:
    """The source token ids for the encoder stages of the chain, int64 (1, n), or None.

    The EOS id is left out: with it, the encoder no-repeat n-gram of size 1 would forbid
    ending (the source ends with EOS) and the encoder repetition penalty would push EOS.
    """
    ids = encoded.extras.get("source_ids")
    if ids is None:
        return None
    ids = torch.as_tensor(ids).reshape(1, -1)
    return ids[ids != prompt.eos_token_id].reshape(1, -1)


class EncoderCache:
    """A small LRU of encoder outputs keyed by a hashable input key (e.g. a hash of the
    audio samples plus the model name).

    Args:
        max_items: how many encoder outputs to keep (each Whisper output is
            1500 x d_model float32, 2-8 MB).

    Raises:
        ValueError: if ``max_items`` < 1.
    """

    def __init__(self, max_items: int = 4):
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self.max_items = max_items
        self._items: OrderedDict[Hashable, EncoderOutput] = OrderedDict()

    def get_or_encode(
        self, key: Hashable, encode_fn: Callable[[], EncoderOutput]
    ) -> tuple[EncoderOutput, bool]:
        """The cached output for ``key``, or ``encode_fn()`` stored under it.

        Returns:
            (encoder output, True if it came from the cache).
        """
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key], True
        encoded = encode_fn()
        self._items[key] = encoded
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)
        return encoded, False

    def clear(self) -> None:
        """Forget every cached output (e.g. when the model changes)."""
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
