"""Word timing (issue 14 section 2): DTW over cross-attention against the truth, beside
transformers' ``return_token_timestamps=True``.

Clips where the truth is known by construction: each word synthesised alone with
espeak-ng, its silence trimmed with sox, the words joined with random gaps of 0.15-0.4 s
(seeded). Ours: ``SpeechModel.words`` with the end-of-text rows (what ``transcribe
--word-timestamps`` prints). transformers: ``generate(return_token_timestamps=True)`` on the
same model and audio, token i spanning ``token_timestamps[i - 1]``..``[i]`` as
transformers' tokenizer reads them (``_decode_asr``), a word from its first token's start to
its last token's end. Refined: ours moved by the refine pass (``SpeechModel.refine_words``, as
``transcribe --word-timestamps --refine``; its time per clip is printed). Words are matched by
their text (lower case, no punctuation, aligned by difflib; words decoded otherwise are left out
and counted). Prints the mean |start| and |end| error in seconds and the mean signed error
(negative: too early). Not a pass/fail test.

    .venv/bin/python tests/bench/bench_word_timing.py [--model tiny.en|base] [--clips N] [--seed S]
        [--no-refine] [--max-drop F] [--watch edge|all] [--precision S] [--reach S] [--outward S] [--steps se|ses]
"""

from __future__ import annotations

import argparse
import difflib
import pathlib
import random
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from core.analysis.alignment import split_to_word_tokens  # noqa: E402
from core.analysis.silence import snap_words  # noqa: E402
from core.analysis.refine import RefineOptions  # noqa: E402
from core.inputs.audio import load_audio  # noqa: E402
from core.events import StepEvent  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from core.tasks.speech import SpeechModel  # noqa: E402

VOCAB = ("open the door and turn on all lights please bring me seven green apples from market today "
         "water morning yellow window garden quickly number table silver river over under house paper "
         "happy little dog runs across field where children play music every evening").split()
SR = 16000


def spoken_word(word: str, tmp: pathlib.Path) -> np.ndarray:
    """One word by espeak-ng, leading and trailing silence trimmed by sox, 16 kHz float32."""
    raw, trimmed = tmp / f"{word}.raw.wav", tmp / f"{word}.wav"
    if not trimmed.exists():
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "160", "-w", str(raw), word], check=True)
        subprocess.run(["sox", str(raw), "-r", str(SR), "-c", "1", str(trimmed), "silence", "1", "0.01", "0.5%",
                        "reverse", "silence", "1", "0.01", "0.5%", "reverse"], check=True)
    return load_audio(str(trimmed))


def make_clip(words: list[str], rng: random.Random, tmp: pathlib.Path):
    """(audio, [(word, start, end)]): 0.3 s of silence, then the words with 0.15-0.4 s gaps."""
    parts, truth, t = [np.zeros(int(0.3 * SR), np.float32)], [], 0.3
    for i, w in enumerate(words):
        a = spoken_word(w, tmp)
        truth.append((w, t, t + len(a) / SR))
        parts.append(a)
        t += len(a) / SR
        gap = rng.uniform(0.15, 0.4) if i < len(words) - 1 else 0.5
        parts.append(np.zeros(int(gap * SR), np.float32))
        t += int(gap * SR) / SR
    return np.concatenate(parts), truth


def norm(word: str) -> str:
    return "".join(c for c in word.lower() if c.isalnum())


def ours(model: SpeechModel, audio, refine: RefineOptions | None = None):
    """(DTW words, DTW words moved off silence, refined words or None, refine seconds) as
    (word, start, end) tuples."""
    options = DecodingOptions(capture_attention=True)
    steps = [ev for ev in model.decode(audio, options, language="en") if isinstance(ev, StepEvent)]
    words = model.words(steps, end_attention=model.end_attention(audio, steps, options, language="en"))
    snapped = [(w.word, w.start, w.end) for w in snap_words(words, audio)]
    refined, seconds = None, 0.0
    if refine is not None:
        t0 = time.perf_counter()
        refined = snap_words(model.refine_words(audio, steps, words, options, refine=refine, language="en"), audio)
        seconds = time.perf_counter() - t0
        refined = [(w.word, w.start, w.end) for w in refined]
    return [(w.word, w.start, w.end) for w in words], snapped, refined, seconds


