"""Model drafts for speculative decoding (issue 21, H2): the token map between two
vocabularies, the companion's cache, the model draft, the early-exit draft and the
shortlist head.

- ``TokenMap``: whisper tiny.en and base map through the token text (their BPEs differ; the
  special tokens sit one id apart); mismatched tokenizers are refused.
- ``ModelCompanion``: its logits along a path with cut backs equal the companion model's own
  single steps, mapped into the target's vocabulary.
- ``ModelDraft`` / ``EarlyExitDraft``: greedy speculative decoding gives ids identical to
  the target's own greedy run (bundled tiny.en drafting for base on the bundled clip; random
  tiny models from configs whose tokenizers share the text in another id order; early exit
  on tiny random and bundled models).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import PreTrainedTokenizerFast

from core.backends.hf import HFSeq2SeqBackend
from core.speculative.companion import ModelCompanion, TokenMap
from core.speculative.early_exit import EarlyExitDraft
from core.speculative.model_draft import ModelDraft
from core.speculative.shortlist import coverage, frequent_ids, special_ids
from tests.core.conftest import V, tiny_whisper

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


def _t(ids) -> torch.Tensor:
    return torch.tensor([list(ids)], dtype=torch.long)


def permuted_tokenizer(perm: list[int], specials: dict[str, int]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer whose id ``perm[i]`` is the word "w{i}" (special names as in
    ``tests.core.conftest.word_tokenizer``, at their permuted ids)."""
    names = {perm[i]: f"w{i}" for i in range(len(perm))}
    for name, i in specials.items():
        names[perm[i]] = name
    tok = Tokenizer(WordLevel({n: i for i, n in names.items()}, unk_token=names[perm[0]]))
    tok.pre_tokenizer = WhitespaceSplit()
    specials_at = [names[perm[i]] for i in specials.values()]
    return PreTrainedTokenizerFast(tokenizer_object=tok, additional_special_tokens=specials_at)


SPECIALS = {"<|endoftext|>": V - 2, "<|pad|>": V - 1, "<|startoftranscript|>": V - 3}
PERM = list(np.random.default_rng(5).permutation(V))


@pytest.fixture(scope="module")
def tiny_pair():
    """A tiny random Whisper target and a smaller-seeded draft whose tokenizer has the same
    words at permuted ids (the map must go through the text). The draft is the target with
    noise on its weights, so that it agrees often but not always."""
    target = tiny_whisper(seed=2)
    draft = tiny_whisper(seed=2)
    with torch.no_grad():
        g = torch.Generator().manual_seed(7)
        for p in draft.model.parameters():
            p.add_(0.15 * p.std() * torch.randn(p.shape, generator=g))
        # the draft's vocabulary in the permuted order: output rows and input embeddings
        inv = torch.tensor(PERM)  # draft id PERM[i] is target id i
        order = torch.argsort(inv)  # draft id j is target id order[j]
        head = draft.model.proj_out.weight
        head.copy_(head[order])
        emb = draft.model.model.decoder.embed_tokens.weight
        emb.copy_(emb[order])
    draft.tokenizer = permuted_tokenizer([int(x) for x in PERM], SPECIALS)
    tb = HFSeq2SeqBackend(target.model, target.tokenizer, "target")
    db = HFSeq2SeqBackend(draft.model, draft.tokenizer, "draft")
    return target, tb, draft, db


# ------------------------------------------------------------------ the token map

def test_token_map_goes_through_the_text(tiny_pair):
    target, tb, draft, db = tiny_pair
    tm = TokenMap(tb, db)
    assert not tm.identity and tm.shared == V
    for i in (0, 5, 17, V - 3, V - 2):
        j = tm.companion_ids(i)[0]
        assert j == PERM[i] and tm.target_id(j) == i
        assert db.token_text(j) == tb.token_text(i)
    row = torch.arange(V, dtype=torch.float32)[None]  # companion logit j = j
    mapped = tm.to_target(row)
    assert mapped.shape == (1, V) and torch.equal(mapped[0], torch.tensor(PERM, dtype=torch.float32))


def test_token_map_refuses_mismatched_vocabularies(tiny_pair):
    target, tb, _, _ = tiny_pair
    other = permuted_tokenizer(list(range(V)), {})
    other_words = Tokenizer(WordLevel({f"v{i}": i for i in range(V)}, unk_token="v0"))
    other_words.pre_tokenizer = WhitespaceSplit()
    foreign = HFSeq2SeqBackend(tiny_whisper(seed=3).model, PreTrainedTokenizerFast(tokenizer_object=other_words),
                               "foreign")
    with pytest.raises(ValueError, match="do not share their tokenizer"):
        TokenMap(tb, foreign)
    assert TokenMap(tb, HFSeq2SeqBackend(tiny_whisper(seed=3).model, other, "same words")).shared >= V - 3


