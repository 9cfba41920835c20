"""Word-level timestamps by DTW over cross-attention (core/analysis/alignment.py) against
openai/whisper ``whisper/timing.py``: its DTW and median filter copied here as references,
then the whole pipeline on the bundled tiny.en and the sample clip."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.analysis import alignment
from core.analysis.alignment import (Word, align, alignment_matrix, dtw, median_filter, merge_punctuations,
                                     split_to_word_tokens, word_timestamps)
from core.events import StepEvent

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


# ---------------------------------------------------------------- references (openai/whisper timing.py)
def ref_backtrace(trace: np.ndarray):
    """timing.py ``backtrace``, without ``@numba.jit``."""
    i = trace.shape[0] - 1
    j = trace.shape[1] - 1
    trace[0, :] = 2
    trace[:, 0] = 1
    result = []
    while i > 0 or j > 0:
        result.append((i - 1, j - 1))
        if trace[i, j] == 0:
            i -= 1
            j -= 1
        elif trace[i, j] == 1:
            i -= 1
        elif trace[i, j] == 2:
            j -= 1
        else:
            raise ValueError("Unexpected trace[i, j]")
    result = np.array(result)
    return result[::-1, :].T


def ref_dtw_cpu(x: np.ndarray):
    """timing.py ``dtw_cpu``, without ``@numba.jit``."""
    N, M = x.shape
    cost = np.ones((N + 1, M + 1), dtype=np.float32) * np.inf
    trace = -np.ones((N + 1, M + 1), dtype=np.float32)
    cost[0, 0] = 0
    for j in range(1, M + 1):
        for i in range(1, N + 1):
            c0 = cost[i - 1, j - 1]
            c1 = cost[i - 1, j]
            c2 = cost[i, j - 1]
            if c0 < c1 and c0 < c2:
                c, t = c0, 0
            elif c1 < c0 and c1 < c2:
                c, t = c1, 1
            else:
                c, t = c2, 2
            cost[i, j] = x[i - 1, j - 1] + c
            trace[i, j] = t
    return ref_backtrace(trace)


def ref_median_filter(x: torch.Tensor, filter_width: int):
    """timing.py ``median_filter`` (its CPU path)."""
    pad_width = filter_width // 2
    if x.shape[-1] <= pad_width:
        return x
    if (ndim := x.ndim) <= 2:
        x = x[None, None, :]
    x = F.pad(x, (filter_width // 2, filter_width // 2, 0, 0), mode="reflect")
    result = x.unfold(-1, filter_width, 1).sort()[0][..., filter_width // 2]
    if ndim <= 2:
        result = result[0, 0]
    return result


def ref_matrix(rows: np.ndarray, heads, medfilt_width=7) -> np.ndarray:
    """timing.py ``find_alignment`` from the stacked heads to ``matrix``, on pre-softmax
    scores: the log of the captured weights (softmax of them = the weights renormalised)."""
    qk = torch.stack([torch.from_numpy(rows[:, l, h, :]).double().log() for l, h in heads])
    weights = qk.softmax(dim=-1)
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    weights = (weights - mean) / std
    weights = ref_median_filter(weights, medfilt_width)
    return weights.mean(axis=0).numpy()


# ---------------------------------------------------------------- DTW, filter, normalisation
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (6, 1), (3, 3), (5, 40), (24, 379), (40, 120)])
def test_dtw_equals_whisper_dtw_cpu(shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.normal(size=shape)
    rows, cols = dtw(x)
    ref = ref_dtw_cpu(x)
    assert np.array_equal(rows, ref[0]) and np.array_equal(cols, ref[1])
    assert rows[0] == 0 and cols[0] == 0 and rows[-1] == shape[0] - 1 and cols[-1] == shape[1] - 1
    assert np.all(np.diff(rows) >= 0) and np.all(np.diff(cols) >= 0)


def test_dtw_ties_and_structure_equal_whisper():
    """Ties (integer costs) and a block-diagonal matrix, where the step order matters."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, size=(12, 30)).astype(np.float64)
    assert all(np.array_equal(a, b) for a, b in zip(dtw(x), ref_dtw_cpu(x)))
    block = np.ones((4, 20))
    for k in range(4):
        block[k, 5 * k: 5 * k + 5] = -1
    rows, cols = dtw(block)
    assert all(np.array_equal(a, b) for a, b in zip((rows, cols), ref_dtw_cpu(block)))
    starts = [int(cols[np.argmax(rows == k)]) for k in range(4)]
    assert starts == [0, 5, 10, 15]


