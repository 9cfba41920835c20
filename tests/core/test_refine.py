"""The refine pass for word timestamps (core/analysis/refine.py, issue 14 section 2).

A synthetic scorer (a word keeps its probability until a muted span touches its true samples)
checks the bisection finds the true boundaries to the precision; tiny.en on an espeak clip made
as tests/bench/bench_word_timing.py makes them (words alone, silence trimmed by sox, known gaps)
checks the refined words are nearer the truth than DTW's; the CLI wiring with a stand-in refine.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import replace

import numpy as np
import pytest

from core.analysis.alignment import Word
from core.analysis.refine import RefineOptions, RefineWindow, refine_words

SR = 16_000
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------ synthetic scorer
TRUTH = [(0.30, 0.70), (1.00, 1.40), (1.70, 2.30), (2.60, 2.90)]


def synthetic(truth=TRUTH, duration=3.2):
    """A window of non-zero samples, DTW-like contiguous words around ``truth`` (each pause given
    to the word after it; the last runs to 3.1 s), and a scorer under which a word keeps p = 0.9
    until a sample of its true span is muted (then 0.2)."""
    audio = np.full(int(duration * SR), 0.1, np.float32)
    bounds = [0.0] + [a for a, _ in truth[1:]] + [3.1]
    words = [Word(f" w{i}", bounds[i], bounds[i + 1], 0.9, (100 + i,), (i,)) for i in range(len(truth))]
    window = RefineWindow(0, audio, 0.0, tuple(range(len(truth))))
    calls = []

    def score(win, samples):
        calls.append(samples is None)
        if samples is None:
            return np.full(len(truth), 0.9, np.float32)
        return np.array([0.9 if np.all(samples[int(a * SR):int(b * SR)] != 0) else 0.2 for a, b in truth],
                        np.float32)

    return words, window, score, calls


def test_bisection_finds_the_true_boundaries_to_the_precision():
    words, window, score, calls = synthetic()
    out = refine_words(words, [window], score, RefineOptions(precision=0.02, reach=0.6))
    for w, (a, b) in zip(out, TRUTH):
        assert abs(w.start - a) <= 0.02 and abs(w.end - b) <= 0.02, (w, a, b)
    assert [w.word for w in out] == [w.word for w in words] and [w.prob for w in out] == [w.prob for w in words]
    # one reference score, then per kind and round two rows (even / odd words) at most
    rounds = int(np.ceil(np.log2(0.6 / 0.02)))
    assert calls[0] is True and 1 < len(calls) <= 1 + 2 * 2 * rounds


def test_reach_limits_the_move_and_steps_choose_the_side():
    words, window, score, _ = synthetic()
    out = refine_words(words, [window], score, RefineOptions(reach=0.1, steps="s"))
    for w, dtw in zip(out, words):
        assert dtw.start <= w.start <= dtw.start + 0.1 + 1e-9 and w.end == dtw.end


def test_words_stay_ordered_and_inside_the_window():
    """Overlapping input words meet in the middle; a word past the audio's end is cut to it."""
    words, window, score, _ = synthetic()
    words[0] = replace(words[0], end=1.25)  # overlaps the next word (starts 1.00)
    words[-1] = replace(words[-1], end=5.0)  # a live run's last word runs to the window's end
    out = refine_words(words, [window], score, RefineOptions(steps="s"))
    assert out[0].end <= out[1].start and out[0].end > 1.0
    assert out[-1].end == pytest.approx(len(window.audio) / SR)
    assert all(w.start <= w.end for w in out)


def test_a_word_the_model_barely_heard_keeps_its_dtw_times():
    words, window, score, _ = synthetic()

    def low(win, samples):  # the second word's probability is below min_prob
        p = score(win, samples)
        p[1] *= 0.01
        return p

    out = refine_words(words, [window], low, RefineOptions(min_prob=0.05))
    assert (out[1].start, out[1].end) == (words[1].start, words[1].end)
    assert abs(out[2].start - TRUTH[2][0]) <= 0.02


def test_cancel_returns_the_words_unchanged():
    words, window, score, calls = synthetic()
    seen = []
    out = refine_words(words, [window], score, cancel=lambda: len(seen) >= 1, progress=lambda d, n: seen.append(d))
    assert out == words and len(seen) == 1 and len(calls) <= 3


def test_bad_options_say_which():
    for bad, field in ((dict(precision=0), "precision"), (dict(max_drop=1.5), "max_drop"),
                       (dict(watch="middle"), "watch"), (dict(steps="x"), "steps"), (dict(reach=0.01), "reach")):
        with pytest.raises(ValueError, match=field):
            RefineOptions(**bad).validate()


# ------------------------------------------------------------------ tiny.en on an espeak clip
needs_espeak = pytest.mark.skipif(not (shutil.which("espeak-ng") and shutil.which("sox")),
                                  reason="needs espeak-ng and sox (make sysdeps)")


@pytest.fixture(scope="module")
def clip_run(tmp_path_factory, whisper_tiny_en):
    """tiny.en, a 5-word clip with known word times, its run and DTW words."""
    from core.events import StepEvent
    from core.options import DecodingOptions
    from tests.bench.bench_word_timing import make_clip

    audio, truth = make_clip(["open", "garden", "window", "yellow", "paper"], random.Random(3),
                             tmp_path_factory.mktemp("words"))
    model = whisper_tiny_en
    options = DecodingOptions(capture_attention=True)
    steps = [ev for ev in model.decode(audio, options) if isinstance(ev, StepEvent)]
    words = model.words(steps, end_attention=model.end_attention(audio, steps, options))
    return model, audio, truth, options, steps, words


