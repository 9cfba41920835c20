"""A second model decoding the same input beside the target: a draft model for speculative
decoding (``core.speculative.model_draft``), the target's own first layers
(``core.speculative.early_exit``), or contrastive decoding's amateur.

``ModelCompanion`` implements ``core.speculative.draft.Companion``: it holds its own encoder
output of the input and its own KV cache, feeds only the ids its cache has not seen (several
at once, ``Backend.step(..., all_positions=True)``) and cuts its cache back with
``truncate_cache`` when the target's ids leave the path it followed.

Ids cross between the two vocabularies through the token text (``TokenMap``): a target id
and a draft id are the same token when their tokenizer pieces are the same string (byte-level
BPE pieces such as ``"Ġthe"``, SentencePiece pieces such as ``"▁the"``, special tokens such
as ``"<|en|>"`` by their text too). whisper tiny.en and base do NOT share one vocabulary:
tiny.en has GPT-2's byte-level BPE, the multilingual models another one; 30,986 of tiny.en's
51,864 pieces are also base pieces (all the common English ones) and their special tokens
sit one id apart (``<|endoftext|>`` 50256 vs 50257). A target token without a counterpart is
fed to the companion as the draft tokenizer's own pieces of its text (its BPE applied to the
target piece), so the companion may hold more positions than the target; the logits after a
target position are the companion's after the last of that token's pieces. A companion never
proposes a token without a target counterpart (its logit is -inf in the target's vocabulary).

The decoder prompt: when the task gives the companion its own prompt (``draft_prompt``: what
its own task would feed for the same language/task/timestamps/previous text; tiny.en's
English-only prompt is ``<|startoftranscript|><|notimestamps|>``, base's
``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>``), the target's prompt is
replaced by it; otherwise the target's prompt ids are mapped by their text like every other id.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

MIN_SHARED = 0.5
"""``TokenMap`` refuses two vocabularies that share fewer than this fraction of the target's
tokens by text (they are not one tokenizer family: the companion would see other text)."""

KEEP_ROWS = 64
"""Companion logits rows kept for the last positions (so a cut back need not re-feed)."""


def token_pieces(backend: Any) -> list[str | None]:
    """The tokenizer piece of every id of ``backend``'s output vocabulary (``vocab_size``
    entries; None where the tokenizer has no token for an output row): transformers
    tokenizers' ``convert_ids_to_tokens``, SentencePiece's ``id_to_piece``, else the
    backend's ``token_text``."""
    n = int(backend.vocab_size)
    tok = getattr(backend, "tokenizer", None)
    if tok is not None and hasattr(tok, "convert_ids_to_tokens"):
        size = len(tok) if hasattr(tok, "__len__") else n
        pieces = list(tok.convert_ids_to_tokens(list(range(min(n, size)))))
        return [p if isinstance(p, str) else None for p in pieces] + [None] * (n - len(pieces))
    if tok is not None and hasattr(tok, "id_to_piece"):
        size = min(n, int(tok.get_piece_size()))
        return [tok.id_to_piece(i) for i in range(size)] + [None] * (n - size)
    return [backend.token_text(i) for i in range(n)]


