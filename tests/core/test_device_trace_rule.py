"""The trace's rerun block names the device the run used (reviewer's finding): on a machine
with CUDA, ``--device auto`` (every command's default) moved only transcribe's float32 /
half model there, but the trace said "cuda" for translate, ocr and int8 transcribe too."""

from __future__ import annotations

import argparse
import importlib

import torch

from core.options import DecodingOptions


def test_the_trace_says_cpu_where_auto_kept_the_model_on_the_cpu(monkeypatch):
    trace = importlib.import_module("core.cli.trace")  # the module (core.cli exports a function of that name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a machine with a GPU
    monkeypatch.setattr(trace, "_COMMAND", None)

    def device(command, dtype="float32"):
        trace.note_command([command, "x"], argparse.Namespace(command=command, device="auto", dtype=dtype,
                                                              audio=None, image=None, text=None))
        return trace.rerun_block(command, "m", DecodingOptions(), dtype)["device"]

    assert device("transcribe") == "cuda"
    assert device("transcribe", "int8") == "cpu"  # int8 stays on the CPU (core.cli.commands._device)
    assert device("translate") == "cpu"  # only transcribe moves (core.devices.DEVICE_TASKS)
    assert device("ocr") == "cpu"
