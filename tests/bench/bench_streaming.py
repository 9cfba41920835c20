"""Streaming benchmark (issue 23): the live policies on espeak speech played as a microphone.

The first ``--sentences`` (10) sentences of the espeak set (``bench_speech.ESPEAK_SET``, the
lighthouse story) are spoken by espeak-ng as one clip (46 s, so the buffer must be trimmed) and played through ``core.streaming.play`` at
``--speed`` (1 = real time, the default: the decoder may fall behind and then skips ahead, as a
live microphone would). For each model, thread count and policy it prints:
  - WER against the spoken text and against the offline transcript (``transcribe``: long-form
    over 30 s), in points (jiwer, ``core.analysis.metrics``),
  - the mean and 90th-percentile commit latency per word (s, audio time: from the end of the
    word's audio, by word timing, to its commit),
  - the real-time factor (decoding seconds / audio seconds; < 1 keeps up), and the CPU seconds the
    process spent per audio second ("CPU RTF": on a shared machine the wall-clock RTF also counts
    the time other processes held the cores; with one torch thread, CPU RTF < 1 keeps up),
  - the fraction of tentative tokens revised, and how often decoding fell behind,
  - decodes done again because they looped (``fallbacks``),
for each encoder span (``--encoders``: "window", the padded 30 s window as offline; "buffer",
only the buffer's frames + 3 s of padding, whisper.cpp's audio_ctx: ``core.streaming.short_encoder``)
and step (``--steps``). The load average is printed before and after (the CPU is shared).
Not a pass/fail test: it prints figures.

    .venv/bin/python tests/bench/bench_streaming.py [--models tiny.en,base] [--threads 1,2]
        [--policies local-agreement:2,align-att:25,fixed-window] [--steps 1.0,2.0] [--speed 1|max]
        [--encoders window,buffer] [--sentences N]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.analysis.metrics import score  # noqa: E402
from core.cli.stream import offline_text, summary  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from core.streaming import StreamDriver, parse_policy, play, stream  # noqa: E402
from core.streaming.decoder import WhisperDecoder  # noqa: E402
from tests.bench.bench_speech import ESPEAK_SET  # noqa: E402
from tests.helpers.speech import synth_speech  # noqa: E402

POLICIES = ("local-agreement:2", "align-att:25", "fixed-window")


def run_policy(model, audio, spec: str, step: float, speed: float | None, text: str, offline: str,
               encoder: str = "window") -> dict:
    """One streamed run -> the row's figures (buffers are encoded outside the model's encoder
    cache, so one model serves every run)."""
    decoder = WhisperDecoder(model, DecodingOptions(), encoder=encoder)
    driver = StreamDriver(parse_policy(spec, step_s=step), decoder, realtime=speed)
    cpu = time.process_time()
    out = summary(stream(driver, play(audio, speed=speed)))
    out["cpu_rtf"] = (time.process_time() - cpu) / out["audio_s"]
    out["wer_ref"] = score("wer", out["text"], text).value
    out["wer_offline"] = score("wer", out["text"], offline).value
    out["fallbacks"] = decoder.fallbacks
    return out


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="tiny.en")
    p.add_argument("--threads", default="1")
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--steps", default="1.0", help="seconds of new audio between decodes, comma-separated")
    p.add_argument("--encoders", default="window,buffer", help="window (30 s padded) | buffer (audio_ctx)")
    p.add_argument("--speed", default="1", help="1 (real time), a factor, or max")
    p.add_argument("--sentences", type=int, default=10)
    args = p.parse_args()
    from core.tasks.speech import SpeechModel

    speed = None if args.speed == "max" else float(args.speed)
    text = " ".join(ESPEAK_SET[: args.sentences])
    audio = synth_speech(text)
    print(f"espeak speech: {args.sentences} sentences, {len(audio) / 16000:.1f} s, played at "
          f"{'max' if speed is None else f'{speed:g}x'} speed, greedy; load average {load_average()}")
    for name in args.models.split(","):
        model = SpeechModel.load(name)
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            t0 = time.perf_counter()
            offline = offline_text(model, audio, DecodingOptions())
            off_s = time.perf_counter() - t0
            print(f"\n{model.name}, {threads} thread(s): offline WER {100 * score('wer', offline, text).value:.1f} "
                  f"(RTF {off_s / (len(audio) / 16000):.2f})")
            print(f"{'policy':<20}{'encoder':>8}{'step':>5}{'WER ref':>8}{'WER off':>8}{'lat mean':>9}{'lat p90':>8}"
                  f"{'RTF':>6}{'CPU RTF':>8}{'revised':>8}{'behind':>7}{'skipped s':>10}{'commits':>8}{'fallbk':>7}")
            for spec in args.policies.split(","):
                for step in (float(x) for x in args.steps.split(",")):
                    for encoder in args.encoders.split(","):
                        r = run_policy(model, audio, spec, step, speed, text, offline, encoder)
                        skipped = sum(b["skipped_s"][1] - b["skipped_s"][0] for b in r["fell_behind"] if b["skipped_s"])
                        lat = r["latency"]
                        print(f"{spec:<20}{encoder:>8}{step:>5g}{100 * r['wer_ref']:>8.1f}{100 * r['wer_offline']:>8.1f}"
                              f"{lat['mean_s'] or 0:>9.2f}{lat['p90_s'] or 0:>8.2f}{r['rtf']:>6.2f}{r['cpu_rtf']:>8.2f}"
                              f"{100 * r['revised_fraction']:>7.0f}%{len(r['fell_behind']):>7}{skipped:>10.1f}"
                              f"{len(r['commits']):>8}{r['fallbacks']:>7}", flush=True)
    print(f"load average {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
