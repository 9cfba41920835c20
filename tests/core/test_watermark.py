"""The green-list watermark (Kirchenbauer et al. 2023): the processor gives transformers'
``WatermarkLogitsProcessor`` scores, a watermarked greedy run equals ``generate()`` with a
``WatermarkingConfig``, and the detector's z-score equals transformers' ``WatermarkDetector``."""

import math

import pytest
import torch
from transformers import WatermarkDetector, WatermarkingConfig
from transformers.generation.logits_process import WatermarkLogitsProcessor

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import Finished
from core.options import DecodingOptions
from core.processors import build_processors
from core.processors.watermark import Watermark, green_list, watermark_z_score
from tests.core.conftest import V, tiny_marian


@pytest.mark.parametrize("vocab", [V, 1000, 51865])
@pytest.mark.parametrize("gamma,delta", [(0.25, 2.0), (0.5, 0.7), (0.1, 4.0)])
def test_scores_equal_transformers(vocab, gamma, delta):
    g = torch.Generator().manual_seed(vocab)
    scores = torch.randn(3, vocab, generator=g)
    scores[0, :5] = float("-inf")  # filtered tokens stay filtered
    input_ids = torch.randint(0, vocab, (3, 4), generator=g)
    theirs = WatermarkLogitsProcessor(vocab, "cpu", greenlist_ratio=gamma, bias=delta)(input_ids, scores)
    ours = Watermark(gamma, delta)(input_ids, scores)
    assert torch.equal(ours, theirs)
    assert not torch.equal(ours, scores)
    # the green share is gamma of the vocabulary, and only it moved
    moved = (ours[1] != scores[1]).sum().item()
    assert moved == int(vocab * gamma)


def test_green_list_is_transformers_lefthash():
    theirs = WatermarkLogitsProcessor(1000, "cpu", greenlist_ratio=0.25)
    for prev in (0, 1, 17, 999):
        assert torch.equal(green_list(prev, 1000, 0.25), theirs._get_greenlist_ids(torch.tensor([5, prev])))


def test_watermark_is_off_by_default_and_built_from_the_registry():
    from core.backends.base import DecoderPrompt

    prompt = DecoderPrompt(prompt_ids=(1,), eos_token_id=2)
    assert [p for p in build_processors(DecodingOptions(), prompt, 1) if getattr(p, "name", "") == "watermark"] == []
    for strategy in ("greedy", "beam", "sample"):  # a logits processor: every strategy, as in generate()
        procs = build_processors(DecodingOptions(strategy=strategy, watermark_delta=2.0), prompt, 1)
        assert [p.name for p in procs] == ["watermark"]


@pytest.mark.parametrize("gamma,delta", [(0.25, 2.0), (0.5, 5.0)])
def test_watermarked_greedy_run_equals_generate(gamma, delta):
    tiny = tiny_marian(seed=3)
    options = DecodingOptions(max_new_tokens=12, watermark_delta=delta, watermark_gamma=gamma)
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "tiny")
    events = list(Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, options))
    fin = events[-1]
    assert isinstance(fin, Finished)
    prompt = list(tiny.prompt.prompt_ids)
    out = tiny.model.generate(
        **tiny.inputs, decoder_input_ids=torch.tensor([prompt]), max_new_tokens=12, do_sample=False,
        watermarking_config=WatermarkingConfig(greenlist_ratio=gamma, bias=delta),
    )[0].tolist()[len(prompt):]
    eos = tiny.prompt.eos_token_id
    out = out[: out.index(eos)] if eos in out else out
    assert fin.token_ids == out
    plain = list(Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, DecodingOptions(max_new_tokens=12)))[-1]
    assert plain.token_ids != fin.token_ids  # the watermark changed the text
    # watermarked text scores high, the plain run near 0 (counted from the prompt's last token)
    marked = watermark_z_score(fin.token_ids, V, gamma, previous=prompt[-1])
    unmarked = watermark_z_score(plain.token_ids, V, gamma, previous=prompt[-1])
    assert marked.z > unmarked.z and marked.green > unmarked.green


