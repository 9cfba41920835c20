"""Speech benchmark: our engine vs transformers' ``generate()`` on the same clip, side by side.

For each bundled Whisper model (tiny.en, base) on one clip (the bundled sample, or a
file given as argv[1]), prints in one run:
  - encode ms (the encoder on one 30 s window),
  - our decode ms/token (greedy, top-k report of 10 and cross-attention capture ON), on the
    first decode of an input (cross-attention keys/values projected in it, like generate())
    and on a re-decode (the slider case: those keys/values are reused with the encoder output),
  - generate()'s decode ms/token (greedy, nothing captured; encoder output passed in,
    so it times decoding only),
  - their ratio (target: ours <= 0.8x generate's), and RTF = (encode + decode) / audio.
Runs alternate ours/generate ``REPEATS`` times and report medians (these machines are
noisy). Not a pass/fail test: it prints figures.

A second table (issue 22) sets ours beside CTranslate2 (the ``ctranslate2`` package, faster-whisper's
engine) on the same weights (the bundled CT2 model.bin, float16 on disk, computed in float32 or
int8), greedy, alternating in the same run: ours float32 and ``--dtype int8``
(``core.backends.int8``, capture on as above) vs CT2 ``compute_type="float32"`` / ``"int8"``
(``intra_threads`` = torch's threads; the encoder output passed in, so decode only), the encoder
of each, and whether the ids equal ours in the same dtype.

A third table, on the espeak set (``ESPEAK_SET``: sentences spoken by espeak-ng, one clip each),
gives int8's token agreement with float32 (same id at the same position / the longer
sequence's length, summed over the set; and sentences with identical ids) and the WER of
float32, int8 and CT2 int8 against the spoken text (jiwer, ``core.analysis.metrics``).

``--kv-cache-off`` adds the cache-off switch's step times (``DecodingOptions(kv_cache=False)``):
ms for the steps 1, 8, 16, ... with and without the cache (the gap between StepEvents).

``--clock cpu`` times that table in this process's CPU seconds (``time.process_time``): on a
machine other jobs share, the wall clock also counts the waits for a core. Ours is then the
whole ``engine.run`` (cache set-up and prompt step included, as CT2's ``generate``) per token.

``--step omp|split|split-layers`` picks how our decoder step uses several threads
(``bench_decoder_step.VARIANTS``; default "split", as shipped: torch on one thread inside the
step, the output projection and cross-attention split across threads by
``core.backends.step_threads``; "omp": as before it, torch's threads for every operation). With
one thread all three are the same step.

``--engine-one-thread`` runs the engine's per-token scoring and report inside
``core.backends.step_threads.one_thread()`` (monkeypatched: the change proposed for
``core/engine.py``; with two threads their ``index_fill`` and ``amax`` open 2 OpenMP regions per token).

    .venv/bin/python tests/bench/bench_speech.py [clip.wav] [--threads N] [--no-ct2] [--no-espeak] [--clock cpu]
        [--step split] [--engine-one-thread]
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "bench"))  # bench_longform's sentences

import torch  # noqa: E402

from core.inputs.audio import load_audio  # noqa: E402
from core.events import Finished  # noqa: E402
from core.options import DecodingOptions  # noqa: E402
from core.tasks.speech import SAMPLE_RATE, SpeechModel  # noqa: E402
from tests.helpers.speech import LIGHTHOUSE  # noqa: E402

REPEATS = 5

#: the espeak set: tests.helpers.speech.LIGHTHOUSE (also test_longform's) and 20 of bench_longform's seeded
#: template sentences, each spoken on its own (< 30 s); about 370 words, so one word is ~0.3 WER points
ESPEAK_SET = LIGHTHOUSE + tuple(__import__("bench_longform").sentences(20, seed=0))


def bench_model(name: str, audio, repeats: int) -> dict:
    sm = SpeechModel.load(name)
    lw = sm._loaded
    model = lw.model
    feats = lw.feature_extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    language = "en"
    prompt = sm.prompt(language, "transcribe")
    opts = DecodingOptions(strategy="greedy", top_k_report=10, capture_attention=True, max_new_tokens=200)

    enc_times, ours, redecode, theirs = [], [], [], []
    ours_ids = gen_ids = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        encoded = sm.backend.encode({"input_features": feats})
        enc_times.append(time.perf_counter() - t0)

        fin = None
        for ev in sm.engine.run(encoded, prompt, opts):
            if isinstance(ev, Finished):
                fin = ev
        ours.append(fin.stats.decode_s / max(1, fin.stats.n_tokens + 1))
        ours_ids = fin.token_ids
        fin2 = [ev for ev in sm.engine.run(encoded, prompt, opts) if isinstance(ev, Finished)][0]
        redecode.append(fin2.stats.decode_s / max(1, fin2.stats.n_tokens + 1))

        from transformers.modeling_outputs import BaseModelOutput

        enc_out = BaseModelOutput(last_hidden_state=encoded.hidden_states)
        gen_kwargs = dict(max_new_tokens=200, do_sample=False, num_beams=1)
        if sm.multilingual:
            gen_kwargs.update(language=language, task="transcribe")
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = model.generate(encoder_outputs=enc_out, **gen_kwargs)
            dt = time.perf_counter() - t0
        seq = out[0].tolist() if torch.is_tensor(out) else out.sequences[0].tolist()
        gen = [t for t in seq if t not in set(prompt.prompt_ids) and t != prompt.eos_token_id]
        # generate() counts the EOS step too; so do we (n_tokens excludes EOS but the step ran)
        theirs.append(dt / max(1, len(gen) + 1))
        gen_ids = gen

    enc = statistics.median(enc_times)
    o, r, g = statistics.median(ours), statistics.median(redecode), statistics.median(theirs)
    audio_s = len(audio) / SAMPLE_RATE
    n = len(ours_ids)
    return {
        "model": sm.name,
        "tokens": n,
        "same_tokens": ours_ids == gen_ids,
        "encode_ms": 1000 * enc,
        "ours_ms_per_token": 1000 * o,
        "generate_ms_per_token": 1000 * g,
        "ratio": o / g,
        "redecode_ms_per_token": 1000 * r,
        "redecode_ratio": r / g,
        "rtf": (enc + o * (n + 1)) / audio_s,
        "audio_s": audio_s,
        "text": sm.backend.decode(ours_ids),
    }


def ct2_dir(name: str, tmp: pathlib.Path) -> pathlib.Path:
    """A directory CTranslate2 loads the bundled model ``name`` from (base: its two model.bin
    parts joined into ``tmp``)."""
    import importlib.util
    import shutil

    from core.catalog import WHISPER_MODELS

    entry = WHISPER_MODELS[name]
    dirs = [pathlib.Path(list(importlib.util.find_spec(m).submodule_search_locations)[0]) for m in entry.modules]
    if len(entry.parts) == 1:
        return (dirs[0] / entry.parts[0]).parent
    out = tmp / name
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "model.bin").exists():
        with open(out / "model.bin", "wb") as f:
            for d, part in zip(dirs, entry.parts):
                f.write((d / part).read_bytes())
    folder = dirs[entry.config[0]] / pathlib.Path(entry.config[1]).parent
    for extra in folder.iterdir():
        if extra.suffix in (".json", ".txt"):
            shutil.copy(extra, out / extra.name)
    return out


#: the clock of the CTranslate2 table: ``time.perf_counter`` (wall), or with ``--clock cpu``
#: ``time.process_time`` (this process's CPU seconds, all threads): on a machine shared with other
#: jobs the wall clock counts the time the process waits for a core, the CPU clock does not
CLOCK = time.perf_counter


def ours_run(sm, feats, prompt, opts) -> tuple[float, float, list[int]]:
    """(encode s, decode s per token (the EOS step counted), ids) of one greedy run of ``sm``."""
    t0 = CLOCK()
    encoded = sm.backend.encode({"input_features": feats})
    enc = CLOCK() - t0
    t0 = CLOCK()
    fin = [ev for ev in sm.engine.run(encoded, prompt, opts) if isinstance(ev, Finished)][0]
    total = CLOCK() - t0
    # the wall clock: the engine's own decode time; the CPU clock: the whole run (it cannot
    # split its CPU seconds; the run adds the cache set-up and the prompt step, like CT2's generate)
    decode = fin.stats.decode_s if CLOCK is time.perf_counter else total
    return enc, decode / max(1, fin.stats.n_tokens + 1), list(fin.token_ids)


def ct2_run(model, feats, prompt, max_new: int) -> tuple[float, float, list[int]]:
    """(encode s, decode s per token (the EOS step counted), ids without the prompt) of one
    CTranslate2 greedy run; decode timed with the encoder output passed in."""
    import ctranslate2

    x = ctranslate2.StorageView.from_array(feats.numpy())
    t0 = CLOCK()
    enc = model.encode(x, to_cpu=False)
    t1 = CLOCK()
    res = model.generate(enc, [list(prompt.prompt_ids)], beam_size=1, max_length=len(prompt.prompt_ids) + max_new,
                         return_scores=False)
    t2 = CLOCK()
    ids = [t for t in res[0].sequences_ids[0] if t != prompt.eos_token_id]
    return t1 - t0, (t2 - t1) / max(1, len(ids) + 1), ids


def agreement(a: list[int], b: list[int]) -> tuple[int, int]:
    """(positions where ``a`` and ``b`` hold the same id, the longer length)."""
    return sum(x == y for x, y in zip(a, b)), max(len(a), len(b))


def bench_ct2(name: str, audio, repeats: int, threads: int, tmp: pathlib.Path) -> dict:
    """Ours float32 / int8 vs CTranslate2 float32 / int8 on ``audio`` (medians of alternating runs)."""
    import ctranslate2

    ours = {"float32": SpeechModel.load(name), "int8": SpeechModel.load(name, dtype="int8")}
    lw = ours["float32"]._loaded
    feats = lw.feature_extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    prompt = ours["float32"].prompt("en", "transcribe")
    opts = DecodingOptions(strategy="greedy", top_k_report=10, capture_attention=True, max_new_tokens=200)
    folder = ct2_dir(name, tmp)
    theirs = {dt: ctranslate2.models.Whisper(str(folder), device="cpu", compute_type=dt, intra_threads=threads,
                                             inter_threads=1) for dt in ("float32", "int8")}
    times: dict = {}
    ids: dict = {}
    for _ in range(repeats):
        for dt in ("float32", "int8"):
            for who, run in (("ours", lambda: ours_run(ours[dt], feats, prompt, opts)),
                             ("ct2", lambda: ct2_run(theirs[dt], feats, prompt, 200))):
                enc, per_token, got = run()
                times.setdefault((who, dt), []).append((enc, per_token))
                ids[(who, dt)] = got
    med = {k: (statistics.median(e for e, _ in v), statistics.median(t for _, t in v)) for k, v in times.items()}
    return {"model": ours["float32"].name, "tokens": len(ids[("ours", "float32")]), "med": med, "ids": ids,
            "models": ours, "ct2": theirs}


def espeak_rows(r: dict, threads: int) -> dict:
    """int8's token agreement with float32 and the WERs of float32, int8 and CT2 int8 on the espeak set."""
    from core.analysis.metrics import score
    from tests.helpers.speech import synth_speech

    ours = r["models"]
    opts = DecodingOptions(strategy="greedy", top_k_report=10, capture_attention=True, max_new_tokens=200)
    prompt = ours["float32"].prompt("en", "transcribe")
    fe = ours["float32"]._loaded.feature_extractor
    same = total = identical = 0
    texts: dict = {"float32": [], "int8": [], "ct2 int8": []}
    for sentence in ESPEAK_SET:
        feats = fe(synth_speech(sentence), sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
        got = {dt: ours_run(ours[dt], feats, prompt, opts)[2] for dt in ("float32", "int8")}
        s, n = agreement(got["float32"], got["int8"])
        same, total, identical = same + s, total + n, identical + (got["float32"] == got["int8"])
        for dt in ("float32", "int8"):
            texts[dt].append(ours[dt].backend.decode(got[dt]))
        texts["ct2 int8"].append(ours["float32"].backend.decode(ct2_run(r["ct2"]["int8"], feats, prompt, 200)[2]))
    reference = " ".join(ESPEAK_SET)
    wer = {k: 100 * score("wer", " ".join(v), reference).value for k, v in texts.items()}
    return {"agreement": same / max(1, total), "identical": identical, "sentences": len(ESPEAK_SET), "wer": wer}


def kv_cache_steps(name: str, audio, marks=(1, 8, 16, 24)) -> dict:
    """ms of the steps ``marks`` (gaps between StepEvents) with the KV cache on and off, and
    whether the ids agree."""
    from core.events import StepEvent

    sm = SpeechModel.load(name)
    feats = sm._loaded.feature_extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    encoded = sm.backend.encode({"input_features": feats})
    prompt = sm.prompt("en", "transcribe")
    out = {}
    for kv in (True, False):
        opts = DecodingOptions(strategy="greedy", top_k_report=10, capture_attention=True, max_new_tokens=200,
                               kv_cache=kv)
        gaps, ids, last = [], None, time.perf_counter()
        for ev in sm.engine.run(encoded, prompt, opts, reuse_cache=False):
            now = time.perf_counter()
            if isinstance(ev, StepEvent):
                gaps.append(1000 * (now - last))
            elif isinstance(ev, Finished):
                ids = ev.token_ids
            last = now
        out[kv] = ({m: gaps[m - 1] for m in marks if m <= len(gaps)}, ids)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("clip", nargs="?", default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeats", type=int, default=REPEATS)
    p.add_argument("--models", default="tiny.en,base")
    p.add_argument("--no-generate", action="store_true", help="skip the generate() table")
    p.add_argument("--no-ct2", action="store_true", help="skip the CTranslate2 / int8 table")
    p.add_argument("--no-espeak", action="store_true", help="skip the espeak set (agreement, WER)")
    p.add_argument("--kv-cache-off", action="store_true", help="print step times with the KV cache off")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="the CTranslate2 table's clock: wall (default) or this process's CPU time (a busy machine)")
    from bench_decoder_step import VARIANTS, variant

    p.add_argument("--step", choices=VARIANTS, default="split",
                   help="how our decoder step uses several threads (default split, as shipped; omp: as before)")
    p.add_argument("--engine-one-thread", action="store_true",
                   help="run the engine's per-token scoring and report inside step_threads.one_thread() "
                        "(monkeypatched here; proposed for core/engine.py)")
    args = p.parse_args()
    with variant(args.step), engine_one_thread(args.engine_one_thread):
        run(args)


@contextlib.contextmanager
def engine_one_thread(on: bool):
    """With ``on``: the engine's per-token work (``Scorer.score`` and ``RunEvents.step``, whose
    ``index_fill`` and ``amax`` open an OpenMP region each per token with several threads) inside
    ``core.backends.step_threads.one_thread()`` for the block; the events are collected inside and
    yielded outside it."""
    if not on:
        yield
        return
    import core.report as report
    import core.scoring as scoring
    from core.backends.step_threads import one_thread

    score0, step0 = scoring.Scorer.score, report.RunEvents.step

    def score(self, input_ids, out):
        with one_thread(input_ids.shape[0]):
            return score0(self, input_ids, out)

    def step(self, *a, **k):
        with one_thread():
            events = list(step0(self, *a, **k))
        yield from events

    scoring.Scorer.score, report.RunEvents.step = score, step
    try:
        yield
    finally:
        scoring.Scorer.score, report.RunEvents.step = score0, step0


def run(args) -> None:
    """The benchmark ``main`` parsed ``args`` for."""
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    import logging, warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    clip = args.clip or sorted((ROOT / "assets" / "samples").glob("*.wav"))[0]
    audio = load_audio(clip)
    print(f"clip {pathlib.Path(clip).name}: {len(audio) / SAMPLE_RATE:.2f} s; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads (decoder step: {args.step}"
          f"{'; engine per-token work on one thread' if getattr(args, 'engine_one_thread', False) else ''}); "
          f"medians of {args.repeats} alternating runs")
    if not args.no_generate:
        print(f"{'model':18} {'tok':>4} {'same':>5} {'encode ms':>10} {'ours ms/tok':>12} {'generate ms/tok':>16} "
              f"{'ratio':>6} {'re-decode ms/tok':>17} {'ratio':>6} {'RTF':>6}")
    models = args.models.split(",")
    for name in models if not args.no_generate else ():
        r = bench_model(name, audio, args.repeats)
        print(f"{r['model']:18} {r['tokens']:>4} {str(r['same_tokens']):>5} {r['encode_ms']:>10.1f} "
              f"{r['ours_ms_per_token']:>12.2f} {r['generate_ms_per_token']:>16.2f} {r['ratio']:>6.2f} "
              f"{r['redecode_ms_per_token']:>17.2f} {r['redecode_ratio']:>6.2f} {r['rtf']:>6.3f}")
        print(f"  text: {r['text']!r}")
    if not args.no_generate:
        print("target: ratio <= 0.80 (ours with top-k report + cross-attention capture vs generate greedy, "
              "nothing captured)")
    if not args.no_ct2:
        import tempfile

        threads = torch.get_num_threads()
        with tempfile.TemporaryDirectory(prefix="bench_speech_ct2_") as tmp:
            print(f"\nours vs CTranslate2 {__import__('ctranslate2').__version__} on the same weights, "
                  f"{threads} thread(s), {args.clock} clock, decode ms/token (ours: top-k 10 + cross-attention captured), "
                  "encode ms; same = ids equal ours in that dtype")
            print(f"{'model':16} {'tok':>4} {'ours f32':>9} {'CT2 f32':>8} {'ratio':>6} {'ours int8':>10} "
                  f"{'CT2 int8':>9} {'ratio':>6} {'same f32/int8':>14} {'enc ours f32/int8':>18} "
                  f"{'enc CT2 f32/int8':>17}")
            rows = []
            for name in models:
                r = bench_ct2(name, audio, args.repeats, threads, pathlib.Path(tmp))
                m, ids = r["med"], r["ids"]
                print(f"{r['model']:16} {r['tokens']:>4} {1000 * m['ours', 'float32'][1]:>9.2f} "
                      f"{1000 * m['ct2', 'float32'][1]:>8.2f} {m['ours', 'float32'][1] / m['ct2', 'float32'][1]:>6.2f} "
                      f"{1000 * m['ours', 'int8'][1]:>10.2f} {1000 * m['ct2', 'int8'][1]:>9.2f} "
                      f"{m['ours', 'int8'][1] / m['ct2', 'int8'][1]:>6.2f} "
                      f"{str(ids['ours', 'float32'] == ids['ct2', 'float32']) + '/' + str(ids['ours', 'int8'] == ids['ct2', 'int8']):>14} "
                      f"{1000 * m['ours', 'float32'][0]:>9.0f}/{1000 * m['ours', 'int8'][0]:<8.0f} "
                      f"{1000 * m['ct2', 'float32'][0]:>8.0f}/{1000 * m['ct2', 'int8'][0]:<8.0f}")
                s, n = agreement(ids["ours", "float32"], ids["ours", "int8"])
                print(f"  clip: ours int8 vs float32 ids {s}/{n} agree; int8 text: "
                      f"{r['models']['int8'].backend.decode(ids['ours', 'int8'])!r}")
                rows.append(r)
            print("targets: ours f32 <= 1.0x CT2 f32, ours int8 <= 1.0x CT2 int8 (ms/token); encoder <= 1.3x CT2")
            if not args.no_espeak:
                print(f"\nespeak set ({len(ESPEAK_SET)} sentences, one clip each): int8 vs float32, WER in points")
                print(f"{'model':16} {'agreement':>10} {'identical':>10} {'WER f32':>8} {'WER int8':>9} "
                      f"{'change':>7} {'WER CT2 int8':>13}")
                for r in rows:
                    try:
                        e = espeak_rows(r, threads)
                    except RuntimeError as exc:  # no espeak-ng
                        print(f"(espeak set skipped: {exc})")
                        break
                    w = e["wer"]
                    print(f"{r['model']:16} {e['agreement']:>10.3f} {str(e['identical']) + '/' + str(e['sentences']):>10} "
                          f"{w['float32']:>8.2f} {w['int8']:>9.2f} {w['int8'] - w['float32']:>+7.2f} {w['ct2 int8']:>13.2f}")
                print("target: WER change <= 0.5 points")
    if args.kv_cache_off:
        print("\nKV cache off (--no-kv-cache): ms of step t (gap between StepEvents), cache on vs off")
        for name in models:
            k = kv_cache_steps(name, audio)
            on, off = k[True][0], k[False][0]
            print(f"{name:16} " + "  ".join(f"t={t}: {on[t]:.1f} / {off[t]:.1f}" for t in on if t in off)
                  + f"   same ids: {k[True][1] == k[False][1]}")


if __name__ == "__main__":
    main()
