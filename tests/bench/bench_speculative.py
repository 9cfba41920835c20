"""Speculative decoding benchmark (issue 21): per pair and draft kind, in one run,

- α (accepted / drafted), α̂ (accepted / judged: what Theorem 3.8 takes) and tokens per target call,
- c, measured: the draft's ms per drafted token over plain greedy's ms per token,
- ms/token of the speculative run against plain greedy on the same input in the same run
  (runs alternate; the best of ``--repeats`` runs, the least disturbed by other processes on
  a shared machine; ``--median`` for medians), and their ratio (the measured speed-up),
- the predicted speed-up: Leviathan et al. 2023 Theorem 3.8 from the measured α̂, the mean γ
  and c, with the verify call's measured cost (``core.speculative.rule.predicted_speedup``
  with ``verify_ms`` = plain ms/token x the measured cost of a (γ + 1)-token decoder call over a
  1-token call: the curve printed first) for the drafted rounds, mixed with the run's plain
  steps at 1x (rounds without a draft, probes, steps after the off switch), beside the
  measured one,
- whether the configuration loses (measured speed-up < 1).

Pairs: whisper-base on the bundled clip and on espeak-ng speech (drafts: ngram,
early-exit:4, early-exit:5, early-exit:4#8192 with a shortlist head, model:tiny.en with its
full head, model:tiny.en#8192 with an 8192-id shortlist head); Bergamot en-pt on a text with names and numbers (ngram, early-exit:1).
The output is checked too: every speculative run's ids must equal plain greedy's (greedy
verification), a mismatch is printed. Not a pass/fail test: it prints figures.

    .venv/bin/python tests/bench/bench_speculative.py [--threads 1 2] [--repeats 3] [--only speech|translation]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from core.events import Finished, SpeculationRound, StepEvent  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from core.speculative.rule import predicted_speedup  # noqa: E402

SPEECH_DRAFTS = ("ngram", "early-exit:4", "early-exit:5", "early-exit:4#8192", "model:tiny.en", "model:tiny.en#8192")
TRANSLATION_DRAFTS = ("ngram", "early-exit:1")
ESPEAK_TEXT = ("The meeting is on Monday the fourth of March at ten thirty in room two hundred and five. "
               "Please bring the report on the new budget, the report on the old budget, and the list of names. "
               "Anna Schmidt, Peter Jones and Maria Garcia will present the figures for the first quarter, "
               "the second quarter and the third quarter.")
TRANSLATION_TEXT = ("John Smith lives at 42 Baker Street in London. John Smith works for the Bank of London "
                    "since 1999. On Monday, 3 March 2024, John Smith and Mary Jones met at 42 Baker Street. "
                    "The meeting at 42 Baker Street started at 10:30 and ended at 12:45.")
VERIFY_LENGTHS = (1, 2, 3, 4, 5, 6, 8)
STAT = [min]
"""How repeated timings are summarised: the best (default) or the median (``--median``)."""


def verify_curve(backend, encoded, prompt_ids, prefix: int = 20, reps: int = 7) -> dict[int, float]:
    """ms of one decoder call scoring k tokens after a ``prefix``-token context, k in
    ``VERIFY_LENGTHS`` (``STAT`` of ``reps``, the lengths interleaved; the cache cut back
    between calls)."""
    ids = list(prompt_ids) + [int(t) for t in torch.randint(300, 5000, (prefix + 8,), generator=torch.Generator().manual_seed(0))]
    cache = backend.init_cache(encoded, 1)
    cache = backend.step(torch.tensor([ids[:prefix]]), cache, False).cache
    times: dict[int, list[float]] = {k: [] for k in VERIFY_LENGTHS}
    for _ in range(reps):
        for k in VERIFY_LENGTHS:
            t0 = time.perf_counter()
            res = backend.step(torch.tensor([ids[prefix:prefix + k]]), cache, False, all_positions=True)
            times[k].append((time.perf_counter() - t0) * 1e3)
            cache = backend.truncate_cache(res.cache, prefix)
    return {k: STAT[0](v) for k, v in times.items()}


def curve_ratio(curve: dict[int, float], k: float) -> float:
    """The cost of a k-token call over a 1-token call, linearly interpolated."""
    ks = sorted(curve)
    return float(np.interp(k, ks, [curve[x] for x in ks])) / curve[1]


def run_once(decode, options) -> dict:
    """One run: its wall ms, ids, and the speculation counts from its events."""
    t0 = time.perf_counter()
    events = list(decode(options))
    wall = (time.perf_counter() - t0) * 1e3
    fin = events[-1]
    assert isinstance(fin, Finished)
    rounds = [e for e in events if isinstance(e, SpeculationRound)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    plain_steps = sum(1 for e in steps if not e.speculation)
    return {
        "ms": wall, "ids": list(fin.token_ids), "tokens": len(steps),
        "drafted": sum(len(r.drafted) for r in rounds), "accepted": sum(r.n_accepted for r in rounds),
        "judged": sum(sum(1 for d in r.drafted if d.judged) for r in rounds),
        "rounds": len(rounds), "calls": len(rounds) + plain_steps,
        "draft_ms": sum(r.draft_ms for r in rounds), "gammas": [r.gamma for r in rounds],
        "plain_steps": plain_steps,
        "off": (getattr(fin.stats.speculative, "switched_off", "") if fin.stats.speculative else ""),
    }


def bench_input(label: str, decode, drafts, curve, repeats: int, base: DecodingOptions) -> list[dict]:
    """Plain greedy and each draft on one input, alternating, medians; one row per draft."""
    plain_opts = base.with_(strategy="greedy")
    spec_opts = {d: base.with_(strategy="speculative", draft=d) for d in drafts}
    run_once(decode, plain_opts)  # warm-up (and loads the draft models)
    for o in spec_opts.values():
        run_once(decode, o)
    plain, spec = [], {d: [] for d in drafts}
    for _ in range(repeats):
        plain.append(run_once(decode, plain_opts))
        for d, o in spec_opts.items():
            spec[d].append(run_once(decode, o))
    ref = plain[0]["ids"]
    t1 = STAT[0]([r["ms"] / max(1, r["tokens"]) for r in plain])
    rows = [{"input": label, "draft": "greedy (plain)", "ms_tok": t1, "tokens": plain[0]["tokens"]}]
    for d in drafts:
        runs = spec[d]
        r0 = runs[0]
        ms_tok = STAT[0]([r["ms"] / max(1, r["tokens"]) for r in runs])
        alpha = r0["accepted"] / r0["drafted"] if r0["drafted"] else 0.0
        # Theorem 3.8 takes the acceptance of the tokens the target judged (those after the first
        # rejection of a round were never looked at): alpha-hat = accepted / judged
        alpha_hat = r0["accepted"] / r0["judged"] if r0["judged"] else 0.0
        c = (STAT[0]([r["draft_ms"] / r["drafted"] for r in runs]) / t1) if r0["drafted"] else None
        gamma = statistics.mean(r0["gammas"]) if r0["gammas"] else 0.0
        pred = None
        if c is not None and gamma:
            drafted_rounds = predicted_speedup(alpha_hat, gamma, c * t1, t1 * curve_ratio(curve, gamma + 1), t1)
            # the run mixes drafted rounds and plain steps (rounds with no draft, probes, after the
            # off switch): their times add, the plain ones at 1x
            n, n_plain = r0["tokens"], r0["plain_steps"]
            if drafted_rounds:
                pred = n / ((n - n_plain) / drafted_rounds + n_plain)
        rows.append({
            "input": label, "draft": d, "ms_tok": ms_tok, "tokens": r0["tokens"], "alpha": alpha, "alpha_hat": alpha_hat,
            "tpc": r0["tokens"] / max(1, r0["calls"]), "c": c, "gamma": gamma,
            "measured": t1 / ms_tok, "predicted": pred, "same": all(r["ids"] == ref for r in runs),
            "off": r0["off"],
        })
    return rows


def speech_rows(repeats: int) -> tuple[list[dict], dict]:
    from core.inputs.audio import load_audio
    from core.tasks.speech import SpeechModel

    sm = SpeechModel.load("base")
    clip = load_audio(str(ROOT / "assets" / "samples" / "speech_en.wav"))
    inputs = [("clip 7.6 s", clip)]
    try:
        from tests.helpers.speech import synth_speech

        inputs.append((f"espeak {len(synth_speech(ESPEAK_TEXT)) / 16000:.0f} s", synth_speech(ESPEAK_TEXT)))
    except RuntimeError as exc:  # no espeak-ng
        print(f"(espeak speech skipped: {exc})")
    encoded = sm._encode(clip)[0]
    curve = verify_curve(sm.backend, encoded, sm.prompt("en", "transcribe").prompt_ids)
    base = DecodingOptions(max_new_tokens=220, capture_attention=False)
    rows = []
    for label, audio in inputs:
        rows += bench_input(label, lambda o, a=audio: sm.decode(a, o, language="en"), SPEECH_DRAFTS, curve, repeats,
                            base)
    return rows, curve


def translation_rows(repeats: int) -> tuple[list[dict], dict]:
    from core.tasks.translation import TranslationModel

    tm = TranslationModel.load("en-pt")
    chunk = tm.chunks(TRANSLATION_TEXT)[0]
    encoded = tm._encode(chunk)[0]
    curve = verify_curve(tm.backend, encoded, tm.decoder_prompt(encoded).prompt_ids, prefix=10)
    base = DecodingOptions(max_new_tokens=200, capture_attention=False)
    rows = bench_input("en-pt text", lambda o: tm.decode(TRANSLATION_TEXT, o), TRANSLATION_DRAFTS, curve, repeats,
                       base)
    return rows, curve


def fmt(x, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(title: str, rows: list[dict], curve: dict) -> None:
    print(f"\n== {title}")
    print("verify call ms by tokens scored: " + ", ".join(f"{k}: {v:.1f}" for k, v in curve.items()))
    print(f"{'input':<14} {'draft':<20} {'ms/tok':>7} {'tok':>4} {'alpha':>6} {'a_hat':>6} {'tok/call':>8} {'gamma':>5} "
          f"{'c':>5} {'measured':>8} {'predicted':>9}  verdict")
    for r in rows:
        if "alpha" not in r:
            print(f"{r['input']:<14} {r['draft']:<20} {r['ms_tok']:7.1f} {r['tokens']:4d}")
            continue
        verdict = "loses" if r["measured"] < 1.0 else "wins"
        if not r["same"]:
            verdict += ", IDS DIFFER"
        if r["off"]:
            verdict += ", switched off"
        print(f"{r['input']:<14} {r['draft']:<20} {r['ms_tok']:7.1f} {r['tokens']:4d} {r['alpha']:6.2f} "
              f"{r['alpha_hat']:6.2f} {r['tpc']:8.2f} {r['gamma']:5.1f} {fmt(r['c']):>5} {r['measured']:7.2f}x "
              f"{fmt(r['predicted']):>8}x  {verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1], help="torch threads, e.g. --threads 1 2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("speech", "translation"), default=None)
    ap.add_argument("--median", action="store_true", help="medians of the repeats instead of the best")
    args = ap.parse_args()
    if args.median:
        STAT[0] = statistics.median
    print(f"timings: {'median' if args.median else 'best'} of {args.repeats} runs, alternating plain and drafted")
    for threads in args.threads:
        torch.set_num_threads(threads)
        print(f"\n######## torch threads: {threads}")
        if args.only in (None, "speech"):
            rows, curve = speech_rows(args.repeats)
            print_table(f"whisper-base, {threads} thread(s)", rows, curve)
        if args.only in (None, "translation"):
            rows, curve = translation_rows(args.repeats)
            print_table(f"Bergamot en-pt, {threads} thread(s)", rows, curve)


if __name__ == "__main__":
    main()
