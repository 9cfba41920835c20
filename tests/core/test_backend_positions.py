"""Backends for speculative decoding (issue 21): several tokens fed in one ``step`` on a
non-empty cache give the same logits as one step each (``all_positions=True`` fills
``StepOutput.position_logits``) and leave the same cache; ``truncate_cache`` works
repeatedly mid-run; ``exit_layer`` equals the logit lens of that layer; ``head_ids``
restricts the output head.

Backends: the transformers path (tiny random Whisper on the lean and the generic path,
Marian, T5), the bundled whisper tiny.en (session fixture), Bergamot en-pt and the OCR
attention reader (tiny random).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ATOL = 1e-4
SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


class Case:
    """A backend, an encoder output, its decoder prompt and a probe token."""

    def __init__(self, backend, encoded, prompt: list[int]):
        self.backend, self.encoded, self.prompt = backend, encoded, prompt


def _close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal up to float32 summation order: ``ATOL`` relative to the logits' scale (the
    tiny T5's logits reach ~200: its large init)."""
    tol = ATOL * max(1.0, float(expected.abs().max()))
    torch.testing.assert_close(actual, expected, rtol=ATOL, atol=tol)


def _t(ids) -> torch.Tensor:
    return torch.tensor([list(ids)], dtype=torch.long)


def _greedy(case: Case, n: int) -> list[int]:
    """``n`` greedy ids after the prompt, one step each (the reference path)."""
    b = case.backend
    out = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False)
    ids = []
    for _ in range(n):
        tok = int(out.logits[0].argmax())
        ids.append(tok)
        out = b.step(_t([tok]), out.cache, False)
    return ids


def _single_steps(case: Case, tokens: list[int], **kw):
    """Logits after each of ``tokens`` fed one step at a time after the prompt, (k, vocab),
    and the cache afterwards."""
    b = case.backend
    out = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False, **kw)
    rows = []
    for tok in tokens:
        out = b.step(_t([tok]), out.cache, False, **kw)
        rows.append(out.logits[0])
    return torch.stack(rows), out.cache


def _check(case: Case, k: int = 4) -> None:
    b = case.backend
    tokens = _greedy(case, k + 3)
    feed, after = tokens[:k], tokens[k:]
    ref_rows, ref_cache = _single_steps(case, feed)
    # the prompt, then k tokens in one call
    out = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False)
    multi = b.step(_t(feed), out.cache, False, all_positions=True)
    assert multi.position_logits.dtype == torch.float32
    assert multi.position_logits.shape == (1, k, b.vocab_size)
    assert torch.equal(multi.position_logits[0, -1], multi.logits[0])  # the last row is logits
    _close(multi.position_logits[0], ref_rows)
    # the same cache afterwards: the next steps give the same logits
    cache_a, cache_b = ref_cache, multi.cache
    for tok in after:
        a = b.step(_t([tok]), cache_a, False)
        m = b.step(_t([tok]), cache_b, False)
        _close(m.logits, a.logits)
        cache_a, cache_b = a.cache, m.cache
    # without all_positions: no position_logits, same last logits
    plain = b.step(_t(feed), b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False).cache, False)
    assert plain.position_logits is None
    _close(plain.logits[0], ref_rows[-1])


def _check_attention(case: Case, k: int = 3) -> None:
    """With ``output_attentions``, ``position_cross_attention`` holds every fed position's
    cross-attention, equal to one step each (the last row is ``cross_attention``)."""
    b = case.backend
    feed = _greedy(case, k)
    out = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False)
    rows = []
    for tok in feed:
        out = b.step(_t([tok]), out.cache, True)
        rows.append(out.cross_attention[0])
    out = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False)
    multi = b.step(_t(feed), out.cache, True, all_positions=True)
    every = multi.position_cross_attention
    assert every.dtype == torch.float32 and every.shape == (1, k) + tuple(rows[0].shape)
    assert torch.equal(every[0, -1], multi.cross_attention[0])
    torch.testing.assert_close(every[0], torch.stack(rows), rtol=1e-4, atol=1e-5)


