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
