"""Refine on long audio (issue 19 §2): words that cross a window's edge, refine's own error
messages, progress in words, refine of a long-form run (tiny.en on a 45 s espeak clip) and the
CLI's ``transcribe --refine`` on audio over 30 s (long-form by default) with ``--progress``.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from core.analysis.alignment import Word
from core.analysis.refine import RefineOptions, RefineWindow, refine_words

SR = 16_000
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _window(duration: float, truth):
    """A window of non-zero samples and a scorer under which a word keeps p = 0.9 until a
    sample of its true span (clipped to the window) is muted (then 0.2)."""
    audio = np.full(int(duration * SR), 0.1, np.float32)
    window = RefineWindow(0, audio, 0.0, tuple(range(len(truth))))

    def score(win, samples):
        if samples is None:
            return np.full(len(truth), 0.9, np.float32)
        return np.array([0.9 if np.all(samples[int(a * SR):int(min(b, duration) * SR)] != 0) else 0.2
                         for a, b in truth], np.float32)

    return window, score


def test_a_word_crossing_the_window_edge_is_refined_inside_it():
    """The issue's case: a word runs past the window's end (" morning." 29.70–30.58 s in a 30 s
    window) and the next word of the window starts after it. Before: the muted span ran
    backwards (30.033–30.000 s) and the what-if mask's error came out."""
    truth = [(0.3, 0.7), (1.0, 1.5), (1.9, 2.25)]
    window, score = _window(2.0, truth)
    words = [Word(" a", 0.0, 0.95, 0.9, (100,), (0,)), Word(" morning.", 0.95, 2.03, 0.9, (101,), (1,)),
             Word(" it", 2.03, 2.4, 0.9, (102,), (2,))]
    out = refine_words(words, [window], score, RefineOptions())
    assert [w.word for w in out] == [w.word for w in words]
    assert all(w.start <= w.end for w in out) and all(a.end <= b.start + 1e-9 for a, b in zip(out, out[1:]))
    assert abs(out[0].start - 0.3) <= 0.02 and abs(out[1].start - 1.0) <= 0.02
    # boundaries outside the window are not searched; the words are cut at its edge
    assert out[1].end <= 2.0 and out[2].start == out[2].end == pytest.approx(2.0)


def test_a_failure_names_the_word_or_window_refine_was_on():
    truth = [(0.3, 0.7), (1.0, 1.5)]
    window, score = _window(2.0, truth)
    words = [Word(" good", 0.0, 0.95, 0.9, (100,), (0,)), Word(" morning", 0.95, 1.9, 0.9, (101,), (1,))]

    def broken(win, samples):
        if samples is not None:
            raise RuntimeError("the encoder ran out of memory")
        return score(win, samples)

    with pytest.raises(RuntimeError, match=r"refine failed in window 1 \(0\.00–2\.00 s, words 1–2: 'good' … "
                                           r"'morning'\): the encoder ran out of memory"):
        refine_words(words, [window], broken)


