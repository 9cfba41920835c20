"""Tiny random transformers seq2seq models built from configs (no downloads), seeded.

``init_std`` is large on purpose: with the usual 0.02 a random decoder repeats one
token forever, and parity with ``generate()`` on such output proves little.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import (
    MarianConfig,
    MarianMTModel,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
    WhisperConfig,
    WhisperForConditionalGeneration,
)
from transformers.utils import logging as hf_logging

from core.backends.base import DecoderPrompt

hf_logging.set_verbosity_error()

V = 96  # vocabulary size of every tiny model


def word_tokenizer(vocab_size: int, specials: dict[str, int]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer whose token i is "w{i}" (special ids get their names)."""
    names = {i: f"w{i}" for i in range(vocab_size)}
    for name, i in specials.items():
        names[i] = name
    tok = Tokenizer(WordLevel({n: i for i, n in names.items()}, unk_token=names[0]))
    tok.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, additional_special_tokens=list(specials))


@dataclass
class Tiny:
    """A tiny model, its tokenizer, encoder inputs and decoder prompt."""

    kind: str
    model: Any
    tokenizer: Any
    inputs: dict
    prompt: DecoderPrompt


def tiny_whisper(seed: int = 2, decoder_layers: int = 2) -> Tiny:
    torch.manual_seed(seed)
    cfg = WhisperConfig(
        vocab_size=V, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=decoder_layers,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_source_positions=40, max_target_positions=64, pad_token_id=V - 1, bos_token_id=V - 2,
        eos_token_id=V - 2, decoder_start_token_id=V - 3, init_std=1.0,
    )
    model = WhisperForConditionalGeneration(cfg).eval()
    feats = torch.randn(1, 16, 80, generator=torch.Generator().manual_seed(1))
    tok = word_tokenizer(V, {"<|endoftext|>": V - 2, "<|pad|>": V - 1, "<|startoftranscript|>": V - 3})
    prompt = DecoderPrompt(prompt_ids=(V - 3, 5, 6), eos_token_id=V - 2, suppress_tokens=(7, 8),
                           begin_suppress_tokens=(V - 2, 9))
    return Tiny("whisper", model, tok, {"input_features": feats}, prompt)


def tiny_marian(seed: int = 0, padded: bool = True) -> Tiny:
    torch.manual_seed(seed)
    cfg = MarianConfig(
        vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        pad_token_id=V - 1, eos_token_id=0, decoder_start_token_id=V - 1, init_std=0.1,
        scale_embedding=True, forced_eos_token_id=None, tie_word_embeddings=False,
    )
    model = MarianMTModel(cfg).eval()
    ids = torch.tensor([[11, 12, 13, 14, 15, 16, 0, V - 1, V - 1]])  # source + EOS + padding
    mask = (ids != V - 1).long()
    if not padded:
        ids, mask = ids[:, :7], mask[:, :7]
    tok = word_tokenizer(V, {"</s>": 0, "<pad>": V - 1})
    prompt = DecoderPrompt(prompt_ids=(V - 1,), eos_token_id=0)
    return Tiny("marian", model, tok, {"input_ids": ids, "attention_mask": mask}, prompt)


def tiny_t5(seed: int = 0) -> Tiny:
    torch.manual_seed(seed)
    cfg = T5Config(
        vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, initializer_factor=8.0,
    )
    model = T5ForConditionalGeneration(cfg).eval()
    ids = torch.tensor([[21, 22, 23, 24, 25, 1, 0, 0]])
    mask = (ids != 0).long()
    tok = word_tokenizer(V, {"<pad>": 0, "</s>": 1})
    prompt = DecoderPrompt(prompt_ids=(0,), eos_token_id=1)
    return Tiny("t5", model, tok, {"input_ids": ids, "attention_mask": mask}, prompt)


MAKERS = {"whisper": tiny_whisper, "marian": tiny_marian, "t5": tiny_t5}


@pytest.fixture(scope="session")
def tiny_models() -> dict[str, Tiny]:
    return {name: make() for name, make in MAKERS.items()}


def add_eos_bias(model: Any, eos_token_id: int, bias: float, scale: float = 1.0) -> Any:
    """Give ``model``'s output layer a bias that adds ``bias`` to the EOS logit (and
    multiply its weights by ``scale``, to soften a too peaked random model); in place.

    The output layer is replaced by an ``nn.Linear`` with a bias (``set_output_embeddings``:
    Whisper's ``proj_out``, T5/Marian/M2M100's ``lm_head``, TrOCR's ``output_projection``),
    so both ``generate()`` and our backends (which call the model or read this layer) see it.
    Call it before building an ``HFSeq2SeqBackend`` on a Whisper model: its lean decoder
    copies the output weights once.

    Without it every hypothesis of the random tiny models runs to ``max_new_tokens`` and
    beam search never has to rank finished hypotheses of different lengths.
    """
    old = model.get_output_embeddings()
    new = torch.nn.Linear(old.in_features, old.out_features, bias=True, dtype=old.weight.dtype)
    with torch.no_grad():
        new.weight.copy_(old.weight * scale)
        if getattr(old, "bias", None) is not None:
            new.bias.copy_(old.bias * scale)
        else:
            new.bias.zero_()
        new.bias[eos_token_id] += bias
    model.set_output_embeddings(new)
    return model


# (scale, EOS bias) per tiny model: hypotheses then end at EOS after 0-8 tokens or run to the
# 16-token limit, and beam search's choice depends on the length penalty (checked in
# tests/core/test_engine.py::test_eos_cases_depend_on_length_penalty)
EOS_BIAS = {"whisper": (1.0, 10.0), "marian": (1.0, 0.8), "t5": (0.05, 5.0)}


@pytest.fixture(scope="session")
def tiny_eos_models() -> dict[str, Tiny]:
    """The tiny models with the EOS logit raised (``EOS_BIAS``), so that they stop early."""
    out = {}
    for name, make in MAKERS.items():
        tiny = make()
        scale, bias = EOS_BIAS[name]
        add_eos_bias(tiny.model, tiny.prompt.eos_token_id, bias, scale)
        out[name] = tiny
    return out
