"""What the views see of one decoder step: the StepReporter (and ``RunEvents``, which
orders a run's events).

The engine and beam search's finalize share this one object. It turns a step's
distributions into plain-data events (``core.events``): the token's display text, its
probability under the processed and the raw distribution, the top-k of both, the
entropy of the processed distribution, the raw distribution's entropy, varentropy and
the chosen token's rank, what each stage of the sampler chain kept (``StageReport``),
and the cross-attention row; it numbers the steps of a segmented input
(``step_offset``, ``segment``, ``source_offset``).

    raw distribution       softmax of the logits with only the hard rules applied
                           (suppressed tokens), temperature 1, no filter;
    processed distribution softmax of the scores the strategy chose from (after the
                           penalties and, when sampling, temperature / top-k / top-p).

Nothing here chooses a token or touches a model.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from core.events import (BeamEvent, BeamNode, BeamRowReport, Hypothesis, LensEntry, Placement, StageReport, StepEvent,
                         TokenProb)

RANK_LIMIT = 100
"""Ranks are exact up to this; a token ranked lower is reported as ``RANK_LIMIT + 1``
("beyond 100": GLTR's last bucket). Keeping more costs a larger top-k per row and step."""


def entropy_nats(probs: torch.Tensor) -> float:
    """Shannon entropy -sum p log p of a (vocab,) distribution, nats (0 log 0 = 0)."""
    if _numpy_row(probs):  # the report's own sum (:func:`_nonzero_moments`): the same bits as a StepEvent's
        row = probs.detach().numpy()
        return _nonzero_moments(row[row > 0], False)[0]
    return float(torch.special.entr(probs).sum())


def varentropy_nats(probs: torch.Tensor, entropy: float) -> float:
    """Varentropy sum p (log p + H)^2 of a (vocab,) distribution, nats² (the variance of
    the surprise -log p; entropix ``calculate_varentropy_logsoftmax``). Zero-probability
    tokens contribute nothing."""
    if _numpy_row(probs):  # over the nonzero entries in index order, as :func:`_nonzero_moments`
        row = probs.detach().numpy()
        nonzero = row[row > 0]
        log_p = _log_np(nonzero)
        d = log_p + log_p.dtype.type(entropy)
        return float(np.dot(d * nonzero, d))
    log_p = probs.clamp_min(torch.finfo(probs.dtype).tiny).log()  # finite; p = 0 terms vanish below
    return float((probs * (log_p + entropy) ** 2).sum(dtype=torch.float64))


def _numpy_row(probs: torch.Tensor) -> bool:
    """Whether a row is read with numpy (a float32/float64 CPU vector): numpy's vectorised log
    is ~3x torch's here, and ``torch.special.entr`` (~300 us for 51,865 entries) is not
    vectorised at all."""
    return probs.device.type == "cpu" and probs.dim() == 1 and probs.dtype in (torch.float32, torch.float64)


_TINY: dict[str, np.ndarray] = {}  # dtype -> a read-only row of the dtype's tiny, the longest asked yet


def _constant_row(cache: dict[str, np.ndarray], n: int, dtype: np.dtype, make) -> np.ndarray:
    """A read-only row of ``n`` entries of ``make(length, dtype)``'s constant: one row per dtype,
    grown to the longest length asked and sliced (a view), so rows of many lengths (sparse rows'
    supports under top-k/top-p, shortlists) keep no array each."""
    row = cache.get(dtype.str)
    if row is None or row.shape[0] < n:
        row = make(max(n, 2 * (0 if row is None else row.shape[0])), dtype)
        row.flags.writeable = False
        cache[dtype.str] = row
    return row[:n]


def _log_np(p: np.ndarray) -> np.ndarray:
    """log p with p clamped to the dtype's smallest normal (finite; p = 0 terms vanish). The
    clamp reads a constant row (numpy's maximum against a scalar is ~3x slower)."""
    tiny = _constant_row(_TINY, p.shape[0], p.dtype, lambda n, dt: np.full(n, np.finfo(dt).tiny, dtype=dt))
    out = np.maximum(p, tiny)
    return np.log(out, out=out)


_LOG_TINY: dict[str, np.ndarray] = {}
"""No longer filled (a sparse row's moments are summed over its support, not laid into a whole
row of log tiny); kept so that callers that clear it keep working."""


SUPPORT_FRACTION = 1 / 8
"""A distribution whose nonzero entries are at most this fraction of its vocabulary (a
translation model's shortlist: ~500 of 32k) is reported over those entries alone
(:func:`support`); a denser one (Whisper's, a few suppressed tokens) over the whole row."""

SUPPORT_MIN_VOCAB = 1024
"""Rows shorter than this are always reported over the whole row (nothing to gain)."""

_SAMPLE_STRIDE = 64  # the cheap density probe: every 64th entry (~500 of 32k, ~3 us)


def support(probs: torch.Tensor) -> torch.Tensor | None:
    """The ascending int64 indices of the nonzero entries of a (vocab,) distribution when
    they are at most ``SUPPORT_FRACTION`` of it, else None (report over the whole row).

    A strided sample decides first, so a dense row (Whisper's) costs ~5 us of thread CPU and no search.
    Only float32/float64 rows on the CPU are considered (others: None).
    """
    vocab = probs.shape[-1]
    if (vocab < SUPPORT_MIN_VOCAB or probs.device.type != "cpu" or probs.dim() != 1
            or probs.dtype not in (torch.float32, torch.float64)):
        return None
    row = probs.detach().contiguous().numpy()
    sample = row[::_SAMPLE_STRIDE]
    if np.count_nonzero(sample) > SUPPORT_FRACTION * sample.shape[0]:
        return None
    idx = np.flatnonzero(row > 0)
    if len(idx) > SUPPORT_FRACTION * vocab or len(idx) == 0:
        return None
    return torch.from_numpy(idx)


HEAD_CHUNKS = 512
"""A dense row's top entries are searched among the entries at least as large as the
``RANK_LIMIT + 1``-th largest of its chunk maxima (:func:`head`): ~100-200 of 51,865."""


def head(probs: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(values, int64 ids) of the ``k`` largest entries of a (vocab,) CPU float row, values
    descending and equal to ``torch.topk(probs, k)``'s (ids too, where no two of those values
    tie: equal values may come in another order), or None where this does not apply (a row
    shorter than 2 x ``HEAD_CHUNKS``, ``k`` > ``HEAD_CHUNKS``, a NaN, not a float32/float64
    CPU vector): then take ``torch.topk`` of the whole row.

    Why it is exact: the row is cut into ``HEAD_CHUNKS`` chunks; the ``k`` largest chunk
    maxima are ``k`` distinct entries all >= tau (the k-th of them), so the row's k-th largest
    value is >= tau and every entry of the top k is among the entries >= tau. One pass for
    the maxima, one compare, a top-k of ~100-200 entries: ~50 us against ~200 us for
    ``torch.topk(probs, 101)`` over 51,865 entries.
    """
    vocab = probs.shape[-1]
    chunk = vocab // HEAD_CHUNKS
    if not _numpy_row(probs) or not probs.is_contiguous() or chunk < 2 or k > HEAD_CHUNKS:
        return None
    n = chunk * HEAD_CHUNKS
    row = probs.detach().numpy()
    maxima = probs[:n].view(HEAD_CHUNKS, chunk).amax(1).numpy()  # torch: numpy's row max is ~3x slower here
    if np.isnan(maxima).any() or np.isnan(row[n:]).any():
        return None
    tau = np.partition(maxima, HEAD_CHUNKS - k)[HEAD_CHUNKS - k]  # the tail past the chunks is compared below too
    idx = np.flatnonzero(row >= tau)
    order = np.argsort(-row[idx], kind="stable")[:k]  # descending (equal values: the caller checks for ties)
    return torch.from_numpy(row[idx[order]]), torch.from_numpy(idx[order])


def _nonzero_moments(nonzero: np.ndarray, with_var: bool) -> tuple[float, float | None]:
    """(entropy -sum p log p, varentropy sum p (log p + H)^2 or None) of a distribution given
    by its NONZERO entries ``nonzero`` (float32/float64 numpy (n,), in index order): the zero
    entries' terms are 0, so they are left out. The sums are numpy dot products (~1 us over a
    shortlist's ~500 entries, ~3 us over Whisper's 51,865). Both report paths, a sparse row's
    support and a dense row's nonzero entries, call this on the same array (the row's entries
    ``> 0``, gathered in index order), so they give the same bits."""
    log_p = _log_np(nonzero)
    entropy = -float(np.dot(nonzero, log_p))
    if not with_var:
        return entropy, None
    d = log_p + log_p.dtype.type(entropy)
    return entropy, float(np.dot(d * nonzero, d))


class _Dist:
    """One (vocab,) distribution as the report reads it, over its support when sparse.

    Every value it gives equals the whole-row computation bit for bit: the top-k values are
    copies of the row's entries (a top-k whose values tie, where ``torch.topk``'s order of
    equal values depends on the row's layout, is taken over the whole row), and the entropy /
    varentropy are summed over the row's nonzero entries in index order on either path
    (:func:`_nonzero_moments`: a sparse row's support, a dense row's entries ``> 0``).
    A sparse row is read with numpy (its support, the gathered entries, their top-k): on a
    shortlist's ~500 of 32,000 entries each call costs about a microsecond.

    A compact row (``ids`` given: ``probs`` (n,) holds the probabilities of the ascending
    vocabulary ids ``ids``, every other id of the ``vocab``-wide row having 0) is read over its
    nonzero entries the same way, without the whole row: the same values, ids and sums as the
    whole row's (which is laid out only where a tie or a dense support needs it).
    """

    def __init__(self, probs: torch.Tensor, ids: torch.Tensor | None = None, vocab: int | None = None):
        self._sub: np.ndarray | None = None  # the support's entries (numpy), in index order
        self.sub = None  # the same as a tensor (shares memory)
        if ids is not None:
            row = probs.detach().numpy()
            nonzero = np.flatnonzero(row > 0)
            if 0 < len(nonzero) <= SUPPORT_FRACTION * vocab and vocab >= SUPPORT_MIN_VOCAB:
                self.vocab, self._compact = vocab, (probs, ids)
                self._probs = None  # the whole row, laid out on demand (``probs``)
                self.support = torch.from_numpy(ids.numpy()[nonzero])
                self._sub = row[nonzero]
                self.sub = torch.from_numpy(self._sub)
                self._top = None
                self._head, self._entropy, self._varentropy = False, None, None
                return
            probs = torch.zeros(vocab, dtype=probs.dtype).index_copy_(0, ids, probs)  # dense: the whole row
        self._probs = probs
        self.vocab = probs.shape[-1]
        self.support = support(probs)
        if self.support is not None:
            self._sub = probs.detach().numpy()[self.support.numpy()]
            self.sub = torch.from_numpy(self._sub)
        self._top: tuple[np.ndarray, np.ndarray] | None = None  # top of _sub: values, positions, descending
        self._head: tuple[torch.Tensor, torch.Tensor] | None | bool = False  # dense: head(); False: not yet
        self._entropy: float | None = None
        self._varentropy: float | None = None

    @property
    def probs(self) -> torch.Tensor:
        """The whole (vocab,) row (a compact row's laid out once, when first asked for)."""
        if self._probs is None:
            values, ids = self._compact
            self._probs = torch.zeros(self.vocab, dtype=values.dtype).index_copy_(0, ids, values)
        return self._probs

    @property
    def sparse(self) -> bool:
        """Whether the distribution is read over its support."""
        return self.support is not None

    def _sub_top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, positions in ``sub``) of the ``k`` largest support entries, descending
        (cached, grown; at least ``RANK_LIMIT + 1`` computed). Equal values may come in any
        order: the callers check for ties."""
        sub = self._sub
        n = sub.shape[0]
        k = min(k, n)
        if self._top is None or self._top[0].shape[0] < k:
            kk = max(k, min(RANK_LIMIT + 1, n))
            part = np.argpartition(sub, n - kk)[n - kk:] if kk < n else np.arange(n)
            order = part[np.argsort(sub[part], kind="stable")[::-1]]
            self._top = (sub[order], order)
        return self._top[0][:k], self._top[1][:k]

    def _dense_top(self, k: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """A dense row's ``head`` of ``RANK_LIMIT + 1`` entries (computed once), or None where
        it does not apply or holds fewer than ``k``."""
        if self._head is False:
            self._head = head(self.probs, min(RANK_LIMIT + 1, self.probs.shape[-1]))
        return self._head if self._head is not None and self._head[0].shape[0] >= k else None

    def topk(self, k: int) -> tuple[list[int], list[float]]:
        """(ids, probabilities) as ``torch.topk(probs, k)`` gives them (``k <= vocab``), except
        that past the support the zero-probability entries read id -1 (callers leave them out)."""
        if self.sparse:
            values, pos = self._sub_top(k + 1)
            vals = values.tolist()
            if all(a != b for a, b in zip(vals, vals[1:])):  # no ties: the order is unique
                n = min(k, len(vals))
                ids = self.support.numpy()[pos[:n]].tolist()
                return ids + [-1] * (k - n), vals[:n] + [0.0] * (k - n)  # zeros: left out by callers
        else:
            top = self._dense_top(k + 1)
            if top is not None:
                vals = top[0][: k + 1].tolist()
                if all(a != b for a, b in zip(vals, vals[1:])):  # no ties: the order is unique
                    return top[1][:k].tolist(), vals[:k]
        values, ids = torch.topk(self.probs, k)
        return ids.tolist(), values.tolist()

    def top_values(self, k: int) -> np.ndarray:
        """float numpy (k,) of the row's dtype: the ``k`` largest probabilities, descending
        (``k <= vocab``)."""
        if self.sparse:
            values = self._sub_top(k)[0]
            out = np.zeros(k, dtype=values.dtype)
            out[: len(values)] = values
            return out
        top = self._dense_top(k)
        if top is not None:  # the values (not their order among ties) are the whole row's
            return top[0][:k].numpy().copy()
        return torch.topk(self.probs, k).values.numpy().copy()

    def entropy(self) -> float:
        """:func:`entropy_nats` of the distribution."""
        if self._entropy is None:
            self._stats(with_var=False)
        return self._entropy

    def varentropy(self) -> float:
        """:func:`varentropy_nats` of the distribution."""
        if self._varentropy is None:
            self._stats(with_var=True)
        return self._varentropy

    def _stats(self, with_var: bool) -> None:
        """Entropy (and varentropy) of the row, summed over its nonzero entries in index order
        (:func:`_nonzero_moments`): a sparse row's support, a dense row's entries ``> 0``
        gathered the same way, so both paths give the same bits."""
        if not self.sparse and not _numpy_row(self.probs):  # another device or dtype: torch over the whole row
            self._entropy = entropy_nats(self.probs)
            self._varentropy = varentropy_nats(self.probs, self._entropy) if with_var else None
            return
        if self.sparse:
            nonzero = self._sub
        else:
            row = self.probs.detach().contiguous().numpy()
            nonzero = row[row > 0]  # the same array as row[support]: the entries > 0, in index order
        self._entropy, self._varentropy = _nonzero_moments(nonzero, with_var)


@dataclass
class StepTensors:
    """One engine step's distributions, kept until the tokens chosen from them are
    reported (the current step; the previous one for contrastive search; every step's
    row reports for beam search).

    Attributes:
        probs: float32 (batch, vocab): the processed distribution.
        raw_probs: float32 (batch, vocab): the raw distribution (hard rules only).
        cross_attention: float32 (batch, layers, heads, source_len_total) or None.
        stages: (stage name, scores after that stage, float32 (batch, vocab)) per
            processor of the chain, in order.
        lens_logp: float32 (batch, decoder layers, vocab) or None: the logit lens as
            log-probabilities (log_softmax of each layer's logits with the hard rules),
            the last layer being the raw distribution's.
        extras: what stages reported beyond their scores (``ProcessorList.extras``:
            contrastive decoding's amateur), {stage name: per row (scores (vocab,), note)}.
        ids: None (full rows), or int64 (n,) ascending: compact rows (``core.scoring.Scorer``
            over a shortlist's ``StepOutput.logit_ids``): ``probs``/``raw_probs`` are (batch, n),
            column j holding id ``ids[j]``; every other id has probability 0. No stages, no lens.
        vocab_size: the vocabulary's size with compact rows (what ``ids`` index), else None.
    """

    probs: torch.Tensor
    raw_probs: torch.Tensor
    cross_attention: torch.Tensor | None
    stages: list[tuple[str, torch.Tensor]]
    lens_logp: torch.Tensor | None = None
    extras: dict[str, list[tuple[torch.Tensor, str]]] = dataclasses.field(default_factory=dict)
    ids: torch.Tensor | None = None
    vocab_size: int | None = None


@dataclass(frozen=True)
class RowReport:
    """The report of one hypothesis row at one step, kept until its token is known
    (beam search emits its StepEvents when the search ends).

    Attributes:
        topk: the processed distribution's most probable tokens (probability > 0).
        raw_topk: the raw distribution's most probable tokens.
        entropy: of the processed distribution, nats.
        attention: float32 (layers, heads, source_len) or None.
        raw_entropy, raw_varentropy: of the raw distribution, nats and nats².
        raw_top: float32 (<= RANK_LIMIT,): the raw distribution's largest
            probabilities, descending (to rank the token chosen later).
        stages: per chain stage, what it kept (see ``StageReport``).
        stage_candidates: the tokens ``stages[i].probs`` refer to.
        lens_topk: per decoder layer, its lens's most probable tokens (the output layer's
            is ``raw_topk``); empty without the lens.
        lens_logp: token id -> its log-probability at each decoder layer, for the tokens
            that may be reported from this row (the emitted one; beam search: the row's
            candidates).
    """

    topk: list[TokenProb]
    raw_topk: list[TokenProb]
    entropy: float
    attention: np.ndarray | None
    raw_entropy: float = 0.0
    raw_varentropy: float = 0.0
    raw_top: np.ndarray | None = None
    stages: tuple[StageReport, ...] = ()
    stage_candidates: tuple[TokenProb, ...] = ()
    lens_topk: tuple[list[TokenProb], ...] = ()
    lens_logp: dict[int, tuple[float, ...]] = dataclasses.field(default_factory=dict)

    def lens(self, token_id: int) -> list[LensEntry]:
        """The lens entries of this row for the emitted ``token_id`` (empty without the lens)."""
        logp = self.lens_logp.get(int(token_id))
        out = []
        for layer, top in enumerate(self.lens_topk):
            best = top[0] if top else TokenProb(-1, "", 0.0)
            lp = logp[layer] if logp is not None else float("nan")
            out.append(LensEntry(layer, best.id, best.text, best.prob, top, lp))
        return out

    def rank(self, raw_prob: float) -> int:
        """1-based rank of a token of raw probability ``raw_prob`` (ties share the best
        rank); ``RANK_LIMIT + 1`` beyond the kept ranks."""
        if self.raw_top is None:
            return 1
        # raw_top is descending: count the strictly larger probabilities
        larger = int(np.searchsorted(-self.raw_top, -raw_prob, side="left"))
        return larger + 1 if larger < len(self.raw_top) else RANK_LIMIT + 1


ROW_FIELDS = ("topk", "raw_topk", "entropy", "raw_entropy", "raw_varentropy", "stages", "stage_candidates")
"""The fields a StepEvent takes from its row's :class:`RowReport` unchanged (same name, same value)."""


@dataclass(frozen=True)
class TokenRecord:
    """One token a hypothesis emitted: enough to build its StepEvent later.

    Attributes:
        step: local step index (0 = the first free step of this segment).
        row: the hypothesis row (beam) it was chosen from at that step.
        token_id: the token.
        prob, raw_prob: its processed and raw probabilities (0..1).
        mu: a stateful sampler's state when the token was chosen (mirostat's target
            surprise mu, bits), or None.
        forced: the token was forced (``core.strategies.forced``), not chosen.
    """

    step: int
    row: int
    token_id: int
    prob: float
    raw_prob: float
    mu: float | None = None
    forced: bool = False


def _remembered(token_text: Callable[[int], str]) -> Callable[[int], str]:
    """``token_text`` that asks once per id and then answers from a dict (a run's top-k lists
    name the same ids again and again: ~11 tokenizer calls a step otherwise)."""
    texts: dict[int, str] = {}

    def text(token_id: int) -> str:
        found = texts.get(token_id)
        if found is None:
            found = texts[token_id] = token_text(token_id)
        return found

    return text


class StepReporter:
    """Builds StepEvents and BeamEvents for one ``Engine.run``.

    Args:
        token_text: id -> display text (e.g. " fox"); each id's text is asked for once per
            reporter (a run's top-k lists name the same few hundred ids step after step).
        decode: ids -> text (special tokens skipped), for beam hypotheses.
        top_k_report: how many tokens each top-k list holds (>= 1).
        capture_attention: whether events carry the cross-attention row.
        source_len: attention columns kept (the leading real encoder positions).
        place: where the run's events sit in a segmented input (``core.events.Placement``:
            step_offset, segment, source_offset), copied into them.
    """

    def __init__(
        self,
        token_text: Callable[[int], str],
        decode: Callable[[Sequence[int]], str],
        *,
        top_k_report: int,
        capture_attention: bool,
        source_len: int,
        place: Placement = Placement(),
    ):
        self.token_text = _remembered(token_text)
        self.decode = decode
        self.top_k_report = top_k_report
        self.capture_attention = capture_attention
        self.source_len = source_len
        self.place = place
        self.step_offset, self.segment, self.source_offset = place.step_offset, place.segment, place.source_offset
        self.support_reports = 0  # distributions reported over their support (a shortlist), not the whole row

    def top_k(self, probs: torch.Tensor | _Dist) -> list[TokenProb]:
        """The ``top_k_report`` most probable tokens of one (vocab,) distribution.

        Tokens with probability 0 (removed by a filter or a hard rule) are left out, so a
        filter that keeps one token reports one entry, not arbitrary zero-probability ids.
        """
        dist = probs if isinstance(probs, _Dist) else _Dist(probs)
        ids, values = dist.topk(min(self.top_k_report, dist.vocab))
        return [TokenProb(i, self.token_text(i), p) for i, p in zip(ids, values) if p > 0.0]

    def attention_row(self, cross_attention: torch.Tensor | None, row: int) -> np.ndarray | None:
        """float32 numpy (layers, heads, source_len) of hypothesis ``row``, or None."""
        if cross_attention is None or not self.capture_attention:
            return None
        return cross_attention[row, :, :, : self.source_len].float().numpy().copy()

    def row_report(self, step: StepTensors, row: int, lens_tokens: Sequence[int] = ()) -> RowReport:
        """The report of hypothesis ``row`` of one step; with the lens, the per-layer
        log-probabilities of ``lens_tokens`` (the tokens that may be emitted from it)."""
        raw = step.raw_probs[row]
        # a shortlisted row (mostly zeros) is read over its nonzero entries, with the same values;
        # a compact one (``step.ids``) is that row without its zeros
        raw_dist = _Dist(raw, step.ids, step.vocab_size)
        same = step.probs is step.raw_probs  # no chain: the processed distribution is the raw one
        dist = raw_dist if same else _Dist(step.probs[row], step.ids, step.vocab_size)
        self.support_reports += raw_dist.sparse + (dist.sparse and not same)
        stages, candidates = self.stage_reports(raw, [(n, s[row]) for n, s in step.stages],
                                                {n: e[row] for n, e in step.extras.items() if row < len(e)})
        raw_topk = self.top_k(raw_dist)
        lens_topk, lens_logp = self.lens_report(step.lens_logp, row, raw_topk, lens_tokens)
        raw_varentropy = raw_dist.varentropy()  # first: one pass gives the raw entropy with it
        return RowReport(
            topk=list(raw_topk) if same else self.top_k(dist),
            raw_topk=raw_topk,
            entropy=dist.entropy(),
            attention=self.attention_row(step.cross_attention, row),
            raw_entropy=raw_dist.entropy(),
            raw_varentropy=raw_varentropy,
            raw_top=raw_dist.top_values(min(RANK_LIMIT, raw_dist.vocab)),
            stages=stages,
            stage_candidates=candidates,
            lens_topk=lens_topk,
            lens_logp=lens_logp,
        )

    def lens_report(
        self, lens_logp: torch.Tensor | None, row: int, raw_topk: list[TokenProb], tokens: Sequence[int]
    ) -> tuple[tuple[list[TokenProb], ...], dict[int, tuple[float, ...]]]:
        """Per decoder layer the lens's top-k of hypothesis ``row`` (the output layer's is
        ``raw_topk``, the raw distribution's own), and per token of ``tokens`` its
        log-probability at each layer; ((), {}) without the lens.

        Args:
            lens_logp: float32 (batch, layers, vocab) log-probabilities, or None.
        """
        if lens_logp is None:
            return (), {}
        logp = lens_logp[row]  # (layers, vocab)
        k = min(self.top_k_report, logp.shape[-1])
        values, ids = torch.topk(logp[:-1], k, dim=-1)
        tops = []
        for vs, ix in zip(values.exp().tolist(), ids.tolist()):
            tops.append([TokenProb(i, self.token_text(i), p) for i, p in zip(ix, vs) if p > 0.0])
        tops.append(raw_topk)
        chosen = {}
        if tokens:
            uniq = list(dict.fromkeys(int(t) for t in tokens))
            cols = logp[:, uniq].t().tolist()  # (n_tokens, layers)
            chosen = {t: tuple(c) for t, c in zip(uniq, cols)}
        return tuple(tops), chosen

    def stage_reports(
        self, raw: torch.Tensor, stages: Sequence[tuple[str, torch.Tensor]],
        extras: dict[str, tuple[torch.Tensor, str]] | None = None,
    ) -> tuple[tuple[StageReport, ...], tuple[TokenProb, ...]]:
        """Per stage: tokens kept, the mass they had entering the stage, and the
        renormalised probabilities of the candidate tokens (the ``top_k_report`` best of
        the raw distribution and of every stage's output, best-after-the-chain first).

        Args:
            raw: float32 (vocab,): the distribution entering the chain.
            stages: (name, float32 (vocab,) scores after the stage) in order.
            extras: {stage name: (its amateur's scores float32 (vocab,), a note)} for the
                stages that report one (contrastive decoding): ``StageReport.amateur`` / ``note``.
        """
        if not stages:
            return (), ()
        dists = [raw] + [torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0) for _, scores in stages]
        k = min(self.top_k_report, raw.shape[-1])
        ids: list[int] = []
        for dist in reversed(dists):  # the chain's output first, the raw distribution last
            values, top = torch.topk(dist, k)
            for i, p in zip(top.tolist(), values.tolist()):
                if p > 0.0 and i not in ids:
                    ids.append(i)
        index = torch.tensor(ids, dtype=torch.long)
        reports = []
        for (name, _), before, after in zip(stages, dists, dists[1:]):
            kept = after > 0
            extra = (extras or {}).get(name)
            reports.append(StageReport(
                name=name,
                kept=int(torch.count_nonzero(after)),
                mass=min(1.0, float(torch.where(kept, before, 0.0).sum(dtype=torch.float64))),
                probs=after[index].float().numpy().copy(),
                amateur=None if extra is None else torch.softmax(extra[0].float(), -1)[index].numpy().copy(),
                note="" if extra is None else extra[1],
            ))
        raw_sel = raw[index].tolist()
        return tuple(reports), tuple(TokenProb(i, self.token_text(i), p) for i, p in zip(ids, raw_sel))

    def step_event(self, record: TokenRecord, report: RowReport, time_ms: float = 0.0) -> StepEvent:
        """The StepEvent of one emitted token (its row's ``ROW_FIELDS`` as they are);
        ``time_ms``: the decoder time of its step (``StepEvent.time_ms``)."""
        token_id, raw_prob = int(record.token_id), float(record.raw_prob)
        return StepEvent(
            step=self.step_offset + record.step, token_id=token_id, text=self.token_text(token_id),
            prob=float(record.prob), raw_prob=raw_prob, rank=report.rank(raw_prob), mu=record.mu,
            forced=record.forced, cross_attention=report.attention, lens=report.lens(token_id),
            segment=self.segment, source_offset=self.source_offset, time_ms=float(time_ms),
            **{name: getattr(report, name) for name in ROW_FIELDS},
        )

    def beam_event(
        self,
        step: int,
        running: Sequence[tuple[Sequence[int], float]],
        finished: Sequence[tuple[Sequence[int], float]],
        nodes: Sequence[BeamNode] | None = None,
        rows: Sequence[RowReport] = (),
        best: int | None = None,
    ) -> BeamEvent:
        """The live beams after step ``step``: (generated ids without EOS, cumulative
        log-probability) of the running hypotheses, best first, and of the finished ones;
        the strategy's beam-tree ``nodes`` (local step, no text; given their token text
        and the global step here), the step's row reports (shrunk to top-k, entropy and
        the attention averaged over layers and heads) and the current best node."""
        def hyp(ids: Sequence[int], score: float, done: bool) -> Hypothesis:
            return Hypothesis(list(ids), self.decode(list(ids)), float(score), done)

        return BeamEvent(
            step=self.step_offset + step,
            beams=[hyp(ids, s, False) for ids, s in running],
            finished=[hyp(ids, s, True) for ids, s in finished],
            segment=self.segment,
            nodes=[
                dataclasses.replace(n, text=self.token_text(n.token) if n.parent is not None else "",
                                    step=self.step_offset + n.step)
                for n in nodes or ()
            ],
            rows=[self.beam_row(r, report) for r, report in enumerate(rows)],
            best=best,
        )

    @staticmethod
    def beam_row(row: int, report: RowReport) -> BeamRowReport:
        """The compact report of beam ``row``: top-k, entropy, and the attention float32
        (layers, heads, source_len) averaged to float32 (source_len,)."""
        attention = None
        if report.attention is not None:
            attention = report.attention.mean(axis=(0, 1), dtype=np.float32)
        return BeamRowReport(row, report.topk, report.entropy, attention, raw_topk=report.raw_topk)


class RunEvents:
    """The events of one run, in the order the views need them (the engine's reporter role).

    A single-hypothesis strategy's token is final when ``update.emitted`` names it: its
    StepEvent goes out at once, from the distribution of the step it was chosen at (this one,
    or the previous one for contrastive search, which looks one step ahead). Beam search's
    output is known only at the end: each step yields a BeamEvent and keeps its row reports,
    and ``finish`` yields the best hypothesis's StepEvents from them.

    Args:
        reporter: the run's ``StepReporter``.
        requested: ``time.perf_counter()`` when the run was asked for (``first_token_s``).

    Attributes:
        first_token_s: seconds from ``requested`` to the first StepEvent (0 before it).
    """

    def __init__(self, reporter: StepReporter, requested: float):
        self.reporter = reporter
        self.requested = requested
        self.first_token_s = 0.0
        self._previous: StepTensors | None = None  # contrastive search reports a token one step late
        self._rows: list[list[RowReport]] = []  # per beam step and row, for the late StepEvents
        self._rows_from = 0  # the step of _rows[0] (forced steps come first)
        self._times: list[float] = []  # per beam step, its decoder ms (parallel to _rows)
        self._previous_ms = 0.0  # the previous step's decoder ms (contrastive search)

    def _first_token(self) -> None:
        self.first_token_s = self.first_token_s or time.perf_counter() - self.requested

    def step(self, t: int, update, current: StepTensors, time_ms: float = 0.0) -> Iterator[StepEvent | BeamEvent]:
        """The events of step ``t``, given the strategy's ``core.strategies.Update``, the
        step's distributions and the wall time of its decoder call (``time_ms``, ms)."""
        report = self.reporter
        if update.emitted is not None:  # greedy / sampling / contrastive: the token is final now
            emitted = update.emitted
            source, ms = (current, time_ms) if emitted.step == t else (self._previous, self._previous_ms)
            self._first_token()
            yield report.step_event(emitted, report.row_report(source, emitted.row, (emitted.token_id,)), ms)
        if update.beams is not None:  # beam search: which beam wins is known at the end
            self._rows_from = self._rows_from if self._rows else t
            # the lens of a row keeps the tokens its candidates chose (one of them may be the output's)
            chosen: dict[int, list[int]] = {}
            for node in (update.nodes or ()) if current.lens_logp is not None else ():
                chosen.setdefault(node.row, []).append(node.token)
            self._rows.append([report.row_report(current, r, chosen.get(r, ())) for r in range(current.probs.shape[0])])
            self._times.append(time_ms)
            yield report.beam_event(t, *update.beams, nodes=update.nodes, rows=self._rows[-1], best=update.best_node)
        self._previous, self._previous_ms = current, time_ms

    def finish(self, result) -> Iterator[StepEvent]:
        """The StepEvents of ``result.records`` (a ``core.strategies.Result``): the tokens not
        reported yet (beam search's best hypothesis)."""
        for rec in result.records:
            self._first_token()
            i = rec.step - self._rows_from
            yield self.reporter.step_event(rec, self._rows[i][rec.row], self._times[i])
