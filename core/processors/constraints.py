"""Constraints on what may be generated, applied for every strategy (greedy, beam and
sampling alike): bad words, sequence bias, a minimum number of new tokens, an EOS
boost after a given length (transformers ``NoBadWordsLogitsProcessor``,
``SequenceBiasLogitsProcessor``, ``MinNewTokensLengthLogitsProcessor``,
``ExponentialDecayLengthPenalty``). The encoder-grounded penalties
(``EncoderRepetitionPenalty``, ``EncoderNoRepeatNGram``) are
``core.processors.encoder_penalties``, re-exported here.

Shapes: see ``core.processors``. ``input_ids`` always includes the forced decoder
prompt (decoder start token, language/task tokens...), as in transformers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from core.processors.encoder_penalties import EncoderNoRepeatNGram, EncoderRepetitionPenalty  # noqa: F401

NEG_INF = float("-inf")


def _is_token_id(value: object) -> bool:
    """True for a non-negative int (bools excluded)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_count(value: object, what: str) -> None:
    """Raise ValueError unless ``value`` is an int >= 0."""
    if not _is_token_id(value):
        raise ValueError(f"{what} must be an int >= 0, got {value!r}")


class _SequenceBiasBase:
    """Adds a bias to the last token of each biased sequence whose prefix ends ``input_ids``.

    Built from ``{token_ids tuple: bias}`` (validated by the subclass). One-token
    sequences are biased at every step; longer ones only in the rows whose
    ``input_ids`` end with all but their last token (a prefix longer than ``input_ids``
    never matches). Biases of several sequences ending in the same token add up.
    """

    def _prepare(self, sequence_bias: dict[tuple[int, ...], float]) -> None:
        self.sequence_bias = sequence_bias
        self._max_token = max((max(seq) for seq in sequence_bias), default=-1)
        # one-token sequences: token ids and their biases
        singles = [(seq[0], bias) for seq, bias in sequence_bias.items() if len(seq) == 1]
        self._single_ids = torch.tensor([t for t, _ in singles], dtype=torch.long)
        self._single_bias = torch.tensor([b for _, b in singles], dtype=torch.float32)
        # longer sequences grouped by prefix length (first-seen order), so that each group
        # is matched with one comparison: (prefixes (g, L) int64, last tokens (g,), biases (g,))
        by_length: dict[int, list[tuple[tuple[int, ...], float]]] = {}
        for seq, bias in sequence_bias.items():
            if len(seq) > 1:
                by_length.setdefault(len(seq) - 1, []).append((seq, bias))
        self._groups = [
            (
                torch.tensor([seq[:-1] for seq, _ in group], dtype=torch.long),
                torch.tensor([seq[-1] for seq, _ in group], dtype=torch.long),
                torch.tensor([bias for _, bias in group], dtype=torch.float32),
            )
            for group in by_length.values()
        ]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        vocab = scores.shape[-1]
        if self._max_token >= vocab:
            raise ValueError(
                f"{self.name}: token id {self._max_token} is outside the vocabulary of {vocab} tokens"
            )
        device = scores.device
        bias = torch.zeros_like(scores)
        # 1. one-token sequences: biased at every step
        if len(self._single_ids):
            bias[:, self._single_ids.to(device)] = self._single_bias.to(device, scores.dtype)
        # 2. longer sequences: bias the last token in the rows whose input_ids end with the prefix
        for prefixes, last_tokens, biases in self._groups:
            prefix_len = prefixes.shape[1]
            if prefix_len > input_ids.shape[1]:  # context too short for this prefix
                continue
            matches = (input_ids[:, None, -prefix_len:] == prefixes.to(device)).all(dim=-1)  # (batch, g)
            row_bias = torch.where(matches, biases.to(device, scores.dtype), 0.0)
            bias.index_add_(1, last_tokens.to(device), row_bias)
        # 3. add (a -inf bias bans the token)
        return scores + bias