@pytest.mark.parametrize("shape", [(3, 50), (2, 5, 100), (4, 3), (8, 9, 7)])
def test_median_filter_equals_whisper(shape):
    x = np.random.default_rng(0).normal(size=shape)
    assert np.allclose(median_filter(x, 7), ref_median_filter(torch.from_numpy(x), 7).numpy(), atol=0, rtol=0)


def test_alignment_matrix_equals_whisper_steps():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(9, 4, 6, 1500)) * 3
    full = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)  # softmax over 30 s of frames
    rows = full[..., :200].astype(np.float32)  # the captured rows: cut to the window's frames
    heads = [(1, 0), (2, 5), (3, 3)]
    got = alignment_matrix(rows, heads)
    assert np.allclose(got, ref_matrix(rows, heads), atol=1e-9)
    # the renormalisation equals timing.py's softmax of the cut scores
    cut = torch.from_numpy(logits[:, 1, 0, :200]).softmax(-1).numpy()
    manual = np.stack([rows[:, 1, 0]]) / rows[:, 1, 0].sum(-1, keepdims=True)
    assert np.allclose(manual[0], cut, atol=1e-6)


def test_no_heads_is_an_error():
    with pytest.raises(ValueError, match="alignment heads"):
        alignment_matrix(np.ones((2, 1, 1, 5), np.float32), [])


# ---------------------------------------------------------------- words and punctuation
def test_merge_punctuations_as_whisper():
    words = [{"word": w, "tokens": [i]} for i, w in enumerate([" (", "Hello", ",", " world", "!", " \"", "Hi", "\""])]
    merge_punctuations(words)
    assert [w["word"] for w in words] == ["", " (Hello,", "", " world!", "", "", " \"Hi\"", ""]
    assert [w["tokens"] for w in words if w["word"]] == [[0, 1, 2], [3, 4], [5, 6, 7]]


def test_split_words_on_spaces_and_unicode():
    pieces = {1: " Hel", 2: "lo", 3: ",", 4: " w", 5: "orld", 6: "\xe2", 7: "\x82\xac"}

    def decode(ids):
        raw = "".join(pieces[i] for i in ids).encode("latin-1")
        return raw.decode("utf-8", errors="replace")

    words, tokens = split_to_word_tokens([1, 2, 3, 4, 5], decode)
    assert words == [" Hello", ",", " world"] and tokens == [[1, 2], [3], [4, 5]]
    words, tokens = split_to_word_tokens([4, 6, 7], decode)  # a character split over two tokens
    assert words == [" w€"] and tokens == [[4, 6, 7]]
    words, tokens = split_to_word_tokens([4, 6, 7], decode, language="zh")
    assert words == [" w", "€"] and tokens == [[4], [6, 7]]


def _step(i, token, attention, prob=0.5, segment=0, offset=0):
    return StepEvent(step=i, token_id=token, text="", prob=prob, raw_prob=prob, topk=[], raw_topk=[], entropy=0.0,
                     cross_attention=attention, segment=segment, source_offset=offset)


