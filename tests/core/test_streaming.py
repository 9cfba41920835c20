"""Streaming policies (core.streaming) on scripted fake decoders: LocalAgreement commits only
what the last n hypotheses agree on; AlignAtt waits when the next token's attention reaches the
buffer's end; trimming loses no audio; finishing commits the tail (flush)."""

from __future__ import annotations

import numpy as np
import pytest

from core.streaming import (AlignAtt, Committed, FellBehind, FixedWindow, LocalAgreement, StreamDriver,
                            StreamFinished, Tentative, Trimmed, Waited, parse_policy, play, stream)
from core.streaming.base import Hypothesis
from core.streaming.events import StreamToken

SR = 16_000
#: LocalAgreement without the two guards against short-buffer guesses (agreement alone)
PLAIN = {"min_buffer_s": 0, "last_word": True}
VOCAB: dict[str, int] = {}


def tid(word: str) -> int:
    return VOCAB.setdefault(word, len(VOCAB) + 10)


class Scripted:
    """A decoder whose successive hypotheses are scripted: each is the whole buffer's words as
    (word, most-attended frame) pairs; like the real decoder it must start with the forced ids,
    returns only what follows them, and asks ``stop`` before each new token."""

    def __init__(self, hyps):
        self.hyps, self.calls, self.seen = hyps, 0, []

    def decode(self, audio, start_s, previous=(), forced=(), stop=None):
        words = self.hyps[min(self.calls, len(self.hyps) - 1)]
        self.calls += 1
        self.seen.append((len(audio), start_s, tuple(previous), tuple(forced)))
        words = [(w, f) if isinstance(w, str) else w for w, f in
                 ((x, i * 10 + 5) if isinstance(x, str) else x for i, x in enumerate(words))]
        ids = [tid(w) for w, _ in words]
        assert ids[:len(forced)] == list(forced), "a decode must start with the forced (committed) tokens"
        n_frames = int(np.ceil(len(audio) / 320))
        out = []
        for w, f in words[len(forced):]:
            tok = StreamToken(tid(w), " " + w, start_s + (f + 5) * 0.02, f)
            if stop is not None and stop(tok, n_frames):
                return Hypothesis(tuple(out), False, tok)
            out.append(tok)
        return Hypothesis(tuple(out))


def chunks(seconds: float, chunk_s: float = 0.5, seed: int = 0):
    audio = np.random.default_rng(seed).standard_normal(int(seconds * SR)).astype(np.float32) * 0.1
    return audio, list(play(audio, speed=None, chunk_s=chunk_s))


def committed_texts(events):
    return [e.text for e in events if isinstance(e, Committed)]


def run_all(policy, decoder, pieces, **kw):
    driver = StreamDriver(policy, decoder, max_lag_s=None, **kw)
    return driver, list(stream(driver, pieces))


def test_local_agreement_commits_only_the_prefix_the_last_two_hypotheses_agree_on():
    hyps = [["the", "cat"],
            ["the", "quick", "brown"],                 # agrees with the first on "the"
            ["the", "quick", "brawn", "fox"],          # agrees with the second on "the quick"
            ["the", "quick", "brown", "fox", "jumps"],  # brawn != brown: nothing new
            ["the", "quick", "brown", "fox", "jumps", "over"]]  # final (flush)
    dec = Scripted(hyps)
    _, events = run_all(LocalAgreement(n=2, step_s=1.0, min_buffer_s=0), dec, chunks(4.0, 1.0)[1])
    assert committed_texts(events) == [" the", " quick", " brown fox jumps over"]
    # each decode was forced with exactly what had been committed inside the buffer
    assert [s[3] for s in dec.seen] == [(), (), (tid("the"),), (tid("the"), tid("quick")), (tid("the"), tid("quick"))]
    tentative = [e.text for e in events if isinstance(e, Tentative)]
    assert tentative[:4] == [" the cat", " quick brown", " brawn fox", " brown fox jumps"]
    fin = events[-1]
    assert isinstance(fin, StreamFinished) and fin.text == "the quick brown fox jumps over"
    # " cat" -> " quick" at its place; " quick brown" -> " quick brawn": one; " brawn fox" -> " brown fox"
    assert fin.revised == 3 and fin.tentative_shown == 2 + 2 + 2 + 3 + 0


