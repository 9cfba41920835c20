"""Benchmark: our engine vs transformers' generate() on Whisper tiny.en / base shapes, CPU.

Random weights with the real configs (same shapes, so the same speed). Both decode
exactly N tokens after the same prompt (EOS suppressed). Ours: greedy with top-k
report (10) and cross-attention capture ON. generate(): greedy, nothing captured.
The encoder runs once, outside the timing, for both. Prints ms/token and the ratio
(ours / generate; the product target is <= 0.8).

    .venv/bin/python -m tests.bench.bench_engine [--tokens 50] [--repeats 3]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(CONFIGS))
    args = parser.parse_args()
    hf_logging.set_verbosity_error()
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for name in args.models:
            bench(name, args.tokens, args.repeats)


if __name__ == "__main__":
    main()
