"""A long clip kept as int16 is identified (``SpeechInput.identity``, at a run's end) without a
float32 copy of the whole clip (issue 19 §3: an hour's copy took +400 MB at the end of the run),
with the same SHA-256 as its float32 samples."""

from __future__ import annotations

import hashlib
import tracemalloc

import numpy as np

from core.inputs.pcm16 import Pcm16Audio
from core.inputs.types import SpeechInput


def test_identity_of_an_int16_clip_hashes_it_a_chunk_at_a_time_with_the_float32_digest():
    rng = np.random.default_rng(1)
    audio = Pcm16Audio(rng.integers(-32768, 32768, 16000 * 120, dtype=np.int16))  # 2 min: 7.7 MB as float32
    want = hashlib.sha256(np.asarray(audio).tobytes()).hexdigest()
    tracemalloc.start()
    try:
        label, digest = SpeechInput(audio=audio).identity("clip")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digest == want and label == "clip (120.00 s audio)"
    assert peak < len(audio) * 4 / 4  # well under the float32 copy of the clip


def test_a_long_clip_made_off_the_gui_thread_has_its_identity_hashed_there(tmp_path):
    """compact_audio and open_audio (on the open / take workers) hash a long clip's samples where
    they make it, so the GUI thread's identity check finds the digest remembered."""
    import soundfile as sf

    from core.inputs.audio import open_audio
    from core.inputs.pcm16 import COMPACT_MIN_S, compact_audio

    n = int(COMPACT_MIN_S * 16000) + 1600
    x = (np.random.default_rng(0).standard_normal(n) * 0.05).astype(np.float32)
    kept = compact_audio(x)
    assert kept._sha256 is not None and kept._sha256 == kept.sha256_float32()
    path = tmp_path / "long.wav"
    sf.write(path, kept.pcm, 16000, subtype="PCM_16")
    assert open_audio(path).audio._sha256 == kept._sha256
