"""Long clips kept as 16-bit samples (core/inputs/pcm16.py, issue 19 §3: an hour of float32 is
230 MB): half the bytes, the same decode. A 16-bit source (every sample k/32768) round-trips
bit for bit, so the log-mel windows, the long-form run's token ids, fixed windows, forks and
what-ifs equal those of the float32 clip."""

from __future__ import annotations

import numpy as np
import pytest

from core.events import AttemptEvent, Finished
from core.inputs.pcm16 import SCALE, Pcm16Audio, compact_audio, to_float32
from core.inputs.types import check_audio
from core.options import DecodingOptions
from tests.core.test_longform_memory import clip_100s  # noqa: F401 - the module fixture

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def sixteen_bit(audio: np.ndarray) -> np.ndarray:
    """``audio`` as a 16-bit source gives it: every sample a multiple of 1/32768 (float32)."""
    return (np.clip(np.rint(audio * SCALE), -32768, 32767) / SCALE).astype(np.float32)


def test_a_long_16_bit_clip_is_kept_in_half_the_bytes_and_reads_back_exactly():
    rng = np.random.default_rng(0)
    audio = sixteen_bit(rng.uniform(-1, 1, 16000 * 301).astype(np.float32))
    kept = compact_audio(audio)
    assert isinstance(kept, Pcm16Audio) and kept.exact
    assert kept.nbytes == 2 * len(audio) and len(kept) == len(audio)
    assert np.array_equal(np.asarray(kept), audio)
    assert np.array_equal(kept[1000:5000], audio[1000:5000]) and kept[1000:5000].dtype == np.float32
    idx = np.array([3, 0, 7])
    assert np.array_equal(kept[idx], audio[idx])
    assert check_audio(kept) is kept  # checked, not converted


def test_a_short_clip_stays_float32_as_it_came():
    audio = np.zeros(16000 * 60, np.float32)
    assert compact_audio(audio) is audio


def test_a_float_source_is_rounded_to_the_nearest_16_bit_step():
    rng = np.random.default_rng(1)
    audio = rng.uniform(-1, 0.999, 16000 * 300).astype(np.float32)  # (1.0 itself reads back as 32767/32768)
    kept = compact_audio(audio)
    assert not kept.exact
    assert np.max(np.abs(np.asarray(kept) - audio)) <= 1 / 65536 + 1e-9
    assert to_float32(np.array([32767, -32768], np.int16)).tolist() == [32767 / 32768, -1.0]


def test_log_mel_windows_of_the_int16_clip_equal_the_float32_ones(whisper_tiny_en, clip_100s):  # noqa: F811
    from core.tasks.longform_windows import LogMel, audio_key

    audio = sixteen_bit(clip_100s)
    kept = Pcm16Audio.from_float(audio)
    a, b = LogMel(whisper_tiny_en, audio), LogMel(whisper_tiny_en, kept)
    assert a.shape == b.shape
    for seek in (0, 3000, b.shape[-1] - 1200):  # the clip's start and end read reflect padding
        assert np.array_equal(a.window(seek, 3000).numpy(), b.window(seek, 3000).numpy())
    assert audio_key(kept).startswith("pcm16:") and audio_key(kept) == audio_key(Pcm16Audio(kept.pcm.copy()))


def _ids(events):
    return [ev.token_ids for ev in events if isinstance(ev, Finished)][-1]


