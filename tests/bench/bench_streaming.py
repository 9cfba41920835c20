"""Streaming benchmark (issue 23): the live policies on espeak speech played as a microphone.

The first ``--sentences`` (10) sentences of the espeak set (``bench_speech.ESPEAK_SET``, the
lighthouse story) are spoken by espeak-ng as one clip (46 s, so the buffer must be trimmed) and played through ``core.streaming.play`` at
``--speed`` (1 = real time, the default: the decoder may fall behind and then skips ahead, as a
live microphone would). For each model, thread count and policy it prints:
  - WER against the spoken text and against the offline transcript (``transcribe``: long-form
    over 30 s), in points (jiwer, ``core.analysis.metrics``), and "WER +/-": the streamed WER
    against the spoken text minus offline's (the goal "within 1 WER point of the offline
    transcript" read both ways: this difference, and the WER between the two transcripts),
  - the mean and 90th-percentile commit latency per word (s, audio time: from the end of the
    word's audio, by word timing, to its commit),
  - the real-time factor (decoding seconds / audio seconds; < 1 keeps up), and the CPU seconds the
    process spent per audio second ("CPU RTF": on a shared machine the wall-clock RTF also counts
    the time other processes held the cores; with one torch thread, CPU RTF < 1 keeps up),
  - the fraction of tentative tokens revised, and how often decoding fell behind,
  - decodes done again because they looped (``fallbacks``),
for each encoder span (``--encoders``: "window", the padded 30 s window as offline; "buffer",
only the buffer's frames + 3 s of padding, whisper.cpp's audio_ctx: ``core.streaming.short_encoder``)
and step (``--steps``; "default": each policy's own, ``core.streaming.policies.default_step``;
``SPEC@STEP`` in ``--policies`` gives one policy its own step, e.g. ``align-att:25@0.5``).
After each model and thread count it prints AlignAtt's latency against LocalAgreement's with
both WERs (issue 23: "AlignAtt's mean latency is lower than LocalAgreement's at a comparable
WER") and LocalAgreement-2's targets (keeps up, mean latency <= 2.5 s, within 1 WER point).
The load average is printed before and after (the CPU is shared). ``--clock cpu`` runs the
stream on this process's CPU time instead of the wall clock (``CpuClock``: what an unloaded
core would give, reproducible under load, and nothing sleeps; meaningful with one thread).
Not a pass/fail test: it prints figures.

    .venv/bin/python tests/bench/bench_streaming.py [--models tiny.en,base] [--threads 1,2]
        [--policies local-agreement:2,align-att:25,fixed-window,align-att:15@0.5] [--steps default,1.0] [--speed 1|max]
        [--encoders buffer,window] [--clock wall|cpu] [--sentences N] [--set-seed S] [--settings JSON]
        [--json FILE]

``--set-seed S`` speaks ``bench_longform.sentences(N, seed=S)`` (N = ``--sentences``: other
sentences from the same templates) instead of the espeak set, with the offline WER of that set;
``--settings '[{}, {"prompt_tokens": 45}]'`` (a JSON list) runs each policy once per object. A
closing table lists every row: model, set, policy, settings, WER ref, offline WER, the delta,
mean latency (session 14 decided LocalAgreement's prompt length with it: local_agreement.py).

``--settings '{"right_context_s": 0.5}'`` passes settings to every policy of the run
(``parse_policy``); ``--json FILE`` writes every row with both transcripts (streamed and
offline) and the reference, so a run can be scored again (another normaliser) without decoding.
"""

from __future__ import annotations

import argparse
import json
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
from tests.bench.bench_longform import sentences  # noqa: E402
from tests.bench.bench_speech import ESPEAK_SET  # noqa: E402
from tests.helpers.speech import synth_speech  # noqa: E402

POLICIES = ("local-agreement:2", "align-att:25", "fixed-window")


