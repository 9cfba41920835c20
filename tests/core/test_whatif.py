"""Input what-ifs (issue 13, section 3, core): ``core.tasks.whatif`` and the tasks' ``what_if`` /
``no_input``.

Invariants on the tiny random models (tests/core/conftest.py): masking nothing changes no
probability and no token; the original tokens forced through a masked input get the
probabilities a direct transformers forward on the masked input gives; a masked segment is
encoded anew (another encoder output) and untouched segments are left alone; "no input"
= the run's tokens forced through the empty input's encoder output; the marking rules.
End to end (marked e2e): tiny.en on the bundled sample (silencing a word's span takes that
word's probability away, the other words keep theirs) and Bergamot en-pt (dropping a source
word removes its translation).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from core.tasks import whatif
from core.backends.base import DecoderPrompt
from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.whatif import (
    OriginalSegment,
    Ready,
    TokenShift,
    WhatIfDone,
    WhatIfScores,
    is_prior_explained,
    original_segments,
)
from core.tasks.segments import what_if_segments
from tests.core.conftest import V

pytestmark = pytest.mark.usefixtures("one_torch_thread")

KINDS = ["whisper", "marian", "t5"]


def _options(**kw) -> DecodingOptions:
    return DecodingOptions(**{"max_new_tokens": 12, "top_k_report": 5, **kw})


def _masked_inputs(tiny) -> dict:
    """The tiny model's input with a part taken away: Whisper 30 of its 80 feature frames set
    to the quietest value, Marian / T5 one source token dropped."""
    inputs = {k: v.clone() for k, v in tiny.inputs.items()}
    if tiny.kind == "whisper":
        f = inputs["input_features"]
        f[:, :, 20:50] = f.min()
        return inputs
    keep = inputs["attention_mask"][0].bool()
    ids = inputs["input_ids"][0][keep]
    ids = torch.cat([ids[:2], ids[3:]])[None]  # drop the third source token
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _empty_inputs(tiny) -> dict:
    """No input: quiet features of the same size (Whisper), a source of EOS alone (Marian, T5)."""
    if tiny.kind == "whisper":
        f = tiny.inputs["input_features"]
        return {"input_features": torch.full_like(f, float(f.min()))}
    eos = 0 if tiny.kind == "marian" else 1
    return {"input_ids": torch.tensor([[eos]]), "attention_mask": torch.ones(1, 1, dtype=torch.long)}


def _setup(tiny, options):
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind)
    engine = Engine(backend)
    encoded = backend.encode(tiny.inputs)
    events = list(engine.run(encoded, tiny.prompt, options))
    steps = [e for e in events if isinstance(e, StepEvent)]
    ready = Ready(encoded, tiny.prompt, SegmentEvent(segment=0, label="all", source_len=encoded.source_len))
    return backend, engine, encoded, steps, events[-1], ready


def _direct_probs(tiny, inputs: dict, prompt: DecoderPrompt, ids: list[int]) -> list[float]:
    """Each of ``ids``'s raw probability from one transformers forward (teacher forcing) on
    ``inputs``, with the prompt's hard rules (suppressed tokens; begin-suppressed at the first
    generated position) applied, as the engine's raw distribution has them."""
    dec = torch.tensor([list(prompt.prompt_ids) + ids[:-1]])
    with torch.no_grad():
        logits = tiny.model(**inputs, decoder_input_ids=dec).logits[0].float()
    out = []
    for k, t in enumerate(ids):
        row = logits[len(prompt.prompt_ids) - 1 + k].clone()
        row[list(prompt.suppress_tokens)] = -math.inf
        if k == 0:
            row[list(prompt.begin_suppress_tokens)] = -math.inf
        out.append(float(torch.softmax(row, -1)[t]))
    return out


def _stream(engine, ready, encode_other, steps, options, kind="mask"):
    events = list(what_if_segments(engine, [0], lambda i: ready, encode_other, original_segments(steps, 1),
                                   options, kind=kind, description="test"))
    assert isinstance(events[-1], WhatIfDone)
    scores = [e for e in events if isinstance(e, WhatIfScores)]
    return events, scores, events[-1]


