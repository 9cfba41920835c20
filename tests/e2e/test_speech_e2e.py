"""End to end on real input: espeak-ng speech through the bundled Whisper models.

The CLI and the speech task transcribe synthesised English correctly; the JSON
trace has the documented schema; re-decoding reuses the encoder; long clips are
decoded window by window; bad input gives a one-line error.
"""

import json
import subprocess
import sys

import jiwer
import numpy as np
import pytest
import soundfile as sf

from core.events import BeamEvent, Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions
from tests.helpers.speech import synth_speech

pytestmark = pytest.mark.e2e

SENTENCE = "Open the door and turn on the lights. This is a test of the speech recognition system."


def _norm(s: str) -> str:
    return " ".join("".join(c for c in s.lower() if c.isalnum() or c.isspace()).split())


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory):
    audio = synth_speech(SENTENCE)
    path = tmp_path_factory.mktemp("speech") / "fox.wav"
    sf.write(path, audio, 16000)
    return path, audio


@pytest.fixture(scope="module")
def tiny():
    """tiny.en loaded for this module: test_redecode_... counts its encoder passes from 0."""
    from core.tasks.speech import SpeechModel

    return SpeechModel.load("tiny.en")


def _cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "core.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def _main(capsys, *args) -> subprocess.CompletedProcess:
    """The CLI run in this process (``core.cli.main``), its exit status and output as ``_cli``
    gives them: a fresh interpreter costs seconds of imports, and these tests are about what
    the CLI prints, not the process (``test_base_detects_english_and_transcribes`` keeps one
    ``python -m core.cli`` run)."""
    from core.cli import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out, err)


def test_cli_transcribes_json_trace(speech_wav, capsys, cli_reuses_models):
    path, audio = speech_wav
    out = _main(capsys, "transcribe", str(path), "--model", "tiny.en", "--json", "--attention")
    assert out.returncode == 0, out.stderr
    trace = json.loads(out.stdout)
    assert set(trace) >= {"task", "model", "options", "text", "tokens", "timing"}
    assert trace["task"] == "transcribe"
    assert jiwer.wer(_norm(SENTENCE), _norm(trace["text"])) <= 0.2, trace["text"]
    # tokens in decoding order, without the forced prompt; their texts make up the text
    assert "".join(t["text"] for t in trace["tokens"]).strip() == trace["text"].strip()
    assert all(not t["text"].startswith("<|") for t in trace["tokens"])
    for t in trace["tokens"]:
        assert 0.0 < t["prob"] <= 1.0
        assert len(t["topk"]) == trace["options"]["top_k_report"]
        assert t["topk"][0]["prob"] >= t["topk"][-1]["prob"]
        # Whisper frames of 20 ms that hold audio, no padding frames
        assert len(t["cross_attention"]) == int(np.ceil(len(audio) / 320))
    timing = trace["timing"]
    assert set(timing) == {"load_s", "encode_s", "decode_s", "tokens_per_s", "rtf"}
    assert timing["encode_s"] > 0 and timing["decode_s"] > 0 and timing["rtf"] > 0


def test_base_detects_english_and_transcribes(speech_wav):
    path, _ = speech_wav
    out = _cli("transcribe", str(path), "--model", "base", "--strategy", "beam", "--beams", "3")
    assert out.returncode == 0, out.stderr
    assert jiwer.wer(_norm(SENTENCE), _norm(out.stdout)) <= 0.2, out.stdout


def test_bad_input_is_one_line_error(tmp_path, capsys):
    bad = tmp_path / "notes.wav"
    bad.write_text("this is not audio")
    out = _main(capsys, "transcribe", str(bad), "--model", "tiny.en")
    assert out.returncode == 1
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "error" in lines[0] and "Traceback" not in out.stderr
    out = _main(capsys, "transcribe", str(tmp_path / "missing.wav"))
    assert out.returncode == 1 and "missing.wav" in out.stderr
    out = _main(capsys, "transcribe", str(bad), "--temperature", "0")
    assert out.returncode == 1 and "temperature" in out.stderr


