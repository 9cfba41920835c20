"""Long-form transcription (core/tasks/longform.py, issue 14 section 3).

The token ids of every segment equal transformers' long-form ``generate()`` (greedy,
``condition_on_prev_tokens=True``, no fallback triggered) on a 42 s clip of espeak
sentences, for tiny.en and base; the seek/segment rule, the fallback ladder, the silence
skip, the previous-text prompt and the take-back of failed attempts are checked on their own.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from core.events import AttemptEvent, Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.longform import LongFormOptions, result_dict, split_window, transcript_events
from core.tasks.longform_verdicts import compression_ratio, loudest_db, token_entropy
from tests.helpers.speech import LIGHTHOUSE, synth_speech

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCES = list(LIGHTHOUSE)
TB = 1000  # timestamp_begin in the split_window unit tests


@pytest.fixture(scope="module")
def long_clip() -> np.ndarray:
    """~45 s: the sentences spoken one by one, 0.3 s of silence between them."""
    gap = np.zeros(4800, np.float32)
    parts = []
    for s in SENTENCES:
        parts += [synth_speech(s, words_per_minute=165), gap]
    audio = np.concatenate(parts)
    assert len(audio) > 40 * 16000
    return audio


@pytest.fixture(scope="module")
def sample_clip() -> np.ndarray:
    return synth_speech("Please bring me seven green apples from the market today.")


def _segments_tokens(events) -> list[list[int]]:
    return [list(s["tokens"]) for ev in events if isinstance(ev, AttemptEvent) and ev.kept_in_transcript
            for s in ev.segments]


def _transformers_segments(model, audio) -> list[list[int]]:
    """transformers' long-form generate() on the same weights: each segment's ids, the
    repeated closing timestamp of a segment ending in a pair dropped (as it conditions)."""
    lw = model._loaded
    feats = lw.feature_extractor(audio, sampling_rate=16000, return_tensors="pt", truncation=False,
                                 padding="longest", return_attention_mask=True)
    kw = dict(return_timestamps=True, condition_on_prev_tokens=True, return_segments=True)
    if model.multilingual:
        kw.update(language="en", task="transcribe")
    out = lw.model.generate(feats.input_features, attention_mask=feats.attention_mask, **kw)
    tb = lw.special.notimestamps + 1
    segs = []
    for s in out["segments"][0]:
        ids = s["tokens"].tolist()
        if len(ids) > 2 and ids[-2] >= tb and ids[-1] >= tb:
            ids = ids[:-1]
        segs.append(ids)
    return segs


# ------------------------------------------------------------------ the seek rule
def test_split_window_pairs_drop_the_unfinished_tail():
    tokens = [TB + 0, 1, 2, TB + 50, TB + 50, 3, 4, TB + 100, TB + 100, 5]  # ends inside a segment
    segments, advance, kept = split_window(tokens, TB, 3000, 10.0)
    assert [s["tokens"] for s in segments] == [[TB, 1, 2, TB + 50], [TB + 50, 3, 4, TB + 100]]
    assert [(s["start"], s["end"]) for s in segments] == [(10.0, 11.0), (11.0, 12.0)]
    assert advance == 200  # the last pair's time, 2.00 s, in mel frames
    assert kept == 8


def test_split_window_single_timestamp_ending_keeps_all_and_advances_a_window():
    tokens = [TB + 0, 1, TB + 50, TB + 50, 2, TB + 80]
    segments, advance, kept = split_window(tokens, TB, 2500, 0.0)
    assert [s["tokens"] for s in segments] == [[TB, 1, TB + 50], [TB + 50, 2, TB + 80]]
    assert segments[-1]["end"] == pytest.approx(1.6)
    assert (advance, kept) == (2500, 6)


def test_split_window_without_pairs_is_one_segment_to_the_last_timestamp():
    segments, advance, kept = split_window([TB + 10, 1, 2, TB + 60], TB, 3000, 30.0)
    assert len(segments) == 1 and segments[0]["tokens"] == [TB + 10, 1, 2, TB + 60]
    assert segments[0]["end"] == pytest.approx(31.2)
    assert (advance, kept) == (3000, 4)
    segments, advance, _ = split_window([1, 2], TB, 1234, 0.0)  # no timestamp at all
    assert segments[0]["end"] == pytest.approx(12.34) and advance == 1234


def test_compression_ratio_and_entropy_see_repetition():
    prose = "The guide explains how the lens was made from hundreds of pieces of glass."
    loop = "I am a pho. " * 20
    assert compression_ratio(prose) < 2.4 < compression_ratio(loop)
    assert compression_ratio("") == 0.0
    assert token_entropy(list(range(40))) == pytest.approx(np.log(32))
    assert token_entropy([7, 8] * 20) == pytest.approx(np.log(2))
    assert token_entropy([]) == 0.0


@pytest.mark.parametrize("field,value", [("temperatures", ()), ("temperatures", (-0.1,)),
                                         ("no_speech_threshold", 1.5), ("sample_len", 0),
                                         ("compression_ratio_threshold", 0.0), ("entropy_threshold", -1.0)])
def test_bad_longform_options_are_one_line(field, value):
    with pytest.raises(ValueError, match=field) as err:
        replace(LongFormOptions(), **{field: value}).validate()
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ parity with transformers
@pytest.mark.parametrize("fixture", ["whisper_tiny_en", "whisper_base"])
def test_segment_ids_equal_transformers_long_form_generate(fixture, long_clip, request):
    model = request.getfixturevalue(fixture)
    events = list(model.transcribe(long_clip, DecodingOptions(), language="en"))
    attempts = [ev for ev in events if isinstance(ev, AttemptEvent)]
    assert len({a.segment for a in attempts}) >= 2, "the clip must need more than one window"
    assert all(a.verdict == "accepted" and a.attempt == 0 for a in attempts), "no fallback may be triggered"
    assert attempts[1].seek not in (0, 3000), "the second window starts at the first one's last timestamp"
    assert _segments_tokens(events) == _transformers_segments(model, long_clip)
    text = next(ev.text for ev in events if isinstance(ev, Finished)).lower()
    assert "lighthouse" in text and "beautiful place" in text


# ------------------------------------------------------------------ fallback, silence, prompts
def test_fallback_redoes_the_window_and_takes_the_failed_steps_back(whisper_tiny_en, sample_clip):
    lf = LongFormOptions(temperatures=(0.0, 0.4, 0.8), logprob_threshold=0.0)  # every attempt fails
    events = list(whisper_tiny_en.transcribe(sample_clip, DecodingOptions(), lf))
    attempts = [ev for ev in events if isinstance(ev, AttemptEvent)]
    assert [a.temperature for a in attempts] == [0.0, 0.4, 0.8]
    assert [a.kept_in_transcript for a in attempts] == [False, False, True]  # the last one is kept
    assert all(a.verdict == "fallback" and "average log-probability" in a.reasons[0] for a in attempts)
    assert all(a.step_offset == 0 for a in attempts)  # each attempt is numbered from the same step
    for a in attempts:  # the logged average is openai's sum / (len + 1), under the rule-filtered distribution
        assert a.avg_logprob < 0 and len(a.steps) == len(a.token_ids)
    kept = [ev for ev in transcript_events(events) if isinstance(ev, StepEvent)]
    assert [ev.token_id for ev in kept] == list(attempts[-1].token_ids)
    assert [ev.step for ev in kept] == list(range(len(kept)))
    streamed = [ev for ev in events if isinstance(ev, StepEvent)]
    assert len(streamed) == sum(len(a.steps) for a in attempts)  # every attempt was shown live
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.text == " ".join(s["text"] for s in attempts[-1].segments)


def test_accepted_attempt_average_log_probability_matches_the_steps(whisper_tiny_en, sample_clip):
    events = list(whisper_tiny_en.transcribe(sample_clip, DecodingOptions()))
    (attempt,) = [ev for ev in events if isinstance(ev, AttemptEvent)]
    steps = [ev for ev in events if isinstance(ev, StepEvent)]
    token_sum = sum(np.log(s.raw_prob) for s in steps)
    eot_logprob = attempt.avg_logprob * (len(steps) + 1) - token_sum
    assert -5.0 < eot_logprob <= 0.0  # end-of-text was likely where the model stopped
    assert attempt.verdict == "accepted" and attempt.kept_tokens == len(steps)
    assert attempt.end_attention is not None and attempt.end_attention.shape[-1] == events[0].source_len
    assert "apples" in events[-1].text


def test_silence_is_skipped_with_a_no_speech_mark(whisper_tiny_en):
    events = list(whisper_tiny_en.transcribe(np.zeros(35 * 16000, np.float32), DecodingOptions()))
    attempts = [ev for ev in events if isinstance(ev, AttemptEvent)]
    assert attempts and all(a.verdict == "silence" and not a.kept_in_transcript for a in attempts)
    assert all(a.no_speech_prob > 0.6 for a in attempts)
    assert all(ev.no_speech_prob > 0.6 for ev in events if isinstance(ev, SegmentEvent))
    assert events[-1].text == "" and not [ev for ev in transcript_events(events) if isinstance(ev, StepEvent)]
    assert result_dict(events, "en")["segments"] == []
    assert all(a.loudest_db == float("-inf") for a in attempts) and "dBFS" in attempts[0].reasons[0]
    # openai's rule alone (silence_db off) keeps what Whisper writes over digital silence
    # when its average log-probability is above -1 (tiny.en: "you" at about -0.7)
    openai_only = list(whisper_tiny_en.transcribe(np.zeros(30 * 16000, np.float32), DecodingOptions(),
                                                  LongFormOptions(silence_db=None)))
    (attempt,) = [ev for ev in openai_only if isinstance(ev, AttemptEvent)]
    assert attempt.avg_logprob > -1.0 and attempt.verdict == "accepted" and openai_only[-1].text


def test_loudest_db():
    t = np.arange(16000) / 16000
    assert loudest_db(0.5 * np.sin(2 * np.pi * 440 * t).astype(np.float32)) == pytest.approx(-9.03, abs=0.2)
    quiet = np.zeros(16000, np.float32)
    quiet[8000:8320] = 0.001  # one 20 ms frame at -60 dBFS
    assert loudest_db(quiet) == pytest.approx(-60.0, abs=0.01)
    assert loudest_db(np.zeros(100, np.float32)) == float("-inf")


class _PromptSpy:
    """Wraps the engine's run to record each attempt's decoder prompt ids."""

    def __init__(self, model):
        self.model, self.prompts, self._run = model, [], model.engine.run

    def __enter__(self):
        def run(encoded, prompt, *a, **kw):
            self.prompts.append(list(prompt.prompt_ids))
            return self._run(encoded, prompt, *a, **kw)

        self.model.engine.run = run
        return self

    def __exit__(self, *exc):
        self.model.engine.run = self._run


def test_previous_text_and_initial_prompt_go_into_the_prompt(whisper_tiny_en, long_clip):
    model, sp = whisper_tiny_en, whisper_tiny_en._loaded.special
    clip = long_clip[: 40 * 16000]
    lf = LongFormOptions(initial_prompt="Lighthouse stories.")
    with _PromptSpy(model) as spy:
        events = list(model.transcribe(clip, DecodingOptions(), lf))
    first, second = spy.prompts[0], spy.prompts[1]
    assert first == [sp.sot_prev, *model.prefix_ids("Lighthouse stories."), sp.sot]
    window0 = next(ev for ev in events if isinstance(ev, AttemptEvent))
    kept_first = [t for seg in window0.segments for t in seg["tokens"]]
    assert kept_first == list(window0.token_ids[: window0.kept_tokens])
    assert second[0] == sp.sot_prev and second[-1] == sp.sot
    assert second[1:-1] == (model.prefix_ids("Lighthouse stories.") + kept_first)[-223:]
    with _PromptSpy(model) as spy:
        list(model.transcribe(clip, DecodingOptions(), LongFormOptions(condition_on_previous_text=False)))
    assert all(p == [sp.sot] for p in spy.prompts)


def test_fork_what_if_and_end_attention_go_back_to_the_long_form_windows(whisper_tiny_en, long_clip):
    model = whisper_tiny_en
    events = list(model.transcribe(long_clip, DecodingOptions()))
    attempts = [ev for ev in events if isinstance(ev, AttemptEvent) and ev.kept_in_transcript]
    second = attempts[1]
    steps = list(second.steps)
    k = 6  # fork at the 7th token of the second window with the model's own token: greedy again
    forked = list(model.fork(long_clip, DecodingOptions(), segment=1, forced_ids=[s.token_id for s in steps[: k + 1]],
                             step_offset=second.step_offset, longform=True))
    seg = forked[0]
    assert isinstance(seg, SegmentEvent) and seg.source_offset == second.seek // 2  # the run's window, not 30 s
    assert forked[-1].token_ids == list(second.token_ids)
    rows = model.end_attention(long_clip, steps, DecodingOptions(), longform=True)
    np.testing.assert_allclose(rows[1], second.end_attention, atol=1e-5)
    # silence the first sentence: only window 0 is touched and its words lose probability
    what = list(model.what_if(long_clip, DecodingOptions(), [s for a in attempts for s in a.steps],
                              span=(0.0, 4.0), longform=True))
    assert {ev.segment for ev in what if isinstance(ev, SegmentEvent)} == {0}
    from core.tasks.whatif import WhatIfScores

    (scores,) = [ev for ev in what if isinstance(ev, WhatIfScores)]
    lighthouse = [sh for sh in scores.shifts if "light" in sh.text]
    assert lighthouse and all(sh.p_other < sh.p_input for sh in lighthouse)  # silenced: no longer heard
    assert abs(scores.shifts[0].p_input - attempts[0].steps[0].raw_prob) < 1e-4  # the run's own prompt and window
    with pytest.raises(ValueError, match="long-form first"):
        list(model.fork(long_clip[:-1600], DecodingOptions(), segment=0, forced_ids=[], step_offset=0, longform=True))


def test_cancel_stops_between_steps(whisper_tiny_en, long_clip):
    seen = []
    events = []
    for ev in whisper_tiny_en.transcribe(long_clip, DecodingOptions(), cancel=lambda: len(seen) >= 5):
        events.append(ev)
        if isinstance(ev, StepEvent):
            seen.append(ev)
    assert isinstance(events[-1], Finished) and events[-1].cancelled
    assert len(seen) == 5