class TokenMap:
    """Target ids <-> companion ids through the token text (see the module docstring).

    Args:
        target, companion: the two backends (``vocab_size``, ``tokenizer`` or ``token_text``).
        min_shared: refuse when fewer than this fraction of the target's tokens have a
            companion token of the same text.

    Attributes:
        identity: both vocabularies are the same (ids map to themselves).
        shared: how many target ids have a counterpart.
        target_vocab_size, companion_vocab_size: the two widths.

    Raises:
        ValueError: the vocabularies do not share the text (another tokenizer family), with
            the share found and what to pair instead.
    """

    def __init__(self, target: Any, companion: Any, min_shared: float = MIN_SHARED):
        self.target_vocab_size = int(target.vocab_size)
        self.companion_vocab_size = int(companion.vocab_size)
        self._split_cache: dict[int, list[int]] = {}
        self._companion = companion
        self._target = target
        if companion is target:
            self.identity = True
        else:
            t_pieces = token_pieces(target)
            c_pieces = token_pieces(companion)
            self.identity = t_pieces == c_pieces
        if self.identity:
            self.t2c = torch.arange(self.target_vocab_size)
            self.c2t = torch.arange(self.companion_vocab_size)
            self.shared = self.target_vocab_size
            return
        index = {p: i for i, p in enumerate(c_pieces) if p is not None}
        t2c = torch.full((self.target_vocab_size,), -1, dtype=torch.long)
        for i, p in enumerate(t_pieces):
            j = index.get(p) if p is not None else None
            if j is not None:
                t2c[i] = j
        named = sum(p is not None for p in t_pieces)
        self.shared = int((t2c >= 0).sum())
        if self.shared < min_shared * max(1, named):
            raise ValueError(
                f"{getattr(companion, 'name', 'the companion')} and {getattr(target, 'name', 'the target')} do not "
                f"share their tokenizer: only {self.shared} of the target's {named} tokens have the same text in "
                f"the companion's vocabulary (need {min_shared:.0%}); pair two models of one tokenizer family "
                "(whisper tiny.en with base, distil-whisper with whisper)")
        c2t = torch.full((self.companion_vocab_size,), -1, dtype=torch.long)
        mapped = (t2c >= 0).nonzero().flatten()
        c2t[t2c[mapped]] = mapped
        self.t2c, self.c2t = t2c, c2t
        self._t_cols = mapped  # target columns with a counterpart
        self._c_cols = t2c[mapped]

    @classmethod
    def same(cls, backend: Any) -> "TokenMap":
        """The identity map of one backend's vocabulary (early exit: the target itself)."""
        return cls(backend, backend)

    def companion_ids(self, target_id: int) -> list[int]:
        """The companion ids that stand for ``target_id``: its counterpart, or the companion
        tokenizer's pieces of its text (possibly none: a special token it lacks)."""
        j = int(self.t2c[target_id]) if 0 <= target_id < self.target_vocab_size else -1
        if j >= 0:
            return [j]
        if target_id not in self._split_cache:
            self._split_cache[target_id] = self._split(target_id)
        return self._split_cache[target_id]

    def _split(self, target_id: int) -> list[int]:
        piece = token_pieces_one(self._target, target_id)
        if not piece:
            return []
        tok = getattr(self._companion, "tokenizer", None)
        model = getattr(getattr(tok, "backend_tokenizer", None), "model", None)
        if model is not None and hasattr(model, "tokenize") and not (piece.startswith("<|") and piece.endswith("|>")):
            ids = [t.id for t in model.tokenize(piece)]  # the same byte-level alphabet: exact
            if ids and all(0 <= i < self.companion_vocab_size for i in ids):
                return ids
        if piece.startswith("<") and piece.endswith(">"):
            return []  # a special token the companion lacks: nothing to feed
        text = self._target.token_text(target_id)
        return [i for i in self._companion.tokenize(text) if 0 <= i < self.companion_vocab_size]

    def target_id(self, companion_id: int) -> int:
        """The target id of ``companion_id``, or -1 when the target has no such token."""
        return int(self.c2t[companion_id])

    def to_target(self, logits: torch.Tensor) -> torch.Tensor:
        """Companion logits (n, companion vocab) as float32 (n, target vocab): each target
        column takes its counterpart's logit, -inf where there is none."""
        if self.identity:
            return logits.float()
        out = torch.full((logits.shape[0], self.target_vocab_size), float("-inf"))
        out[:, self._t_cols] = logits[:, self._c_cols].float()
        return out


def token_pieces_one(backend: Any, token_id: int) -> str | None:
    """The tokenizer piece of one id (see ``token_pieces``)."""
    tok = getattr(backend, "tokenizer", None)
    if tok is not None and hasattr(tok, "convert_ids_to_tokens"):
        piece = tok.convert_ids_to_tokens(int(token_id))
        return piece if isinstance(piece, str) else None
    if tok is not None and hasattr(tok, "id_to_piece"):
        return tok.id_to_piece(int(token_id))
    return backend.token_text(int(token_id))