def test_redecode_reuses_encoder_and_events_are_live(tiny, speech_wav):
    _, audio = speech_wav
    runs = []
    for opts in (
        DecodingOptions(),
        DecodingOptions(strategy="sample", temperature=0.7, top_p=0.9, seed=3),
        DecodingOptions(strategy="beam", num_beams=3),
    ):
        events = list(tiny.decode(audio, opts))
        assert isinstance(events[0], SegmentEvent)
        assert isinstance(events[-1], Finished)
        steps = [e for e in events if isinstance(e, StepEvent)]
        assert [s.step for s in steps] == list(range(len(steps)))
        assert "".join(s.text for s in steps).strip() == events[-1].text.strip()
        if opts.strategy == "beam":
            assert any(isinstance(e, BeamEvent) for e in events)
        runs.append(events[-1])
    assert tiny.encode_count == 1
    assert runs[1].stats.encoder_cached and runs[2].stats.encoder_cached
    assert jiwer.wer(_norm(SENTENCE), _norm(runs[0].text)) <= 0.2


def test_long_audio_is_decoded_window_by_window(tiny):
    part = synth_speech("One two three four five. Six seven eight nine ten.")
    gap = np.zeros(16000 * 30 - len(part), dtype=np.float32)  # first window: speech then silence
    second = synth_speech("Hello world, this is the second window.")
    audio = np.concatenate([part, gap, second])
    assert len(audio) > 30 * 16000
    events = list(tiny.decode(audio, DecodingOptions(max_new_tokens=60)))
    segments = [e for e in events if isinstance(e, SegmentEvent)]
    assert [s.segment for s in segments] == [0, 1]
    assert segments[1].source_offset == 1500
    text = _norm(events[-1].text)
    assert "second window" in text and ("three" in text or "3" in text)
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert {s.segment for s in steps} == {0, 1}


def test_cancel_stops_the_run(tiny, speech_wav):
    _, audio = speech_wav
    n = {"steps": 0}

    def cancel():
        return n["steps"] >= 2

    events = []
    for e in tiny.decode(audio, DecodingOptions(), cancel=cancel):
        events.append(e)
        if isinstance(e, StepEvent):
            n["steps"] += 1
    assert events[-1].cancelled and events[-1].reason == "cancelled"
    assert n["steps"] <= 3


def test_speech_task_rejects_bad_audio_and_options(tiny):
    with pytest.raises(ValueError, match="empty"):
        list(tiny.decode(np.zeros(0, np.float32), DecodingOptions()))
    with pytest.raises(ValueError, match="mono"):
        list(tiny.decode(np.zeros((2, 16000), np.float32), DecodingOptions()))
    with pytest.raises(ValueError, match="English-only"):
        list(tiny.decode(np.zeros(16000, np.float32), DecodingOptions(), task="translate"))
    bad = np.zeros(16000, np.float32)
    bad[5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        list(tiny.decode(bad, DecodingOptions()))


def test_no_speech_probability_flags_silence(tiny, speech_wav):
    """openai/whisper's no-speech probability: high on silence (with a warning the window
    shows), low on speech; the value is also on the window's label."""
    silent = [e for e in tiny.decode(np.zeros(16000 * 10, np.float32), DecodingOptions(max_new_tokens=3))
              if isinstance(e, SegmentEvent)][0]
    assert silent.no_speech_prob > 0.6
    assert "no-speech probability" in silent.warning and "no speech" in silent.label
    spoken = [e for e in tiny.decode(speech_wav[1], DecodingOptions(max_new_tokens=3))
              if isinstance(e, SegmentEvent)][0]
    assert spoken.no_speech_prob < 0.3 and spoken.warning == ""
    assert spoken.total == 1 and spoken.kind == "window"
