"""The distributions of one decoder step, and the source ids the chain's encoder stages read.

``Scorer`` is the logit-filter role of openai/whisper's loop: the hard rules give the raw
distribution, the processor chain the processed one (traced stage by stage for the
sampler-chain view), with the logit lens when asked. ``Engine.run`` and the speculative loop
(``core.speculative.loop``, one row of a verify call at a time) score every step with it.
"""

from __future__ import annotations

import functools

import torch

from core.backends.base import COMPACT_BLOCK, DecoderPrompt, EncoderOutput, StepOutput
from core.processors.rules import NEG_INF, BeginSuppressTokens, SuppressTokens
from core.report import StepTensors


class Scorer:
    """The distributions of one step (the logit-filter role of openai/whisper's loop).

    Args:
        rules: the hard rules (suppressed tokens): the raw distribution has only these.
        processors: the rest of the chain (``core.processors``), traced stage by stage.
        uses_log_probs: the chain sees log-probabilities (beam search, as transformers').
        capture_lens: also score the logit lens (each layer's logits, with the hard rules).
        backend_name: named in the error when the backend gives no lens.
        vocab_size: the vocabulary's size (what a compact row's ids index).

    A step whose logits come as a compact row (``StepOutput.logit_ids``) is scored over that
    row where :attr:`takes_compact` (the hard rules applied at the ids' columns): the
    distributions it gives are compact too (``StepTensors.ids``), with the same values at the
    same ids as the full rows' (the softmax sums in the same order: ``COMPACT_BLOCK``).
    """

    def __init__(self, rules, processors, uses_log_probs: bool, capture_lens: bool, backend_name: str,
                 vocab_size: int | None = None):
        self.rules, self.processors = rules, processors
        self.uses_log_probs, self.capture_lens, self.backend_name = uses_log_probs, capture_lens, backend_name
        self.vocab_size = vocab_size
        self._compact_memo: tuple = (None, ())  # (a compact row's ids, its hard rules' columns)

    @property
    def takes_compact(self) -> bool:
        """Whether this scorer reads compact rows: the hard rules alone (suppressed tokens, which
        map to columns), no chain stage (a penalty or filter reads the whole row), no
        log-probabilities (beam search), no lens, and a known vocabulary size."""
        return (not self.processors and not self.uses_log_probs and not self.capture_lens
                and self.vocab_size is not None
                and all(type(rule) in (SuppressTokens, BeginSuppressTokens) for rule in self.rules))

    def score(self, input_ids: torch.Tensor, out: StepOutput) -> tuple[torch.Tensor, StepTensors]:
        """(the processed scores float32 (batch, vocab) the strategy chooses from, the step's
        ``StepTensors``: processed and raw probabilities, attention, stage outputs, lens).

        Raises:
            RuntimeError: the lens was asked for and the backend gives none.
            ValueError: a compact row where the scorer does not take one (:attr:`takes_compact`).
        """
        if out.logit_ids is not None:
            return self._score_compact(input_ids, out)
        # the raw distribution: logits with the hard rules alone
        raw_scores = self.rules(input_ids, out.logits)
        raw_probs = torch.softmax(raw_scores, dim=-1)
        # the processed scores (beam search works on log-probabilities), keeping each stage's
        # output for the sampler-chain view
        chain_input = (self.rules(input_ids, torch.log_softmax(out.logits, dim=-1)) if self.uses_log_probs
                       else raw_scores)
        self.processors.see_step(out)  # what a stage reads beyond the scores (DoLa: the lens)
        scores, stages = self.processors.trace(input_ids, chain_input)
        probs = torch.softmax(scores, dim=-1) if self.processors or self.uses_log_probs else raw_probs
        lens = self._lens_logp(input_ids, out.lens_logits) if self.capture_lens else None
        if self.capture_lens and lens is None:
            raise RuntimeError(f"{self.backend_name} gives no logit lens; turn capture_lens off")
        return scores, StepTensors(probs, raw_probs, out.cross_attention, stages, lens, self.processors.extras())

    def _score_compact(self, input_ids: torch.Tensor, out: StepOutput) -> tuple[torch.Tensor, StepTensors]:
        """``score`` of a compact row: the hard rules' ids set to -inf at their columns, one
        softmax; the processed distribution is the raw one (no chain)."""
        if not self.takes_compact:
            raise ValueError("a compact logits row reached a scorer with a processor chain, log-probabilities, "
                             "the lens or hard rules beyond suppressed tokens; step the backend without compact=True")
        ids = out.logit_ids
        ids_seen, columns = self._compact_memo
        if ids_seen is not ids:  # once per sentence: the backend hands the same ids to every step
            columns = tuple((rule, _columns_of(rule.token_ids, ids)) for rule in self.rules)
            self._compact_memo = (ids, columns)
        scores = out.logits
        for rule, cols in columns:  # as SuppressTokens.fill: a new row with -inf written at the ids
            if type(rule) is BeginSuppressTokens and input_ids.shape[-1] != rule.begin_index:
                continue
            scores = scores.index_fill(-1, cols, NEG_INF)
        probs = torch.softmax(scores, dim=-1)
        return scores, StepTensors(probs, probs, out.cross_attention, [], None, {}, ids=ids,
                                   vocab_size=self.vocab_size)

    def _lens_logp(self, input_ids: torch.Tensor, lens_logits: torch.Tensor | None) -> torch.Tensor | None:
        """The logit lens as log-probabilities, float32 (batch, layers, vocab): each layer's
        logits with the hard rules (as the raw distribution), log_softmax; None without a lens."""
        if lens_logits is None:
            return None
        b, n_layers, vocab = lens_logits.shape
        scores = self.rules(input_ids.repeat_interleave(n_layers, dim=0), lens_logits.reshape(b * n_layers, vocab))
        return torch.log_softmax(scores, dim=-1).reshape(b, n_layers, vocab)