class ModelCompanion:
    """``core.speculative.draft.Companion`` over a second backend (see the module docstring).

    Args:
        backend: the companion's backend.
        encoded: its encoder output of the same input (the task encodes the segment once
            with it, cached like the target's).
        token_map: target <-> companion ids (``TokenMap``; ``TokenMap.same(backend)`` when the
            companion is the target's own backend, as in early exit).
        name: display name ("tiny.en", "early-exit:4").
        target_prompt: the target's decoder prompt ids; with ``draft_prompt`` it is replaced
            by that when ``ids`` begin with it.
        draft_prompt: the companion's own prompt for the same input (its task's), or None
            (map the target's prompt ids by text).
        step_kwargs: extra keywords of every ``backend.step`` (``exit_layer``, ``head_ids``).

    Attributes:
        name, target_vocab_size: as the protocol says.
        calls, positions_fed: decoder calls made and positions fed (for the bench).
    """

    def __init__(self, backend: Any, encoded: Any, token_map: TokenMap, *, name: str,
                 target_prompt: Sequence[int] = (), draft_prompt: Sequence[int] | None = None,
                 step_kwargs: Mapping[str, Any] | None = None):
        self.backend, self.encoded, self.map = backend, encoded, token_map
        self.name = name
        self.target_vocab_size = token_map.target_vocab_size
        self.target_prompt = [int(t) for t in target_prompt]
        self.draft_prompt = None if draft_prompt is None else [int(t) for t in draft_prompt]
        self.step_kwargs = dict(step_kwargs or {})
        self.cache = None
        self.fed: list[int] = []  # companion ids in the cache, in order
        self.rows: dict[int, torch.Tensor] = {}  # position -> companion logits after it (vocab,)
        self.calls = 0
        self.positions_fed = 0

    def reset(self) -> None:
        """Forget the cache (the next call starts from the prompt)."""
        self.cache, self.fed, self.rows = None, [], {}

    def convert(self, ids: Sequence[int]) -> tuple[list[int], list[int]]:
        """The companion's ids for target ``ids`` and, per target position, the companion
        position whose logits stand for it (the last piece of that token).

        Raises:
            ValueError: no companion id at all (nothing to feed).
        """
        ids = [int(t) for t in ids]
        seq: list[int] = []
        ends: list[int] = []
        rest = ids
        n = len(self.target_prompt)
        if self.draft_prompt is not None and n and ids[:n] == self.target_prompt:
            seq = list(self.draft_prompt)
            ends = [len(seq) - 1] * n
            rest = ids[n:]
        for t in rest:
            seq.extend(self.map.companion_ids(t))
            ends.append(len(seq) - 1)
        if not seq:
            raise ValueError(f"{self.name} has no token for any of the ids {ids[:8]}...; it cannot follow this run")
        return seq, [max(0, e) for e in ends]

    def logits(self, ids: Sequence[int], n_last: int = 1) -> torch.Tensor:
        """The companion's logits after each of the last ``n_last`` positions of target
        ``ids``, float32 (n_last, target vocab), -inf where the companion has no token
        (``core.speculative.draft.Companion.logits``)."""
        if not 1 <= n_last <= len(ids):
            raise ValueError(f"n_last must be in [1, {len(ids)}], got {n_last}")
        seq, ends = self.convert(ids)
        need = ends[-n_last:]
        rows = self._rows(seq, need)
        return self.map.to_target(torch.stack(rows))

    def _rows(self, seq: list[int], need: list[int]) -> list[torch.Tensor]:
        """Companion logits (vocab,) after each position of ``need`` in ``seq``, feeding
        (and first cutting back) the companion's cache as needed."""
        b = self.backend
        common = 0
        limit = min(len(self.fed), len(seq))
        while common < limit and self.fed[common] == seq[common]:
            common += 1
        # feed from the first position that leaves the path, or earlier where a needed row is gone
        start = min([common] + [p for p in need if p < common and p not in self.rows])
        if self.cache is None or start == 0:
            self.cache, self.fed, self.rows = b.init_cache(self.encoded, 1), [], {}
            start = 0
        elif start < len(self.fed):
            self.cache = b.truncate_cache(self.cache, start)
            self.fed = self.fed[:start]
            self.rows = {p: r for p, r in self.rows.items() if p < start}
        if start < len(seq):
            new = seq[start:]
            out = b.step(torch.tensor([new], dtype=torch.long), self.cache, False, all_positions=True,
                         **self.step_kwargs)
            self.cache = out.cache
            self.calls += 1
            self.positions_fed += len(new)
            got = out.position_logits[0]
            first = len(seq) - got.shape[0]  # Bergamot's implicit start adds a row on a fresh cache
            for j in range(got.shape[0]):
                self.rows[first + j] = got[j]
            self.fed = list(seq)
        low = len(seq) - KEEP_ROWS
        if low > 0:
            self.rows = {p: r for p, r in self.rows.items() if p >= low or p in need}
        return [self.rows[p] for p in need]
