"""Benchmark: our engine vs transformers' generate() on Whisper tiny.en / base shapes, CPU.

Random weights with the real configs (same shapes, so the same speed). Both decode
exactly N tokens after the same prompt (EOS suppressed). Ours: greedy with top-k
report (10) and cross-attention capture ON. generate(): greedy, nothing captured.
The encoder runs once, outside the timing, for both. Prints ms/token and the ratio
(ours / generate; the product target is <= 0.8).

``--overhead`` times only the engine's own work above the backend (issue 22): a stand-in
backend hands out precomputed logits and cross-attention (no model call), so each step's
time is the Scorer, the strategy, the per-step report (top-k, entropy, varentropy, ranks,
the attention row) and the events. Shapes: Whisper tiny.en (51,864 tokens, 4 x 6 heads x
1500 frames, Whisper's suppressed tokens), Bergamot with its shortlist (32,000 tokens,
~500 finite) and with the full softmax.

    .venv/bin/python -m tests.bench.bench_engine [--tokens 50] [--repeats 3]
    .venv/bin/python -m tests.bench.bench_engine --overhead [--tokens 200] [--repeats 5]

``--overhead-model tiny.en [--dtype int8]`` measures the same above a real bundled Whisper model
on the bundled sample clip, in CPU time: a greedy engine run (capture on) minus the bare decoder
calls that feed the same ids (``backend.step`` alone), per step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import logging as hf_logging

from core.backends.base import DecoderPrompt
from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.options import DecodingOptions

CONFIGS = {  # openai/whisper-tiny.en and whisper-base (config.json)
    "tiny.en": dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                    decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536, vocab_size=51864),
    "base": dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                 decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, vocab_size=51865),
}
PROMPT = (50257, 50362)  # <|startoftranscript|> <|notimestamps|> (tiny.en ids)
EOS = 50256


class _Tok:
    """Stand-in tokenizer: the benchmark measures decoding, not detokenisation."""

    all_special_ids = [EOS]

    def convert_ids_to_tokens(self, i):
        return f"t{i}"

    def convert_tokens_to_string(self, toks):
        return " ".join(toks)

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(f"t{i}" for i in ids)


def bench(name: str, n_tokens: int, repeats: int) -> None:
    torch.manual_seed(0)
    cfg = WhisperConfig(**CONFIGS[name], num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
                        eos_token_id=EOS, pad_token_id=EOS, decoder_start_token_id=PROMPT[0])
    model = WhisperForConditionalGeneration(cfg).eval()
    backend = HFSeq2SeqBackend(model, _Tok(), name)
    features = torch.randn(1, 80, 3000)
    encoded = backend.encode({"input_features": features})
    prompt = DecoderPrompt(prompt_ids=PROMPT, eos_token_id=EOS, suppress_tokens=(EOS,))
    options = DecodingOptions(strategy="greedy", max_new_tokens=n_tokens, top_k_report=10, capture_attention=True)
    engine = Engine(backend)
    enc_out = BaseModelOutput(last_hidden_state=encoded.hidden_states)

    def ours() -> float:
        t = time.perf_counter()
        fin = list(engine.run(encoded, prompt, options))[-1]
        assert len(fin.token_ids) == n_tokens
        return (time.perf_counter() - t) * 1000 / n_tokens

    def theirs() -> float:
        t = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(encoder_outputs=enc_out, decoder_input_ids=torch.tensor([PROMPT]),
                                 max_new_tokens=n_tokens, do_sample=False, num_beams=1, suppress_tokens=[EOS])
        n = out.shape[1] - (len(PROMPT) if out.shape[1] > n_tokens else 0)
        assert n == n_tokens, out.shape
        return (time.perf_counter() - t) * 1000 / n_tokens

    ours(), theirs()  # warm-up
    a, b = [], []
    for _ in range(repeats):  # interleaved so both see the same machine load
        a.append(ours())
        b.append(theirs())
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{name:8s} threads={torch.get_num_threads()}  ours {ma:6.2f} ms/token   "
          f"generate {mb:6.2f} ms/token   ratio {ma / mb:.2f}")


class _Precomputed:
    """A stand-in backend: ``step`` hands out precomputed logits (cycling through ``rows``)
    and a fixed cross-attention; no model runs, so a run's time is the engine's own."""

    def __init__(self, name: str, logits: torch.Tensor, attention: torch.Tensor):
        self.name, self.vocab_size = name, logits.shape[-1]
        self.logits, self.attention, self.calls = logits, attention, 0

    def encode(self, model_inputs):
        from core.backends.base import EncoderOutput
        return EncoderOutput(hidden_states=torch.zeros(1, self.attention.shape[-1], 8), source_len=self.attention.shape[-1])

    def init_cache(self, encoded, batch_size):
        return None

    def step(self, input_ids, cache, output_attentions, **kw):
        from core.backends.base import StepOutput
        row = self.logits[self.calls % self.logits.shape[0]][None].clone()  # the backend's fresh tensor
        self.calls += 1
        return StepOutput(row, self.attention.clone() if output_attentions else None, None)

    def token_text(self, token_id: int) -> str:
        return f" t{token_id}"

    def decode(self, token_ids) -> str:
        return "".join(f" t{i}" for i in token_ids)

    def tokenize(self, text: str) -> list[int]:
        return []


def _overhead_backends() -> dict[str, tuple[_Precomputed, DecoderPrompt]]:
    """Per shape: (stand-in backend, prompt with the model's hard rules)."""
    g = torch.Generator().manual_seed(0)
    n = 64
    whisper = torch.randn(n, 51864, generator=g) * 3.0
    whisper[:, torch.randint(0, 51864, (n,), generator=g)] += 25.0  # a confident step, as speech mostly is
    suppress = tuple(range(50358, 50364)) + tuple(range(1, 90))  # Whisper's non-speech tokens, about as many
    speech = DecoderPrompt(prompt_ids=PROMPT, eos_token_id=EOS, suppress_tokens=suppress,
                           begin_suppress_tokens=(220, EOS))
    attn_w = torch.softmax(torch.randn(1, 4, 6, 1500, generator=g), -1)
    short = torch.full((n, 32000), float("-inf"))
    for i in range(n):
        ids = torch.randperm(32000, generator=g)[:500]
        short[i, ids] = torch.randn(500, generator=g) * 3.0
    full = torch.randn(n, 32000, generator=g) * 3.0
    mt = DecoderPrompt(prompt_ids=(0,), eos_token_id=1, suppress_tokens=(2,))
    attn_t = torch.softmax(torch.randn(1, 2, 8, 24, generator=g), -1)
    return {
        "tiny.en": (_Precomputed("tiny.en", whisper, attn_w), speech),
        "bergamot shortlist": (_Precomputed("bergamot", short, attn_t), mt),
        "bergamot full": (_Precomputed("bergamot", full, attn_t), mt),
    }


def bench_overhead(n_tokens: int, repeats: int, clock=time.perf_counter) -> None:
    """Prints the engine's ms per step above the backend, greedy with capture on
    (top-k 10, cross-attention), per shape (median of ``repeats`` runs; ``clock``:
    ``time.perf_counter`` or ``time.process_time``, the CPU time, steadier on a busy machine)."""
    options = DecodingOptions(strategy="greedy", max_new_tokens=n_tokens, top_k_report=10, capture_attention=True)
    for name, (backend, prompt) in _overhead_backends().items():
        engine = Engine(backend, kept_caches=0)
        encoded = backend.encode({})
        suppress = DecoderPrompt(**{**prompt.__dict__, "suppress_tokens": prompt.suppress_tokens + (prompt.eos_token_id,)})

        def once() -> float:
            t = clock()
            fin = list(engine.run(encoded, suppress, options))[-1]
            assert len(fin.token_ids) == n_tokens
            return (clock() - t) * 1000 / n_tokens

        once()
        times = [once() for _ in range(repeats)]
        print(f"{name:20s} threads={torch.get_num_threads()}  engine overhead {statistics.median(times):6.3f} ms/step "
              f"(min {min(times):.3f})")


class _Timed:
    """A backend proxy that adds up this thread's CPU time inside ``step`` (``spent``, s) and
    between one step's return and the next step's call (``between``, s: the engine's work on
    a step, its events consumed)."""

    def __init__(self, backend):
        self._backend = backend
        self.reset()

    def reset(self) -> None:
        self.spent = self.between = 0.0
        self._left: float | None = None
        self.gaps = 0

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def step(self, *args, **kwargs):
        t = time.thread_time()
        if self._left is not None:
            self.between += t - self._left
            self.gaps += 1
        try:
            return self._backend.step(*args, **kwargs)
        finally:
            self._left = time.thread_time()
            self.spent += self._left - t


def bench_overhead_model(name: str, dtype: str, repeats: int) -> None:
    """Prints per step: the engine run, the decoder calls inside it, and the difference (the
    engine's own work: scoring, strategy, report, events, cache bookkeeping), this thread's
    CPU ms, medians of ``repeats`` runs (re-decodes of one encoder output, no cache reuse)."""
    import pathlib

    from core.events import Finished
    from core.inputs.audio import load_audio
    from core.tasks.speech import SAMPLE_RATE, SpeechModel

    sm = SpeechModel.load(name, dtype=dtype)
    clip = sorted((pathlib.Path(__file__).resolve().parents[2] / "assets" / "samples").glob("*.wav"))[0]
    feats = sm._loaded.feature_extractor(load_audio(clip), sampling_rate=SAMPLE_RATE,
                                         return_tensors="pt").input_features
    encoded = sm.backend.encode({"input_features": feats})
    prompt = sm.prompt("en", "transcribe")
    options = DecodingOptions(strategy="greedy", max_new_tokens=200, top_k_report=10, capture_attention=True)
    timed = _Timed(sm.backend)
    engine = Engine(timed, kept_caches=0)

    def run() -> tuple[float, float, float, int]:
        timed.reset()
        t = time.thread_time()
        fin = [e for e in engine.run(encoded, prompt, options, reuse_cache=False) if isinstance(e, Finished)][0]
        assert timed.gaps == len(fin.token_ids) + (fin.reason == "eos") - 1
        return time.thread_time() - t, timed.spent, timed.between, timed.gaps

    run()
    runs = [run() for _ in range(repeats)]
    gaps = runs[0][3]
    total = statistics.median(r[0] for r in runs) * 1000 / (gaps + 1)
    decoder = statistics.median(r[1] for r in runs) * 1000 / (gaps + 1)
    between = statistics.median(r[2] for r in runs) * 1000 / gaps
    setup = statistics.median(r[0] - r[1] - r[2] for r in runs) * 1000
    print(f"{name} {dtype:7s} threads={torch.get_num_threads()} {gaps + 1} steps: run {total:6.3f} ms/step, "
          f"decoder calls {decoder:6.3f} ms/step, engine's own work between calls {between:6.3f} ms/step, "
          f"set-up and finish {setup:6.2f} ms/run (thread CPU time)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(CONFIGS))
    parser.add_argument("--overhead", action="store_true",
                        help="time only the engine above a stand-in backend (precomputed logits), one thread")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="--overhead: wall time or this process's CPU time")
    parser.add_argument("--overhead-model", default=None, help="a bundled Whisper model: its engine overhead")
    parser.add_argument("--dtype", default="float32", help="--overhead-model: float32 or int8")
    args = parser.parse_args()
    hf_logging.set_verbosity_error()
    if args.overhead_model:
        torch.set_num_threads(1)
        bench_overhead_model(args.overhead_model, args.dtype, args.repeats)
        return
    if args.overhead:
        torch.set_num_threads(1)
        bench_overhead(args.tokens, args.repeats, time.process_time if args.clock == "cpu" else time.perf_counter)
        return
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for name in args.models:
            bench(name, args.tokens, args.repeats)


if __name__ == "__main__":
    main()