def _check_truncate(case: Case) -> None:
    """Cut back twice mid-run, re-feed other tokens several at a time: equal to the uncut
    run that took those tokens one step at a time."""
    b = case.backend
    tokens = _greedy(case, 6)
    n = len(_prompt_positions(case))
    out = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False)
    out = b.step(_t(tokens[:5]), out.cache, False, all_positions=True)
    # reject after 2: cut back to prompt + 2, feed 3 other tokens
    other = [tokens[1], tokens[0], tokens[2]]
    cache = b.truncate_cache(out.cache, n + 2)
    out = b.step(_t(other), cache, False, all_positions=True)
    # reject again after 1 of those
    cache = b.truncate_cache(out.cache, n + 3)
    again = [tokens[3], tokens[4]]
    out = b.step(_t(again), cache, False, all_positions=True)
    path = tokens[:2] + other[:1] + again
    ref_rows, _ = _single_steps(case, path)
    _close(out.position_logits[0], ref_rows[-2:])


def _prompt_positions(case: Case) -> list[int]:
    """The decoder positions the prompt fills (Bergamot's virtual start is one position)."""
    return case.prompt


# ------------------------------------------------------------------ cases

def _hf_case(tiny, lean: bool) -> Case:
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind, lean=lean)
    return Case(backend, backend.encode(tiny.inputs), list(tiny.prompt.prompt_ids))


HF_KINDS = [("whisper", True), ("whisper", False), ("marian", False), ("t5", False)]


@pytest.mark.parametrize("kind,lean", HF_KINDS)
def test_hf_several_tokens_equal_single_steps(tiny_models, kind, lean):
    _check(_hf_case(tiny_models[kind], lean))


@pytest.mark.parametrize("kind,lean", HF_KINDS)
def test_hf_cross_attention_of_every_position(tiny_models, kind, lean):
    _check_attention(_hf_case(tiny_models[kind], lean))


@pytest.mark.parametrize("kind,lean", HF_KINDS)
def test_hf_truncate_then_refeed_equals_uncut_run(tiny_models, kind, lean):
    _check_truncate(_hf_case(tiny_models[kind], lean))


@pytest.fixture(scope="module")
def tiny_en_case(whisper_tiny_en) -> Case:
    import soundfile as sf

    audio, sr = sf.read(SAMPLE, dtype="float32")
    assert sr == 16_000
    sm = whisper_tiny_en
    encoded = sm._encode(np.asarray(audio[: 30 * sr]))[0]
    return Case(sm.backend, encoded, list(sm.prompt("en", "transcribe").prompt_ids))


def test_bundled_whisper_several_tokens_equal_single_steps(tiny_en_case):
    _check(tiny_en_case, k=5)


def test_bundled_whisper_truncate_then_refeed(tiny_en_case):
    _check_truncate(tiny_en_case)
    _check_attention(tiny_en_case)


@pytest.fixture(scope="module")
def bergamot_case() -> Case:
    from core.backends.marian_tiny import START_ID, load_bergamot

    backend = load_bergamot("en-pt")
    encoded = backend.encode(backend.source_ids("The cat sat on the mat, and 42 people watched it."))
    return Case(backend, encoded, [START_ID])


def test_bergamot_several_tokens_equal_single_steps(bergamot_case):
    _check(bergamot_case)


def test_bergamot_truncate_then_refeed(bergamot_case):
    _check_truncate(bergamot_case)
    _check_attention(bergamot_case)


@pytest.fixture(scope="module")
def ocr_case() -> Case:
    from core.backends.ocr_attn import OCRAttnConfig, OCRAttnModel, OCRVocab
    from core.backends.ocr_backend import OCRAttnBackend

    torch.manual_seed(0)
    cfg = OCRAttnConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)
    model = OCRAttnModel(cfg)
    for p in model.parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.3)
    backend = OCRAttnBackend(model.eval(), OCRVocab(cfg.characters), "tiny-attn")
    pixels = torch.rand(1, 1, 64, 160, generator=torch.Generator().manual_seed(3)) * 2 - 1
    encoded = backend.encode({"pixel_values": pixels})
    return Case(backend, encoded, list(backend.decoder_prompt(encoded).prompt_ids))


