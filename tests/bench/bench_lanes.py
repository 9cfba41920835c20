"""Decoding lanes (issue 13): 4 lanes on one encoder output vs 4 separate runs.

whisper-base on the bundled sample clip (or a clip given as argv[1]); the lanes are the
issue's example: greedy | beam 5 | sample T=0.8 | min-p 0.1 (sampling seeded, English,
top-k report 10 and cross-attention captured, as the window runs them).

  - lanes: ``SpeechModel.decode_lanes``: the encoder runs once per 30 s window, the four
    decoders interleaved on its output;
  - separate: four ``SpeechModel.decode`` runs one after another, each encoding again
    (the encoder cache is cleared before each, as for four separate invocations);
  - separate, cached: the four runs with the encoder cache kept (what the window does when
    the user changes the strategy four times).

Each lane's tokens are checked equal to its separate run. Medians of ``--repeats`` runs,
after one untimed warm-up. Not a pass/fail test: it prints figures.

    .venv/bin/python tests/bench/bench_lanes.py [clip.wav] [--threads N] [--repeats N]
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
from core.events import Finished  # noqa: E402
from core.tasks.lane_spec import parse_lane_spec  # noqa: E402
from core.tasks.lanes import LanesFinished  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from core.tasks.speech import SpeechModel  # noqa: E402

SPECS = ("greedy", "beam:5", "sample:T=0.8", "min-p:0.1")
BASE = DecodingOptions(top_k_report=10, capture_attention=True, max_new_tokens=200)


def run_lanes(model: SpeechModel, audio, lanes) -> tuple[float, LanesFinished]:
    model._cache.clear()
    t0 = time.perf_counter()
    done = None
    for ev in model.decode_lanes(audio, lanes, language="en"):
        if isinstance(ev, LanesFinished):
            done = ev
    return time.perf_counter() - t0, done


def run_separate(model: SpeechModel, audio, lanes, cached: bool) -> tuple[float, list[Finished], float]:
    """Seconds for the four runs, their Finished events, the seconds spent encoding."""
    model._cache.clear()
    t0 = time.perf_counter()
    out, encode = [], 0.0
    for o in lanes:
        if not cached:
            model._cache.clear()
        fin = [e for e in model.decode(audio, o, language="en") if isinstance(e, Finished)][-1]
        out.append(fin)
        encode += fin.stats.encode_s
    return time.perf_counter() - t0, out, encode


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("clip", nargs="?", default=str(ROOT / "assets" / "samples" / "speech_en.wav"))
    p.add_argument("--model", default="base")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    audio = load_audio(args.clip)
    model = SpeechModel.load(args.model)
    lanes = [parse_lane_spec(s, BASE) for s in SPECS]
    print(f"whisper-{args.model}, {len(audio) / 16000:.2f} s clip ({pathlib.Path(args.clip).name}), "
          f"{args.threads} torch thread(s), lanes {' | '.join(SPECS)}")
    run_lanes(model, audio, lanes)  # warm-up
    run_separate(model, audio, lanes, cached=False)
    t_lanes, t_sep, t_cached, enc_lanes, enc_sep = [], [], [], [], []
    for _ in range(args.repeats):
        s, done = run_lanes(model, audio, lanes)
        t_lanes.append(s)
        enc_lanes.append(done.stats.encode_s)
        s, fins, enc = run_separate(model, audio, lanes, cached=False)
        t_sep.append(s)
        enc_sep.append(enc)
        s, _f, _e = run_separate(model, audio, lanes, cached=True)
        t_cached.append(s)
        for spec, r, fin in zip(SPECS, done.lanes, fins):
            assert r.token_ids == fin.token_ids, f"lane {spec} differs from its separate run"
    med = statistics.median
    print(f"{'':30s} {'total s':>8s} {'encode s':>9s}")
    print(f"{'4 lanes, one encoder pass':30s} {med(t_lanes):8.2f} {med(enc_lanes):9.2f}")
    print(f"{'4 separate runs, 4 encodes':30s} {med(t_sep):8.2f} {med(enc_sep):9.2f}")
    print(f"{'4 separate runs, cache kept':30s} {med(t_cached):8.2f}")
    print(f"lanes / separate: {med(t_lanes) / med(t_sep):.2f}")
    print("per lane (last repeat): spec, tokens, own decode s, log p, text")
    for spec, r in zip(SPECS, done.lanes):
        print(f"  {spec:14s} {r.n_tokens:4d} {r.time_s:7.2f} {r.logprob:8.2f}  {r.text}")
    print(f"agreement (mean pairwise token ratio): {done.mean_agreement:.2f}")


if __name__ == "__main__":
    main()
