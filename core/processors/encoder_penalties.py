"""The encoder-grounded penalties of translation: what the decoder may do with the tokens of
the *source* (transformers ``EncoderRepetitionPenaltyLogitsProcessor``,
``EncoderNoRepeatNGramLogitsProcessor``). ``core.processors.constraints`` re-exports them.

Shapes: see ``core.processors``. Beam search gives ``scores`` several rows (hypotheses).
These processors take ``encoder_input_ids`` of shape (sources, src_len) (or (src_len,) for
one source) and map hypothesis row ``i`` to source ``i // k`` where ``k = rows // sources``:
rows are grouped source by source, as transformers' ``repeat_interleave`` expansion lays
them out, so one source serves any number of beams.
"""

from __future__ import annotations

import math

import torch

NEG_INF = float("-inf")

__all__ = ["EncoderNoRepeatNGram", "EncoderRepetitionPenalty"]


def _encoder_ids(encoder_input_ids: torch.Tensor) -> torch.Tensor:
    """Validate ``encoder_input_ids`` and return it as int64 (sources, src_len)."""
    if not isinstance(encoder_input_ids, torch.Tensor) or encoder_input_ids.is_floating_point() \
            or encoder_input_ids.is_complex() or encoder_input_ids.dtype == torch.bool:
        raise ValueError(f"encoder_input_ids must be an integer tensor, got {encoder_input_ids!r}")
    if encoder_input_ids.dim() == 1:
        encoder_input_ids = encoder_input_ids[None, :]
    if encoder_input_ids.dim() != 2 or encoder_input_ids.shape[0] == 0:
        raise ValueError(f"encoder_input_ids must have shape (src_len,) or (sources, src_len), "
                         f"got {tuple(encoder_input_ids.shape)}")
    if (encoder_input_ids < 0).any():
        raise ValueError("encoder_input_ids must be token ids >= 0 (no -100 placeholders)")
    return encoder_input_ids.long()


def _hypotheses_per_source(rows: int, sources: int) -> int:
    """``k`` such that hypothesis row ``i`` belongs to source ``i // k``; ValueError if
    ``rows`` is not a multiple of ``sources``."""
    if rows % sources != 0 or rows < sources:
        raise ValueError(f"scores has {rows} rows, not a multiple of the {sources} encoder_input_ids rows")
    return rows // sources


class EncoderRepetitionPenalty:
    """Encoder repetition ("hallucination") penalty; transformers
    ``EncoderRepetitionPenaltyLogitsProcessor``.

    Like the CTRL repetition penalty but on the tokens of the *source*
    (``encoder_input_ids``) and inverted: ``penalty`` > 1 *rewards* source tokens (a
    positive score is multiplied by ``penalty``, a negative one divided by it), so the
    output stays grounded in the input; ``penalty`` < 1 discourages copying. The
    arithmetic is transformers': the inverse ``1 / penalty`` is stored and scores are
    divided (positive) or multiplied (negative) by it. Every id in the source counts,
    padding and special tokens included.

    Args:
        penalty: > 0 (1 = off).
        encoder_input_ids: integer tensor (sources, src_len) or (src_len,). Hypothesis
            row ``i`` of ``scores`` uses source ``i // (rows // sources)`` (one source
            serves every beam; see the module docstring).

    Call: ``input_ids`` int64 (batch, seq) (unused), ``scores`` float32 (batch, vocab)
    -> new float32 (batch, vocab).

    Raises:
        ValueError: in ``__init__`` if ``penalty`` is not a finite number > 0 or
            ``encoder_input_ids`` is not a 1-D/2-D tensor of ids >= 0; when called, if
            the rows do not divide evenly or a source id is outside the vocabulary.
    """

    name = "encoder_repetition_penalty"

    def __init__(self, penalty: float, encoder_input_ids: torch.Tensor):
        if not (isinstance(penalty, (int, float)) and math.isfinite(penalty) and penalty > 0):
            raise ValueError(f"encoder repetition penalty must be a finite number > 0 (1 = off), got {penalty!r}")
        self.penalty = float(penalty)
        self._inverse = 1 / self.penalty
        self.encoder_input_ids = _encoder_ids(encoder_input_ids)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        rows, vocab = scores.shape
        sources = self.encoder_input_ids.shape[0]
        k = _hypotheses_per_source(rows, sources)
        if self.encoder_input_ids.numel() and int(self.encoder_input_ids.max()) >= vocab:
            raise ValueError(f"encoder_input_ids holds ids outside the vocabulary of {vocab} tokens")
        # one copy of each source per hypothesis: (rows, src_len)
        ids = self.encoder_input_ids.to(scores.device).repeat_interleave(k, dim=0)
        score = scores.gather(1, ids)
        # inverted CTRL penalty: negative scores times 1/penalty, positive ones divided by it
        score = torch.where(score < 0, score * self._inverse, score / self._inverse)
        return scores.scatter(1, ids, score)


