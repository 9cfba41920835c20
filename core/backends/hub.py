"""Loading transformers checkpoints by Hugging Face id or local directory.

The three kinds the app takes from the hub share the steps here: :func:`resolve` tells a
directory from a hub id (and refuses what is neither), :func:`from_pretrained` runs the
transformers ``from_pretrained`` calls and turns a failure into an error that names the
id (offline or unknown: "could not be downloaded ... pass a local directory") or the
directory (incomplete: which files are needed). Then one loader per kind reads the ids
and sizes its task needs, beside the model kind it loads (this module imports none of them):

- ``core.backends.whisper_models.load_whisper_pretrained``: ``WhisperForConditionalGeneration``
  + tokenizer + feature extractor (``load_whisper`` calls it for any name that is not bundled);
- ``core.backends.seq2seq_models.load_seq2seq``: translation models (MarianMT, T5, M2M100,
  NLLB) as a ``LoadedSeq2Seq``;
- :func:`load_vision_seq2seq`: ``VisionEncoderDecoderModel`` (TrOCR) with its image
  processor and tokenizer.

Every model is loaded float32, in eval mode, with eager attention (so cross-attention
weights are returned).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")

_DOWNLOAD_FAILED = "could not be downloaded (no internet access, or no such model on the Hugging Face Hub)"


class HubLoadError(ValueError):
    """A model could not be found, downloaded or read (the message says what to do)."""


class WhisperLoadError(HubLoadError):
    """A Whisper model could not be found, downloaded or converted (message says what to do)."""


class Seq2SeqLoadError(HubLoadError):
    """A translation model could not be found, downloaded or read (the message says what to do)."""


class OCRLoadError(HubLoadError):
    """An OCR model could not be found, downloaded or read (the message says what to do)."""


@dataclass(frozen=True)
class HubName:
    """Where a model comes from.

    Attributes:
        given: the name as the user gave it (stripped).
        source: what ``from_pretrained`` is given: the directory's path or the hub id.
        is_local: True for a directory.
        display: the directory's name, or the hub id.
    """

    given: str
    source: str
    is_local: bool
    display: str


def looks_like_path(name: str) -> bool:
    """True for names that are meant as a file system path (not a hub id)."""
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists() or "\\" in name


def resolve(name_or_path: str, error: type[HubLoadError], *, not_a_directory: str, unknown: str,
            is_hub_id: Callable[[str], bool] = lambda n: "/" in n) -> HubName:
    """A directory, or a name shaped like a hub id ("owner/name").

    Args:
        name_or_path: what the user gave.
        error: the kind's error class.
        not_a_directory: message for a path that is not a directory ({name} is filled in).
        unknown: message for a name that is neither a directory nor a hub id ({name}).
        is_hub_id: whether a name that is not a path is a hub id (default: it has a "/").

    Raises:
        ``error`` with one of the two messages.
    """
    given = str(name_or_path).strip()
    path = Path(given).expanduser()
    if path.is_dir():
        return HubName(given, str(path), True, path.name)
    if looks_like_path(given):
        raise error(not_a_directory.format(name=repr(given)))
    if not is_hub_id(given):
        raise error(unknown.format(name=repr(given)))
    return HubName(given, given, False, given)


def from_pretrained(name: HubName, error: type[HubLoadError], load: Callable[[str], T], *, kind: str,
                    files: str, otherwise: str) -> T:
    """``load(name.source)`` (the transformers ``from_pretrained`` calls), with clear errors.

    Args:
        name: from :func:`resolve`.
        error: the kind's error class.
        load: reads the model from a directory path or hub id.
        kind: what the model is, for messages ("Whisper", "translation", "TrOCR").
        files: the files a directory needs ("config.json, weights and tokenizer files").
        otherwise: the alternative offered when a hub id fails ("use 'bundled'").

    Raises:
        ``error``: a directory without the files (its path and the first line of the
            cause), or a hub id that cannot be downloaded (the id; pass a directory).
            An ``error`` raised by ``load`` itself passes through.
    """
    try:
        return load(name.source)
    except HubLoadError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        if name.is_local:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise error(f"{name.source} is not a complete {kind} model directory ({files} are needed): "
                        f"{first}") from exc
        raise error(f"The {kind} model {name.given!r} {_DOWNLOAD_FAILED}. Pass a local directory saved "
                    f"with save_pretrained(), or {otherwise}.") from exc


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, (list, tuple)) else value


def start_and_eos(name: str, error: type[HubLoadError], config: Any, generation: Any, eos_fallback: Any
                   ) -> tuple[int, int]:
    """The decoder start and EOS ids of a seq2seq model (config first, generation config
    as the fallback, as ``generate()`` reads them)."""
    start = config.decoder_start_token_id
    if start is None:
        start = generation.decoder_start_token_id
    eos = _first(generation.eos_token_id if generation.eos_token_id is not None else eos_fallback)
    if start is None or eos is None:
        raise error(f"{name}: the config has no decoder_start_token_id / eos_token_id")
    return int(start), int(eos)


# ---------------------------------------------------------------------------- OCR (TrOCR)


def load_vision_seq2seq(name_or_path: str, progress: Callable[[str], None] | None = None) -> dict:
    """Load a transformers ``VisionEncoderDecoderModel`` (e.g. TrOCR, Li et al. 2021) with
    its image processor and tokenizer, by hub id or local directory.

    Args:
        name_or_path: a Hugging Face id ("microsoft/trocr-small-printed"; needs the
            internet or the HF cache) or a directory saved with ``save_pretrained`` holding
            the model, an image processor (``preprocessor_config.json``) and a tokenizer.
        progress: optional callback receiving short status strings.

    Returns:
        dict with ``model`` (float32, eval, eager attention), ``image_processor``,
        ``tokenizer``, ``name``, ``decoder_start_token_id``, ``eos_token_id``,
        ``pad_token_id``, ``max_new_tokens`` (or None), ``image_size`` (height, width in
        pixels the processor resizes to), ``patch_size`` (pixels) and ``load_s``.

    Raises:
        OCRLoadError: not a directory nor a hub id; download failed (offline: pass a local
            directory); incomplete directory; not a vision encoder-decoder model.
    """
    report = progress or (lambda _m: None)
    unknown = ("unknown OCR model {name}: use 'bundled', a Hugging Face id such as "
               "'microsoft/trocr-small-printed', or a local directory saved with save_pretrained "
               "(model, image processor and tokenizer).")
    name = resolve(name_or_path, OCRLoadError, not_a_directory=unknown, unknown=unknown)
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer, VisionEncoderDecoderModel

    t0 = time.perf_counter()
    report(f"loading {name.given}")

    def load(source: str):
        config = AutoConfig.from_pretrained(source)
        if config.model_type != "vision-encoder-decoder":
            raise OCRLoadError(
                f"{name.given} is a {config.model_type} model, not a vision encoder-decoder (TrOCR) model."
            )
        model = VisionEncoderDecoderModel.from_pretrained(source, attn_implementation="eager", dtype="float32")
        return model, AutoImageProcessor.from_pretrained(source), AutoTokenizer.from_pretrained(source)

    model, image_processor, tokenizer = from_pretrained(
        name, OCRLoadError, load, kind="TrOCR",
        files="config.json, weights, preprocessor_config.json and tokenizer files", otherwise="use 'bundled'",
    )
    model = model.float().eval()
    cfg = model.config
    start, eos = start_and_eos(name.given, OCRLoadError, cfg, model.generation_config, cfg.decoder.eos_token_id)
    size = getattr(image_processor, "size", None) or {}
    get = (lambda k: size.get(k)) if hasattr(size, "get") else (lambda k: getattr(size, k, None))
    if isinstance(size, (int, float)):
        hw = (int(size), int(size))
    else:
        h_, w_, edge = get("height"), get("width"), get("shortest_edge")
        hw = (int(h_ or edge or 384), int(w_ or edge or 384))
    patch = int(_first(getattr(cfg.encoder, "patch_size", 16)))
    limit = getattr(cfg.decoder, "max_position_embeddings", None)
    return {
        "model": model, "image_processor": image_processor, "tokenizer": tokenizer, "name": name.display,
        "decoder_start_token_id": start, "eos_token_id": eos, "pad_token_id": cfg.pad_token_id,
        "max_new_tokens": int(limit) - 2 if limit else None, "image_size": hw, "patch_size": patch,
        "load_s": time.perf_counter() - t0,
    }  # fmt: skip