# ------------------------------------------------------------------ invariants on tiny models
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_masking_nothing_gives_identical_probabilities(tiny_models, kind, strategy):
    """The "masked" input equals the input: every original token keeps its probability (the
    run's own raw_prob, exactly as reported), and the what-if decode writes the same tokens."""
    tiny = tiny_models[kind]
    options = _options(strategy=strategy, seed=5, temperature=1.3, num_beams=3)
    backend, engine, _enc, steps, fin, ready = _setup(tiny, options)
    events, scores, done = _stream(engine, ready, lambda i: backend.encode(tiny.inputs), steps, options)
    shifts = scores[0].shifts
    assert [s.token_id for s in shifts] == [e.token_id for e in steps] and len(shifts) == len(steps)
    # (beam search computed them in a batch of beams: float rounding differs a little)
    np.testing.assert_allclose([s.p_input for s in shifts], [e.raw_prob for e in steps], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose([s.p_other for s in shifts], [s.p_input for s in shifts], rtol=1e-5, atol=1e-7)
    assert not any(s.depends for s in shifts)
    # the re-decode: same segment, same tokens, steps numbered as the original's
    redecoded = [e for e in events if isinstance(e, StepEvent)]  # (beam search: after its BeamEvents)
    assert [e.token_id for e in redecoded] == [e.token_id for e in steps] == list(scores[0].token_ids)
    assert [e.step for e in redecoded] == [e.step for e in steps]
    assert isinstance(events[0], SegmentEvent) and sum(isinstance(e, Finished) for e in events) == 1
    assert done.segments == (0,) and done.shifts == shifts and not done.cancelled


@pytest.mark.parametrize("kind", KINDS)
def test_forced_original_tokens_get_the_masked_input_s_probabilities(tiny_models, kind):
    """p_other of each original token = a direct transformers forward on the masked input;
    p_input = the same forward on the real input; the masked input changes them."""
    tiny = tiny_models[kind]
    options = _options()
    backend, engine, _enc, steps, _fin, ready = _setup(tiny, options)
    masked = _masked_inputs(tiny)
    _events, scores, _done = _stream(engine, ready, lambda i: backend.encode(masked), steps, options)
    ids = [e.token_id for e in steps]
    shifts = scores[0].shifts
    np.testing.assert_allclose([s.p_other for s in shifts], _direct_probs(tiny, masked, tiny.prompt, ids),
                               rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose([s.p_input for s in shifts], _direct_probs(tiny, tiny.inputs, tiny.prompt, ids),
                               rtol=1e-3, atol=1e-6)
    assert max(abs(s.delta) for s in shifts) > 1e-3  # the mask did change something
    # what the masked input's model prefers at each position is reported too
    assert all(isinstance(s.other_top, str) and s.other_top for s in shifts)


@pytest.mark.parametrize("kind", KINDS)
def test_no_input_prior_is_the_tokens_forced_through_the_empty_encoding(tiny_models, kind):
    """Kind "prior": p_other = the run's tokens forced through the empty input's encoder output
    (a direct forward on it), nothing is decoded, and the marks follow the rule."""
    tiny = tiny_models[kind]
    options = _options()
    backend, engine, _enc, steps, _fin, ready = _setup(tiny, options)
    empty = _empty_inputs(tiny)
    events, scores, done = _stream(engine, ready, lambda i: backend.encode(empty), steps, options, kind="prior")
    assert not any(isinstance(e, (StepEvent, Finished, SegmentEvent)) for e in events)  # scored, not decoded
    assert scores[0].kind == "prior" and scores[0].text == "" and scores[0].token_ids == ()
    ids = [e.token_id for e in steps]
    prior = _direct_probs(tiny, empty, tiny.prompt, ids)
    np.testing.assert_allclose([s.p_other for s in done.shifts], prior, rtol=1e-3, atol=1e-6)
    assert [s.prior_explained for s in done.shifts] == [is_prior_explained(s.p_input, p)
                                                        for s, p in zip(done.shifts, prior)]
    assert done.prior_explained() == [s for s in done.shifts if s.prior_explained]


def test_the_masked_input_is_encoded_anew_and_untouched_segments_are_left_alone():
    """OCR with the tiny reader, two lines: blanking a region over line 1 encodes line 1 again
    (once, a new cache key; another encoder output), decodes and scores line 1 only, with
    the original step numbers; no input encodes each line of a blank image."""
    model, img, lines = _tiny_ocr()
    options = _options()
    events = list(model.decode(img, options, lines=lines))
    steps = [e for e in events if isinstance(e, StepEvent)]
    before = model.encode_count
    mask = (60, 118, 90, 34)  # over the left part of line 1 only
    out = list(model.what_if(img, options, steps, mask=mask, lines=lines))
    assert model.encode_count == before + 1  # line 1, masked; line 0's encoding came from the cache
    done = out[-1]
    assert done.segments == (1,) and done.description == "blank 90×34 px at (60, 118)"
    assert {s.segment for s in done.shifts} == {1} and [s.step for s in done.shifts] == [e.step for e in steps
                                                                                         if e.segment == 1]
    assert [e.segment for e in out if isinstance(e, SegmentEvent)] == [1]
    redecoded = [e for e in out if isinstance(e, StepEvent)]
    assert redecoded and redecoded[0].step == next(e.step for e in steps if e.segment == 1)
    masked_img = whatif.blank_region(img, mask)
    original_enc, _ = model.encode_line(img, lines[1])
    masked_enc, hit = model.encode_line(masked_img, lines[1])
    assert hit  # the what-if put it in the cache under the masked pixels' key
    assert not torch.allclose(original_enc.hidden_states, masked_enc.hidden_states)
    # the masked line's tokens were scored through that encoder output
    ids = [e.token_id for e in steps if e.segment == 1]
    alt = whatif.score_tokens(model._engine, masked_enc, model.decoder_prompt(masked_enc), ids)
    assert [s.p_other for s in done.shifts] == pytest.approx([e.raw_prob for e in alt], abs=1e-6)
    # a mask beside every line touches nothing
    out = list(model.what_if(img, options, steps, mask=(0, 0, 30, 20), lines=lines))
    assert out[-1].segments == () and out[-1].shifts == () and isinstance(out[-2], Finished)
    # no input: every line, scored through a blank image's crop of its box
    before = model.encode_count
    prior = list(model.no_input(img, options, steps, lines=lines))[-1]
    assert prior.kind == "prior" and prior.segments == (0, 1) and len(prior.shifts) == len(steps)
    assert model.encode_count > before  # (both boxes are 6:1: their blank crops are one encoder input)
    blank_enc, _ = model.encode_line(whatif.blank_image(img), lines[0])
    ids0 = [e.token_id for e in steps if e.segment == 0]
    p0 = whatif.score_tokens(model._engine, blank_enc, model.decoder_prompt(blank_enc), ids0)
    assert [s.p_other for s in prior.shifts if s.segment == 0] == pytest.approx([e.raw_prob for e in p0], abs=1e-6)


def _tiny_ocr():
    """The tiny random OCR reader of tests/core/test_fork.py and a white image with two dark lines."""
    from core.backends.ocr_attn import OCRAttnConfig, OCRAttnModel, OCRVocab
    from core.backends.ocr_backend import OCRAttnBackend
    from core.tasks.ocr import OCRModel
    from core.tasks.ocr_readers import BundledReader

    torch.manual_seed(0)
    cfg = OCRAttnConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)
    net = OCRAttnModel(cfg)
    for p in net.parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.3)
    model = OCRModel(BundledReader(OCRAttnBackend(net.eval(), OCRVocab(cfg.characters), "tiny")), None, 0.0)
    img = Image.new("RGB", (400, 200), "white")
    d = ImageDraw.Draw(img)
    for x in range(50, 280, 14):
        d.rectangle([x, 40, x + 6, 66], fill=(x * 7) % 80)
        d.rectangle([x + 10, 125, x + 15, 148], fill=(x * 3) % 80)
    lines = [model._line(0, (50, 30, 290, 70)), model._line(1, (60, 120, 240, 150))]
    return model, img, lines


