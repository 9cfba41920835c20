"""End to end: ``decoding-explorer replay TRACE.json`` reruns a ``--json`` trace's command on
the same input with the same threads, seed and options, and compares the token ids.

Real models: tiny.en on a short espeak-ng clip, and the bundled Bergamot en-pt (fast).
"""

import hashlib
import json
import os
import subprocess
import sys

import pytest
import soundfile as sf

from core.cli import main
from tests.helpers.speech import synth_speech

pytestmark = pytest.mark.e2e

SENTENCE = "Turn on the lights in the kitchen."


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "core.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def speech_trace(tmp_path_factory):
    """A wav of one espeak sentence and the path of its tiny.en ``--json`` trace."""
    d = tmp_path_factory.mktemp("replay")
    wav = d / "kitchen.wav"
    sf.write(wav, synth_speech(SENTENCE), 16000)
    out = _cli("transcribe", str(wav), "--model", "tiny.en", "--json")
    assert out.returncode == 0, out.stderr
    path = d / "trace.json"
    path.write_text(out.stdout, encoding="utf-8")
    return wav, path


def test_trace_records_what_a_rerun_needs(speech_trace):
    import torch
    import transformers

    wav, path = speech_trace
    rerun = json.loads(path.read_text())["rerun"]
    assert rerun["torch"] == torch.__version__ and rerun["transformers"] == transformers.__version__
    assert isinstance(rerun["threads"], int) and rerun["threads"] >= 1
    assert rerun["device"] == "cpu" and rerun["dtype"] == "float32"
    assert rerun["seed"] == 0 and rerun["task"] == "transcribe" and rerun["model"] == "whisper-tiny.en"
    assert "app_version" in rerun
    assert rerun["argv"][:2] == ["transcribe", str(wav)] and "--json" in rerun["argv"]
    assert rerun["input"]["path"] == os.path.abspath(wav)
    assert rerun["input"]["sha256"] == hashlib.sha256(wav.read_bytes()).hexdigest()


def test_transcribe_trace_replays_to_the_same_ids(speech_trace):
    _wav, path = speech_trace
    n = len(json.loads(path.read_text())["tokens"])
    out = _cli("replay", str(path))
    assert out.returncode == 0, out.stderr
    assert f"same ids ({n} tokens)" in out.stdout
    assert "replay" in out.stderr  # progress on stderr


def test_an_edited_id_is_named_by_its_step(capsys, speech_trace, tmp_path):
    _wav, path = speech_trace
    trace = json.loads(path.read_text())
    trace["tokens"][2]["id"] += 1
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(trace), encoding="utf-8")
    code, out, err = _run(capsys, ["replay", str(edited)])
    assert code == 1, err
    assert "step 2" in out
    assert str(trace["tokens"][2]["id"]) in out and str(trace["tokens"][2]["id"] - 1) in out


def test_a_json_file_that_is_not_a_trace_exits_2(capsys, tmp_path):
    f = tmp_path / "other.json"
    f.write_text(json.dumps({"hello": [1, 2, 3]}), encoding="utf-8")
    code, _out, err = _run(capsys, ["replay", str(f)])
    assert code == 2
    assert "not a decoding-explorer trace" in err
    g = tmp_path / "text.json"
    g.write_text("not json at all", encoding="utf-8")
    code, _out, err = _run(capsys, ["replay", str(g)])
    assert code == 2 and "not a decoding-explorer trace" in err


def _translation_trace(capsys, tmp_path, *extra):
    src = tmp_path / "in.txt"
    src.write_text("The weather is nice today. Where is the train station?", encoding="utf-8")
    code, out, err = _run(capsys, ["translate", "--input-file", str(src), "--json", *extra])
    assert code == 0, err
    path = tmp_path / "trace.json"
    path.write_text(out, encoding="utf-8")
    return src, path, json.loads(out)