def test_tiny_en_and_base_map_through_text(whisper_base, whisper_tiny_en):
    base, tiny = whisper_base.backend, whisper_tiny_en.backend
    tm = TokenMap(base, tiny)
    assert not tm.identity
    assert 30_000 < tm.shared < 40_000  # two different BPEs: all common English pieces shared
    # the special tokens map by their text, one id apart
    eot_base = base.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    eot_tiny = tiny.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert (eot_base, eot_tiny) == (50257, 50256) and tm.companion_ids(eot_base) == [eot_tiny]
    for text in ("<|notimestamps|>", "<|0.00|>", "<|en|>"):
        assert tm.companion_ids(base.tokenizer.convert_tokens_to_ids(text)) == [
            tiny.tokenizer.convert_tokens_to_ids(text)]
    # common words: the same piece
    for word in (" the", " country", " And"):
        (i,) = base.tokenize(word)
        assert [tiny.token_text(j) for j in tm.companion_ids(i)] == [word]
    # a base piece tiny.en lacks is fed as tiny.en's own pieces of the same bytes
    lacking = next(i for i in range(300, 50000) if int(tm.t2c[i]) < 0)
    pieces = tm.companion_ids(lacking)
    assert len(pieces) >= 2
    assert "".join(tiny.tokenizer.convert_ids_to_tokens(pieces)) == base.tokenizer.convert_ids_to_tokens(lacking)


# ------------------------------------------------------------------ the companion

def test_companion_follows_the_target_path_with_cut_backs(tiny_pair):
    target, tb, draft, db = tiny_pair
    t_enc = tb.encode(target.inputs)
    d_enc = db.encode(draft.inputs)
    tm = TokenMap(tb, db)
    prompt = list(target.prompt.prompt_ids)
    comp = ModelCompanion(db, d_enc, tm, name="draft")

    def own(path: list[int]) -> torch.Tensor:
        """The draft model's own logits after ``path`` (target ids), one step each, mapped."""
        out = db.step(_t([PERM[i] for i in prompt]), db.init_cache(d_enc, 1), False)
        for i in path:
            out = db.step(_t([PERM[i]]), out.cache, False)
        return tm.to_target(out.logits)

    paths = [[10, 11, 12], [10, 11, 12, 13, 14], [10, 20], [10, 20, 21, 22], [30], [30, 31]]
    for path in paths:
        got = comp.logits(prompt + path, 1)
        torch.testing.assert_close(got, own(path), rtol=1e-4, atol=1e-4)
    # several rows at once
    rows = comp.logits(prompt + [30, 31, 32], 3)
    for k, end in enumerate((1, 2, 3)):
        torch.testing.assert_close(rows[k:k + 1], own([30, 31, 32][:end]), rtol=1e-4, atol=1e-4)
    assert comp.calls <= 2 * len(paths) + 2  # fed incrementally, not from scratch
    del t_enc


def test_companion_uses_its_own_prompt(whisper_base, whisper_tiny_en):
    base, tiny = whisper_base, whisper_tiny_en
    p_base, p_tiny = base.prompt("en", "transcribe"), tiny.prompt("en", "transcribe")
    assert len(p_base.prompt_ids) == 4 and len(p_tiny.prompt_ids) == 2  # English-only: no language/task
    import soundfile as sf

    audio, _ = sf.read(SAMPLE, dtype="float32")
    d_enc = tiny._encode(np.asarray(audio))[0]
    comp = ModelCompanion(tiny.backend, d_enc, TokenMap(base.backend, tiny.backend), name="tiny.en",
                          target_prompt=p_base.prompt_ids, draft_prompt=p_tiny.prompt_ids)
    seq, ends = comp.convert(list(p_base.prompt_ids) + base.backend.tokenize(" And so"))
    assert seq[:2] == list(p_tiny.prompt_ids) and ends[:4] == [1, 1, 1, 1] and len(ends) == 6


# ------------------------------------------------------------------ drafts

def _process(ids, logits):
    return logits


