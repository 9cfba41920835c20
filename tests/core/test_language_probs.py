"""Language probabilities at <|startoftranscript|> (issue 14 section 4) on the real bundled models.

whisper-base on the bundled English clip: ``SpeechModel.language_probs`` is a distribution
(sums to 1, best first), its best is ``detect_language``'s, and it equals a softmax computed
here directly from transformers' own forward pass (the model's logits at <|startoftranscript|>
over the language tokens), over all languages and over a candidate subset, within 1e-5.
Candidates reach decode's SegmentEvent and prompt; unknown codes are refused; tiny.en has none.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from core.events import Finished, SegmentEvent
from core.options import DecodingOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


@pytest.fixture(scope="module")
def audio() -> np.ndarray:
    a, sr = sf.read(SAMPLE, dtype="float32")
    assert sr == 16_000
    return a


def reference(sm, audio: np.ndarray, codes: list[str]) -> dict[str, float]:
    """Softmax over the language tokens ``codes`` of transformers' logits at
    <|startoftranscript|> (the model's own forward, not our backend)."""
    lw = sm._loaded
    feats = lw.feature_extractor(audio, sampling_rate=16_000, return_tensors="pt").input_features
    with torch.inference_mode():
        logits = lw.model(input_features=feats, decoder_input_ids=torch.tensor([[lw.special.sot]])).logits[0, -1]
    ids = torch.tensor([lw.lang_token_ids[c] for c in codes])
    return dict(zip(codes, torch.softmax(logits[ids].float(), dim=-1).tolist()))


def test_distribution_sums_to_one_best_first_equals_detect_language(whisper_base, audio):
    probs = whisper_base.language_probs(audio)
    assert set(probs) == set(whisper_base.languages) and len(probs) == 99
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-5)
    values = list(probs.values())
    assert values == sorted(values, reverse=True)
    encoded, _hit, key = whisper_base._encode(audio)
    best, p = whisper_base.detect_language(encoded, key)
    assert next(iter(probs.items())) == (best, p)
    assert best == "en" and p > 0.5


def test_distribution_equals_transformers(whisper_base, audio):
    probs = whisper_base.language_probs(audio)
    ref = reference(whisper_base, audio, whisper_base.languages)
    assert max(abs(probs[c] - ref[c]) for c in ref) < 1e-5
    # and transformers' own detect_language picks the same language
    lw = whisper_base._loaded
    feats = lw.feature_extractor(audio, sampling_rate=16_000, return_tensors="pt").input_features
    with torch.inference_mode():
        lang_id = int(lw.model.detect_language(input_features=feats)[0])
    assert lw.lang_token_ids[next(iter(probs))] == lang_id


def test_candidates_restrict_and_renormalise(whisper_base, audio):
    probs = whisper_base.language_probs(audio, candidate_languages=["de", "fr"])
    assert set(probs) == {"de", "fr"}
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-6)
    ref = reference(whisper_base, audio, ["de", "fr"])
    assert max(abs(probs[c] - ref[c]) for c in ref) < 1e-5
    encoded, _hit, key = whisper_base._encode(audio)
    assert whisper_base.detect_language(encoded, key, candidate_languages=("fr", "de")) == next(iter(probs.items()))
    # a comma-separated string, spaces, upper case and repeats mean the same
    assert whisper_base.language_probs(audio, candidate_languages=" DE, fr,de ") == probs
    # the full distribution's ratio between the two is kept
    full = whisper_base.language_probs(audio)
    assert probs["de"] / probs["fr"] == pytest.approx(full["de"] / full["fr"], rel=1e-4)


def test_decode_carries_candidates(whisper_base, audio):
    events = list(whisper_base.decode(audio, DecodingOptions(max_new_tokens=3), candidate_languages=["de", "fr"]))
    seg = next(ev for ev in events if isinstance(ev, SegmentEvent))
    expected = whisper_base.language_probs(audio, candidate_languages=["de", "fr"])
    assert dict(seg.language_probs) == expected
    assert whisper_base.last_language == next(iter(expected)) and whisper_base.last_language in {"de", "fr"}
    assert f"language {whisper_base.last_language}" in seg.label
    assert isinstance(events[-1], Finished)
    # without candidates: the top 10 of all 99, best first, English
    seg = next(ev for ev in whisper_base.decode(audio, DecodingOptions(max_new_tokens=1))
               if isinstance(ev, SegmentEvent))
    assert len(seg.language_probs) == 10 and seg.language_probs[0][0] == "en"
    assert seg.language_probs == tuple(list(whisper_base.language_probs(audio).items())[:10])
    assert all(isinstance(c, str) and isinstance(p, float) for c, p in seg.language_probs)


def test_unknown_candidate_is_one_line_listing_the_codes(whisper_base, audio):
    with pytest.raises(ValueError, match=r"unknown candidate language\(s\) 'xx'.*en, zh, de") as err:
        whisper_base.language_probs(audio, candidate_languages=["en", "xx"])
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="unknown candidate"):
        next(iter(whisper_base.decode(audio, DecodingOptions(), candidate_languages="klingon")))
    with pytest.raises(ValueError, match="outside the audio"):
        whisper_base.language_probs(audio, window=1)


def test_encoder_and_sot_step_are_cached(whisper_base, audio):
    whisper_base.language_probs(audio)
    before = whisper_base.encode_count
    cached = dict(whisper_base._language_cache)
    whisper_base.language_probs(audio, candidate_languages=["es", "it", "pt"])
    assert whisper_base.encode_count == before and whisper_base._language_cache.keys() == cached.keys()


def test_english_only_has_none_and_ignores_candidates(whisper_tiny_en, audio):
    assert whisper_tiny_en.language_probs(audio) == {}
    assert whisper_tiny_en.candidates(["de", "xx"]) is None
    events = list(whisper_tiny_en.decode(audio, DecodingOptions(max_new_tokens=2), candidate_languages=["de"]))
    seg = next(ev for ev in events if isinstance(ev, SegmentEvent))
    assert seg.language_probs == () and whisper_tiny_en.last_language == "en"
    with pytest.raises(ValueError, match="English-only"):
        whisper_tiny_en.detect_language(whisper_tiny_en._encode(audio)[0])
