"""The float32 decoder step's direct-kernel path (``_DecoderLayer.fast``, issue 22: per-step
overhead) gives the same bits as the layer's callables (``_TransposedLinear``, the exact-int8
closure): every state, attention row and output of a greedy run, both directions."""

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


@pytest.mark.parametrize("direction", ["en-pt", "pt-en"])
def test_the_direct_kernel_step_gives_the_same_bits_as_the_layer_callables(direction):
    backend = backend_for(direction, True)
    model = backend.model
    if any(L.fast is None for L in model.dec_layers):
        pytest.skip("this torch build lays the decoder out otherwise (no fbgemm): no direct-kernel path")
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


def test_int8_mode_has_no_direct_kernel_path():
    """int8's FFN products are Int8Linear: the layer's callables run (``fast`` is None)."""
    from core.backends.marian_tiny import load_bergamot

    i8 = load_bergamot("en-pt", shortlist=True, dtype="int8")
    assert all(L.fast is None for L in i8.model.dec_layers)