def test_model_draft_proposes_argmax_or_samples_from_q(tiny_pair):
    target, tb, draft, db = tiny_pair
    tm = TokenMap(tb, db)
    prompt = list(target.prompt.prompt_ids)

    def make(**kw):
        comp = ModelCompanion(db, db.encode(draft.inputs), tm, name="draft")
        return ModelDraft(comp, eos_token_id=target.prompt.eos_token_id, **kw)

    d = make()
    ids, q = d.propose(prompt, 4, _process)
    assert d.name == "model:draft" and not d.deterministic
    assert len(ids) == 4 and q.shape == (4, V)
    torch.testing.assert_close(q.sum(-1), torch.ones(4))
    assert all(int(q[k].argmax()) == x for k, x in enumerate(ids))
    # sampling: x ~ q, reproducible from the seed
    a = make(sample=True, seed=3).propose(prompt, 6, _process)
    b = make(sample=True, seed=3).propose(prompt, 6, _process)
    assert a[0] == b[0] and all(float(a[1][k, x]) > 0 for k, x in enumerate(a[0]))
    # a process that allows nothing stops the draft
    none, qn = make().propose(prompt, 3, lambda i, lg: torch.full_like(lg, float("-inf")))
    assert none == [] and qn.shape[0] == 0


def test_early_exit_draft_is_the_lens_of_its_layer(tiny_models):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    encoded = backend.encode(tiny.inputs)
    prompt = list(tiny.prompt.prompt_ids)
    d = EarlyExitDraft(backend, encoded, 1)
    ids, q = d.propose(prompt, 3, _process)
    assert d.name == "early-exit:1" and len(ids) == 3
    # the first drafted token is the argmax of layer 0's lens after the prompt
    out = backend.step(_t(prompt), backend.init_cache(encoded, 1), False, capture_lens=True)
    assert ids[0] == int(out.lens_logits[0, 0].argmax())
    with pytest.raises(ValueError, match="early-exit:3"):
        EarlyExitDraft(backend, encoded, 3)


def test_shortlist_keeps_the_frequent_and_the_special(whisper_tiny_en):
    b = whisper_tiny_en.backend
    ids = frequent_ids(b, 4096, keep=[40000])
    specials = special_ids(b)
    assert min(specials) == 50256 and len(specials) == 1608
    assert set(range(4096)) <= set(ids.tolist()) and specials <= set(ids.tolist()) and 40000 in ids.tolist()
    assert len(ids) == 4096 + 1608 + 1
    words = b.tokenize(" And so my fellow Americans, ask not")
    assert coverage(words, ids) == 7 / 8  # " fellow" is id 5891
    assert coverage(words, frequent_ids(b)) == 1.0  # the default 8192
    with pytest.raises(ValueError):
        frequent_ids(b, 0)


def test_a_shortlist_draft_never_drafts_off_the_list(tiny_models):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    encoded = backend.encode(tiny.inputs)
    head = torch.tensor([3, 7, 11, 40, 41, 42, V - 2])
    d = EarlyExitDraft(backend, encoded, 2, head_ids=head)
    ids, q = d.propose(list(tiny.prompt.prompt_ids), 5, _process)
    assert ids and set(ids) <= set(head.tolist())
    assert float(q[:, [i for i in range(V) if i not in head.tolist()]].sum()) == 0.0


# ------------------------------------------------------------------ through the engine and the tasks

def _ids(events) -> list[int]:
    from core.events import Finished

    assert isinstance(events[-1], Finished)
    return list(events[-1].token_ids)


def _rounds(events) -> list:
    from core.events import SpeculationRound

    return [e for e in events if isinstance(e, SpeculationRound)]


@pytest.mark.parametrize("lean", [True, False])
@pytest.mark.parametrize("draft_tokens", [0, 3])
def test_random_tiny_draft_model_gives_the_target_greedy_ids(tiny_pair, lean, draft_tokens):
    from core.engine import Engine
    from core.options import DecodingOptions

    target, _, draft, db = tiny_pair
    tb = HFSeq2SeqBackend(target.model, target.tokenizer, "target", lean=lean)
    engine = Engine(tb)
    encoded = tb.encode(target.inputs)
    opts = DecodingOptions(max_new_tokens=16, capture_attention=False)
    greedy = _ids(list(engine.run(encoded, target.prompt, opts.with_(strategy="greedy"))))
    comp = ModelCompanion(db, db.encode(draft.inputs), TokenMap(tb, db), name="draft")
    spec = opts.with_(strategy="speculative", draft="model:draft", draft_tokens=draft_tokens)
    events = list(engine.run(encoded, target.prompt, spec, draft=ModelDraft(comp)))
    assert _ids(events) == greedy
    rounds = _rounds(events)
    accepted = sum(r.n_accepted for r in rounds)
    drafted = sum(len(r.drafted) for r in rounds)
    assert 0 < accepted < drafted  # the noisy draft agrees often, not always


