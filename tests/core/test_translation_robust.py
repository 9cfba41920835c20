"""Issue 19 on the real bundled Bergamot en-pt model: bad words in every case, a target
prefix longer than the length budget, scripts the model cannot read, a 1 MB text on one
line (sentence cap, no quadratic step) and the CLI's streamed output."""

from __future__ import annotations

import pytest

from core.events import Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.translation import TranslationModel

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

STATION = "Where is the nearest train station? The station is closed today."


@pytest.fixture(scope="module")
def en_pt():
    return TranslationModel.load("en-pt")


def _finished(events) -> Finished:
    fin = None
    for ev in events:
        if isinstance(ev, Finished):
            fin = ev
    assert fin is not None
    return fin


# ------------------------------------------------------------------ bad words
def test_bad_word_bans_its_case_variants_by_default(en_pt):
    plain = _finished(en_pt.decode(STATION, DecodingOptions()))
    assert "estação" in plain.text
    fin = _finished(en_pt.decode(STATION, DecodingOptions(bad_words=("estação",))))
    assert "estação" not in fin.text.lower(), fin.text
    # ... and in capitals
    assert "ESTAÇÃO" not in fin.text


def test_exact_bad_words_bans_only_the_typed_form(en_pt):
    fin = _finished(en_pt.decode(STATION, DecodingOptions(bad_words=("estação",), bad_words_exact=True)))
    assert "Estação" in fin.text  # exact token sequences (transformers): the capitalised form comes back


def test_bad_word_forms():
    from core.processors.constraints import bad_word_forms

    assert bad_word_forms("estação") == ["estação", "Estação", "ESTAÇÃO"]
    assert bad_word_forms("train station") == ["train station", "Train station", "Train Station", "TRAIN STATION"]
    assert bad_word_forms("iPhone") == ["iPhone", "iphone", "IPhone", "Iphone", "IPHONE"]
    assert bad_word_forms("estação", exact=True) == ["estação"]


def test_cli_bad_words_exact_flag(capsys):
    from core.cli import main

    assert main(["translate", STATION, "--bad-words", "estação"]) == 0
    banned = capsys.readouterr().out
    assert "estação" not in banned.lower()
    assert main(["translate", STATION, "--bad-words", "estação", "--bad-words-exact"]) == 0
    assert "Estação" in capsys.readouterr().out


# ------------------------------------------------------------------ prefix
def test_long_prefix_is_kept_whole_and_not_counted(en_pt):
    prefix = "Olá mundo" + " bla" * 12
    ids = en_pt.prefix_ids(prefix)
    fin = _finished(en_pt.decode("Hello world", DecodingOptions(), prefix_ids=ids))
    assert fin.token_ids[: len(ids)] == list(ids)  # every forced token is there
    assert fin.text.startswith(prefix), fin.text
    # the budget counts the new tokens only: max_new_tokens=2 gives the prefix and 2 more
    events = list(en_pt.decode("Hello world", DecodingOptions(max_new_tokens=2), prefix_ids=ids))
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert sum(e.forced for e in steps) == len(ids)
    assert sum(not e.forced for e in steps) <= 2 and _finished(events).text.startswith(prefix)


def test_prefix_budget_leaves_other_sentences_alone(en_pt):
    ids = en_pt.prefix_ids("Olá")
    events = list(en_pt.decode("Hello world. Good morning.", DecodingOptions(max_new_tokens=2), prefix_ids=ids))
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert len([e for e in steps if e.segment == 1]) <= 2
    assert len([e for e in steps if e.segment == 0 and not e.forced]) <= 2
    assert any(isinstance(e, SegmentEvent) and e.segment == 1 for e in events)


# ------------------------------------------------------------------ scripts the model cannot read
UNREADABLE = {
    "Arabic": "مرحبا بالعالم، كيف حالك اليوم؟",
    "Hebrew": "שלום עולם, מה שלומך היום?",
    "Chinese": "你好世界，今天你好吗？",
    "Japanese": "こんにちは世界、お元気ですか。",
}


@pytest.mark.parametrize("script", sorted(UNREADABLE))
def test_unreadable_script_is_left_out_and_the_english_translated(en_pt, script):
    """Was: "-. -. -. -. -, -," and the English sentence lost."""
    text = UNREADABLE[script] + " The end."
    fin = _finished(en_pt.decode(text, DecodingOptions()))
    assert fin.text == _finished(en_pt.decode("The end.", DecodingOptions())).text == "O fim."
    notes = en_pt.text_notes(text)
    assert len(notes) == 1 and notes[0].startswith("The model cannot read"), notes
    assert script.split()[0] in notes[0] or "CJK" in notes[0] or "kana" in notes[0]
    assert "<unk>" not in en_pt.source_tokens(text)


def test_unreadable_spans_keep_offsets(en_pt):
    text = "Hello 你好，世界。 world."
    (s, e), = en_pt.unreadable_spans(text)
    assert text[s:e] == "你好，世界。"
    spans = en_pt.source_spans(text)  # the readable words still map onto the text
    words = [text[a:b] for a, b in (sp for sp in spans if sp is not None)]
    assert "Hello" in words and "world" in words


