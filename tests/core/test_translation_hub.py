"""Hub seq2seq translation models (MarianMT, T5, M2M100) through TranslationModel.

Tiny random models built from configs with a fixed seed and real SentencePiece tokenizers
(tests/core/tiny_translation.py), saved with save_pretrained and loaded back by directory,
as a user's downloaded model would be. Reference: transformers' own ``generate()`` on the
same model and the same source ids.
"""

from __future__ import annotations

import pytest
import torch
from transformers.utils import logging as hf_logging

from core.backends.seq2seq_models import T5_DEFAULT_PREFIX, Seq2SeqLoadError
from core.events import Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions
from core.tasks.translation import TranslationModel
from tests.core.conftest import add_eos_bias
from tests.core.tiny_translation import KINDS, build

hf_logging.set_verbosity_error()

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXT = "Hello world, how are you today? The cat sat on the mat."


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    return {k: build(k, root / k) for k in KINDS}


@pytest.fixture(scope="module")
def models(model_dirs):
    return {k: TranslationModel.load(str(d)) for k, d in model_dirs.items()}


def _generate(m: TranslationModel, ids: tuple[int, ...], options: DecodingOptions, forced_bos: bool = False) -> list[int]:
    """transformers generate() on one chunk; the generated ids after our prompt, no EOS."""
    hub = m._hub
    kw = dict(max_new_tokens=options.max_new_tokens, do_sample=False, num_beams=options.num_beams
              if options.strategy == "beam" else 1, length_penalty=options.length_penalty, early_stopping=False,
              repetition_penalty=options.repetition_penalty, no_repeat_ngram_size=options.no_repeat_ngram_size)
    prompt = list(m._prompt_ids)
    if forced_bos:  # M2M100/NLLB as documented: start token, target language forced at step 1
        kw.update(forced_bos_token_id=prompt[1], max_new_tokens=options.max_new_tokens + 1)
        out = hub.model.generate(input_ids=torch.tensor([ids]), **kw)[0].tolist()
    else:
        out = hub.model.generate(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([prompt]), **kw)[0].tolist()
    assert out[: len(prompt)] == prompt
    out = out[len(prompt):]
    return out[: out.index(hub.eos_token_id)] if hub.eos_token_id in out else out


def _ours(m: TranslationModel, text: str, options: DecodingOptions):
    events = list(m.decode(text, options))
    assert isinstance(events[-1], Finished) and sum(isinstance(e, Finished) for e in events) == 1
    return events


