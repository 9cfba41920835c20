"""Word-level timestamps from cross-attention by dynamic time warping (DTW).

Follows openai/whisper ``whisper/timing.py`` (``find_alignment``, ``merge_punctuations``,
``add_word_timestamps``) step by step, on the cross-attention rows the decoding events
already carry (``StepEvent.cross_attention``: float32 (layers, heads, source_len), the
attention of the query that chose the token), so it can be recomputed on the tokens so
far while decoding goes on:

1. take the model's alignment heads (``LoadedWhisper.alignment_heads``: (layer, head));
2. renormalise each head's weights over the window's real frames (timing.py applies the
   softmax after cutting the frames to ``num_frames // 2``; the captured rows are softmaxed
   over all 1500 and cut, and dividing by their sum gives the same numbers);
3. standardise per head and frame over the tokens (``torch.std_mean(weights, dim=-2)``);
4. median filter of width 7 along the frames (reflect padding, as timing.py's
   ``median_filter``);
5. mean over the heads; DTW on minus that token x frame matrix (timing.py ``dtw_cpu``);
6. where the path moves to a new token is that token's start (``jumps``), in frames of
   20 ms (``TOKENS_PER_SECOND`` = 50);
7. tokens merge into words (``Tokenizer.split_to_word_tokens``), the word's probability is
   the mean of its tokens' probabilities, punctuation attaches to its word
   (``merge_punctuations``), and words at sentence ends longer than twice the median word
   are cut (``add_word_timestamps``).

Differences from timing.py, both forced by working on the event stream: the
standardisation of step 3 runs over the generated tokens' rows (and the end-of-text row
when given), not also over the prompt's rows; and without the end-of-text row (decoding not
finished yet) the last word runs to the end of the window (it is still being heard).
Steps of special tokens (timestamps, id >= ``eot``) are left out, as timing.py aligns the
text tokens only.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from core.catalog import FRAME_S

__all__ = ["Alignment", "Word", "WindowPath", "align", "alignment_matrix", "dtw", "median_filter",
           "merge_punctuations", "split_to_word_tokens", "word_timestamps", "PREPEND_PUNCTUATIONS",
           "APPEND_PUNCTUATIONS"]

#: openai/whisper add_word_timestamps' defaults
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"
#: languages written without spaces: words split where tokens decode to whole characters
_NO_SPACE_LANGUAGES = {"zh", "ja", "th", "lo", "my", "yue"}


@dataclass(frozen=True)
class Word:
    """One word and where it was heard.

    Attributes:
        word: its text as decoded (leading space kept, punctuation attached).
        start, end: seconds from the start of the audio.
        prob: mean probability of its tokens (the raw distribution, as timing.py's
            softmax of the logits); punctuation attached to it does not count, as in
            timing.py, which keeps the word's probability when merging.
        tokens: its token ids.
        steps: the ``StepEvent.step`` of each of its tokens.
    """

    word: str
    start: float
    end: float
    prob: float
    tokens: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class WindowPath:
    """The DTW path of one window: which token row each frame was given to.

    Attributes:
        segment: the window (``StepEvent.segment``).
        source_offset: the window's first encoder frame in the whole audio.
        steps: the ``StepEvent.step`` of each DTW row (the window's text tokens in order);
            the end-of-text row, when it was given, is ``-1``.
        rows, frames: int64 (n,) the path's points, (row index into ``steps``, frame within
            the window), from (0, 0) to (last row, last frame), both non-decreasing.
    """

    segment: int
    source_offset: int
    steps: tuple[int, ...]
    rows: np.ndarray
    frames: np.ndarray

    def seconds(self, frame_s: float = FRAME_S) -> np.ndarray:
        """float64 (n,): each path point's frame as seconds in the whole audio (frame start)."""
        return (self.source_offset + self.frames) * frame_s


@dataclass(frozen=True)
class Alignment:
    """What :func:`align` finds: the words and, per window, the DTW path they came from."""

    words: list[Word]
    paths: list[WindowPath]


def median_filter(x: np.ndarray, width: int) -> np.ndarray:
    """Median of width ``width`` (odd) along the last axis, reflect padding (timing.py
    ``median_filter``: ``F.pad(mode="reflect")`` then the middle of each sorted window);
    ``x`` unchanged when the axis is not longer than ``width // 2``."""
    if width <= 0 or width % 2 != 1:
        raise ValueError(f"the median filter width must be a positive odd number, got {width}")
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode="reflect")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1)
    return np.sort(windows, axis=-1)[..., pad]


