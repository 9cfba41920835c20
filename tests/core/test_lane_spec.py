"""The lane-spec grammar (core/tasks/lane_spec.py) and the CLI's ``--compare`` argument errors
(checked before any model loads, so no model is needed here)."""

from __future__ import annotations

import pytest

from core.cli import build_parser, main
from core.tasks.lane_spec import describe, parse_lane_spec, parse_lanes
from core.options import DecodingOptions


@pytest.mark.parametrize("spec,expected", [
    ("greedy", dict(strategy="greedy")),
    ("beam:5", dict(strategy="beam", num_beams=5)),
    ("beam:5,lp=0.6", dict(strategy="beam", num_beams=5, length_penalty=0.6)),
    ("sample:T=0.8", dict(strategy="sample", temperature=0.8)),
    ("sample:0.8,k=40", dict(strategy="sample", temperature=0.8, top_k=40)),
    ("min-p:0.1", dict(strategy="sample", min_p=0.1)),
    ("top-p:0.9,T=0.7", dict(strategy="sample", top_p=0.9, temperature=0.7)),
    ("top-k:20", dict(strategy="sample", top_k=20)),
    ("diverse-beam:6,groups=3,div=0.8", dict(strategy="diverse_beam", num_beams=6, num_beam_groups=3,
                                              diversity_penalty=0.8)),
    ("contrastive:alpha=0.6,k=4", dict(strategy="contrastive", penalty_alpha=0.6, top_k=4)),
    ("mirostat:tau=4,eta=0.2", dict(strategy="mirostat", mirostat_tau=4.0, mirostat_eta=0.2)),
    ("sample:seed=7,rep=1.2,max=20", dict(strategy="sample", seed=7, repetition_penalty=1.2, max_new_tokens=20)),
    ("sample:seed=none", dict(strategy="sample", seed=None)),
    ("sample:no_repeat_ngram_size=3", dict(strategy="sample", no_repeat_ngram_size=3)),
    ("  Beam : 3 ", dict(strategy="beam", num_beams=3)),
    ("diverse_beam:4", dict(strategy="diverse_beam", num_beams=4)),
])
def test_specs(spec, expected):
    o = parse_lane_spec(spec)
    for k, v in expected.items():
        assert getattr(o, k) == v, k


def test_a_lane_is_the_base_with_the_spec_applied():
    base = DecodingOptions(max_new_tokens=30, repetition_penalty=1.3, strategy="beam", temperature=0.5)
    o = parse_lane_spec("sample:k=10", base)
    assert (o.strategy, o.top_k, o.max_new_tokens, o.repetition_penalty, o.temperature) == ("sample", 10, 30, 1.3, 0.5)
    assert parse_lane_spec("current", base) == base


@pytest.mark.parametrize("spec,message", [
    ("foo", "unknown strategy 'foo'"),
    ("beam:x", "num_beams must be a whole number, got 'x'"),
    ("sample:T=hot", "temperature must be a number, got 'hot'"),
    ("greedy:3", "greedy takes no bare value"),
    ("sample:T=0", "temperature must be > 0"),
    ("beam:5,zz=1", "unknown key 'zz'"),
    ("sample:k=5,", "an empty value between commas"),
    ("diverse-beam:5", "must be a multiple of num_beam_groups"),
    ("sample:bad_words=x", "unknown key 'bad_words'"),
])
def test_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_lane_spec(spec)
    assert str(info.value).startswith(f"lane {spec!r}: ") and "\n" not in str(info.value)


def test_lane_count():
    assert len(parse_lanes(["greedy", "beam:5"])) == 2
    with pytest.raises(ValueError, match="compare 2 to 4 lanes, got 1"):
        parse_lanes(["greedy"])
    with pytest.raises(ValueError, match="compare 2 to 4 lanes, got 5"):
        parse_lanes(["greedy"] * 5)


@pytest.mark.parametrize("spec", ["greedy", "beam:5", "beam:5,lp=0.6", "sample:T=0.8", "sample:T=0.8,k=40,min-p=0.1",
                                  "mirostat:tau=4", "contrastive:alpha=0.6,k=4", "diverse-beam:4,groups=2,div=0.5"])
def test_describe_reads_back(spec):
    o = parse_lane_spec(spec)
    assert parse_lane_spec(describe(o)) == o


@pytest.mark.parametrize("argv,message", [
    (["translate", "Hi.", "--compare", "greedy"], "compare 2 to 4 lanes, got 1"),
    (["translate", "Hi.", "--compare", "greedy", "beam:x"], "lane 'beam:x': num_beams must be a whole number"),
    (["ocr", "nothing.png", "--compare", "greedy", "nucleus"], "lane 'nucleus': unknown strategy"),
    (["transcribe", "nothing.wav", "--reference", "x"], "--reference needs --compare"),
    (["translate", "Hi.", "--compare", "greedy", "beam", "--reference", "a", "--reference-file", "b"],
     "either as --reference TEXT or --reference-file F"),
])
def test_cli_errors_are_one_line_exit_1(argv, message, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1 and message in err and err.count("\n") == 1


def test_cli_help_documents_the_grammar():
    sub = build_parser()._subparsers._group_actions[0].choices
    for name in ("transcribe", "translate", "ocr"):
        text = sub[name].format_help()
        assert "--compare SPEC" in text and "STRATEGY[:ARG,...]" in text and "--reference-file" in text
    assert "WER" in sub["transcribe"].format_help() and "chrF" in sub["translate"].format_help()
    assert "CER" in sub["ocr"].format_help()
