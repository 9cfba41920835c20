"""Closing a sweep view while its worker reads the folder: nothing of the read is kept."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

pytest.importorskip("pyarrow")

import gui.sweep_view as sweep_view_mod  # noqa: E402
import gui.worker as worker_mod  # noqa: E402
from gui.sweep_view import SweepView  # noqa: E402
from tests.helpers.sweep_synthetic import make_sweep  # noqa: E402


def test_a_view_closed_while_reading_leaves_no_worker_behind(qtbot, tmp_path):
    out = make_sweep(tmp_path / "out", [{"id": f"c{i}.wav"} for i in range(20)], ["greedy", "beam:2"])
    view = SweepView()
    view.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
    view.show()
    view.open_folder(out)  # reads the parquet and draws the plots (a second or so) in a worker
    handle = view.controller.handle("sweep-read")
    assert handle is not None and handle.running
    view.close()  # deleted: its run controller goes with it
    # the worker's end is still taken: the handle (and the table it read) is not kept for ever
    qtbot.waitUntil(lambda: handle not in worker_mod._live, timeout=20_000)
    qtbot.waitUntil(lambda: not sweep_view_mod._CLOSING, timeout=5_000)  # the controller is let go too