def alignment_matrix(rows: np.ndarray, heads: Sequence[tuple[int, int]], medfilt_width: int = 7) -> np.ndarray:
    """The token x frame matrix DTW runs on (timing.py ``find_alignment``, up to ``dtw``).

    Args:
        rows: float32 (tokens, layers, heads, frames): each token's cross-attention over
            the window's frames (softmaxed weights).
        heads: the alignment heads, (decoder layer, head) pairs.
        medfilt_width: the median filter's width (7 in timing.py).

    Returns:
        float64 (tokens, frames): per head renormalised over the frames, standardised over
        the tokens, median-filtered along the frames, then averaged over the heads.
    """
    if not heads:
        raise ValueError("the model has no alignment heads; word timestamps need them")
    w = np.stack([rows[:, layer, head, :] for layer, head in heads]).astype(np.float64)  # heads, tokens, frames
    w = w / np.maximum(w.sum(axis=-1, keepdims=True), 1e-30)  # = softmax over the kept frames
    mean, std = w.mean(axis=-2, keepdims=True), w.std(axis=-2, keepdims=True)  # unbiased=False
    # a frame where every token attends the same (one token so far) has std 0: timing.py would
    # give NaN there (its prompt rows make that rare); it is 0 here, so DTW still runs
    w = np.divide(w - mean, std, out=np.zeros_like(w), where=std > 0)
    return median_filter(w, medfilt_width).mean(axis=0)


