"""The Bergamot backend's fast paths (issue 22, translation speed) compute what the plain
float32 products compute: the full output projection on the file's int8 values, the one-hypothesis
decoder step and the fused cross-attention keys/values. The decoded ids against the native
engine are covered by tests/core/test_marian_tiny.py."""

import pytest
import torch
import torch.nn.functional as F

from core.backends.marian_net import _exact_int8_linear
from tests.core.test_marian_tiny import backend_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

needs_fbgemm = pytest.mark.skipif("fbgemm" not in torch.backends.quantized.supported_engines,
                                  reason="no fbgemm in this torch build: the float32 addmm path runs")


@needs_fbgemm
def test_the_full_projection_runs_on_the_files_int8_values_with_the_float32_result():
    model = backend_for("en-pt").model
    # Wemb is the file's intgemm8 matrix dequantised: its exact int8 values (as float16) are used,
    # and the 32 MB (256, V) float32 copy is not kept
    assert model._full_projection is not None and model.wemb_t is None
    y = torch.randn(16, 256, generator=torch.Generator().manual_seed(0)) * 3
    reference = F.linear(y.double(), model.p["Wemb"].double(), model.p["decoder_ff_logit_out_b"].double())
    logits = model.output_logits(y)
    assert logits.dtype == torch.float32 and logits.shape == (16, model.vocab_size)
    torch.testing.assert_close(logits.double(), reference, rtol=0, atol=1e-4)
    assert torch.equal(logits.argmax(-1), reference.argmax(-1))


def test_a_matrix_that_is_not_int8_values_keeps_the_float32_product():
    w = torch.randn(64, 32)
    assert _exact_int8_linear(w, torch.zeros(64)) is None
    assert _exact_int8_linear(torch.zeros(64, 32), torch.zeros(64)) is None


@needs_fbgemm
def test_an_int8_valued_matrix_gives_the_float32_product():
    q = torch.randint(-127, 128, (300, 256)).float()
    q[0, 0] = 127.0
    w = q / torch.tensor(127.0 / float(q.abs().max()))
    b = torch.randn(300)
    project = _exact_int8_linear(w, b)
    assert project is not None
    x = torch.randn(3, 256)
    exact = F.linear(x.double(), w.double(), b.double())
    # as close to the exact product as float32's own product is (sums of 256 terms of ~1000)
    tolerance = 4 * float((F.linear(x, w, b).double() - exact).abs().max()) + 1e-6 * float(exact.abs().max())
    assert float((project(x).double() - exact).abs().max()) <= tolerance


def test_one_hypothesis_step_equals_the_batched_step():
    """The one-hypothesis step (its attention as two bmm calls) and a batch of two equal
    hypotheses (the general path) give the same logits, attention and states."""
    backend = backend_for("pt-en", True)
    encoded = backend.encode(backend.source_ids("O livro está em cima da mesa."))
    one, two = backend.init_cache(encoded, 1), backend.init_cache(encoded, 2)
    feed = [1, 120, 45, 9]
    for t in feed:
        a = backend.step(torch.tensor([[t]]), one, output_attentions=True)
        b = backend.step(torch.tensor([[t], [t]]), two, output_attentions=True)
        rows = backend.shortlist_table.allowed_ids(backend.source_ids("O livro está em cima da mesa."))
        torch.testing.assert_close(b.logits[:, rows], a.logits[:, rows].expand(2, -1), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(b.cross_attention, a.cross_attention.expand(2, -1, -1, -1), rtol=1e-4, atol=1e-5)
        for s1, s2 in zip(a.cache.ssru_state, b.cache.ssru_state):
            torch.testing.assert_close(s2, s1.expand(2, -1), rtol=1e-4, atol=1e-5)
        one, two = a.cache, b.cache


def test_the_fused_cross_keys_values_equal_a_product_per_layer():
    model = backend_for("en-pt").model
    hidden = model.encode(torch.tensor([[37, 512, 9, 0]]))
    keys, values = model.cross_keys_values(hidden)
    for L, k, v in zip(model.dec_layers, keys, values):
        wk, bk = L.weights["k"]
        wv, bv = L.weights["v"]
        assert torch.equal(k, F.linear(hidden, wk, bk).view(1, -1, 8, 32).transpose(1, 2))
        assert torch.equal(v, F.linear(hidden, wv, bv).view(1, -1, 8, 32).transpose(1, 2))


@needs_fbgemm
def test_the_encoders_big_products_run_on_the_int8_values_with_float32_results():
    from core.backends.marian_net import EXACT_INT8_ENCODER

    model = backend_for("pt-en").model
    assert EXACT_INT8_ENCODER == ("qkv", "ffn1", "ffn2")
    g = torch.Generator().manual_seed(1)
    for L in model.enc_layers:
        for name in EXACT_INT8_ENCODER:
            w, b = L.weights[name]
            x = torch.randn(1, 7, w.shape[1], generator=g)
            exact = F.linear(x.double(), w.double(), b.double())
            assert float((getattr(L, name)(x).double() - exact).abs().max()) <= 1e-5 * float(exact.abs().max()) + 1e-5
    # the sentence's encoder states as the float32 products give them
    ids = torch.tensor([backend_for("pt-en").source_ids("O livro está em cima da mesa.")])
    hidden = model.encode(ids)
    assert hidden.shape == (1, ids.shape[1], 256) and torch.isfinite(hidden).all()
