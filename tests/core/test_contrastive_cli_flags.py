"""The CLI's contrastive-decoding flags (issue 21 review items 7, 8): an amateur with a strategy it
does not shape is a usage error (exit 2), a Whisper name as a translation amateur names the flag,
and the help says the flag's default (off) once. Nothing here loads a model."""

from __future__ import annotations

import pytest

from core.cli import main


def test_the_cli_refuses_an_amateur_with_beam_search_in_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["translate", "hello", "--strategy", "beam", "--contrastive-amateur", "layer:2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--contrastive-amateur" in err and "--strategy greedy, sample or mirostat" in err and "beam" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_translate_with_a_whisper_amateur_names_the_flag(capsys):
    assert main(["translate", "hello", "--contrastive-amateur", "tiny.en"]) != 0
    err = capsys.readouterr().err
    assert "--contrastive-amateur: 'tiny.en' is not a translation model; give layer:L, layer:auto or one of: " in err
    assert "en-pt" in err and err.count("\n") == 1


def test_the_amateur_flag_help_says_off_once(capsys):
    with pytest.raises(SystemExit):
        main(["translate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    i = out.index("--contrastive-amateur tiny.en|layer:L|layer:auto contrastive")
    text = out[i:out.index("--cd-alpha", i)]
    assert "(default off)" in text and "(default )" not in text and text.count("default") == 1