class CpuClock:
    """A clock that runs on this process's CPU time, plus the time it was asked to sleep
    (without sleeping): the stream as an unloaded machine would see it, whatever else runs on
    the cores (``--clock cpu``; with one torch thread, CPU seconds are the seconds one core
    spends). The figures are reproducible under load; with two threads CPU time counts both."""

    def __init__(self):
        self.slept, self.cpu0 = 0.0, time.process_time()

    def __call__(self) -> float:
        return time.process_time() - self.cpu0 + self.slept

    def sleep(self, seconds: float) -> None:
        self.slept += max(0.0, seconds)


def run_policy(model, audio, spec: str, step: float | None, speed: float | None, text: str, offline: str,
               encoder: str = "window", clock: str = "wall", options: DecodingOptions | None = None,
               **settings) -> dict:
    """One streamed run -> the row's figures (buffers are encoded outside the model's encoder
    cache, so one model serves every run). ``clock``: "wall" (the real clock, real sleeps) or
    "cpu" (:class:`CpuClock`); ``options``: the decoding strategy (None: greedy); ``settings``
    go to the policy (``parse_policy``)."""
    decoder = WhisperDecoder(model, options or DecodingOptions(), encoder=encoder)
    timing = {}
    if clock == "cpu":
        c = CpuClock()
        timing = {"clock": c, "sleep": c.sleep}
    driver = StreamDriver(parse_policy(spec, step_s=step, **settings), decoder, realtime=speed,
                          **({"clock": timing["clock"]} if timing else {}))
    cpu = time.process_time()
    out = summary(stream(driver, play(audio, speed=speed, **timing)))
    out["cpu_rtf"] = (time.process_time() - cpu) / out["audio_s"]
    out["wer_ref"] = score("wer", out["text"], text).value
    out["wer_offline"] = score("wer", out["text"], offline).value
    # the same with openai/whisper's English normaliser on every text (harbour = harbor, ...)
    out["wer_ref_en"] = score("wer", out["text"], text, normaliser="whisper-en").value
    out["wer_offline_en"] = score("wer", out["text"], offline, normaliser="whisper-en").value
    out["fallbacks"] = decoder.fallbacks
    out["spec"], out["step_s"] = spec, driver.policy.step_s
    out["skipped_s"] = sum(b["skipped_s"][1] - b["skipped_s"][0] for b in out["fell_behind"] if b["skipped_s"])
    return out


#: settings only LocalAgreement takes: a ``--settings`` list that mixes them with align-att or
#: fixed-window passes them to local-agreement policies only
LOCAL_AGREEMENT_ONLY = frozenset({"prompt_tokens", "right_context_s", "forced_prefix"})


def _named(row: dict) -> str:
    """A row's policy for a verdict line: its spec, and its settings where it has any."""
    return row["spec"] + (" " + json.dumps(row["settings"]) if row.get("settings") else "")


