"""AlignAtt (core.streaming.align_att) on a scripted fake decoder: what it commits of a decode
that the attention rule stopped or that ran to the end of the buffer (issue 23, session 12)."""

from __future__ import annotations

import numpy as np

from core.streaming import AlignAtt, Committed, StreamDriver, Tentative, play, stream
from core.streaming.base import Hypothesis
from core.streaming.events import StreamToken

SR = 16_000


class Fake:
    """Scripted decodes: each a list of (token text, most-attended frame) for the whole buffer,
    the texts carrying their own leading space; a decode must start with the forced ids, returns
    what follows them, and asks ``stop`` before each new token (as ``WhisperDecoder``)."""

    def __init__(self, hyps):
        self.hyps, self.calls, self.ids = hyps, 0, {}

    def tid(self, text: str) -> int:
        return self.ids.setdefault(text, len(self.ids) + 10)

    def decode(self, audio, start_s, previous=(), forced=(), stop=None):
        toks = self.hyps[min(self.calls, len(self.hyps) - 1)]
        self.calls += 1
        ids = [self.tid(x) for x, _ in toks]
        assert ids[:len(forced)] == list(forced), "a decode must start with the forced (committed) tokens"
        n_frames = int(np.ceil(len(audio) / 320))
        out = []
        for x, f in toks[len(forced):]:
            tok = StreamToken(self.tid(x), x, start_s + (f + 1) * 0.02, f)
            if stop is not None and stop(tok, n_frames):
                return Hypothesis(tuple(out), False, tok)
            out.append(tok)
        return Hypothesis(tuple(out))


def _noise(seconds: float, seed: int = 0) -> np.ndarray:
    """Speech-like level to the end: no silent tail."""
    return np.random.default_rng(seed).standard_normal(int(seconds * SR)).astype(np.float32) * 0.1


def _run(policy, dec, audio, chunk_s=1.0):
    driver = StreamDriver(policy, dec, max_lag_s=None)
    return list(stream(driver, play(audio, speed=None, chunk_s=chunk_s)))


def _commits(events):
    return [e.text for e in events if isinstance(e, Committed)]


def test_a_decode_that_ran_to_the_buffer_end_keeps_its_last_word_back():
    """The buffer (1 s) ends inside "hills": the decode read "hill" and ended (end-of-text),
    its attention never reaching the last frames. SimulStreaming truncates the last decoded word
    ("the last word is ALWAYS trimmed" without its end-of-word model): "hill" is not final; it is
    shown (tentative) and the next decode reads "hills"."""
    hyps = [[(" over", 5), (" the", 15), (" hill", 30)],                       # 1 s: ends, no stop
            [(" over", 5), (" the", 15), (" hills", 30), (" and", 60), (" dales", 95)],  # 2 s: stops at dales
            [(" over", 5), (" the", 15), (" hills", 30), (" and", 60), (" dales", 95)]]  # final
    events = _run(AlignAtt(frames=10, step_s=1.0, min_buffer_s=0), Fake(hyps), _noise(2.0))
    assert _commits(events) == [" over the", " hills and", " dales"]
    assert [e.text for e in events if isinstance(e, Tentative)][0] == " hill"  # shown, not final
    assert events[-1].text == "over the hills and dales"


def test_a_decode_stopped_inside_a_word_keeps_that_word_back():
    """The attention rule stopped the decode at "s", a token that continues the word " hill":
    the word is not whole, so it is not committed; a stop at a token that starts a word (" and")
    leaves the word before it whole."""
    hyps = [[(" the", 5), (" hill", 30), ("s", 42)],   # 1 s = 50 frames, limit 40: stops at "s"
            [(" the", 5), (" hill", 30), ("s", 42), (" rise", 70)]]
    events = _run(AlignAtt(frames=10, step_s=1.0, min_buffer_s=0), Fake(hyps), _noise(1.0))
    assert _commits(events) == [" the", " hills rise"]


def test_a_buffer_ending_in_silence_commits_its_last_word():
    """A buffer that ends in a pause (``base.tail_silent``) does not end inside a word: its last
    word is committed at once, as LocalAgreement does."""
    audio = np.concatenate([_noise(0.6), np.zeros(int(0.4 * SR), np.float32)])
    hyps = [[(" over", 5), (" the", 15), (" hills", 25)]]
    driver = StreamDriver(AlignAtt(frames=10, step_s=1.0, min_buffer_s=0), Fake(hyps), max_lag_s=None)
    events = driver.feed(audio)
    assert _commits(events) == [" over the hills"]


