"""End to end: the sampler chain's flags on the real bundled Bergamot en-pt model.

Each flag must change the translation the way its definition says, and the JSON trace
must report the chain stage by stage.
"""

import json

import pytest

from core.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("cli_reuses_models")]  # the session's en-pt, loaded once

CAT = "The cat sat on the mat."


def _run(capsys, *argv):
    code = main(["translate", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _trace(capsys, *argv):
    return json.loads(_run(capsys, *argv, "--json"))


def test_bad_words_and_logit_bias_remove_a_word(capsys):
    plain = _run(capsys, CAT).strip()
    assert "gato" in plain
    for flags in (["--bad-words", "gato"], ["--logit-bias", "gato=-100"]):
        changed = _run(capsys, CAT, *flags).strip()
        assert "gato" not in changed.lower() and changed != plain


def test_encoder_no_repeat_ngram_forbids_copying_the_source(capsys):
    text = "I bought 3 apples for $2.50 at Walmart."
    plain = _trace(capsys, text)
    assert " 3" in plain["text"] or plain["text"].split()[2] == "3"
    blocked = _trace(capsys, text, "--encoder-no-repeat-ngram", "1")
    assert blocked["reason"] == "eos"  # EOS is not treated as a source token: it still ends
    plain_ids = {t["id"] for t in plain["tokens"]}
    blocked_ids = {t["id"] for t in blocked["tokens"]}
    assert blocked_ids != plain_ids
    assert [s["name"] for s in blocked["tokens"][0]["stages"]] == ["encoder_no_repeat_ngram"]


def test_min_new_tokens_delays_the_end(capsys):
    short = _trace(capsys, "Hi.")
    longer = _trace(capsys, "Hi.", "--min-new-tokens", str(len(short["tokens"]) + 4))
    assert len(longer["tokens"]) >= len(short["tokens"]) + 4


def test_json_reports_every_stage_in_the_chosen_order(capsys):
    trace = _trace(capsys, CAT, "--strategy", "sample", "--seed", "3", "--top-k", "8", "--min-p", "0.05",
                   "--temperature", "0.9", "--sampler-order", "min_p,top_k,temperature")
    for tok in trace["tokens"]:
        stages = tok["stages"]
        assert [s["name"] for s in stages] == ["min_p", "top_k", "temperature"]
        assert 1 <= stages[1]["kept"] <= stages[0]["kept"] and stages[1]["kept"] <= 8
        assert stages[2]["kept"] == stages[1]["kept"] and stages[2]["mass"] == pytest.approx(1.0, abs=1e-5)
        assert all(0.0 < s["mass"] <= 1.0 for s in stages)
        assert tok["rank"] >= 1
    assert trace["options"]["sampler_order"][:3] == ["min_p", "top_k", "temperature"]


def test_mirostat_reports_mu_per_token(capsys):
    trace = _trace(capsys, CAT, "--strategy", "mirostat", "--mirostat-tau", "3", "--mirostat-eta", "0.5")
    mus = [t["mu"] for t in trace["tokens"]]
    assert mus[0] == pytest.approx(6.0)  # mu starts at 2 * tau
    assert len(set(mus)) > 1  # and moves


@pytest.mark.parametrize("flags", [["--strategy", "diverse-beam", "--beams", "4", "--beam-groups", "2"],
                                   ["--strategy", "contrastive", "--top-k", "4", "--penalty-alpha", "0.6"]])
def test_new_strategies_translate(capsys, flags):
    out = _run(capsys, CAT, *flags).strip()
    assert "gato" in out


def test_encoder_stage_outside_translation_is_one_line(capsys, tmp_path):
    import numpy as np
    import soundfile as sf

    wav = tmp_path / "silence.wav"
    sf.write(wav, np.zeros(8000, dtype="float32"), 16000)
    assert main(["transcribe", str(wav), "--model", "tiny.en", "--encoder-repetition-penalty", "1.2"]) == 1
    err = capsys.readouterr().err
    assert "applies to translation only" in err and err.count("\n") == 1