def verdicts(rows: list[dict], offline_wer: float, offline_en: float | None = None) -> list[str]:
    """The issue's goals over one model's rows (``run_policy``'s dicts): AlignAtt against
    LocalAgreement (latency at their WERs), and LocalAgreement-2's targets."""
    out = []
    la = [r for r in rows if r["spec"].startswith("local-agreement")]
    aa = [r for r in rows if r["spec"].startswith("align-att")]
    for a in aa:
        for b in la:
            la_lat, aa_lat = b["latency"]["mean_s"] or 0, a["latency"]["mean_s"] or 0
            out.append(f"  {_named(a)} (step {a['step_s']:g}) mean latency {aa_lat:.2f} s at WER {100 * a['wer_ref']:.1f}"
                       f" vs {_named(b)} (step {b['step_s']:g}) {la_lat:.2f} s at WER {100 * b['wer_ref']:.1f}: "
                       f"{'lower' if aa_lat < la_lat else 'NOT lower'} by {abs(la_lat - aa_lat):.2f} s, WERs "
                       f"{abs(a['wer_ref'] - b['wer_ref']) * 100:.1f} points apart")
    for b in la:
        if b["spec"] != "local-agreement:2":
            continue
        keeps = b["rtf"] < 1 and not b["skipped_s"]
        mean = b["latency"]["mean_s"] or 0
        diff = 100 * (b["wer_ref"] - offline_wer)
        out.append(f"  {_named(b)} (step {b['step_s']:g}): keeps up {'yes' if keeps else 'NO'} (RTF {b['rtf']:.2f}, "
                   f"skipped {b['skipped_s']:.1f} s); mean latency {mean:.2f} s {'<=' if mean <= 2.5 else '>'} 2.5; "
                   f"WER vs the reference {100 * b['wer_ref']:.1f} vs offline {100 * offline_wer:.1f} ({diff:+.1f}: "
                   f"{'within' if diff <= 1 else 'NOT within'} 1 point); WER between streamed and offline "
                   f"{100 * b['wer_offline']:.1f} ({'within' if b['wer_offline'] <= 0.01 else 'NOT within'} 1 point)")
        if offline_en is not None and "wer_ref_en" in b:
            d = 100 * (b["wer_ref_en"] - offline_en)
            out.append(f"    with Whisper's English normaliser: WER vs the reference {100 * b['wer_ref_en']:.1f} vs offline "
                       f"{100 * offline_en:.1f} ({d:+.1f}: {'within' if d <= 1 else 'NOT within'} 1 point); between "
                       f"streamed and offline {100 * b['wer_offline_en']:.1f}")
    return out


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="tiny.en,base")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--policies", default=",".join(POLICIES),
                   help="comma-separated specs; SPEC@STEP gives one policy its own step (align-att:25@0.5)")
    p.add_argument("--steps", default="default",
                   help="seconds of new audio between decodes, comma-separated; default: each policy's own")
    p.add_argument("--encoders", default="buffer", help="buffer (audio_ctx, the default) | window (30 s padded)")
    p.add_argument("--clock", default="wall", choices=("wall", "cpu"),
                   help="wall: the real clock | cpu: this process's CPU time (an unloaded core; one thread)")
    p.add_argument("--speed", default="1", help="1 (real time), a factor, or max")
    p.add_argument("--sentences", type=int, default=10)
    p.add_argument("--set-seed", type=int, default=None, metavar="S",
                   help="speak bench_longform.sentences(N, seed=S) (N = --sentences) instead of the espeak set")
    p.add_argument("--settings", default="{}",
                   help='JSON settings for every policy, e.g. {"right_context_s": 0.5}; a JSON list of such objects '
                        'runs every policy once per object, e.g. [{}, {"prompt_tokens": 45}]')
    p.add_argument("--beam", type=int, default=0, metavar="N",
                   help="decode with beam search of N beams, offline and streamed (0: greedy, the default; "
                        "whisper_streaming decodes with faster-whisper's beam 5)")
    p.add_argument("--json", default=None, help="write every row (both transcripts, figures) to this file")
    args = p.parse_args()
    settings_list = json.loads(args.settings)
    if isinstance(settings_list, dict):
        settings_list = [settings_list]
    dump: list[dict] = []
    table: list[str] = []
    from core.tasks.speech import SpeechModel

    speed = None if args.speed == "max" else float(args.speed)
    options = DecodingOptions(strategy="beam", num_beams=args.beam) if args.beam > 0 else DecodingOptions()
    strategy = f"beam {args.beam}" if args.beam > 0 else "greedy"
    if args.set_seed is None:
        text, set_name = " ".join(ESPEAK_SET[: args.sentences]), "espeak"
    else:
        text, set_name = " ".join(sentences(args.sentences, seed=args.set_seed)), f"seed {args.set_seed}"
    audio = synth_speech(text)
    print(f"espeak speech ({set_name}): {args.sentences} sentences, {len(text.split())} words, {len(audio) / 16000:.1f} s, played at "
          f"{'max' if speed is None else f'{speed:g}x'} speed, {strategy}, {args.clock} clock; load average "
          f"{load_average()} ({os.cpu_count()} cores)")
    for name in args.models.split(","):
        model = SpeechModel.load(name)
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            t0 = time.perf_counter()
            offline = offline_text(model, audio, options)
            off_s = time.perf_counter() - t0
            offline_wer = score("wer", offline, text).value
            offline_en = score("wer", offline, text, normaliser="whisper-en").value
            print(f"\n{model.name}, {threads} thread(s): offline WER {100 * offline_wer:.1f} "
                  f"(Whisper's English normaliser: {100 * offline_en:.1f}) "
                  f"(RTF {off_s / (len(audio) / 16000):.2f}); load average {load_average()}")
            print(f"{'policy':<20}{'encoder':>8}{'step':>5}{'WER ref':>8}{'WER +/-':>8}{'WER off':>8}{'lat mean':>9}"
                  f"{'lat p90':>8}{'RTF':>6}{'CPU RTF':>8}{'revised':>8}{'behind':>7}{'skipped s':>10}{'commits':>8}"
                  f"{'fallbk':>7}{'WERen ref':>10}{'+/-':>6}{'off':>6}")
            rows = []
            for item in args.policies.split(","):
                spec, _, own = item.partition("@")  # "align-att:25@0.5": this policy's own step
                for step in ([float(own)] if own else
                             [None if x == "default" else float(x) for x in args.steps.split(",")]):
                    for encoder, settings in ((e, st) for e in args.encoders.split(",") for st in settings_list):
                        own_settings = settings if spec.startswith("local-agreement") else {
                            k: v for k, v in settings.items() if k not in LOCAL_AGREEMENT_ONLY}
                        r = run_policy(model, audio, spec, step, speed, text, offline, encoder, args.clock, options, **own_settings)
                        r["settings"] = own_settings
                        rows.append(r)
                        dump.append({"model": model.name, "set": set_name, "threads": threads, "encoder": encoder, "settings": own_settings,
                                     "strategy": strategy,
                                     "offline": offline, "reference": text, "offline_wer": offline_wer, "offline_wer_en": offline_en,
                                     **{k: r[k] for k in ("spec", "step_s", "text", "wer_ref", "wer_offline", "latency",
                                                          "rtf", "cpu_rtf", "revised_fraction", "fallbacks", "wer_ref_en", "wer_offline_en",
                                                          "skipped_s", "commits")},
                                     "fell_behind": len(r["fell_behind"])})
                        if args.json:
                            pathlib.Path(args.json).write_text(json.dumps(dump, indent=1))
                        lat = r["latency"]
                        print(f"{spec:<20}{encoder:>8}{r['step_s']:>5g}{100 * r['wer_ref']:>8.1f}"
                              f"{100 * (r['wer_ref'] - offline_wer):>+8.1f}{100 * r['wer_offline']:>8.1f}"
                              f"{lat['mean_s'] or 0:>9.2f}{lat['p90_s'] or 0:>8.2f}{r['rtf']:>6.2f}{r['cpu_rtf']:>8.2f}"
                              f"{100 * r['revised_fraction']:>7.0f}%{len(r['fell_behind']):>7}{r['skipped_s']:>10.1f}"
                              f"{len(r['commits']):>8}{r['fallbacks']:>7}{100 * r['wer_ref_en']:>10.1f}"
                              f"{100 * (r['wer_ref_en'] - offline_en):>+6.1f}{100 * r['wer_offline_en']:>6.1f}"
                              f"{'  ' + json.dumps(settings) if len(settings_list) > 1 else ''}", flush=True)
                        table.append(f"{model.name:<16}{set_name:>8}{threads:>4} {strategy:>7} "
                                     f"{spec + '@' + format(r['step_s'], 'g'):<22}"
                                     f"{json.dumps(own_settings):<28}{100 * r['wer_ref']:>8.1f}{100 * offline_wer:>8.1f}"
                                     f"{100 * (r['wer_ref'] - offline_wer):>+7.1f}{lat['mean_s'] or 0:>9.2f}")
            for line in verdicts(rows, offline_wer, offline_en):
                print(line)
    print(f"\n{'model':<16}{'set':>8}{'thr':>4} {'decode':>7} {'policy':<22}{'settings':<28}{'WER ref':>8}{'offline':>8}"
          f"{'delta':>7}{'lat mean':>9}")
    for line in table:
        print(line)
    print(f"\nload average {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
