"""End to end, the reviewer's CLI findings on speculative decoding (issue 21): flags that do
not apply exit 2 saying what applies to what; a bad --draft fails before any model loads;
``--draft branch`` decodes once plainly first; text mode says α and tokens per target call
on stderr; ``--compare`` lanes carry their speculative block and speed-up.
"""

from __future__ import annotations

import re

import pytest

from core.cli import main
from tests.e2e.test_speculative_cli import SAMPLES, TEXT, cli, speech_model  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e

CLIP = str(SAMPLES / "speech_en.wav")


def _exit_code(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr().err


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail the test if a model loads."""
    from core.tasks.speech import SpeechModel
    from core.tasks.translation import TranslationModel

    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(SpeechModel, "load", classmethod(refuse))
    monkeypatch.setattr(TranslationModel, "load", classmethod(refuse))


@pytest.mark.parametrize("flags,says", [
    (["--draft", "ngram"], ["--draft", "--strategy speculative"]),
    (["--draft-tokens", "3"], ["--draft-tokens", "--strategy speculative"]),
    (["--verification", "sample"], ["--verification", "--strategy speculative"]),
    (["--strategy", "speculative", "--beams", "4"], ["--beams", "beam", "speculative"]),
    (["--strategy", "speculative", "--length-penalty", "1.2"], ["--length-penalty", "beam"]),
])
def test_flags_that_do_not_apply_exit_2(capsys, no_model_load, flags, says):
    code, err = _exit_code(capsys, ["transcribe", CLIP, *flags])
    assert code == 2
    for word in says:
        assert word in err


def test_draft_with_a_speculative_lane_applies(capsys, no_model_load):
    """--draft is every lane's base: with a speculative lane it applies (no exit 2; the model
    load is then refused by the fixture)."""
    with pytest.raises(AssertionError, match="a model was loaded"):
        main(["transcribe", CLIP, "--draft", "ngram", "--compare", "greedy", "speculative"])


@pytest.mark.parametrize("value", ["nonsense", "tiny-en", "ngrams"])
def test_a_bad_draft_fails_before_the_model_loads(capsys, no_model_load, value):
    code, err = _exit_code(capsys, ["transcribe", CLIP, "--strategy", "speculative", "--draft", value])
    assert code == 2
    assert "--draft" in err and value in err
    for kind in ("ngram", "branch", "early-exit:L", "#N"):
        assert kind in err
    assert "--draft: --draft" not in err


def test_messages_are_not_prefixed_twice(capsys):
    for flags in (["--draft", "early-exit:x"], ["--draft-tokens", "many"]):
        code, err = _exit_code(capsys, ["transcribe", CLIP, "--strategy", "speculative", *flags])
        assert code == 2
        assert not re.search(r"argument (--[a-z-]+): \1:", err), err


def test_draft_tokens_help_says_auto(capsys):
    code = None
    with pytest.raises(SystemExit) as info:
        main(["transcribe", "--help"])
    code = info.value.code
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    block = out[out.index("--draft-tokens N|auto speculative"):]
    block = block[:block.index("--verification")]
    assert "(default auto)" in block and "(default 0)" not in block


def test_branch_from_the_cli_decodes_plainly_first(cli, capsys, tmp_path):
    """The single-run CLI has no earlier run: it decodes once plainly first, says so on
    stderr, and the branch draft's run is greedy's, every drafted token accepted."""
    import json

    import numpy as np
    import soundfile as sf

    audio, rate = sf.read(CLIP, dtype="float32")
    fresh = tmp_path / "fresh.wav"  # an input never decoded in this process
    sf.write(fresh, (audio * 0.4).astype(np.float32), rate)
    status = main(["transcribe", str(fresh), "--model", "tiny.en", "--strategy", "speculative", "--draft", "branch",
                   "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "decoding once plainly first" in captured.err
    out = json.loads(captured.out)
    greedy = cli("transcribe", str(fresh), "--model", "tiny.en", "--json")
    assert [t["id"] for t in out["tokens"]] == [t["id"] for t in greedy["tokens"]]
    assert out["speculative"]["acceptance_rate"] == 1.0


@pytest.mark.usefixtures("cli_reuses_models")
def test_translate_branch_decodes_plainly_first(capsys):
    import json

    assert main(["translate", TEXT + " Lisbon again at 10:45.", "--direction", "en-pt", "--json"]) == 0
    greedy = json.loads(capsys.readouterr().out)
    assert main(["translate", TEXT + " Lisbon again at 10:45.", "--direction", "en-pt", "--strategy", "speculative",
                 "--draft", "branch", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert "decoding once plainly first" in captured.err
    assert [t["id"] for t in out["tokens"]] == [t["id"] for t in greedy["tokens"]]
    assert out["speculative"]["acceptance_rate"] == 1.0 and out["speculative"]["draft_tokens"] > 0


def test_text_mode_says_alpha_on_stderr(cli):
    out, err = cli("transcribe", CLIP, "--model", "tiny.en", "--strategy", "speculative", "--draft", "ngram",
                   "--draft-tokens", "2")
    assert out.strip()
    line = [x for x in err.splitlines() if x.startswith("speculative:")]
    assert len(line) == 1, err
    assert re.match(r"speculative: α \d\.\d\d \(accepted/judged\), \d+\.\d tokens per target call, draft ngram",
                    line[0]), line[0]
    # greedy runs print no such line
    _, err = cli("transcribe", CLIP, "--model", "tiny.en")
    assert "speculative:" not in err


def test_compare_lanes_carry_the_speculative_block(cli):
    out = cli("transcribe", CLIP, "--model", "tiny.en", "--compare", "greedy", "speculative:ngram", "--json")
    plain, spec = out["lanes"]
    assert plain.get("speculative") is None
    block = spec["speculative"]
    assert block["draft"] == "ngram"
    for key in ("acceptance_rate", "judged_acceptance_rate", "tokens_per_target_call", "speedup_measured",
                "speedup_predicted", "switched_off"):
        assert key in block
    assert block["speedup_measured"] is not None and block["speedup_measured"] > 0
    text, _ = cli("transcribe", CLIP, "--model", "tiny.en", "--compare", "greedy", "speculative:ngram")
    lane2 = [x for x in text.splitlines() if x.startswith("lane 2")][0]
    assert re.search(r"α \d\.\d\d", lane2) and re.search(r"\d\.\d\d× greedy", lane2), lane2


def test_a_branch_lane_drafts_from_a_plain_decode_first(cli, tmp_path):
    import numpy as np
    import soundfile as sf

    audio, rate = sf.read(CLIP, dtype="float32")
    fresh = tmp_path / "fresh_lanes.wav"  # an input never decoded in this process
    sf.write(fresh, (audio * 0.3).astype(np.float32), rate)
    out = cli("transcribe", str(fresh), "--model", "tiny.en", "--compare", "greedy", "speculative:branch", "--json")
    plain, spec = out["lanes"]
    assert spec["token_ids"] == plain["token_ids"]
    assert spec["speculative"]["draft"] == "branch" and spec["speculative"]["acceptance_rate"] == 1.0
