"""End to end: ``decoding-explorer stream FILE`` (core/cli/stream.py, issue 23 section 4): a
short espeak clip played as live input at --speed max through tiny.en; the JSON's transcript,
commits, latency, RTF, revisions and WERs; usage errors exit 2, bad files 1. The CLI runs in
this process with the session's model."""

from __future__ import annotations

import json

import pytest
import soundfile as sf

from core.cli import main
from tests.helpers.speech import synth_speech

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("one_torch_thread")]

TEXT = "Hello, my name is John. I live in a small house near the river."


@pytest.fixture(scope="module")
def wav(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "clip.wav"
    sf.write(path, synth_speech(TEXT), 16_000)
    return str(path)


@pytest.fixture
def cli(capsys, monkeypatch, whisper_tiny_en):
    """``main(argv)`` with SpeechModel.load answering tiny.en from the session; (exit, stdout, stderr)."""
    from core.tasks.speech import SpeechModel

    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="base", progress=None, **kw: whisper_tiny_en))

    def run(*argv: str):
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_json_has_the_committed_transcript_commits_latency_and_wers(cli, wav, tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_text(TEXT + "\n", encoding="utf-8")
    code, out, err = cli("stream", wav, "--policy", "local-agreement:2", "--step", "1.0", "--speed", "max",
                         "--model", "tiny.en", "--reference", str(ref), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["task"] == "stream" and d["policy"] == "local-agreement:2" and d["speed"] == "max"
    assert d["text"] and "".join(c["text"] for c in d["commits"]).strip() == d["text"]
    assert len(d["commits"]) >= 2 and d["commits"][0]["audio_s"] < d["audio_s"]
    for c in d["commits"]:
        assert set(c) == {"text", "audio_s", "audio_end_s", "wall_s", "latency_s"}
        assert c["latency_s"] == pytest.approx(max(0.0, c["audio_s"] - c["audio_end_s"]), abs=2e-3)
    assert [c["wall_s"] for c in d["commits"]] == sorted(c["wall_s"] for c in d["commits"])
    assert d["rtf"] > 0 and d["decodes"] >= 3
    assert 0 <= d["latency"]["mean_s"] <= d["audio_s"] and d["latency"]["p90_s"] >= 0
    assert 0 <= d["revised_fraction"] <= 1
    assert d["offline_text"] and d["wer_vs_offline"] <= 0.2
    assert d["reference"] == TEXT and 0 <= d["wer"] <= 0.3
    assert "[" in err and "decoding the file offline" in err  # progress on stderr, JSON alone on stdout


def test_align_att_prints_the_transcript_and_a_summary(cli, wav):
    code, out, err = cli("stream", wav, "--policy", "align-att:25", "--speed", "max", "--model", "tiny.en",
                         "--reference", TEXT)
    assert code == 0, err
    assert "name is John" in out and "RTF" in err and "vs the reference" in err


@pytest.mark.parametrize("argv, says", [
    (["--policy", "wait-k:3"], "unknown streaming policy"),
    (["--policy", "local-agreement:x"], "not a number"),
    (["--step", "0"], "must be > 0"),
    (["--speed", "slow"], "--speed is 1"),
    (["--max-lag", "-1"], "must be > 0"),
    (["--step", "15"], "shorter than 15"),                           # exited 1 (the driver refused it)
    (["--policy", "fixed-window:3", "--step", "5"], "longer than the step"),  # exited 1
    (["--encoder", "half"], "invalid choice"),
    (["--prompt-tokens", "0"], "must be >= 1"),
    (["--policy", "align-att:25", "--prompt-tokens", "45"], "local-agreement only"),
    (["--policy", "align-att:25", "--no-forced-prefix"], "--no-forced-prefix applies to local-agreement only"),
    (["--policy", "fixed-window", "--no-forced-prefix"], "--no-forced-prefix applies to local-agreement only"),
])
def test_bad_flags_exit_2_with_one_line(capsys, wav, argv, says):
    with pytest.raises(SystemExit) as e:
        main(["stream", wav, *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_bad_files_exit_1_with_a_clear_message(capsys, tmp_path):
    assert main(["stream", str(tmp_path / "missing.wav"), "--speed", "max"]) == 1
    assert "missing.wav" in capsys.readouterr().err
    bad = tmp_path / "notaudio.wav"
    bad.write_text("this is not audio")
    assert main(["stream", str(bad), "--speed", "max"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("decoding-explorer: error:") and "notaudio.wav" in err
    assert main(["stream", str(bad), "--reference", str(tmp_path / "nope.txt")]) == 1
    assert "--reference" in capsys.readouterr().err


def test_a_draft_that_needs_another_run_is_refused(capsys, wav):
    assert main(["stream", wav, "--strategy", "speculative", "--draft", "branch"]) == 1
    assert "choose ngram" in capsys.readouterr().err


def test_silence_prints_dashes_for_the_figures_it_has_none_of(cli, tmp_path):
    """Silence: offline gives no text, so there is no WER against it; the summary line says "–"
    instead of failing on the missing figure (a TypeError before)."""
    import numpy as np

    path = tmp_path / "silence.wav"
    sf.write(path, np.zeros(16_000 * 3, np.float32), 16_000)
    code, out, err = cli("stream", str(path), "--speed", "max", "--model", "tiny.en")
    assert code == 0, err
    assert "WER – vs offline" in err


def test_int8_is_offered_for_stream_and_the_json_names_it(capsys, monkeypatch, wav, whisper_tiny_en):
    from core.tasks.speech import SpeechModel

    asked = {}

    def load(cls, name="base", progress=None, **kw):
        asked.update(kw)
        return whisper_tiny_en

    monkeypatch.setattr(SpeechModel, "load", classmethod(load))
    code = main(["stream", wav, "--speed", "max", "--model", "tiny.en", "--dtype", "int8", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert asked == {"dtype": "int8"} and json.loads(out)["dtype"] == "float32"  # the fake model is float32


@pytest.mark.parametrize("encoder", ["window", "buffer"])
def test_either_encoder_is_offered_and_the_json_names_it(cli, wav, encoder):
    """``--encoder buffer`` (the default) encodes only the buffer's frames (whisper.cpp's
    audio_ctx), ``window`` the padded 30 s window; the text stays close to offline either way and
    the JSON says which encoder ran and how many decodes were redone."""
    code, out, err = cli("stream", wav, "--speed", "max", "--model", "tiny.en", "--encoder", encoder, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["encoder"] == encoder and d["fallbacks"] >= 0
    assert d["text"] and d["wer_vs_offline"] <= 0.2


@pytest.mark.parametrize("policy, step", [("local-agreement:2", 0.5), ("align-att:25", 1.0)])
def test_without_step_each_policy_takes_its_own_default_step(cli, wav, policy, step):
    """Session 11's bench: local-agreement's latency is about 1.5 steps plus a decode, so its
    default step is 0.5 s; align-att keeps 1.0 s (a shorter step made its text worse)."""
    code, out, err = cli("stream", wav, "--policy", policy, "--speed", "max", "--model", "tiny.en", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["step_s"] == step and f"step {step:g} s" in err
    assert d["decodes"] >= int(d["audio_s"] / step) - 1


def _built(monkeypatch, attr: str) -> list:
    """The ``attr`` of each LocalAgreement policy built, in order (the last one built is the one
    that ran)."""
    from core.streaming import LocalAgreement

    built = []
    real = LocalAgreement.__init__

    def init(self, *a, **kw):
        real(self, *a, **kw)
        built.append(getattr(self, attr))

    monkeypatch.setattr(LocalAgreement, "__init__", init)
    return built


@pytest.fixture
def built_prompt_tokens(monkeypatch):
    """The ``prompt_tokens`` of each LocalAgreement policy built, in order."""
    return _built(monkeypatch, "prompt_tokens")


@pytest.fixture
def built_forced_prefix(monkeypatch):
    """The ``forced_prefix`` of each LocalAgreement policy built, in order."""
    return _built(monkeypatch, "forced_prefix")


def test_prompt_tokens_reach_the_local_agreement_policy_and_the_json(cli, wav, built_prompt_tokens):
    """--prompt-tokens N is local-agreement's ``prompt_tokens`` (the policy's own test,
    test_streaming_local_agreement, checks what it does to the prompt); the JSON reads it back
    from the policy that ran: N, or null (all the text) without the flag."""
    built = built_prompt_tokens
    code, out, err = cli("stream", wav, "--speed", "max", "--model", "tiny.en", "--prompt-tokens", "45", "--json")
    assert code == 0, err
    assert json.loads(out)["prompt_tokens"] == 45 and built[-1] == 45  # the last built is the one that ran
    built.clear()
    code, out, err = cli("stream", wav, "--speed", "max", "--model", "tiny.en", "--json")
    assert code == 0, err
    assert json.loads(out)["prompt_tokens"] is None and built and built[-1] is None


def test_prompt_tokens_all_keeps_all_the_text_and_is_refused_with_other_policies(cli, wav, built_prompt_tokens, capsys):
    """``--prompt-tokens all`` (the Live view's "all"): the policy keeps all the text before the
    buffer (``prompt_tokens`` None), whatever the default; with align-att it is refused (exit 2)."""
    built = built_prompt_tokens
    code, out, err = cli("stream", wav, "--speed", "max", "--model", "tiny.en", "--prompt-tokens", "all", "--json")
    assert code == 0, err
    assert json.loads(out)["prompt_tokens"] is None and built and built[-1] is None
    with pytest.raises(SystemExit) as e:
        main(["stream", wav, "--policy", "align-att:25", "--prompt-tokens", "all"])
    assert e.value.code == 2 and "local-agreement only" in capsys.readouterr().err


def test_no_forced_prefix_reaches_the_local_agreement_policy_and_the_json(cli, wav, built_forced_prefix):
    """--no-forced-prefix is local-agreement's ``forced_prefix=False`` (whisper_streaming's free
    re-decode; test_streaming_local_agreement checks what it does); the JSON reads it back from
    the policy that ran: false with the flag, true (forced, the default) without it."""
    built = built_forced_prefix
    code, out, err = cli("stream", wav, "--speed", "max", "--model", "tiny.en", "--no-forced-prefix", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["forced_prefix"] is False and built[-1] is False  # the last built is the one that ran
    assert d["text"].strip()  # the free re-decode transcribes the clip
    built.clear()
    code, out, err = cli("stream", wav, "--speed", "max", "--model", "tiny.en", "--json")
    assert code == 0, err
    assert json.loads(out)["forced_prefix"] is True and built and built[-1] is True


def test_no_forced_prefix_is_in_the_help(capsys):
    """``stream --help`` offers --no-forced-prefix and says what it does and what it costs."""
    with pytest.raises(SystemExit) as e:
        main(["stream", "--help"])
    assert e.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--no-forced-prefix" in help_text and "whisper_streaming" in help_text and "latency" in help_text