class SequenceBias(_SequenceBiasBase):
    """Additive bias on token sequences; transformers ``SequenceBiasLogitsProcessor``.

    ``sequence_bias`` maps a tuple of token ids to a bias added to the score of its last
    token when the next token would complete it: always for a one-token sequence, and
    for a longer one in the rows whose ``input_ids`` (forced prompt included) end with
    its prefix. Positive favours, negative disfavours, ``-inf`` forbids. Biases of
    sequences ending in the same token add up.

    Call: ``input_ids`` int64 (batch, seq), ``scores`` float32 (batch, vocab) -> new
    float32 (batch, vocab).

    Raises:
        ValueError: in ``__init__`` if ``sequence_bias`` is empty, a key is not a
            non-empty tuple of non-negative ints, or a bias is not a real number
            (``nan`` and ``+inf`` are refused, ``-inf`` allowed); when called, if a
            token id is outside the vocabulary (as transformers does).
    """

    name = "sequence_bias"

    def __init__(self, sequence_bias: Mapping[tuple[int, ...], float]):
        if not isinstance(sequence_bias, Mapping) or not sequence_bias:
            raise ValueError(f"sequence_bias must be a non-empty mapping {{token tuple: bias}}, got {sequence_bias!r}")
        checked: dict[tuple[int, ...], float] = {}
        for seq, bias in sequence_bias.items():
            if not isinstance(seq, tuple) or not seq or not all(_is_token_id(t) for t in seq):
                raise ValueError(f"sequence_bias keys must be non-empty tuples of token ids >= 0, got {seq!r}")
            if isinstance(bias, bool) or not isinstance(bias, (int, float)) or math.isnan(bias) or bias == math.inf:
                raise ValueError(f"sequence_bias values must be real numbers (-inf allowed), got {bias!r} for {seq}")
            checked[seq] = float(bias)
        self._prepare(checked)


def bad_word_forms(word: str, exact: bool = False) -> list[str]:
    """The written forms of a bad word that are banned: with ``exact``, the word as typed
    (transformers' ``bad_words_ids`` are exact token sequences); otherwise also its case
    variants, since a user banning "estação" means "Estação" and "ESTAÇÃO" too: as typed,
    lower case, first letter capitalised (of the typed and the lower-case word), every word
    capitalised, upper case. Duplicates dropped, in that order; each form is then tokenised
    at a sentence start and after a space (``core.processors.chain.word_variants``).

    Args:
        word: the banned word or phrase (outer white space is ignored).
        exact: ban only the typed form.

    Returns:
        the forms, the typed one first.
    """
    word = word.strip()
    if exact:
        return [word]
    lower = word.lower()

    def first_up(w: str) -> str:
        return w[:1].upper() + w[1:]

    forms = [word, lower, first_up(word), first_up(lower), " ".join(first_up(w) for w in lower.split(" ")),
             word.upper()]
    return list(dict.fromkeys(f for f in forms if f))


class NoBadWords(_SequenceBiasBase):
    """Forbid token sequences; transformers ``NoBadWordsLogitsProcessor``.

    A one-token bad word gets ``-inf`` at every step; a longer one gets ``-inf`` on its
    last token in the rows whose ``input_ids`` (forced prompt included) end with the
    rest of it. A bad word equal to ``[eos_token_id]`` is dropped, as in transformers
    (use :class:`MinNewTokens` to delay EOS); if that leaves nothing, the processor is a
    no-op. An empty bad word raises ValueError here (transformers silently ignores it).

    Args:
        bad_words_ids: non-empty sequence of non-empty sequences of token ids.
        eos_token_id: the EOS id, or None.

    Call: ``input_ids`` int64 (batch, seq), ``scores`` float32 (batch, vocab) -> new
    float32 (batch, vocab).

    Raises:
        ValueError: in ``__init__`` on an empty list, an empty bad word, a negative or
            non-int id; when called, if a token id is outside the vocabulary.
    """

    name = "bad_words"

    def __init__(self, bad_words_ids: Sequence[Sequence[int]], eos_token_id: int | None):
        if isinstance(bad_words_ids, (str, bytes)) or not isinstance(bad_words_ids, Sequence) or not bad_words_ids:
            raise ValueError(f"bad_words_ids must be a non-empty list of token-id lists, got {bad_words_ids!r}")
        for word in bad_words_ids:
            if not isinstance(word, Sequence) or not word or not all(_is_token_id(t) for t in word):
                raise ValueError(f"each bad word must be a non-empty list of token ids >= 0, got {word!r}")
        if eos_token_id is not None and not _is_token_id(eos_token_id):
            raise ValueError(f"eos_token_id must be a token id >= 0 or None, got {eos_token_id!r}")
        self.eos_token_id = eos_token_id
        words = [tuple(word) for word in bad_words_ids]
        # banning EOS alone is not done here (transformers drops it too)
        self._prepare({word: NEG_INF for word in words if word != (eos_token_id,)})