def test_cancel_stops_between_segments():
    model, img, lines = _tiny_ocr()
    options = _options()
    steps = [e for e in model.decode(img, options, lines=lines) if isinstance(e, StepEvent)]
    calls = []

    def cancel():
        calls.append(1)
        return len(calls) > 1

    done = list(model.no_input(img, options, steps, lines=lines, cancel=cancel))[-1]
    assert done.cancelled and len(done.segments) < 2


# ------------------------------------------------------------------ the rules and the masks
def test_marking_rules():
    """depends: p at least halved and down >= 0.1; prior_explained: prior >= 0.1 and the input
    less than doubles it (PMI < ln 2), a prior above the input's probability included."""
    s = lambda pi, po: TokenShift(0, 0, 1, "x", pi, po)  # noqa: E731
    assert s(0.9, 0.45).depends and s(0.9, 0.01).depends
    assert not s(0.9, 0.46).depends  # not halved
    assert not s(0.15, 0.06).depends  # halved but only 0.09 down
    assert not s(0.5, 0.9).depends  # gained
    assert whatif.PRIOR_MIN == 0.1 and whatif.PMI_MAX == pytest.approx(math.log(2))
    assert s(0.99, 0.58).prior_explained  # the input does not double it
    assert s(0.3, 0.6).prior_explained  # the prior likes it more than the input does
    assert not s(0.99, 0.4).prior_explained  # the input more than doubles it
    assert not s(0.015, 0.01).prior_explained  # low PMI, but the prior does not explain it
    assert s(0.201, 0.1).prior_explained is False and s(0.199, 0.1).prior_explained is True  # ln 2 is the edge
    assert s(0.0, 0.5).prior_explained
    assert s(0.9, 0.45).pmi == pytest.approx(math.log(2)) and s(0.5, 0.0).pmi == math.inf
    assert s(0.9, 0.45).delta == pytest.approx(-0.45)


