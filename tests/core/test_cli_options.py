"""The decoding flags: each maps to its DecodingOptions field, bad values give one line.

No model is loaded: ``build_parser`` + ``options_from_args`` only, and ``main`` for the
exit statuses of values rejected before a model loads.
"""

import pytest

from core.cli import build_parser, main
from core.cli.options import options_from_args
from core.options import LLAMA_CPP_SAMPLER_ORDER, STAGES, DecodingOptions


def _options(*flags: str) -> DecodingOptions:
    args = build_parser().parse_args(["translate", "x", *flags])
    return options_from_args(args)


def test_defaults_equal_the_dataclass_defaults():
    assert _options() == DecodingOptions(capture_attention=False)


FLAGS = [
    (["--min-p", "0.05"], "min_p", 0.05),
    (["--typical-p", "0.9"], "typical_p", 0.9),
    (["--epsilon-cutoff", "0.0003"], "epsilon_cutoff", 0.0003),
    (["--eta-cutoff", "0.002"], "eta_cutoff", 0.002),
    (["--top-h", "0.4"], "top_h", 0.4),
    (["--top-n-sigma", "1.5"], "top_n_sigma", 1.5),
    (["--mirostat-tau", "3"], "mirostat_tau", 3.0),
    (["--mirostat-eta", "0.2"], "mirostat_eta", 0.2),
    (["--bad-words", "cat", "dog"], "bad_words", ("cat", "dog")),
    (["--logit-bias", " the=-5", "--logit-bias", "a=b=2"], "logit_bias", ((" the", -5.0), ("a=b", 2.0))),
    (["--min-new-tokens", "7"], "min_new_tokens", 7),
    (["--strategy", "diverse-beam"], "strategy", "diverse_beam"),
    (["--strategy", "contrastive", "--top-k", "4"], "strategy", "contrastive"),
    (["--strategy", "mirostat"], "strategy", "mirostat"),
    (["--beam-groups", "4"], "num_beam_groups", 4),
    (["--diversity-penalty", "1.5"], "diversity_penalty", 1.5),
    (["--penalty-alpha", "0.3"], "penalty_alpha", 0.3),
    (["--xtc-probability", "0.5"], "xtc_probability", 0.5),
    (["--xtc-threshold", "0.2"], "xtc_threshold", 0.2),
    (["--dry-multiplier", "0.8"], "dry_multiplier", 0.8),
    (["--dry-base", "2"], "dry_base", 2.0),
    (["--dry-allowed-length", "3"], "dry_allowed_length", 3),
    (["--dynatemp-range", "0.5"], "dynatemp_range", 0.5),
    (["--dynatemp-exponent", "2"], "dynatemp_exponent", 2.0),
    (["--top-a", "0.2"], "top_a", 0.2),
    (["--tfs", "0.95"], "tfs", 0.95),
    (["--smoothing-factor", "0.3"], "smoothing_factor", 0.3),
    (["--smoothing-curve", "2"], "smoothing_curve", 2.0),
    (["--encoder-repetition-penalty", "1.3"], "encoder_repetition_penalty", 1.3),
    (["--encoder-no-repeat-ngram", "3"], "encoder_no_repeat_ngram_size", 3),
    (["--length-decay", "5", "1.1"], "length_decay_factor", 1.1),
    (["--length-decay", "5", "1.1"], "length_decay_start", 5),
]


@pytest.mark.parametrize("flags,field,value", FLAGS, ids=[f[1] + str(i) for i, f in enumerate(FLAGS)])
def test_flag_sets_its_field(flags, field, value):
    options = _options(*flags)
    assert getattr(options, field) == value
    assert getattr(DecodingOptions(), field) != value  # the flag changed something


def test_sampler_order_runs_only_the_listed_stages_in_that_order():
    o = _options("--sampler-order", "min_p,top-k,temperature", "--min-p", "0.1", "--top-k", "5")
    assert o.sampler_order[:3] == ("min_p", "top_k", "temperature")
    assert sorted(o.sampler_order) == sorted(STAGES)
    assert set(o.disabled_stages) == set(STAGES) - {"min_p", "top_k", "temperature"}
    assert [s for s in o.sampler_order if o.stage_enabled(s)] == ["min_p", "top_k", "temperature"]
    assert _options("--sampler-order", "llama.cpp").sampler_order == LLAMA_CPP_SAMPLER_ORDER
    assert _options("--sampler-order", "transformers").sampler_order == STAGES


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--min-p", "1.5"], "min_p must be in [0.0, 1.0]"),
        (["--tfs", "0"], "tfs must be in (0.0, 1.0]"),
        (["--typical-p", "0"], "typical_p must be in (0.0, 1.0]"),
        (["--strategy", "diverse-beam", "--beams", "3"], "multiple of num_beam_groups (2), e.g. 4"),
        (["--strategy", "contrastive"], "contrastive search needs top_k >= 1"),
        (["--mirostat-tau", "0"], "mirostat_tau must be > 0"),
        (["--dynatemp-range", "1.0"], "must be smaller than the temperature"),
        (["--sampler-order", "top_k", "--min-p", "0.1"], "min_p is set but not in --sampler-order"),
        (["--length-decay", "2.5", "1.1"], "--length-decay START must be a whole number"),
        (["--dry-allowed-length", "0"], "dry_allowed_length must be >= 1"),
    ],
)
def test_out_of_range_is_one_line_exit_1(capsys, flags, message):
    assert main(["translate", "hello", *flags]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--logit-bias", "nothing"], "--logit-bias takes TEXT=VALUE"),
        (["--logit-bias", "cat=lots"], "--logit-bias value must be a number"),
        (["--sampler-order", "top_k,bogus"], "unknown stage(s) bogus"),
        (["--strategy", "nucleus"], "invalid choice"),
    ],
)
def test_malformed_flag_is_one_line_exit_2(capsys, flags, message):
    with pytest.raises(SystemExit) as exc:
        main(["translate", "hello", *flags])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "--help" in err


def test_preset_then_flags_override_it():
    o = _options("--preset", "llama.cpp defaults")
    assert (o.strategy, o.temperature, o.top_k, o.top_p, o.min_p) == ("sample", 0.8, 40, 0.95, 0.05)
    assert o.sampler_order == LLAMA_CPP_SAMPLER_ORDER
    o = _options("--preset", "llama.cpp defaults", "--top-k", "5", "--strategy", "greedy")
    assert (o.strategy, o.top_k, o.min_p) == ("greedy", 5, 0.05)


def test_unknown_preset_is_one_line(capsys):
    assert main(["translate", "hello", "--preset", "nope"]) == 1
    err = capsys.readouterr().err
    assert "unknown preset 'nope'" in err and "llama.cpp defaults" in err and err.count("\n") == 1


def test_help_shows_each_flags_default(capsys):
    with pytest.raises(SystemExit):
        main(["translate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--min-p MIN_P keep p >= min_p * p_max; 0 = off (default 0.0)" in out
    assert "(default 4)" in out  # --beams
