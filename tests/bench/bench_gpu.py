"""GPU bench (issue 22): our engine vs transformers' ``generate()`` vs CTranslate2 on Whisper
*shapes*, side by side, on CUDA when present and else on the CPU.

Timing needs no trained weights, so each model is ``transformers.WhisperForConditionalGeneration``
built from a ``WhisperConfig`` with the published sizes and random weights (seeded):

- ``base``: d_model 512, 6 + 6 layers, 8 heads, FFN 2048, 80 mel bins, vocabulary 51,865 (74 M params);
- ``large-v3``: d_model 1280, 32 + 32 layers, 20 heads, FFN 5120, 128 mel bins, vocabulary 51,866
  (1.55 B params). On the CPU only with ``--large`` (float32: 6.2 GB of weights, plus the
  CTranslate2 copy and the converter's; minutes per run).

Each model decodes a forced ``--tokens`` (default 200) tokens over one 30 s window of random
log-mel features, greedy, batch 1:

- **ours**: ``Engine.run(forced_ids=...)`` (the ids are teacher-forced, so random weights still
  give every step; each forced token is reported with its real probabilities), top-k report 10
  and cross-attention capture ON, through the app's Whisper path (``SpeechModel``: the lean
  decoder of ``core.backends.whisper_lean``);
- **generate()**: transformers' greedy ``generate(encoder_outputs=..., min_new_tokens=N,
  max_new_tokens=N)`` (the end token is held back until N tokens, so it runs N steps; it cannot
  take forced ids without changing its per-step work), nothing captured;
- **CT2**: ``ctranslate2.models.Whisper`` over the same weights, converted by
  ``ctranslate2.converters.TransformersConverter`` from a ``save_pretrained`` folder in a temp
  dir, greedy with the end token suppressed (``suppress_tokens=[eot]``) and ``max_length`` = 2 N, so it
  runs N steps too (CTranslate2 4.8's Whisper stops after ``max_length // 2`` generated tokens: measured
  here, 448 -> 224, 200 -> 100; openai/whisper's ``sample_len`` is also half the text context).

Decode is timed with the encoder output passed in (decode only); ms/token = decode time / steps.
The encoder is timed on its own. On CUDA everything runs in float16 (``torch.cuda.synchronize``
around each timing); on the CPU in float32 with ``--threads`` threads (default 1). Runs alternate
ours / generate() / CT2 ``--repeats`` times (default 3) after one warm-up; medians.
Not a pass/fail test: it prints the device name, the torch / transformers / CTranslate2 versions,
and per model the encoder ms and decode ms/token of each with the ratios ours / generate() and
ours / CT2 (issue 22's goal on a GPU: ours <= 1.2x CT2 float16 ms/token with capture on).

    .venv/bin/python tests/bench/bench_gpu.py [--tokens 200] [--large] [--models base,large-v3]
        [--device auto|cpu|cuda] [--threads 1] [--repeats 3] [--no-ct2]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.events import Finished  # noqa: E402
from core.options import DecodingOptions  # noqa: E402

#: the published sizes (openai/whisper-base and openai/whisper-large-v3 config.json)
SHAPES = {
    "base": dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                 decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, num_mel_bins=80,
                 vocab_size=51865),
    "large-v3": dict(d_model=1280, encoder_layers=32, decoder_layers=32, encoder_attention_heads=20,
                     decoder_attention_heads=20, encoder_ffn_dim=5120, decoder_ffn_dim=5120, num_mel_bins=128,
                     vocab_size=51866),
}


def build_shape(name: str, tokenizer, seed: int = 0):
    """A ``WhisperForConditionalGeneration`` of the published shape ``name`` with random weights
    (seeded; transformers' own initialisation), float32, eval mode, eager attention, its
    generation config completed from ``tokenizer`` (the bundled base's: the special ids)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    from core.backends.whisper_models import complete_whisper_config

    sizes = SHAPES[name]
    cfg = WhisperConfig(**sizes, max_source_positions=1500, max_target_positions=448,
                        decoder_start_token_id=50258, eos_token_id=50257, pad_token_id=50257, bos_token_id=50257,
                        begin_suppress_tokens=[220, 50257], suppress_tokens=[])
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(cfg).eval()
    model.set_attn_implementation("eager")
    special = complete_whisper_config(model, tokenizer)
    return model, special


def speech_model(name: str, model, tokenizer, special, device: str, dtype: torch.dtype):
    """Our ``SpeechModel`` over ``model`` (moved to ``device`` / ``dtype``), as the app builds it."""
    from transformers import WhisperFeatureExtractor

    from core.backends.whisper_models import loaded_whisper
    from core.tasks.speech import SpeechModel

    model = model.to(device=device, dtype=dtype)
    fe = WhisperFeatureExtractor(feature_size=model.config.num_mel_bins, sampling_rate=16000)
    loaded = loaded_whisper(model, tokenizer, fe, special, f"whisper-{name} (random weights)", time.perf_counter())
    return SpeechModel(loaded)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def ours_run(sm, feats, prompt, forced, opts, device):
    """(encode s, decode s per step, steps) of one forced decode through our engine."""
    sync(device)
    t0 = time.perf_counter()
    encoded = sm.backend.encode({"input_features": feats})
    sync(device)
    enc = time.perf_counter() - t0
    fin = [ev for ev in sm.engine.run(encoded, prompt, opts, forced_ids=forced, reuse_cache=False)
           if isinstance(ev, Finished)][0]
    steps = fin.stats.n_tokens
    return enc, fin.stats.decode_s / max(1, steps), steps


def generate_run(model, feats, n: int, device: str, prompt_ids, language):
    """(encode s, decode s per step, steps) of transformers' greedy generate() for ``n`` steps."""
    from transformers.modeling_outputs import BaseModelOutput

    with torch.inference_mode():
        sync(device)
        t0 = time.perf_counter()
        hidden = model.get_encoder()(feats).last_hidden_state
        sync(device)
        t1 = time.perf_counter()
        out = model.generate(encoder_outputs=BaseModelOutput(last_hidden_state=hidden),
                             language=language, task="transcribe",
                             min_new_tokens=n, max_new_tokens=n, do_sample=False, num_beams=1)
        sync(device)
        t2 = time.perf_counter()
    seq = out if torch.is_tensor(out) else out.sequences
    steps = sum(1 for t in seq[0].tolist() if t not in set(prompt_ids))  # transformers 5 returns the new ids only
    return t1 - t0, (t2 - t1) / max(1, steps), steps


def ct2_model(model, tokenizer, tmp: pathlib.Path, device: str, compute_type: str, threads: int):
    """CTranslate2's Whisper over ``model``'s weights: ``save_pretrained`` into ``tmp``, then its
    transformers converter (weights kept in float16 on disk; computed in ``compute_type``)."""
    import ctranslate2

    src, dst = tmp / "hf", tmp / "ct2"
    model.save_pretrained(src)
    tokenizer.save_pretrained(src)
    ctranslate2.converters.TransformersConverter(str(src)).convert(str(dst), quantization="float16", force=True)
    return ctranslate2.models.Whisper(str(dst), device=device, compute_type=compute_type, intra_threads=threads,
                                      inter_threads=1)


def ct2_run(model, feats, prompt_ids, n: int, eot: int):
    """(encode s, decode s per step, steps) of CTranslate2 greedy for ``n`` steps (end token suppressed)."""
    import ctranslate2

    x = ctranslate2.StorageView.from_array(feats.float().cpu().numpy())
    t0 = time.perf_counter()
    enc = model.encode(x, to_cpu=False)
    t1 = time.perf_counter()
    res = model.generate(enc, [list(prompt_ids)], beam_size=1, max_length=2 * n,  # it stops at max_length // 2
                         suppress_tokens=[eot], suppress_blank=False)
    t2 = time.perf_counter()
    steps = len(res[0].sequences_ids[0])
    return t1 - t0, (t2 - t1) / max(1, steps), steps


def bench(name: str, tokenizer, args, device: str, tmp: pathlib.Path) -> dict:
    """Median encoder ms and decode ms/token of ours, generate() and CT2 on the shape ``name``."""
    dtype = torch.float16 if device == "cuda" else torch.float32
    t0 = time.perf_counter()
    model, special = build_shape(name, tokenizer)
    params = sum(p.numel() for p in model.parameters())
    ct2 = None
    if not args.no_ct2:
        ct2 = ct2_model(model, tokenizer, tmp / name, device, "float16" if device == "cuda" else "float32",
                        args.threads)
    sm = speech_model(name, model, tokenizer, special, device, dtype)
    model = sm._loaded.model
    built_s = time.perf_counter() - t0
    prompt = sm.prompt("en", "transcribe")
    gen = torch.Generator().manual_seed(1)
    forced = torch.randint(1000, 20000, (args.tokens,), generator=gen).tolist()  # ordinary text tokens
    feats = torch.randn(1, model.config.num_mel_bins, 3000, generator=gen).to(device=device, dtype=dtype)
    opts = DecodingOptions(strategy="greedy", top_k_report=10, capture_attention=True,
                           max_new_tokens=args.tokens)
    runs = {"ours": lambda: ours_run(sm, feats, prompt, forced, opts, device),
            "generate()": lambda: generate_run(model, feats, args.tokens, device, prompt.prompt_ids, "en")}
    if ct2 is not None:
        runs["CT2"] = lambda: ct2_run(ct2, feats, prompt.prompt_ids, args.tokens, special.eot)
    times: dict = {k: [] for k in runs}
    steps: dict = {}
    for i in range(args.repeats + 1):
        for who, run in runs.items():
            enc, per, n = run()
            steps[who] = n
            if i:  # the first round warms up (allocations, kernels, caches)
                times[who].append((enc, per))
    med = {k: (1000 * statistics.median(e for e, _ in v), 1000 * statistics.median(p for _, p in v))
           for k, v in times.items()}
    return {"model": name, "params": params, "med": med, "steps": steps, "built_s": built_s,
            "dtype": str(dtype).replace("torch.", "")}


def print_table(r: dict) -> None:
    med, steps = r["med"], r["steps"]
    print(f"\nwhisper-{r['model']} shape, random weights ({r['params'] / 1e6:.0f} M params, {r['dtype']}; "
          f"built and converted in {r['built_s']:.1f} s)")
    print(f"  {'engine':<12} {'encoder ms':>11} {'decode ms/token':>16} {'steps':>6} "
          f"{'ours/it enc':>12} {'ours/it dec':>12}")
    o_enc, o_dec = med["ours"]
    for who, (enc, dec) in med.items():
        ratio = "" if who == "ours" else f"{o_enc / enc:>11.2f}x {o_dec / dec:>11.2f}x"
        print(f"  {who:<12} {enc:>11.1f} {dec:>16.2f} {steps[who]:>6} {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=200, help="forced decode steps (default 200)")
    ap.add_argument("--models", default=None, help="comma list of shapes: base, large-v3 (default: base, and "
                                                     "large-v3 on CUDA or with --large)")
    ap.add_argument("--large", action="store_true", help="also large-v3 on the CPU (1.5 B params, float32: slow)")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for torch and CT2 (default 1)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-ct2", action="store_true", help="skip CTranslate2")
    ap.add_argument("--tokenizer-json", default=None,
                    help="a Whisper tokenizer.json to use instead of the bundled base package's (a GPU machine "
                         "without the model packages; the weights are random either way)")
    args = ap.parse_args()
    if args.tokens + 4 > 448:
        ap.error("--tokens must leave room for the prompt in Whisper's 448 positions (<= 444)")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: torch.cuda.is_available() is False; use --device cpu")
    torch.set_num_threads(args.threads)
    models = args.models.split(",") if args.models else (
        ["base", "large-v3"] if device == "cuda" or args.large else ["base"])
    import transformers

    try:
        import ctranslate2
        ct2_version = ctranslate2.__version__
    except ImportError:
        ct2_version, args.no_ct2 = "not installed (pip install ctranslate2)", True
    name = torch.cuda.get_device_name(0) if device == "cuda" else f"CPU, {args.threads} thread(s)"
    print(f"device: {name}; torch {torch.__version__}, transformers {transformers.__version__}, "
          f"CTranslate2 {ct2_version}")
    print(f"forced decode of {args.tokens} tokens, greedy, batch 1; ours with top-k report 10 and cross-attention "
          f"capture on; medians of {args.repeats} runs after one warm-up; "
          + ("float16" if device == "cuda" else "float32"))
    if device == "cpu" and "large-v3" not in models:
        print("large-v3 skipped on the CPU (1.5 B params in float32; add --large to run it)")
    if args.tokenizer_json:
        import json

        from core.backends.whisper_tokens import build_whisper_tokenizer

        tokenizer = build_whisper_tokenizer(json.loads(pathlib.Path(args.tokenizer_json).read_text("utf-8")), 51865)
    else:
        from core.backends.whisper_models import load_whisper

        tokenizer = load_whisper("base").tokenizer  # the special ids and token texts (weights unused)
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            print_table(bench(m, tokenizer, args, device, pathlib.Path(tmp)))
    print("\nratios: ours / it, per column (< 1: ours faster). Issue 22's GPU goal: ours <= 1.2x CT2 float16 "
          "ms/token with capture on.")


if __name__ == "__main__":
    main()
