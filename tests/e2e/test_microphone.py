"""The microphone path for real: PulseAudio fake mic -> ALSA pulse -> PortAudio -> core.inputs.audio.Recorder.

The fake microphone (tests/helpers/pulse.py) plays espeak-ng speech into a FIFO; the
recording must contain that speech: found by normalised cross-correlation with the
source waveform, at full strength, and with the right length.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import time

import numpy as np
import pytest
import soxr

from core.inputs.audio import SAMPLE_RATE, AudioError, Recorder, list_input_devices, microphone_status

pytestmark = pytest.mark.mic

TEXT = "Hello world. This is a test of the microphone."


def _espeak(text: str) -> np.ndarray:
    """espeak-ng speech as float32 (n,) at 16 kHz (tests/helpers/speech.py if present)."""
    try:
        from tests.helpers.speech import synth_speech
    except ImportError:
        import io

        import soundfile as sf

        if shutil.which("espeak-ng") is None:
            pytest.fail("espeak-ng is not installed: apt-get install -y espeak-ng")
        wav = subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "--stdout", text], capture_output=True, check=True).stdout
        a, sr = sf.read(io.BytesIO(wav), dtype="float32")
        return soxr.resample(a, sr, SAMPLE_RATE).astype(np.float32)
    return synth_speech(text)


def _best_alignment(recording: np.ndarray, source: np.ndarray) -> tuple[int, float]:
    """(lag in samples, normalised cross-correlation) of ``source`` inside ``recording``, via FFT."""
    n = len(recording) + len(source)
    nfft = 1 << (n - 1).bit_length()
    xc = np.fft.irfft(np.fft.rfft(recording, nfft) * np.conj(np.fft.rfft(source, nfft)), nfft)[: len(recording) - len(source) + 1]
    lag = int(np.argmax(xc))
    seg = recording[lag : lag + len(source)]
    ncc = float(np.dot(seg, source) / (np.linalg.norm(seg) * np.linalg.norm(source) + 1e-12))
    return lag, ncc


def test_fake_mic_is_listed(fake_mic):
    """After the fake mic starts, core.inputs.audio sees a usable input device named 'pulse'."""
    ok, reason = microphone_status()
    assert ok, reason
    names = [d.name for d in list_input_devices()]
    assert "pulse" in names, names


def test_recorder_captures_speech(fake_mic):
    speech = _espeak(TEXT)
    assert 1.5 < len(speech) / SAMPLE_RATE < 6

    levels: list[tuple[float, float]] = []
    rec = Recorder(device=fake_mic.device, on_level=lambda rms, peak: levels.append((rms, peak)))
    rec.start()
    assert rec.is_recording
    time.sleep(0.3)  # lead-in silence
    fake_mic.play(speech)
    fake_mic.wait_played(timeout_s=30)
    time.sleep(0.7)  # let the tail travel through PulseAudio/ALSA buffers
    audio = rec.stop()
    wall = rec.duration_s  # seconds of stream samples received
    assert not rec.is_recording

    assert audio.dtype == np.float32 and audio.ndim == 1
    dur = len(audio) / SAMPLE_RATE
    speech_s = len(speech) / SAMPLE_RATE
    # 0.3 s lead-in + speech + 0.7 s tail, minus start-up latency and buffering.
    assert speech_s + 0.3 < dur < speech_s + 3.0, (dur, speech_s)
    assert math.isclose(dur, wall, abs_tol=1e-3)

    lag, ncc = _best_alignment(audio, speech)
    # The pipe source is bit-exact s16 at 16 kHz; the path may resample (PortAudio/ALSA rate),
    # so ask for a strong match rather than identity.
    print(f"recorded {dur:.2f} s for {speech_s:.2f} s of speech; lag {lag / SAMPLE_RATE:.3f} s, NCC {ncc:.4f}")
    assert ncc > 0.9, f"recording does not contain the speech (normalised cross-correlation {ncc:.3f})"
    seg = audio[lag : lag + len(speech)]
    gain = float(np.dot(seg, speech) / np.dot(speech, speech))
    print(f"gain {gain:.4f}")
    assert 0.8 < gain < 1.25, gain  # no attenuation/boost along the way
    # Silence outside the speech: the recording holds the speech once, not noise.
    outside = np.concatenate([audio[: max(lag - 160, 0)], audio[lag + len(speech) + 160 :]])
    assert outside.size > 0 and float(np.sqrt(np.mean(outside**2))) < 0.01

    # The level callback ran on the audio thread and saw the speech.
    assert levels, "on_level was never called"
    assert max(p for _, p in levels) > 0.5 * float(np.max(np.abs(speech)))
    assert rec.level.peak >= 0.0

    # The recording is kept until discard().
    assert np.array_equal(rec.audio(), audio)
    rec.discard()
    assert rec.audio().size == 0 and rec.duration_s == 0.0


def test_recorder_at_native_rate_resamples(fake_mic, monkeypatch):
    """A device that refuses 16 kHz is recorded at its native rate and resampled to 16 kHz.

    PortAudio is made to refuse 16 kHz; a 440 Hz tone must still come out at 440 Hz,
    with the right duration (a wrong rate would shift both).
    """
    import sounddevice as sd

    real_check = sd.check_input_settings

    def no_16k(*args, samplerate=None, **kwargs):
        if samplerate == SAMPLE_RATE:
            raise sd.PortAudioError("Invalid sample rate (test)")
        return real_check(*args, samplerate=samplerate, **kwargs)

    monkeypatch.setattr(sd, "check_input_settings", no_16k)
    t = np.arange(int(1.5 * SAMPLE_RATE)) / SAMPLE_RATE
    tone = (0.4 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
    rec = Recorder(device="default")
    rec.start()
    native = [d for d in list_input_devices() if d.name == "default"][0].default_samplerate
    assert rec.stream_rate == int(native) != SAMPLE_RATE
    fake_mic.play(tone)
    fake_mic.wait_played()
    time.sleep(0.3)
    audio = rec.stop()
    # soxr keeps the duration: 16 kHz samples out = native-rate samples in, rescaled.
    assert math.isclose(len(audio) / SAMPLE_RATE, rec.duration_s, abs_tol=1e-3)
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    peak_hz = np.argmax(spectrum) * SAMPLE_RATE / len(audio)
    assert abs(peak_hz - 440.0) < 2.0, peak_hz
    # The tone is there at full strength (about 0.4 peak) after resampling.
    assert 0.3 < float(np.max(np.abs(audio))) < 0.5


def test_unknown_device_is_an_audio_error(fake_mic):
    rec = Recorder(device="no such microphone 1234")
    with pytest.raises(AudioError, match="not found.*Available input devices"):
        rec.start()
    assert not rec.is_recording


@pytest.mark.e2e
def test_recorded_speech_is_transcribed(fake_mic):
    """Fake mic -> PortAudio -> Recorder -> bundled Whisper tiny.en: the transcript has the words."""
    from core.options import DecodingOptions
    from core.tasks.speech import SpeechModel

    text = "Open the door and turn on the lights."
    speech = _espeak(text)
    rec = Recorder(device=fake_mic.device)
    rec.start()
    time.sleep(0.2)
    fake_mic.play(speech)
    fake_mic.wait_played(timeout_s=30)
    time.sleep(0.5)
    audio = rec.stop()
    result = list(SpeechModel.load("tiny.en").decode(audio, DecodingOptions()))[-1]
    words = set("".join(c for c in result.text.lower() if c.isalpha() or c.isspace()).split())
    assert {"open", "door", "turn", "lights"} <= words, result.text


def _portaudio_complaints(err: str) -> list[str]:
    """PortAudio/ALSA diagnostics such as "Expression '…' failed in 'src/hostapi/alsa/pa_linux_alsa.c'"."""
    return [line for line in err.splitlines() if "Expression" in line or "pa_linux_alsa" in line]


def test_discard_during_recording_is_quiet(fake_mic, capfd):
    """discard() while recording aborts and closes the stream: when the sound server then goes
    away (the app quits, the test ends) PortAudio has nothing running to complain about.
    Before, the stream kept running after discard() and stderr got "Expression … failed"."""
    import gc

    rec = Recorder(device=fake_mic.device)
    rec.start()
    fake_mic.play(np.zeros(8000, np.float32))
    fake_mic.wait_played(timeout_s=30)
    rec.discard()
    assert not rec.is_recording and rec.audio().size == 0
    fake_mic.stop()  # the server goes away, as at the end of a session
    time.sleep(0.5)
    del rec
    gc.collect()  # a stream left running would now call into a freed callback
    time.sleep(0.2)
    err = capfd.readouterr().err
    assert _portaudio_complaints(err) == [], err


def test_stop_then_discard_is_quiet(fake_mic, capfd):
    rec = Recorder(device=fake_mic.device)
    rec.start()
    fake_mic.play(np.zeros(8000, np.float32))
    fake_mic.wait_played(timeout_s=30)
    assert len(rec.stop()) > 0
    rec.stop()  # a second stop() does not touch the closed stream
    rec.discard()
    fake_mic.stop()
    time.sleep(0.5)
    err = capfd.readouterr().err
    assert _portaudio_complaints(err) == [], err