def _columns_of(token_ids, ids: torch.Tensor) -> torch.Tensor:
    """int64: the columns of a compact row (its ascending ids ``ids``) that hold ``token_ids``
    (ids it does not hold are left out: their logits are -inf already)."""
    wanted = torch.tensor([int(t) for t in token_ids], dtype=torch.long)
    cols = torch.searchsorted(ids, wanted).clamp_(max=max(ids.shape[0] - 1, 0))
    return cols[ids[cols] == wanted] if ids.shape[0] else cols[:0]


@functools.lru_cache(maxsize=None)
def compact_softmax_exact(vocab_size: int) -> bool:
    """Whether a softmax over a compact row (whole aligned blocks of ``COMPACT_BLOCK`` ids,
    ``core.backends.base.StepOutput.logit_ids``) gives here the same bits at every id as the
    softmax over the full (1, ``vocab_size``) row with -inf elsewhere: checked once per process
    on 24 random rows (shortlist-like and denser, ~1 ms in all); False sends the engine back to
    full rows (a torch build whose softmax sums in wider lanes)."""
    if vocab_size % COMPACT_BLOCK or vocab_size < 4 * COMPACT_BLOCK:
        return False
    gen = torch.Generator().manual_seed(1234)
    for trial in range(24):
        n = (30, 500, vocab_size // 20, vocab_size // 4)[trial % 4]
        ids = torch.randperm(vocab_size, generator=gen)[:n].sort().values
        values = torch.randn(n, generator=gen) * (1.0 + trial % 5)
        full = torch.full((1, vocab_size), NEG_INF)
        full[0, ids] = values
        blocks = torch.unique(ids // COMPACT_BLOCK)
        columns = (blocks[:, None] * COMPACT_BLOCK + torch.arange(COMPACT_BLOCK)).reshape(-1)
        compact = full[:, columns]
        if not torch.equal(torch.softmax(full, dim=-1)[:, columns], torch.softmax(compact, dim=-1)):
            return False
    return True


def source_ids(encoded: EncoderOutput, prompt: DecoderPrompt) -> torch.Tensor | None:
    """The source token ids for the encoder stages of the chain, int64 (1, n), or None.

    The EOS id is left out: with it, the encoder no-repeat n-gram of size 1 would forbid
    ending (the source ends with EOS) and the encoder repetition penalty would push EOS.
    """
    ids = encoded.extras.get("source_ids")
    if ids is None:
        return None
    ids = torch.as_tensor(ids).reshape(1, -1)
    return ids[ids != prompt.eos_token_id].reshape(1, -1)
