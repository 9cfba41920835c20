"""Word boundaries moved off silence (core/analysis/silence.py)."""

from __future__ import annotations

import numpy as np
import pytest

from core.analysis.alignment import Word
from core.analysis.silence import frame_levels_db, snap_words

SR = 16000


def _tone(seconds: float, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (amp * np.sin(2 * np.pi * 300 * t)).astype(np.float32)


def _clip(noise_db: float | None = None) -> np.ndarray:
    """0.5 s pause, a 0.4 s 'word', 0.3 s pause, a 0.5 s 'word', 0.4 s pause."""
    z = lambda s: np.zeros(int(s * SR), np.float32)  # noqa: E731
    audio = np.concatenate([z(0.5), _tone(0.4), z(0.3), _tone(0.5), z(0.4)])
    if noise_db is not None:
        audio = audio + np.random.default_rng(0).standard_normal(len(audio)).astype(np.float32) * 10 ** (noise_db / 20)
    return audio


@pytest.mark.parametrize("noise_db", [None, -45.0])
def test_starts_and_ends_leave_the_pauses(noise_db):
    # DTW-like times: each word starts where the pause before it starts and ends late
    words = [Word(" a", 0.0, 1.0, 0.9), Word(" b", 1.0, 1.9, 0.8)]
    out = snap_words(words, _clip(noise_db))
    assert [(round(w.start, 2), round(w.end, 2)) for w in out] == [(0.5, 0.9), (1.2, 1.7)]
    assert [w.word for w in out] == [" a", " b"] and out[0].prob == 0.9
    assert all(type(w.start) is float and type(w.end) is float for w in out)  # plain floats (Qt takes no numpy bool)


def test_quiet_words_and_silence_are_left_alone():
    audio = _clip()
    inside = [Word(" pause", 0.1, 0.4, 0.5)]  # all quiet: unchanged
    assert snap_words(inside, audio) == inside
    inner = snap_words([Word(" a", 0.6, 0.8, 0.5)], audio)[0]  # inside a sound, nothing around it: the whole sound
    assert (round(inner.start, 2), round(inner.end, 2)) == (0.5, 0.9)
    assert snap_words([Word(" a", 0.0, 1.0, 0.5)], np.zeros(SR * 2, np.float32))[0].start == 0.0
    with pytest.raises(ValueError, match="quiet_db"):
        snap_words(inside, audio, quiet_db=3.0)


def test_frame_levels_db():
    levels = frame_levels_db(np.concatenate([np.zeros(320, np.float32), np.full(320, 0.1, np.float32)]))
    assert levels[0] == -np.inf and levels[1] == pytest.approx(-20.0)


def test_a_neighbours_edge_beyond_a_pause_is_left_out_and_a_closure_is_kept():
    audio = _clip()  # sounds at 0.5-0.9 s and 1.2-1.7 s
    # DTW ended ' a' 40 ms into ' b' and started ' b' 40 ms before ' a' ended
    out = snap_words([Word(" a", 0.3, 1.24, 0.9), Word(" b", 0.86, 1.8, 0.8)], audio)
    assert [(round(w.start, 2), round(w.end, 2)) for w in out] == [(0.5, 0.9), (1.2, 1.7)]
    closure = np.concatenate([_tone(0.2), np.zeros(int(0.06 * SR), np.float32), _tone(0.2), np.zeros(SR, np.float32)])
    (w,) = snap_words([Word(" apple", 0.0, 0.8, 0.9)], closure)  # a 60 ms stop inside the word stays in it
    assert (round(w.start, 2), round(w.end, 2)) == (0.0, 0.46)


def test_a_span_ending_inside_a_sound_grows_to_its_end_but_not_into_the_next_word():
    audio = _clip()  # sounds at 0.5-0.9 s and 1.2-1.7 s
    out = snap_words([Word(" a", 0.4, 0.8, 0.9), Word(" b", 1.3, 1.5, 0.8)], audio)
    assert [(round(w.start, 2), round(w.end, 2)) for w in out] == [(0.5, 0.9), (1.2, 1.7)]
    # two words in one sound (no pause between them): the first ends where the second starts
    one = np.concatenate([np.zeros(SR // 2, np.float32), _tone(1.0), np.zeros(SR // 2, np.float32)])
    out = snap_words([Word(" x", 0.5, 0.8, 0.9), Word(" y", 0.9, 1.3, 0.8)], one)
    assert [(round(w.start, 2), round(w.end, 2)) for w in out] == [(0.5, 0.9), (0.9, 1.5)]


def _two_sounds(pause_s: float) -> np.ndarray:
    """A 0.2 s sound, ``pause_s`` of digital silence, a 0.3 s sound, 0.5 s of silence
    (every length a whole number of 20 ms frames, so the pause is exactly ``pause_s``)."""
    z = lambda s: np.zeros(int(round(s * SR)), np.float32)  # noqa: E731
    return np.concatenate([_tone(0.2), z(pause_s), _tone(0.3), z(0.5)])


@pytest.mark.parametrize(
    "pause_s,is_pause",
    [(0.06, False), (0.08, False), (0.1, True), (0.12, True), (0.3, True)],
)
def test_quiet_of_exactly_the_minimum_pause_splits_a_span(pause_s, is_pause):
    """MIN_PAUSE_S = 0.1 s: quiet >= 0.1 s inside a span is a pause between words (the span
    keeps its longest sound, the 0.3 s one); shorter quiet is a stop's closure inside the
    word. Exactly 0.1 s (5 frames of 20 ms) is a pause."""
    audio = _two_sounds(pause_s)
    second = 0.2 + pause_s
    (w,) = snap_words([Word(" word", 0.0, second + 0.3, 0.9)], audio)
    got = (round(w.start, 2), round(w.end, 2))
    assert got == ((round(second, 2), round(second + 0.3, 2)) if is_pause else (0.0, round(second + 0.3, 2)))


@pytest.mark.parametrize("pause_s,is_pause", [(0.08, False), (0.1, True), (0.12, True)])
def test_a_span_grows_over_a_closure_but_not_over_a_pause_of_exactly_the_minimum(pause_s, is_pause):
    """A span ending inside the first sound grows to that sound's end; it goes on over quiet
    shorter than 0.1 s (the same word) and stops at a pause of exactly 0.1 s."""
    audio = _two_sounds(pause_s)
    (w,) = snap_words([Word(" word", 0.0, 0.1, 0.9)], audio)
    # REACH_S = 0.3 s from the span's end (0.1 s) reaches 0.4 s: into the second sound only
    # when the quiet is a closure
    assert round(w.end, 2) == (0.2 if is_pause else 0.4)
