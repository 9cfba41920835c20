"""core.inputs.audio: file formats, resampling, mono mixdown, errors, WAV writing, device status.

References: tones are generated analytically (numpy sin) and compared with what
load_audio returns; libsndfile (python-soundfile) reads files back independently.
The real microphone path is tested in tests/e2e/test_microphone.py.
"""

from __future__ import annotations

import builtins
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf

from core.inputs import microphone as core_microphone
from core.inputs.audio import (
    MIN_DURATION_S,
    SAMPLE_RATE,
    AudioError,
    InputDevice,
    Recorder,
    decode_audio_bytes,
    duration_s,
    list_input_devices,
    load_audio,
    microphone_status,
    open_audio,
    save_wav,
    wav_truncation,
)

REPO = Path(__file__).resolve().parents[2]
FORMATS_HINT = "WAV, FLAC, OGG"


def tone(freq: float, rate: int, seconds: float, amp: float = 0.5, phase: float = 0.0) -> np.ndarray:
    """amp * sin(2 pi f t + phase), float64 (n,) at ``rate`` Hz."""
    t = np.arange(int(round(seconds * rate))) / rate
    return amp * np.sin(2 * np.pi * freq * t + phase)


def peak_hz(x: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spec)) * rate / len(x)


# ------------------------------------------------------------------ formats

FORMATS = [
    # (name, file suffix, soundfile format, subtype, rate, channels, lossless)
    ("wav-8k-int16-stereo", "wav", "WAV", "PCM_16", 8000, 2, True),
    ("wav-44k1-int16-stereo", "wav", "WAV", "PCM_16", 44100, 2, True),
    ("wav-48k-float-stereo", "wav", "WAV", "FLOAT", 48000, 2, True),
    ("wav-16k-int16-mono", "wav", "WAV", "PCM_16", 16000, 1, True),
    ("flac-22k05-mono", "flac", "FLAC", "PCM_16", 22050, 1, True),
    ("ogg-vorbis-48k-stereo", "ogg", "OGG", "VORBIS", 48000, 2, False),
    ("ogg-opus-48k-mono", "ogg", "OGG", "OPUS", 48000, 1, False),
    ("mp3-44k1-stereo", "mp3", "MP3", "MPEG_LAYER_III", 44100, 2, False),
]


@pytest.mark.parametrize("name,suffix,fmt,subtype,rate,channels,lossless", FORMATS, ids=[f[0] for f in FORMATS])
def test_load_formats(tmp_path, name, suffix, fmt, subtype, rate, channels, lossless):
    """Each format loads as float32 16 kHz mono; a 440 Hz tone keeps frequency, level and length."""
    seconds = 1.0
    x = tone(440.0, rate, seconds)
    data = np.stack([x] * channels, axis=1) if channels > 1 else x
    path = tmp_path / f"{name}.{suffix}"
    sf.write(path, data, rate, format=fmt, subtype=subtype)

    a = load_audio(path)
    assert a.dtype == np.float32 and a.ndim == 1
    assert np.all(np.abs(a) <= 1.0)
    # Length: the file's frames rescaled to 16 kHz (lossy codecs may pad a little).
    frames = sf.info(str(path)).frames
    expected = frames * SAMPLE_RATE / rate
    assert abs(len(a) - expected) <= (1 if lossless else 0.02 * expected), (len(a), expected)
    assert abs(len(a) / SAMPLE_RATE - seconds) < (0.001 if lossless else 0.1)
    assert abs(peak_hz(a) - 440.0) < 1.5
    # Level: RMS of a 0.5 sine is 0.5/sqrt(2) (skip 50 ms at each edge for codec fades).
    mid = a[800:-800]
    rms = float(np.sqrt(np.mean(mid.astype(np.float64) ** 2)))
    assert math.isclose(rms, 0.5 / math.sqrt(2), rel_tol=0.01 if lossless else 0.1), rms