def test_ocr_several_tokens_equal_single_steps(ocr_case):
    _check(ocr_case)


def test_ocr_truncate_then_refeed(ocr_case):
    _check_truncate(ocr_case)
    _check_attention(ocr_case)


# ------------------------------------------------------------------ early exit, shortlist head

def _check_exit(case: Case, exit_layer: int, n: int = 4) -> None:
    """Steps with ``exit_layer`` on their own cache equal the logit lens row of that layer
    of full steps along the same path (one token at a time and several at once)."""
    b = case.backend
    path = _greedy(case, n)
    full = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False, capture_lens=True)
    early = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False, exit_layer=exit_layer)
    _close(early.logits, full.lens_logits[:, exit_layer - 1])
    rows = []
    for tok in path:
        full = b.step(_t([tok]), full.cache, False, capture_lens=True)
        early = b.step(_t([tok]), early.cache, False, exit_layer=exit_layer)
        _close(early.logits, full.lens_logits[:, exit_layer - 1])
        rows.append(early.logits[0])
    # several tokens at once on an early-exit cache, after a cut back
    early = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False, exit_layer=exit_layer)
    early = b.step(_t(path[:2]), early.cache, False, exit_layer=exit_layer)
    cache = b.truncate_cache(early.cache, len(case.prompt) + 1)
    early = b.step(_t(path[1:]), cache, False, exit_layer=exit_layer, all_positions=True)
    _close(early.position_logits[0], torch.stack(rows[1:]))


def _check_head_ids(case: Case) -> None:
    b = case.backend
    ids = torch.tensor(sorted({0, 3, 5, b.vocab_size - 1, *_greedy(case, 3)}), dtype=torch.long)
    cache = b.init_cache(case.encoded, 1)
    full = b.step(_t(case.prompt), cache, False, all_positions=True)
    short = b.step(_t(case.prompt), b.init_cache(case.encoded, 1), False, all_positions=True, head_ids=ids)
    assert short.logits.shape == full.logits.shape
    _close(short.position_logits[..., ids], full.position_logits[..., ids])
    off = torch.ones(b.vocab_size, dtype=torch.bool)
    off[ids] = False
    assert bool(torch.isinf(short.position_logits[..., off]).all())


@pytest.mark.parametrize("kind,lean", [("whisper", True), ("whisper", False), ("marian", False)])
@pytest.mark.parametrize("exit_layer", [1, 2])
def test_hf_exit_layer_equals_the_lens_of_that_layer(tiny_models, kind, lean, exit_layer):
    _check_exit(_hf_case(tiny_models[kind], lean), exit_layer)


def test_hf_exit_layer_refuses_what_it_cannot_cut(tiny_models):
    case = _hf_case(tiny_models["whisper"], True)
    cache = case.backend.init_cache(case.encoded, 1)
    with pytest.raises(ValueError, match="exit_layer must be in"):
        case.backend.step(_t(case.prompt), cache, False, exit_layer=3)
    t5 = _hf_case(tiny_models["t5"], False)
    with pytest.raises(ValueError, match="early exit is not available"):
        t5.backend.step(_t(t5.prompt), t5.backend.init_cache(t5.encoded, 1), False, exit_layer=1)


@pytest.mark.parametrize("kind,lean", HF_KINDS)
def test_hf_head_ids(tiny_models, kind, lean):
    _check_head_ids(_hf_case(tiny_models[kind], lean))


def test_bundled_whisper_exit_layer_and_head(tiny_en_case):
    _check_exit(tiny_en_case, 2)
    _check_head_ids(tiny_en_case)


def test_bergamot_exit_layer_and_head(bergamot_case):
    _check_exit(bergamot_case, 1)
    _check_head_ids(bergamot_case)


def test_ocr_exit_layer_and_head(ocr_case):
    _check_exit(ocr_case, 1)
    _check_head_ids(ocr_case)