def test_long_form_fork_and_what_if_on_the_int16_clip_decode_as_on_float32(whisper_tiny_en, clip_100s):  # noqa: F811
    from core.tasks import whatif

    model = whisper_tiny_en
    audio = sixteen_bit(clip_100s[: 16000 * 45])  # long-form: two windows (the 100 s clip's four add no new case)
    kept = Pcm16Audio.from_float(audio)
    want = list(model.transcribe(audio, DecodingOptions()))
    got = list(model.transcribe(kept, DecodingOptions()))
    assert _ids(got) == _ids(want)
    first = next(ev for ev in got if isinstance(ev, AttemptEvent) and ev.kept_in_transcript)
    forced = [s.token_id for s in first.steps[:3]]
    forked = list(model.fork(kept, DecodingOptions(), segment=0, forced_ids=forced, step_offset=first.step_offset,
                             longform=True))
    assert forked[-1].token_ids == list(first.token_ids)
    silenced = whatif.silence_span(kept, 1.0, 2.0, 16000)
    assert isinstance(silenced, Pcm16Audio) and not silenced[16000:32000].any() and silenced.nbytes == kept.nbytes
    assert np.array_equal(np.asarray(silenced), whatif.silence_span(audio, 1.0, 2.0, 16000))


def test_fixed_windows_of_the_int16_clip_decode_as_on_float32(whisper_tiny_en, clip_100s):  # noqa: F811
    model = whisper_tiny_en
    audio = sixteen_bit(clip_100s[: 16000 * 45])
    want = _ids(model.decode(audio, DecodingOptions()))
    assert _ids(model.decode(Pcm16Audio.from_float(audio), DecodingOptions())) == want


def test_an_int16_clip_is_saved_as_it_is_without_a_float_copy(tmp_path):
    import tracemalloc

    from core.inputs.audio import load_audio, save_wav

    audio = sixteen_bit(np.random.default_rng(2).uniform(-1, 1, 16000 * 60).astype(np.float32))
    kept = Pcm16Audio.from_float(audio)
    tracemalloc.start()
    try:
        save_wav(tmp_path / "take.wav", kept)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * kept.nbytes, peak  # a float32 copy alone is twice the int16 bytes (soundfile may copy the int16)
    assert np.array_equal(load_audio(tmp_path / "take.wav"), audio)


def test_a_long_file_is_opened_as_int16_on_the_reading_thread(tmp_path):
    from core.inputs.audio import open_audio, save_wav

    audio = sixteen_bit(np.random.default_rng(4).uniform(-0.9, 0.9, 16000 * 301).astype(np.float32))
    save_wav(tmp_path / "long.wav", audio)
    got = open_audio(tmp_path / "long.wav").audio
    assert isinstance(got, Pcm16Audio) and got.exact and np.array_equal(np.asarray(got), audio)
    save_wav(tmp_path / "short.wav", audio[: 16000 * 10])
    assert isinstance(open_audio(tmp_path / "short.wav").audio, np.ndarray)


def test_a_long_16_bit_mono_file_is_read_straight_as_int16(tmp_path):
    """A 16 kHz 16-bit mono file of 5 minutes or more is read as the int16 the app keeps, with
    no float32 copy on the way (the hour's open peaked at +650 MB); the samples equal the general
    path's, and other files still take the general path."""
    import tracemalloc

    import soundfile as sf

    from core.inputs import audio as audio_mod
    from core.inputs.pcm16 import COMPACT_MIN_S

    rng = np.random.default_rng(3)
    n = int(COMPACT_MIN_S * 16000) + 16000
    pcm = (rng.standard_normal(n) * 3000).clip(-32768, 32767).astype(np.int16)
    path = tmp_path / "long.wav"
    sf.write(path, pcm, 16000, subtype="PCM_16")
    tracemalloc.start()
    got = audio_mod.open_audio(path).audio
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(got, Pcm16Audio) and got.exact
    assert np.array_equal(got.pcm, pcm)
    assert peak < 1.5 * pcm.nbytes, peak  # the float32 path holds 2x (float32) + 2x (mono) + 1x (int16)
    general = compact_audio(audio_mod.load_audio(path))
    assert np.array_equal(general.pcm, got.pcm)
    stereo = tmp_path / "stereo.wav"
    sf.write(stereo, np.stack([pcm, pcm], 1), 16000, subtype="PCM_16")
    assert np.array_equal(audio_mod.open_audio(stereo).audio.pcm, pcm)  # the general path: (L+R)/2
