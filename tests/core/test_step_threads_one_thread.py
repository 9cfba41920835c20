"""``step_threads.one_thread()``: torch on one thread inside the block for the calling thread
only (the engine's per-token work over one row: its index_fill and amax otherwise open an
OpenMP parallel region each), the count restored after, also when the block raises."""

from __future__ import annotations

import threading

import pytest
import torch

from core.backends import step_threads
from tests.core.test_step_threads import two_threads  # noqa: F401 - the fixture


def test_one_thread_runs_torch_on_one_thread_and_restores_the_count(two_threads):  # noqa: F811
    seen = []
    with step_threads.one_thread():
        seen.append(torch.get_num_threads())
        other = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        other.start()
        other.join()
    assert seen == [1, 2]  # this thread only
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError, match="boom"):
        with step_threads.one_thread():
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2
    with step_threads.one_thread(rows=step_threads.MAX_ROWS + 1):  # many rows: torch's threads
        assert torch.get_num_threads() == 2


def test_one_thread_on_one_thread_changes_nothing():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with step_threads.one_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