class EncoderNoRepeatNGram:
    """Forbid n-grams of the source; transformers ``EncoderNoRepeatNGramLogitsProcessor``.

    Token ``t`` gets ``-inf`` in a row when the row's last ``ngram_size - 1`` tokens
    followed by ``t`` form an n-gram of that row's source (``encoder_input_ids``), so
    the output cannot copy ``ngram_size`` consecutive source tokens. With
    ``ngram_size = 1`` every source token is banned at every step. While ``input_ids``
    is shorter than ``ngram_size - 1`` nothing is banned. ``input_ids`` includes the
    forced prompt.

    Args:
        ngram_size: >= 1.
        encoder_input_ids: integer tensor (sources, src_len) or (src_len,). Hypothesis
            row ``i`` of ``scores`` uses source ``i // (rows // sources)`` (see the
            module docstring).

    Call: ``input_ids`` int64 (batch, seq), ``scores`` float32 (batch, vocab) -> new
    float32 (batch, vocab).

    Raises:
        ValueError: in ``__init__`` if ``ngram_size`` < 1 or ``encoder_input_ids`` is
            not a 1-D/2-D tensor of ids >= 0; when called, if the rows do not divide
            evenly or a source id is outside the vocabulary.
    """

    name = "encoder_no_repeat_ngram"

    def __init__(self, ngram_size: int, encoder_input_ids: torch.Tensor):
        if not isinstance(ngram_size, int) or isinstance(ngram_size, bool) or ngram_size < 1:
            raise ValueError(f"encoder no-repeat n-gram size must be an int >= 1, got {ngram_size!r}")
        self.n = ngram_size
        self.encoder_input_ids = _encoder_ids(encoder_input_ids)
        self._max_id = int(self.encoder_input_ids.max()) if self.encoder_input_ids.numel() else -1
        # per source: {first n-1 tokens of an n-gram: set of tokens that complete it}
        self._next_tokens: list[dict[tuple[int, ...], set[int]]] = []
        for tokens in self.encoder_input_ids.tolist():
            table: dict[tuple[int, ...], set[int]] = {}
            for start in range(len(tokens) - self.n + 1):
                table.setdefault(tuple(tokens[start : start + self.n - 1]), set()).add(tokens[start + self.n - 1])
            self._next_tokens.append(table)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        rows, vocab = scores.shape
        k = _hypotheses_per_source(rows, len(self._next_tokens))
        if self._max_id >= vocab:
            raise ValueError(f"encoder_input_ids holds ids outside the vocabulary of {vocab} tokens")
        seq_len = input_ids.shape[1]
        if seq_len < self.n - 1:  # the prefix of the next n-gram is not complete yet
            return scores
        banned = torch.zeros_like(scores, dtype=torch.bool)
        for row, tokens in enumerate(input_ids.tolist()):
            # the row's last n-1 tokens (empty for n = 1) look up the tokens that would complete a source n-gram
            prefix = tuple(tokens[seq_len - self.n + 1 :])
            for token in self._next_tokens[row // k].get(prefix, ()):
                banned[row, token] = True
        return scores.masked_fill(banned, NEG_INF)