@pytest.mark.parametrize("gamma", [0.25, 0.5])
def test_z_score_equals_transformers_detector(gamma):
    tiny = tiny_marian(seed=3)
    cfg = WatermarkingConfig(greenlist_ratio=gamma, bias=2.0)
    detector = WatermarkDetector(tiny.model.config, "cpu", cfg)
    g = torch.Generator().manual_seed(1)
    for n in (2, 5, 30):
        ids = [tiny.model.config.decoder_start_token_id + 1] + torch.randint(0, V, (n,), generator=g).tolist()
        out = detector(torch.tensor([ids]), return_dict=True)
        ours = watermark_z_score(ids, tiny.model.config.vocab_size, gamma)
        assert ours.scored == int(out.num_tokens_scored[0]) and ours.green == int(out.num_green_tokens[0])
        assert ours.z == pytest.approx(float(out.z_score[0]), rel=1e-9, abs=1e-12)


def test_z_score_formula_and_empty_input():
    s = watermark_z_score([3, 4], 10, 0.5, previous=2)
    assert s.scored == 2
    assert s.z == pytest.approx((s.green - 0.5 * 2) / math.sqrt(2 * 0.5 * 0.5))
    assert math.isnan(watermark_z_score([7], 10, 0.5).z) and watermark_z_score([7], 10, 0.5).to_dict()["z"] is None
    with pytest.raises(ValueError, match="watermark_gamma"):
        watermark_z_score([1, 2], 10, 1.0)


def test_the_note_says_z_and_the_count():
    from core.processors.watermark import watermark_note

    score = watermark_z_score([5, 9, 2, 7, 7, 3], V, 0.5)
    note = watermark_note(score)
    assert note.startswith(f"watermark: z = {score.z:.2f}") and f"of {score.scored} tokens green" in note


def test_run_reports_come_from_the_registry():
    from core.processors.stages import run_reports

    ids = [5, 9, 2, 7, 7, 3]
    assert run_reports(DecodingOptions(), ids, V) == {}
    on = DecodingOptions(watermark_delta=2.0, watermark_gamma=0.5)
    data, note = run_reports(on, ids, V)["watermark"]
    assert data == watermark_z_score(ids, V, 0.5).to_dict() and note.startswith("watermark: z = ")
    assert run_reports(on, ids, None) == {}
    assert run_reports(DecodingOptions(watermark_delta=2.0, disabled_stages=("watermark",)), ids, V) == {}


STATION = "Where is the nearest train station? The station is closed today."


@pytest.mark.usefixtures("one_torch_thread")
def test_cli_reports_the_z_score_in_the_trace_and_on_stderr(capsys):
    import json

    from core.cli import main

    assert main(["translate", STATION, "--json", "--watermark-delta", "6"]) == 0
    captured = capsys.readouterr()
    marked = json.loads(captured.out)
    assert marked["watermark"]["gamma"] == 0.25 and marked["watermark"]["scored"] == len(marked["tokens"]) - 1
    assert "watermark: z = " in captured.err
    assert marked["watermark"]["z"] > 3.0  # detected
    # a bias too small to change the text: reported, and not detected
    assert main(["translate", STATION, "--json", "--watermark-delta", "0.0001"]) == 0
    faint = json.loads(capsys.readouterr().out)
    assert faint["watermark"]["z"] < marked["watermark"]["z"]
    assert main(["translate", STATION, "--watermark-delta", "6"]) == 0  # text mode: the note on stderr
    assert "watermark: z = " in capsys.readouterr().err
    assert main(["translate", STATION, "--json"]) == 0  # off: nothing reported
    captured = capsys.readouterr()
    assert "watermark" not in json.loads(captured.out) and "watermark" not in captured.err


def test_cli_text_mode_notes_on_stderr(capsys):
    from types import SimpleNamespace

    from core.cli.commands import _emit
    from core.events import RunStats

    fin = Finished(text="hello", token_ids=[5, 9, 2, 7], stats=RunStats())
    args = SimpleNamespace(json=False, attention=None)
    assert _emit("ocr", "m", DecodingOptions(watermark_delta=2.0), [fin], args, vocab_size=V) == 0
    captured = capsys.readouterr()
    assert captured.out == "hello\n" and captured.err.startswith("watermark: z = ")
    assert _emit("ocr", "m", DecodingOptions(), [fin], args, vocab_size=V) == 0
    assert capsys.readouterr().err == ""
