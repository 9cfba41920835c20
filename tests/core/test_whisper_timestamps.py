"""Whisper's timestamp tokens (issue 14 section 1).

* ``core.processors.whisper.TimestampRules`` equals transformers'
  ``WhisperTimeStampLogitsProcessor`` on random scores over many histories (pairs,
  non-decreasing, forced when their total probability beats every text token, the
  initial timestamp at most ``max_initial_timestamp_index``).
* Greedy token ids equal ``generate(return_timestamps=True)``: on a tiny random Whisper and
  (e2e) on the bundled tiny.en with the sample clip (there beam 4 too, clean and noisy).
* (e2e) ``transcribe --timestamps --json`` gives segments: non-decreasing, within the
  audio, their texts joined = the text; tokens keep their timestamp tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import GenerationConfig
from transformers.generation.logits_process import WhisperTimeStampLogitsProcessor

from core.events import Finished, StepEvent
from core.options import DecodingOptions
from core.processors.whisper import TimestampRules, timestamp_segments

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"

V, EOS, NO_TS = 120, 50, 60  # timestamps are ids 61..119
TS = NO_TS + 1


def _histories(rng: torch.Generator, begin: int, n: int, batch: int) -> torch.Tensor:
    """``batch`` histories of ``begin`` prompt tokens and ``n`` generated ones, half of
    them timestamps (increasing runs and pairs, so every branch of the rule is met)."""
    rows = []
    for _ in range(batch):
        seq = torch.randint(0, EOS, (begin,), generator=rng).tolist()
        t = TS
        for _ in range(n):
            if torch.rand(1, generator=rng).item() < 0.5:
                t = min(V - 1, t + int(torch.randint(0, 4, (1,), generator=rng)))
                seq.append(t)
            else:
                seq.append(int(torch.randint(0, EOS, (1,), generator=rng)))
        rows.append(seq)
    return torch.tensor(rows)


@pytest.mark.parametrize("max_initial", [None, 0, 5, 50])
def test_timestamp_rules_equal_transformers_on_random_scores(max_initial):
    rng = torch.Generator().manual_seed(0)
    config = GenerationConfig(no_timestamps_token_id=NO_TS, eos_token_id=EOS, max_initial_timestamp_index=max_initial)
    checked = forced = 0
    for begin in (1, 3):
        ours = TimestampRules(NO_TS, EOS, begin, max_initial)
        theirs = WhisperTimeStampLogitsProcessor(config, begin_index=begin)
        for n in range(0, 9):
            for trial in range(6):
                ids = _histories(rng, begin, n, batch=4)
                scores = torch.randn(4, V, generator=rng) * 3
                scores[:, TS:] += trial - 2.5  # from text-heavy to timestamp-heavy, so forcing happens both ways
                scores[0, 7] = float("-inf")  # already masked by an earlier rule
                got, want = ours(ids, scores), theirs(ids, scores.clone())
                torch.testing.assert_close(got, want, rtol=0, atol=0)
                assert not torch.equal(got.isinf(), scores.isinf()) or n == 0
                forced += int(got[:, :TS].isinf().all(dim=-1).sum())
                checked += 1
    assert checked == 2 * 9 * 6 and forced > 20


def test_timestamp_rules_check_arguments_and_segments():
    with pytest.raises(ValueError):
        TimestampRules(-1, EOS, 1)
    with pytest.raises(ValueError):
        TimestampRules(NO_TS, EOS, 1, -3)
    words = {1: " Hello", 2: " world", 3: "."}

    def decode(ids):
        return "".join(words[i] for i in ids)

    # window 0: <|0.00|> Hello <|0.50|><|0.50|> world . <|1.20|>; window 1 cut off after its text
    windows = [(0, [TS, 1, TS + 25, TS + 25, 2, 3, TS + 60]), (1, [TS + 10, 2, 3])]
    assert timestamp_segments(windows, TS, decode) == [
        {"start": 0.0, "end": 0.5, "text": "Hello"},
        {"start": 0.5, "end": 1.2, "text": "world."},
        {"start": 30.2, "end": 60.0, "text": "world."},
    ]


def _tiny_timestamp_whisper():
    """A tiny random Whisper whose top ids are timestamps (EOS below them)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    from core.backends.base import DecoderPrompt

    torch.manual_seed(3)
    sot = 52
    cfg = WhisperConfig(
        vocab_size=V, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_source_positions=40, max_target_positions=64, pad_token_id=EOS, bos_token_id=EOS,
        eos_token_id=EOS, decoder_start_token_id=sot, init_std=1.0,
    )
    model = WhisperForConditionalGeneration(cfg).eval()
    gen = model.generation_config
    gen.no_timestamps_token_id, gen.max_initial_timestamp_index = NO_TS, 5
    gen.eos_token_id, gen.decoder_start_token_id = EOS, sot
    gen.suppress_tokens, gen.begin_suppress_tokens = [7, 8], [EOS, 9]
    gen.is_multilingual = False
    feats = torch.randn(1, 16, 80, generator=torch.Generator().manual_seed(1))
    prompt = DecoderPrompt(prompt_ids=(sot,), eos_token_id=EOS, suppress_tokens=(7, 8),
                           begin_suppress_tokens=(EOS, 9), max_new_tokens=40, timestamp_rules=(NO_TS, 5))
    return model, feats, prompt