CASES = [
    DecodingOptions(strategy="greedy", max_new_tokens=12),
    DecodingOptions(strategy="greedy", max_new_tokens=12, repetition_penalty=1.4),
    DecodingOptions(strategy="greedy", max_new_tokens=12, no_repeat_ngram_size=1),
    DecodingOptions(strategy="beam", num_beams=3, max_new_tokens=10),
    DecodingOptions(strategy="beam", num_beams=4, max_new_tokens=10, no_repeat_ngram_size=1, length_penalty=0.5),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("options", CASES, ids=lambda o: f"{o.strategy}-rp{o.repetition_penalty}-ng{o.no_repeat_ngram_size}")
def test_decode_equals_generate(models, kind, options):
    m = models[kind]
    events = _ours(m, TEXT, options)
    chunks = m.chunks(TEXT)
    assert len(chunks) == 2  # two sentences, decoded one after another in one stream
    steps = [e for e in events if isinstance(e, StepEvent)]
    segments = [e for e in events if isinstance(e, SegmentEvent)]
    assert [s.source_offset for s in segments] == [c.source_offset for c in chunks]
    expected_all = []
    for ci, chunk in enumerate(chunks):
        expected = _generate(m, chunk.ids, options)
        ours = [e.token_id for e in steps if e.segment == ci]
        assert ours == expected
        assert len(expected) >= 5
        if options.no_repeat_ngram_size or options.repetition_penalty != 1.0:
            # random models tend to repeat one token; with a penalty the output varies, so the
            # comparison is not against a constant
            assert len(set(expected)) >= 3
        expected_all += expected
    assert events[-1].token_ids == expected_all
    assert [e.step for e in steps] == list(range(len(steps)))  # one continuous stream


# (output-layer scale, EOS bias) that make these random models end sentences at EOS after
# 0-9 tokens, so that beam search ranks finished hypotheses of different lengths
EOS_BIAS = {"marian": (0.2, 3.0), "t5": (0.03, 4.5), "m2m100": (0.2, 3.0)}


@pytest.fixture(scope="module")
def eos_models(model_dirs):
    out = {}
    for kind, directory in model_dirs.items():
        m = TranslationModel.load(str(directory))
        scale, bias = EOS_BIAS[kind]
        add_eos_bias(m.backend.model, m._hub.eos_token_id, bias, scale)
        out[kind] = m
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_beam_to_eos_equals_generate_and_depends_on_length_penalty(eos_models, kind):
    m = eos_models[kind]
    chunks = m.chunks(TEXT)
    outputs: dict[int, set] = {}
    lengths = set()
    for num_beams in (2, 3, 4):
        for lp in (0.0, 1.0, 2.0):
            options = DecodingOptions(strategy="beam", num_beams=num_beams, length_penalty=lp, max_new_tokens=10)
            events = _ours(m, TEXT, options)
            steps = [e for e in events if isinstance(e, StepEvent)]
            expected_all = []
            for ci, chunk in enumerate(chunks):
                expected = _generate(m, chunk.ids, options)
                assert [e.token_id for e in steps if e.segment == ci] == expected, (num_beams, lp, ci)
                expected_all += expected
                lengths.add(len(expected))
            assert events[-1].token_ids == expected_all
            outputs.setdefault(num_beams, set()).add(tuple(expected_all))
    assert any(len(o) > 1 for o in outputs.values()), f"{kind}: length penalty 0/1/2 never changes the output"
    assert any(n < 10 for n in lengths), f"{kind}: no sentence ended at EOS"


def test_m2m100_forced_bos_equals_generate_forced_bos_token_id(models):
    m = models["m2m100"]
    assert m.target_language == "pt" and m.source_language == "en"
    hub = m._hub
    assert m._prompt_ids == (hub.decoder_start_token_id, hub.tokenizer.get_lang_id("pt"))
    options = DecodingOptions(strategy="greedy", max_new_tokens=12, no_repeat_ngram_size=1)
    chunk = m.chunks("Hello world.")[0]
    assert chunk.ids[0] == hub.tokenizer.get_lang_id("en")  # source language token leads the source
    events = _ours(m, "Hello world.", options)
    assert events[-1].token_ids == _generate(m, chunk.ids, options, forced_bos=True)
    # the forced language token is a prompt: never emitted as a step
    assert all(e.token_id != hub.tokenizer.get_lang_id("pt") for e in events if isinstance(e, StepEvent))


def test_m2m100_target_and_source_language_parameters(model_dirs):
    m = TranslationModel.load(str(model_dirs["m2m100"]), target_language="de", source_language="pt")
    tok = m._hub.tokenizer
    assert m._prompt_ids[-1] == tok.get_lang_id("de")
    assert m.chunks("Olá.")[0].ids[0] == tok.get_lang_id("pt")
    assert m.source_tokens("Olá.")[0] == "__pt__"
    with pytest.raises(ValueError, match="no language 'xx'"):
        TranslationModel.load(str(model_dirs["m2m100"]), target_language="xx")


def test_t5_prefix_default_and_parameter(models, model_dirs):
    m = models["t5"]
    assert m.prefix == T5_DEFAULT_PREFIX == "translate English to German: "
    tok = m._hub.tokenizer
    chunk = m.chunks("Hello world.")[0]
    assert list(chunk.ids) == tok(T5_DEFAULT_PREFIX + "Hello world.").input_ids
    assert m.source_tokens("Hello world.")[:5] == tok.convert_ids_to_tokens(tok(T5_DEFAULT_PREFIX).input_ids[:5])
    other = TranslationModel.load(str(model_dirs["t5"]), prefix="translate English to French: ")
    assert list(other.chunks("Hello world.")[0].ids) == tok("translate English to French: Hello world.").input_ids
    assert other.source_tokens("Hi.")[:4] == ["▁translate", "▁English", "▁to", "▁French"]


def test_marian_starts_from_pad_and_suppresses_it(models):
    m = models["marian"]
    hub = m._hub
    assert m._prompt_ids == (hub.tokenizer.pad_token_id,) == (hub.model.config.decoder_start_token_id,)
    prompt = m.decoder_prompt(m.backend.encode({"input_ids": torch.tensor([m.chunks("Hi.")[0].ids])}))
    assert hub.tokenizer.pad_token_id in prompt.suppress_tokens  # generation_config.bad_words_ids
    assert prompt.eos_token_id == hub.tokenizer.eos_token_id


def test_events_carry_source_token_attention(models):
    m = models["marian"]
    events = _ours(m, TEXT, DecodingOptions(max_new_tokens=5))
    tokens = m.source_tokens(TEXT)
    chunks = m.chunks(TEXT)
    assert tokens[: len(chunks[0].ids)] == m._hub.pieces(list(chunks[0].ids))
    assert tokens[len(chunks[0].ids) - 1] == "</s>"
    for e in events:
        if isinstance(e, StepEvent):
            chunk = chunks[e.segment]
            assert e.source_offset == chunk.source_offset
            assert e.cross_attention.shape == (2, 2, len(chunk.ids))  # (layers, heads, source tokens)
            torch.testing.assert_close(torch.from_numpy(e.cross_attention.sum(-1)), torch.ones(2, 2))


def test_redecode_reuses_encoder_output(models):
    m = models["t5"]
    before = m.encode_count
    list(m.decode("A new sentence here.", DecodingOptions(max_new_tokens=3)))
    assert m.encode_count == before + 1
    list(m.decode("A new sentence here.", DecodingOptions(strategy="beam", num_beams=2, max_new_tokens=3)))
    assert m.encode_count == before + 1


def test_shortlist_and_languages_rejected_where_they_do_not_apply(models, model_dirs):
    with pytest.raises(ValueError, match="shortlist"):
        list(models["marian"].decode("Hi.", DecodingOptions(), shortlist=True))
    with pytest.raises(ValueError, match="one language pair"):
        TranslationModel.load(str(model_dirs["marian"]), target_language="de")
    with pytest.raises(ValueError, match="empty"):
        list(models["marian"].decode("  ", DecodingOptions()))


def test_unreachable_hub_id_says_pass_a_local_directory(monkeypatch, tmp_path):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the environment is read when huggingface_hub is imported: set the constant too, so the
    # load fails at once instead of after the network's retries (23 s)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: nothing to fall back on
    with pytest.raises(Seq2SeqLoadError, match="local directory"):
        TranslationModel.load("Helsinki-NLP/opus-mt-en-de")


def test_bad_names_and_directories(tmp_path):
    with pytest.raises(ValueError, match="unknown translation model"):
        TranslationModel.load("en-fr")
    with pytest.raises(Seq2SeqLoadError, match="not a directory"):
        TranslationModel.load(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(Seq2SeqLoadError, match="not a complete translation model directory"):
        TranslationModel.load(str(tmp_path / "empty"))
