"""LocalAgreement's right-context guard (issue 23): an agreed word is committed only once at
least ``right_context_s`` seconds of audio follow its end in the buffer (words read with 1-2 s
of audio after them were most of the streamed-vs-offline differences in session 12)."""

from __future__ import annotations

import pytest

from core.streaming import Committed, LocalAgreement, StreamFinished, parse_policy
from tests.core.test_streaming import PLAIN, SR, Scripted, chunks, run_all, tid

#: words that end every 0.2 s (Scripted's default frames: word i ends at 0.2 (i + 1) s)
WORDS = [f"w{i}" for i in range(20)]


class Growing(Scripted):
    """Every decode hears the words whose end lies inside the buffer, and the same words each time."""

    def decode(self, audio, start_s, previous=(), forced=(), stop=None):
        n = int(round((start_s + len(audio) / SR) / 0.2 + 1e-6))
        self.hyps, saved = [WORDS[:max(n, 1)]], self.calls
        self.calls = 0
        hyp = Scripted.decode(self, audio, start_s, previous, forced, stop)
        self.calls = saved + 1
        return hyp


def _commits(right_context_s: float):
    policy = LocalAgreement(n=2, step_s=0.5, right_context_s=right_context_s, **PLAIN)
    _, events = run_all(policy, Growing([]), chunks(3.0, 0.5)[1])
    return [e for e in events if isinstance(e, Committed)], events


@pytest.mark.parametrize("guard", [0.5, 1.0])
def test_an_agreed_word_waits_until_enough_audio_follows_its_end(guard):
    commits, events = _commits(guard)
    *steps, last = commits
    assert steps, "the scenario commits before the end"
    for c in steps:  # every word committed before the flush had `guard` s of audio after it
        assert all(c.audio_s - t.end_s >= guard - 1e-6 for t in c.tokens), (c.text, c.audio_s)
    # the flush at the end still commits everything
    assert events[-1].text == " ".join(WORDS[:15]) and isinstance(events[-1], StreamFinished)


def test_without_the_guard_agreed_words_with_less_right_context_are_committed():
    commits, _ = _commits(0.0)
    assert any(c.audio_s - t.end_s < 0.5 for c in commits[:-1] for t in c.tokens)


def test_the_guard_is_a_policy_setting_and_must_not_be_negative():
    assert parse_policy("local-agreement:2", right_context_s=0.5).right_context_s == 0.5
    with pytest.raises(ValueError, match="right_context_s"):
        LocalAgreement(right_context_s=-1)


def test_the_prompt_keeps_only_the_last_prompt_tokens_of_the_text_before_the_buffer():
    """whisper_streaming's ``prompt()``: the last 200 characters of the committed text scrolled
    out of the buffer; here the last ``prompt_tokens`` ids (None: all, Whisper cuts at 223)."""
    import numpy as np

    from core.streaming.base import BufferView

    previous = tuple(range(1000, 1100))
    view = BufferView(np.zeros(SR * 3, np.float32), 10.0, previous, ())
    for n, expect in ((None, previous), (40, previous[-40:])):
        dec = Scripted([["a", "b"]])
        LocalAgreement(prompt_tokens=n, **PLAIN).update(view, dec)
        assert dec.seen[-1][2] == expect
    with pytest.raises(ValueError, match="prompt_tokens"):
        LocalAgreement(prompt_tokens=0)


# --- forced_prefix=False: whisper_streaming's free re-decode and HypothesisBuffer.insert --------

def _hyp(words, start_s=0.0, step_s=0.2):
    """A decode of the buffer: word i ends at start_s + step_s (i + 1) (one token a word)."""
    from core.streaming.base import Hypothesis
    from core.streaming.events import StreamToken

    return Hypothesis(tuple(StreamToken(tid(w), " " + w, start_s + step_s * (i + 1), -1) for i, w in enumerate(words)))


def test_a_free_decode_drops_the_words_that_start_before_the_last_committed_end():
    from core.streaming.local_agreement import after_committed

    done = _hyp(["the", "quick"]).tokens  # committed: "quick" ends at 0.4 s
    # the re-decode changed a committed word ("quack"): it still starts before 0.4 - 0.1 s
    new = after_committed(_hyp(["the", "quack", "brown", "fox"]), done, 0.0)
    assert [t.text for t in new.tokens] == [" brown", " fox"]
    assert [t.end_s for t in new.timed(2)] == pytest.approx([0.6, 0.8])


def test_a_free_decode_drops_a_repeated_n_gram_of_the_committed_end():
    """A word whose timing moved past the tolerance but repeats the committed text's last words
    is dropped by the n-gram match (the shortest, 1-5 words), as whisper_streaming does."""
    from core.streaming.local_agreement import after_committed

    done = _hyp(["the", "quick", "brown"]).tokens  # "brown" ends at 0.6 s
    # the re-decode times "quick brown" 0.3 s later: "quick" still starts (0.2 s, where "the"
    # ends) before 0.6 - 0.1 s and goes by time; "brown" starts at 0.7 s, after it: the n-gram
    late = _hyp(["the", "quick", "brown", "fox", "jumps"], step_s=0.2)
    late = type(late)(tuple(t if i == 0 else type(t)(t.id, t.text, t.end_s + 0.3, -1)
                            for i, t in enumerate(late.tokens)))
    new = after_committed(late, done, 0.0)
    assert [t.text for t in new.tokens] == [" fox", " jumps"]
    # without the committed text nothing is dropped
    assert after_committed(late, (), 0.0) is late


def test_local_agreement_without_the_forced_prefix_commits_each_word_once():
    """The same growing speech as the guard tests, decoded afresh each step (no forced ids):
    the committed text is each word once, in order, and no decode was forced."""
    dec = Growing([])
    policy = LocalAgreement(n=2, step_s=0.5, forced_prefix=False, **PLAIN)
    _, events = run_all(policy, dec, chunks(3.0, 0.5)[1])
    assert events[-1].text == " ".join(WORDS[:15])
    assert all(s[3] == () for s in dec.seen)
    forced = Growing([])
    run_all(LocalAgreement(n=2, step_s=0.5, **PLAIN), forced, chunks(3.0, 0.5)[1])
    assert any(s[3] for s in forced.seen), "the default forces the committed tokens"


def test_a_free_decode_keeps_a_word_that_starts_after_the_committed_end_by_word_timing():
    """A sentence's first word after a pause: the re-decode's word timing ends the word before
    it earlier than the committed decode did (the pause moved out of it). By its own start (DTW)
    the word follows the committed end and is kept; by the end of the word before it, it would
    start 0.2 s before that end and be dropped (session 15: "the rain. A young doctor" lost
    its "A" three times in 30 sentences)."""
    from core.streaming.base import Hypothesis
    from core.streaming.events import StreamToken
    from core.streaming.local_agreement import after_committed

    done = (StreamToken(tid("the"), " the", 0.5, -1), StreamToken(tid("rain."), " rain.", 1.0, -1))
    toks = (StreamToken(tid("the"), " the", 0.5, -1), StreamToken(tid("rain."), " rain.", 0.8, -1),
            StreamToken(tid("A"), " A", 1.2, -1), StreamToken(tid("young"), " young", 1.5, -1))
    starts = [0.1, 0.5, 1.05, 1.2]
    timed = Hypothesis(toks, starts=lambda k: starts[:k])
    assert [t.text for t in after_committed(timed, done, 0.0).tokens] == [" A", " young"]
    assert [t.text for t in after_committed(Hypothesis(toks), done, 0.0).tokens] == [" young"]
