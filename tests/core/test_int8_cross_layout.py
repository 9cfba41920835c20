"""int8's cross-attention layout (``WhisperLeanDecoder._cross_attend``): the values are kept
transposed, (heads, head_dim, src) in memory, and a step computes ``(K q^T)^T`` and
``(V^T w^T)^T``; the numbers are float32's up to summation order, float32 mode keeps its
layout and its exact numbers, and two threads give the one-thread step's numbers."""

from __future__ import annotations

import pytest
import torch

from core.backends.whisper_lean import WhisperLeanDecoder
from tests.core.conftest import tiny_whisper

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _pair(seed: int = 7):
    """(float32 lean decoder, int8-mode lean decoder) over the same random tiny Whisper, and an
    encoder output (1, src, d_model)."""
    tiny = tiny_whisper(seed=seed)
    cfg = tiny.model.config
    enc = torch.randn(1, cfg.max_source_positions, cfg.d_model, generator=torch.Generator().manual_seed(4))
    return WhisperLeanDecoder(tiny.model), WhisperLeanDecoder(tiny.model, int8=True), enc, tiny


def _steps(lean, enc, prompt, batch: int, n: int = 4, threads: int | None = None):
    """The prompt, then ``n`` greedy steps of ``batch`` rows (on ``threads`` torch threads if
    given; the prompt on the current count): [(logits, cross-attention)]."""
    cache = lean.init_cache(enc, batch)
    ids = torch.tensor([list(prompt)] * batch)
    outs = []
    before = torch.get_num_threads()
    with torch.inference_mode():
        out = lean.step(ids, cache, True)
        outs.append((out.logits, out.cross_attention))
        torch.set_num_threads(threads or before)
        try:
            for _ in range(n):
                nxt = out.logits.argmax(-1, keepdim=True)
                out = lean.step(nxt, out.cache, True)
                outs.append((out.logits, out.cross_attention))
        finally:
            torch.set_num_threads(before)
    return outs


def test_int8_keeps_the_cross_values_transposed_and_float32_does_not():
    f32, i8, enc, _ = _pair()
    with torch.inference_mode():
        (k32, v32), (k8, v8) = f32.cross_kv(enc), i8.cross_kv(enc)
    for a, b, c, d in zip(k32, v32, k8, v8):
        assert a.is_contiguous() and b.is_contiguous() and c.is_contiguous()
        assert d.shape == b.shape and d.stride(-2) == 1  # stored (1, heads, head_dim, src)
        assert d.transpose(-1, -2).is_contiguous()
        assert torch.equal(c, a) and torch.equal(d, b)  # same values


@pytest.mark.parametrize("batch", [1, 3])
def test_the_transposed_cross_attention_gives_float32s_numbers(batch):
    f32, i8, enc, tiny = _pair()
    # the float layers are shared: only the head (int8) and the cross layout differ, so compare
    # the cross-attention rows and the int8 decoder's logits with its own float-layout twin
    twin = WhisperLeanDecoder(tiny.model, int8=True)
    twin._cross_t = False
    got, want = _steps(i8, enc, tiny.prompt.prompt_ids, batch), _steps(twin, enc, tiny.prompt.prompt_ids, batch)
    for (lg, ca), (lw, cw) in zip(got, want):
        torch.testing.assert_close(ca, cw, rtol=1e-4, atol=1e-5)  # init_std 1: large scores
        torch.testing.assert_close(lg, lw, rtol=1e-4, atol=1e-4)
    # float32's own step keeps its products: equal to a decoder made before any int8 one
    again = WhisperLeanDecoder(tiny_whisper(seed=7).model)
    for (lg, ca), (lw, cw) in zip(_steps(f32, enc, tiny.prompt.prompt_ids, batch),
                                  _steps(again, enc, tiny.prompt.prompt_ids, batch)):
        assert torch.equal(lg, lw) and torch.equal(ca, cw)


def test_two_threads_give_the_one_thread_numbers_in_int8_layout():
    _, i8, enc, tiny = _pair()
    # the prompt (3 rows) on one thread in both: over several rows MKL may round a split product
    # differently (step_threads' docstring); one row must give the same bits
    one = _steps(i8, enc, tiny.prompt.prompt_ids, 1)
    two = _steps(i8, enc, tiny.prompt.prompt_ids, 1, threads=2)
    assert torch.equal(two[0][0], one[0][0])
    for (lg, ca), (lw, cw) in zip(two[1:], one[1:]):  # the one-row steps
        assert torch.equal(lg, lw) and torch.equal(ca, cw)


def test_int8_without_capture_runs_the_same_products_as_with_it():
    """Capture off takes the transposed products too (not SDPA over the transposed values,
    slower there): the logits are those of the step with capture, bit for bit."""
    _, i8, enc, tiny = _pair()
    ids = torch.tensor([list(tiny.prompt.prompt_ids)])
    with torch.inference_mode():
        on = i8.step(ids, i8.init_cache(enc, 1), True)
        off = i8.step(ids, i8.init_cache(enc, 1), False)
        assert off.cross_attention is None
        assert torch.equal(on.logits, off.logits)
        nxt = on.logits.argmax(-1, keepdim=True)
        assert torch.equal(i8.step(nxt, on.cache, True).logits, i8.step(nxt, off.cache, False).logits)