def transformers_words(model: SpeechModel, audio) -> list[tuple[str, float, float]]:
    lw = model._loaded
    fe = lw.feature_extractor(audio, sampling_rate=SR, return_tensors="pt", return_attention_mask=True)
    kw = {"language": "en"} if lw.multilingual else {}
    with torch.no_grad():
        out = lw.model.generate(fe.input_features, attention_mask=fe.attention_mask, return_token_timestamps=True,
                                return_dict_in_generate=True, **kw)
    seq = out["sequences"][0].tolist()
    stamps = out["token_timestamps"][0].tolist()
    eot = lw.special.eot
    first = next(i for i, t in enumerate(seq) if t < eot)  # after the prompt
    text_ids = [t for t in seq[first:] if t < eot]
    names, groups = split_to_word_tokens(text_ids, model.backend.decode)
    result, k = [], first
    for name, group in zip(names, groups):  # token i spans stamps[i - 1]..stamps[i] (the pipeline's offsets)
        start = stamps[k - 1]
        k += len(group)
        result.append((name, start, stamps[k - 1]))
    return result


def errors(found, truth):
    """(start errors, end errors) in seconds, signed (found - truth), of the truth's words found (matched by difflib on their
    normalised text; words decoded otherwise are left out), and how many were missed."""
    found = [f for f in found if norm(f[0])]
    matcher = difflib.SequenceMatcher(a=[norm(f[0]) for f in found], b=[norm(w) for w, _, _ in truth],
                                      autojunk=False)
    pairs = [(found[b.a + k], truth[b.b + k]) for b in matcher.get_matching_blocks() for k in range(b.size)]
    return [f[1] - t[1] for f, t in pairs], [f[2] - t[2] for f, t in pairs], len(truth) - len(pairs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny.en")
    ap.add_argument("--clips", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise-db", type=float, default=None,
                    help="add white noise at this RMS level (dBFS) to every clip (pauses are then not digital silence)")
    ap.add_argument("--no-refine", action="store_true", help="skip the refine pass (it re-encodes ~20 times a clip)")
    ap.add_argument("--max-drop", type=float, default=RefineOptions.max_drop)
    ap.add_argument("--watch", default=RefineOptions.watch)
    ap.add_argument("--precision", type=float, default=RefineOptions.precision)
    ap.add_argument("--reach", type=float, default=RefineOptions.reach)
    ap.add_argument("--outward", type=float, default=RefineOptions.outward)
    ap.add_argument("--steps", default=RefineOptions.steps)
    args = ap.parse_args()
    torch.set_num_threads(1)  # the machine's cores are shared; refine times are one thread's
    model = SpeechModel.load(args.model)
    refine = None if args.no_refine else RefineOptions(precision=args.precision, max_drop=args.max_drop,
                                                        watch=args.watch, reach=args.reach,
                                                        outward=args.outward, steps=args.steps).validate()
    rng = random.Random(args.seed)
    names = ("ours (DTW)", "ours refined + snap", "transformers token timestamps", "ours (DTW) + silence snap")
    results = {name: ([], [], 0) for name in names}
    refine_s = []
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        for c in range(args.clips):
            words = rng.sample(VOCAB, rng.randint(6, 10))
            audio, truth = make_clip(words, rng, tmp)
            if args.noise_db is not None:
                noise = np.random.default_rng(c).standard_normal(len(audio)).astype(np.float32)
                audio = np.clip(audio + noise * 10 ** (args.noise_db / 20), -1, 1).astype(np.float32)
            dtw, snapped, refined, seconds = ours(model, audio, refine)
            found = {names[0]: dtw, names[1]: refined, names[2]: transformers_words(model, audio), names[3]: snapped}
            for name, f in found.items():
                if f is None:
                    continue
                err = errors(f, truth)
                s, e, missed = results[name]
                results[name] = (s + err[0], e + err[1], missed + err[2])
            if refined is not None:
                refine_s.append((seconds, len(audio) / SR))
            print(f"clip {c + 1}: {' '.join(words)}" + (f"  (refine {seconds:.1f} s)" if refined else ""), flush=True)
    print(f"\n{model.name}, {args.clips} clips, gaps 0.15-0.4 s"
          + (f", white noise at {args.noise_db:g} dBFS" if args.noise_db is not None else ", digital silence between words"))
    for name, (s, e, missed) in results.items():
        if not s:
            continue
        s, e = np.array(s), np.array(e)
        print(f"{name:30s} mean |start| {np.mean(np.abs(s)):.3f} s  mean |end| {np.mean(np.abs(e)):.3f} s  "
              f"median |start| {np.median(np.abs(s)):.3f} s  signed mean start {np.mean(s):+.3f} end {np.mean(e):+.3f}"
              f"  ({len(s)} words; {missed} decoded otherwise, left out)")
    if refine_s:
        secs, durs = np.array(refine_s).T
        print(f"refine: {secs.mean():.1f} s per clip (mean of {len(secs)}, clips of {durs.mean():.1f} s on average, "
              f"one torch thread, RTF {secs.sum() / durs.sum():.2f}; {refine})")


if __name__ == "__main__":
    main()
