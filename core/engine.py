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
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from typing import Callable, Hashable, Iterator

import torch

from core.backends.base import Backend, DecoderPrompt, EncoderOutput
from core.events import Event, Finished, RunStats
from core.options import DecodingOptions
from core.processors import ChainContext, build_processors, split_hard_rules
from core.report import RowReport, StepReporter, StepTensors
from core.strategies import make_strategy


class Engine:
    """Runs one decoding strategy over a backend.

    Args:
        backend: any ``core.backends.base.Backend``.
    """

    def __init__(self, backend: Backend):
        self.backend = backend

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

        Yields:
            StepEvent / BeamEvent per step, then exactly one Finished whose
            ``token_ids`` are the generated ids (no prompt, no EOS).

        Raises:
            ValueError: for invalid options or an empty prompt.
        """
        options.validate()
        if not prompt.prompt_ids:
            raise ValueError("the decoder prompt is empty; give at least the decoder start token")
        max_new = min(options.max_new_tokens, prompt.max_new_tokens or options.max_new_tokens)
        # hard rules (suppressed tokens) shape the raw distribution too; the rest only the processed one
        context = ChainContext(tokenize=self.backend.tokenize, encoder_input_ids=_source_ids(encoded, prompt))
        rules, processors = split_hard_rules(build_processors(options, prompt, len(prompt.prompt_ids), context))
        strategy = make_strategy(options)
        report = StepReporter(
            self.backend.token_text, self.backend.decode, top_k_report=options.top_k_report,
            capture_attention=options.capture_attention, source_len=encoded.source_len,
            step_offset=step_offset, segment=segment, source_offset=source_offset,
        )
        row_reports: list[list[RowReport]] = []  # per step and beam row, for beam search's late StepEvents
        started = time.perf_counter()
        cache = self.backend.init_cache(encoded, strategy.batch_size)
        input_ids = strategy.start(prompt.prompt_ids, prompt.eos_token_id, max_new)
        new_ids = input_ids  # the prompt first, then one token per hypothesis per step
        cancelled = False
        previous: StepTensors | None = None  # contrastive search reports a token one step late
        for t in itertools.count():
            if cancel is not None and cancel():
                cancelled = True
                break
            out = self.backend.step(new_ids, cache, options.capture_attention)
            # the raw distribution: logits with the hard rules alone
            raw_scores = rules(input_ids, out.logits)
            raw_probs = torch.softmax(raw_scores, dim=-1)
            # the processed scores the strategy chooses from (beam search works on log-probabilities),
            # keeping each stage's output for the sampler-chain view
            chain_input = rules(input_ids, torch.log_softmax(out.logits, dim=-1)) if strategy.uses_log_probs else raw_scores
            scores, stages = processors.trace(input_ids, chain_input)
            probs = torch.softmax(scores, dim=-1) if processors or strategy.uses_log_probs else raw_probs
            current = StepTensors(probs, raw_probs, out.cross_attention, stages)
            update = strategy.update(input_ids, scores, probs, raw_probs, hidden_states=out.hidden_states)
            if update.emitted is not None:  # greedy / sampling / contrastive: the token is final now
                source = current if update.emitted.step == t else previous
                yield report.step_event(update.emitted, report.row_report(source, update.emitted.row))
            if update.beams is not None:  # beam search: which beam wins is known at the end
                row_reports.append([report.row_report(current, r) for r in range(strategy.batch_size)])
                yield report.beam_event(t, *update.beams, nodes=update.nodes, rows=row_reports[-1],
                                        best=update.best_node)
            if update.done:
                break
            previous = current
            cache = out.cache
            if update.beam_idx is not None:
                cache = self.backend.reorder_cache(cache, update.beam_idx)
            input_ids, new_ids = update.input_ids, update.input_ids[:, -1:]
        result = strategy.finalize()
        for rec in result.records:
            yield report.step_event(rec, row_reports[rec.step][rec.row])
        stats = RunStats(decode_s=time.perf_counter() - started, n_tokens=len(result.token_ids))
        yield Finished(
            text=self.backend.decode(result.token_ids),
            token_ids=result.token_ids,
            stats=stats,
            cancelled=cancelled,
            reason="cancelled" if cancelled else result.reason,
        )


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