def test_synthetic_diagonal_attention_gives_its_times():
    """Tokens that attend to known frames get those frames as starts; a second window is
    placed at its offset; the end-of-text row closes the last word."""
    frames, spans = 100, [(0, 20), (20, 50), (50, 70)]
    pieces = {1: " a", 2: " b", 3: " c", 9: "<eot>"}

    def att(a, b):
        row = np.zeros((2, 2, frames), np.float32)
        row[:, :, a:b] = 1.0
        return row / row.sum(-1, keepdims=True)

    steps = [_step(i, t, att(a, b), prob=0.1 * (i + 1)) for i, (t, (a, b)) in enumerate(zip([1, 2, 3], spans))]
    steps += [_step(3 + i, t, att(a, b), segment=1, offset=1500) for i, (t, (a, b)) in enumerate(zip([1, 2], spans))]
    decode = lambda ids: "".join(pieces[i] for i in ids)  # noqa: E731
    ends = {0: att(70, 100), 1: att(50, 100)}
    words = word_timestamps(steps, [(0, 0), (1, 1)], decode, eot=9, eot_attention=ends)
    assert [w.word for w in words] == [" a", " b", " c", " a", " b"]
    assert [(round(w.start, 2), round(w.end, 2)) for w in words] == [
        (0.0, 0.4), (0.4, 1.0), (1.0, 1.4), (30.0, 30.4), (30.4, 31.0)]
    assert [round(w.prob, 2) for w in words[:3]] == [0.1, 0.2, 0.3] and words[1].steps == (1,)
    # live (no end-of-text row): the window is aligned up to where its tokens listened most
    # (frame 20 for ' b') + LIVE_MARGIN_FRAMES, so the last word ends there and grows with the next token
    live = word_timestamps([_step(0, 1, att(0, 20)), _step(1, 2, att(20, 40))], [(0, 0), (1, 1)], decode, eot=9)
    assert [(round(w.start, 2), round(w.end, 2)) for w in live] == [(0.0, 0.4), (0.4, 0.62)]
    longer = word_timestamps([_step(0, 1, att(0, 20)), _step(1, 2, att(20, 40)), _step(2, 3, att(40, 60))],
                             [(0, 0), (1, 1)], decode, eot=9)
    assert [round(w.end, 2) for w in longer] == [0.4, 0.8, 1.02]  # ' b' closed where ' c' began
    # special tokens (ids >= eot) are left out
    assert word_timestamps(steps[:2] + [_step(9, 50, att(0, 5))], [(0, 0)], decode, eot=9)[0].word == " a"
    with pytest.raises(ValueError, match="cross-attention"):
        word_timestamps([_step(0, 1, None)], [(0, 0)], decode)


def test_align_gives_the_words_and_each_windows_dtw_path():
    """``align``: the same words as ``word_timestamps``, and per window the DTW path (row ->
    frame) that DTW over minus the alignment matrix takes; other heads, another path."""
    frames, spans = 60, [(0, 10), (10, 30), (30, 45)]
    pieces = {1: " a", 2: " b", 3: " c", 9: "<eot>"}
    decode = lambda ids: "".join(pieces[i] for i in ids)  # noqa: E731

    def att(a, b, other=(50, 60)):  # head (0, 0) hears a..b, head (1, 1) always other
        row = np.full((2, 2, frames), 1e-3, np.float32)
        row[0, 0, a:b] = 1.0
        row[1, 1, other[0]:other[1]] = 1.0
        return row / row.sum(-1, keepdims=True)

    steps = [_step(i, t, att(a, b)) for i, (t, (a, b)) in enumerate(zip([1, 2, 3], spans))]
    steps += [_step(3, 1, att(0, 20), segment=1, offset=1500)]
    steps.insert(1, _step(7, 50, att(0, 5)))  # a timestamp token: not a row of the path
    ends = {0: att(45, 60)}
    got = align(steps, [(0, 0)], decode, eot=9, eot_attention=ends)
    assert got.words == word_timestamps(steps, [(0, 0)], decode, eot=9, eot_attention=ends)
    assert [(p.segment, p.source_offset, p.steps) for p in got.paths] == [(0, 0, (0, 1, 2, -1)), (1, 1500, (3,))]
    path = got.paths[0]
    text = [s for s in steps if s.segment == 0 and s.token_id < 9]
    matrix = alignment_matrix(np.stack([s.cross_attention for s in text] + [ends[0]]), [(0, 0)])
    rows, cols = dtw(-matrix)
    assert np.array_equal(path.rows, rows) and np.array_equal(path.frames, cols)
    # the path enters each token's row where that token is heard (the word starts)
    assert [int(path.frames[np.argmax(path.rows == k)]) for k in range(4)] == [0, 10, 30, 45]
    assert path.seconds()[0] == 0.0 and got.paths[1].seconds()[0] == pytest.approx(30.0)
    # heads that hear nothing of the words: the path goes elsewhere
    other = align(steps, [(1, 1)], decode, eot=9, eot_attention=ends).paths[0]
    assert not np.array_equal(other.frames, path.frames)


