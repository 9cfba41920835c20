"""OCR backends on tiny random models (fixed seeds, no downloads):

* ``OCRAttnBackend`` (english_g2 encoder + attention decoder) driven by the engine:
  greedy ids equal the model's own batch greedy loop; beam scores equal teacher-forced
  log-probabilities (so the KV-cache reordering is right); attention shapes; encoder
  output reuse; column geometry.
* a transformers ``VisionEncoderDecoderModel`` (ViT + TrOCR decoder) saved with an
  image processor and a tokenizer to a folder and loaded by name like a user's TrOCR
  checkpoint: our greedy and beam ids equal ``model.generate()``; source_len = encoder
  positions (CLS + patches); attention columns map to x ranges over the patch grid.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from core.backends.ocr_attn import INPUT_HEIGHT, OCRAttnConfig, OCRAttnModel, OCRVocab, num_columns
from core.backends.ocr_backend import (
    MIN_INPUT_WIDTH,
    OCRAttnBackend,
    OCRLoadError,
    line_pixel_values,
    load_vision_seq2seq,
)
from core.engine import Engine
from core.events import BeamEvent, Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.ocr import OCRModel, TextLine
from core.tasks.ocr_readers import BundledReader
from tests.core.conftest import add_eos_bias, word_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _line_image(width: int = 240, height: int = 40, seed: int = 0) -> Image.Image:
    """A gray line crop with dark blobs (random models need no real text)."""
    rng = np.random.default_rng(seed)
    img = Image.new("L", (width, height), 230)
    d = ImageDraw.Draw(img)
    for x in range(6, width - 12, 14):
        h = int(rng.integers(10, height - 8))
        d.rectangle([x, height - 4 - h, x + 6, height - 4], fill=int(rng.integers(0, 80)))
    return img.convert("RGB")


@pytest.fixture(scope="module")
def tiny_attn() -> OCRAttnBackend:
    torch.manual_seed(0)
    cfg = OCRAttnConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)
    model = OCRAttnModel(cfg)
    for p in model.parameters():  # larger weights: a random decoder then varies its output
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.3)
    return OCRAttnBackend(model.eval(), OCRVocab(cfg.characters), "tiny-attn")


def test_line_pixel_values_is_easyocr_preprocessing():
    img = _line_image(300, 50)
    pv, width = line_pixel_values(img)
    assert width == math.ceil(INPUT_HEIGHT * 300 / 50)
    assert pv.shape == (1, 1, INPUT_HEIGHT, width) and pv.dtype == torch.float32
    ref = np.asarray(img.convert("L").resize((width, 64), Image.BICUBIC), dtype=np.float32) / 127.5 - 1
    np.testing.assert_allclose(pv[0, 0].numpy(), ref, atol=1e-6)
    # a narrow crop is padded on the right by repeating its last column (NormalizePAD)
    pv, width = line_pixel_values(_line_image(12, 60))
    assert width < MIN_INPUT_WIDTH and pv.shape[-1] == MIN_INPUT_WIDTH
    assert torch.equal(pv[..., width:], pv[..., width - 1 : width].expand(-1, -1, -1, MIN_INPUT_WIDTH - width))


def test_encode_source_len_is_columns(tiny_attn):
    pv, width = line_pixel_values(_line_image())
    enc = tiny_attn.encode(pv)
    assert enc.source_len == num_columns(width) == enc.hidden_states.shape[1]
    assert enc.extras["columns"].shape == (1, enc.source_len, 256)
    with pytest.raises(ValueError, match="height"):
        tiny_attn.encode(torch.zeros(1, 1, 32, 100))


def test_greedy_matches_model_greedy_loop(tiny_attn):
    pv, _ = line_pixel_values(_line_image(seed=1))
    enc = tiny_attn.encode(pv)
    options = DecodingOptions(max_new_tokens=20)
    events = list(Engine(tiny_attn).run(enc, tiny_attn.decoder_prompt(enc), options))
    fin = events[-1]
    assert isinstance(fin, Finished)
    expected = tiny_attn.model.greedy_decode(pv, max_len=20)[0]
    assert len(expected) > 5, "random model stopped at once; the comparison would prove little"
    assert fin.token_ids == expected
    steps = [e for e in events if isinstance(e, StepEvent)]
    for e in steps:
        assert e.cross_attention.shape == (2, 4, enc.source_len)
        np.testing.assert_allclose(e.cross_attention.sum(-1), 1.0, atol=1e-4)
    assert fin.text == tiny_attn.vocab.decode(expected)


def _teacher_forced_logprob(backend: OCRAttnBackend, memory, ids: list[int]) -> float:
    """Sum of log p(ids) with the whole sequence fed at once (no incremental cache)."""
    inp = torch.tensor([[OCRVocab.BOS, *ids]])
    with torch.inference_mode():
        logits = backend.model.decode_step(inp, backend.model.init_cache(memory))[0][0].float()
    # transformers' beam convention: log_softmax of the raw logits, then the processors
    # (suppressed tokens -> -inf) without renormalising
    logp = logits.log_softmax(-1)
    return float(sum(logp[i, t] for i, t in enumerate(ids)))


def test_beam_scores_equal_teacher_forced_logprobs(tiny_attn):
    pv, _ = line_pixel_values(_line_image(seed=2))
    enc = tiny_attn.encode(pv)
    options = DecodingOptions(strategy="beam", num_beams=3, max_new_tokens=12)
    events = list(Engine(tiny_attn).run(enc, tiny_attn.decoder_prompt(enc), options))
    beams = [e for e in events if isinstance(e, BeamEvent)]
    assert beams and all(len(b.beams) == 3 for b in beams)
    checked = 0
    for b in beams:
        for hyp in b.beams + b.finished:
            ids = list(hyp.token_ids)
            if hyp.finished and ids[-1:] != [OCRVocab.EOS] and len(ids) < options.max_new_tokens:
                ids.append(OCRVocab.EOS)  # ended by EOS (not by the length limit): scored with it
            assert hyp.score == pytest.approx(_teacher_forced_logprob(tiny_attn, enc.hidden_states, ids), abs=1e-3)
            checked += 1
    assert checked >= 3 * len(beams)
    # beam width 1 is greedy
    one = list(Engine(tiny_attn).run(enc, tiny_attn.decoder_prompt(enc), options.with_(num_beams=1)))[-1]
    greedy = list(Engine(tiny_attn).run(enc, tiny_attn.decoder_prompt(enc), options.with_(strategy="greedy")))[-1]
    assert one.token_ids == greedy.token_ids


def test_task_decode_reuses_encoder_and_maps_columns(tiny_attn):
    img = Image.new("RGB", (400, 200), "white")
    img.paste(_line_image(240, 40, seed=3), (50, 30))
    img.paste(_line_image(180, 30, seed=4), (60, 120))
    model = OCRModel(BundledReader(tiny_attn), detector=None, load_s=0.0)
    lines = [model._line(0, (50, 30, 290, 70)), model._line(1, (60, 120, 240, 150))]
    events = list(model.decode(img, DecodingOptions(max_new_tokens=10), lines=lines))
    assert model.encode_count == 2
    segs = [e for e in events if isinstance(e, SegmentEvent)]
    assert [(s.segment, s.label, s.source_len) for s in segs] == [
        (0, "line 1", lines[0].n_columns), (1, "line 2", lines[1].n_columns)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.step for e in steps] == list(range(len(steps)))  # one stream across lines
    for e in steps:
        assert e.cross_attention.shape[-1] == lines[e.segment].n_columns
    fin = events[-1]
    assert fin.text.count("\n") == 1
    # the line's encoder really has n_columns columns
    pv, _ = line_pixel_values(img.crop(lines[0].box))
    assert tiny_attn.encode(pv).source_len == lines[0].n_columns
    # re-decode with other options: the encoder does not run again
    for opts in (DecodingOptions(strategy="beam", num_beams=2, max_new_tokens=10),
                 DecodingOptions(strategy="sample", temperature=0.7, max_new_tokens=10)):
        out = list(model.decode(img, opts, lines=lines))
        assert out[-1].stats.encoder_cached
    assert model.encode_count == 2
    # columns tile the box left to right
    for line in lines:
        edges = line.column_edges()
        x0, _, x1, _ = line.box
        assert np.all(np.diff(edges[:, 0]) > 0) and np.all(edges[:, 1] > edges[:, 0])
        assert x0 <= edges[0, 0] < x0 + 5 and x1 - 8 < edges[-1, 1] <= x1
        np.testing.assert_allclose(edges[1:, 0], edges[:-1, 1])


# ----------------------------------------------------------------------------- TrOCR


IMG_H, IMG_W, PATCH = 32, 64, 8


@pytest.fixture(scope="module")
def tiny_trocr_dir(tmp_path_factory):
    from transformers import (
        TrOCRConfig,
        ViTConfig,
        ViTImageProcessor,
        VisionEncoderDecoderConfig,
        VisionEncoderDecoderModel,
    )

    torch.manual_seed(0)
    V = 64
    enc = ViTConfig(image_size=(IMG_H, IMG_W), patch_size=PATCH, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64, num_channels=3)
    dec = TrOCRConfig(vocab_size=V, d_model=32, decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=64,
                      max_position_embeddings=64, init_std=0.5, bos_token_id=0, pad_token_id=1, eos_token_id=2,
                      decoder_start_token_id=2)
    cfg = VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc, dec)
    cfg.decoder_start_token_id, cfg.pad_token_id, cfg.eos_token_id = 2, 1, 2
    model = VisionEncoderDecoderModel(cfg).eval()
    tok = word_tokenizer(V, {"<s>": 0, "<pad>": 1, "</s>": 2})
    tok.bos_token, tok.pad_token, tok.eos_token = "<s>", "<pad>", "</s>"
    proc = ViTImageProcessor(size={"height": IMG_H, "width": IMG_W}, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    out = tmp_path_factory.mktemp("tiny_trocr")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    proc.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def trocr_model(tiny_trocr_dir, monkeypatch_module):
    import core.backends.craft as craft

    class NoDetector:  # the TrOCR path is under test here, not CRAFT
        def __init__(self):
            self.last_detect_s = 0.0

    monkeypatch_module.setattr(craft, "CraftDetector", NoDetector)
    return OCRModel.load(str(tiny_trocr_dir))


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _generate(model: OCRModel, pixel_values, options: DecodingOptions) -> list[int]:
    hub = model._hub
    out = hub["model"].generate(
        pixel_values=pixel_values, max_new_tokens=options.max_new_tokens, do_sample=False,
        num_beams=options.num_beams if options.strategy == "beam" else 1, length_penalty=options.length_penalty,
        early_stopping=False, decoder_start_token_id=hub["decoder_start_token_id"],
        eos_token_id=hub["eos_token_id"], pad_token_id=hub["pad_token_id"],
    )[0].tolist()[1:]
    eos = hub["eos_token_id"]
    return out[: out.index(eos)] if eos in out else out


@pytest.mark.parametrize("options", [DecodingOptions(max_new_tokens=12),
                                     DecodingOptions(strategy="beam", num_beams=3, max_new_tokens=12)],
                         ids=["greedy", "beam3"])
def test_trocr_matches_generate(trocr_model, options):
    img = Image.new("RGB", (300, 120), "white")
    img.paste(_line_image(200, 40, seed=5), (40, 50))
    line = trocr_model._line(0, (40, 50, 240, 90))
    events = list(trocr_model.decode(img, options, lines=[line]))
    fin = events[-1]
    expected = _generate(trocr_model, trocr_model.line_inputs(img, line), options)
    assert len(expected) > 5, "random model stopped at once; the comparison would prove little"
    assert fin.token_ids == expected
    n_pos = 1 + (IMG_H // PATCH) * (IMG_W // PATCH)  # CLS + patches
    assert line.n_columns == n_pos and line.prefix_columns == 1 and line.grid_columns == IMG_W // PATCH
    seg = next(e for e in events if isinstance(e, SegmentEvent))
    assert seg.source_len == n_pos
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert steps and all(e.cross_attention.shape == (2, 4, n_pos) for e in steps)


@pytest.fixture(scope="module")
def trocr_eos_model(tiny_trocr_dir, trocr_model):
    """The tiny TrOCR with its EOS logit raised: hypotheses end after 1, 4 or 12 tokens
    (``trocr_model`` has already replaced the CRAFT detector)."""
    model = OCRModel.load(str(tiny_trocr_dir))
    add_eos_bias(model.backend.model, 2, 8.0)
    return model


@pytest.mark.parametrize("num_beams", [2, 3, 4])
def test_trocr_beam_to_eos_matches_generate(trocr_eos_model, num_beams):
    img = Image.new("RGB", (300, 120), "white")
    img.paste(_line_image(200, 40, seed=5), (40, 50))
    line = trocr_eos_model._line(0, (40, 50, 240, 90))
    pixel_values = trocr_eos_model.line_inputs(img, line)
    outputs = set()
    for length_penalty in (0.0, 1.0, 2.0):
        options = DecodingOptions(strategy="beam", num_beams=num_beams, length_penalty=length_penalty,
                                  max_new_tokens=12)
        fin = list(trocr_eos_model.decode(img, options, lines=[line]))[-1]
        expected = _generate(trocr_eos_model, pixel_values, options)
        assert fin.token_ids == expected, length_penalty
        outputs.add(tuple(expected))
    assert len(outputs) > 1, "length penalty 0/1/2 give the same output: the case cannot catch a penalty bug"
    assert min(len(o) for o in outputs) < 12  # some ended at EOS


def test_trocr_columns_map_to_patch_grid(trocr_model):
    line = trocr_model._line(0, (100, 10, 420, 50))  # 320 px wide, processor width 64 -> 5 px per input px
    assert line.column_x(0) == (100.0, 420.0)  # CLS: the whole line
    grid = IMG_W // PATCH
    for k in range(grid):
        x0, x1 = line.column_x(1 + k)
        assert (x0, x1) == pytest.approx((100 + 40 * k, 100 + 40 * (k + 1)))
        assert line.column_x(1 + grid + k) == (x0, x1)  # the next patch row: same x range
    with pytest.raises(IndexError):
        line.column_x(line.n_columns)


def test_trocr_load_errors(tmp_path):
    with pytest.raises(OCRLoadError, match="not a complete TrOCR model directory"):
        load_vision_seq2seq(str(tmp_path))
    with pytest.raises(OCRLoadError, match="unknown OCR model"):
        load_vision_seq2seq("nonsense")


# ----------------------------------------------------------------------------- reading order


def test_reading_order_groups_words_into_lines():
    from core.backends.craft import DetectedBox as B, reading_order

    # three paragraph lines, words as separate boxes (shuffled), neighbouring lines
    # overlapping by a few pixels as CRAFT's margins make them
    words = [B(30, 100, 120, 140), B(130, 102, 260, 141), B(30, 52, 200, 92), B(210, 50, 330, 90),
             B(30, 146, 300, 186), B(20, 0, 90, 40)]
    got = reading_order(words)
    assert got == [B(20, 0, 90, 40), B(30, 50, 330, 92), B(30, 100, 260, 141), B(30, 146, 300, 186)]
    # menu items far apart stay separate lines, left to right
    menu = [B(300, 5, 340, 25), B(14, 5, 50, 25), B(94, 5, 130, 25)]
    assert reading_order(menu) == [B(14, 5, 50, 25), B(94, 5, 130, 25), B(300, 5, 340, 25)]


def test_reading_order_reads_a_sidebar_before_the_body_beside_it():
    from core.backends.craft import DetectedBox as B, reading_order

    menu = [B(14 + 80 * i, 7, 50 + 80 * i, 25) for i in range(7)]  # spans the sidebar and the body
    side = [B(20, 70 + 40 * i, 110, 90 + 40 * i) for i in range(4)]
    body = [B(260, 80 + 50 * i, 640, 104 + 50 * i) for i in range(3)]
    got = reading_order(side[::-1] + body + menu[::-1])
    assert got == menu + side + body
