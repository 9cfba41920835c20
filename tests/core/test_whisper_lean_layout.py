"""The lean Whisper decoder's weight layout (``core.backends.whisper_lean.fast_layout``): q, k, v
as column blocks of one fused (d_model, 3 d_model) matrix, fc1 stored transposed; same values,
no second copy, the model's own forward unchanged."""

from __future__ import annotations

import torch

from core.backends.whisper_lean import WhisperLeanDecoder, fast_layout
from tests.core.conftest import tiny_whisper


def _decoder_logits(tiny) -> torch.Tensor:
    with torch.inference_mode():
        out = tiny.model(**tiny.inputs, decoder_input_ids=torch.tensor([list(tiny.prompt.prompt_ids)]),
                         use_cache=False)
    return out.logits


def test_fast_layout_fuses_qkv_in_place_without_a_copy():
    tiny = tiny_whisper(seed=5)
    tiny.model.set_attn_implementation("eager")
    before = {n: p.detach().clone() for n, p in tiny.model.named_parameters()}
    logits_before = _decoder_logits(tiny)
    n_bytes = sum(p.numel() for p in tiny.model.parameters())

    lean = WhisperLeanDecoder(tiny.model)

    after = dict(tiny.model.named_parameters())
    assert before.keys() == after.keys()
    for name, value in before.items():  # same values, same shapes
        assert torch.equal(after[name], value), name
    d = tiny.model.config.d_model
    for i, layer in enumerate(tiny.model.model.decoder.layers):
        sa = layer.self_attn
        weight_t, bias = lean._qkv[i]
        assert weight_t.shape == (d, 3 * d) and weight_t.is_contiguous()
        for j, proj in enumerate((sa.q_proj, sa.k_proj, sa.v_proj)):  # views of the fused matrix
            assert proj.weight.data_ptr() == weight_t.data_ptr() + j * d * weight_t.element_size()
            assert torch.equal(weight_t[:, j * d:(j + 1) * d], proj.weight.t())
        assert torch.equal(bias, torch.cat([sa.q_proj.bias, torch.zeros(d), sa.v_proj.bias]))
        assert layer.fc1.weight.t().is_contiguous()  # stored (in, out)
    # the model's own forward reads the same values (its products may round in another order)
    torch.testing.assert_close(_decoder_logits(tiny), logits_before, rtol=1e-4, atol=1e-4)  # float rounding
    # no second copy: a second decoder keeps the fused tensors, parameter count unchanged
    again = WhisperLeanDecoder(tiny.model)
    assert all(a[0] is b[0] for a, b in zip(again._qkv, lean._qkv))
    assert sum(p.numel() for p in tiny.model.parameters()) == n_bytes
    assert fast_layout(tiny.model.model.decoder.layers[0])[0] is lean._qkv[0][0]


def test_fused_step_equals_the_three_projections():
    """The lean step with the fused product gives the logits of the step with q, k, v apart."""
    tiny = tiny_whisper(seed=6)
    lean = WhisperLeanDecoder(tiny.model)
    enc = torch.randn(1, tiny.model.config.max_source_positions, tiny.model.config.d_model,
                      generator=torch.Generator().manual_seed(3))
    outs = []
    for fused in (True, False):
        lean._qkv = [fast_layout(l) if fused else None for l in lean.layers]
        cache = lean.init_cache(enc, 2)
        with torch.inference_mode():
            lean.step(torch.tensor([[1, 2, 3], [1, 4, 3]]), cache, True)
            outs.append(lean.step(torch.tensor([[7], [9]]), cache, True))
    torch.testing.assert_close(outs[0].logits, outs[1].logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outs[0].cross_attention, outs[1].cross_attention, rtol=1e-5, atol=1e-6)


def test_rows_over_one_input_equal_each_row_alone():
    """Beams over one input share one cross-attention K/V (every row's queries in one product):
    each row's logits and cross-attention equal that row decoded alone."""
    tiny = tiny_whisper(seed=7, decoder_layers=3)
    lean = WhisperLeanDecoder(tiny.model)
    enc = torch.randn(1, tiny.model.config.max_source_positions, tiny.model.config.d_model,
                      generator=torch.Generator().manual_seed(4))
    rows = [[1, 2, 3, 7], [1, 4, 3, 9], [1, 5, 6, 2]]
    with torch.inference_mode():
        cache = lean.init_cache(enc, 3)
        lean.step(torch.tensor([r[:3] for r in rows]), cache, True)
        together = lean.step(torch.tensor([r[3:] for r in rows]), cache, True)
        for j, r in enumerate(rows):
            alone_cache = lean.init_cache(enc, 1)
            lean.step(torch.tensor([r[:3]]), alone_cache, True)
            alone = lean.step(torch.tensor([r[3:]]), alone_cache, True)
            torch.testing.assert_close(together.logits[j], alone.logits[0], rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(together.cross_attention[j], alone.cross_attention[0], rtol=1e-4, atol=1e-5)