def dtw(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cheapest monotonic path through cost matrix ``x`` (N, M) from (0, 0) to (N-1, M-1);
    returns (row indices, column indices) along it.

    The same path as openai/whisper ``timing.py`` ``dtw_cpu`` + ``backtrace`` (there
    numba-compiled): the same step order (diagonal, then up, then left on ties) and float32
    cost accumulation. The cost fills one anti-diagonal (i + j = d) at a time in numpy, as
    timing.py's ``dtw_cuda`` does (each cell needs only the two diagonals before it), so a
    100 x 1500 matrix takes milliseconds, not a Python loop over every cell.
    """
    n, m = x.shape
    cost = np.full((n + 1, m + 1), np.inf, dtype=np.float32)
    trace = -np.ones((n + 1, m + 1), dtype=np.float32)
    cost[0, 0] = 0
    xs = np.asarray(x, dtype=np.float64)  # timing.py: dtw_cpu(x.double())
    for d in range(2, n + m + 1):  # cells (i, j), 1 <= i <= n, 1 <= j <= m, i + j = d
        i = np.arange(max(1, d - m), min(n, d - 1) + 1)
        j = d - i
        c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
        t = np.where((c0 < c1) & (c0 < c2), 0, np.where((c1 < c0) & (c1 < c2), 1, 2))
        c = np.where(t == 0, c0, np.where(t == 1, c1, c2))
        cost[i, j] = xs[i - 1, j - 1] + c  # float64 sum stored as float32, as dtw_cpu
        trace[i, j] = t
    # backtrace
    i, j = int(n), int(m)
    trace[0, :] = 2
    trace[:, 0] = 1
    path = []
    while i > 0 or j > 0:
        path.append((i - 1, j - 1))
        t = trace[i, j]
        if t == 0:
            i, j = i - 1, j - 1
        elif t == 1:
            i -= 1
        elif t == 2:
            j -= 1
        else:
            raise ValueError("unexpected trace value")
    result = np.array(path[::-1], dtype=np.int64).reshape(-1, 2)
    return result[:, 0], result[:, 1]


def split_to_word_tokens(tokens: Sequence[int], decode: Callable[[Sequence[int]], str],
                         language: str | None = None) -> tuple[list[str], list[list[int]]]:
    """Words and their tokens (openai/whisper ``Tokenizer.split_to_word_tokens``): tokens
    group until they decode to whole characters; in languages with spaces a new word
    starts at a leading space or a punctuation mark."""
    words, word_tokens = _split_on_unicode(tokens, decode)
    if language in _NO_SPACE_LANGUAGES:
        return words, word_tokens
    out_words: list[str] = []
    out_tokens: list[list[int]] = []
    for sub, sub_tokens in zip(words, word_tokens):
        if sub.startswith(" ") or sub.strip() in string.punctuation or not out_words:
            out_words.append(sub)
            out_tokens.append(list(sub_tokens))
        else:
            out_words[-1] += sub
            out_tokens[-1].extend(sub_tokens)
    return out_words, out_tokens


def _split_on_unicode(tokens: Sequence[int], decode) -> tuple[list[str], list[list[int]]]:
    """timing.py's ``split_tokens_on_unicode``."""
    full = decode(list(tokens))
    replacement = "\ufffd"
    words, word_tokens, current, offset = [], [], [], 0
    for token in tokens:
        current.append(token)
        decoded = decode(current)
        if replacement not in decoded or full[offset + decoded.index(replacement)] == replacement:
            words.append(decoded)
            word_tokens.append(current)
            current = []
            offset += len(decoded)
    return words, word_tokens


def merge_punctuations(words: list[dict], prepended: str = PREPEND_PUNCTUATIONS,
                       appended: str = APPEND_PUNCTUATIONS) -> None:
    """Attach punctuation to its word in place (timing.py ``merge_punctuations``): an
    opening mark after a space joins the following word, a closing mark joins the word
    before it; the emptied entries keep ``word == ""`` and no tokens."""
    i, j = len(words) - 2, len(words) - 1
    while i >= 0:
        previous, following = words[i], words[j]
        if previous["word"].startswith(" ") and previous["word"].strip() in prepended:
            following["word"] = previous["word"] + following["word"]
            following["tokens"] = previous["tokens"] + following["tokens"]
            previous["word"], previous["tokens"] = "", []
        else:
            j = i
        i -= 1
    i, j = 0, 1
    while j < len(words):
        previous, following = words[i], words[j]
        if not previous["word"].endswith(" ") and following["word"] in appended:
            previous["word"] = previous["word"] + following["word"]
            previous["tokens"] = previous["tokens"] + following["tokens"]
            following["word"], following["tokens"] = "", []
        else:
            i = j
        j += 1


def align(
    steps: Sequence,
    alignment_heads: Sequence[tuple[int, int]],
    decode: Callable[[Sequence[int]], str],
    *,
    eot: int | None = None,
    eot_attention: Mapping[int, np.ndarray] | None = None,
    language: str | None = None,
    medfilt_width: int = 7,
    frame_s: float = FRAME_S,
    prepend_punctuations: str = PREPEND_PUNCTUATIONS,
    append_punctuations: str = APPEND_PUNCTUATIONS,
) -> Alignment:
    """Words with start and end times from the steps decoded so far, and the DTW paths.

    Args:
        steps: the run's StepEvents (any order of segments; each needs its
            ``cross_attention``). Each window (``segment``) is aligned on its own and
            placed at its ``source_offset`` (encoder frames).
        alignment_heads: (decoder layer, head) pairs (``LoadedWhisper.alignment_heads``).
        decode: token ids -> text (the backend's ``decode``).
        eot: the end-of-text id; steps with ids >= it (timestamps) are left out.
        eot_attention: segment -> float32 (layers, heads, frames): the attention of the step
            that chose end-of-text (timing.py's last row); without it (decoding goes on) the
            segment is aligned over the frames its tokens have listened to so far
            (:func:`listened_frames`) and its last word ends there.
        language: the language code (words of zh, ja, th, lo, my, yue split by character).
        medfilt_width, frame_s: the median filter width; seconds per encoder frame.

    Returns:
        the words in order (empty when no step has text) and one :class:`WindowPath` per
        window with text, in window order.

    Raises:
        ValueError: a step without cross-attention (capture it: ``capture_attention``), or
            no alignment heads.
    """
    by_segment: dict[int, list] = {}
    for ev in steps:
        if eot is not None and ev.token_id >= eot:
            continue
        by_segment.setdefault(ev.segment, []).append(ev)
    words: list[Word] = []
    paths: list[WindowPath] = []
    for segment in sorted(by_segment):
        evs = sorted(by_segment[segment], key=lambda e: e.step)
        end_row = (eot_attention or {}).get(segment)
        seg_words, path = _segment_words(evs, alignment_heads, decode, end_row, language, medfilt_width, frame_s,
                                         prepend_punctuations, append_punctuations)
        words.extend(seg_words)
        paths.append(path)
    return Alignment(words, paths)


def word_timestamps(
    steps: Sequence,
    alignment_heads: Sequence[tuple[int, int]],
    decode: Callable[[Sequence[int]], str],
    **kwargs,
) -> list[Word]:
    """The words of :func:`align` (same arguments: ``eot``, ``eot_attention``, ``language``,
    ``medfilt_width``, ``frame_s``, ``prepend_punctuations``, ``append_punctuations``)."""
    return align(steps, alignment_heads, decode, **kwargs).words


def _segment_words(evs, heads, decode, end_row, language, medfilt_width, frame_s, prepend,
                   append) -> tuple[list[Word], WindowPath]:
    """timing.py ``find_alignment`` + the parts of ``add_word_timestamps`` that need no
    segment timestamps, for one window's steps: its words and its DTW path."""
    if any(ev.cross_attention is None for ev in evs):
        raise ValueError("word timestamps need each token's cross-attention; decode with capture_attention on")
    rows = [ev.cross_attention for ev in evs] + ([end_row] if end_row is not None else [])
    frames = min(r.shape[-1] for r in rows)
    if end_row is None:  # decoding goes on: align up to where the tokens so far have listened
        frames = listened_frames([r[..., :frames] for r in rows], heads)
    matrix = alignment_matrix(np.stack([r[..., :frames] for r in rows]), heads, medfilt_width)
    text_indices, time_indices = dtw(-matrix)
    path = WindowPath(evs[0].segment, int(evs[0].source_offset),
                      tuple(ev.step for ev in evs) + ((-1,) if end_row is not None else ()), text_indices, time_indices)
    ids = [ev.token_id for ev in evs]
    texts, word_ids = split_to_word_tokens(ids, decode, language)
    if not texts:
        return [], path
    boundaries = np.pad(np.cumsum([len(t) for t in word_ids]), (1, 0))
    jumps = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
    jump_times = time_indices[jumps] * frame_s
    if end_row is None:  # no end-of-text row: the last token runs to where the tokens have listened
        jump_times = np.append(jump_times, frames * frame_s)
    starts, ends = jump_times[boundaries[:-1]], jump_times[boundaries[1:]]
    probs = [float(ev.raw_prob) for ev in evs]
    entries = [
        {"word": w, "tokens": list(t), "start": float(s), "end": float(e), "prob": float(np.mean(probs[a:b]))}
        for w, t, s, e, a, b in zip(texts, word_ids, starts, ends, boundaries[:-1], boundaries[1:])
    ]
    _cut_long_sentence_ends(entries)
    merge_punctuations(entries, prepend, append)
    offset = evs[0].source_offset * frame_s
    out, k = [], 0
    for entry in entries:
        n = len(entry["tokens"])
        if entry["word"]:
            step_ids = tuple(ev.step for ev in evs[k:k + n])
            out.append(Word(entry["word"], offset + entry["start"], offset + entry["end"], entry["prob"],
                            tuple(entry["tokens"]), step_ids))
        k += n
    return out, path


#: encoder frames (20 ms) a live alignment reaches past the latest frame its tokens attend to most
LIVE_MARGIN_FRAMES = 10


def listened_frames(rows: Sequence[np.ndarray], heads: Sequence[tuple[int, int]]) -> int:
    """How many frames a window's live alignment covers: the latest frame any token so far
    attends to most (mean over the alignment heads), plus :data:`LIVE_MARGIN_FRAMES`, at most
    all of them. Ours, not timing.py's (which aligns finished text only): while decoding
    goes on, the last word then ends near where the decoder is listening and grows with
    each token, instead of running to the end of the window.

    Args:
        rows: float32 (layers, heads, frames) per token, equal frames.
        heads: (layer, head) pairs.
    """
    frames = rows[0].shape[-1]
    peaks = [int(np.argmax(np.mean([r[layer, head] for layer, head in heads], axis=0))) for r in rows]
    return int(min(frames, max(peaks) + 1 + LIVE_MARGIN_FRAMES))


def _cut_long_sentence_ends(entries: list[dict]) -> None:
    """timing.py ``add_word_timestamps``' first hack: a word at a sentence boundary is no
    longer than twice the median word duration (at most 0.7 s)."""
    durations = np.array([e["end"] - e["start"] for e in entries])
    durations = durations[durations.nonzero()]
    if len(durations) == 0:
        return
    max_duration = min(0.7, float(np.median(durations))) * 2
    marks = ".。!！?？"
    for i in range(1, len(entries)):
        if entries[i]["end"] - entries[i]["start"] > max_duration:
            if entries[i]["word"] in marks:
                entries[i]["end"] = entries[i]["start"] + max_duration
            elif entries[i - 1]["word"] in marks:
                entries[i]["start"] = entries[i]["end"] - max_duration
