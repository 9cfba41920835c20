"""Long-form benchmark (issue 14 section 3): a 10-minute file transcribed completely, ours
(``SpeechModel.transcribe``: openai/whisper ``transcribe()``) beside transformers' long-form
``generate()`` on the same weights, side by side in one run.

The file is made by construction: ~150 distinct sentences (seeded templates) spoken one by
one by espeak-ng, joined with 0.3-0.8 s of silence, so the reference text is known. For
each model (tiny.en, base) it prints the WER against that text (jiwer, Whisper-style
normalisation from ``core.analysis.metrics``), the wall time and RTF (time / audio
duration) of ours and of ``generate(return_timestamps=True, condition_on_prev_tokens=True,
temperature=(0.0, 0.2, ..., 1.0), compression_ratio_threshold=2.4, logprob_threshold=-1.0,
no_speech_threshold=0.6)``, how many windows each used and how many of ours fell back.
Also: 30 s of digital silence through ours (text and verdicts). Not a pass/fail test.

    .venv/bin/python tests/bench/bench_longform.py [--minutes 10] [--models tiny.en,base] [--threads 1]
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from core.analysis.metrics import score  # noqa: E402
from core.events import AttemptEvent, Finished  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from core.tasks.longform import LongFormOptions  # noqa: E402
from core.tasks.speech import SpeechModel  # noqa: E402
from tests.helpers.speech import synth_speech  # noqa: E402

SR = 16000
SUBJECTS = ["the old fisherman", "my younger sister", "a tired teacher", "the village baker", "our new neighbor",
            "the quiet student", "a famous painter", "the ship captain", "her best friend", "the small boy",
            "an old farmer", "the city mayor", "a young doctor", "the night guard", "my grandmother"]
VERBS = ["carried", "painted", "found", "opened", "cleaned", "repaired", "sold", "borrowed", "described", "visited",
         "counted", "followed", "watched", "planted", "delivered"]
OBJECTS = ["a wooden box", "the red bicycle", "seven green apples", "the broken window", "a long letter",
           "the silver key", "three warm blankets", "the garden gate", "a heavy basket", "the blue boat",
           "an empty bottle", "the kitchen table", "a paper map", "the yellow kite", "two loaves of bread"]
PLACES = ["near the harbor", "behind the church", "at the market", "in the forest", "on the hill",
          "by the river", "inside the station", "under the bridge", "at the school", "in the garden"]
TIMES = ["early in the morning", "before lunch", "late at night", "after the storm", "on a cold Sunday",
         "during the summer", "every evening", "last winter", "at sunrise", "before the rain"]


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct sentences from the templates, seeded."""
    rng, seen, out = random.Random(seed), set(), []
    while len(out) < n:
        s = (f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)} "
             f"{rng.choice(TIMES)}.")
        if s not in seen:
            seen.add(s)
            out.append(s[0].upper() + s[1:])
    return out


def make_file(minutes: float, seed: int = 0) -> tuple[np.ndarray, str]:
    """(audio float32 16 kHz, reference text): sentences spoken until ``minutes`` are filled."""
    rng = random.Random(seed + 1)
    parts, said, total = [], [], 0
    for s in sentences(400, seed):
        a = synth_speech(s, words_per_minute=165)
        gap = np.zeros(int(rng.uniform(0.3, 0.8) * SR), np.float32)
        if total + len(a) + len(gap) > minutes * 60 * SR:
            break
        parts += [a, gap]
        said.append(s)
        total += len(a) + len(gap)
    return np.concatenate(parts), " ".join(said)


def ours(model: SpeechModel, audio: np.ndarray):
    t0 = time.perf_counter()
    events = list(model.transcribe(audio, DecodingOptions(), LongFormOptions(), language="en"))
    elapsed = time.perf_counter() - t0
    attempts = [ev for ev in events if isinstance(ev, AttemptEvent)]
    text = next(ev.text for ev in events if isinstance(ev, Finished))
    return text, elapsed, attempts


def transformers_generate(model: SpeechModel, audio: np.ndarray):
    lw = model._loaded
    t0 = time.perf_counter()
    feats = lw.feature_extractor(audio, sampling_rate=SR, return_tensors="pt", truncation=False, padding="longest",
                                 return_attention_mask=True)
    kw = dict(return_timestamps=True, condition_on_prev_tokens=True, return_segments=True,
              temperature=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0), compression_ratio_threshold=2.4, logprob_threshold=-1.0,
              no_speech_threshold=0.6)
    if model.multilingual:
        kw.update(language="en", task="transcribe")
    with torch.inference_mode():
        out = lw.model.generate(feats.input_features, attention_mask=feats.attention_mask, **kw)
    elapsed = time.perf_counter() - t0
    segments = out["segments"][0]
    text = " ".join(lw.tokenizer.decode(s["tokens"], skip_special_tokens=True).strip() for s in segments)
    windows = len({id(s["result"]) for s in segments})  # one generate() output per window
    return text, elapsed, windows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--models", default="tiny.en,base")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    audio, reference = make_file(args.minutes)
    duration = len(audio) / SR
    print(f"file: {duration:.1f} s, {len(reference.split())} words, made in {time.perf_counter() - t0:.0f} s; "
          f"{args.threads} torch thread(s)")
    print(f"{'model':<8} {'who':<22} {'WER':>6} {'time s':>8} {'RTF':>6}  windows / fallbacks")
    for name in args.models.split(","):
        model = SpeechModel.load(name)
        text, elapsed, attempts = ours(model, audio)
        windows = len({a.segment for a in attempts})
        fallbacks = sum(1 for a in attempts if not a.kept_in_transcript and a.verdict == "fallback")
        silent = sum(1 for a in attempts if a.verdict == "silence")
        print(f"{name:<8} {'ours transcribe()':<22} {score('wer', text, reference).value:6.3f} {elapsed:8.1f} "
              f"{elapsed / duration:6.3f}  {windows} windows, {fallbacks} fallback attempts, {silent} skipped")
        text, elapsed, windows = transformers_generate(model, audio)
        print(f"{name:<8} {'transformers generate()':<22} {score('wer', text, reference).value:6.3f} {elapsed:8.1f} "
              f"{elapsed / duration:6.3f}  {windows} windows")
        silence = np.zeros(30 * SR, np.float32)
        text, elapsed, attempts = ours(model, silence)
        print(f"{name:<8} {'ours on 30 s silence':<22} text={text!r} verdicts={[a.verdict for a in attempts]} "
              f"no-speech={[round(a.no_speech_prob, 2) for a in attempts]}")


if __name__ == "__main__":
    main()