def test_local_agreement_3_needs_three_hypotheses_to_agree():
    hyps = [["a", "b"], ["a", "b"], ["a", "c"], ["a", "c"], ["a", "c"], ["a", "c", "d"]]
    _, events = run_all(LocalAgreement(n=3, step_s=1.0, **PLAIN), Scripted(hyps), chunks(5.0, 1.0)[1])
    assert committed_texts(events) == [" a", " c", " d"]
    assert [e.audio_s for e in events if isinstance(e, Committed)][:2] == [3.0, 5.0]


def test_local_agreement_commits_whole_words_only():
    hyps = [["the", "trans"], ["the", "trans", "cription"]]
    VOCAB.setdefault("cription", 999)
    dec = Scripted(hyps)
    policy = LocalAgreement(n=2, step_s=1.0, min_buffer_s=0)
    driver = StreamDriver(policy, dec, max_lag_s=None)
    # "trans" is followed by a token that does not start a word: only " the" may become final
    dec.decode = _no_space_after(dec.decode, "cription")
    events = [e for c in chunks(2.0, 1.0)[1] for e in driver.feed(c)]
    assert committed_texts(events) == [" the"]


def _no_space_after(decode, word):
    def wrapped(*a, **k):
        hyp = decode(*a, **k)
        return Hypothesis(tuple(StreamToken(t.id, t.text.lstrip() if t.text == " " + word else t.text, t.end_s,
                                            t.frame) for t in hyp.tokens), hyp.finished, hyp.stopped)
    return wrapped


def test_align_att_waits_when_the_next_tokens_attention_reaches_the_buffer_end():
    # 1 s buffer = 50 frames; f = 10: a token attending frame >= 40 waits for audio
    hyps = [[("a", 5), ("b", 20), ("c", 45), ("d", 48)],
            [("a", 5), ("b", 20), ("c", 45), ("d", 70), ("e", 95)],   # 2 s = 100 frames: limit 90
            [("a", 5), ("b", 20), ("c", 45), ("d", 70), ("e", 95), ("f", 99)]]  # final: no rule
    dec = Scripted(hyps)
    _, events = run_all(AlignAtt(frames=10, step_s=1.0, min_buffer_s=0), dec, chunks(2.0, 1.0)[1])
    assert committed_texts(events) == [" a b", " c d", " e f"]
    waited = [e for e in events if isinstance(e, Waited)]
    assert [(w.token.text, w.frame, w.limit) for w in waited] == [(" c", 45, 40), (" e", 95, 90)]
    assert not [e for e in events if isinstance(e, Tentative) and e.tokens]  # AlignAtt shows no tentative text
    assert events[-1].text == "a b c d e f"


def test_align_att_with_a_wider_zone_waits_earlier():
    hyps = [[("a", 5), ("b", 20), ("c", 45)]]
    _, events = run_all(AlignAtt(frames=35, step_s=1.0, min_buffer_s=0), Scripted(hyps), chunks(1.0, 1.0)[1][:1])
    assert committed_texts(events)[0] == " a"  # b attends frame 20 >= 50 - 35


SENTENCES = [["one.", "two", "three."], ["four", "five."], ["six", "seven", "eight."]]


