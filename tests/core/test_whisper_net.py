"""``core.backends.whisper_net``: the app's own Whisper modules.

(1) A bundled Whisper loaded and decoded through the app never imports transformers' modeling
    code (``transformers.modeling_utils`` pulls ``torch._dynamo``, sympy, ... about 210 MB);
    checked in a fresh interpreter.
(2) ``WhisperNet`` over a state dict gives transformers' ``WhisperForConditionalGeneration``'s
    logits, cross-attentions, hidden states and cache, to float32 rounding: on a tiny random
    config (eager and SDPA encoder, prompt then cached steps, a draft of several tokens on a
    cache) and on the bundled tiny.en.
(3) Its ``generate()`` is transformers' own, over the same tensors (no copy).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf
import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput

from core.backends.whisper_net import WhisperNet

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "assets" / "samples" / "speech_en.wav"


def _close(ours, ref, what: str, tol: float = 1e-5) -> None:
    assert ours.shape == ref.shape, what
    scale = max(1.0, ref.abs().max().item())
    assert (ours - ref).abs().max().item() <= tol * scale, what


def _pair(config: WhisperConfig, seed: int = 0) -> tuple[WhisperNet, WhisperForConditionalGeneration]:
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    ref = WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():  # large random weights: peaked, varied attention rows
        for p in ref.parameters():
            p.normal_(0.0, 0.2)
    with torch.device("meta"):
        ours = WhisperNet(config)
    ours.load_state_dict(ref.state_dict(), strict=True, assign=True)
    ours.tie_weights()
    ours.generation_config = ref.generation_config
    return ours.eval(), ref


def _tiny_config() -> WhisperConfig:
    return WhisperConfig(vocab_size=96, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=3,
                         encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                         decoder_ffn_dim=64, max_source_positions=20, max_target_positions=32,
                         decoder_start_token_id=1, pad_token_id=0, bos_token_id=0, eos_token_id=2)


def _compare_steps(ours, ref, features, prompt: list[int], steps: list[list[int]]) -> None:
    with torch.inference_mode():
        enc_ours = ours.get_encoder()(features, return_dict=True).last_hidden_state
        enc_ref = ref.get_encoder()(features, return_dict=True).last_hidden_state
        _close(enc_ours, enc_ref, "encoder")
        caches = [EncoderDecoderCache(DynamicCache(), DynamicCache()) for _ in range(2)]
        for fed in [prompt] + steps:
            ids = torch.tensor([fed])
            outs = [model(encoder_outputs=BaseModelOutput(last_hidden_state=enc_ref), decoder_input_ids=ids,
                          past_key_values=cache, use_cache=True, output_attentions=True,
                          output_hidden_states=True, return_dict=True)
                    for model, cache in zip((ours, ref), caches)]
            a, b = outs
            _close(a.logits, b.logits, f"logits after {fed}")
            assert len(a.cross_attentions) == len(b.cross_attentions) == len(ref.model.decoder.layers)
            for x, y in zip(a.cross_attentions, b.cross_attentions):
                _close(x, y, f"cross-attention after {fed}")
            for x, y in zip(a.decoder_attentions, b.decoder_attentions):
                _close(x, y, f"self-attention after {fed}")
            assert len(a.decoder_hidden_states) == len(b.decoder_hidden_states)
            for x, y in zip(a.decoder_hidden_states, b.decoder_hidden_states):
                _close(x, y, f"hidden states after {fed}")
            caches = [a.past_key_values, b.past_key_values]
            assert caches[0].get_seq_length() == caches[1].get_seq_length()
            for layer_a, layer_b in zip(caches[0].self_attention_cache.layers, caches[1].self_attention_cache.layers):
                _close(layer_a.keys, layer_b.keys, "cached keys")


def test_the_module_tree_and_state_dict_are_transformers_own():
    ours, ref = _pair(_tiny_config())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in ref.named_modules()]
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert ours.proj_out.weight is ours.model.decoder.embed_tokens.weight
    assert ours.get_decoder() is ours.model.decoder and ours.get_encoder() is ours.model.encoder
    assert ours.get_output_embeddings() is ours.proj_out
    assert ours.dtype == torch.float32 and ours.config.is_encoder_decoder


@pytest.mark.parametrize("encoder", ["eager", "sdpa"])
def test_logits_and_attention_equal_transformers_on_a_random_model(encoder):
    from core.backends.whisper_ct2 import encoder_sdpa

    ours, ref = _pair(_tiny_config())
    if encoder == "sdpa":
        encoder_sdpa(ours)
        encoder_sdpa(ref)
    features = torch.randn(1, 16, 40, generator=torch.Generator().manual_seed(1))
    _compare_steps(ours, ref, features, prompt=[1, 5, 7], steps=[[9], [11], [13, 4, 17], [3]])
    with torch.inference_mode():  # the whole model from input features, no cache
        a = ours(input_features=features, decoder_input_ids=torch.tensor([[1, 5, 7, 9]]), output_attentions=True)
        b = ref(input_features=features, decoder_input_ids=torch.tensor([[1, 5, 7, 9]]), output_attentions=True)
    _close(a.logits, b.logits, "logits")
    for x, y in zip(a.cross_attentions, b.cross_attentions):
        _close(x, y, "cross-attention")


def test_the_encoder_refuses_a_wrong_number_of_frames():
    ours, _ = _pair(_tiny_config())
    with pytest.raises(ValueError, match="40"):
        ours.get_encoder()(torch.zeros(1, 16, 30))


def test_generate_is_transformers_own_over_the_same_tensors():
    ours, ref = _pair(_tiny_config())
    features = torch.randn(1, 16, 40, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        got = ours.generate(input_features=features, max_new_tokens=6, do_sample=False, num_beams=1)
        want = ref.generate(input_features=features, max_new_tokens=6, do_sample=False, num_beams=1)
    assert got.tolist() == want.tolist()
    twin = ours._transformers_twin()
    assert type(twin).__name__ == "WhisperForConditionalGeneration"
    assert twin.proj_out.weight is ours.proj_out.weight
    assert twin.model.encoder.layers[0].fc1 is ours.model.encoder.layers[0].fc1
    assert not any(p.is_meta for p in twin.parameters())


def test_generate_runs_on_int8_layers():
    from core.backends.int8 import Int8Linear, quantize_linears

    ours, _ = _pair(_tiny_config())
    features = torch.randn(1, 16, 40, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        before = ours.generate(input_features=features, max_new_tokens=4, do_sample=False)
        quantize_linears(ours.model.decoder)
        assert isinstance(ours.model.decoder.layers[0].fc1, Int8Linear)
        after = ours.generate(input_features=features, max_new_tokens=4, do_sample=False)
    assert after.shape[0] == 1 and before.shape[0] == 1
    assert ours._transformers_twin().model.decoder.layers[0].fc1 is ours.model.decoder.layers[0].fc1


def test_tiny_en_equals_transformers_over_its_weights(whisper_tiny_en):
    lw = whisper_tiny_en._loaded
    assert type(lw.model).__name__ == "WhisperNet"
    config = lw.model.config
    with torch.device("meta"):
        ref = WhisperForConditionalGeneration(config)
    ref.load_state_dict(lw.model.state_dict(), strict=True, assign=True)
    ref.eval()
    from core.backends.whisper_ct2 import encoder_sdpa

    encoder_sdpa(ref)
    audio, _ = sf.read(SAMPLE, dtype="float32")
    features = lw.feature_extractor(audio[: 16000 * 6], sampling_rate=16000, return_tensors="pt").input_features
    prompt = lw.prompt_ids()
    _compare_steps(lw.model, ref, features, prompt=prompt, steps=[[440], [1110], [13, 314, 716]])


def test_a_bundled_whisper_decodes_without_transformers_modeling():
    """In a fresh interpreter: load tiny.en through the app and decode a clip; transformers'
    modeling code (and with it torch._dynamo) is never imported."""
    script = f"""
