"""HFSeq2SeqBackend: KV-cached steps equal full forward passes; Whisper's lean step
equals transformers' decoder; padding and source_len handling."""

from __future__ import annotations

import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend


def _full_forward(tiny, ids: list[int]):
    """Logits and cross-attentions of the model's own uncached forward on the whole sequence."""
    with torch.inference_mode():
        out = tiny.model(**tiny.inputs, decoder_input_ids=torch.tensor([ids]), output_attentions=True,
                         use_cache=False)
    cross = torch.stack([a[0, :, -1] for a in out.cross_attentions])  # (layers, heads, src)
    return out.logits[0, -1].float(), cross


@pytest.mark.parametrize("kind,lean", [("whisper", True), ("whisper", False), ("marian", False), ("t5", False)])
def test_cached_steps_equal_uncached_forward(tiny_models, kind, lean):
    tiny = tiny_models[kind]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind, lean=lean)
    tiny.model.set_attn_implementation("eager")  # the reference must return attention weights
    encoded = backend.encode(tiny.inputs)
    cache = backend.init_cache(encoded, 1)
    seq = list(tiny.prompt.prompt_ids)
    new = torch.tensor([seq])
    for _ in range(6):
        out = backend.step(new, cache, output_attentions=True)
        cache = out.cache
        ref_logits, ref_cross = _full_forward(tiny, seq)
        torch.testing.assert_close(out.logits[0], ref_logits, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(out.cross_attention[0], ref_cross, rtol=1e-4, atol=1e-5)
        assert out.logits.dtype == torch.float32 and out.logits.shape == (1, backend.vocab_size)
        token = int(out.logits[0].argmax())
        seq.append(token)
        new = torch.tensor([[token]])


def test_reorder_cache_selects_rows(tiny_models):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    encoded = backend.encode(tiny.inputs)
    cache = backend.init_cache(encoded, 3)
    prompt = torch.tensor([list(tiny.prompt.prompt_ids)] * 3)
    cache = backend.step(prompt, cache, False).cache
    out = backend.step(torch.tensor([[10], [20], [30]]), cache, True)
    ref_rows = out.logits.clone()
    cache = backend.reorder_cache(out.cache, torch.tensor([2, 2, 0]))
    nxt = backend.step(torch.tensor([[5], [6], [7]]), cache, False)
    # row 0 and 1 now both continue hypothesis "30", row 2 continues "10"
    single = backend.init_cache(encoded, 1)
    single = backend.step(torch.tensor([list(tiny.prompt.prompt_ids)]), single, False).cache
    single = backend.step(torch.tensor([[30]]), single, False).cache
    ref = backend.step(torch.tensor([[6]]), single, False).logits
    torch.testing.assert_close(nxt.logits[1:2], ref, rtol=1e-3, atol=1e-3)  # batched vs single matmuls
    assert (nxt.logits[2:3] - ref).abs().max() > 0.1  # the row that continues "10" differs
    assert not torch.allclose(ref_rows[0], ref_rows[2])


def test_text_padding_is_masked(tiny_models):
    """Padding after the source does not change the logits, and source_len counts real tokens."""
    from tests.core.conftest import tiny_marian

    padded, unpadded = tiny_marian(padded=True), tiny_marian(padded=False)
    b1 = HFSeq2SeqBackend(padded.model, padded.tokenizer, "m")
    b2 = HFSeq2SeqBackend(unpadded.model, unpadded.tokenizer, "m")
    e1, e2 = b1.encode(padded.inputs), b2.encode(unpadded.inputs)
    assert e1.source_len == e2.source_len == 7
    assert e1.hidden_states.shape[1] == 9
    prompt = torch.tensor([list(padded.prompt.prompt_ids)])
    o1 = b1.step(prompt, b1.init_cache(e1, 1), True)
    o2 = b2.step(prompt, b2.init_cache(e2, 1), True)
    torch.testing.assert_close(o1.logits, o2.logits, rtol=1e-4, atol=1e-4)
    assert float(o1.cross_attention[..., 7:].abs().max()) == 0.0  # no attention on padding


def test_encode_rejects_bad_inputs(tiny_models):
    tiny = tiny_models["t5"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "t5")
    with pytest.raises(ValueError, match="input_ids"):
        backend.encode({"text": "hello"})
    with pytest.raises(ValueError, match="batch size 1"):
        backend.encode({"input_ids": torch.zeros(2, 3, dtype=torch.long)})


def test_token_text_and_decode(tiny_models):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    assert backend.token_text(5) == tiny.tokenizer.convert_ids_to_tokens(5)
    assert backend.token_text(tiny.prompt.eos_token_id) == "<|endoftext|>"
    assert backend.decode([5, tiny.prompt.eos_token_id, 6]) == tiny.tokenizer.decode([5, 6])