def _growing(n: int):
    """Hypotheses that grow by a sentence-ending word every other decode (commit, then trim)."""
    words = [w for s in SENTENCES for w in s] * 4
    return [[(w, min(5 + 15 * i, 40)) for i, w in enumerate(words[: 1 + k // 2])] for k in range(n)]


@pytest.mark.parametrize("spec", ["local-agreement:2", "align-att:5", "fixed-window:3"])
def test_no_audio_is_lost_when_the_buffer_is_trimmed(spec):
    audio, pieces = chunks(12.0, 0.3, seed=1)

    class Relative(Scripted):  # hypotheses restart after a trim: script them relative to the forced ones
        def decode(self, audio, start_s, previous=(), forced=(), stop=None):
            self.hyps_now = [tid(w) for w, _ in _growing(60)[self.calls]][len(previous):]
            words = [(w, f) for w, f in _growing(60)[self.calls]][len(previous):]
            words = [(w, min(i * 3 + 1, 30)) for i, (w, _) in enumerate(words)]
            self.hyps = [words]
            saved, self.calls = self.calls, 0
            hyp = Scripted.decode(self, audio, start_s, previous, forced, stop)
            self.calls = saved + 1
            return hyp

    policy = parse_policy(spec, step_s=0.6, **({"trim_after_s": 2.0} if not spec.startswith("fixed") else {}))
    driver, events = run_all(policy, Relative([]), pieces)
    trims = [e for e in events if isinstance(e, Trimmed)]
    assert trims, "the scenario must trim"
    assert np.array_equal(np.concatenate([t.audio for t in trims] + [driver.audio]), audio)
    assert [t.start_s for t in trims] == sorted(t.start_s for t in trims)
    assert trims[-1].start_s == pytest.approx(sum(len(t.audio) for t in trims) / SR)
    assert driver.in_buffer > 0  # trimmed committed text went into the prompt
    assert all(n <= driver.max_buffer_s * SR for n, *_ in driver.decoder.seen)


def test_falling_behind_merges_then_skips_ahead_and_loses_no_audio():
    audio = np.random.default_rng(2).standard_normal(20 * SR).astype(np.float32)
    dec = Scripted([["x", "y"]])
    driver = StreamDriver(LocalAgreement(step_s=1.0), dec, max_lag_s=5.0)
    events = driver.feed(audio[:3 * SR])          # 3 s at once: merged into one step, said so
    behind = [e for e in events if isinstance(e, FellBehind)]
    assert len(behind) == 1 and behind[0].skipped_s is None and behind[0].lag_s == pytest.approx(3.0)
    events = driver.feed(audio[3 * SR:15 * SR])    # 12 s waiting > 5 s: skip to the last step
    behind = [e for e in events if isinstance(e, FellBehind)]
    assert len(behind) == 1 and behind[0].skipped_s == pytest.approx((3.0, 14.0))
    assert dec.seen[-1][0] == 1 * SR          # the decode after the skip sees only the last step
    events += driver.finish()
    trims = [e.audio for e in events if isinstance(e, Trimmed)]
    assert np.array_equal(np.concatenate(trims + [driver.audio]), audio[:15 * SR])


def test_finishing_commits_the_tail():
    hyps = [["never", "agreed"], ["again", "different"], ["the", "tail", "here"]]
    driver = StreamDriver(LocalAgreement(n=2, step_s=1.0), Scripted(hyps), max_lag_s=None)
    events = [e for c in chunks(2.0, 1.0)[1] for e in driver.feed(c)]
    assert committed_texts(events) == []
    assert [e.text for e in events if isinstance(e, Tentative)][-1] == " again different"
    events = driver.finish()
    assert committed_texts(events) == [" the tail here"]
    assert isinstance(events[-1], StreamFinished) and events[-1].text == "the tail here"
    assert driver.finish() == []


def test_a_tail_too_short_for_the_model_is_not_decoded_at_the_end():
    """A trim can leave less than the models take (0.1 s) at the end of the input: the last
    decode is skipped and the tentative text committed, instead of the model refusing the tail."""
    from core.catalog import MIN_AUDIO_S

    class Strict(Scripted):
        def decode(self, audio, *args, **kwargs):
            if len(audio) < MIN_AUDIO_S * SR:
                raise ValueError("the audio is too short")
            return super().decode(audio, *args, **kwargs)

    driver = StreamDriver(LocalAgreement(n=2, step_s=1.0), Strict([["never", "agreed"], ["again", "different"]]),
                          max_lag_s=None)
    [e for c in chunks(2.0, 1.0)[1] for e in driver.feed(c)]
    driver.audio = driver.audio[-320:]  # 20 ms left after a trim
    events = driver.finish()
    assert committed_texts(events) == [" again different"]
    assert isinstance(events[-1], StreamFinished) and events[-1].text == "again different"


def test_fixed_window_rewrites_the_line_then_keeps_it():
    hyps = [["a"], ["a", "b"], ["a", "b", "c"], ["d"], ["d", "e"]]
    _, events = run_all(FixedWindow(length_s=3.0, step_s=1.0, keep_s=0.0), Scripted(hyps), chunks(5.0, 1.0)[1])
    assert committed_texts(events) == [" a b c", " d e"]
    assert [e.start_s for e in events if isinstance(e, Trimmed)] == [3.0]


def test_commit_latency_is_from_the_words_end_to_the_commit_in_audio_time():
    hyps = [[("a", 10), ("b", 30)], [("a", 10), ("b", 30), ("c", 80)]]
    _, events = run_all(LocalAgreement(n=2, step_s=1.0, **PLAIN), Scripted(hyps), chunks(2.0, 1.0)[1])
    first = [e for e in events if isinstance(e, Committed)][0]
    assert first.text == " a b" and first.audio_s == 2.0
    assert first.audio_end_s == pytest.approx(0.7)       # b: frame 30 (+5) * 20 ms
    assert first.latency_s == pytest.approx(1.3)
    assert first.word_latencies == pytest.approx((1.7, 1.3))


def test_bad_policy_specs_say_what_to_give():
    with pytest.raises(ValueError, match="unknown streaming policy"):
        parse_policy("wait-k:3")
    with pytest.raises(ValueError, match="not a number"):
        parse_policy("local-agreement:two")
    with pytest.raises(ValueError, match="n >= 1"):
        parse_policy("local-agreement:0")
    with pytest.raises(ValueError, match="step must be > 0"):
        parse_policy("align-att", step_s=0)


def test_live_commits_count_the_audio_that_arrived_while_decoding():
    """At real time, a commit's audio time is the audio arrived by the clock at the commit."""
    now = [0.0]

    class Slow(Scripted):
        def decode(self, *a, **k):
            now[0] += 0.5  # each decode takes 0.5 s of wall time
            return Scripted.decode(self, *a, **k)

    hyps = [[("a", 10), ("b", 30)], [("a", 10), ("b", 30), ("c", 80)]]
    driver = StreamDriver(LocalAgreement(n=2, step_s=1.0, **PLAIN), Slow(hyps), max_lag_s=None, clock=lambda: now[0],
                          realtime=1.0)
    events = []
    for c in chunks(2.0, 1.0)[1]:
        now[0] += 1.0
        events += driver.feed(c)
    first = [e for e in events if isinstance(e, Committed)][0]
    # fed 2 s; the clock started with the first second arrived; 1 s later + two 0.5 s decodes = 3 s arrived
    assert first.audio_s == pytest.approx(3.0) and first.latency_s == pytest.approx(3.0 - 0.7)
    fin = driver.finish()
    assert [e for e in fin if isinstance(e, Committed)][0].audio_s == pytest.approx(2.0)  # the input had ended


def test_a_buffer_that_reaches_the_longest_length_commits_its_tentative_text_and_is_cut():
    """No sentence end ever committed (nothing to trim at): at max_buffer_s the tentative text is
    committed and the buffer trimmed after it ("too long"); no audio is lost."""
    hyps = [[("w%d" % i, min(3 * i + 2, 40)) for i in range(k + 1)] for k in range(40)]

    class Fresh(Scripted):  # each decode: the next hypothesis's words after what is committed
        def decode(self, audio, start_s, previous=(), forced=(), stop=None):
            words = hyps[self.calls][len(previous):]
            self.hyps, saved, self.calls = [words], self.calls, 0
            hyp = Scripted.decode(self, audio, start_s, previous, forced, stop)
            self.calls = saved + 1
            return hyp

    audio, pieces = chunks(12.0, 1.0, seed=3)
    driver, events = run_all(LocalAgreement(n=5, step_s=1.0), Fresh([]), pieces, max_buffer_s=5.0)
    trims = [e for e in events if isinstance(e, Trimmed)]
    assert trims and {t.reason for t in trims} == {"too long"}
    assert np.array_equal(np.concatenate([t.audio for t in trims] + [driver.audio]), audio)
    assert all(n <= 5.0 * SR for n, *_ in driver.decoder.seen)
    assert events[-1].text == " ".join("w%d" % i for i in range(len(events[-1].text.split())))


def test_a_backlog_never_hands_the_decoder_more_than_the_longest_buffer():
    audio = np.random.default_rng(4).standard_normal(9 * SR).astype(np.float32)
    dec = Scripted([["x", "y"], ["x", "y", "z"]])
    driver = StreamDriver(LocalAgreement(n=2, step_s=1.0), dec, max_buffer_s=5.0, max_lag_s=None)
    events = driver.feed(audio[:3 * SR]) + driver.feed(audio[3 * SR:]) + driver.finish()
    assert all(n <= 5 * SR for n, *_ in dec.seen), [n / SR for n, *_ in dec.seen]
    trims = [e for e in events if isinstance(e, Trimmed)]
    assert np.array_equal(np.concatenate([t.audio for t in trims] + [driver.audio]), audio)


def test_play_yields_audio_as_it_arrives_and_a_busy_consumer_gets_the_backlog_at_once():
    now = [0.0]
    audio = np.arange(3 * SR, dtype=np.float32)
    sizes = []
    for i, piece in enumerate(play(audio, speed=2.0, chunk_s=0.25, clock=lambda: now[0],
                                   sleep=lambda s: now.__setitem__(0, now[0] + s))):
        sizes.append(len(piece) / SR)
        if i == 1:
            now[0] += 0.5  # busy for 0.5 s of clock = 1 s of audio at 2x
    assert sizes[:3] == [0.25, 0.25, 1.0] and sum(sizes) == 3.0
    assert np.array_equal(np.concatenate(list(play(audio, speed=None, chunk_s=0.3))), audio)
    with pytest.raises(ValueError, match="speed must be > 0"):
        next(play(audio, speed=0))


# ---------------------------------------------------------------- issue 23, the core's defects


def test_a_short_buffers_guess_takes_no_part_in_the_agreement():
    """Defect 1: tiny.en read the first 1 s of "The old train left" as "It all is raining" and
    the 2 s buffer agreed on "It all", so it was committed. A hypothesis of a buffer shorter than
    ``min_buffer_s`` (2 s) is only shown (whisper_streaming's min chunk, SimulStreaming's
    audio_min_len); the last word of each hypothesis is left out (SimulStreaming)."""
    hyps = [["it", "all", "is"],                                   # 1 s: shown only
            ["it", "all", "drained", "left"],                      # 2 s
            ["the", "old", "train", "left", "the"],                # 3 s: no agreement with 2 s
            ["the", "old", "train", "left", "the", "station"],     # 4 s: "the old train left" agreed
            ["the", "old", "train", "left", "the", "station"]]     # final
    dec = Scripted(hyps)
    _, events = run_all(LocalAgreement(n=2, step_s=1.0), dec, chunks(4.0, 1.0)[1])
    commits = committed_texts(events)
    assert commits[0] == " the old train left", commits
    assert events[-1].text == "the old train left the station"
    assert [e.text for e in events if isinstance(e, Tentative)][0] == " it all is"  # the 1 s guess was shown


def test_the_last_word_of_a_hypothesis_is_not_committed_until_the_end():
    """Defect 1: two decodes that both end in "hill" (the buffer ends inside "hills") agreed
    on it; the last word of a non-final hypothesis is never agreed on (SimulStreaming's
    truncation of the last decoded word)."""
    hyps = [["over", "the", "hill"], ["over", "the", "hill"], ["over", "the", "hills"]]
    _, events = run_all(LocalAgreement(n=2, step_s=1.0, min_buffer_s=0), Scripted(hyps), chunks(2.0, 1.0)[1])
    assert committed_texts(events) == [" over the", " hills"]


def test_scripts_without_spaces_commit_at_character_boundaries():
    """Defect 2: ``whole_words`` waited for a token starting with a space, which never comes in
    Chinese or Japanese: nothing was committed before the end of the stream."""
    hyps = [["我们", "今天"], ["我们", "今天", "去"], ["我们", "今天", "去", "公园"], ["我们", "今天", "去", "公园"]]
    dec = Scripted(hyps)
    dec.decode = _unspaced(dec.decode)
    _, events = run_all(LocalAgreement(n=2, step_s=1.0), dec, chunks(3.0, 1.0)[1])
    commits = [e for e in events if isinstance(e, Committed)]
    assert commits[0].text == "我们今天" and commits[0].audio_s == pytest.approx(3.0)
    assert events[-1].text == "我们今天去公园"


def test_a_token_inside_a_character_is_never_a_commit_boundary():
    """A character split over byte tokens: the first token's text is "" (see WhisperDecoder),
    and no commit may end after it."""
    from core.streaming.base import is_boundary, whole_words

    toks = [StreamToken(1, " I", 0.0), StreamToken(2, " like", 0.0), StreamToken(3, "", 0.0), StreamToken(4, " 🙂", 0.0),
            StreamToken(5, "我", 0.0), StreamToken(6, "", 0.0), StreamToken(7, "们", 0.0)]
    assert [is_boundary(toks, k) for k in range(8)] == [True, True, False, False, True, False, False, True]
    assert whole_words(toks, 3) == 1 and whole_words(toks, 6) == 4


def _unspaced(decode):
    def wrapped(*a, **k):
        hyp = decode(*a, **k)
        return Hypothesis(tuple(StreamToken(t.id, t.text.lstrip(), t.end_s, t.frame) for t in hyp.tokens),
                          hyp.finished, hyp.stopped)
    return wrapped


# ---------------------------------------------------------------- issue 23, latency (session 11)


def _speech_then_silence(speech_s: float, silence_s: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.standard_normal(int(speech_s * SR)).astype(np.float32) * 0.1,
                           np.zeros(int(silence_s * SR), np.float32)])


def test_the_last_word_before_a_silence_is_agreed_on_without_waiting_for_the_next_word():
    """A hypothesis's last word is left out of the agreement because the buffer may end inside
    it; when the buffer ends in silence (a pause after the word), the word is whole: two
    hypotheses agreeing on it commit it, without waiting for a next word to be decoded."""
    audio = _speech_then_silence(1.6, 1.4)  # 3 s: speech to 1.6 s, then a pause
    hyps = [["over", "the", "hills"]] * 4

    def before_the_end(**kw):
        driver = StreamDriver(LocalAgreement(n=2, step_s=1.0, min_buffer_s=0, **kw), Scripted(hyps), max_lag_s=None)
        events = [e for c in play(audio, speed=None, chunk_s=1.0) for e in driver.feed(c)]
        return [(e.text, e.audio_s) for e in events if isinstance(e, Committed)], driver.finish()[-1].text

    # 1 s: speech at the end, "hills" left out; 2 s ends in silence: "hills" is whole and the 1 s
    # hypothesis had it too
    assert before_the_end() == ([(" over the hills", 2.0)], "over the hills")
    # with the rule off, "hills" waits for the end of the stream (the flush)
    assert before_the_end(silence_s=0) == ([(" over the", 2.0)], "over the hills")


def test_a_quiet_tail_is_silence_relative_to_the_buffers_speech():
    from core.streaming.base import tail_silent

    audio = _speech_then_silence(1.0, 0.3)
    assert tail_silent(audio, 0.2) and not tail_silent(audio, 0.4)
    quiet_room = audio + np.random.default_rng(1).standard_normal(len(audio)).astype(np.float32) * 0.003
    assert tail_silent(quiet_room, 0.2)  # a noise floor 30 dB under the speech is silence
    assert not tail_silent(audio[: SR], 0.2)  # speech to the end
    assert not tail_silent(np.zeros(SR, np.float32), 0.2)  # nothing said: no word to end
    assert not tail_silent(audio[: SR // 20], 0.2)  # shorter than the tail asked
