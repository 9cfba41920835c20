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
