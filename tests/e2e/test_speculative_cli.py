"""End to end: ``--strategy speculative --draft ...`` on the bundled models (issue 21).

``--json`` gains the "speculative" block (the SpeculationSummary and its rounds) and tokens
carry "drafted" / "accepted"; the ids equal plain greedy's. ``--draft branch`` drafts from the
previous run on the same input (here: the same process, the model loaded once, as a fork
with ``--prefix`` does), and when there is none the CLI decodes plainly first.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from core.cli import main

pytestmark = pytest.mark.e2e

SAMPLES = Path(__file__).resolve().parents[2] / "assets" / "samples"
TEXT = "Flight LH 4021 leaves Lisbon at 10:45 on 12 March; flight LH 4022 returns from Berlin at 18:30."


@pytest.fixture(scope="module")
def speech_model(whisper_tiny_en):
    return whisper_tiny_en  # loaded once per session


@pytest.fixture
def cli(capsys, monkeypatch, speech_model):
    """Run the CLI in this process; ``transcribe`` reuses the loaded tiny.en."""
    from core.tasks.speech import SpeechModel

    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="tiny.en", progress=None: speech_model))

    def run(*argv: str, code: int = 0):
        status = main(list(argv))
        out, err = capsys.readouterr()
        assert status == code, err
        return json.loads(out) if code == 0 and "--json" in argv else (out, err)

    return run


def _check_block(out: dict, greedy: dict, draft: str) -> dict:
    assert [t["id"] for t in out["tokens"]] == [t["id"] for t in greedy["tokens"]]
    spec = out["speculative"]
    assert spec["draft"] == draft
    for key in ("acceptance_rate", "tokens_per_target_call", "draft_tokens", "accepted", "rounds",
                "speedup_measured", "speedup_predicted", "target_calls", "switched_off"):
        assert key in spec
    assert spec["draft_tokens"] == sum(len(r["drafted"]) for r in spec["rounds"])
    # an EOS the target accepted inside a draft ends the run and is no token of the trace
    eos_accepted = sum(d["accepted"] and d["text"] in ("<|endoftext|>", "</s>") for r in spec["rounds"]
                       for d in r["drafted"])
    assert spec["accepted"] == sum(r["n_accepted"] for r in spec["rounds"])
    assert sum(t["accepted"] for t in out["tokens"]) == spec["accepted"] - eos_accepted
    assert all("drafted" in t and "accepted" in t for t in out["tokens"])
    drafted_tokens = sum(t["drafted"] for t in out["tokens"])
    # a drafted position is accepted or resampled: one per accepted token plus one per rejecting round
    assert drafted_tokens == spec["accepted"] - eos_accepted + sum(r["emitted_kind"] == "resampled"
                                                                    for r in spec["rounds"])
    assert spec["tokens_per_target_call"] == pytest.approx(len(out["tokens"]) / spec["target_calls"])
    for r in spec["rounds"]:
        assert {"round", "step", "gamma", "drafted", "n_accepted", "emitted_kind", "draft_ms", "target_ms"} <= set(r)
    return spec


def test_transcribe_draft_ngram(cli):
    clip = str(SAMPLES / "speech_en.wav")
    greedy = cli("transcribe", clip, "--model", "tiny.en", "--json")
    assert "speculative" not in greedy and "drafted" not in greedy["tokens"][0]
    out = cli("transcribe", clip, "--model", "tiny.en", "--strategy", "speculative", "--draft", "ngram",
              "--draft-tokens", "3", "--json")
    spec = _check_block(out, greedy, "ngram")
    assert all(r["gamma"] == 3 for r in spec["rounds"])
    assert out["options"]["draft_tokens"] == 3 and out["options"]["strategy"] == "speculative"
    assert out["text"] == greedy["text"]


def test_transcribe_draft_branch(cli, tmp_path):
    clip = str(SAMPLES / "speech_en.wav")
    greedy = cli("transcribe", clip, "--model", "tiny.en", "--json")
    out = cli("transcribe", clip, "--model", "tiny.en", "--strategy", "speculative", "--draft", "branch",
              "--draft-tokens", "auto", "--json")
    spec = _check_block(out, greedy, "branch")
    assert spec["acceptance_rate"] == 1.0 and spec["tokens_per_target_call"] > 2
    # an input never decoded before: the CLI decodes it once plainly first and says so (it
    # refused before, issue 21 review: a single CLI run never has an earlier run)
    audio, rate = sf.read(clip, dtype="float32")
    other = tmp_path / "other.wav"
    sf.write(other, (audio * 0.5).astype(np.float32), rate)
    _, err = cli("transcribe", str(other), "--model", "tiny.en", "--strategy", "speculative", "--draft", "branch")
    assert "earlier run" in err and "decoding once plainly first" in err


@pytest.mark.usefixtures("cli_reuses_models")
def test_translate_draft_ngram_copies_from_the_source(capsys):
    greedy_code = main(["translate", TEXT, "--direction", "en-pt", "--json"])
    greedy = json.loads(capsys.readouterr().out)
    code = main(["translate", TEXT, "--direction", "en-pt", "--strategy", "speculative",
                 "--draft", "ngram", "--draft-tokens", "4", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert greedy_code == code == 0
    spec = _check_block(out, greedy, "ngram")
    assert spec["accepted"] > 0


def test_bad_draft_flags_say_what_to_write(capsys):
    clip = str(SAMPLES / "speech_en.wav")
    for flags, says in ((["--draft", "early-exit"], "early-exit:L"), (["--draft-tokens", "many"], "auto"),
                        (["--draft", "early-exit:x"], "early-exit:4")):
        with pytest.raises(SystemExit):
            main(["transcribe", clip, "--strategy", "speculative", *flags])
        assert says in capsys.readouterr().err


@pytest.mark.parametrize("draft", ["early-exit:2", "tiny.en"])
def test_transcribe_draft_early_exit_and_model(cli, draft):
    """The two other draft kinds end to end: the target's first 2 decoder layers, and a second
    model (here tiny.en drafting for itself: every drafted token is the target's own choice,
    so all are accepted; a bare model name means model:NAME)."""
    clip = str(SAMPLES / "speech_en.wav")
    greedy = cli("transcribe", clip, "--model", "tiny.en", "--json")
    out = cli("transcribe", clip, "--model", "tiny.en", "--strategy", "speculative", "--draft", draft,
              "--draft-tokens", "3", "--json")
    name = draft if draft.startswith("early-exit") else f"model:{draft}"
    spec = _check_block(out, greedy, name)
    assert spec["rounds"] and spec["draft_tokens"] > 0 and out["text"] == greedy["text"]
    if draft == "tiny.en":
        assert spec["acceptance_rate"] == 1.0 and spec["tokens_per_target_call"] > 2
