"""Loading transformers checkpoints by Hugging Face id or local directory.

The three kinds the app takes from the hub share the steps here: :func:`resolve` tells a
directory from a hub id (and refuses what is neither), :func:`from_pretrained` runs the
transformers ``from_pretrained`` calls and turns a failure into an error that names the
id (offline or unknown: "could not be downloaded ... pass a local directory") or the
directory (incomplete: which files are needed). Then one loader per kind reads the ids
and sizes its task needs:

- :func:`load_whisper_pretrained`: ``WhisperForConditionalGeneration`` + tokenizer +
  feature extractor (``core.backends.whisper_models.load_whisper`` calls it for any name
  that is not bundled);
- :func:`load_seq2seq`: translation models (MarianMT, T5, M2M100, NLLB) as a
  ``core.backends.seq2seq_models.LoadedSeq2Seq``;
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


def _start_and_eos(name: str, error: type[HubLoadError], config: Any, generation: Any, eos_fallback: Any
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


# ---------------------------------------------------------------------------- Whisper


def load_whisper_pretrained(name_or_path: str, progress: Callable[[str], None]):
    """A transformers Whisper checkpoint (hub id or directory) as a
    ``core.backends.whisper_models.LoadedWhisper``.

    Raises:
        WhisperLoadError: a path that is not a directory; a name that is not a hub id; an
            incomplete directory; a hub id that cannot be downloaded.
    """
    from core.backends.whisper_models import BUNDLED_WHISPER, complete_whisper_config, loaded_whisper

    name = resolve(
        name_or_path, WhisperLoadError,
        not_a_directory="{name} is not a directory; pass a Whisper model directory saved with save_pretrained.",
        unknown=f"Unknown Whisper model {{name}}: use one of the bundled models ({', '.join(BUNDLED_WHISPER)}), "
                "a Hugging Face id such as 'openai/whisper-small', or a local directory.",
    )
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperTokenizer

    t0 = time.perf_counter()
    progress(f"loading {name.given}")

    def load(source: str):
        model = WhisperForConditionalGeneration.from_pretrained(source, attn_implementation="eager",
                                                                dtype="float32")
        return model, WhisperTokenizer.from_pretrained(source)

    model, tokenizer = from_pretrained(name, WhisperLoadError, load, kind="Whisper",
                                       files="config.json, weights and tokenizer files",
                                       otherwise=f"one of the bundled models: {', '.join(BUNDLED_WHISPER)}")
    try:
        feature_extractor = WhisperFeatureExtractor.from_pretrained(name.source)
    except OSError:  # no preprocessor_config.json: Whisper's standard front end
        from core.backends.whisper_ct2 import WHISPER_SAMPLE_RATE

        feature_extractor = WhisperFeatureExtractor(feature_size=model.config.num_mel_bins,
                                                    sampling_rate=WHISPER_SAMPLE_RATE)
    model = model.float().eval()
    special = complete_whisper_config(model, tokenizer)
    display = name.display.rsplit("/", 1)[-1]  # "openai/whisper-small" -> "whisper-small"
    return loaded_whisper(model, tokenizer, feature_extractor, special, display, t0)


# ---------------------------------------------------------------------------- translation


def load_seq2seq(name_or_path: str, progress: Callable[[str], None] | None = None):
    """Load a transformers translation model by hub id or local directory.

    Args:
        name_or_path: a Hugging Face id ("Helsinki-NLP/opus-mt-en-de", "t5-small",
            "facebook/m2m100_418M", "facebook/nllb-200-distilled-600M"; needs the internet
            or the HF cache) or a directory saved with ``save_pretrained`` (model and
            tokenizer).
        progress: optional callback receiving short status strings.

    Returns:
        ``core.backends.seq2seq_models.LoadedSeq2Seq`` (float32, eval mode, eager attention).

    Raises:
        Seq2SeqLoadError: the name is neither a directory nor a hub id; the download failed
            (offline: the message says to pass a local directory); a directory is incomplete;
            the model is not an encoder-decoder.
    """
    from core.backends import seq2seq_models as s2s

    report = progress or (lambda _m: None)
    name = resolve(
        name_or_path, Seq2SeqLoadError,
        not_a_directory="{name} is not a directory; pass a translation model directory saved with "
                        "save_pretrained (config.json, weights and tokenizer files).",
        unknown="unknown translation model {name}: use en-pt or pt-en (bundled), a Hugging Face id such as "
                "'Helsinki-NLP/opus-mt-en-de', or a local directory saved with save_pretrained.",
        is_hub_id=lambda n: "/" in n or n in ("t5-small", "t5-base", "t5-large"),
    )
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    t0 = time.perf_counter()
    report(f"loading {name.given}")

    def load(source: str):
        config = AutoConfig.from_pretrained(source)
        if not getattr(config, "is_encoder_decoder", False):
            raise Seq2SeqLoadError(
                f"{name.given} is a {config.model_type} model, not an encoder-decoder translation model; "
                "use a MarianMT, T5, M2M100 or NLLB model."
            )
        model = AutoModelForSeq2SeqLM.from_pretrained(source, attn_implementation="eager", dtype="float32")
        return model, AutoTokenizer.from_pretrained(source)

    model, tokenizer = from_pretrained(name, Seq2SeqLoadError, load, kind="translation",
                                       files="config.json, weights and tokenizer files",
                                       otherwise="use the bundled en-pt / pt-en")
    model = model.float().eval()
    cfg, gen = model.config, model.generation_config
    family = s2s.family_of(cfg.model_type, tokenizer)
    start, eos = _start_and_eos(name.given, Seq2SeqLoadError, cfg, gen, cfg.eos_token_id)
    suppress = {int(w[0]) for w in (gen.bad_words_ids or []) if len(w) == 1}
    suppress.update(int(t) for t in (gen.suppress_tokens or []))
    limit = getattr(cfg, "max_position_embeddings", None)
    many = family in ("m2m100", "nllb")
    return s2s.LoadedSeq2Seq(
        model=model, tokenizer=tokenizer, name=name.display, family=family, decoder_start_token_id=start,
        eos_token_id=eos, pad_token_id=cfg.pad_token_id, suppress_tokens=tuple(sorted(suppress)),
        max_new_tokens=int(limit) - 2 if family in ("marian", "m2m100", "nllb") and limit else None,
        languages=s2s.languages_of(tokenizer),
        default_prefix=s2s.T5_DEFAULT_PREFIX if family == "t5" else "",
        default_target_language=getattr(tokenizer, "tgt_lang", None) if many else None,
        load_s=time.perf_counter() - t0,
    )


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
    start, eos = _start_and_eos(name.given, OCRLoadError, cfg, model.generation_config, cfg.decoder.eos_token_id)
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
