"""Reading and writing the bundled OCR reader's files.

A reader directory (``assets/ocr/``, or a training run's output) holds
``model.safetensors`` (weights, float16 by default), ``config.json``
(:class:`~core.backends.ocr_attn.OCRAttnConfig`) and ``vocab.json``
(:class:`~core.backends.ocr_vocab.OCRVocab`): :func:`save_pretrained`,
:func:`load_pretrained`. (EasyOCR's own ``english_g2.pth`` is read by
``core.backends.english_g2.load_english_g2_state_dict``.)
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
import torch

from core.backends.ocr_attn import OCRAttnConfig, OCRAttnModel
from core.backends.ocr_vocab import OCRVocab

CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILE = "config.json", "vocab.json", "model.safetensors"


def save_pretrained(model: OCRAttnModel, directory: str | Path, dtype: torch.dtype = torch.float16) -> None:
    """Write ``model.safetensors`` (weights cast to ``dtype``; BatchNorm counters
    stay int64), ``config.json`` and ``vocab.json`` into ``directory``."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {
        k: (v.detach().to(dtype) if v.is_floating_point() else v.detach()).contiguous().clone()
        for k, v in model.state_dict().items()
    }
    save_file(state, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
    cfg = asdict(model.cfg)
    (directory / CONFIG_FILE).write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    vocab = OCRVocab(model.cfg.characters).to_json()
    (directory / VOCAB_FILE).write_text(json.dumps(vocab, indent=2, ensure_ascii=False) + "\n")


def load_pretrained(directory: str | Path, device: str | torch.device = "cpu") -> tuple[OCRAttnModel, OCRVocab]:
    """Load a model written by :func:`save_pretrained` (weights up-cast to float32),
    in eval mode.

    Raises:
        FileNotFoundError: if a file is missing.
        ValueError: if config and vocabulary disagree or weights do not match.
    """
    from safetensors.torch import load_file

    directory = Path(directory)
    for name in (CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILE):
        if not (directory / name).is_file():
            raise FileNotFoundError(f"{directory / name} is missing; expected an OCR model folder "
                                    f"with {CONFIG_FILE}, {VOCAB_FILE} and {WEIGHTS_FILE}.")
    cfg = OCRAttnConfig(**json.loads((directory / CONFIG_FILE).read_text()))
    vocab = OCRVocab.from_json(json.loads((directory / VOCAB_FILE).read_text()))
    if vocab.characters != cfg.characters:
        raise ValueError(f"{VOCAB_FILE} and {CONFIG_FILE} list different characters.")
    model = OCRAttnModel(cfg)
    state = load_file(str(directory / WEIGHTS_FILE))
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ValueError(f"{directory / WEIGHTS_FILE} does not fit config.json: {e}") from e
    return model.to(device).eval(), vocab
