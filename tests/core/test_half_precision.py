"""Half precision (issue 22): ``--dtype float16 / bfloat16`` for Whisper and precision flips
(``core.precision``): the steps where float32's argmax differs from the emitted token.

tiny.en in bfloat16 decodes the sample clip to sane text; the trace says the dtype; the flips of
the one teacher-forced float32 pass equal a step-by-step float32 comparison (a flip is made by
perturbing one emitted id, since bfloat16 gives none on this clip); the flip finder is checked on
synthetic logits."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

from core.events import Finished
from core.options import DecodingOptions
from core.precision import Flip, find_flips, precision_flips, speech_flips

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CLIP = pathlib.Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


def test_the_flip_finder_on_synthetic_logits():
    logits = torch.tensor([[0.0, 3.0, 1.0, 5.0],   # argmax 3; 3 is suppressed everywhere -> 1
                           [2.0, 0.0, 1.0, 0.0],   # argmax 0; emitted 2: a flip
                           [9.0, 0.0, 1.0, 0.0]])  # only step 0 masks 0 (begin_suppress): emitted 0, no flip
    flips = find_flips(logits, [1, 2, 0], suppress=[3], begin_suppress=[0])
    assert [(f.step, f.token, f.float32_token) for f in flips] == [(1, 2, 0)]
    assert flips[0].margin == pytest.approx(1.0)  # log-softmax difference = logit difference (same row)
    # step 0's argmax with begin_suppress only: 3 (5.0), emitted 1 -> a flip of margin 2
    got = find_flips(logits[:1], [1], begin_suppress=[0])
    assert got == [Flip(step=0, token=1, float32_token=3, margin=pytest.approx(2.0))]
    assert find_flips(logits, []) == []
    with pytest.raises(ValueError, match="logits must be"):
        find_flips(logits[:2], [1, 2, 0])


@pytest.fixture(scope="module")
def tiny_en_bf16():
    """(bfloat16 SpeechModel, float32 SpeechModel over the kept float32 weights)."""
    import dataclasses

    from core.backends.whisper_models import load_whisper
    from core.tasks.speech import SpeechModel

    loaded = load_whisper("tiny.en", dtype="bfloat16", keep_float32=True)
    reference = SpeechModel(dataclasses.replace(loaded, model=loaded.float32_model, dtype="float32",
                                                float32_model=None))
    return SpeechModel(loaded), reference


def _run(model):
    from core.inputs.audio import load_audio

    audio = load_audio(CLIP)
    opts = DecodingOptions(strategy="greedy", max_new_tokens=64, top_k_report=5, capture_attention=True)
    events = list(model.decode(audio, opts, language="en"))
    return audio, events, [e for e in events if isinstance(e, Finished)][-1]


def test_bfloat16_tiny_en_decodes_the_sample_clip(tiny_en_bf16):
    half, reference = tiny_en_bf16
    assert half.dtype == "bfloat16" and half.backend.dtype == "bfloat16"
    assert next(half._loaded.model.parameters()).dtype == torch.bfloat16
    assert next(reference._loaded.model.parameters()).dtype == torch.float32  # the kept copy is not cast
    _, events, fin = _run(half)
    assert fin.text.strip().startswith("Open the door and turn on the lights.")
    step = next(e for e in events if hasattr(e, "topk"))
    assert step.cross_attention is not None and step.cross_attention.dtype == "float32"  # events: float32 numpy


def _direct_flips(reference, audio, prompt, emitted, suppress, begin):
    """Step by step: the float32 decoder fed the emitted ids one at a time, argmax per step."""
    backend = reference.backend
    encoded = backend.encode({"input_features": reference._features(audio)})
    cache = backend.init_cache(encoded, 1)
    out = backend.step(torch.tensor([list(prompt)]), cache, False)
    rows = []
    for token in emitted:
        rows.append(out.logits[0].clone())
        out = backend.step(torch.tensor([[token]]), out.cache, False)
    flips = []
    for i, (row, token) in enumerate(zip(rows, emitted)):
        row[list(suppress)] = float("-inf")
        if i == 0:
            row[list(begin)] = float("-inf")
        if int(row.argmax()) != token:
            flips.append((i, token, int(row.argmax())))
    return flips


def test_the_flips_equal_a_step_by_step_float32_comparison(tiny_en_bf16):
    half, reference = tiny_en_bf16
    audio, _, fin = _run(half)
    lw = reference._loaded
    prompt = half.prompt("en", "transcribe").prompt_ids
    emitted = list(fin.token_ids) + [lw.special.eot]
    perturbed = list(emitted)
    perturbed[3] = emitted[3] + 1  # a made flip: float32 keeps its own token at step 3
    for ids in (emitted, perturbed):
        got = precision_flips(reference.backend, {"input_features": reference._features(audio)}, prompt, ids,
                              lw.suppress_tokens, lw.begin_suppress_tokens)
        want = _direct_flips(reference, audio, prompt, ids, lw.suppress_tokens, lw.begin_suppress_tokens)
        assert [(f.step, f.token, f.float32_token) for f in got] == want
        assert all(f.margin > 0 for f in got)
    assert (3, perturbed[3], emitted[3]) in want  # the perturbed run has the made flip
    assert speech_flips(half, reference, audio, fin, language="en") == precision_flips(
        reference.backend, {"input_features": reference._features(audio)}, prompt, emitted, lw.suppress_tokens,
        lw.begin_suppress_tokens)


def test_the_cli_trace_says_bfloat16_and_lists_the_flips(capsys):
    from core.cli import main

    assert main(["transcribe", str(CLIP), "--model", "tiny.en", "--dtype", "bfloat16", "--precision-flips",
                 "--max-new-tokens", "12", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["dtype"] == "bfloat16"
    assert isinstance(out["precision_flips"], list)
    assert all(set(f) == {"step", "token", "float32_token", "margin"} for f in out["precision_flips"])
    assert "precision flip" in captured.err and "bfloat16" in captured.err


@pytest.mark.parametrize("argv, said", [
    (["translate", "x.txt", "--dtype", "bfloat16"], "--dtype bfloat16 is for transcribe only"),
    (["transcribe", str(CLIP), "--precision-flips"], "--precision-flips compares a half-precision decode"),
])
def test_half_precision_where_it_does_not_apply_exits_2(capsys, argv, said):
    from core.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert said in capsys.readouterr().err