def test_lossless_16k_is_bit_exact(tmp_path):
    """16 kHz mono PCM_16 is passed through untouched: samples equal int16 / 32768."""
    ints = (tone(300.0, SAMPLE_RATE, 0.5) * 32767).astype(np.int16)
    path = tmp_path / "a.wav"
    sf.write(path, ints, SAMPLE_RATE, subtype="PCM_16")
    assert np.array_equal(load_audio(path), ints.astype(np.float32) / 32768.0)


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_resampling_matches_analytic_tone(tmp_path, rate):
    """Resampling to 16 kHz reproduces the analytic 16 kHz tone (interior samples, error < 1e-3)."""
    x = tone(440.0, rate, 1.0, amp=0.5, phase=0.3)
    path = tmp_path / "t.wav"
    sf.write(path, x.astype(np.float32), rate, subtype="FLOAT")
    a = load_audio(path)
    ref = tone(440.0, SAMPLE_RATE, 1.0, amp=0.5, phase=0.3)
    assert len(a) == len(ref)
    inner = slice(400, -400)  # filter transients at the edges
    assert float(np.max(np.abs(a[inner] - ref[inner]))) < 1e-3


def test_load_audio_other_target_rate(tmp_path):
    path = tmp_path / "t.wav"
    sf.write(path, tone(1000.0, 48000, 0.5).astype(np.float32), 48000, subtype="FLOAT")
    a = load_audio(path, sample_rate=8000)
    assert len(a) == 4000 and abs(peak_hz(a, 8000) - 1000.0) < 3


def test_mono_mixdown_averages_channels(tmp_path):
    """Stereo (L, R) becomes (L + R) / 2; anti-phase channels cancel."""
    left = tone(440.0, SAMPLE_RATE, 0.5, amp=0.6)
    right = tone(1000.0, SAMPLE_RATE, 0.5, amp=0.2)
    path = tmp_path / "lr.wav"
    sf.write(path, np.stack([left, right], 1).astype(np.float32), SAMPLE_RATE, subtype="FLOAT")
    np.testing.assert_allclose(load_audio(path), ((left + right) / 2).astype(np.float32), atol=1e-6)

    path2 = tmp_path / "cancel.wav"
    sf.write(path2, np.stack([left, -left], 1).astype(np.float32), SAMPLE_RATE, subtype="FLOAT")
    assert float(np.max(np.abs(load_audio(path2)))) < 1e-6


def test_float_file_beyond_full_scale_is_clipped(tmp_path):
    path = tmp_path / "loud.wav"
    sf.write(path, np.array([0.0, 1.5, -2.0, 0.25], dtype=np.float32).repeat(100), SAMPLE_RATE, subtype="FLOAT")
    a = load_audio(path)
    assert a.max() == 1.0 and a.min() == -1.0


