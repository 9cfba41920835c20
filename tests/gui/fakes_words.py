"""A fake speech model that can time words (no torch): the word-timing contract of
``SpeechModel`` (``alignment_heads``, ``alignment``, ``end_attention``) on the fake events,
aligned by the real ``core.analysis.alignment.align``."""

from __future__ import annotations

import dataclasses

import numpy as np

from core.analysis.alignment import align
from core.events import StepEvent

from .fakes import FakeSpeechModel

#: the fake decoder's (layers, heads); heads (1, 0) and (1, 1) follow time (the defaults),
#: head (0, 0) hears the audio backwards (picking it alone moves the path)
SHAPE = (2, 3)
DEFAULT_HEADS = [(1, 0), (1, 1)]
BACKWARDS = (0, 0)


#: frames per token: token i is heard at frames SPAN * i .. SPAN * (i + 1) (wider than half
#: the median filter's 7, which would wipe out a narrower peak)
SPAN = 4


def timed_attention(step: int, n_frames: int, layers: int = SHAPE[0], heads: int = SHAPE[1]) -> np.ndarray:
    """float32 (layers, heads, n_frames): every head hears frames SPAN * step .. SPAN * (step + 1)
    (token ``step`` spoken there), except ``BACKWARDS``, which hears the mirrored frames."""
    att = np.full((layers, heads, n_frames), 1e-3, np.float32)
    lo = min(SPAN * step, n_frames - SPAN)
    att[:, :, lo:lo + SPAN] = 1.0
    att[BACKWARDS[0], BACKWARDS[1]] = att[BACKWARDS[0], BACKWARDS[1], ::-1]
    return att / att.sum(-1, keepdims=True)


class FakeWordModel(FakeSpeechModel):
    """``FakeSpeechModel`` whose steps' attention follows time (``timed_attention``) and that
    times words. ``end_calls`` counts ``end_attention`` calls (the end-of-text rows)."""

    alignment_heads = DEFAULT_HEADS

    def __init__(self, delay_s: float = 0.0, n_frames: int = 50):
        super().__init__(delay_s=delay_s, n_frames=n_frames)
        self.end_calls = 0
        self.alignment_calls: list[list[tuple[int, int]]] = []  # the heads of each call

    def decode(self, audio, options, **kwargs):
        for ev in super().decode(audio, options, **kwargs):
            if isinstance(ev, StepEvent):
                ev = dataclasses.replace(ev, cross_attention=timed_attention(ev.step, ev.cross_attention.shape[-1]))
            yield ev

    def alignment(self, steps, *, end_attention=None, heads=None, audio=None):
        """``align`` on the made-up attention (``audio`` ignored: no snapping to the tone's loudness)."""
        self.alignment_calls.append(list(heads or self.alignment_heads))
        decode = lambda ids: "".join(self.backend.token_text(i) for i in ids)  # noqa: E731
        return align(steps, list(heads or self.alignment_heads), decode, eot_attention=end_attention)

    def words(self, steps, *, end_attention=None, heads=None, audio=None):
        return self.alignment(steps, end_attention=end_attention, heads=heads).words

    def end_attention(self, audio, steps, options, **_kwargs):
        """The end-of-text row: heard after the last token's frames."""
        self.end_calls += 1
        n = steps[-1].cross_attention.shape[-1]
        return {0: timed_attention(len(steps), n)}

    def refine_words(self, audio, steps, words, options, *, cancel=None, **_kwargs):
        """A stand-in refine: every word 0.05 s later at both ends (``refine_calls`` counts)."""
        import dataclasses

        self.refine_calls = getattr(self, "refine_calls", 0) + 1
        return [dataclasses.replace(w, start=w.start + 0.05, end=w.end + 0.05) for w in words]
