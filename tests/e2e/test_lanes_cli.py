"""End to end: ``--compare`` lanes and ``--reference`` metrics on the real bundled models.

Each lane equals the same options decoded alone (the plain CLI run), the encoder runs once
per segment for all lanes, and the metric equals jiwer / sacrebleu computed here directly:
Whisper tiny.en on the bundled clip (WER), Bergamot en-pt (chrF), the bundled OCR reader (CER).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import jiwer
import pytest
from sacrebleu.metrics import CHRF

from core.cli import main

pytestmark = pytest.mark.e2e

SAMPLES = Path(__file__).resolve().parents[2] / "assets" / "samples"
LANES = ["greedy", "beam:5", "sample:T=0.8", "min-p:0.1"]
#: the single-run flags each lane spec stands for
ALONE = {"greedy": [], "beam:5": ["--strategy", "beam", "--beams", "5"],
         "sample:T=0.8": ["--strategy", "sample", "--temperature", "0.8"],
         "min-p:0.1": ["--strategy", "sample", "--min-p", "0.1"]}


@pytest.fixture(scope="module")
def speech_model(whisper_tiny_en):
    return whisper_tiny_en  # loaded once per session


@pytest.fixture
def cli(capsys, cli_reuses_models):
    """Run the CLI in this process (it reuses the session's loaded models, ``cli_reuses_models``);
    the JSON or, with ``text=True``, the printed lines."""
    def run(*argv: str, text: bool = False):
        code = main(list(argv) + ([] if text else ["--json"]))
        out, err = capsys.readouterr()
        assert code == 0, err
        return out if text else json.loads(out)

    return run


def _check_lanes(out: dict, cli, *command: str) -> None:
    """Four lanes in order, each with the fields of the JSON, each equal to its run alone."""
    assert [lane["spec"] for lane in out["lanes"]] == LANES
    for lane in out["lanes"]:
        assert set(lane) >= {"spec", "options", "text", "logprob", "time_s", "tokens", "metric"}
        alone = cli(*command, *ALONE[lane["spec"]])
        assert lane["text"] == alone["text"], lane["spec"]
        assert lane["token_ids"] == [t["id"] for t in alone["tokens"]]
        assert lane["tokens"] == len(alone["tokens"]) and lane["time_s"] > 0
        # the single run's probabilities are rounded to 6 digits in its JSON
        assert lane["logprob"] == pytest.approx(sum(math.log(t["prob"]) for t in alone["tokens"]), abs=0.05)
    pairs = out["agreement"]["pairs"]
    assert [(p["a"], p["b"]) for p in pairs] == [(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)]
    assert out["agreement"]["mean"] == pytest.approx(sum(p["value"] for p in pairs) / 6, abs=1e-5)


def test_transcribe_compare_with_reference_wer(cli, speech_model):
    clip = str(SAMPLES / "speech_en.wav")
    reference = "Open the door and turn on the lights, please."
    before = speech_model.encode_count
    speech_model._cache.clear()
    out = cli("transcribe", clip, "--model", "tiny.en", "--compare", *LANES, "--reference", reference)
    assert speech_model.encode_count == before + 1  # one window, one encoder pass for four lanes
    assert out["metric"] == "wer" and out["reference"] == reference
    norm = jiwer.Compose([jiwer.ToLowerCase(), jiwer.RemovePunctuation(), jiwer.RemoveMultipleSpaces(), jiwer.Strip(),
                          jiwer.ReduceToListOfListOfWords()])
    for lane in out["lanes"]:
        direct = jiwer.wer(reference, lane["text"], reference_transform=norm, hypothesis_transform=norm)
        assert lane["metric"] == {"name": "wer", "value": pytest.approx(direct, abs=1e-6)}
    assert out["lanes"][0]["text"].startswith("Open the door and turn on the lights")
    _check_lanes(out, cli, "transcribe", clip, "--model", "tiny.en")


def test_transcribe_compare_prints_a_report(cli, tmp_path):
    clip = str(SAMPLES / "speech_en.wav")
    ref = tmp_path / "ref.txt"
    ref.write_text("Open the door and turn on the lights.", encoding="utf-8")
    text = cli("transcribe", clip, "--compare", "greedy", "beam:3", "--reference-file", str(ref), text=True)
    lines = text.strip().split("\n")
    assert lines[0].startswith("lane 1  greedy") and "log p" in lines[0] and " s " in lines[0] and "WER" in lines[0]
    assert lines[1].strip().startswith("Open the door") and lines[2].startswith("lane 2  beam:3")
    assert lines[4].startswith("agreement (tokens, difflib ratio): mean")


def test_translate_compare_with_reference_chrf(cli):
    text = "The weather is nice today. Where is the train station?"
    reference = "O tempo está bom hoje. Onde fica a estação de comboios?"
    out = cli("translate", text, "--compare", *LANES, "--reference", reference, "--max-new-tokens", "60")
    assert out["metric"] == "chrf"
    for lane in out["lanes"]:
        direct = CHRF().sentence_score(lane["text"], [reference]).score
        assert lane["metric"]["value"] == pytest.approx(direct, abs=1e-5)
        assert lane["options"]["max_new_tokens"] == 60  # the flags are every lane's base
    _check_lanes(out, cli, "translate", text, "--max-new-tokens", "60")


def test_ocr_compare_with_reference_cer(cli):
    image = str(SAMPLES / "ocr_en.png")
    greedy = cli("ocr", image)
    # a reference three characters off the greedy reading, one of them only in case (CER keeps case)
    reference = greedy["text"].replace("e", "a", 2)
    assert reference[0].isalpha()
    reference = reference[0].swapcase() + reference[1:]
    out = cli("ocr", image, "--compare", *LANES, "--reference", reference)
    assert out["metric"] == "cer"
    norm = jiwer.Compose([jiwer.RemoveMultipleSpaces(), jiwer.Strip(), jiwer.ReduceToListOfListOfChars()])
    for lane in out["lanes"]:
        direct = jiwer.cer(reference, lane["text"], reference_transform=norm, hypothesis_transform=norm)
        assert lane["metric"]["value"] == pytest.approx(direct, abs=1e-6)
    assert out["lanes"][0]["text"] == greedy["text"] and out["lanes"][0]["metric"]["value"] > 0
    _check_lanes(out, cli, "ocr", image)


def test_an_empty_reference_is_an_error(cli, capsys):
    code = main(["translate", "Hello.", "--compare", "greedy", "beam:2", "--reference", "  \n "])
    err = capsys.readouterr().err
    assert code == 1 and "the reference text is empty" in err and err.count("\n") == 1
