"""Synthetic speculative-decoding events for the GUI tests: a run's StepEvents with their
``speculation`` marks and, after each round's steps, its ``SpeculationRound`` (the order
``core.speculative`` yields them in)."""

from __future__ import annotations

import dataclasses

from core.events import DraftToken, Finished, RunStats, SpeculationRound, SpeculationSummary, StepEvent, TokenProb

from .fakes import WORDS, make_step

#: (drafted, accepted, how the round ends) per round: 4 + 2 + 1 + 4 = the 11 tokens of WORDS
ROUNDS = ((3, 3, "bonus"), (3, 1, "resampled"), (2, 0, "resampled"), (3, 3, "bonus"))

#: the text of the drafted token the target rejected in round r
def rejected_text(r: int) -> str:
    return f" wrong{r}"


def speculative_events(words: list[str] = WORDS, rounds=ROUNDS, *, segment: int = 0, step_offset: int = 0,
                       draft: str = "ngram", sampling: bool = True) -> list[StepEvent | SpeculationRound]:
    """StepEvents and SpeculationRounds in the engine's order for ``words`` (one token each),
    split into ``rounds`` ((drafted, accepted, "bonus" | "resampled") each). A rejected draft
    token is ``rejected_text(round)``; the ones after it are not judged."""
    out: list[StepEvent | SpeculationRound] = []
    i = 0
    for r, (n_drafted, n_acc, kind) in enumerate(rounds):
        first = step_offset + i
        drafted = []
        for j in range(n_drafted):
            if j < n_acc:
                w = words[i + j]
                drafted.append(DraftToken(id=100 + j, text=w, q=0.5, p=0.6, ratio=1.0,
                                          u=0.3 if sampling else None, accepted=True))
            elif j == n_acc:
                drafted.append(DraftToken(id=900 + r, text=rejected_text(r), q=0.8, p=0.2, ratio=0.25,
                                          u=0.7 if sampling else None, accepted=False))
            else:
                drafted.append(DraftToken(id=950 + j, text=f" later{j}", q=0.4, p=0.0, ratio=0.0, u=None,
                                          accepted=False, judged=False))
        n_steps = n_acc + 1
        for j in range(n_steps):
            ev = make_step(first + j, words[i + j])
            ev = dataclasses.replace(ev, segment=segment, speculation="accepted" if j < n_acc else kind,
                                     spec_round=r)
            out.append(ev)
        emitted = words[i + n_acc]
        residual = ([TokenProb(7, emitted, 0.7), TokenProb(8, " cat", 0.2), TokenProb(9, " red", 0.1)]
                    if kind == "resampled" else [])
        out.append(SpeculationRound(
            round=r, step=first, segment=segment, gamma=max(n_drafted, 1), drafted=tuple(drafted),
            n_accepted=n_acc, emitted_id=7, emitted_text=emitted, emitted_kind=kind, residual_topk=residual,
            draft_ms=0.5 + r, target_ms=20.0 + r, draft=draft, near_tie=False))
        i += n_steps
    return out


def summary(rounds=ROUNDS, draft: str = "ngram") -> SpeculationSummary:
    """The SpeculationSummary of :func:`speculative_events` (with made-up timings)."""
    return SpeculationSummary(
        draft=draft, rounds=len(rounds), draft_tokens=sum(d for d, _a, _k in rounds),
        accepted=sum(a for _d, a, _k in rounds), tokens=sum(a + 1 for _d, a, _k in rounds),
        c=0.05, speedup_predicted=1.8, speedup_measured=1.6)


def finished(events, rounds=ROUNDS) -> Finished:
    """The Finished of a run of ``events`` with its speculation summary."""
    steps = [e for e in events if isinstance(e, StepEvent)]
    stats = RunStats(decode_s=0.2, n_tokens=len(steps), speculative=summary(rounds))
    return Finished(text="".join(e.text for e in steps), token_ids=[e.token_id for e in steps], stats=stats)