def test_a_decode_stopped_at_punctuation_commits_the_word_before_it():
    """A stop at "." (the sentence's end heard in the last frames): the word before the
    punctuation is whole, and a sentence's last word does not wait a step for the next sentence."""
    hyps = [[(" the", 5), (" hills", 30), (".", 45)],   # 1 s = 50 frames, limit 40: stops at "."
            [(" the", 5), (" hills", 30), (".", 45), (" A", 70)]]
    events = _run(AlignAtt(frames=10, step_s=1.0, min_buffer_s=0, trust_punctuation=True), Fake(hyps), _noise(1.0))
    assert _commits(events) == [" the hills", ". A"]


def test_nothing_is_committed_before_the_stream_has_min_buffer_s_of_audio():
    """tiny.en read the first 1.5 s of "The old lighthouse keeper" as "The old I'd" and AlignAtt
    committed it (its attention was well before the buffer's end). SimulStreaming decodes nothing
    before ``--audio_min_len`` / ``--min-chunk-size`` (1.2 s) of audio; here a stream's first
    buffer shorter than ``min_buffer_s`` is decoded and shown (tentative) but nothing is
    committed from it."""
    hyps = [[(" The", 5), (" old", 20), (" I", 30)],                       # 1 s: shown only
            [(" The", 5), (" old", 20), (" light", 30), (" house", 60), (" keeper", 95)],  # 2 s: stops at keeper
            [(" The", 5), (" old", 20), (" light", 30), (" house", 60), (" keeper", 95)]]
    events = _run(AlignAtt(frames=10, step_s=1.0, min_buffer_s=2.0), Fake(hyps), _noise(2.0))
    assert _commits(events) == [" The old light house", " keeper"]
    assert [e.text for e in events if isinstance(e, Tentative)][0] == " The old I"


def test_min_buffer_s_holds_only_the_streams_first_buffer():
    """After committed text (a trim moved it into the prompt) a short buffer commits as usual."""
    hyps = [[(" The", 5), (" old", 20), (" light", 30)]]
    dec = Fake(hyps)
    policy = AlignAtt(frames=10, step_s=1.0, min_buffer_s=2.0)
    from core.streaming.base import BufferView
    update = policy.update(BufferView(_noise(1.0), 5.0, (1, 2, 3), ()), dec)
    assert "".join(t.text for t in update.commit) == " The old"


def test_without_trusting_the_stop_the_last_word_waits_for_a_silence_or_the_end():
    """``trust_stop=False`` (SimulStreaming: the last word is always trimmed): base read the cut
    "gar|den" as "guard" and stopped at " and", a word start; "guard" is held back."""
    hyps = [[(" the", 5), (" guard", 30), (" and", 42)],
            [(" the", 5), (" garden", 30), (" gate", 70)]]
    events = _run(AlignAtt(frames=10, step_s=1.0, min_buffer_s=0, trust_stop=False), Fake(hyps), _noise(1.0))
    assert _commits(events) == [" the", " garden gate"]


def test_without_trusting_punctuation_a_stop_at_a_period_holds_the_word_before_it():
    """``trust_punctuation=False``: a "." attended in the last frames is often the model taking the
    buffer's cut for the sentence's end (session 13, base, the normalised rule: "forest la|te"
    cut at 3.76 s read "forestry" and stopped at "."; committed, the stream kept "forestry").
    The word before it waits for a silent tail, the end, or a stop at a word start."""
    hyps = [[(" the", 5), (" forestry", 30), (".", 45)],   # 1 s = 50 frames, limit 40: stops at "."
            [(" the", 5), (" forest", 30), (" late", 60), (" at", 95)]]
    events = _run(AlignAtt(frames=10, step_s=1.0, min_buffer_s=0, trust_punctuation=False), Fake(hyps), _noise(2.0))
    assert _commits(events)[:2] == [" the", " forest late"]
    assert [e.text for e in events if isinstance(e, Tentative)][0] == " forestry"