def test_silence_span_zeroes_exactly_the_span_and_checks_it():
    audio = np.ones(16000, np.float32)
    out = whatif.silence_span(audio, 0.25, 0.5, 16000)
    assert out[:4000].min() == 1 and not out[4000:8000].any() and out[8000:].min() == 1 and audio.min() == 1
    assert whatif.span_samples(16000, -1.0, 0.1, 16000) == (0, 1600)
    for t0, t1 in ((0.5, 0.5), (0.6, 0.2), (2.0, 3.0), (math.nan, 1.0)):
        with pytest.raises(ValueError):
            whatif.silence_span(audio, t0, t1, 16000)


def test_background_colour_blank_region_and_touched_boxes():
    img = Image.new("RGB", (60, 40), (250, 240, 230))
    ImageDraw.Draw(img).rectangle([0, 10, 59, 12], fill=(0, 0, 0))  # a line touching the border in a few pixels
    assert whatif.background_color(img) == (250, 240, 230)
    out = whatif.blank_region(img, (5, 8, 20, 6))
    a = np.asarray(out)
    assert (a[8:14, 5:25] == (250, 240, 230)).all() and (a[10, 30] == 0).all() and (np.asarray(img)[10, 10] == 0).all()
    assert (np.asarray(whatif.blank_image(img)) == (250, 240, 230)).all() and whatif.blank_image(img).size == img.size
    with pytest.raises(ValueError):
        whatif.blank_region(img, (5, 8, 0, 6))
    boxes = [(0, 0, 10, 10), (20, 0, 30, 10), (0, 20, 60, 30)]
    assert whatif.boxes_touched(boxes, (5, 5, 20, 3)) == [0, 1] and whatif.boxes_touched(boxes, (10, 10, 10, 10)) == []


def test_expand_columns_and_original_segments():
    att = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    out = whatif.expand_columns(att, [0, 2, 3], 5)
    assert out.shape == (1, 2, 5) and out[0, 1].tolist() == [3, 0, 4, 5, 0] and whatif.expand_columns(None, [], 2) is None
    ev = lambda step, seg, tid: StepEvent(step, tid, "t", 0.5, 0.5, [], [], 0.1, segment=seg)  # noqa: E731
    segs = original_segments([ev(0, 0, 5), ev(1, 0, 6), ev(2, 2, 7)], 4)
    assert segs == {0: OriginalSegment(0, (5, 6)), 1: OriginalSegment(2, ()), 2: OriginalSegment(2, (7,)),
                    3: OriginalSegment(3, ())}


def test_score_tokens_of_nothing_and_bad_kind(tiny_models):
    tiny = tiny_models["marian"]
    backend, engine, enc, _steps, _fin, ready = _setup(tiny, _options())
    assert whatif.score_tokens(engine, enc, tiny.prompt, []) == []
    with pytest.raises(ValueError, match="kind"):
        list(what_if_segments(engine, [0], lambda i: ready, lambda i: enc, {}, _options(), kind="other"))


# ------------------------------------------------------------------ the bundled models
SAMPLE = "assets/samples/speech_en.wav"
#: the word "door" in the bundled sample ("Open the door and turn on the lights. ..."): it
#: starts after the stop closure of "the" (the energy dip at 0.36-0.40 s, 10 ms RMS) and ends at
#: the pause before "and" (0.84-0.98 s, RMS < 0.005); measured once on the file
DOOR_SPAN = (0.50, 0.84)


@pytest.fixture(scope="module")
def tiny_en(whisper_tiny_en):
    return whisper_tiny_en  # loaded once per session


