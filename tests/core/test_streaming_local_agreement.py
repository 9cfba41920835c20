"""LocalAgreement's right-context guard (issue 23): an agreed word is committed only once at
least ``right_context_s`` seconds of audio follow its end in the buffer (words read with 1-2 s
of audio after them were most of the streamed-vs-offline differences in session 12)."""

from __future__ import annotations

import pytest

from core.streaming import Committed, LocalAgreement, StreamFinished, parse_policy
from tests.core.test_streaming import PLAIN, SR, Scripted, chunks, run_all

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
