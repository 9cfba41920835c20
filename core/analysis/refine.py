"""Refine word timestamps by muting the audio around each boundary (issue 14, section 2).

In the manner of stable-ts ``refine()`` (jianfch/stable-ts, ``stable_whisper/non_whisper/
refinement.py``, class ``Refiner``: "iteratively muting portions of the audio and monitoring
token probabilities to find the most precise timestamps ... the latest start and earliest end
of a word that maintains an acceptable probability"): the DTW words (``core.analysis.
alignment``) give each boundary a first guess; this pass moves it to where muting starts to
hurt the word.

For the **start** of word k, the audio from ``lo`` (its DTW start, or up to ``outward`` earlier
but never before the previous word's end) up to a candidate time t is
silenced and the window's original tokens are forced through the re-encoded audio (teacher
forcing, one decoder call: ``HFSeq2SeqBackend.forced_logits``). While t lies before the word,
its watched probability stays near its probability under the real audio; once t cuts into the
word it falls. The start is the latest t at which the probability has not fallen by more than
``max_drop`` (relative), found by bisection on ``[lo, min(DTW end, lo + reach)]`` to
``precision`` seconds. The **end** is the mirror image: the audio from t up to ``hi`` (its DTW
end, or up to ``outward`` later but never past the next word's refined start or the window's
end) is silenced, and the end is the earliest t that keeps the word. Starts run first so that
the end searches do not mute the next word.

As in stable-ts, words of even and odd index are muted in two separate copies of the audio
(rows), so the muting for one word never touches the span its neighbours' searches mute, and
all words of a window move one bisection step per round: a round costs two encoder passes
(even/odd rows) whatever the number of words; ``ceil(log2((reach + outward) / precision))``
rounds per kind (5 for reach 0.5 s, outward 0), so about 21 encoder passes per 30 s window.

As stable-ts, this tightens words (the latest start and earliest end that keep the word): DTW
words are contiguous, each pause given to the word after it, so DTW starts come early and ends
late. ``outward`` lets a boundary move the other way too, at a risk: muting part of a
neighbouring word lowers this word's probability as well (by 5-30 % on the bench clips), which
the search then takes for this word's edge. Differences from stable-ts: the reference probability
is the one under the real audio (stable-ts mutes up to the old boundary first); a word's
probability is its first text token's for the start and its last's for the end ("edge", as
stable-ts ``get_prob``), or the product of its text tokens' ("all"); punctuation tokens are not
watched. Known bias: Whisper still hears a word whose first few tens of ms or quiet tail are
muted, so refined starts come a little late and ends a little early.

Long audio (issue 19): the pass works window by window, each word within its own window's
audio (fixed 30 s windows, or a long-form run's seek-cut windows: ``SpeechModel.refine_words``
``longform=True``); a boundary outside its window (a word crossing the window's edge) is not
searched and the word is cut at the edge. Cost: ``1 + 2 * len(steps) * rounds`` encoder passes per
window (25 with the defaults; tiny.en on one CPU core, about 30 s per window or 0.45 s per word
of espeak speech), so ``budget_s`` bounds it: the pass stops between rounds and the words it did
not reach keep their times (``report`` says how many it refined). Failures are raised as
:class:`RefineError` naming the word or window.

Reuses the input what-if machinery (``core.tasks.whatif``): the muted spans are its ``span_samples``
and the scores equal its ``score_tokens`` raw probabilities (a test checks), computed in one
decoder call instead of one engine step per token. No torch here: the task gives a ``score``
callable (window, audio or None) -> probabilities (``SpeechModel.refine_words``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from core.analysis.alignment import Word
from core.tasks.whatif import span_samples

__all__ = ["RefineError", "RefineOptions", "RefineWindow", "forced_token_probs", "refine_words", "WATCH"]

#: which probability of a word is watched: "edge" = its first text token for the start, its
#: last for the end (stable-ts ``get_prob``); "all" = the product of its text tokens'
WATCH = ("edge", "all")


@dataclass(frozen=True)
class RefineOptions:
    """How the refine pass searches.

    Attributes:
        precision: seconds; the bisection stops when a boundary is known to this (>= one 20 ms
            encoder frame is useful; smaller only costs rounds).
        max_drop: relative fall of the watched probability (from its value under the real
            audio) that counts as "muting hurt the word": 0.1 = it fell below 90 %.
        watch: "edge" or "all" (:data:`WATCH`).
        min_prob: a word whose watched probability under the real audio is below this keeps
            its DTW times (the model barely heard it; its fall says little).
        steps: the passes in order, up to 4 of "s" (starts) and "e" (ends): "se" = starts, then
            ends up to the refined next starts (stable-ts's default); "ses" runs the starts
            again from the refined previous ends (a DTW start inside the previous word's tail
            cannot move in the first pass: muting there hurts this word from the first
            candidate on).
        reach: seconds; a boundary moves at most this far into its word (start later, end
            earlier) from its DTW time.
        outward: seconds it may move the other way (start earlier, end later), never past the
            neighbouring word's boundary (the previous word's end, the next word's refined
            start): muting into a neighbour lowers this word's probability too, which a search
            would take for this word's edge. 0 = tighten only, as stable-ts. DTW words are
            contiguous (each pause given to the word after it), so outward matters for ends
            (and a window's first word) only.
    """

    precision: float = 0.02
    max_drop: float = 0.1
    watch: str = "edge"
    min_prob: float = 0.05
    steps: str = "se"
    reach: float = 0.5
    outward: float = 0.3

    def validate(self) -> "RefineOptions":
        """Return self, or raise ValueError saying which field is out of range."""
        if not (0.001 <= self.precision <= 1.0):
            raise ValueError(f"precision must be 0.001-1 s, got {self.precision}; 0.02 is one encoder frame")
        if not (0.0 < self.max_drop < 1.0):
            raise ValueError(f"max_drop must be between 0 and 1 (a relative fall), got {self.max_drop}")
        if self.watch not in WATCH:
            raise ValueError(f"watch must be one of {', '.join(WATCH)}, got {self.watch!r}")
        if not (0.0 <= self.min_prob < 1.0):
            raise ValueError(f"min_prob must be in [0, 1), got {self.min_prob}")
        if not (self.precision < self.reach <= 5.0) or not (0.0 <= self.outward <= 5.0):
            raise ValueError(f"reach must be precision-5 s and outward 0-5 s, got {self.reach}, {self.outward}")
        if not self.steps or set(self.steps) - {"s", "e"} or len(self.steps) > 4:
            raise ValueError(f"steps must be up to 4 of 's' and 'e' ('se', 'ses', ...), got {self.steps!r}")
        return self


@dataclass(frozen=True)
class RefineWindow:
    """One decoded window, as the refine pass needs it.

    Attributes:
        index: the window's segment index (``StepEvent.segment``).
        audio: float32 (n,) its samples (16 kHz unless ``refine_words`` is told otherwise).
        offset: seconds of its first sample in the whole audio.
        steps: the ``StepEvent.step`` of each of its decoded tokens, in order (what ``score``
            forces, timestamp tokens included).
    """

    index: int
    audio: np.ndarray
    offset: float
    steps: tuple[int, ...]


#: (window, its samples with parts silenced, or None for the samples as decoded) -> float32
#: (len(window.steps),) each decoded token's probability, forced after the tokens before it
Score = Callable[[RefineWindow, "np.ndarray | None"], np.ndarray]


def forced_token_probs(backend, encoded, prompt, token_ids: Sequence[int]) -> np.ndarray:
    """float32 (len(token_ids),): each token's probability given ``prompt.prompt_ids`` and the
    tokens before it, over ``encoded``, in one decoder call (``backend.forced_logits``).

    The prompt's suppressed tokens (and at the first position its begin-suppressed ones) are
    removed before the softmax, as the engine's raw distribution does; the timestamp rules are
    not applied (they change the normalisation slightly when the run used timestamps).
    """
    import torch

    prompt_ids = list(prompt.prompt_ids)
    ids = [int(t) for t in token_ids]
    if not ids:
        return np.zeros(0, np.float32)
    logits = backend.forced_logits(encoded, prompt_ids + ids[:-1])[len(prompt_ids) - 1:].clone()
    if prompt.suppress_tokens:
        logits[:, list(prompt.suppress_tokens)] = -math.inf
    if prompt.begin_suppress_tokens:
        logits[0, list(prompt.begin_suppress_tokens)] = -math.inf
    probs = torch.softmax(logits, dim=-1)
    return probs[torch.arange(len(ids)), torch.tensor(ids)].numpy().astype(np.float32)


@dataclass
class _Search:
    """One boundary's bisection: ``good`` is a time where muting is known harmless, ``bad`` one
    where it is known to hurt (None until seen); the boundary lies between them."""

    word: int  # index into the words list
    kind: str  # "s" or "e"
    row: int  # the word's parity: even and odd words are muted in separate copies
    edge: float  # lo (start) or hi (end): the fixed end of the muted span, window seconds
    good: float
    bad: float
    tokens: tuple[int, ...]  # indices into the window's tokens that are watched
    ref: float = 0.0
    done: bool = False
    moved: bool = False  # some candidate was judged harmless (else the DTW time is kept)

    def candidate(self) -> float:
        return 0.5 * (self.good + self.bad)

    def muted(self) -> tuple[float, float]:
        t = self.candidate()
        return (self.edge, t) if self.kind == "s" else (t, self.edge)


def refine_words(
    words: Sequence[Word],
    windows: Sequence[RefineWindow],
    score: Score,
    options: RefineOptions | None = None,
    *,
    decode: Callable[[Sequence[int]], str] | None = None,
    sample_rate: int = 16_000,
    cancel: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
    budget_s: float | None = None,
    report: dict | None = None,
) -> list[Word]:
    """The words with their boundaries moved to where muting starts to hurt them.

    Args:
        words: DTW words (``SpeechModel.words``), in order; each word's ``steps`` name its tokens.
        windows: the run's windows (:class:`RefineWindow`); a word whose steps are in none of
            them is returned unchanged.
        score: (window, samples or None) -> the window's token probabilities (:data:`Score`).
        options: :class:`RefineOptions` (default: its defaults).
        decode: token ids -> text, to leave punctuation tokens out of what is watched (without
            it every token of a word is watched).
        sample_rate: of the windows' audio.
        cancel: polled between rounds; when it returns True the words come back as they are.
        progress: called (words done, words in all) after each bisection round (a window's words
            count as done in proportion to its rounds; the last call is (n, n)).
        budget_s: seconds the pass may take: when they are spent (checked between rounds) it
            stops; the window it was on and those after it keep their words as given (a bound
            on the cost; None = no bound).
        report: a dict filled with ``words`` (in all), ``refined`` (words in the windows
            finished), ``windows`` / ``windows_refined``, ``seconds`` and ``stopped`` (None,
            "budget" or "cancelled").

    Returns:
        new :class:`Word` s (same text, tokens, prob): starts and ends within their windows,
        each word's start <= end, and a word's end <= the next word's start. A boundary that
        lies outside its word's window (a word crossing the window's edge) is not searched; the
        word is cut at the window's edge. Cancelled: the input words, unchanged.

    Raises:
        ValueError: bad options.
        RefineError: scoring or muting failed; the message names the word (or the window:
            its index, seconds and words) and says why.
    """
    options = (options or RefineOptions()).validate()
    out = list(words)
    where = {s: (w, k) for w in windows for k, s in enumerate(w.steps)}
    by_window: dict[int, list[int]] = {}
    for i, word in enumerate(words):
        if word.steps and word.steps[0] in where:
            by_window.setdefault(where[word.steps[0]][0].index, []).append(i)
    win_of = {w.index: w for w in windows}
    plans = [(win_of[j], idx) for j, idx in sorted(by_window.items())]
    rounds = max(1, math.ceil(math.log2((options.reach + options.outward) / options.precision)))
    n_words, words_done = sum(len(idx) for _, idx in plans), 0
    per_window = rounds * len(options.steps)
    begun = time.perf_counter()
    info = report if report is not None else {}
    info.update(words=n_words, refined=0, windows=len(plans), windows_refined=0, seconds=0.0, stopped=None)

    def over() -> bool:
        return budget_s is not None and time.perf_counter() - begun > budget_s

    for window, idx in plans:
        if over():
            info["stopped"] = "budget"
            break
        length = len(window.audio) / sample_rate
        probs = _scored(score, window, None, words, idx, length)  # the reference: the window as decoded
        done, cut = 0, False
        for kind in options.steps:  # starts first: the end searches stop at the refined next start
            searches = _searches(out, idx, window, where, probs, kind, options, decode, sample_rate)
            for _ in range(rounds):
                if cancel is not None and cancel():
                    info.update(stopped="cancelled", refined=0, windows_refined=0,
                                seconds=time.perf_counter() - begun)
                    return list(words)
                if over():
                    cut = True
                    break
                _round(window, searches, score, options, sample_rate, words, idx)
                done += 1
                if progress is not None:
                    progress(words_done + len(idx) * done // per_window, n_words)
            if cut:
                break
            for s in searches:
                if s.moved:
                    t = window.offset + 0.5 * (s.good + s.bad)
                    out[s.word] = replace(out[s.word], **{"start" if kind == "s" else "end": t})
        if cut:  # stopped inside this window: its words stay as given
            for i in idx:
                out[i] = words[i]
            info["stopped"] = "budget"
            break
        words_done += len(idx)
        info["refined"], info["windows_refined"] = words_done, info["windows_refined"] + 1
        _order(out, idx, window.offset, window.offset + length)
    info["seconds"] = time.perf_counter() - begun
    return out


class RefineError(RuntimeError):
    """The refine pass failed; the message names the word (or the window) it failed on."""


def _scored(score: Score, window: RefineWindow, samples, words, idx, length: float) -> np.ndarray:
    """``score(window, samples)``, a failure raised as :class:`RefineError` naming the window."""
    try:
        return score(window, samples)
    except Exception as e:  # noqa: BLE001 - said again with the window it failed on
        first, last = words[idx[0]], words[idx[-1]]
        raise RefineError(f"refine failed in window {window.index + 1} ({window.offset:.2f}–"
                          f"{window.offset + length:.2f} s, words {idx[0] + 1}–{idx[-1] + 1}: "
                          f"{first.word.strip()!r} … {last.word.strip()!r}): {e}") from e


def _searches(words, idx, window: RefineWindow, where, probs: np.ndarray, kind: str, options: RefineOptions,
              decode, sample_rate: int) -> list[_Search]:
    """The window's searches of one kind ("s"/"e"), their reference probabilities from ``probs``.

    A start is searched in [max(the previous word's end, start - outward), min(the word's end,
    start + reach)], an end in [max(the word's start, end - reach), min(the next word's start
    (refined when starts ran first), end + outward)].
    """
    length = len(window.audio) / sample_rate
    searches = []
    for k, i in enumerate(idx):
        word = words[i]
        watched = [where[s][1] for s, t in zip(word.steps, word.tokens)
                   if decode is None or any(c.isalnum() for c in decode([t]))]
        watched = watched or [where[s][1] for s in word.steps]
        tokens = tuple((watched[:1] if kind == "s" else watched[-1:]) if options.watch == "edge" else watched)
        ref = float(np.prod(probs[list(tokens)]))
        if ref < options.min_prob:
            continue
        start, end = word.start - window.offset, word.end - window.offset
        if kind == "s":  # mute lo..t: harmless at lo, hurts by the word's end
            lo = words[idx[k - 1]].end - window.offset if k else 0.0  # never inside the word before
            lo = min(max(lo, start - options.outward, 0.0), length)
            bad = min(end, max(start, lo) + options.reach, length)
            if 0.0 <= start < length and bad - lo >= options.precision:  # a start past the window's end stays
                searches.append(_Search(i, "s", k % 2, lo, good=lo, bad=bad, tokens=tokens, ref=ref))
        else:  # mute t..hi: harmless at hi, hurts from the word's start
            hi = words[idx[k + 1]].start - window.offset if k + 1 < len(idx) else length
            hi, bad = min(hi, end + options.outward, length), max(start, end - options.reach, 0.0)
            if 0.0 < end <= length and hi - bad >= options.precision:  # an end past the window's end stays
                searches.append(_Search(i, "e", k % 2, hi, good=hi, bad=bad, tokens=tokens, ref=ref))
    return searches


def _round(window: RefineWindow, searches: list[_Search], score: Score, options: RefineOptions,
           sample_rate: int, words: Sequence[Word] = (), idx: Sequence[int] = ()) -> None:
    """One bisection step of every open search: each row's candidates muted together, scored once.
    A muted span is clipped to the window (a word may cross its edge); a failure is raised as
    :class:`RefineError` naming the word (or the window) it failed on."""
    n = len(window.audio)
    window_s = n / sample_rate
    for row in range(2):
        todo = [s for s in searches if s.row == row and not s.done]
        if not todo:
            continue
        audio = np.array(window.audio, dtype=np.float32, copy=True)
        for s in todo:
            t0, t1 = s.muted()
            t0, t1 = max(0.0, t0), min(window_s, t1)
            if t1 - t0 >= 1.0 / sample_rate:
                try:
                    a, b = span_samples(n, t0, t1, sample_rate)
                except ValueError as e:
                    w = words[s.word] if words else None
                    said = f" {w.word.strip()!r} ({w.start:.2f}–{w.end:.2f} s)" if w is not None else ""
                    raise RefineError(f"refine failed on word {s.word + 1}{said}: {e}") from e
                audio[a:b] = 0.0
        probs = _scored(score, window, audio, words, idx, window_s) if words else score(window, audio)
        for s in todo:
            p = float(np.prod(probs[list(s.tokens)]))
            t = s.candidate()
            if p >= (1.0 - options.max_drop) * s.ref:
                s.good, s.moved = t, True
            else:
                s.bad = t
            s.done = abs(s.bad - s.good) <= options.precision


def _order(out: list[Word], idx: Sequence[int], t_min: float, t_max: float) -> None:
    """Clip a window's words to it (a word crossing its edge is cut there), keep start <= end
    and a word's end <= the next start (where searches crossed, both sides meet in the middle)."""
    for i in idx:
        w = out[i]
        start, end = min(max(w.start, t_min), t_max), min(max(w.end, t_min), t_max)
        if start > end:
            start = end = 0.5 * (start + end)
        out[i] = replace(w, start=start, end=end)
    for a, b in zip(idx, idx[1:]):
        if out[a].end > out[b].start:
            t = 0.5 * (out[a].end + out[b].start)
            out[a] = replace(out[a], end=max(t, out[a].start))
            out[b] = replace(out[b], start=min(t, out[b].end))
