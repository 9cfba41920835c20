"""``--policy`` specs -> streaming policies: ``local-agreement:n``, ``align-att:f``,
``fixed-window[:length_s]``."""

from __future__ import annotations

from core.streaming.align_att import AlignAtt
from core.streaming.base import Policy
from core.streaming.fixed_window import FixedWindow
from core.streaming.local_agreement import LocalAgreement

#: the policies' names, as --policy takes them
POLICIES = ("local-agreement", "align-att", "fixed-window")


def default_step(spec: str) -> float:
    """The step (s) a policy takes when none is given: 0.5 s for local-agreement (its latency is
    about 1.5 steps plus a decode), 1.0 s for align-att and fixed-window. (Session 11: a 0.5 s
    step made align-att's text worse on tiny.en, WER 13.5-16.5 against 9.8-11.3 on 10 sentences;
    session 12, once AlignAtt held back a last word that may be cut and waited for 2 s of audio
    at the start, 30 sentences at real time on CPU time: align-att:25 step 0.5 mean latency
    0.96 s at WER 9.4, step 1 1.25 s at WER 9.2, one run each: ``--step 0.5`` gives the lower
    latency at about the same text.)

    Raises:
        ValueError: an unknown policy.
    """
    return parse_policy(spec).step_s


def parse_policy(spec: str, step_s: float | None = None, **settings) -> Policy:
    """``"local-agreement:2"``, ``"align-att:25"``, ``"fixed-window"`` / ``"fixed-window:10"``
    -> the policy (``step_s``: seconds of new audio between updates; None: the policy's own
    default, see :func:`default_step`).

    Raises:
        ValueError: an unknown policy or a bad parameter (the message lists the policies).
    """
    name, _, arg = spec.partition(":")
    kinds = {"local-agreement": (LocalAgreement, "n", int), "align-att": (AlignAtt, "frames", int),
             "fixed-window": (FixedWindow, "length_s", float)}
    if name not in kinds:
        raise ValueError(f"unknown streaming policy {spec!r}; use local-agreement:N (e.g. local-agreement:2), "
                         "align-att:F (frames, e.g. align-att:25) or fixed-window[:LENGTH_S]")
    cls, field, kind = kinds[name]
    if arg:
        try:
            settings[field] = kind(arg)
        except ValueError:
            raise ValueError(f"--policy {spec}: {arg!r} is not a number; e.g. {name}:2") from None
    if step_s is None:
        return cls(**settings)
    if not step_s > 0:
        raise ValueError(f"the step must be > 0 seconds, got {step_s}")
    return cls(step_s=step_s, **settings)
