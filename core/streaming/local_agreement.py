"""LocalAgreement-n: commit what the last n decodes of the growing buffer agree on.

Macháček, Dabre and Bojar 2023, "Turning Whisper into Real-Time Transcription System"
(IJCNLP-AACL demo; ufal/whisper_streaming ``whisper_online.py``: ``HypothesisBuffer.insert /
flush`` and ``OnlineASRProcessor.process_iter``), after Polák et al. 2022 (LocalAgreement for
simultaneous translation). Every ``step_s`` seconds the whole buffer is decoded again with the
text committed before it as the prompt; the longest prefix on which the last ``n`` hypotheses
agree is committed (``flush``), the rest stays tentative. The buffer is trimmed at the end of a
committed sentence once it is longer than ``trim_after_s`` (whisper_streaming's "segment"
trimming, 15 s), its text going into the prompt. Committed tokens inside the buffer are forced
as the start of each decode, so a new hypothesis can only extend them (whisper_streaming matches
them by time instead; forcing makes the decode cheaper and the agreement exact).

Two guards keep a short buffer's guess from becoming final (a 1 s buffer of "The old train left"
reads "It all is raining" on tiny.en, and the 2 s one agreed on "It all"):

- a hypothesis of a buffer shorter than ``min_buffer_s`` is shown (tentative) but takes no part
  in the agreement: whisper_streaming decodes nothing before ``--min-chunk-size`` (1 s) has
  arrived (``whisper_online_server.py``, ``is_first``) and SimulStreaming skips a buffer shorter
  than ``--audio_min_len`` (``simul_whisper.py``, ``_apply_minseglen``);
- the last word of every hypothesis but the final one is left out of the agreement, as
  SimulStreaming truncates the last decoded word when no end of word is detected
  (``simul_whisper.py``, ``infer``: "the last word is ALWAYS trimmed" without its CIF model):
  a word at the buffer's end is often cut ("hill" of "hills") or misheard. When the buffer
  ends in ``silence_s`` of silence (``base.tail_silent``: a pause after the word), the buffer
  does not end inside a word and the last word takes part like the others: a sentence's last
  word is committed once two decodes agree on it, without waiting for the next sentence's first
  word to be decoded (session 11, bench_streaming --speed max, tiny.en: mean latency 1.59 ->
  1.57 s at step 1, 0.80 -> 0.78 s at step 0.5; a small gain: sentence ends are few).

Latency is counted from each word's end by word timing (DTW over the alignment heads), within
±0.2 s of the pauses after espeak's sentences (no bias). The committed prefix's KV cache is not
kept across re-decodes: the buffer's encoding changes with every step (the encoder attends over
all frames), so the prefix's cross-attention keys and values, and its self-attention states
after them, change too; the prefix goes in as the prompt, one decoder call.

The buffer is trimmed after 15 s, as whisper_streaming does, although every step re-encodes it
(whisper-base, one thread: 0.36 s of CPU for 8 s, 0.63 s for 15 s). Session 12, bench_streaming
--clock cpu --sentences 30 (138 s), LA-2 step 0.5, base, two runs side by side: trimming after
8 s cut the mean latency 2.19 -> 1.76 s (fell behind 12 -> 4 times) but raised the WER against
the text 4.3 -> 5.6 (offline 3.1; 8 s in five runs: 5.3-6.1): a shorter buffer gives each word
less audio around it, and the goal is the offline transcript.

Session 13 (bench_streaming --clock cpu --sentences 30, tiny.en, step 0.5, one thread, a loaded
machine; offline WER 7.9, LA-2 10.2 at 1.17 s): ``right_context_s`` 0.5: 10.4 at 1.57 s; 1.0:
9.2 and 10.2 at 1.71-1.90 s (no consistent gain: left off); step 1.0: 9.9 at 2.26 s;
local-agreement:3: 8.4, 8.9, 9.2 at 1.73-2.12 s (base: 6.4 against 5.1, fell behind);
``prompt_tokens`` 45 (whisper_streaming's 200 characters): 7.4 and 9.4 at 1.11-1.18 s (two
runs; left off by default until more runs confirm it).

Session 14 decided the prompt length on more data (bench_streaming --set-seed S: 30 other
generated sentences, ~380 words; --clock cpu, one thread, step 0.5; WER against the text minus
offline's on the same set, in points, one value per run; /work/notes/s14/h1/table.txt):

    model    set      all (default)          90      45 (whisper_streaming's 200 characters)
    tiny.en  espeak   +2.3 +3.6 +2.5 +2.8    +0.5    -0.5 +1.5 -0.5 +0.2   (45, 3 alls: session 13)
    tiny.en  seed 1   +3.2                   +5.0    +6.6
    tiny.en  seed 2   +1.3                   +0.5    +2.4
    tiny.en  seed 3   +2.3                   +3.9    +7.5
    tiny.en  seed 4   +4.9                   +1.3    +2.6
    base     espeak   +2.0 +2.0 +1.0         +1.0    +3.8 +4.3              (45, alls: session 13)
    base     seed 1   +2.6                   +4.7    +6.3
    base     seed 2   +1.1                   +1.1    +1.6
    base     seed 3   +3.1 (+10.3*)          +1.3    +0.5

    * that run fell 10 s behind under load (offline RTF 0.52 against 0.14-0.17) and skipped
      11 s of audio; run again: +3.1.

Mean over the sets: tiny.en all +2.9, 90 +2.2, 45 +3.9; base all +2.1, 90 +2.0, 45 +3.1. The
reference's 45 is worse on both models (tiny.en's gain on the espeak set does not hold on the
other four sets). 90 and all are within the run-to-run spread (1-2 points on one set): 90 wins
on 3 sets of 5 on tiny.en and loses by 1.6-1.8 on 2; on base it ties or wins on 3 of 4 and loses
2.1 on one. So the default stays all the text before the buffer (:data:`PROMPT_TOKENS` None) for
every model; nothing model-specific to put in the catalog. A shorter prompt is cheaper to decode
(base decodes near real time at step 0.5, so its cost shows: mean latency 2.5 s all, 2.4 s at 90,
2.3 s at 45; tiny.en 1.18 / 1.16 / 1.14 s). Unlike whisper_streaming, the prompt is cut at N
token ids, not whole words, and the last committed word before the buffer is in it
(``whisper_online.py``'s ``prompt()`` leaves it out).

Session 15 measured the forced prefix against whisper_streaming's free re-decode
(``forced_prefix=False``: :func:`after_committed`), tiny.en, the same five sets and settings, three
runs each (WER minus offline's, points; the third run after commits were timed by the whole
decode's DTW, ``Hypothesis.timed``, which had cost the free decode the word after a buffer's
first commit):

    set      forced (default)      free
    espeak   +2.3 +1.8 | +3.3      +1.5 +3.1 | +1.8
    seed 1   +7.1 +6.6 | +5.0      +4.5 +6.3 | +2.4
    seed 2   +1.3 +4.2 | +4.8      +1.9 +1.3 | +1.6
    seed 3   +3.1 +3.6 | +3.1      +2.6 +1.6 | +3.6
    seed 4   +1.3 +1.8 | +1.3      +2.8 +1.8 | +1.8

Mean +3.4 forced, +2.6 free (third run: +3.5 and +2.2); free better in 9 pairs of 15, worse in
5. Mean latency 1.09-1.22 s forced, 1.49-1.96 s free (CPU RTF 0.53-0.64 against 0.82-0.92: a
free decode runs a decoder step for every committed word in the buffer again, and base, at RTF
~0.94 forced, would fall behind). The latency cost is sure and the gain within the runs'
spread, so the prefix stays forced; ``stream --no-forced-prefix`` and the Live view's "forced
prefix" box choose the free decode. local-agreement:3 (forced, one run a set): +4.1 / +3.7 /
+1.1 / +1.0 / +2.8 at 1.8-1.9 s.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from typing import Sequence

from core.streaming.base import (SILENCE_S, TRIM_S, BufferView, Decoder, Hypothesis, Update, common_prefix,
                                 is_boundary, last_word_start, segment_trim, tail_silent, whole_words)
from core.streaming.events import StreamToken

#: the default step (s): session 11's bench (tiny.en, espeak at real time, one thread, on CPU
#: time): 0.5 s halves the latency of 1 s (mean 1.3 against 2.0 s) at a CPU RTF of 0.55
STEP_S = 0.5
#: a hypothesis of a shorter buffer (s) takes no part in the agreement (see the module docstring)
MIN_BUFFER_S = 2.0
#: the right-context guard (s): an agreed word is committed once this much audio follows its end
RIGHT_CONTEXT_S = 0.0
#: the default prompt length: the last this many ids of the text committed before the buffer
#: prompt each decode (None: all of it, Whisper keeping the last 223; session 14's bench on five
#: sets, module docstring: 45 was worse on tiny.en and base, 90 within the runs' spread of all)
PROMPT_TOKENS: int | None = None
#: force the text committed inside the buffer as the start of each decode (True), or decode the
#: buffer afresh and drop what repeats the committed text by time and n-gram (False,
#: whisper_streaming's ``HypothesisBuffer.insert``: :func:`after_committed`)
FORCED_PREFIX = True
#: whisper_streaming's tolerances (``HypothesisBuffer.insert``): a re-decoded word starting more
#: than ``OVERLAP_S`` before the last committed word's end repeats committed text; the first word
#: left, when it starts within ``NGRAM_WINDOW_S`` of that end, is compared as 1-``NGRAM_WORDS``-word
#: n-grams with the committed text's last words
OVERLAP_S, NGRAM_WINDOW_S, NGRAM_WORDS = 0.1, 1.0, 5


def _words(tokens: Sequence[StreamToken]) -> list[tuple[int, int, str]]:
    """The words of ``tokens`` as (first token, end token, text without spaces)."""
    starts = [i for i in range(len(tokens)) if is_boundary(tokens, i)] + [len(tokens)]
    return [(a, b, "".join(t.text for t in tokens[a:b]).strip()) for a, b in zip(starts, starts[1:])]


def after_committed(hyp: Hypothesis, committed: Sequence[StreamToken], start_s: float) -> Hypothesis:
    """The part of a free decode of the whole buffer (no forced prefix) that follows the text
    already committed inside it: ufal/whisper_streaming ``HypothesisBuffer.insert``. Words that
    start more than :data:`OVERLAP_S` before the last committed word's end are dropped (times by
    word timing over the whole decode, ``Hypothesis.starts``; without it a word starts where the
    word before it ends, the first at ``start_s``); then, if the first word left starts within :data:`NGRAM_WINDOW_S` of that end,
    the shortest n-gram (1 to :data:`NGRAM_WORDS` words) that equals the committed text's last
    words is dropped too. The returned hypothesis's ``timing`` serves the kept tokens from the
    same word timing.

    Args:
        hyp: the decode of the buffer with only the text before it as the prompt.
        committed: the tokens committed inside the buffer, in order (``BufferView.committed``).
        start_s: where the buffer starts in the stream (s).
    """
    if not committed or not hyp.tokens:
        return hyp
    timed = hyp.timed(len(hyp.tokens))
    words = _words(timed)
    last_end = committed[-1].end_s
    known = hyp.starts(len(hyp.tokens)) if hyp.starts is not None else []
    start = [known[a] if a < len(known) and known[a] is not None else start_s if a == 0 else timed[a - 1].end_s
             for a, _, _ in words]
    first = next((i for i, s in enumerate(start) if s > last_end - OVERLAP_S), len(words))
    if first < len(words) and abs(start[first] - last_end) < NGRAM_WINDOW_S:
        done = [w for _, _, w in _words(committed)]
        for n in range(1, min(len(done), len(words) - first, NGRAM_WORDS) + 1):
            if done[-n:] == [w for _, _, w in words[first:first + n]]:
                first += n
                break
    k = words[first][0] if first < len(words) else len(timed)
    ends = [t.end_s for t in timed[k:]]
    begins = list(known[k:])
    return replace(hyp, tokens=hyp.tokens[k:], timing=lambda m: ends[:m], starts=lambda m: begins[:m])


class LocalAgreement:
    """LocalAgreement-n (``n`` = 2 is whisper_streaming's default).

    Args:
        n: how many consecutive hypotheses must agree (>= 1; 1 commits every decode).
        step_s: seconds of new audio between decodes (default :data:`STEP_S`).
        trim_after_s: trim the buffer at a committed sentence end once it is longer than this.
        min_buffer_s: a hypothesis of a shorter buffer takes no part in the agreement (s, >= 0).
        last_word: False (default): the last word of a non-final hypothesis is never agreed on
            (SimulStreaming) unless the buffer ends in ``silence_s`` of silence; True: it may be
            committed like the others.
        silence_s: a buffer ending in this much silence (s) lets its last word take part in the
            agreement (``base.tail_silent``); 0: never.
        right_context_s: an agreed word is committed only once at least this much audio (s)
            follows its end (word timing) in the buffer; it stays tentative until then. 0: off.
        prompt_tokens: the decode's prompt keeps only the last this many ids of the text
            committed before the buffer (whisper_streaming's ``prompt()``: its last 200
            characters, ~45 tokens of English); None: all (Whisper keeps the last 223).
        forced_prefix: True: the tokens committed inside the buffer are forced as the start of
            each decode; False: each decode is free and what repeats the committed text is
            dropped (:func:`after_committed`, whisper_streaming).

    Raises:
        ValueError: ``n`` < 1, ``trim_after_s`` <= 0, ``min_buffer_s`` < 0, ``silence_s`` < 0 or
            ``right_context_s`` < 0, ``prompt_tokens`` < 1.
    """

    name = "local-agreement"

    def __init__(self, n: int = 2, step_s: float = STEP_S, trim_after_s: float = TRIM_S,
                 min_buffer_s: float = MIN_BUFFER_S, last_word: bool = False, silence_s: float = SILENCE_S,
                 right_context_s: float = RIGHT_CONTEXT_S, prompt_tokens: int | None = PROMPT_TOKENS,
                 forced_prefix: bool = FORCED_PREFIX):
        if n < 1:
            raise ValueError(f"local-agreement:n needs n >= 1 hypotheses, got {n}")
        if not trim_after_s > 0:
            raise ValueError(f"trim_after_s must be > 0 seconds, got {trim_after_s}")
        if min_buffer_s < 0:
            raise ValueError(f"min_buffer_s must be >= 0 seconds, got {min_buffer_s}")
        if silence_s < 0:
            raise ValueError(f"silence_s must be >= 0 seconds (0: off), got {silence_s}")
        if right_context_s < 0:
            raise ValueError(f"right_context_s must be >= 0 seconds (0: off), got {right_context_s}")
        if prompt_tokens is not None and prompt_tokens < 1:
            raise ValueError(f"prompt_tokens must be >= 1 (None: all the text before the buffer), got {prompt_tokens}")
        self.right_context_s, self.prompt_tokens = right_context_s, prompt_tokens
        self.forced_prefix = bool(forced_prefix)
        self.n, self.step_s, self.trim_after_s = n, step_s, trim_after_s
        self.min_buffer_s, self.last_word, self.silence_s = min_buffer_s, last_word, silence_s
        #: the last n hypotheses as whole transcripts (everything committed then + the decode):
        #: (without the last word, with it)
        self.history: deque[tuple[tuple[int, ...], tuple[int, ...]]] = deque(maxlen=n)

    def update(self, view: BufferView, decoder: Decoder) -> Update:
        """Decode the buffer, commit the prefix the last ``n`` hypotheses agree on (whole words),
        or everything when ``view.final`` (whisper_streaming's ``finish``)."""
        previous = view.previous if self.prompt_tokens is None else view.previous[-self.prompt_tokens:]
        t_free = 0.0
        if self.forced_prefix:
            hyp = decoder.decode(view.audio, view.start_s, previous, view.forced)
        else:  # the word timing that finds the committed text's repeat counts as decode time
            hyp = decoder.decode(view.audio, view.start_s, previous)
            t_free = time.perf_counter()
            hyp = after_committed(hyp, view.committed, view.start_s)
            t_free = time.perf_counter() - t_free
        if view.final:
            self.history.clear()
            return Update(commit=hyp.timed(len(hyp.tokens)), decode_s=hyp.decode_s, decodes=hyp.attempts)
        if view.duration_s + 1e-9 < self.min_buffer_s:  # too short a buffer to agree on: shown only
            return Update(tentative=hyp.tokens, decode_s=hyp.decode_s, decodes=hyp.attempts)
        base = view.previous + view.forced
        whole = self.last_word or (self.silence_s > 0 and tail_silent(view.audio, self.silence_s))
        usable = len(hyp.tokens) if whole else last_word_start(hyp.tokens)
        ids = base + tuple(t.id for t in hyp.tokens)
        self.history.append((ids[:len(base) + last_word_start(hyp.tokens)], ids))
        # a buffer ending in silence: its last word is whole, and the earlier hypotheses' last
        # words count too (the newest confirms them)
        agreed = common_prefix([h[whole] for h in self.history]) if len(self.history) == self.n else len(base)
        k = whole_words(hyp.tokens, min(usable, max(0, agreed - len(base))))
        t0 = time.perf_counter()
        commit = hyp.timed(k)  # word timing for the agreed words only
        if self.right_context_s > 0:  # the right-context guard: whole words ending early enough
            k = len(commit)
            while k > 0 and commit[k - 1].end_s > view.end_s - self.right_context_s:
                k = whole_words(hyp.tokens, k - 1)
            commit = commit[:k]
        tentative = hyp.tokens[k:]
        after = BufferView(view.audio, view.start_s, view.previous, view.committed + commit)
        trim = segment_trim(after, self.trim_after_s)
        return Update(commit=commit, tentative=tentative, trim_s=trim, trim_reason="segment end",
                      decode_s=hyp.decode_s + t_free + time.perf_counter() - t0, decodes=hyp.attempts)
