"""A window skipped as silence names the rule that skipped it, with the run's thresholds
(core.tasks.longform_verdicts.silence_rule / silence_note): Whisper's own (openai ``transcribe()``:
no-speech probability > no_speech_threshold AND average log-probability < logprob_threshold) or
ours (no-speech probability above the threshold while the loudest 20 ms frame is below
silence_db). Before, the note said "skipped as silence (no-speech 0.81, −11 dBFS)": no rule, and
a level that Whisper's rule does not look at."""

from __future__ import annotations

import numpy as np

from core.tasks.longform import LongFormOptions
from core.tasks.longform_verdicts import silence_note, silence_rule

LF = LongFormOptions(no_speech_threshold=0.5, logprob_threshold=-0.8, silence_db=-45.0)


def test_whispers_rule_is_named_with_the_options_thresholds():
    short, full = silence_rule(0.81, -1.42, -11.0, LF)
    assert short == "Whisper's rule: no-speech probability 0.81 > 0.5 and average log-probability -1.42 < -0.8"
    assert "openai/whisper transcribe()" in full
    assert "no_speech_threshold (0.5) AND" in full and "logprob_threshold (-0.8)" in full
    assert "does not look at the loudness: its loudest 20 ms is −11 dBFS (the RMS level" in full
    assert "0.6" not in full and "-1." not in full.replace("-1.42", "")  # the defaults are not written in


def test_the_loudness_rule_is_ours_and_says_why_whispers_did_not_skip():
    short, full = silence_rule(0.95, -0.4, float("-inf"), LF)
    assert short == "loudness rule: no-speech probability 0.95 > 0.5 and the loudest 20 ms is −inf dBFS < −45 dBFS"
    assert "not Whisper's" in full and "silence_db (−45 dBFS)" in full
    assert "average log-probability -0.40 is not below logprob_threshold (-0.8)" in full
    # a fixed window has no text yet: only this rule can have skipped it
    _short, full = silence_rule(0.95, None, float("-inf"), LF)
    assert "a fixed window is skipped before it is decoded" in full


def test_the_status_note_names_each_rule_with_its_count():
    assert silence_note([(0.81, -11.0, -1.42)], LF) == (
        "1 window skipped as silence (Whisper's rule: no-speech 0.81 > 0.5 and avg log-prob -1.42 < -0.8)")
    note = silence_note([(0.81, -11.0, -1.42), (0.9, -20.0, -2.0), (0.95, float("-inf"), -0.3)], LF)
    assert note == ("3 windows skipped as silence (2 by Whisper's rule: no-speech 0.81–0.90 > 0.5 and avg "
                    "log-prob -2.00–-1.42 < -0.8; 1 by the loudness rule: no-speech 0.95 > 0.5 and loudest 20 ms "
                    "−inf < −45 dBFS)")
    # without options: the numbers only, as the CLI writes them
    assert silence_note([(0.9, float("-inf"))]) == "1 window skipped as silence (no-speech 0.90, −inf dBFS)"


def test_a_fixed_window_skipped_as_silence_says_which_rule():
    from core.events import SegmentEvent
    from core.tasks.plan import Prepared
    from core.tasks.speech_windows import skip_silence

    ev = SegmentEvent(segment=0, label="0.0–30.0 s · no speech 95%", source_len=50, total=1, kind="window",
                      no_speech_prob=0.95)
    ready = Prepared(encoded=None, prompt=None, event=ev, cached=False)
    out = skip_silence(0, np.zeros(16000, np.float32), ready)
    assert out is not None and out.label.endswith("skipped as silence")
    assert out.warning.startswith("0.0–30.0 s skipped as silence by the loudness rule: "
                                  "no-speech probability 0.95 > 0.6")
