"""``--device auto|cpu|cuda|mps`` (issue 22): auto picks cuda when torch sees one, else cpu; a
device this machine lacks is refused with one line (exit 2); the CPU path decodes as before; on
CUDA (skipped here when there is none, with the reason shown) tiny.en decodes the sample clip with
its model on the GPU and events in CPU numpy."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import torch

from core.devices import DeviceError, device_problem, resolve_device

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CLIP = pathlib.Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"
NO_CUDA = "no CUDA device here (torch.cuda.is_available() is False): the GPU path is checked on a CUDA machine"


def test_auto_is_cuda_when_available_else_cpu():
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(DeviceError, match="device must be one of auto, cpu, cuda, mps"):
        resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the refusal needs one without")
def test_cuda_is_refused_with_one_line_where_there_is_none(capsys):
    from core.cli import main

    line = "no CUDA device: torch.cuda.is_available() is False; use --device cpu"
    assert device_problem("cuda") == line
    with pytest.raises(DeviceError, match="no CUDA device"):
        resolve_device("cuda")
    with pytest.raises(SystemExit) as info:
        main(["transcribe", str(CLIP), "--model", "tiny.en", "--device", "cuda"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert line in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, said", [
    (["ocr", str(CLIP.parent / "ocr_en.png"), "--device", "cuda"], "--device cuda is for transcribe only"),
])
def test_device_where_it_does_not_apply_exits_2(capsys, argv, said):
    from core.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert said in capsys.readouterr().err


def _ids(argv, capsys):
    from core.cli import main

    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    return [t["id"] for t in out["tokens"]], out


def test_the_cpu_path_decodes_as_before(capsys):
    base = ["transcribe", str(CLIP), "--model", "tiny.en", "--max-new-tokens", "12", "--json"]
    before, _ = _ids(base, capsys)
    on_cpu, out = _ids(base + ["--device", "cpu"], capsys)
    assert on_cpu == before and len(before) == 12
    # the model moved by load_whisper(device=...) is the same path the CLI takes off the CPU
    from core.backends.whisper_models import load_whisper
    from core.tasks.speech import SpeechModel

    model = SpeechModel(load_whisper("tiny.en", device="cpu"))
    assert model.backend.device.type == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_tiny_en_on_cuda_decodes_the_sample_clip_with_cpu_events(dtype):
    from core.backends.whisper_models import load_whisper
    from core.events import Finished, StepEvent
    from core.inputs.audio import load_audio
    from core.options import DecodingOptions
    from core.tasks.speech import SpeechModel

    model = SpeechModel(load_whisper("tiny.en", dtype=dtype, device="cuda"))
    assert next(model._loaded.model.parameters()).is_cuda
    opts = DecodingOptions(strategy="greedy", max_new_tokens=32, top_k_report=5, capture_attention=True)
    events = list(model.decode(load_audio(CLIP), opts, language="en"))
    fin = [e for e in events if isinstance(e, Finished)][-1]
    assert fin.text.strip().startswith("Open the door")
    step = next(e for e in events if isinstance(e, StepEvent))
    assert isinstance(step.cross_attention, np.ndarray)


def test_the_trace_names_the_device_the_run_used(monkeypatch):
    """The JSON trace's rerun block says the device ``--device`` resolved to (it always said cpu)."""
    import argparse

    import importlib

    import core.devices
    from core.options import DecodingOptions

    trace = importlib.import_module("core.cli.trace")  # the module (core.cli exports a function of that name)

    monkeypatch.setattr(core.devices, "device_problem", lambda name: None)  # as on a machine with one
    monkeypatch.setattr(trace, "_COMMAND", None)
    trace.note_command(["transcribe", "x.wav", "--device", "cuda"],
                       argparse.Namespace(command="transcribe", device="cuda", audio=None))
    assert trace.rerun_block("transcribe", "tiny.en", DecodingOptions())["device"] == "cuda"
    trace.note_command(["transcribe", "x.wav"], argparse.Namespace(command="transcribe", device="cpu", audio=None))
    assert trace.rerun_block("transcribe", "tiny.en", DecodingOptions())["device"] == "cpu"