# ---------------------------------------------------------------- the bundled models, the sample clip
def test_bundled_models_have_openai_alignment_heads():
    """tiny.en's heads (loaded) and base's (its CT2 config) equal openai/whisper's
    ``_ALIGNMENT_HEADS`` (base85 of a gzipped bool array, layers x heads)."""
    from core.backends import whisper_models as wm

    dumps = {"tiny.en": (b"ABzY8J1N>@0{>%R00Bk>$p{7v037`oCl~+#00", (4, 6)),
             "base": (b"ABzY8KQ!870{>%RzyTQH3`Q^yNP!>##QT-<FaQ7m", (6, 8))}
    for name, (dump, shape) in dumps.items():
        mask = np.frombuffer(gzip.decompress(base64.b85decode(dump)), dtype=bool).reshape(shape)
        expected = [tuple(map(int, p)) for p in np.argwhere(mask)]
        entry = wm._BUNDLED[name]
        directory = wm._module_dir(entry.modules[entry.config[0]], entry.pip, name)
        heads = json.loads((directory / entry.config[1]).read_text())["alignment_heads"]
        assert [tuple(h) for h in heads] == expected, name


@pytest.fixture(scope="module")
def tiny_en(whisper_tiny_en):
    from core.inputs.audio import load_audio
    from core.options import DecodingOptions

    model = whisper_tiny_en
    audio = load_audio(str(SAMPLE))
    events = list(model.decode(audio, DecodingOptions()))
    steps = [ev for ev in events if isinstance(ev, StepEvent)]
    return model, audio, events, steps


