"""End to end: ``transcribe`` long-form (core/cli/longform.py, issue 14 section 3): segments,
attempts and fallback in the JSON, subtitle files as openai/whisper's CLI writes them, the
silence skip, and one-line errors. Real tiny.en, the CLI run in this process with the
session's model.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from core.cli import main
from core.cli.longform import use_longform

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("one_torch_thread")]

CLIP = str(Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav")


@pytest.fixture
def cli(capsys, monkeypatch, whisper_tiny_en):
    """``main(argv)`` with SpeechModel.load answering tiny.en from the session; (exit, stdout, stderr)."""
    from core.tasks.speech import SpeechModel

    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="base", progress=None: whisper_tiny_en))

    def run(*argv: str):
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_auto_windows_switch_at_30_s_or_for_files():
    args = argparse.Namespace(windows="auto", output_format=None)
    assert not use_longform(args, 30.0) and use_longform(args, 30.5)
    assert use_longform(argparse.Namespace(windows="auto", output_format="srt"), 5.0)
    assert not use_longform(argparse.Namespace(windows="fixed", output_format=None), 600.0)
    assert use_longform(argparse.Namespace(windows="long-form", output_format=None), 5.0)


def test_json_has_segments_attempts_and_the_kept_tokens(cli):
    code, out, err = cli("transcribe", CLIP, "--model", "tiny.en", "--windows", "long-form", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["language"] == "en" and d["segments"] and d["attempts"]
    (attempt,) = d["attempts"]
    assert attempt["verdict"] == "accepted" and attempt["kept"] and attempt["temperature"] == 0.0
    assert d["segments"][0]["start"] == 0.0 and d["segments"][-1]["end"] <= 7.7
    assert " ".join(s["text"].strip() for s in d["segments"]) == d["text"]
    assert any(t["text"].startswith("<|") for t in d["tokens"])  # tokens keep their timestamp tokens


def test_fallback_attempts_in_the_json(cli):
    code, out, err = cli("transcribe", CLIP, "--model", "tiny.en", "--windows", "long-form", "--json",
                         "--logprob-threshold", "0", "--fallback-temperatures", "0,0.5")
    assert code == 0, err
    d = json.loads(out)
    assert [(a["temperature"], a["verdict"], a["kept"]) for a in d["attempts"]] == [(0.0, "fallback", False),
                                                                                   (0.5, "fallback", True)]
    assert "average log-probability" in d["attempts"][0]["reasons"][0]
    assert d["tokens"] and d["segments"][0]["temperature"] == 0.5 and d["text"]


def test_output_files_with_word_cues(cli, tmp_path):
    code, out, err = cli("transcribe", CLIP, "--model", "tiny.en", "--word-timestamps", "-f", "all",
                         "-o", str(tmp_path), "--max-line-width", "24")
    assert code == 0, err
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".srt", ".tsv", ".txt", ".vtt"]
    result = json.loads((tmp_path / "speech_en.json").read_text())
    words = [w for s in result["segments"] for w in s["words"]]
    assert len(words) >= 5 and all(w["start"] <= w["end"] for w in words)
    srt = (tmp_path / "speech_en.srt").read_text()
    assert srt.startswith("1\n00:00:00,000 --> ") and all(len(line) <= 24 + 12 for line in srt.splitlines())
    assert (tmp_path / "speech_en.vtt").read_text().startswith("WEBVTT\n")
    assert (tmp_path / "speech_en.txt").read_text().strip().split("\n")[0] == result["segments"][0]["text"].strip()
    assert "wrote" in err and out == ""


def test_silence_gives_no_text_and_a_no_speech_verdict(cli, tmp_path):
    path = tmp_path / "silence.wav"
    sf.write(path, np.zeros(31 * 16000, np.float32), 16000)
    code, out, err = cli("transcribe", str(path), "--model", "tiny.en", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["text"] == "" and d["segments"] == [] and d["tokens"] == []
    assert {a["verdict"] for a in d["attempts"]} == {"silence"}
    assert all(a["no_speech_prob"] > 0.6 for a in d["attempts"])


@pytest.mark.parametrize("argv,needle,status", [
    (["--windows", "fixed", "-f", "srt"], "--output-format needs long-form", 1),
    (["-f", "srt", "--highlight-words"], "word", 1),
    (["--windows", "long-form", "--no-speech-threshold", "2"], "no_speech_threshold", 1),
    (["--windows", "long-form", "--timestamps"], "always uses timestamps", 1),
    (["--fallback-temperatures", "hot"], "temperatures", 2),
])
def test_errors_are_one_line(cli, capsys, argv, needle, status):
    try:
        code, out, err = cli("transcribe", CLIP, "--model", "tiny.en", *argv)
    except SystemExit as exit_:  # argparse's usage error
        code, err = exit_.code, capsys.readouterr().err
    assert code == status and needle in err and err.count("\n") == 1
