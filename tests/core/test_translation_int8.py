"""int8 translation (issue 22): ``load_bergamot(dtype="int8")``, ``TranslationModel.load(dtype=)``
and ``decoding-explorer translate --dtype int8``. The float32 model is unchanged (the native
engine parity tests cover its outputs); int8 agrees with it on most tokens."""

import json

import pytest
import torch

from core.backends.int8 import Int8Linear
from core.backends.marian_tiny import load_bergamot
from core.cli import main
from core.dtypes import INT8_TASKS

SENTENCES = ["How are you today?", "The children were playing happily in the garden.",
             "Our flight was cancelled because of the storm.", "The new law will take effect on January 1st."]


@pytest.fixture(scope="module")
def pair():
    return load_bergamot("en-pt", shortlist=True), load_bergamot("en-pt", shortlist=True, dtype="int8")


def _greedy(backend, text):
    enc = backend.encode(backend.source_ids(text))
    prompt = backend.decoder_prompt(enc)
    cache, feed, ids = backend.init_cache(enc, 1), torch.tensor([list(prompt.prompt_ids)]), []
    for _ in range(prompt.max_new_tokens):
        out = backend.step(feed, cache, False)
        cache, logits = out.cache, out.logits[0]
        logits[list(prompt.suppress_tokens)] = float("-inf")
        t = int(logits.argmax())
        if t == prompt.eos_token_id:
            break
        ids.append(t)
        feed = torch.tensor([[t]])
    return ids


def test_int8_bergamot_runs_its_big_products_in_int8(pair):
    f32, i8 = pair
    assert (f32.dtype, i8.dtype) == ("float32", "int8")
    assert isinstance(i8.model.enc_layers[0].ffn1.__self__, Int8Linear)
    assert isinstance(i8.model.dec_layers[0].ffn2.__self__, Int8Linear)
    assert not hasattr(f32.model.enc_layers[0].ffn1, "__self__")  # the float32 model keeps F.linear


def test_int8_agrees_with_float32_on_most_tokens(pair):
    f32, i8 = pair
    same = total = 0
    for s in SENTENCES:
        a, b = _greedy(f32, s), _greedy(i8, s)
        same += sum(x == y for x, y in zip(a, b))
        total += len(a)
    assert same / total >= 0.9


def test_int8_full_softmax_logits_are_close_to_float32():
    f32, i8 = load_bergamot("pt-en"), load_bergamot("pt-en", dtype="int8")
    outs = []
    for b in (f32, i8):
        enc = b.encode(b.source_ids("O livro está em cima da mesa."))
        outs.append(b.step(torch.tensor([[1]]), b.init_cache(enc, 1), False).logits)
    assert int(outs[0].argmax()) == int(outs[1].argmax())
    assert float((outs[0] - outs[1]).abs().max()) < 0.1 * float(outs[0].abs().max())


def test_an_unknown_dtype_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="float32, int8"):
        load_bergamot("en-pt", dtype="float16")


def test_translate_is_an_int8_task_and_the_model_says_its_dtype():
    from core.tasks.translation import TranslationModel

    assert "translate" in INT8_TASKS
    model = TranslationModel.load("en-pt", dtype="int8")
    assert model.dtype == "int8" and model.backend.dtype == "int8"
    assert TranslationModel.load("pt-en").dtype == "float32"


def test_translate_cli_takes_dtype_int8_and_the_trace_says_it(capsys):
    code = main(["translate", "How are you today?", "--direction", "en-pt", "--dtype", "int8", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    trace = json.loads(out)
    assert trace["dtype"] == "int8"
    assert trace["text"].strip()