def test_text_in_an_unreadable_script_only_still_warns(en_pt):
    notes = en_pt.text_notes(UNREADABLE["Arabic"])
    assert notes and any("cannot read" in n or "no words the model knows" in n for n in notes)


def test_cli_warns_about_an_unreadable_script(capsys):
    from core.cli import main

    assert main(["translate", UNREADABLE["Hebrew"] + " The end."]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "O fim."
    assert "warning" in err and "cannot read Hebrew" in err


# ------------------------------------------------------------------ long sentences, long lines
@pytest.mark.timeout(60)  # the old split re-read the growing sentence at each full stop: 308 s here
def test_split_is_linear_on_a_line_of_abbreviations():
    from core.tasks.translation_text import MAX_SENTENCE_CHARS, split_text

    pairs, n_cut = split_text("Mr. Smith and Dr. Jones " * 20000)  # 480 kB, no sentence end
    assert n_cut == 1 and len(pairs) > 1000
    assert all(len(p) <= MAX_SENTENCE_CHARS for p, _ in pairs)
    assert all(p.endswith(("Smith", "Jones", "Mr.", "Dr.", "and")) for p, _ in pairs)  # cut at spaces


def test_long_sentence_is_cut_at_a_clause_mark_and_said(en_pt):
    from core.tasks.translation_text import MAX_SENTENCE_CHARS, cap_sentence

    clause = "the old man walked slowly along the river with his dog"
    sentence = ", ".join([clause] * 20) + "."
    parts = cap_sentence(sentence)
    assert len(parts) > 1 and all(len(p) <= MAX_SENTENCE_CHARS for p in parts)
    assert all(p.endswith(",") for p in parts[:-1])  # each cut right after a comma
    assert " ".join(parts) == sentence
    assert cap_sentence("x" * 1000) == ["x" * MAX_SENTENCE_CHARS] * 2 + ["x" * 200]  # no space: hard cut
    notes = en_pt.text_notes(sentence)
    assert any(f"longer than {MAX_SENTENCE_CHARS} characters and cut" in n for n in notes), notes
    assert all(len(c.text) <= MAX_SENTENCE_CHARS for c in en_pt.chunks(sentence))


# ------------------------------------------------------------------ the CLI streams
def one_mb_line() -> str:
    """1 MB of English on one line (~18,000 sentences), as issue 19 §3 tried."""
    from pathlib import Path

    from tests.core.test_marian_tiny import EN

    sample = (Path(__file__).resolve().parents[2] / "assets" / "samples" / "text_en.txt").read_text()
    unit = " ".join((sample + " " + " ".join(EN)).split())
    return " ".join([unit] * (1_000_000 // (len(unit) + 1) + 1))[:1_000_000]


class _FirstWrite(Exception):
    pass


class _StopAtFirstText:
    """A stdout that stops the command at its first non-empty write."""

    def __init__(self):
        self.text = ""

    def write(self, s):
        if s.strip():
            self.text += s
            raise _FirstWrite
        return len(s)

    def flush(self):
        pass


@pytest.mark.timeout(120)  # before: nothing printed until all ~18,000 sentences were translated
def test_cli_prints_the_first_sentence_before_translating_the_rest(en_pt, tmp_path, monkeypatch, capsys):
    """Was: translate --input-file (1 MB, one line) printed nothing for 300 s: every sentence
    was translated before anything was printed."""
    from core.cli import commands as cli
    from core.tasks import translation

    path = tmp_path / "t1mb_oneline.txt"
    text = one_mb_line()
    path.write_text(text, encoding="utf-8")
    n_chunks = len(en_pt.chunks(text))
    assert n_chunks > 15_000
    monkeypatch.setattr(translation.TranslationModel, "load", classmethod(lambda cls, *a, **k: en_pt))
    out = _StopAtFirstText()
    monkeypatch.setattr("sys.stdout", out)
    encoded = en_pt.encode_count
    with pytest.raises(_FirstWrite):
        cli.main(["translate", "--input-file", str(path), "--max-new-tokens", "5", "--progress"])
    assert en_pt.encode_count - encoded <= 1  # one sentence encoded and decoded, then printed
    assert out.text.strip()
    assert capsys.readouterr().err.splitlines()[-1] == f"sentence 1/{n_chunks}"


def test_streamed_sentences_join_to_the_decoded_text(en_pt):
    import io

    from core.cli.translate import stream_translation

    text = "Where is the station?\nIt is closed.  Good morning! 你好。 The end."
    opts = DecodingOptions(max_new_tokens=20)
    out = io.StringIO()
    assert stream_translation(en_pt, text, opts, [], shortlist=False, progress=False, out=out) == 0
    assert out.getvalue() == _finished(en_pt.decode(text, opts)).text + "\n"
    results = list(en_pt.sentences(text, opts))
    assert [r.index for r in results] == list(range(len(results))) and results[0].total == len(results)