def test_tiny_random_whisper_greedy_equals_generate_with_timestamps():
    from core.backends.hf import HFSeq2SeqBackend
    from core.engine import Engine
    from tests.core.conftest import word_tokenizer

    model, feats, prompt = _tiny_timestamp_whisper()
    backend = HFSeq2SeqBackend(model, word_tokenizer(V, {"<|endoftext|>": EOS}), "tiny")
    encoded = backend.encode({"input_features": feats})
    events = list(Engine(backend).run(encoded, prompt, DecodingOptions(max_new_tokens=40)))
    ours = [e.token_id for e in events if isinstance(e, StepEvent)]
    assert events[-1].reason == "max_tokens"
    with torch.inference_mode():
        out = model.generate(input_features=feats, return_timestamps=True, do_sample=False, num_beams=1,
                             max_new_tokens=40)
    seq = (out if torch.is_tensor(out) else out.sequences)[0].tolist()
    seq = seq[1:] if seq[:1] == [prompt.prompt_ids[0]] else seq
    want = seq[: seq.index(EOS)] if EOS in seq else seq
    # without EOS, generate() keeps the tokens up to the last timestamp (the rest would be
    # decoded again from there in the next window: its seek)
    last = max(i for i, t in enumerate(ours) if t >= TS)
    assert ours[: last + 1] == want and len(want) > 10
    stamps = [t for t in ours if t >= TS]
    assert len(stamps) >= 2 and ours[0] >= TS and ours[0] <= TS + 5  # the rules were exercised


@pytest.fixture(scope="module")
def tiny_en(whisper_tiny_en):
    return whisper_tiny_en  # loaded once per session


def _sample():
    import soundfile as sf

    audio, rate = sf.read(SAMPLE, dtype="float32")
    assert rate == 16000
    return audio


@pytest.mark.e2e
@pytest.mark.parametrize("num_beams,noise", [(1, 0.0), (4, 0.0), (4, 0.05)], ids=["greedy", "beam4", "beam4-noisy"])
def test_tiny_en_with_timestamps_equals_generate(tiny_en, num_beams, noise):
    import numpy as np

    audio = _sample()
    audio = (audio + noise * np.random.default_rng(0).standard_normal(len(audio))).astype(np.float32)
    options = DecodingOptions(strategy="beam" if num_beams > 1 else "greedy", num_beams=num_beams, max_new_tokens=96)
    events = list(tiny_en.decode(audio, options, language="en", timestamps=True))
    assert isinstance(events[-1], Finished) and events[-1].reason == "eos"
    ours = [e.token_id for e in events if isinstance(e, StepEvent)]
    lw = tiny_en._loaded
    feats = lw.feature_extractor(audio, sampling_rate=16000, return_tensors="pt").input_features
    with torch.inference_mode():
        out = lw.model.generate(input_features=feats, return_timestamps=True, do_sample=False, num_beams=num_beams,
                                max_new_tokens=96)
    seq = (out if torch.is_tensor(out) else out.sequences)[0].tolist()
    prompt = tiny_en.prompt("en", "transcribe", timestamps=True).prompt_ids
    assert lw.special.notimestamps not in prompt
    seq = seq[len(prompt):] if seq[: len(prompt)] == list(prompt) else seq
    want = seq[: seq.index(lw.special.eot)] if lw.special.eot in seq else seq
    assert ours == want
    ts = lw.special.notimestamps + 1
    assert ours[0] == ts and sum(t >= ts for t in ours) >= 4


@pytest.mark.e2e
def test_transcribe_timestamps_json_segments(tiny_en, capsys, monkeypatch):
    from core.cli import main
    from core.tasks.speech import SpeechModel

    monkeypatch.setattr(SpeechModel, "load", classmethod(lambda cls, name="tiny.en", progress=None: tiny_en))
    assert main(["transcribe", str(SAMPLE), "--model", "tiny.en", "--timestamps", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    segments, duration = out["segments"], len(_sample()) / 16000
    assert len(segments) >= 2
    bounds = [x for s in segments for x in (s["start"], s["end"])]
    assert bounds == sorted(bounds) and 0 <= bounds[0] and bounds[-1] <= duration + 0.02
    assert all(s["end"] > s["start"] for s in segments)
    assert " ".join(s["text"] for s in segments) == out["text"]
    stamps = [t["text"] for t in out["tokens"] if t["id"] > tiny_en._loaded.special.notimestamps]
    assert stamps[0] == "<|0.00|>" and len(stamps) == 2 * len(segments)
    assert all(s.startswith("<|") and s.endswith("|>") for s in stamps)