def test_progress_counts_words():
    truth = [(0.3, 0.7), (1.0, 1.5), (1.9, 2.4)]
    window, score = _window(3.0, truth)
    second = RefineWindow(1, window.audio, 3.0, (3, 4))
    words = [Word(" a", 0.0, 0.95, 0.9, (100,), (0,)), Word(" b", 0.95, 1.8, 0.9, (101,), (1,)),
             Word(" c", 1.8, 2.6, 0.9, (102,), (2,)), Word(" d", 3.2, 3.8, 0.9, (103,), (3,)),
             Word(" e", 3.9, 4.4, 0.9, (104,), (4,))]

    def both(win, samples):
        p = score(win, samples)
        return p if win.index == 0 else p[:2]

    seen = []
    refine_words(words, [window, second], both, progress=lambda d, n: seen.append((d, n)))
    assert seen[-1] == (5, 5) and all(n == 5 for _, n in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and (3, 5) in seen


# ------------------------------------------------------------------ tiny.en, long-form
needs_espeak = pytest.mark.skipif(not shutil.which("espeak-ng"), reason="needs espeak-ng (make sysdeps)")
SENTENCES = ["The old train left the station early in the morning.",
             "People waved from the platform while the sun rose over the hills.",
             "A small dog ran along the track and barked at the birds.",
             "The conductor checked the tickets and smiled at every passenger.",
             "Outside the window, green fields and quiet villages passed by.",
             "A child asked her mother when they would arrive in the city."]


@pytest.fixture(scope="module")
def long_clip():
    """About 38 s of espeak speech (two long-form windows)."""
    from tests.helpers.speech import synth_speech

    audio = synth_speech(" ".join(SENTENCES * 2))
    return audio[: 38 * SR]


@pytest.fixture(scope="module")
def longform_run(whisper_tiny_en, long_clip):
    from core.cli.longform import longform_words
    from core.events import AttemptEvent
    from core.options import DecodingOptions
    from core.tasks.longform import transcript_events

    model = whisper_tiny_en
    options = DecodingOptions(capture_attention=True)
    events = transcript_events(list(model.transcribe(long_clip, options)))
    steps = [s for ev in events if isinstance(ev, AttemptEvent) and ev.kept_in_transcript for s in ev.steps]
    return model, options, steps, longform_words(model, events)


@needs_espeak
@pytest.mark.e2e
def test_refine_a_long_form_run_within_each_windows_audio(long_clip, longform_run):
    from core.tasks.longform import window_samples

    model, options, steps, words = longform_run
    plans = model._longform_plans[next(iter(model._longform_plans))]
    assert len(plans) >= 2 and len(words) > 40
    seen = []
    refined = model.refine_words(long_clip, steps, words, options, longform=True,
                                 refine=RefineOptions(precision=0.1, reach=0.3, outward=0.1),  # 2 rounds a kind
                                 progress=lambda d, n: seen.append((d, n)))
    assert [w.word for w in refined] == [w.word for w in words]
    assert seen[-1] == (len(words), len(words))
    window_of = {ev.step: ev.segment for ev in steps}
    for before, after in zip(words, refined):
        a, b = window_samples(plans[window_of[before.steps[0]]])
        lo, hi = a / SR, min(b, len(long_clip)) / SR
        assert after.start <= after.end
        assert lo - 1e-6 <= after.start and after.end <= max(hi, before.end) + 1e-6, (before, after, lo, hi)
    moved = sum(abs(a.start - b.start) + abs(a.end - b.end) > 0.01 for a, b in zip(words, refined))
    assert moved > len(words) // 3


@needs_espeak
@pytest.mark.e2e
def test_cli_refine_long_form_with_progress(whisper_tiny_en, long_clip, tmp_path, monkeypatch, capsys):
    """``transcribe long.wav --refine --progress --json``: long-form (over 30 s), the words
    refined (dtw_start/dtw_end kept), "refining words i/n" lines on stderr. Before: refused."""
    import soundfile as sf

    from core.cli import commands as cli
    from core.tasks.speech import SpeechModel

    path = tmp_path / "long.wav"
    sf.write(path, long_clip, SR)
    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="", progress=None: whisper_tiny_en))
    calls = []
    real = SpeechModel.refine_words

    def quick(self, audio, steps, words, options, **kw):  # fewer rounds: this checks the wiring
        calls.append(kw.get("longform"))
        return real(self, audio, steps, words, options, **{**kw, "refine": RefineOptions(precision=0.1, reach=0.3,
                                                                                         outward=0.1)})

    monkeypatch.setattr(SpeechModel, "refine_words", quick)
    assert cli.main(["transcribe", str(path), "--model", "tiny.en", "--refine", "--progress", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert calls == [True]
    assert out["words"] and {"dtw_start", "dtw_end"} <= set(out["words"][0])
    assert "refining words" in captured.err and f"{len(out['words'])}/{len(out['words'])}" in captured.err
    assert all("words" in s for s in out["segments"])


def test_the_budget_bounds_the_pass_and_the_report_says_how_far_it_got(monkeypatch):
    """A clock that moves 1 s per look (one look per window and per round: 2 kinds x 6 rounds):
    with a budget of 20 s the first window is refined and the second, cut in its middle, keeps
    its words as given; budget 0 refines nothing."""
    from core.analysis import refine as refine_module

    truth = [(0.3, 0.7), (1.0, 1.5), (1.9, 2.4)]
    window, score = _window(3.0, truth)
    second = RefineWindow(1, window.audio, 3.0, (3, 4, 5))
    words = [Word(f" w{i}", a, b, 0.9, (100 + i,), (i,)) for i, (a, b) in
             enumerate([(0.0, 0.95), (0.95, 1.8), (1.8, 2.6), (3.0, 3.95), (3.95, 4.8), (4.8, 5.6)])]
    clock = [0.0]

    def tick():
        clock[0] += 1.0
        return clock[0]

    monkeypatch.setattr(refine_module.time, "perf_counter", tick)
    report = {}
    out = refine_words(words, [window, second], score, budget_s=20, report=report)
    assert report["stopped"] == "budget" and report["refined"] == 3 and report["words"] == 6
    assert report["windows_refined"] == 1 and report["windows"] == 2
    assert out[3:] == words[3:] and out[:3] != words[:3]
    report = {}
    assert refine_words(words, [window, second], score, budget_s=0, report=report) == words
    assert report["refined"] == 0 and report["stopped"] == "budget"
    report = {}
    refine_words(words, [window, second], score, report=report)
    assert report["stopped"] is None and report["refined"] == 6


def test_cli_says_when_refine_stopped_at_its_budget(tmp_path, monkeypatch, capsys):
    """A stand-in model whose refine stops at its budget: stderr names the flag and the count."""
    import soundfile as sf

    from core.cli import commands as cli
    from core.tasks.speech import SpeechModel

    budgets = []

    class Stub:
        name = "stub"

    def fake_emit(model, audio, options, prefix, args):
        from core.cli.words import refine_note

        budgets.append(args.refine_budget)
        refine_note({"words": 10, "refined": 4, "windows": 3, "windows_refined": 1, "stopped": "budget",
                     "seconds": 2.0}, args)
        return 0

    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="", progress=None: Stub()))
    monkeypatch.setattr(cli, "emit_words", fake_emit)
    monkeypatch.setattr(cli, "_prefix_ids", lambda model, text: [])
    path = tmp_path / "clip.wav"
    sf.write(path, np.zeros(SR, np.float32), SR)
    assert cli.main(["transcribe", str(path), "--refine", "--refine-budget", "2"]) == 0
    err = capsys.readouterr().err
    assert budgets == [2.0] and "--refine-budget 2 s): 4 of 10 words refined" in err and "other 6" in err
    with pytest.raises(SystemExit):
        cli.main(["transcribe", str(path), "--refine", "--refine-budget", "-1"])