@needs_espeak
@pytest.mark.e2e
def test_tiny_en_refined_words_are_nearer_the_truth(clip_run):
    from tests.bench.bench_word_timing import errors

    model, audio, truth, options, steps, words = clip_run
    progress = []
    refined = model.refine_words(audio, steps, words, options, refine=RefineOptions(precision=0.04, reach=0.4),
                                 progress=lambda d, n: progress.append((d, n)))
    assert [w.word for w in refined] == [w.word for w in words]
    dtw_s, dtw_e, missed = errors([(w.word, w.start, w.end) for w in words], truth)
    ref_s, ref_e, _ = errors([(w.word, w.start, w.end) for w in refined], truth)
    assert missed == 0
    dtw_err, ref_err = np.mean(np.abs(dtw_s + dtw_e)), np.mean(np.abs(ref_s + ref_e))  # errors are signed
    assert ref_err < 0.75 * dtw_err and ref_err < 0.1, (dtw_err, ref_err)
    starts, ends = np.array([w.start for w in refined]), np.array([w.end for w in refined])
    assert starts[0] >= 0 and ends[-1] <= len(audio) / SR and np.all(ends >= starts)
    assert np.all(ends[:-1] <= starts[1:] + 1e-9)
    assert progress[-1] == (len(words), len(words))  # (words done, words in all)


@needs_espeak
@pytest.mark.e2e
def test_tiny_en_refine_cancel_keeps_the_dtw_words(clip_run):
    model, audio, _truth, options, steps, words = clip_run
    assert model.refine_words(audio, steps, words, options, cancel=lambda: True) == words


@needs_espeak
@pytest.mark.e2e
def test_cli_refine_json_keeps_the_dtw_times(clip_run, tmp_path, monkeypatch, capsys):
    """``transcribe --refine --json``: words carry the refined times and dtw_start/dtw_end (the
    refine pass itself stood in by a shift, so this checks the wiring only)."""
    import soundfile as sf

    from core.cli import commands as cli
    from core.tasks.speech import SpeechModel

    model, audio, *_ = clip_run
    path = tmp_path / "clip.wav"
    sf.write(path, audio, SR)
    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="", progress=None: model))
    monkeypatch.setattr(SpeechModel, "refine_words", lambda self, audio, steps, words, options, **kw:
                        [replace(w, start=w.start + 0.01, end=w.end - 0.01) for w in words])
    assert cli.main(["transcribe", str(path), "--model", "tiny.en", "--refine", "--json", "--no-silence-snap"]) == 0
    out = json.loads(capsys.readouterr().out)["words"]
    assert out and set(out[0]) == {"word", "start", "end", "prob", "dtw_start", "dtw_end"}
    assert all(abs(w["start"] - w["dtw_start"] - 0.01) < 2e-3 and abs(w["dtw_end"] - w["end"] - 0.01) < 2e-3
               for w in out)


# ------------------------------------------------------------------ one-pass teacher forcing
@pytest.mark.parametrize("kind,lean", [("whisper", True), ("whisper", False), ("marian", False)])
def test_forced_probs_equal_the_engines_forced_steps(tiny_models, kind, lean):
    """``forced_token_probs`` (one decoder call) = the raw probabilities ``whatif.score_tokens``
    gets by forcing the same tokens step by step through the engine (hard rules included)."""
    from core.tasks import whatif
    from core.analysis.refine import forced_token_probs
    from core.backends.hf import HFSeq2SeqBackend
    from core.engine import Engine

    tiny = tiny_models[kind]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind, lean=lean)
    encoded = backend.encode(tiny.inputs)
    ids = [11, 8, 12, 40, 3, 77, 12, 5]  # 8 is a suppressed token of the whisper prompt: p 0
    expected = [ev.raw_prob for ev in whatif.score_tokens(Engine(backend), encoded, tiny.prompt, ids)]
    got = forced_token_probs(backend, encoded, tiny.prompt, ids)
    assert got.shape == (len(ids),) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    assert forced_token_probs(backend, encoded, tiny.prompt, []).shape == (0,)
    with pytest.raises(ValueError, match="at least one id"):
        backend.forced_logits(encoded, [])


def test_outward_lets_an_early_dtw_end_move_out_to_the_word_end():
    """A DTW end inside its word (base does this) moves out to the true end with ``outward``;
    with outward 0 (tighten only, as stable-ts) it cannot pass the DTW end."""
    truth = [(0.30, 0.70), (1.00, 1.40)]
    words, window, score, _ = synthetic(truth)
    words = [replace(words[0], end=0.55), replace(words[1], start=0.55, end=1.2)]
    out = refine_words(words, [window], score, RefineOptions(outward=0.3))
    assert abs(out[0].end - 0.70) <= 0.02 and abs(out[1].end - 1.40) <= 0.02
    tight = refine_words(words, [window], score, RefineOptions(outward=0.0))
    assert tight[0].end <= 0.55 and tight[1].end <= 1.2