def test_tiny_en_words_on_the_sample(tiny_en):
    model, audio, events, steps = tiny_en
    from core.options import DecodingOptions

    assert model.alignment_heads == [(1, 0), (2, 0), (2, 5), (3, 0), (3, 1), (3, 2), (3, 3), (3, 4)]
    ends = model.end_attention(audio, steps, DecodingOptions())
    words = model.words(steps, end_attention=ends)
    duration = len(audio) / 16000
    text = events[-1].text
    assert "".join(w.word for w in words).strip() == text.strip()
    starts, stops = np.array([w.start for w in words]), np.array([w.end for w in words])
    assert np.all(np.diff(starts) >= 0) and np.all(stops >= starts) and np.all(stops[:-1] <= starts[1:] + 1e-9)
    assert starts[0] >= 0 and stops[-1] <= duration and starts[0] < 1.0
    assert all(0 < w.prob <= 1 for w in words)
    # the pauses between sentences (the clip's silent stretches, >= 0.2 s of 20 ms frames with
    # RMS < 0.01) each overlap a gap between words by >= 0.1 s, and every gap > 0.2 s is one;
    # the last word ends before the trailing silence
    frame = 320
    rms = np.sqrt(np.mean(audio[: len(audio) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    silences, run = [], None
    for i, quiet in enumerate(np.append(rms < 0.01, False)):
        if quiet and run is None:
            run = i
        elif not quiet and run is not None:
            if i - run >= 10:
                silences.append((run * 0.02, i * 0.02))
            run = None
    trailing = [q for q in silences if q[1] >= duration - 0.02]
    assert trailing and stops[-1] <= trailing[0][0] + 0.1  # the end-of-text row took the trailing silence
    silences = [q for q in silences if q not in trailing]
    gaps = [(a.end, b.start) for a, b in zip(words, words[1:]) if b.start - a.end > 0.2]
    assert len(silences) >= 2 and len(gaps) == len(silences), (silences, gaps)

    def overlap(x, y):
        return min(x[1], y[1]) - max(x[0], y[0])

    assert all(max(overlap(s, g) for g in gaps) >= 0.1 for s in silences), (silences, gaps)


def test_end_attention_is_the_end_step_row(tiny_en):
    """Feeding prompt + tokens again gives the attention of the step that chose the next
    token: checked on the last text token's own row."""
    model, audio, _events, steps = tiny_en
    from core.options import DecodingOptions

    rows = model.end_attention(audio, steps[:-1], DecodingOptions())
    assert np.allclose(rows[0], steps[-1].cross_attention, atol=1e-4)


def test_incremental_words_follow_the_tokens(tiny_en):
    """As tokens arrive: every prefix gives its own words, in order, the text so far."""
    model, _audio, _events, steps = tiny_en
    previous = 0
    for n in range(1, len(steps) + 1):
        words = model.words(steps[:n])
        assert "".join(w.word for w in words) == model.backend.decode([s.token_id for s in steps[:n]])
        assert all(a.start <= b.start for a, b in zip(words, words[1:]))
        assert len(words) >= previous - 1  # punctuation may join the word before it
        previous = len(words)


def test_cli_word_timestamps_json(tiny_en, capsys, cli_reuses_models):
    from core.cli import commands as cli

    model, audio, _events, steps = tiny_en
    assert cli.main(["transcribe", str(SAMPLE), "--model", "tiny.en", "--word-timestamps", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    from core.options import DecodingOptions

    ends = model.end_attention(audio, steps, DecodingOptions())
    expected = model.words(steps, end_attention=ends, audio=audio)  # moved off silence, as the CLI does by default
    assert [w["word"] for w in out["words"]] == [w.word for w in expected]
    assert [(w["start"], w["end"]) for w in out["words"]] == [(round(w.start, 3), round(w.end, 3)) for w in expected]
    assert cli.main(["transcribe", str(SAMPLE), "--model", "tiny.en", "--word-timestamps", "--json",
                     "--no-silence-snap"]) == 0
    raw = json.loads(capsys.readouterr().out)["words"]
    dtw = model.words(steps, end_attention=ends)
    assert [(w["start"], w["end"]) for w in raw] == [(round(w.start, 3), round(w.end, 3)) for w in dtw]
    assert raw != out["words"]  # the sample's pauses moved some boundaries
    assert set(out["words"][0]) == {"word", "start", "end", "prob"}
    assert "cross_attention" not in out["tokens"][0]  # captured for the words, not printed without --attention
    assert cli.main(["transcribe", str(SAMPLE), "--model", "tiny.en", "--word-timestamps"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == out["text"] and lines[1].split()[-1] == out["words"][0]["word"].strip()
    # with timestamp tokens: they are left out of the words, the segments stay
    assert cli.main(["transcribe", str(SAMPLE), "--model", "tiny.en", "--word-timestamps", "--timestamps",
                     "--json"]) == 0
    timed = json.loads(capsys.readouterr().out)
    assert timed["segments"] and "".join(w["word"] for w in timed["words"]).strip() == timed["text"].strip()
    assert all(a["start"] <= b["start"] for a, b in zip(timed["words"], timed["words"][1:]))


def test_word_dataclass_fields():
    assert [f for f in Word.__dataclass_fields__] == ["word", "start", "end", "prob", "tokens", "steps"]
    assert alignment.PREPEND_PUNCTUATIONS and alignment.APPEND_PUNCTUATIONS