def test_sampling_with_a_seed_replays_to_the_same_ids(capsys, tmp_path):
    _src, path, trace = _translation_trace(capsys, tmp_path, "--strategy", "sample", "--seed", "7",
                                           "--temperature", "1.5")
    assert trace["rerun"]["seed"] == 7
    code, out, err = _run(capsys, ["replay", str(path)])
    assert code == 0, err
    assert f"same ids ({len(trace['tokens'])} tokens)" in out


def test_a_missing_or_changed_input_is_an_error(capsys, tmp_path):
    src, path, _trace = _translation_trace(capsys, tmp_path)
    src.write_text("Something else entirely.", encoding="utf-8")
    code, _out, err = _run(capsys, ["replay", str(path)])
    assert code == 1 and "changed" in err and str(src) in err
    src.unlink()
    code, _out, err = _run(capsys, ["replay", str(path)])
    assert code == 1 and "missing" in err and str(src) in err


def test_a_different_torch_version_or_thread_count_is_a_warning(capsys, tmp_path):
    _src, path, trace = _translation_trace(capsys, tmp_path)
    trace["rerun"]["torch"] = "0.0.1"
    trace["rerun"]["threads"] = 999
    path.write_text(json.dumps(trace), encoding="utf-8")
    code, out, err = _run(capsys, ["replay", str(path)])
    assert "warning" in err and "torch 0.0.1" in err and "999 threads" in err
    assert code == 0 and "same ids" in out  # greedy on this input does not flip


def test_the_console_script_hands_replay_to_the_cli(capsys, tmp_path):
    from gui.app import main as app_main

    f = tmp_path / "other.json"
    f.write_text("[]", encoding="utf-8")
    assert app_main(["replay", str(f)]) == 2  # not the window
    assert "not a decoding-explorer trace" in capsys.readouterr().err


def test_every_cli_command_is_headless_for_the_console_script():
    """Each subcommand of the CLI goes to the CLI from the ``decoding-explorer`` script, not to the
    window (``stream`` opened the window when it was added without an entry in ``HEADLESS``)."""
    import argparse

    from core.cli.commands import build_parser
    from gui.app import HEADLESS

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) <= set(HEADLESS), set(sub.choices) - set(HEADLESS)


def test_a_command_line_that_no_longer_parses_is_a_failed_rerun(capsys, speech_trace, tmp_path):
    """A trace whose command line this version cannot parse (a flag removed or mistyped) says the
    rerun failed (exit 1); exit 2 stays for "not a trace"."""
    _wav, path = speech_trace
    trace = json.loads(path.read_text())
    trace["rerun"]["argv"] = trace["rerun"]["argv"] + ["--no-such-flag"]
    edited = tmp_path / "bad_argv.json"
    edited.write_text(json.dumps(trace), encoding="utf-8")
    code, _out, err = _run(capsys, ["replay", str(edited)])
    assert code == 1, err
    assert "the rerun of" in err and "failed (exit 2)" in err


def test_a_sweeps_gzipped_trace_replays_as_it_is(capsys, tmp_path):
    """A sweep writes each row's trace gzipped (traces/*.json.gz); replay reads it without a
    gunzip first (gzip told by its magic bytes)."""
    from core.sweep.data import read_items
    from core.sweep.decode import FileDecoder, Settings
    from core.sweep.results import ResultStore
    from core.sweep.specs import expand, options_hash

    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("Where is the train station?\tOnde fica a estação de comboios?\n", encoding="utf-8")
    item = read_items("translate", tsv)[0]
    decoder = FileDecoder("translate", Settings(model="en-pt"))
    runs = [(r, options_hash("translate", "en-pt", r.options)) for r in expand(["greedy", "sample:T=1.5,seed=3"])]
    store = ResultStore(tmp_path / "out")
    assert store.append(decoder.decode(item, runs)) == 2
    for row in store.rows():
        path = store.out / row["trace"]
        assert path.name.endswith(".json.gz") and path.read_bytes()[:2] == b"\x1f\x8b"
        code, out, err = _run(capsys, ["replay", str(path)])
        assert code == 0, err
        assert f"same ids ({row['tokens']} tokens)" in out