class MinNewTokens:
    """Forbid EOS until ``min_new_tokens`` tokens were generated after the forced prompt;
    transformers ``MinNewTokensLengthLogitsProcessor``.

    The number generated is ``input_ids.shape[1] - prompt_len``; while it is below
    ``min_new_tokens`` the EOS score becomes ``-inf`` in every row. An EOS id outside
    the vocabulary is ignored (as in transformers).

    Args:
        prompt_len: number of forced prompt tokens at the start of ``input_ids``.
        min_new_tokens: >= 0 (0 = off).
        eos_token_id: the EOS id.

    Call: ``input_ids`` int64 (batch, seq), ``scores`` float32 (batch, vocab) -> new
    float32 (batch, vocab) (``scores`` itself when nothing changes).

    Raises:
        ValueError: if any argument is not an int >= 0.
    """

    name = "min_new_tokens"

    def __init__(self, prompt_len: int, min_new_tokens: int, eos_token_id: int):
        _check_count(prompt_len, "prompt_len")
        _check_count(min_new_tokens, "min_new_tokens")
        _check_count(eos_token_id, "eos_token_id")
        self.prompt_len = prompt_len
        self.min_new_tokens = min_new_tokens
        self.eos_token_id = eos_token_id

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        generated = input_ids.shape[1] - self.prompt_len
        if generated >= self.min_new_tokens or self.eos_token_id >= scores.shape[-1]:
            return scores
        out = scores.clone()
        out[:, self.eos_token_id] = NEG_INF
        return out


class ExponentialDecayLengthPenalty:
    """Raise the EOS score exponentially once ``start_index`` new tokens were generated;
    transformers ``ExponentialDecayLengthPenalty``.

    With ``cur_len = input_ids.shape[1]`` and ``k = cur_len - (prompt_len +
    start_index)``, nothing changes while ``k <= 0``; from ``k = 1`` on, the EOS score
    ``s`` becomes ``s + |s| * (decay_factor ** k - 1)``. For ``s > 0`` that is ``s *
    decay_factor ** k``; for ``s < 0`` it is ``s * (2 - decay_factor ** k)``, which
    moves a negative score up towards 0 and, once ``decay_factor ** k > 2``, above it
    (transformers' way of "supporting negative logits"). A non-finite EOS score (e.g.
    banned) is left as it is. ``decay_factor < 1`` lowers EOS instead. Should
    ``decay_factor ** k`` overflow a Python float, the factor is taken as ``inf``
    (transformers raises OverflowError).

    Args:
        start_index: new tokens generated before the penalty starts (>= 0).
        decay_factor: > 0 (1 = off).
        eos_token_id: the EOS id.
        prompt_len: number of forced prompt tokens (transformers ``input_ids_seq_length``).

    Call: ``input_ids`` int64 (batch, seq), ``scores`` float32 (batch, vocab) -> new
    float32 (batch, vocab) (``scores`` itself before the start).

    Raises:
        ValueError: in ``__init__`` if ``start_index``, ``eos_token_id`` or
            ``prompt_len`` is not an int >= 0 or ``decay_factor`` is not a finite
            number > 0; when called, if ``eos_token_id`` is outside the vocabulary.
    """

    name = "exponential_decay_length_penalty"

    def __init__(self, start_index: int, decay_factor: float, eos_token_id: int, prompt_len: int):
        _check_count(start_index, "start_index")
        _check_count(eos_token_id, "eos_token_id")
        _check_count(prompt_len, "prompt_len")
        if not (isinstance(decay_factor, (int, float)) and math.isfinite(decay_factor) and decay_factor > 0):
            raise ValueError(f"decay_factor must be a finite number > 0 (1 = off), got {decay_factor!r}")
        self.start = start_index + prompt_len  # input_ids length after which the penalty applies
        self.decay_factor = float(decay_factor)
        self.eos_token_id = eos_token_id

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        steps = input_ids.shape[1] - self.start
        if steps <= 0:
            return scores
        if self.eos_token_id >= scores.shape[-1]:
            raise ValueError(f"eos_token_id {self.eos_token_id} is outside the vocabulary of {scores.shape[-1]} tokens")
        try:
            growth = self.decay_factor**steps - 1
        except OverflowError:
            growth = math.inf
        eos = scores[:, self.eos_token_id]  # (batch,)
        # boost by |s| * growth so that negative scores move up too; leave -inf / inf alone
        boost = (eos.abs() * growth).masked_fill(~eos.isfinite(), 0.0)
        out = scores.clone()
        out[:, self.eos_token_id] = eos + boost
        return out
