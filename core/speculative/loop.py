"""The speculative run: what ``Engine.run`` does when ``options.strategy == "speculative"``.

Leviathan et al. 2023, Algorithm 1 (and the encoder-decoder loop of romsto/Speculative-Decoding,
``sampling/codec_speculative_decoding.py``), one round at a time:

1. the draft proposes up to ``gamma`` tokens x_1..x_k continuing the ids so far (with the
   run's own chain as ``process``, so a model draft's q is shaped as p is);
2. the target scores the last emitted token and the k drafted ones in ONE decoder call
   (``Backend.step(..., all_positions=True)``): k + 1 rows of logits;
3. row by row, the run's chain is applied with that row's prefix, exactly as plain decoding
   applies it at that step (so penalties, n-gram bans, suppress and timestamp rules, forced
   tokens and the long-form prompt shape p the same way), and the rule
   (``core.speculative.rule``) keeps x_j or emits the target's own token. Rows after the
   first rejection are never scored, so every processor sees exactly the calls of plain
   decoding (stateful ones included);
4. the target's KV cache is cut back to the kept prefix (``Backend.truncate_cache``) and the
   draft is told (``Draft.rollback``).

Each emitted token is reported as a plain ``StepEvent`` (the same probabilities, top-k and
attention as plain decoding) with ``speculation`` ("accepted" / "resampled" / "bonus") and
``spec_round``; a round whose draft proposed nothing is a plain step (``speculation`` "",
``spec_round`` -1, no ``SpeculationRound``). After a round's StepEvents comes its
``SpeculationRound``; ``Finished.stats.speculative`` is a ``SpeculationSummary``.

The draft length follows transformers' "heuristic" schedule (``rule.adapt_gamma``) unless
``draft_tokens`` fixes it. The loop measures the cost of a plain one-token target call (a
round without a draft, or a probe round: after ``MIN_ROUNDS_TO_JUDGE`` drafted rounds, then
after every 2 more, up to ``PLAIN_PROBES``; probes are taken under a fixed draft length too,
so that ``c`` and the predicted speed-up are known). Calls that fed more positions than the
rows they returned (the prompt's prefill, a re-fed cache) and the round of the draft's first
proposal (a model or early-exit draft's own prefill) are left out of every timing: they
would inflate c, the verify cost and the off switch's evidence.

The off switch (adaptive schedule only; a fixed ``draft_tokens`` never switches off) stops
drafting for the rest of the run (one segment) and says why in
``SpeculationSummary.switched_off``:

- greedy verification: when the drafted rounds cost more wall-clock time per emitted token
  than a plain step. The output is the target's greedy output either way, so the clock
  decides only the speed;
- sampling verification: from counts only, so that a seed gives the same text on any
  machine and load (a clock-driven switch would change which random draws the rounds
  consume): after ``MIN_ROUNDS_TO_JUDGE`` drafted rounds, when the judged acceptance
  (accepted / judged) is below ``SAMPLED_MIN_ALPHA``.

A backend without ``all_positions`` is verified one position per call (same tokens, no
speed-up). The logit lens is not reported under speculative decoding (``capture_lens`` is
ignored): the verify call scores several positions at once.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable, Iterator, Sequence

import torch

from core.backends.base import DecoderPrompt, EncoderOutput, StepOutput
from core.cache import Inference
from core.events import (DraftToken, Event, Finished, Placement, RunStats, SpeculationRound, SpeculationSummary,
                         StepEvent, TokenProb)
from core.options import DecodingOptions
from core.report import StepReporter, TokenRecord
from core.scoring import Scorer
from core.speculative.draft import Draft
from core.speculative.rule import GammaSchedule, GreedyRule, SamplingRule, predicted_speedup, top_tokens
from core.speculative.verify import position_rows
from core.strategies.forced import check_forced_ids

MIN_ROUNDS_TO_JUDGE = 4
"""Drafted rounds measured before the off switch may decide (adaptive gamma only)."""
PLAIN_PROBES = 3
"""One-token target calls measured (rounds without a draft, or probes) before judging."""
SAMPLED_MIN_ALPHA = 0.5
"""Sampling verification: the off switch's threshold on accepted / judged (counts, not the
clock). On this CPU a draft kept less often than this loses (Bergamot n-gram, α̂ 0.33: 0.84x
of plain decoding; tiny.en for base, α̂ 0.79: 1.12x)."""


def make_draft(options: DecodingOptions, engine: Any, encoded: EncoderOutput, prompt: DecoderPrompt) -> Draft:
    """The draft ``options.draft`` names, for drafts the engine builds itself.

    "ngram": prompt lookup over the ids and, for translation, the source ids
    (``encoded.extras["source_ids"]``, unless ``encoded.extras["source_vocab_shared"]`` is
    False: the bundled Bergamot models share one SentencePiece vocabulary between source and
    target). "early-exit:L": the target's first L decoder layers
    (``core.speculative.early_exit``; "early-exit:L#N": with a shortlist head of the N most
    frequent ids, ``core.speculative.shortlist``). "branch": the last batch-1 run on this same encoder
    output (``engine.kept``: a fork drafts from the run it forks, the old branch's tokens
    after the fork step realigned where the two resynchronise).

    Raises:
        ValueError: "model:NAME" (the task builds it and passes ``draft=``), "branch" with no
            earlier run on ``encoded``, or an early exit the backend cannot do.
    """
    name = options.draft
    if name == "ngram":
        from core.scoring import source_ids
        from core.speculative.ngram import NgramDraft

        extra = []
        source = source_ids(encoded, prompt)
        if source is not None and encoded.extras.get("source_vocab_shared", True):
            extra.append(source[0].tolist())
        return NgramDraft(extra)
    if name.startswith("early-exit:"):
        from core.speculative.early_exit import EarlyExitDraft

        layer, _, size = name.split(":", 1)[1].partition("#")
        head_ids = None
        if size:
            from core.speculative.shortlist import frequent_ids

            head_ids = frequent_ids(engine.backend, int(size), keep=(prompt.eos_token_id,))
        return EarlyExitDraft(engine.backend, encoded, int(layer), head_ids=head_ids,
                              sample=options.verification == "sample", seed=options.seed,
                              eos_token_id=prompt.eos_token_id)
    if name == "branch":
        from core.speculative.branch import BranchDraft

        kept = engine.kept.get(id(encoded))
        if kept is not None and kept.encoded is encoded and kept.run_ids:
            return BranchDraft(kept.run_ids)
        raise ValueError("the branch draft needs an earlier run on this input: fork from a token of a run "
                         "(its tokens draft the new branch), or use --draft ngram")
    raise ValueError(f"the {name} draft is built by the task (it loads the model); pass it as draft=, "
                     "or use --draft ngram")


class SpeculativeRun:
    """One speculative ``Engine.run`` (see the module docstring); ``events()`` yields its events.

    Args:
        engine: the engine (its backend, kept caches and chain builder).
        encoded, prompt, options, cancel, place, forced_ids, reuse_cache: as ``Engine.run``.
        draft: the draft; None builds the one ``options.draft`` names (``make_draft``).
        requested: ``time.perf_counter()`` when the run was asked for.
        rule: the acceptance rule; None: ``GreedyRule`` or ``SamplingRule`` seeded by
            ``options.seed`` (``options.verification``). A test may pass a wrong one.
        amateur: contrastive decoding's amateur model (``Engine.run``'s), in the chain of both
            the target and the draft.

    Raises:
        ValueError: invalid options or draft; contrastive decoding with an early-layer amateur
            (it reads the logit lens, which a verify call of several positions does not give).
    """

    def __init__(self, engine: Any, encoded: EncoderOutput, prompt: DecoderPrompt, options: DecodingOptions, *,
                 draft: Draft | None = None, cancel: Callable[[], bool] | None = None,
                 place: Placement = Placement(), forced_ids: Sequence[int] = (),
                 reuse_cache: bool = True, requested: float | None = None, rule=None, amateur=None):
        self.requested = time.perf_counter() if requested is None else requested
        self.engine, self.backend, self.encoded, self.prompt = engine, engine.backend, encoded, prompt
        self.options = options.validate()
        plain = dataclasses.replace(options, strategy=options.verification)
        rules, processors = engine.processors(encoded, prompt, plain, amateur=amateur)
        if processors.needs_lens:
            raise ValueError("contrastive decoding with an early-layer amateur (layer:L) reads the logit lens, which "
                             "speculative decoding does not compute; use a model amateur or another strategy")
        self.scorer = Scorer(rules, processors, False, False, self.backend.name)
        d_rules, d_processors = engine.processors(encoded, prompt, plain, amateur=amateur)  # the draft's own chain
        self.process = lambda ids, logits: d_processors(ids, d_rules(ids, logits))
        self.max_new = min(options.max_new_tokens, prompt.max_new_tokens or options.max_new_tokens)
        self.forced = check_forced_ids(forced_ids, prompt.eos_token_id, self.backend.vocab_size)[:self.max_new]
        self.draft = draft if draft is not None else make_draft(options, engine, encoded, prompt)
        if rule is None:
            if options.verification == "sample":
                generator = torch.Generator()
                generator.seed() if options.seed is None else generator.manual_seed(int(options.seed))
                rule = SamplingRule(generator)
            else:
                rule = GreedyRule()
        self.rule = rule
        self.cancel = cancel
        self.reuse_cache = reuse_cache
        self.reporter = StepReporter(
            self.backend.token_text, self.backend.decode, top_k_report=options.top_k_report,
            capture_attention=options.capture_attention, source_len=encoded.source_len, place=place,
        )
        self.segment, self.step_offset = place.segment, place.step_offset
        self.schedule = GammaSchedule(fixed=options.draft_tokens)
        self.summary = SpeculationSummary(draft=self.draft.name)
        self.all_positions = True  # until the backend says otherwise
        self.first_token_s = 0.0
        # timings (ms): one-token target calls; drafted rounds' draft + target time and tokens
        self.plain_ms: list[float] = []
        self.drafted_rounds: list[tuple[float, float, int, int]] = []  # (draft ms, target ms, drafted, emitted)
        self.n_drafted_rounds = 0  # every drafted round, timed or not (the probes' and sampling switch's count)
        self.last_call_prefilled = False  # the last _call fed more positions than the rows it returned

    # ------------------------------------------------------------------ the decoder calls
    def _call(self, inference: Inference, seq: list[int], fed: int, need: int) -> list[StepOutput]:
        """Feed ``seq[fed:]``; one ``StepOutput`` per each of the last ``need`` positions of ``seq``
        (``core.speculative.verify.position_rows``)."""
        self.last_call_prefilled = len(seq) - fed > need
        rows, self.all_positions = position_rows(inference, seq, fed, need, self.all_positions, self.backend.name)
        return rows

    # ------------------------------------------------------------------ the off switch
    def _gamma_now(self, budget: int) -> int:
        """This round's draft length: 0 when switched off, probing a plain step, or no budget."""
        if self.summary.switched_off or budget <= 1:
            return 0
        gamma = self.schedule.gamma
        if len(self.plain_ms) < PLAIN_PROBES and \
                self.n_drafted_rounds >= MIN_ROUNDS_TO_JUDGE + 2 * len(self.plain_ms):
            return 0  # a probe: time one plain target call (counts only: the same rounds on any machine)
        return min(gamma, budget - 1)

    def _judge_switch(self) -> None:
        """Switch drafting off (adaptive gamma only). Greedy verification: when the drafted
        rounds cost more per emitted token than a plain one-token target call. Sampling
        verification: when accepted / judged < ``SAMPLED_MIN_ALPHA`` after
        ``MIN_ROUNDS_TO_JUDGE`` drafted rounds (counts only: deterministic for a seed)."""
        if self.options.draft_tokens or self.summary.switched_off:
            return
        if self.options.verification == "sample":
            s = self.summary
            if self.n_drafted_rounds >= MIN_ROUNDS_TO_JUDGE and s.judged_acceptance_rate < SAMPLED_MIN_ALPHA:
                s.switched_off = (
                    f"accepted/judged {s.accepted}/{s.judged} = {s.judged_acceptance_rate:.2f} < "
                    f"{SAMPLED_MIN_ALPHA} over {self.n_drafted_rounds} rounds (sampling: decided from counts): "
                    "speculation switched off for the rest of the segment")
            return
        if len(self.drafted_rounds) < MIN_ROUNDS_TO_JUDGE or len(self.plain_ms) < PLAIN_PROBES:
            return
        plain = statistics.median(self.plain_ms)
        spent = sum(d + t for d, t, _, _ in self.drafted_rounds)
        emitted = sum(e for _, _, _, e in self.drafted_rounds)
        per_token = spent / max(1, emitted)
        if per_token > plain:
            self.summary.switched_off = (
                f"drafted rounds cost {per_token:.1f} ms per token over {len(self.drafted_rounds)} rounds, "
                f"a plain target step {plain:.1f} ms: speculation switched off for the rest of the segment")

    # ------------------------------------------------------------------ reporting
    def _event(self, t: int, token: int, probs: torch.Tensor, current, kind: str = "", round_no: int = -1,
               forced: bool = False) -> StepEvent:
        record = TokenRecord(t, 0, int(token), float(probs[0, token]), float(current.raw_probs[0, token]),
                             forced=forced)
        event = self.reporter.step_event(record, self.reporter.row_report(current, 0, (int(token),)))
        self.first_token_s = self.first_token_s or time.perf_counter() - self.requested
        if kind:
            event = dataclasses.replace(event, speculation=kind, spec_round=round_no)
        return event

    def _finish_summary(self) -> None:
        s = self.summary
        if not self.plain_ms or not self.drafted_rounds:
            return
        plain = statistics.median(self.plain_ms)
        draft_ms = sum(d for d, _, _, _ in self.drafted_rounds)
        drafted = sum(n for _, _, n, _ in self.drafted_rounds)
        verify = statistics.mean(t for _, t, _, _ in self.drafted_rounds)
        per_draft_token = draft_ms / max(1, drafted)
        s.c = per_draft_token / plain if plain > 0 else None
        gamma = drafted / len(self.drafted_rounds)
        # alpha-hat = accepted / judged: the tokens after a rejection were never judged, so
        # accepted / drafted would undercount Theorem 3.8's alpha
        s.speedup_predicted = predicted_speedup(s.judged_acceptance_rate, gamma, per_draft_token, verify, plain)

    # ------------------------------------------------------------------ the run
    def events(self) -> Iterator[Event]:
        """StepEvents, one SpeculationRound after each drafted round, then one Finished (as
        ``Engine.run``; ``stats.speculative`` the run's ``SpeculationSummary``)."""
        prompt, eos = self.prompt, self.prompt.eos_token_id
        prompt_len = len(prompt.prompt_ids)
        known = list(prompt.prompt_ids) + list(self.forced)
        started = time.perf_counter()
        inference = Inference(self.backend, self.engine.caches, self.encoded, known, prompt_len, 1,
                              reuse=self.reuse_cache, capture_attention=self.options.capture_attention,
                              capture_lens=False)
        inference.start(1)
        first = max(0, inference.reused + 1 - prompt_len)  # forced tokens the reused part holds
        ids = known[:prompt_len + first]  # every token decided so far, prompt first
        generated = list(self.forced[:first])
        fed = inference.reused  # positions the target's cache holds
        reason, cancelled, round_no = "max_tokens", False, 0
        while True:
            if self.cancel is not None and self.cancel():
                cancelled, reason = True, "cancelled"
                break
            pending_forced = list(self.forced[len(generated):])
            budget = self.max_new - len(generated) - len(pending_forced)
            if budget <= 0 and not pending_forced:
                break
            base = ids + pending_forced
            gamma = self._gamma_now(budget)
            draft_ms, draft, q = 0.0, [], None
            if gamma > 0:
                t0 = time.perf_counter()
                draft, q = self.draft.propose(base, gamma, self.process)
                draft_ms = (time.perf_counter() - t0) * 1e3
                draft = [int(x) for x in draft[:gamma]]
                q = q[:len(draft)] if q is not None else None
            t0 = time.perf_counter()
            rows = self._call(inference, base + draft, fed, len(pending_forced) + len(draft) + 1)
            target_ms = (time.perf_counter() - t0) * 1e3
            timed = not self.last_call_prefilled  # a prefill is no verify call's (or plain step's) cost
            fed = len(base) + len(draft)
            # the forced tokens (a fork's): reported as plain decoding reports them
            for i, token in enumerate(pending_forced):
                _, current = self.scorer.score(torch.tensor([ids], dtype=torch.long), rows[i])
                yield self._event(len(generated), token, current.probs, current, forced=True)
                ids.append(token)
                generated.append(token)
            if budget <= 0:
                break
            # the round: judge the drafted tokens row by row, then the target's own token
            judged: list[DraftToken] = []
            n_accepted, emitted, kind, near_tie, residual_topk, ended = 0, None, "", False, [], False
            first_step = self.step_offset + len(generated)
            before = len(generated)
            this_round = round_no if draft else -1
            for j in range(len(draft) + 1):
                x = draft[j] if j < len(draft) else None
                scores, current = self.scorer.score(torch.tensor([ids], dtype=torch.long), rows[len(pending_forced) + j])
                q_j = q[j] if q is not None and x is not None else None
                verdict = self.rule.judge(x, current.probs[0], q_j, scores[0])
                near_tie = near_tie or verdict.near_tie
                if verdict.judgement is not None:
                    jd = verdict.judgement
                    judged.append(DraftToken(int(x), self.backend.token_text(int(x)), jd.q, jd.p, jd.ratio, jd.u,
                                             jd.accepted, True))
                token = verdict.token
                if verdict.accepted:
                    n_accepted += 1
                    kind_j = "accepted"
                else:
                    kind_j = ("resampled" if x is not None else "bonus") if draft else ""
                    if x is not None and verdict.residual is not None:
                        residual_topk = [TokenProb(i, self.backend.token_text(i), p)
                                         for i, p in top_tokens(verdict.residual, self.options.top_k_report)]
                if token == eos:  # the end: not reported as a token
                    reason, ended = "eos", True
                    break
                yield self._event(len(generated), token, current.probs, current, kind_j, this_round)
                ids.append(token)
                generated.append(token)
                if not verdict.accepted:
                    emitted, kind = token, kind_j
                    break
            judged += [DraftToken(int(x), self.backend.token_text(int(x)), 1.0 if q is None else float(q[k, x]),
                                  0.0, 0.0, None, False, False) for k, x in enumerate(draft) if k >= len(judged)]
            # cut the target's cache back to the kept prefix; tell the draft
            valid = len(base) + n_accepted
            if fed > valid:
                inference.truncate(valid)
                fed = valid
            if draft:
                self.draft.rollback(valid)
            # bookkeeping
            tokens = len(generated) - before  # reported tokens (an accepted EOS is none)
            s = self.summary
            s.rounds += 1
            s.tokens += tokens
            if draft:
                s.draft_tokens += len(draft)
                s.accepted += n_accepted
                s.judged += sum(d.judged for d in judged)
                if timed and self.n_drafted_rounds:  # not the draft's first proposal (its own prefill)
                    self.drafted_rounds.append((draft_ms, target_ms, len(draft), max(1, tokens)))
                self.n_drafted_rounds += 1
                self.schedule.update(len(draft), n_accepted)
                yield SpeculationRound(
                    round=round_no, step=first_step, segment=self.segment, gamma=gamma, drafted=tuple(judged),
                    n_accepted=n_accepted, emitted_id=emitted,
                    emitted_text=self.backend.token_text(emitted) if emitted is not None else "",
                    emitted_kind=kind if emitted is not None else "", residual_topk=residual_topk,
                    draft_ms=draft_ms, target_ms=target_ms, draft=self.draft.name, near_tie=near_tie,
                )
                round_no += 1
            elif not pending_forced and timed:
                self.plain_ms.append(target_ms)
            self._judge_switch()
            if ended or len(generated) >= self.max_new:
                break
        inference.finish(run_ids=ids + ([eos] if reason == "eos" else []))
        self._finish_summary()
        stats = RunStats(decode_s=time.perf_counter() - started, n_tokens=len(generated),
                         reused_tokens=inference.reused, first_token_s=self.first_token_s,
                         speculative=self.summary)
        yield Finished(text=self.backend.decode(generated), token_ids=list(generated), stats=stats,
                       cancelled=cancelled, reason=reason)