@pytest.mark.parametrize("kind,lean,layers", [("whisper", True, (1, 2)), ("whisper", False, (1,)), ("marian", False, (1,))])
def test_early_exit_gives_the_target_greedy_ids(tiny_models, kind, lean, layers):
    from core.engine import Engine
    from core.options import DecodingOptions

    tiny = tiny_models[kind]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind, lean=lean)
    engine = Engine(backend)
    encoded = backend.encode(tiny.inputs)
    opts = DecodingOptions(max_new_tokens=16, capture_attention=False)
    greedy = _ids(list(engine.run(encoded, tiny.prompt, opts.with_(strategy="greedy"))))
    for layer in layers:
        for d in (None, EarlyExitDraft(backend, encoded, layer, head_ids=torch.arange(0, V, 2))):
            spec = opts.with_(strategy="speculative", draft=f"early-exit:{layer}", draft_tokens=2)
            events = list(engine.run(encoded, tiny.prompt, spec, draft=d))
            assert _ids(events) == greedy
            if layer == 2 and d is None:  # all layers: the draft is the model itself
                assert all(r.n_accepted == len(r.drafted) for r in _rounds(events))


def test_bergamot_early_exit_gives_greedy_ids():
    from core.engine import Engine
    from core.backends.marian_tiny import load_bergamot
    from core.options import DecodingOptions

    b = load_bergamot("en-pt")
    encoded = b.encode(b.source_ids("My name is John Smith and I live at 42 Baker Street, John Smith said."))
    engine = Engine(b)
    opts = DecodingOptions(max_new_tokens=60, capture_attention=False)
    greedy = _ids(list(engine.run(encoded, b.decoder_prompt(encoded), opts.with_(strategy="greedy"))))
    events = list(engine.run(encoded, b.decoder_prompt(encoded), opts.with_(strategy="speculative",
                                                                            draft="early-exit:1")))
    assert _ids(events) == greedy and _rounds(events)


@pytest.fixture(scope="module")
def clip() -> np.ndarray:
    import soundfile as sf

    audio, sr = sf.read(SAMPLE, dtype="float32")
    assert sr == 16_000
    return audio


@pytest.fixture(scope="module")
def base_with_tiny(whisper_base, whisper_tiny_en):
    """whisper-base whose second model "tiny.en" is the session's tiny.en (not loaded again)."""
    whisper_base.__dict__.setdefault("_companion_tasks", {})["tiny.en"] = whisper_tiny_en
    return whisper_base


def test_tiny_en_drafting_for_base_gives_base_greedy_ids(base_with_tiny, clip):
    from core.options import DecodingOptions

    opts = DecodingOptions(max_new_tokens=64, capture_attention=False)
    greedy = _ids(list(base_with_tiny.decode(clip, opts.with_(strategy="greedy"), language="en")))
    for draft, alpha in (("model:tiny.en", 0.8), ("model:tiny.en#4096", 0.3)):  # 3 of 24 ids off 4096
        events = list(base_with_tiny.decode(clip, opts.with_(strategy="speculative", draft=draft), language="en"))
        assert _ids(events) == greedy, draft
        rounds = _rounds(events)
        assert rounds and all(r.draft == draft for r in rounds)
        assert sum(r.n_accepted for r in rounds) >= alpha * sum(len(r.drafted) for r in rounds)


def test_a_model_amateur_is_built_by_the_task(base_with_tiny, whisper_tiny_en, clip):
    """``contrastive_amateur="tiny.en"``: the task hands the engine a companion on the same
    window; equal to building it by hand."""
    from core.options import DecodingOptions

    opts = DecodingOptions(max_new_tokens=12, capture_attention=False, contrastive_amateur="tiny.en")
    by_task = _ids(list(base_with_tiny.decode(clip, opts, language="en")))
    sm, tiny = base_with_tiny, whisper_tiny_en
    encoded = sm._encode(clip)[0]
    prompt = sm.prompt("en", "transcribe")
    comp = ModelCompanion(tiny.backend, tiny._encode(clip)[0], TokenMap(sm.backend, tiny.backend), name="tiny.en",
                          target_prompt=prompt.prompt_ids, draft_prompt=tiny.prompt("en", "transcribe").prompt_ids)
    by_hand = _ids(list(sm.engine.run(encoded, prompt, opts, amateur=comp)))
    assert by_task == by_hand and len(by_task) > 3