import json, sys
import soundfile as sf
sys.path.insert(0, {str(ROOT)!r})
from core.events import Finished
from core.options import DecodingOptions
from core.tasks.speech import SpeechModel
sm = SpeechModel.load("tiny.en")
audio, _ = sf.read({str(SAMPLE)!r}, dtype="float32")
events = list(sm.decode(audio[: 16000 * 4], DecodingOptions(max_new_tokens=12), language="en"))
fin = [e for e in events if isinstance(e, Finished)][-1]
print(json.dumps({{"tokens": len(fin.token_ids), "model": type(sm._loaded.model).__name__,
                  "modeling_utils": "transformers.modeling_utils" in sys.modules,
                  "modeling_whisper": "transformers.models.whisper.modeling_whisper" in sys.modules,
                  "dynamo": "torch._dynamo" in sys.modules}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["tokens"] > 0
    assert result["model"] == "WhisperNet"
    assert not result["modeling_utils"] and not result["modeling_whisper"]
    assert not result["dynamo"]


def test_the_generic_backend_path_on_whispernet_equals_the_lean_one(whisper_tiny_en):
    """``HFSeq2SeqBackend(lean=False)`` runs ``WhisperNet.forward`` with an EncoderDecoderCache,
    its logit lens (``LensHead``) and early exit (``_early_exit_model``, a shallow copy with
    fewer decoder layers): the same logits, cross-attention and lens as the lean decoder."""
    from core.backends.hf import HFSeq2SeqBackend

    lw = whisper_tiny_en._loaded
    lean = HFSeq2SeqBackend(lw.model, lw.tokenizer, "lean")
    generic = HFSeq2SeqBackend(lw.model, lw.tokenizer, "generic", lean=False)
    audio, _ = sf.read(SAMPLE, dtype="float32")
    features = lw.feature_extractor(audio[: 16000 * 4], sampling_rate=16000, return_tensors="pt").input_features
    encoded = lean.encode({"input_features": features})
    for kwargs in ({"capture_lens": True}, {"exit_layer": 2}, {"exit_layer": 4}):
        caches = [b.init_cache(encoded, 1) for b in (lean, generic)]
        for fed in (lw.prompt_ids(), [440], [1110, 13]):
            ids = torch.tensor([fed])
            a, b = (backend.step(ids, cache, True, **kwargs) for backend, cache in zip((lean, generic), caches))
            _close(a.logits, b.logits, f"logits {kwargs} {fed}", tol=1e-4)
            _close(a.cross_attention, b.cross_attention, f"cross-attention {kwargs} {fed}", tol=1e-4)
            if kwargs.get("capture_lens"):
                _close(a.lens_logits, b.lens_logits, f"lens {fed}", tol=1e-4)
    assert len(lw.model.model.decoder.layers) == 4  # the early-exit copies left the model whole


def test_a_refeed_returns_only_the_last_rows_attention_without_holding_every_row(whisper_tiny_en):
    """A re-feed of many positions (long-form's judge feeds prompt + ~400 tokens at once) asks for
    the last position's cross-attention only: the step must not keep every position's rows of
    every layer alive (their stack held (layers, heads, new_len, 1500) float32: ~100 MB for base)."""
    from core.backends.hf import HFSeq2SeqBackend

    lw = whisper_tiny_en._loaded
    backend = HFSeq2SeqBackend(lw.model, lw.tokenizer, "lean")
    audio, _ = sf.read(SAMPLE, dtype="float32")
    features = lw.feature_extractor(audio[: 16000 * 4], sampling_rate=16000, return_tensors="pt").input_features
    encoded = backend.encode({"input_features": features})
    ids = torch.tensor([list(lw.prompt_ids()) + [440, 1110, 13, 314, 716, 257, 1332] * 5])
    out = backend.step(ids, backend.init_cache(encoded, 1), True)
    cross = out.cross_attention
    assert cross.shape[:3] == (1, lw.model.config.decoder_layers, lw.model.config.decoder_attention_heads)
    assert cross.untyped_storage().nbytes() == cross.numel() * cross.element_size()
    every = backend.step(ids, backend.init_cache(encoded, 1), True, all_positions=True)
    torch.testing.assert_close(cross, every.position_cross_attention[:, -1], rtol=0, atol=0)
