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
"""

from __future__ import annotations

from collections import deque

from core.streaming.base import TRIM_S, BufferView, Decoder, Update, common_prefix, segment_trim, whole_words


class LocalAgreement:
    """LocalAgreement-n (``n`` = 2 is whisper_streaming's default).

    Args:
        n: how many consecutive hypotheses must agree (>= 1; 1 commits every decode).
        step_s: seconds of new audio between decodes.
        trim_after_s: trim the buffer at a committed sentence end once it is longer than this.

    Raises:
        ValueError: ``n`` < 1 or ``trim_after_s`` <= 0.
    """

    name = "local-agreement"

    def __init__(self, n: int = 2, step_s: float = 1.0, trim_after_s: float = TRIM_S):
        if n < 1:
            raise ValueError(f"local-agreement:n needs n >= 1 hypotheses, got {n}")
        if not trim_after_s > 0:
            raise ValueError(f"trim_after_s must be > 0 seconds, got {trim_after_s}")
        self.n, self.step_s, self.trim_after_s = n, step_s, trim_after_s
        #: the last n hypotheses as whole transcripts (everything committed then + the decode)
        self.history: deque[tuple[int, ...]] = deque(maxlen=n)

    def update(self, view: BufferView, decoder: Decoder) -> Update:
        """Decode the buffer, commit the prefix the last ``n`` hypotheses agree on (whole words),
        or everything when ``view.final`` (whisper_streaming's ``finish``)."""
        hyp = decoder.decode(view.audio, view.start_s, view.previous, view.forced)
        if view.final:
            self.history.clear()
            return Update(commit=hyp.tokens, decode_s=hyp.decode_s, decodes=1)
        base = view.previous + view.forced
        self.history.append(base + tuple(t.id for t in hyp.tokens))
        agreed = common_prefix(self.history) if len(self.history) == self.n else len(base)
        k = whole_words(hyp.tokens, max(0, agreed - len(base)))
        commit, tentative = hyp.tokens[:k], hyp.tokens[k:]
        after = BufferView(view.audio, view.start_s, view.previous, view.committed + commit)
        trim = segment_trim(after, self.trim_after_s)
        return Update(commit=commit, tentative=tentative, trim_s=trim, trim_reason="segment end",
                      decode_s=hyp.decode_s, decodes=1)