def test_sample_clip(tmp_path):
    """assets/samples/speech_en.wav: 16 kHz mono speech, 5-8 s, small; README documents it."""
    path = REPO / "assets" / "samples" / "speech_en.wav"
    info = sf.info(str(path))
    assert info.samplerate == SAMPLE_RATE and info.channels == 1 and info.subtype == "PCM_16"
    assert path.stat().st_size < 300_000
    a = load_audio(path)
    assert 5.0 <= duration_s(a) <= 8.0
    # Speech, not silence: a good share of 20 ms frames are well above the noise floor.
    frames = a[: len(a) // 320 * 320].reshape(-1, 320)
    voiced = np.sqrt(np.mean(frames**2, axis=1)) > 0.02
    assert 0.3 < voiced.mean() < 0.95
    readme = (REPO / "assets" / "samples" / "README.md").read_text()
    assert "speech_en.wav" in readme and "espeak-ng" in readme


# ------------------------------------------------------------------- errors


def _assert_names(err: AudioError, path: Path) -> None:
    msg = str(err)
    assert str(path) in msg, msg
    assert FORMATS_HINT in msg and "MP3" in msg, msg


def test_missing_file(tmp_path):
    p = tmp_path / "nope.wav"
    with pytest.raises(AudioError, match="not found") as e:
        load_audio(p)
    _assert_names(e.value, p)


def test_zero_byte_file(tmp_path):
    p = tmp_path / "empty.wav"
    p.write_bytes(b"")
    with pytest.raises(AudioError, match=r"empty \(0 bytes\)") as e:
        load_audio(p)
    _assert_names(e.value, p)


@pytest.mark.parametrize("suffix", ["wav", "mp3", "flac", "ogg", "txt"])
def test_not_audio(tmp_path, suffix):
    p = tmp_path / f"notes.{suffix}"
    p.write_text("this is a text file, not a recording\n" * 20)
    with pytest.raises(AudioError, match="Could not decode.*not an audio file, is corrupt") as e:
        load_audio(p)
    _assert_names(e.value, p)


def test_truncated_wav_header(tmp_path):
    good = tmp_path / "good.wav"
    sf.write(good, tone(440.0, SAMPLE_RATE, 0.5), SAMPLE_RATE, subtype="PCM_16")
    bad = tmp_path / "cut.wav"
    bad.write_bytes(good.read_bytes()[:20])  # RIFF header cut before the fmt chunk ends
    with pytest.raises(AudioError, match="Could not decode") as e:
        load_audio(bad)
    _assert_names(e.value, bad)


@pytest.mark.parametrize("suffix", ["m4a", "aac", "wma"])
def test_unsupported_format(tmp_path, suffix):
    p = tmp_path / f"voice.{suffix}"
    p.write_bytes(b"\x00\x00\x00\x20ftypM4A " + bytes(200))
    with pytest.raises(AudioError, match=f"Unsupported audio format '.{suffix}'.*ffmpeg") as e:
        load_audio(p)
    _assert_names(e.value, p)


def test_folder_is_not_a_file(tmp_path):
    with pytest.raises(AudioError, match="is a folder") as e:
        load_audio(tmp_path)
    _assert_names(e.value, tmp_path)


def test_zero_samples(tmp_path):
    p = tmp_path / "nothing.wav"
    sf.write(p, np.zeros((0, 1), dtype=np.int16), SAMPLE_RATE, subtype="PCM_16")
    assert p.stat().st_size > 0  # a valid header with no frames
    with pytest.raises(AudioError, match="no audio samples") as e:
        load_audio(p)
    assert str(p) in str(e.value)


def test_nan_samples(tmp_path):
    p = tmp_path / "nan.wav"
    sf.write(p, np.array([0.1, np.nan, 0.2], dtype=np.float32), SAMPLE_RATE, subtype="FLOAT")
    with pytest.raises(AudioError, match="NaN"):
        load_audio(p)


def test_decode_audio_bytes(tmp_path):
    p = tmp_path / "a.flac"
    sf.write(p, tone(440.0, 44100, 0.5), 44100, format="FLAC")
    np.testing.assert_array_equal(decode_audio_bytes(p.read_bytes()), load_audio(p))
    with pytest.raises(AudioError, match="empty"):
        decode_audio_bytes(b"")
    with pytest.raises(AudioError, match="Could not decode the audio data.*WAV, FLAC"):
        decode_audio_bytes(b"garbage" * 100)


def test_duration_s():
    assert duration_s(np.zeros(24000, np.float32)) == 1.5
    assert duration_s(np.zeros((8000, 2)), sample_rate=8000) == 1.0
    assert duration_s(np.zeros(0)) == 0.0


# --------------------------------------------------------------- save_wav


def test_save_wav_round_trip(tmp_path):
    x = tone(440.0, SAMPLE_RATE, 0.75, amp=0.8).astype(np.float32)
    p = tmp_path / "out.wav"
    save_wav(p, x)
    info = sf.info(str(p))
    assert (info.format, info.subtype, info.samplerate, info.channels, info.frames) == ("WAV", "PCM_16", 16000, 1, len(x))
    y = load_audio(p)
    assert float(np.max(np.abs(y - x))) <= 1.0 / 32767 + 1e-7  # one 16-bit step


def test_save_wav_clips_and_keeps_rate(tmp_path):
    p = tmp_path / "clip.wav"
    save_wav(p, np.array([2.0, -3.0, 0.5], np.float32).repeat(10), sample_rate=8000)
    raw, sr = sf.read(p, dtype="int16")
    assert sr == 8000 and raw.max() == 32767 and raw.min() <= -32767


@pytest.mark.parametrize(
    "audio,match",
    [(np.zeros(0), "non-empty"), (np.zeros((2, 2, 2)), "shape"), (np.array([0.1, np.inf]), "NaN or infinite")],
)
def test_save_wav_bad_audio(tmp_path, audio, match):
    with pytest.raises(AudioError, match=match):
        save_wav(tmp_path / "x.wav", audio)


def test_save_wav_missing_folder_is_one_clean_sentence(tmp_path):
    """Was: "Could not save …: Could not write …: System error.. Choose a writable folder with
    free space.. Choose a writable folder." Now one sentence naming the file and the folder."""
    folder = tmp_path / "no" / "such"
    with pytest.raises(AudioError) as e:
        save_wav(folder / "x.wav", np.zeros(100, np.float32))
    assert str(e.value) == f"Could not save x.wav: the folder {folder} does not exist; choose an existing folder."
    assert not folder.exists()


def test_save_wav_unwritable_folder(tmp_path, monkeypatch):
    import builtins as b

    real_open = b.open

    def no_write(file, mode="r", *args, **kwargs):
        if "w" in mode and str(file).endswith(".part"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(b, "open", no_write)
    with pytest.raises(AudioError) as e:
        save_wav(tmp_path / "x.wav", np.zeros(100, np.float32))
    msg = str(e.value)
    assert msg == f"Could not save x.wav in {tmp_path}: permission denied; choose a folder you can write to, with free space."
    assert ".." not in msg and msg.count("Could not") == 1


def test_save_wav_failure_keeps_the_existing_file(tmp_path, monkeypatch):
    p = tmp_path / "keep.wav"
    save_wav(p, np.full(1600, 0.25, np.float32))
    before = p.read_bytes()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sf, "write", disk_full)
    with pytest.raises(AudioError, match="no space left on device; choose a folder"):
        save_wav(p, np.zeros(16000, np.float32))
    assert p.read_bytes() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["keep.wav"]  # no .part left behind


# ------------------------------------------------------------- devices


def test_microphone_status_without_devices(monkeypatch):
    import sounddevice as sd

    monkeypatch.setattr(sd, "query_devices", lambda *a, **k: [])
    ok, reason = microphone_status()
    assert ok is False
    assert "No microphone found" in reason and "Plug in a microphone" in reason
    assert list_input_devices() == []


def test_microphone_status_output_only_devices(monkeypatch):
    import sounddevice as sd

    outs = [{"name": "speakers", "index": 0, "max_input_channels": 0, "max_output_channels": 2, "default_samplerate": 48000.0}]
    monkeypatch.setattr(sd, "query_devices", lambda *a, **k: outs)
    ok, reason = microphone_status()
    assert not ok and "1 output-only" in reason
    assert list_input_devices() == []


def test_list_input_devices_and_status_with_a_device(monkeypatch):
    import sounddevice as sd

    devs = [
        {"name": "speakers", "index": 0, "max_input_channels": 0, "default_samplerate": 48000.0},
        {"name": "USB mic", "index": 1, "max_input_channels": 1, "default_samplerate": 44100.0},
    ]
    monkeypatch.setattr(sd, "query_devices", lambda *a, **k: devs)
    monkeypatch.setattr(sd.default, "device", [1, 0])
    assert list_input_devices() == [InputDevice(1, "USB mic", 44100.0, 1, True)]
    assert microphone_status() == (True, "Default microphone: USB mic")


def test_query_failure_never_raises(monkeypatch):
    import sounddevice as sd

    def boom(*a, **k):
        raise sd.PortAudioError("Error querying device")

    monkeypatch.setattr(sd, "query_devices", boom)
    assert list_input_devices() == []
    ok, reason = microphone_status()
    assert not ok and "could not list" in reason


def test_portaudio_missing(monkeypatch):
    """``import sounddevice`` raising OSError (no libportaudio2) is reported, not raised."""
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "sounddevice":
            raise OSError("PortAudio library not found")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    ok, reason = microphone_status()
    assert not ok and "PortAudio" in reason and "libportaudio2" in reason
    assert list_input_devices() == []
    with pytest.raises(AudioError, match="libportaudio2"):
        Recorder().start()


# ------------------------------------------- Recorder with a scripted device


class _ScriptedStream:
    """Stands in for sounddevice.InputStream: start() delivers ``blocks`` to the callback."""

    def __init__(self, blocks, **kwargs):
        self.kwargs, self.blocks = kwargs, blocks
        self.closed = False

    def start(self):
        self.calls = ["start"]
        for b in self.blocks(self.kwargs["samplerate"], self.kwargs["channels"]):
            self.kwargs["callback"](b, len(b), None, None)

    def stop(self):
        self.calls.append("stop")

    def abort(self):
        self.calls.append("abort")

    def close(self):
        self.calls.append("close")
        self.closed = True


def _fake_sd(max_rate_ok, blocks):
    """A sounddevice-like module with one 48 kHz stereo device that only accepts ``max_rate_ok``."""

    class PortAudioError(Exception):
        pass

    info = {"name": "scripted", "index": 0, "max_input_channels": 2, "default_samplerate": 48000.0}

    def query_devices(device=None, kind=None):
        if device not in (None, 0, "scripted"):
            raise ValueError(f"No input device matching {device!r}")
        return info if kind else [info]

    def check_input_settings(device=None, samplerate=None, channels=None, dtype=None):
        if samplerate != max_rate_ok or channels != 2:
            raise PortAudioError("Invalid sample rate / channel count")

    return SimpleNamespace(
        PortAudioError=PortAudioError,
        query_devices=query_devices,
        check_input_settings=check_input_settings,
        InputStream=lambda **kw: _ScriptedStream(blocks, **kw),
        default=SimpleNamespace(device=[0, 0]),
    )


def test_recorder_native_rate_stereo_fallback(monkeypatch):
    """A 48 kHz stereo-only device: recorded as is, returned as 16 kHz mono (L+R)/2."""

    def blocks(rate, channels):
        x = tone(400.0, rate, 1.0, amp=0.5).astype(np.float32)  # whole periods per 10 ms block
        stereo = np.stack([x, np.zeros_like(x)], 1)  # tone on the left only
        return [stereo[i : i + 480] for i in range(0, len(stereo), 480)]

    monkeypatch.setattr(core_microphone, "_sounddevice", lambda: _fake_sd(48000, blocks))
    levels = []
    rec = Recorder(on_level=lambda rms, peak: levels.append((rms, peak)))
    rec.start()
    assert rec.is_recording and rec.stream_rate == 48000 and rec.stream_channels == 2
    assert math.isclose(rec.duration_s, 1.0)
    audio = rec.stop()
    assert not rec.is_recording
    ref = tone(400.0, SAMPLE_RATE, 1.0, amp=0.25)
    assert len(audio) == len(ref)
    assert float(np.max(np.abs(audio[400:-400] - ref[400:-400]))) < 1e-3
    # Level of a 0.25-amplitude sine: RMS 0.25/sqrt(2) -> 20 log10(...) = -15.05 dBFS; peak 0.25.
    rms_dbfs, peak = rec.level
    assert math.isclose(rms_dbfs, 20 * math.log10(0.25 / math.sqrt(2)), abs_tol=0.05)
    assert math.isclose(peak, 0.25, abs_tol=0.01)
    assert len(levels) == 100 and levels[-1] == tuple(rec.level)
    # Kept until discard(); the next start() clears it.
    np.testing.assert_array_equal(rec.audio(), audio)
    rec.discard()
    assert rec.audio().size == 0 and rec.level.rms_dbfs == -math.inf


def test_recorder_errors(monkeypatch):
    monkeypatch.setattr(core_microphone, "_sounddevice", lambda: _fake_sd(12345, lambda r, c: []))
    with pytest.raises(AudioError, match="Input device 'nope' not found.*Available input devices"):
        Recorder(device="nope").start()
    with pytest.raises(AudioError, match="Cannot open the input device 'scripted'"):
        Recorder().start()  # the device accepts no rate we try
    with pytest.raises(AudioError, match="positive"):
        Recorder(sample_rate=0)


def test_recorder_callback_exception_is_contained(monkeypatch):
    monkeypatch.setattr(
        core_microphone, "_sounddevice", lambda: _fake_sd(48000, lambda r, c: [np.full((480, c), 0.1, np.float32)] * 3)
    )

    def bad(rms, peak):
        raise RuntimeError("GUI gone")

    rec = Recorder(on_level=bad)
    rec.start()
    assert len(rec.stop()) == 480  # 3 x 480 samples at 48 kHz -> 480 at 16 kHz


def test_recorder_stops_then_closes_once(monkeypatch):
    """stop(): stream.stop() then close(), once; a second stop() leaves the stream alone."""
    monkeypatch.setattr(
        core_microphone, "_sounddevice", lambda: _fake_sd(48000, lambda r, c: [np.full((480, c), 0.1, np.float32)] * 3)
    )
    rec = Recorder()
    rec.start()
    stream = rec._stream
    rec.stop()
    rec.stop()
    rec.discard()
    assert stream.calls == ["start", "stop", "close"]


def test_recorder_discard_while_recording_aborts_and_closes(monkeypatch):
    """discard() during a recording aborts the stream (nothing is drained) and closes it:
    a stream left running is what made PortAudio print "Expression … failed" (or crash)."""
    monkeypatch.setattr(
        core_microphone, "_sounddevice", lambda: _fake_sd(48000, lambda r, c: [np.full((480, c), 0.1, np.float32)] * 3)
    )
    rec = Recorder()
    rec.start()
    stream = rec._stream
    rec.discard()
    assert stream.calls == ["start", "abort", "close"]
    assert not rec.is_recording and rec.audio().size == 0
    rec.discard()
    assert stream.calls == ["start", "abort", "close"]


def test_recorder_closes_the_stream_when_stop_fails(monkeypatch):
    sd = _fake_sd(48000, lambda r, c: [])
    monkeypatch.setattr(core_microphone, "_sounddevice", lambda: sd)
    rec = Recorder()
    rec.start()
    stream = rec._stream

    def broken():
        stream.calls.append("stop")
        raise sd.PortAudioError("Stream is not active")

    stream.stop = broken
    with pytest.raises(AudioError, match="did not stop cleanly"):
        rec.stop()
    assert stream.calls == ["start", "stop", "close"] and not rec.is_recording


def test_microphone_names_are_reexported_without_portaudio():
    """core.inputs.audio re-exports the microphone API lazily: importing it loads no PortAudio."""
    import subprocess

    code = (
        "import sys; import core.inputs.audio as a; print('sounddevice' in sys.modules, 'core.inputs.microphone' in sys.modules);"
        "from core.inputs.audio import Recorder; print(Recorder.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "core.inputs.microphone"]
    import core.inputs.audio

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        core.inputs.audio.nope  # noqa: B018


# ------------------------------------------------------------- open_audio


def test_open_audio_refuses_a_one_sample_wav(tmp_path):
    p = tmp_path / "one.wav"
    sf.write(p, np.array([0.1], np.float32), SAMPLE_RATE)
    assert len(load_audio(p)) == 1  # load_audio (the CLI's reader) still reads it
    with pytest.raises(AudioError) as e:
        open_audio(p, label="one.wav")
    assert str(e.value) == (
        "one.wav is too short: it holds 1 sample (0.062 ms) of audio, and the speech models need at least 0.1 s. "
        "Open or record a longer clip."
    )


def test_open_audio_minimum_is_whisper_minimum(tmp_path):
    from core.tasks.speech import MIN_AUDIO_S

    assert MIN_DURATION_S == MIN_AUDIO_S
    n = int(MIN_DURATION_S * 44100)
    p = tmp_path / "edge.wav"
    sf.write(p, np.full(n, 0.1, np.float32), 44100)  # exactly the minimum at another rate: accepted
    assert open_audio(p).warnings == ()
    sf.write(p, np.full(n - 1, 0.1, np.float32), 44100)
    with pytest.raises(AudioError, match="edge.wav is too short: it holds 4409 samples"):
        open_audio(p)  # the label defaults to the path


def _truncated_wav(tmp_path, seconds=3.0, keep_s=0.62, subtype="PCM_16", channels=1, rate=SAMPLE_RATE):
    full = tmp_path / "full.wav"
    x = tone(300.0, rate, seconds, amp=0.3).astype(np.float32)
    sf.write(full, np.stack([x] * channels, 1) if channels > 1 else x, rate, subtype=subtype)
    data = full.read_bytes()
    header = data.index(b"data") + 8
    block = channels * {"PCM_16": 2, "FLOAT": 4}[subtype]
    cut = tmp_path / "cut.wav"
    cut.write_bytes(data[: header + int(keep_s * rate) * block])
    return full, cut


@pytest.mark.parametrize("subtype,channels,rate", [("PCM_16", 1, 16000), ("FLOAT", 2, 44100)])
def test_open_audio_warns_about_a_truncated_wav(tmp_path, subtype, channels, rate):
    full, cut = _truncated_wav(tmp_path, subtype=subtype, channels=channels, rate=rate)
    assert sf.info(str(cut)).frames == int(0.62 * rate)  # libsndfile reads it silently as 0.62 s
    assert wav_truncation(full) is None and open_audio(full).warnings == ()
    declared, present = wav_truncation(cut)
    assert declared == pytest.approx(3.0) and present == pytest.approx(0.62, abs=1e-3)
    got = open_audio(cut, label="cut.wav")
    assert len(got.audio) == pytest.approx(0.62 * SAMPLE_RATE, abs=2)  # still usable
    assert got.warnings == (
        "cut.wav is truncated: its header promises 3.00 s of audio, but the file holds only 0.62 s (the copy or "
        "download was probably cut short). The 0.62 s that are there are used; get a complete copy to use all of it.",
    )


def test_wav_truncation_ignores_other_files(tmp_path):
    flac = tmp_path / "a.flac"
    sf.write(flac, np.zeros(1600, np.float32), SAMPLE_RATE)
    streamed = tmp_path / "streamed.wav"  # a writer that never filled in the sizes
    sf.write(streamed, np.zeros(1600, np.float32), SAMPLE_RATE, subtype="PCM_16")
    data = bytearray(streamed.read_bytes())
    i = data.index(b"data") + 4
    data[i : i + 4] = b"\xff\xff\xff\xff"
    streamed.write_bytes(bytes(data))
    assert wav_truncation(flac) is None and wav_truncation(streamed) is None
    assert wav_truncation(tmp_path / "missing.wav") is None


def test_audio_while_recording_converts_only_the_new_blocks(monkeypatch):
    """A live view asks for the recording every 200 ms: while recording, audio() converts the
    blocks recorded since the last call (streaming resampler), never the whole recording again,
    and returns a read-only view; stop() converts the whole take once (writable), and the live
    samples agree with it."""

    def blocks(rate, channels):
        x = tone(400.0, rate, 0.5, amp=0.5).astype(np.float32)
        stereo = np.stack([x, x], 1)
        return [stereo[i : i + 480] for i in range(0, len(stereo), 480)]

    monkeypatch.setattr(core_microphone, "_sounddevice", lambda: _fake_sd(48000, blocks))
    rec = Recorder()
    rec.start()
    assert rec.is_recording and rec.stream_rate == 48000
    whole = []
    real = core_microphone.soxr.resample
    monkeypatch.setattr(core_microphone.soxr, "resample", lambda x, *a, **k: (whole.append(len(x)), real(x, *a, **k))[1])
    more = tone(400.0, 48000, 2.5, amp=0.5).astype(np.float32)[24000:]  # goes on after the first 0.5 s
    lengths = []
    for i in range(20):  # 0.1 s more per call
        for j in range(10):
            block = np.repeat(more[(i * 10 + j) * 480 : (i * 10 + j + 1) * 480, None], 2, axis=1)
            rec._callback(block, len(block), None, None)
        live = rec.audio()
        assert not live.flags.writeable
        lengths.append(len(live))
    assert whole == []  # nothing converted twice while recording
    steps = np.diff(lengths)
    assert np.all(steps > 1000) and abs(int(steps.sum()) - 19 * 1600) <= 500, steps  # ~the new 0.1 s each call
    final = rec.stop()
    assert final.flags.writeable and whole == [48000 * 5 // 2]  # one whole pass at stop
    n = lengths[-1] - 200
    np.testing.assert_allclose(live[:n], final[:n], atol=2e-3)
