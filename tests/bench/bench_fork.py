"""Fork latency (issue 12): from the fork request to the first new token, with and without
KV-cache reuse, on whisper-base and the bundled sample clip (or a clip given as argv[1]).

The original run is a greedy decode (top-k report of 10, cross-attention captured, as the
window runs it). A fork at step k forces the original tokens 0..k-1 and the runner-up of
step k (what clicking an alternative in the top-k view asks for), then greedy continues:
``SpeechModel.fork``. Timed from the call to

  - the first StepEvent (with reuse: the forced alternative at step k; without: the forced
    token at step 0, the prefix being re-run),
  - the first new token (the first StepEvent the strategy chose, step k + 1; when the
    model ends the branch at once (EOS), the end of the run, marked ``*``),
  - the end of the branch.

With reuse the engine takes the original run's kept KV cache, truncated to prompt + k
tokens; without (``reuse_cache=False``) it feeds the prompt and the k + 1 forced tokens one
step each. Before each timed fork the original decode runs again (untimed), so every
fork starts from the state the window is in after the original run. Medians of
``--repeats`` runs. Not a pass/fail test: it prints figures.

    .venv/bin/python tests/bench/bench_fork.py [clip.wav] [--threads N] [--repeats N]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.inputs.audio import load_audio  # noqa: E402
from core.events import Finished, StepEvent  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from core.tasks.speech import SpeechModel  # noqa: E402

OPTIONS = DecodingOptions(strategy="greedy", top_k_report=10, capture_attention=True, max_new_tokens=200)


def original(model: SpeechModel, audio) -> list[StepEvent]:
    """The original run's StepEvents (greedy, English)."""
    return [e for e in model.decode(audio, OPTIONS, language="en") if isinstance(e, StepEvent)]


def timed_fork(model: SpeechModel, audio, steps: list[StepEvent], at: int, reuse: bool) -> dict:
    """One fork at step ``at``: seconds to the first StepEvent, to the first new token, to
    the end; the cache positions reused; the branch's tokens."""
    forced = [e.token_id for e in steps[:at]] + [steps[at].topk[1].id]
    t0 = time.perf_counter()
    first = new = None
    fin = None
    for ev in model.fork(audio, OPTIONS, segment=0, forced_ids=forced, step_offset=0, language="en",
                         reuse_cache=reuse):
        if isinstance(ev, StepEvent):
            now = time.perf_counter() - t0
            first = now if first is None else first
            if new is None and not ev.forced:
                new = now
        elif isinstance(ev, Finished):
            fin = ev
    total = time.perf_counter() - t0
    return {"first": first, "new": total if new is None else new, "total": total, "reused": fin.stats.reused_tokens,
            "tokens": len(fin.token_ids) - len(forced), "text": model.backend.decode(fin.token_ids)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("clip", nargs="?", default=str(ROOT / "assets" / "samples" / "speech_en.wav"))
    p.add_argument("--model", default="base")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    audio = load_audio(args.clip)
    model = SpeechModel.load(args.model)
    steps = original(model, audio)
    n = len(steps)
    print(f"{model.name}, {len(audio) / 16000:.1f} s clip, {n} tokens, torch threads {args.threads}, "
          f"median of {args.repeats}")
    print(f"original: {' '.join(e.text.strip() for e in steps)!r}")
    fork_at = sorted({min(4, n - 1), min(14, n - 1), n - 1})
    rows = []
    for at in fork_at:
        res = {True: [], False: []}
        for _ in range(args.repeats):
            for reuse in (True, False):
                original(model, audio)  # the window's state after the original run (untimed)
                res[reuse].append(timed_fork(model, audio, steps, at, reuse))
        med = {r: {k: statistics.median(x[k] for x in v) for k in ("first", "new", "total")} for r, v in res.items()}
        rows.append((at, res[True][0]["reused"], res[True][0]["tokens"], med))
        print(f"fork at step {at + 1} ({steps[at].text!r} -> {steps[at].topk[1].text!r}): {res[True][0]['text']!r}")
    print()
    print("fork at | reused | new   | reuse: 1st event  1st new  branch | no reuse: 1st event  1st new  branch | new-token")
    print("step    | pos.   | tokens|        ms         ms       ms     |           ms         ms       ms     | speed-up")
    for at, reused, tokens, med in rows:
        r, nr = med[True], med[False]
        mark = " " if tokens else "*"
        print(f"{at + 1:>4}th  | {reused:>6} | {tokens:>5} | {1000 * r['first']:>13.1f} {1000 * r['new']:>7.1f}{mark} "
              f"{1000 * r['total']:>8.1f} | {1000 * nr['first']:>16.1f} {1000 * nr['new']:>7.1f}{mark} "
              f"{1000 * nr['total']:>8.1f} | {nr['new'] / r['new']:>6.1f}x")


if __name__ == "__main__":
    main()
