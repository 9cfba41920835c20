"""AlignAtt: emit a token only while the decoder is not listening to the buffer's end.

Papi, Turchi and Negri 2023, "AlignAtt: Using Attention-based Audio-Translation Alignments as a
Guide for Simultaneous Speech Translation" (Interspeech), as ufal/SimulStreaming applies it to
Whisper (Macháček et al. 2025; ``--frame_threshold``, 25 frames by default): decoding the buffer
token by token, before each token the most attended encoder frame (20 ms) of the alignment heads'
cross-attention is found (``WhisperDecoder.frame_rule``: by default as SimulStreaming, each head's
rows z-scored per frame over the decode's rows, median-filtered, then averaged over the heads;
``decoder.AttentionFrames``); if that frame is within the last ``frames`` frames of the
buffer, the token would be about audio not fully heard yet, so it is not emitted and decoding
waits for more audio. The emitted tokens are final (committed), but for the last word when it may
be cut: SimulStreaming truncates the last decoded word unless its end-of-word model (CIF) fires
(``simul_whisper.py``, ``infer``: without it "the last word is ALWAYS trimmed", because a word
decoded at the buffer's end "is often wrong -- transcribing a word in the middle", "hill" of
"hills"). Here the decode itself often says where the word ends: when the rule stopped it at a
token that starts a new word, the word before is whole and is committed;
when the decode ran to the end of the buffer (end-of-text) or stopped inside a word, the last word
is held back (shown tentative) unless the buffer ends in ``silence_s`` of silence
(``base.tail_silent``, as LocalAgreement). Session 12, tiny.en, 30 espeak sentences fed at fixed
1 s steps: WER 12.2 -> 11.2, mean latency 0.88 -> 0.91 s. The committed tokens inside the buffer
are forced at the start of the next decode. The buffer is trimmed at a committed sentence end once
longer than ``trim_after_s``.

A stop at closing punctuation ("." in the last frames) no longer counts as a word start
(``trust_punctuation=False``, session 13): under SimulStreaming's normalised rule the model's "."
after a word cut by the buffer's end attends the end, and trusting it committed the cut word
("forest la|te" at 3.76 s read "forestry."). Session 13, whisper-base, 30 espeak sentences at real
time on the CPU clock, one thread, a loaded machine (one run each; the same setting moves 1-1.5
WER points between runs), align-att:25 step 1: the heads' plain mean (sessions 11-12) WER 7.1-8.1
at a mean latency of 1.61 s; the normalised rule 6.9 at 2.0 s; and not trusting punctuation 5.3
at 2.04 s. The normalised frames lie later in the audio than the plain mean's (the mean's argmax
is drawn to frames every row attends), so the rule waits more often: about 0.4 s more latency.
Step 0.5: plain mean 7.4 at 1.35 s, normalised 6.4 at 1.89 s. Thresholds 20 and 15 frames
(normalised, step 1): 6.4 at 1.90 s, 8.4 at 1.81 s. bench_streaming (same setting, four runs, the
last two on a quieter machine), base: align-att:25 step 0.5 WER 7.9 / 5.3 / 5.6 / 5.3 at a mean
latency of 1.78-1.83 s, step 1 9.2 / 7.1 / 7.1 / 6.4 at 1.93-1.97 s, against local-agreement:2 step
0.5 4.6 / 4.6 / 5.3 / 4.8 at 2.93-3.33 s (it fell behind 68-82 times: CPU RTF 1.01); tiny.en (one
run): align-att:25 step 0.5 10.7 at 1.13 s against local-agreement:2 11.7 at 1.40 s.
"""

from __future__ import annotations

import time

from core.streaming.base import (SILENCE_S, TRIM_S, BufferView, Decoder, Hypothesis, Update, is_boundary,
                                 last_word_start, segment_trim, tail_silent)
from core.streaming.events import Waited

#: punctuation that closes a word: a decode stopped at a token starting with one of these has a
#: whole word before it (an apostrophe or hyphen may continue the word: "hill's", "Ship-")
CLOSING = (".", ",", "?", "!", ";", ":", "。", "，", "？", "！", "、", "；", "：")


#: nothing is committed from the stream's first buffer while it is shorter than this (s): tiny.en
#: read the first 1.5 s of "The old lighthouse keeper" as "The old I'd", its attention well before
#: the buffer's end. SimulStreaming decodes nothing before ``--min-chunk-size`` (1.2 s) /
#: ``--audio_min_len``; LocalAgreement's ``MIN_BUFFER_S`` is the same 2 s. Session 12, tiny.en,
#: 30 espeak sentences at fixed 0.5 s steps: WER 11.5 (0 s) -> 10.2 (2 s), mean latency 0.62 s both
MIN_BUFFER_S = 2.0


