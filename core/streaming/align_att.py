"""AlignAtt: emit a token only while the decoder is not listening to the buffer's end.

Papi, Turchi and Negri 2023, "AlignAtt: Using Attention-based Audio-Translation Alignments as a
Guide for Simultaneous Speech Translation" (Interspeech), as ufal/SimulStreaming applies it to
Whisper (Macháček et al. 2025; ``--frame_threshold``, 25 frames by default): decoding the buffer
token by token, before each token the alignment heads' cross-attention is averaged and its most
attended encoder frame (20 ms) found; if that frame is within the last ``frames`` frames of the
buffer, the token would be about audio not fully heard yet, so it is not emitted and decoding
waits for more audio. Every emitted token is final (committed); there are no tentative tokens.
The committed tokens inside the buffer are forced at the start of the next decode. The buffer is
trimmed at a committed sentence end once longer than ``trim_after_s``.
"""

from __future__ import annotations

import time

from core.streaming.base import TRIM_S, BufferView, Decoder, Update, segment_trim
from core.streaming.events import Waited


class AlignAtt:
    """AlignAtt with a frame threshold ``frames``.

    Args:
        frames: the "too close to the end" zone in encoder frames (20 ms each; >= 1).
        step_s: seconds of new audio between decodes.
        trim_after_s: trim the buffer at a committed sentence end once it is longer than this.

    Raises:
        ValueError: ``frames`` < 1.
    """

    name = "align-att"

    def __init__(self, frames: int = 25, step_s: float = 1.0, trim_after_s: float = TRIM_S):
        if frames < 1:
            raise ValueError(f"align-att:f needs f >= 1 frames (20 ms each), got {frames}")
        self.frames, self.step_s, self.trim_after_s = frames, step_s, trim_after_s

    def update(self, view: BufferView, decoder: Decoder) -> Update:
        """Decode while the next token's most-attended frame is before ``n_frames - frames``;
        commit what was emitted. ``view.final``: decode to the end without the rule."""
        stop = None if view.final else (lambda token, n_frames: token.frame >= n_frames - self.frames)
        hyp = decoder.decode(view.audio, view.start_s, view.previous, view.forced, stop=stop)
        waited = None
        if hyp.stopped is not None:
            waited = Waited(hyp.stopped, hyp.stopped.frame, view.n_frames - self.frames, view.end_s, view.n_frames,
                            hyp.rows)
        t0 = time.perf_counter()
        commit = hyp.timed(len(hyp.tokens))  # word timing for what is committed
        after = BufferView(view.audio, view.start_s, view.previous, view.committed + commit)
        trim = None if view.final else segment_trim(after, self.trim_after_s)
        return Update(commit=commit, trim_s=trim, trim_reason="segment end", waited=waited,
                      decode_s=hyp.decode_s + time.perf_counter() - t0, decodes=hyp.attempts)
