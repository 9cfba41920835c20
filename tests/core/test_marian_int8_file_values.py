"""int8 mode on the Bergamot file's own int8 values (``marian_net._file_int8_linear``, opt-in by
``INT8_FILE_VALUES``): the packed weight holds the file's integers unchanged, the product is the
float32 one up to int8 activation rounding, and a model built that way still translates."""

from __future__ import annotations

import pytest
import torch

from core.backends import marian_net
from core.backends.marian_tiny import load_bergamot

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def _file_matrix(seed: int, shape=(96, 64)) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-127, 128, shape, generator=g).float()
    q[0, 0] = 127.0  # max |Q| = 127, as the file's matrices
    m = torch.tensor(127.0 / 0.37, dtype=torch.float32)
    return q / m


def test_the_file_values_are_found_exactly():
    w = _file_matrix(0)
    q, inv = marian_net._file_int8(w)
    assert q.dtype == torch.int8 and int(q.abs().max()) == 127
    m = torch.tensor(127.0 / float(w.abs().max()), dtype=torch.float32)
    assert torch.equal(q.float() / m, w)  # the file's integers, unchanged
    assert inv == pytest.approx(1.0 / float(m), rel=1e-7)
    assert marian_net._file_int8(w + 1e-3) is None  # not integers over one scale: no int8 path


@pytest.mark.parametrize("rows", [1, 7])
def test_the_file_int8_product_is_the_float_product_to_activation_rounding(rows):
    w = _file_matrix(1)
    b = torch.randn(96, generator=torch.Generator().manual_seed(2))
    x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(3))
    product = marian_net._file_int8_linear(w, b)
    if product is None:
        pytest.skip("this torch build has no fbgemm")
    exact = torch.nn.functional.linear(x, w, b)
    got = product(x)
    assert got.shape == exact.shape
    # 8-bit activations: each output off by at most ~sum |w| * step / 2
    step = (x.amax(dim=-1, keepdim=True) - x.amin(dim=-1, keepdim=True)) / 255
    bound = w.abs().sum(dim=1)[None] * step * 0.75 + 1e-5
    assert bool(((got - exact).abs() <= bound).all())


def test_a_model_on_the_file_values_translates(monkeypatch):
    monkeypatch.setattr(marian_net, "INT8_FILE_VALUES", True)
    backend = load_bergamot("en-pt", dtype="int8").with_shortlist(True)
    from tests.core.test_marian_tiny import greedy_ids

    ids = greedy_ids(backend, "The cat sat on the mat.")
    assert backend.decode(ids).strip().startswith("O gato")