class AlignAtt:
    """AlignAtt with a frame threshold ``frames``.

    Args:
        frames: the "too close to the end" zone in encoder frames (20 ms each; >= 1).
        step_s: seconds of new audio between decodes.
        trim_after_s: trim the buffer at a committed sentence end once it is longer than this.
        last_word: False (default): a decode's last word is held back when it may be cut (see the
            module docstring); True: every emitted token is committed.
        silence_s: a buffer ending in this much silence (s) commits its last word; 0: never.
        trust_stop: True (default): a decode the rule stopped at a word start or closing
            punctuation commits its last word; False: only a silent tail does (SimulStreaming's
            "the last word is ALWAYS trimmed", the silence standing in for its CIF model).
        trust_punctuation: with ``trust_stop``, whether a stop at closing punctuation (".", ",",
            ...) also commits the word before it (True, default); False: only a stop at a word
            start does, a stop at punctuation waits like a decode that ran to the end (a "."
            in the buffer's last frames is often the model taking the cut for a sentence end).
        min_buffer_s: nothing is committed from the stream's first buffer (no text committed
            yet) while it is shorter than this (s, default :data:`MIN_BUFFER_S`): its decode
            is shown, tentative.

    Raises:
        ValueError: ``frames`` < 1, ``silence_s`` < 0 or ``min_buffer_s`` < 0.
    """

    name = "align-att"

    def __init__(self, frames: int = 25, step_s: float = 1.0, trim_after_s: float = TRIM_S,
                 last_word: bool = False, silence_s: float = SILENCE_S, min_buffer_s: float = MIN_BUFFER_S,
                 trust_stop: bool = True, trust_punctuation: bool = False):
        if frames < 1:
            raise ValueError(f"align-att:f needs f >= 1 frames (20 ms each), got {frames}")
        if silence_s < 0:
            raise ValueError(f"silence_s must be >= 0 seconds (0: off), got {silence_s}")
        if min_buffer_s < 0:
            raise ValueError(f"min_buffer_s must be >= 0 seconds, got {min_buffer_s}")
        self.frames, self.step_s, self.trim_after_s = frames, step_s, trim_after_s
        self.last_word, self.silence_s, self.min_buffer_s = last_word, silence_s, min_buffer_s
        self.trust_stop, self.trust_punctuation = trust_stop, trust_punctuation

    def update(self, view: BufferView, decoder: Decoder) -> Update:
        """Decode while the next token's most-attended frame is before ``n_frames - frames``;
        commit what was emitted but a last word that may be cut (tentative).
        ``view.final``: decode to the end without the rule and commit it all."""
        stop = None if view.final else (lambda token, n_frames: token.frame >= n_frames - self.frames)
        hyp = decoder.decode(view.audio, view.start_s, view.previous, view.forced, stop=stop)
        waited = None
        if hyp.stopped is not None:
            waited = Waited(hyp.stopped, hyp.stopped.frame, view.n_frames - self.frames, view.end_s, view.n_frames,
                            hyp.rows)
        if (not view.final and not view.previous and not view.committed
                and view.duration_s + 1e-9 < self.min_buffer_s):  # the stream's first words: shown only
            return Update(tentative=hyp.tokens, waited=waited, decode_s=hyp.decode_s, decodes=hyp.attempts)
        k = len(hyp.tokens) if view.final or self._last_word_whole(hyp, view) else last_word_start(hyp.tokens)
        t0 = time.perf_counter()
        commit = hyp.timed(k)  # word timing for what is committed
        after = BufferView(view.audio, view.start_s, view.previous, view.committed + commit)
        trim = None if view.final else segment_trim(after, self.trim_after_s)
        return Update(commit=commit, tentative=hyp.tokens[k:], trim_s=trim, trim_reason="segment end", waited=waited,
                      decode_s=hyp.decode_s + time.perf_counter() - t0, decodes=hyp.attempts)

    def _last_word_whole(self, hyp: Hypothesis, view: BufferView) -> bool:
        """Whether the decode's last word is whole: ``last_word`` is on; or (``trust_stop``) the
        rule stopped the decode at a token that starts a new word or (``trust_punctuation``) at
        closing punctuation (the model has moved past the word); or the buffer ends in ``silence_s`` of silence
        (``base.tail_silent``)."""
        if self.last_word or not hyp.tokens:
            return True
        if hyp.stopped is not None and self.trust_stop:
            if not hyp.stopped.text.startswith(CLOSING):  # a word start: whole; inside a word: cut
                return is_boundary(hyp.tokens + (hyp.stopped,), len(hyp.tokens))
            if self.trust_punctuation:
                return True
        return self.silence_s > 0 and tail_silent(view.audio, self.silence_s)
