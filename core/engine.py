"""The decoding loop: backend step -> processors -> strategy -> events.

``Engine(backend).run(encoded, prompt, options)`` is a generator of plain-data events
(``core.events``): one ``StepEvent`` per emitted token (greedy, sampling), one
``BeamEvent`` per beam-search step followed by the best hypothesis's StepEvents, and a
final ``Finished``. The loop is short because each role is an object (openai/whisper
``decoding.py``): the backend runs the model, the processors shape the scores
(``core.processors``), the strategy chooses tokens and keeps hypotheses
(``core.strategies``), the reporter turns a step into events (``core.report.RunEvents``),
and ``core.cache.Inference`` runs the decoder and owns the KV cache (as whisper's ``Inference``).

``EncoderCache`` keeps recent encoder outputs so that re-decoding the same input with
other options skips the encoder (DESIGN.md: "encoding happens once per input").

Forks and KV-cache reuse: ``run(..., forced_ids=...)`` forces the first generated tokens
(``core.strategies.forced``) and the strategy continues from there. The engine keeps the
last batch-1 run's fed token ids and final KV cache per encoder output (``core.cache``, for
the ``kept_caches`` most recent encoder outputs, so each segment of a segmented input has
its own); a later run on the same ``encoded`` object whose prompt + forced ids share a
prefix with them takes that cache, truncated to the shared prefix
(``Backend.truncate_cache``), and feeds only the rest.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from typing import Callable, Hashable, Iterator, Sequence

from core.backends.base import Backend, DecoderPrompt, EncoderOutput
from core.backends.step_threads import one_thread
from core.cache import Inference, KeptCache, KeptCaches
from core.events import Event, Finished, Placement, RunStats
from core.options import DecodingOptions
from core.processors import ChainContext, build_processors, split_hard_rules
from core.report import RunEvents, StepReporter
from core.scoring import Scorer, compact_softmax_exact, source_ids  # noqa: F401 (source_ids re-exported)
from core.speculative.draft import Companion, Draft
from core.strategies import make_strategy
from core.strategies.greedy import GreedySearch
from core.strategies.forced import ForcedTokens, check_forced_ids


class Engine:
    """Runs one decoding strategy over a backend.

    Args:
        backend: any ``core.backends.base.Backend``.
        kept_caches: how many encoder outputs keep the KV cache of their last batch-1
            run for reuse (``run``'s ``reuse_cache``); 0 keeps none. One lean Whisper-base
            cache is about 11 MB (448 positions preallocated).
        compact: let a shortlist's steps run on compact rows (``StepOutput.logit_ids``: the
            scores, the argmax and the report read the ~5,600 columns of the shortlist's blocks
            instead of 32,000) where that gives the same events bit for bit: a backend with
            ``compact_logits``, greedy search without forced tokens, the hard rules alone (no
            chain stage), no lens, and a softmax that sums compact rows in the full row's order
            here (``core.scoring.compact_softmax_exact``). False: always full rows (the
            reference the tests compare with).

    Attributes:
        caches: the KV caches kept for forks (``core.cache.KeptCaches``).
    """

    def __init__(self, backend: Backend, kept_caches: int = 4, *, compact: bool = True):
        self.backend = backend
        self.caches = KeptCaches(kept_caches)
        self.compact = bool(compact)

    @property
    def kept_caches(self) -> int:
        """How many encoder outputs keep a KV cache (the constructor's ``kept_caches``)."""
        return self.caches.max_items

    @property
    def kept(self) -> OrderedDict[int, KeptCache]:
        """``id(encoded)`` -> its ``KeptCache``, least recently stored first."""
        return self.caches.items

    def run(
        self,
        encoded: EncoderOutput,
        prompt: DecoderPrompt,
        options: DecodingOptions,
        *,
        cancel: Callable[[], bool] | None = None,
        place: Placement | None = None,
        forced_ids: Sequence[int] = (),
        reuse_cache: bool = True,
        draft: Draft | None = None,
        amateur: Companion | None = None,
        **place_keywords: int,
    ) -> Iterator[Event]:
        """Decode ``encoded`` and yield events as they happen.

        Args:
            encoded: the encoder output (see ``Backend.encode``), reused as is.
            prompt: forced prefix, EOS id and hard rules.
            options: decoding options; validated here.
            cancel: polled between decoder steps; when it returns True the run ends with
                ``Finished(cancelled=True, reason="cancelled")``.
            place: where the run's events sit in an input decoded in segments
                (``core.events.Placement``: step_offset, segment, source_offset), copied into
                them; None: a run on its own (all 0).
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
            draft: speculative decoding's draft (``options.strategy == "speculative"``;
                ``core.speculative.draft.Draft``), for the drafts a task builds ("branch",
                "model:NAME"); None builds the one ``options.draft`` names ("ngram",
                "early-exit:L"). The speculative run (``core.speculative.loop``) yields the same
                StepEvents as plain decoding with the verification's strategy, marked
                (``StepEvent.speculation``), a ``SpeculationRound`` after each drafted round,
                and ``Finished.stats.speculative``.
            amateur: contrastive decoding's amateur model (``options.contrastive_amateur`` names
                a model; ``core.speculative.draft.Companion``, built by the task), handed to the
                chain (``ChainContext.amateur``). A layer amateur (DoLa) needs none: the engine asks
                the backend for the logit lens while that stage runs.
            place_keywords: ``step_offset=``, ``segment=``, ``source_offset=``: the older
                spelling of ``place``, still taken (the three travel together, so they are one
                argument; a caller passing them as keywords keeps working).

        Yields:
            StepEvent / BeamEvent per step, then exactly one Finished whose
            ``token_ids`` are the generated ids (forced ids included; no prompt, no EOS)
            and whose stats give ``reused_tokens`` (cache positions reused) and
            ``first_token_s`` (seconds from the call to the first StepEvent).

        Raises:
            ValueError: for invalid options, an empty prompt, or a forced id that is EOS or
                outside the vocabulary.
            TypeError: an unknown keyword, or both ``place`` and its keywords.
        """
        requested = time.perf_counter()
        place = Placement.of(place, place_keywords)
        if options.strategy == "speculative":
            from core.speculative.loop import SpeculativeRun

            run = SpeculativeRun(self, encoded, prompt, options, draft=draft, cancel=cancel, place=place,
                                 forced_ids=forced_ids, reuse_cache=reuse_cache, requested=requested, amateur=amateur)
            yield from run.events()
            return
        rules, processors = self.processors(encoded, prompt, options, amateur=amateur)
        max_new = min(options.max_new_tokens, prompt.max_new_tokens or options.max_new_tokens)
        forced = check_forced_ids(forced_ids, prompt.eos_token_id, self.backend.vocab_size)[:max_new]
        strategy = ForcedTokens(make_strategy(options), forced) if forced else make_strategy(options)
        scorer = Scorer(rules, processors, strategy.uses_log_probs, options.capture_lens, self.backend.name,
                        self.backend.vocab_size)
        compact = (self.compact and not forced and type(strategy) is GreedySearch and scorer.takes_compact
                   and not processors.needs_lens and getattr(self.backend, "compact_logits", False)
                   and compact_softmax_exact(self.backend.vocab_size))
        step_kw = {"compact": True} if compact else {}
        events = RunEvents(StepReporter(
            self.backend.token_text, self.backend.decode, top_k_report=options.top_k_report,
            capture_attention=options.capture_attention, source_len=encoded.source_len, place=place,
        ), requested)
        started = time.perf_counter()
        input_ids = strategy.start(prompt.prompt_ids, prompt.eos_token_id, max_new)
        inference = Inference(self.backend, self.caches, encoded, list(prompt.prompt_ids) + list(forced),
                              len(prompt.prompt_ids), input_ids.shape[0], reuse=reuse_cache,
                              capture_attention=options.capture_attention,
                              capture_lens=options.capture_lens or processors.needs_lens,
                              kv_cache=options.kv_cache)
        first_step = max(0, inference.reused + 1 - len(prompt.prompt_ids))  # forced tokens the reused part holds
        if first_step:
            input_ids = strategy.skip(first_step, inference.reused_hidden)
        inference.start(strategy.batch_size)
        new_ids = input_ids[:, inference.reused:]  # the prompt first, then one token per hypothesis per step
        cancelled = False
        for t in itertools.count(first_step):
            if cancel is not None and cancel():
                cancelled = True
                break
            step_started = time.perf_counter()
            out = inference.step(input_ids, new_ids, **step_kw)
            step_ms = 1000.0 * (time.perf_counter() - step_started)  # StepEvent.time_ms: the decoder call
            # the per-token work over few rows on one torch thread (``step_threads.one_thread``): with
            # several threads its index_fill/amax each opened an OpenMP region per token, whose pool
            # then spins on the core the split step's worker needs; the events go out after the
            # block, so the consumer keeps its threads
            with one_thread(input_ids.shape[0]):
                scores, current = scorer.score(input_ids, out)
                if current.ids is None:
                    update = strategy.update(input_ids, scores, current.probs, current.raw_probs,
                                             hidden_states=out.hidden_states)
                else:  # compact rows (greedy): the strategy maps the chosen column to its id
                    update = strategy.update(input_ids, scores, current.probs, current.raw_probs,
                                             hidden_states=out.hidden_states, columns=current.ids)
                step_events = list(events.step(t, update, current, step_ms))
            yield from step_events
            if update.done:
                break
            inference.advance(out, update.beam_idx)
            input_ids, new_ids = update.input_ids, update.input_ids[:, -1:]
        result = strategy.finalize()
        # the whole run, for a later run's branch draft (speculative decoding after a fork)
        inference.finish(run_ids=list(prompt.prompt_ids) + list(result.token_ids)
                         + ([prompt.eos_token_id] if result.reason == "eos" else []))
        yield from events.finish(result)
        stats = RunStats(decode_s=time.perf_counter() - started, n_tokens=len(result.token_ids),
                         reused_tokens=inference.reused, first_token_s=events.first_token_s)
        yield Finished(
            text=self.backend.decode(result.token_ids),
            token_ids=result.token_ids,
            stats=stats,
            cancelled=cancelled,
            reason="cancelled" if cancelled else result.reason,
        )

    def processors(self, encoded: EncoderOutput, prompt: DecoderPrompt, options: DecodingOptions,
                   amateur: Companion | None = None) -> tuple[list, list]:
        """The hard rules and the processor chain that :meth:`run` would decode this prompt with.

        A task calls it for a segment it skips without decoding (speech: a window of digital
        silence), so that options which cannot apply to the input are refused whatever the
        input holds.

        Args:
            amateur: contrastive decoding's amateur model (see :meth:`run`), for the chain's
                context; without it a model amateur's stage raises at its first call.

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
        context = ChainContext(tokenize=self.backend.tokenize, encoder_input_ids=source_ids(encoded, prompt),
                               amateur=amateur)
        return split_hard_rules(build_processors(options, prompt, len(prompt.prompt_ids), context))


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
