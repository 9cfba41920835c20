"""Issue 19 §7: messages that point at the fix (a lane spec written with a comma after the
strategy, an empty ``--fallback-temperatures``). No model is loaded: both are refused while
the arguments are read."""

from __future__ import annotations

import pytest

from core.cli import main
from core.tasks.lane_spec import parse_lane_spec


@pytest.mark.parametrize("spec,suggestion", [
    ("greedy,seed=1", "greedy:seed=1"),
    ("sample,T=0.8,k=40", "sample:T=0.8,k=40"),
    ("beam,5", "beam:5"),
    ("greedy;seed=1", None),
])
def test_a_comma_after_the_strategy_suggests_the_colon_form(spec, suggestion):
    with pytest.raises(ValueError) as info:
        parse_lane_spec(spec)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"lane {spec!r}: ")
    if suggestion:
        assert f"write {suggestion!r}" in message and "STRATEGY:KEY=VALUE" in message
        parse_lane_spec(suggestion)  # what it suggests is a valid spec
    else:
        assert "STRATEGY:KEY=VALUE" in message


@pytest.mark.parametrize("value", ["", " ", ",", " , "])
def test_empty_fallback_temperatures_are_refused(capsys, value):
    with pytest.raises(SystemExit) as exc:
        main(["transcribe", "x.wav", "--fallback-temperatures", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--fallback-temperatures" in err and "at least one temperature" in err and err.count("\n") == 1


def test_fallback_temperatures_still_read():
    from core.cli.longform import _temperatures

    assert _temperatures("0,0.2, 0.4") == (0.0, 0.2, 0.4)
    assert _temperatures("0.5") == (0.5,)
