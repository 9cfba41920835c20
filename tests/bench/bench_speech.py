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

    .venv/bin/python tests/bench/bench_speech.py [clip.wav] [--threads N]
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
from core.options import DecodingOptions  # noqa: E402
from core.tasks.speech import SAMPLE_RATE, SpeechModel  # noqa: E402

REPEATS = 5


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("clip", nargs="?", default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeats", type=int, default=REPEATS)
    p.add_argument("--models", default="tiny.en,base")
    args = p.parse_args()
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
          f"{torch.get_num_threads()} threads; medians of {args.repeats} alternating runs")
    print(f"{'model':18} {'tok':>4} {'same':>5} {'encode ms':>10} {'ours ms/tok':>12} {'generate ms/tok':>16} "
          f"{'ratio':>6} {'re-decode ms/tok':>17} {'ratio':>6} {'RTF':>6}")
    for name in args.models.split(","):
        r = bench_model(name, audio, args.repeats)
        print(f"{r['model']:18} {r['tokens']:>4} {str(r['same_tokens']):>5} {r['encode_ms']:>10.1f} "
              f"{r['ours_ms_per_token']:>12.2f} {r['generate_ms_per_token']:>16.2f} {r['ratio']:>6.2f} "
              f"{r['redecode_ms_per_token']:>17.2f} {r['redecode_ratio']:>6.2f} {r['rtf']:>6.3f}")
        print(f"  text: {r['text']!r}")
    print("target: ratio <= 0.80 (ours with top-k report + cross-attention capture vs generate greedy, nothing captured)")


if __name__ == "__main__":
    main()