@pytest.mark.e2e
def test_tiny_en_silencing_a_word_takes_its_probability_away(tiny_en):
    """Silencing the span of "door" in the sample: " door" falls from ~1 to almost 0 and the
    what-if transcript lacks it; the words that are not its neighbours keep their
    probabilities (median change < 0.02, none more than 0.2)."""
    import soundfile as sf

    audio, sr = sf.read(SAMPLE, dtype="float32")
    assert sr == 16000
    options = DecodingOptions()
    # the session's model may hold the silenced clip's encoding from another test: start empty,
    # so that the count below sees the what-if's own encoder pass
    tiny_en._cache.clear()
    events = list(tiny_en.decode(audio, options))
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert "door" in events[-1].text
    before = tiny_en.encode_count
    out = list(tiny_en.what_if(audio, options, steps, span=DOOR_SPAN))
    done = out[-1]
    assert tiny_en.encode_count == before + 1 and done.segments == (0,)
    k = next(i for i, s in enumerate(done.shifts) if s.text == " door")
    door = done.shifts[k]
    assert door.p_input > 0.9 and door.p_other < 0.1 and door.depends
    others = [s for i, s in enumerate(done.shifts) if abs(i - k) > 1]
    deltas = np.abs([s.delta for s in others])
    assert np.median(deltas) < 0.02 and deltas.max() < 0.2, [(s.text, round(s.delta, 3)) for s in others]
    whatif_text = next(e for e in out if isinstance(e, WhatIfScores)).text
    assert "door" not in whatif_text and "turn on the lights" in whatif_text
    print(f"\n' door' p {door.p_input:.3f} -> {door.p_other:.3f}; others median |dp| {np.median(deltas):.4f}, "
          f"max {deltas.max():.3f}; what-if: {whatif_text!r}")
    # no input: silence of the same length; "Thank you" is the prior's favourite
    prior = list(tiny_en.no_input(audio, options, steps))[-1]
    assert len(prior.shifts) == len(steps)
    by_text = {s.text: s for s in prior.shifts}
    assert by_text[" door"].p_other < 0.2 and not by_text[" door"].prior_explained
    assert by_text[" you"].prior_explained  # after " Thank", the prior alone says " you"


@pytest.fixture(scope="module")
def bergamot(translation_en_pt):
    return translation_en_pt  # loaded once per session


@pytest.mark.e2e
def test_bergamot_dropping_a_source_word_removes_its_translation(bergamot):
    """en-pt "I bought three apples. The weather is nice today.": dropping "apples" re-translates
    the first sentence without "maçãs" (its token loses its probability), the second sentence
    is not touched; an empty source gives the prior."""
    text = "I bought three apples. The weather is nice today."
    options = DecodingOptions(max_new_tokens=40)
    events = list(bergamot.decode(text, options))
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert "maçãs" in events[-1].text
    start = text.index("apples")
    drop = bergamot.tokens_in(text, start, start + len("apples"))
    tokens = bergamot.source_tokens(text)
    assert [tokens[p] for p in drop] == ["▁apples"] or "".join(tokens[p] for p in drop).strip("▁") == "apples"
    before = bergamot.encode_count
    out = list(bergamot.what_if(text, options, steps, drop=drop))
    done = out[-1]
    assert bergamot.encode_count == before + 1 and done.segments == (0,)
    assert done.description == "drop 'apples'"
    scores = next(e for e in out if isinstance(e, WhatIfScores))
    assert "maçã" not in scores.text and scores.text, scores.text
    apple = [s for s in done.shifts if "ma" in s.text and s.segment == 0]
    assert apple and apple[0].depends and apple[0].p_other < 0.1, apple
    # the re-translation's attention keeps the original columns: the dropped one gets none
    step_ev = next(e for e in out if isinstance(e, StepEvent))
    n_first = len(bergamot.chunks(text)[0].ids)
    assert step_ev.cross_attention.shape[-1] == n_first and not step_ev.cross_attention[..., drop[0]].any()
    with pytest.raises(ValueError, match="nothing to drop"):
        list(bergamot.what_if(text, options, steps, drop=[tokens.index("</s>")]))
    prior = list(bergamot.no_input(text, options, steps))[-1]
    assert prior.segments == (0, 1) and len(prior.shifts) == len(steps)
    assert all(0 <= s.p_other <= 1 for s in prior.shifts)
    print(f"\ndrop 'apples': {events[-1].text!r} -> {scores.text!r}; "
          f"{apple[0].text!r} p {apple[0].p_input:.3f} -> {apple[0].p_other:.3f}")
