"""Forced tokens: decode a given continuation first, then let a strategy go on from there.

This is how a fork works ("what if the model had written X here?"): the first
``len(forced_ids)`` generated tokens are forced, each reported as a StepEvent with its real
probabilities under the model (``StepEvent.forced``), and then the options' strategy
(greedy, sampling, beam, diverse beam, contrastive, mirostat) continues, its hypotheses
starting from prompt + forced tokens. The same idea as openai/whisper's ``prefix``
(``whisper/decoding.py``: the prefix tokens are appended to the initial tokens) and
transformers' ``decoder_input_ids`` given to ``generate()``.

``ForcedTokens(inner, forced_ids)`` wraps the inner strategy:

* engine steps 0 .. F-1 (F = number of forced tokens) run at batch 1; at step t the
  forced token ``forced_ids[t]`` is emitted with its probability in that step's
  distribution (processed and raw; a forced token the filters removed has processed
  probability 0, one a hard rule removed raw probability 0 too);
* at step F the inner strategy starts with ``prompt + forced_ids`` as its prompt and
  gets that step's distribution as its first one, repeated over its ``batch_size`` rows
  (all rows are the same hypothesis; the KV cache is expanded from the one row by the
  inner strategy's first ``beam_idx``, mapped to row 0). A contrastive inner strategy is
  given the hidden states of every context position (prompt and forced tokens,
  concatenated over the forced steps);
* the inner strategy's ``TokenRecord.step`` (and beam-tree node steps) are offset by F,
  so every record names the engine step whose distribution it came from; a record of
  step F names row 0 (the engine's batch is 1 there);
* its ``max_new_tokens`` is what is left after the forced tokens (the forced tokens
  count against ``max_new_tokens``).

What the forced tokens count as:

* for the logits processors (repetition penalty, no-repeat n-gram, min new tokens,
  begin-suppressed tokens, ...) they are generated tokens, at the positions they hold:
  the engine builds the processors with the task prompt's length, so forcing a run's own
  tokens reproduces that run exactly (openai/whisper instead moves ``sample_begin`` past
  the prefix, so its ``SuppressBlank`` applies after it);
* for beam search's length penalty they are prompt (transformers' ``decoder_input_ids``,
  openai/whisper's prefix): finished hypotheses are ranked by
  ``sum log p / (tokens generated after the forced ones) ** length_penalty``, and the
  cumulative scores of the BeamEvents leave the forced tokens out. The hypotheses'
  ``token_ids`` (BeamEvent, ``Result``) include the forced tokens.

The engine may tell the wrapper that a reused KV cache already holds the first forced
tokens (``skip``): those are not reported again.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import torch

from core.report import TokenRecord
from core.strategies.base import Result, Strategy, Update


def check_forced_ids(forced_ids: Sequence[int], eos_token_id: int, vocab_size: int) -> tuple[int, ...]:
    """``forced_ids`` as a tuple of ints, checked.

    Raises:
        ValueError: an id that is not an integer, is outside ``[0, vocab_size)``, or is the
            EOS id (a run that must end cannot continue; end the branch instead).
    """
    out = []
    for i, token in enumerate(forced_ids):
        if isinstance(token, bool) or int(token) != token:
            raise ValueError(f"forced token {i} must be an integer id, got {token!r}")
        token = int(token)
        if not 0 <= token < vocab_size:
            raise ValueError(f"forced token {i} is id {token}, outside the vocabulary (0..{vocab_size - 1})")
        if token == eos_token_id:
            raise ValueError(
                f"forced token {i} is the end-of-sequence id {eos_token_id}; a forced EOS would end the run "
                "before anything continues (force the tokens before it instead)"
            )
        out.append(token)
    return tuple(out)


class ForcedTokens:
    """Emit ``forced_ids`` one per step at batch 1, then run ``inner`` (see the module docstring).

    Args:
        inner: the strategy that continues after the forced tokens (not started yet).
        forced_ids: the forced token ids, at least one (check them with
            :func:`check_forced_ids`).

    Attributes:
        batch_size: 1 while forced tokens are emitted, then ``inner.batch_size``.
        uses_log_probs: ``inner.uses_log_probs`` (the processors see the same kind of
            scores throughout the run).

    Raises:
        ValueError: if ``forced_ids`` is empty.
    """

    def __init__(self, inner: Strategy, forced_ids: Sequence[int]):
        if not forced_ids:
            raise ValueError("ForcedTokens needs at least one forced token")
        self.inner = inner
        self.forced = tuple(int(t) for t in forced_ids)
        self.uses_log_probs = inner.uses_log_probs
        self.n_forced = len(self.forced)
        self.t = 0  # forced tokens fed or emitted so far (the next update's forced index)
        self.started = False  # whether the inner strategy runs
        self.hidden: list[torch.Tensor] = []  # row 0's hidden states of every position fed, (n, d_model) each
        self.reason = "max_tokens"

    @property
    def batch_size(self) -> int:
        return self.inner.batch_size if self.started else 1

    def start(self, prompt_ids: Sequence[int], eos_token_id: int, max_new_tokens: int) -> torch.Tensor:
        """int64 (1, prompt_len): the prompt, one row. ``max_new_tokens`` counts the forced
        tokens; if it is not more than them, the run ends after the first
        ``max_new_tokens`` forced tokens."""
        self.prompt_ids = tuple(int(t) for t in prompt_ids)
        self.eos_token_id, self.max_new_tokens = eos_token_id, max_new_tokens
        self.limit = min(self.n_forced, max_new_tokens)
        return torch.tensor([list(self.prompt_ids)], dtype=torch.long)

    def skip(self, n: int, hidden_states: torch.Tensor | None = None) -> torch.Tensor:
        """The first ``n`` forced tokens are already in a reused KV cache (or fed with the
        reused part): they are not emitted. Call once, after ``start``, before the first
        ``update``.

        Args:
            n: forced tokens to skip, 0 <= n <= ``len(forced_ids)``.
            hidden_states: float32 (1, positions, d_model): the hidden states of the
                positions the reused cache holds (for a contrastive inner strategy), or None.

        Returns:
            int64 (1, prompt_len + n): the context so far.

        Raises:
            ValueError: ``n`` out of range or ``update`` already called.
        """
        if not 0 <= n <= self.n_forced or self.t or self.started:
            raise ValueError(f"cannot skip {n} of {self.n_forced} forced tokens at step {self.t}")
        self.t = n
        if hidden_states is not None:
            self.hidden.append(hidden_states[0])
        return torch.tensor([list(self.prompt_ids + self.forced[:n])], dtype=torch.long)

    def update(self, input_ids, scores, probs, raw_probs, hidden_states=None) -> Update:
        """A forced step (emit the forced token), the hand-over step (start the inner
        strategy on this distribution), or an inner step (offset its records).

        Args, shapes: as ``Strategy.update``; batch 1 until the hand-over.
        """
        if self.started:
            return self._offset(self.inner.update(input_ids, scores, probs, raw_probs, hidden_states=hidden_states))
        if hidden_states is not None:
            self.hidden.append(hidden_states[0])
        t = self.t
        if t < self.limit:  # a forced step
            token = self.forced[t]
            self.t = t + 1
            record = TokenRecord(t, 0, token, float(probs[0, token]), float(raw_probs[0, token]), forced=True)
            next_ids = torch.cat([input_ids, input_ids.new_tensor([[token]])], dim=1)
            return Update(next_ids, emitted=record, done=self.t >= self.max_new_tokens)
        # the hand-over: prompt + forced tokens are fed; this is the inner strategy's first step
        self.started = True
        budget = self.max_new_tokens - self.n_forced
        if budget <= 0:  # every token allowed was forced
            return Update(input_ids, done=True)
        self.inner.start(self.prompt_ids + self.forced, self.eos_token_id, budget)
        n = self.inner.batch_size
        context = None
        if hidden_states is not None:
            context = torch.cat(self.hidden, dim=0)[None].expand(n, -1, -1)  # (n, prompt + forced, d_model)
        update = self.inner.update(
            input_ids.expand(n, -1), scores.expand(n, -1), probs.expand(n, -1), raw_probs.expand(n, -1),
            hidden_states=context,
        )
        if update.beam_idx is not None:  # every row is row 0 of the engine's one-row cache
            update.beam_idx = torch.zeros_like(update.beam_idx)
        self.hidden = []
        return self._offset(update)

    def _record(self, rec: TokenRecord) -> TokenRecord:
        """An inner record in engine steps (the hand-over step has one row, row 0)."""
        return dataclasses.replace(rec, step=rec.step + self.n_forced, row=0 if rec.step == 0 else rec.row)

    def _offset(self, update: Update) -> Update:
        """The inner strategy's update in engine steps, with the forced tokens in front of
        its hypotheses."""
        if update.emitted is not None:
            update.emitted = self._record(update.emitted)
        if update.beams is not None:
            running, finished = update.beams
            update.beams = (
                [(list(self.forced) + list(ids), score) for ids, score in running],
                [(list(self.forced) + list(ids), score) for ids, score in finished],
            )
        nodes = getattr(update, "nodes", None)  # the beam tree's nodes, where the strategy gives them
        if nodes:
            update.nodes = [
                dataclasses.replace(nd, step=nd.step + self.n_forced, row=0 if nd.step == 0 else nd.row)
                for nd in nodes
            ]
        return update

    def finalize(self) -> Result:
        """The forced tokens (those emitted or skipped) plus the inner strategy's result;
        the inner records in engine steps."""
        if not self.started:
            return Result(list(self.forced[: self.t]), self.reason)
        result = self.inner.finalize() if self.max_new_tokens > self.n_forced else Result([], "max_tokens")
        return Result(list(self.forced) + list(result.token_ids), result.reason,
                      [self._record(r) for r in result.records])
