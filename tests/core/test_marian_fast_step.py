"""The float32 decoder step's direct-kernel path (``_DecoderLayer.fast``, issue 22: per-step
overhead) gives the same bits as the layer's callables (``_TransposedLinear``, the exact-int8
closure, int8 mode's Int8Linear): every state, attention row and output of a greedy run, both
directions, float32 and int8."""

import pytest
import torch

from tests.core.test_marian_tiny import EN, PT, backend_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def _greedy_states(model, source_ids, rows, projection, steps=12):
    """Every tensor a bare greedy run makes (y, attention, SSRU states per step)."""
    enc = model.encode(source_ids)
    keys, values = model.cross_keys_values(enc)
    state = [torch.zeros(1, 256) for _ in model.dec_layers]
    x = model.positions(0, 1)
    out = [enc]
    for pos in range(1, steps + 1):
        y, state, attn = model.decode_position(x, state, keys, values, None)
        out += [y, attn, *state]
        token = int(rows[int(torch.addmm(projection[1], y, projection[0]).argmax())])
        if token == 0:
            break
        x = model.embed_one(torch.tensor([[token]]), pos)
    return out


@pytest.mark.parametrize("direction,dtype", [("en-pt", "float32"), ("pt-en", "float32"), ("en-pt", "int8")])
def test_the_direct_kernel_step_gives_the_same_bits_as_the_layer_callables(direction, dtype):
    if dtype == "float32":
        backend = backend_for(direction, True)
    else:
        from core.backends.marian_tiny import load_bergamot

        backend = load_bergamot(direction, shortlist=True, dtype=dtype)
    model = backend.model
    if any(L.fast is None for L in model.dec_layers):
        pytest.skip("the SSRU, q or o products are laid out otherwise here: no direct-kernel path")
    sentences = (EN if direction == "en-pt" else PT)[:8]
    for text in sentences:
        ids = torch.tensor([backend.source_ids(text)])
        rows = torch.from_numpy(backend.shortlist_table.allowed_ids(ids[0].tolist()))
        projection = model.output_rows(rows)
        fast = _greedy_states(model, ids, rows, projection)
        kept = [L.fast for L in model.dec_layers]
        try:
            for L in model.dec_layers:
                L.fast = None  # the layer's callables, as before the direct path
            plain = _greedy_states(model, ids, rows, projection)
        finally:
            for L, f in zip(model.dec_layers, kept):
                L.fast = f
        assert len(fast) == len(plain) > 3
        assert all(torch.equal(a, b) for a, b in zip(fast, plain)), text
