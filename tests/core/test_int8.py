"""int8 (``--dtype int8``): dynamically quantised linear layers (``core.backends.int8``) on the
bundled tiny.en; its ids mostly agree with float32's, the trace says int8, float32 is unchanged,
and models other than Whisper refuse it."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend
from core.backends.int8 import Int8Linear, fused, quantize_linears
from core.events import Finished, StepEvent
from core.options import DecodingOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CLIP = pathlib.Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


def test_an_int8_linear_is_close_to_the_float_one():
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 300)
    q = Int8Linear.from_linear(lin)
    x = torch.randn(2, 3, 64)
    with torch.inference_mode():
        ref, got = lin(x), q(x)
    assert got.shape == ref.shape and got.dtype == torch.float32
    assert (got - ref).abs().max() < 0.05 * ref.abs().max()
    assert not torch.equal(got, ref)  # it is int8 arithmetic, not the float product


def test_quantize_linears_replaces_all_but_the_skipped():
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(4, 4)))
    head = torch.nn.Linear(4, 2)
    net.append(head)
    assert quantize_linears(net, skip=(head,)) == 2
    assert isinstance(net[0], Int8Linear) and isinstance(net[2][0], Int8Linear) and net[3] is head


def test_int8_is_refused_for_a_model_other_than_whisper(tiny_models):
    tiny = tiny_models["marian"]
    with pytest.raises(ValueError, match="int8 is available for Whisper models only"):
        HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "m", dtype="int8")
    with pytest.raises(ValueError, match="dtype must be one of float32, int8"):
        HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "m", dtype="float16")


@pytest.fixture(scope="module")
def tiny_en_int8():
    from core.tasks.speech import SpeechModel

    return SpeechModel.load("tiny.en", dtype="int8")


def _decode(model, **changes):
    from core.inputs.audio import load_audio

    opts = DecodingOptions(strategy="greedy", max_new_tokens=64, top_k_report=5).with_(**changes)
    events = list(model.decode(load_audio(CLIP), opts, language="en"))
    return [e for e in events if isinstance(e, StepEvent)], [e for e in events if isinstance(e, Finished)][-1]


def test_int8_tiny_en_runs_end_to_end_and_mostly_agrees_with_float32(whisper_tiny_en, tiny_en_int8):
    assert tiny_en_int8.dtype == "int8" and whisper_tiny_en.dtype == "float32"
    assert tiny_en_int8.backend.dtype == "int8"
    steps, fin = _decode(tiny_en_int8)
    _, ref = _decode(whisper_tiny_en)
    assert len(ref.token_ids) > 10
    same = sum(a == b for a, b in zip(fin.token_ids, ref.token_ids))
    assert same / max(len(fin.token_ids), len(ref.token_ids)) >= 0.8
    # capture still works: top-k and cross-attention per step
    assert steps[0].cross_attention is not None and steps[0].cross_attention.shape[:2] == (4, 6)
    assert len(steps[0].topk) == 5


def test_float32_ids_are_still_generates(whisper_tiny_en, tiny_en_int8):
    """Loading an int8 model beside it changes nothing in float32: greedy ids == generate()'s."""
    from transformers.modeling_outputs import BaseModelOutput

    from core.inputs.audio import load_audio

    _, fin = _decode(whisper_tiny_en, capture_attention=False)
    lw = whisper_tiny_en._loaded
    feats = lw.feature_extractor(load_audio(CLIP), sampling_rate=16000, return_tensors="pt").input_features
    encoded = whisper_tiny_en.backend.encode({"input_features": feats})
    with torch.inference_mode():
        out = lw.model.generate(encoder_outputs=BaseModelOutput(last_hidden_state=encoded.hidden_states),
                                max_new_tokens=64, do_sample=False, num_beams=1)
    prompt = whisper_tiny_en.prompt("en", "transcribe")
    gen = [t for t in out[0].tolist() if t not in prompt.prompt_ids and t != prompt.eos_token_id]
    assert fin.token_ids == gen


def test_the_int8_head_serves_a_shortlist_and_the_lens(tiny_en_int8):
    backend = tiny_en_int8.backend
    encoded = backend.encode({"input_features": torch.zeros(1, 80, 3000)})
    prompt = torch.tensor([list(tiny_en_int8.prompt("en", "transcribe").prompt_ids)])
    full = backend.step(prompt, backend.init_cache(encoded, 1), False, capture_lens=True)
    head = torch.tensor([5, 220, int(full.logits[0].argmax())])
    narrow = backend.step(prompt, backend.init_cache(encoded, 1), False, head_ids=head)
    torch.testing.assert_close(narrow.logits[0, head], full.logits[0, head], rtol=1e-4, atol=1e-4)
    assert torch.isinf(narrow.logits[0]).sum() == backend.vocab_size - 3
    torch.testing.assert_close(full.lens_logits[0, -1], full.logits[0])


def test_the_cli_trace_says_int8(capsys):
    from core.cli import main

    assert main(["transcribe", str(CLIP), "--model", "tiny.en", "--dtype", "int8", "--max-new-tokens", "8",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dtype"] == "int8"
    assert main(["transcribe", str(CLIP), "--model", "tiny.en", "--max-new-tokens", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dtype"] == "float32"


@pytest.mark.parametrize("argv", [["ocr", str(CLIP.parent / "ocr_en.png"), "--dtype", "int8"]])
def test_int8_where_it_does_not_apply_exits_2(capsys, argv):
    from core.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "--dtype int8" in capsys.readouterr().err


def test_a_fused_int8_product_equals_the_separate_ones():
    torch.manual_seed(1)
    parts = [torch.nn.Linear(32, 32), torch.nn.Linear(32, 32, bias=False), torch.nn.Linear(32, 16)]
    x = torch.randn(2, 5, 32)
    with torch.inference_mode():
        together = fused(parts)(x).split([32, 32, 16], dim=-1)
        for got, part in zip(together, parts):
            torch.testing.assert_close(got, Int8Linear.from_linear(part)(x), rtol=1e-5, atol=1e-5)
