"""End to end: ``--prefix`` (forced tokens) and forks on the real bundled models.

Invariant (issue 12): forcing the model's own greedy tokens reproduces the greedy output
exactly (ids and probabilities); forcing another start changes the continuation. Whisper
tiny.en on the bundled sample clip, Bergamot en-pt, the bundled OCR reader.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.cli import main
from core.events import StepEvent
from core.options import DecodingOptions
from tests.core.test_fork import _check_task_fork

pytestmark = pytest.mark.e2e

SAMPLES = Path(__file__).resolve().parents[2] / "assets" / "samples"


@pytest.fixture(scope="module")
def speech_model(whisper_tiny_en):
    return whisper_tiny_en  # loaded once per session


@pytest.fixture
def cli(capsys, cli_reuses_models):
    """Run the CLI in this process; it reuses the session's loaded models (``cli_reuses_models``)."""
    def run(*argv: str) -> dict:
        code = main(list(argv) + ["--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)

    return run


def _same_tokens(a: list[dict], b: list[dict], n_forced: int) -> None:
    assert [t["id"] for t in a] == [t["id"] for t in b]
    for i, (x, y) in enumerate(zip(a, b)):
        assert x["prob"] == pytest.approx(y["prob"], abs=2e-5) and x["raw_prob"] == pytest.approx(y["raw_prob"], abs=2e-5)
        assert [t["id"] for t in x["topk"][:3]] == [t["id"] for t in y["topk"][:3]]
        assert y.get("forced", False) is (i < n_forced) and "forced" not in x


@pytest.mark.parametrize("words", [1, 4, 9])
def test_transcribe_prefix_of_its_own_words_reproduces_greedy(cli, words):
    clip = str(SAMPLES / "speech_en.wav")
    greedy = cli("transcribe", clip, "--model", "tiny.en")
    assert greedy["text"].startswith("Open the door and turn on the lights.")
    prefix = " ".join(greedy["text"].split()[:words])
    forced = cli("transcribe", clip, "--model", "tiny.en", "--prefix", prefix)
    n_forced = sum(t.get("forced", False) for t in forced["tokens"])
    assert n_forced >= words
    assert "".join(t["text"] for t in forced["tokens"][:n_forced]).strip() == prefix
    _same_tokens(greedy["tokens"], forced["tokens"], n_forced)
    assert forced["text"] == greedy["text"]


def test_transcribe_another_prefix_changes_the_continuation(cli):
    clip = str(SAMPLES / "speech_en.wav")
    greedy = cli("transcribe", clip, "--model", "tiny.en")
    other = cli("transcribe", clip, "--model", "tiny.en", "--prefix", "Close the window")
    assert other["text"].startswith("Close the window") and other["text"] != greedy["text"]
    assert other["tokens"][0]["forced"] and not other["tokens"][-1].get("forced", False)  # it went on


def test_speech_fork_reproduces_each_window(speech_model):
    """Two 30 s windows (the clip, silence, the clip again): each window forked with its
    own tokens reproduces it; the prefix of ``decode`` applies to the first window only."""
    from core.inputs.audio import load_audio

    clip = load_audio(str(SAMPLES / "speech_en.wav"))
    audio = np.concatenate([clip, np.zeros(30 * 16000 - len(clip), np.float32), clip])
    options = DecodingOptions(max_new_tokens=40, top_k_report=5)
    events = list(speech_model.decode(audio, options))
    _check_task_fork(events, lambda **kw: speech_model.fork(audio, options, **kw))
    prefix = speech_model.prefix_ids("Open the door")
    steps = [e for e in speech_model.decode(audio, options, prefix_ids=prefix) if isinstance(e, StepEvent)]
    assert [e.token_id for e in steps if e.forced] == prefix
    assert all(e.segment == 0 for e in steps if e.forced)


def test_translate_prefix_and_source_prefix(cli):
    text = "The weather is nice today."
    greedy = cli("translate", text)
    words = greedy["text"].split()
    forced = cli("translate", text, "--prefix", " ".join(words[:2]))
    n_forced = sum(t.get("forced", False) for t in forced["tokens"])
    assert n_forced >= 2
    _same_tokens(greedy["tokens"], forced["tokens"], n_forced)
    other = cli("translate", text, "--prefix", "Hoje")
    assert other["text"].startswith("Hoje") and other["text"] != greedy["text"]
    # the old flag is the T5 source prefix now; the bundled model takes none
    code = main(["translate", text, "--source-prefix", "translate English to German: "])
    assert code == 1


def test_ocr_prefix_of_its_own_reading_reproduces_it(cli):
    image = str(SAMPLES / "ocr_en.png")
    greedy = cli("ocr", image)
    first_line = greedy["text"].split("\n")[0]
    assert len(first_line) >= 6
    forced = cli("ocr", image, "--prefix", first_line[:5])
    assert sum(t.get("forced", False) for t in forced["tokens"]) == 5
    assert all(t["segment"] == 0 for t in forced["tokens"] if t.get("forced"))
    _same_tokens(greedy["tokens"], forced["tokens"], 5)
    assert forced["text"] == greedy["text"]


def test_a_prefix_with_no_token_is_an_error(cli, capsys):
    code = main(["ocr", str(SAMPLES / "ocr_en.png"), "--prefix", "\u2603\u2603"])
    assert code == 1 and "gives no token" in capsys.readouterr().err
