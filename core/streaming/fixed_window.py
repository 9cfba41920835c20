"""Fixed window: whisper.cpp's ``examples/stream`` (sliding window, no VAD).

ggerganov/whisper.cpp ``examples/stream/stream.cpp``: every ``--step`` ms the last audio (up to
``--length`` ms) is transcribed and the line is rewritten in place (tentative); when the window
is full the line is kept (committed), a new line begins and only the last ``--keep`` ms (200) of
audio are carried over, the kept text going into the prompt. No agreement between decodes and no
attention rule: the simplest policy, and the baseline the other two improve on.
"""

from __future__ import annotations

import time

from core.streaming.base import BufferView, Decoder, Update


class FixedWindow:
    """whisper.cpp stream's step/length window.

    Args:
        length_s: the window length (whisper.cpp ``--length``, 10 s).
        step_s: seconds of new audio between decodes (``--step``).
        keep_s: audio carried into the next window (``--keep``, 0.2 s).

    Raises:
        ValueError: ``length_s`` not above ``step_s``, or ``keep_s`` < 0.
    """

    name = "fixed-window"

    def __init__(self, length_s: float = 10.0, step_s: float = 1.0, keep_s: float = 0.2):
        if not length_s > step_s:
            raise ValueError(f"fixed-window:length must be longer than the step ({step_s} s), got {length_s}")
        if keep_s < 0:
            raise ValueError(f"keep_s must be >= 0, got {keep_s}")
        self.length_s, self.step_s, self.keep_s = length_s, step_s, keep_s

    def update(self, view: BufferView, decoder: Decoder) -> Update:
        """Decode the window with the committed text as prompt; all tentative, or, when the next
        step would overflow the window (or at the end), all committed and the window restarted."""
        hyp = decoder.decode(view.audio, view.start_s, view.previous + view.forced)
        if view.final or view.duration_s + self.step_s > self.length_s + 1e-6:
            trim = None if view.final else max(view.start_s, view.end_s - self.keep_s)
            t0 = time.perf_counter()
            commit = hyp.timed(len(hyp.tokens))  # word timing for what is committed
            return Update(commit=commit, trim_s=trim, trim_reason="window",
                          decode_s=hyp.decode_s + time.perf_counter() - t0, decodes=hyp.attempts)
        return Update(tentative=hyp.tokens, decode_s=hyp.decode_s, decodes=hyp.attempts)
