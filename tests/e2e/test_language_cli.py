"""End to end: ``transcribe --json`` gives ``"language_probs"`` (the first window's top 10) for a
multilingual Whisper, ``--language-candidates`` restricts it; tiny.en has none. Real bundled
models on the bundled English clip, the CLI run in this process with the session's models.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf

from core.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("one_torch_thread")]

CLIP = str(Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav")


@pytest.fixture
def cli(capsys, monkeypatch, whisper_base, whisper_tiny_en):
    """``main(argv)`` with SpeechModel.load answering from the session's models; (exit code,
    stdout, stderr)."""
    from core.tasks.speech import SpeechModel

    models = {"base": whisper_base, "tiny.en": whisper_tiny_en}
    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="base", progress=None: models[name]))

    def run(*argv: str):
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_json_has_first_window_top10(cli, whisper_base):
    code, out, err = cli("transcribe", CLIP, "--model", "base", "--max-new-tokens", "4", "--json")
    assert code == 0, err
    probs = json.loads(out)["language_probs"]
    audio = sf.read(CLIP, dtype="float32")[0]
    full = whisper_base.language_probs(audio)
    assert list(probs) == list(full)[:10] and next(iter(probs)) == "en"
    assert all(probs[c] == round(full[c], 6) for c in probs)
    assert 0.9 < sum(probs.values()) <= 1.0 + 1e-6


def test_candidates_restrict(cli, whisper_base):
    code, out, err = cli("transcribe", CLIP, "--model", "base", "--max-new-tokens", "4", "--json",
                         "--language-candidates", "de,fr")
    assert code == 0, err
    probs = json.loads(out)["language_probs"]
    assert set(probs) == {"de", "fr"} and sum(probs.values()) == pytest.approx(1.0, abs=2e-6)
    assert whisper_base.last_language == next(iter(probs))
    # with word timestamps (its own decode path) the candidates apply too
    code, out, err = cli("transcribe", CLIP, "--model", "base", "--max-new-tokens", "4", "--json",
                         "--language-candidates", "de,fr", "--word-timestamps")
    assert code == 0, err
    assert set(json.loads(out)["language_probs"]) == {"de", "fr"}


def test_unknown_candidate_is_one_line(cli):
    code, out, err = cli("transcribe", CLIP, "--model", "base", "--language-candidates", "en,xx")
    assert code == 1 and out == ""
    assert "unknown candidate language(s) 'xx'" in err and err.count("\n") == 1


def test_english_only_has_no_language_probs(cli):
    code, out, err = cli("transcribe", CLIP, "--model", "tiny.en", "--max-new-tokens", "4", "--json",
                         "--language-candidates", "de")
    assert code == 0, err
    assert "language_probs" not in json.loads(out)
