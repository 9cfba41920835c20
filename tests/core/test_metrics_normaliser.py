"""WER with Whisper's English normaliser (issue 23: the streaming bench counted harbour/harbor
as an error): ``score(..., normaliser="whisper-en")`` applies openai/whisper's
EnglishTextNormalizer (its British -> American spelling map, numbers, contractions) to both
texts; the default stays the plain lower-case/no-punctuation transform."""

import pytest

from core.analysis.metrics import NORMALISERS, normalise, score


def test_the_default_wer_counts_a_british_spelling_as_an_error():
    assert score("wer", "The harbour was calm.", "the harbor was calm").value == pytest.approx(0.25)


def test_whispers_english_normaliser_maps_british_spellings_numbers_and_contractions():
    assert score("wer", "The harbour was calm.", "the harbor was calm", normaliser="whisper-en").value == 0.0
    assert score("wer", "Twenty-one ships weren't there.", "21 ships were not there",
                 normaliser="whisper-en").value == 0.0
    assert normalise("wer", "The Harbour, Mr. Smith!", normaliser="whisper-en") == "the harbor mister smith"


def test_an_unknown_normaliser_or_one_for_another_metric_is_refused_with_the_choices():
    assert "whisper-en" in NORMALISERS and "basic" in NORMALISERS
    with pytest.raises(ValueError, match="basic"):
        score("wer", "a", "a", normaliser="nope")
    with pytest.raises(ValueError, match="wer"):
        score("cer", "a", "a", normaliser="whisper-en")