def test_a_long_form_window_gets_its_companions(base_with_tiny, whisper_tiny_en, clip):
    """``SpeechModel.companions`` (for long-form's own window loop): previous text in the
    target's prompt is mapped to the draft's ``<|startofprev|>`` prompt; the draft gives
    base's greedy ids."""
    from core.options import DecodingOptions

    sm = base_with_tiny
    encoded = sm._encode(clip)[0]
    previous = sm.backend.tokenize(" Hello there.")
    prompt = sm.prompt("en", "transcribe", previous=previous)
    opts = DecodingOptions(max_new_tokens=40, capture_attention=False)
    greedy = _ids(list(sm.engine.run(encoded, prompt, opts.with_(strategy="greedy"))))
    spec = opts.with_(strategy="speculative", draft="model:tiny.en")
    kw = sm.companions(spec, prompt, lambda other: other._encode(clip)[0], language="en")
    assert set(kw) == {"draft"}
    comp = kw["draft"].companion
    tiny = whisper_tiny_en
    sot_prev = tiny._loaded.special.sot_prev
    seq, _ = comp.convert(list(prompt.prompt_ids))
    assert seq[0] == sot_prev and seq[-2:] == list(tiny.prompt("en", "transcribe").prompt_ids)
    assert tiny.backend.decode(seq[1:-2]) == " Hello there."
    events = list(sm.engine.run(encoded, prompt, spec, **kw))
    assert _ids(events) == greedy
    assert sm.companions(opts.with_(strategy="greedy"), prompt, lambda other: None) == {}


def test_a_draft_that_cannot_go_on_proposes_fewer():
    class Full:
        name, target_vocab_size, calls = "full", 5, 0

        def logits(self, ids, n_last=1):
            self.calls += 1
            if self.calls > 2:
                raise ValueError("Whisper's decoder holds at most 448 positions")
            return torch.tensor([[0.0, 1.0, 3.0, 2.0, 0.5]])

    ids, q = ModelDraft(Full()).propose([0], 5, _process)
    assert ids == [2, 2] and q.shape == (2, 5)


def test_ocr_model_draft_through_the_task():
    """The OCR task builds a model draft per text line (a second reader of the same
    characters, its weights perturbed): ids identical to greedy."""
    from PIL import Image, ImageDraw

    from core.backends.ocr_attn import OCRAttnConfig, OCRAttnModel, OCRVocab
    from core.backends.ocr_backend import OCRAttnBackend
    from core.options import DecodingOptions
    from core.tasks.ocr import OCRModel
    from core.tasks.ocr_readers import BundledReader

    def reader(noise: float) -> OCRAttnBackend:
        torch.manual_seed(0)
        cfg = OCRAttnConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)
        model = OCRAttnModel(cfg)
        g = torch.Generator().manual_seed(9)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() > 1:
                    torch.nn.init.normal_(p, std=0.3)
            for p in model.parameters():
                p.add_(noise * torch.randn(p.shape, generator=g))
        return OCRAttnBackend(model.eval(), OCRVocab(cfg.characters), f"reader{noise}")

    img = Image.new("RGB", (400, 200), "white")
    d = ImageDraw.Draw(img)
    for x in range(60, 280, 14):
        d.rectangle([x, 40, x + 6, 40 + (x * 7) % 25], fill=(x * 3) % 90)
    target = OCRModel(BundledReader(reader(0.0)), detector=None, load_s=0.0)
    target.__dict__["_companion_tasks"] = {"noisy": OCRModel(BundledReader(reader(0.02)), detector=None, load_s=0.0)}
    lines = [target._line(0, (50, 30, 290, 70))]
    opts = DecodingOptions(max_new_tokens=12, capture_attention=False)
    greedy = _ids(list(target.decode(img, opts.with_(strategy="greedy"), lines=lines)))
    events = list(target.decode(img, opts.with_(strategy="speculative", draft="model:noisy", draft_tokens=3),
                                lines=lines))
    assert _ids(events) == greedy and _rounds(events)


def test_a_draft_stops_after_a_token_it_is_unsure_of():
    class Fixed:
        name, target_vocab_size = "fixed", 4

        def logits(self, ids, n_last=1):
            return torch.tensor([[1.0, 0.95, 0.9, 0.0]]) if len(ids) >= 3 else torch.tensor([[5.0, 0.0, 0.0, 0.0]])

    assert ModelDraft(Fixed()).propose([0], 4, _process)[0] == [0, 0, 0, 0]
    ids, q = ModelDraft(Fixed(), confidence=0.4).propose([0], 4, _process)
    assert ids == [0, 0, 0] and float(q[2, 0]) < 0.4 < float(q[1, 0])  # the unsure one is proposed, then it stops
    with pytest.raises(ValueError):
        ModelDraft(Fixed(), confidence=1.0)
