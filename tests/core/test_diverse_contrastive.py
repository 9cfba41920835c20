"""Diverse (group) beam search, contrastive search and the decoder hidden states they
need, on tiny random models (tests/core/conftest.py; no downloads).

* backends: ``StepOutput.hidden_states`` is transformers' ``decoder_hidden_states[-1]``
  (HF backend, Whisper's lean and generic paths, Marian, T5), and the tensor the output
  projection is applied to (Bergamot tiny11, the bundled OCR reader), one row per
  hypothesis and one position per token fed;
* ``DiverseBeamSearch`` (Vijayakumar et al. 2016): the Hamming penalty on fabricated
  scores; with penalty 0 every group is ``BeamSearch`` on its own rows; with a penalty
  the groups' first tokens are pushed apart; every hypothesis of every group has the
  probabilities of a teacher-forced forward (the KV cache rows of each group are its
  own); the best finished hypothesis over the groups is returned and reported;
* ``ContrastiveSearch`` (Su et al. 2022): alpha 0 is greedy search, event for event;
  alpha > 0 equals a plain reference written from the paper (full forwards, no cache);
  its StepEvents carry the distribution the token was chosen from; the max_new_tokens
  limit and the decoder's length limit.

The strategies are driven through ``core.engine.Engine`` with ``make_strategy``
monkeypatched to return the instance under test (and once by name, through the options).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import core.engine
from core.backends.hf import HFSeq2SeqBackend
from core.backends.base import DecoderPrompt
from core.engine import Engine
from core.events import BeamEvent, Finished, StepEvent
from core.options import DecodingOptions
from core.strategies.beam import BeamSearch
from core.strategies.contrastive import ContrastiveSearch, degeneration_penalty
from core.strategies.diverse_beam import DiverseBeamSearch
from core.strategies.greedy import GreedySearch
from tests.core.conftest import EOS_BIAS, MAKERS, V, add_eos_bias
from tests.core.reference import assert_same_topk, close, reference_steps, top_k_report

pytestmark = pytest.mark.usefixtures("one_torch_thread")

KINDS = ["whisper", "marian", "t5"]


def _run(monkeypatch, tiny, strategy, *, lean: bool = True, max_new_tokens: int = 16,
         length_penalty: float = 1.0, prompt: DecoderPrompt | None = None) -> list:
    """Every event of an ``Engine.run`` of ``strategy`` on ``tiny``; top-k reports hold the
    whole vocabulary."""
    monkeypatch.setattr(core.engine, "make_strategy", lambda options: strategy)
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind, lean=lean)
    options = DecodingOptions(strategy="greedy", max_new_tokens=max_new_tokens, top_k_report=V,
                              length_penalty=length_penalty)
    events = list(Engine(backend).run(backend.encode(tiny.inputs), prompt or tiny.prompt, options))
    assert isinstance(events[-1], Finished) and sum(isinstance(e, Finished) for e in events) == 1
    return events


def _steps(events) -> list[StepEvent]:
    return [e for e in events if isinstance(e, StepEvent)]


def _eos_model(kind: str, seed: int = 0):
    tiny = MAKERS[kind](seed)
    scale, bias = EOS_BIAS[kind]
    add_eos_bias(tiny.model, tiny.prompt.eos_token_id, bias, scale)
    return tiny


# --------------------------------------------------------------------------- hidden states


@pytest.mark.parametrize("kind,lean", [("whisper", True), ("whisper", False), ("marian", False), ("t5", False)])
def test_hf_hidden_states_are_transformers_last_decoder_layer(tiny_models, kind, lean):
    """Two rows continued with different tokens: each step's hidden states, float32
    (batch, new_len, d_model), equal ``decoder_hidden_states[-1]`` of an uncached forward
    of that row's whole sequence at the positions just fed (the prompt's every position)."""
    tiny = tiny_models[kind]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, kind, lean=lean)
    d_model = tiny.model.config.d_model
    cache = backend.init_cache(backend.encode(tiny.inputs), 2)
    rows = [list(tiny.prompt.prompt_ids), list(tiny.prompt.prompt_ids)]
    new = torch.tensor(rows)
    for t in range(5):
        out = backend.step(new, cache, output_attentions=False)
        cache = out.cache
        h = out.hidden_states
        assert h.dtype == torch.float32 and h.shape == (2, new.shape[1], d_model)
        for r, seq in enumerate(rows):
            with torch.inference_mode():
                ref = tiny.model(**tiny.inputs, decoder_input_ids=torch.tensor([seq]), output_hidden_states=True,
                                 use_cache=False).decoder_hidden_states[-1][0, -new.shape[1]:]
            torch.testing.assert_close(h[r], ref.float(), rtol=1e-4, atol=1e-4)
        nxt = [10 + t, 20 + t]
        for seq, tok in zip(rows, nxt):
            seq.append(tok)
        new = torch.tensor([[tok] for tok in nxt])


def test_marian_tiny_hidden_states_feed_the_output_projection():
    """Bergamot tiny11: one hidden state per position processed (the implicit start
    included), (batch, positions, 256); the last one projected gives the logits; a
    multi-token step equals the same tokens fed one at a time."""
    from core.backends.marian_tiny import START_ID, load_bergamot

    backend = load_bergamot("en-pt")
    encoded = backend.encode({"input_ids": torch.tensor([backend.source_ids("The cat sat on the mat.")])})
    ids = torch.tensor([[START_ID, 50, 60, 70]] * 2)
    out = backend.step(ids, backend.init_cache(encoded, 2), False)
    h = out.hidden_states
    assert h.dtype == torch.float32 and h.shape == (2, 4, 256)
    torch.testing.assert_close(backend.model.output_logits(h[:, -1]), out.logits)
    cache = backend.init_cache(encoded, 2)
    for j in range(4):
        one = backend.step(ids[:, j : j + 1], cache, False)
        assert one.hidden_states.shape == (2, 1, 256)
        torch.testing.assert_close(one.hidden_states[:, 0], h[:, j], rtol=1e-5, atol=1e-5)
        cache = one.cache
    # ids without the virtual start: the start position is processed first and counted
    assert backend.step(ids[:, 1:], backend.init_cache(encoded, 2), False).hidden_states.shape == (2, 4, 256)
    # the shortlist view projects the same hidden states onto its rows
    short = backend.with_shortlist(True)
    out_s = short.step(ids, short.init_cache(encoded, 2), False)
    torch.testing.assert_close(out_s.hidden_states, h)


def test_ocr_attn_hidden_states_feed_the_output_projection():
    """The bundled OCR reader: hidden states (batch, new_len, d_model) after the final
    norm; ``lm_head`` of the last gives the logits; the model's own ``decode_step``
    (training, greedy_ids) still gives ``lm_head`` of every position."""
    from core.backends.ocr_attn import OCRAttnConfig, OCRAttnModel, OCRVocab
    from core.backends.ocr_backend import OCRAttnBackend

    torch.manual_seed(0)
    cfg = OCRAttnConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)
    model = OCRAttnModel(cfg).eval()
    backend = OCRAttnBackend(model, OCRVocab(cfg.characters), "tiny")
    encoded = backend.encode({"pixel_values": torch.randn(1, 1, 64, 80, generator=torch.Generator().manual_seed(0))})
    ids = torch.tensor([[OCRVocab.BOS, 5, 6], [OCRVocab.BOS, 7, 8]])
    out = backend.step(ids, backend.init_cache(encoded, 2), True)
    h = out.hidden_states
    assert h.dtype == torch.float32 and h.shape == (2, 3, 32)
    with torch.inference_mode():
        torch.testing.assert_close(model.lm_head(h[:, -1]), out.logits)
        logits, _, _ = model.decode_step(ids, backend.init_cache(encoded, 2))
        torch.testing.assert_close(logits, model.lm_head(h))
    nxt = backend.step(torch.tensor([[9], [10]]), out.cache, False)
    assert nxt.hidden_states.shape == (2, 1, 32)


# --------------------------------------------------------------------------- diverse beam search


@pytest.mark.parametrize("args,match", [
    ((4, 3, 0.5), "multiple of num_beam_groups"),
    ((2, 4, 0.5), "multiple of num_beam_groups"),
    ((4, 0, 0.5), "num_beam_groups must be >= 1"),
    ((0, 1, 0.5), "num_beams must be >= 1"),
    ((4, 2, -0.1), "diversity_penalty"),
    ((4, 2, float("nan")), "diversity_penalty"),
    ((4, 2, float("inf")), "diversity_penalty"),
])
def test_diverse_beam_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        DiverseBeamSearch(*args)


def _fabricated_step(strategy, logits: list[float], eos: int) -> tuple:
    """Start ``strategy`` on a one-token prompt and give every row the same scores
    (log_softmax of ``logits``); returns (update, log-probabilities)."""
    n = strategy.batch_size
    input_ids = strategy.start([7], eos, 10)
    logp = torch.log_softmax(torch.tensor([logits] * n), dim=-1)
    probs = logp.exp()
    return strategy.update(input_ids, logp, probs, probs), logp[0]


def test_hamming_penalty_counts_earlier_groups_choices():
    """Groups are decoded in order; a group's log-probabilities lose
    ``penalty * (times the token was chosen by earlier groups at this step)``."""
    logits = [3.0, 2.5, 2.0, 1.0, 0.0, -5.0]  # token 5 is EOS, never near the top
    # 3 groups of one beam, penalty 0.3 < the 0.5 gap: group 1 still picks token 0; group 2
    # sees token 0 chosen twice (3.0 - 0.6 < 2.5) and picks token 1
    u, logp = _fabricated_step(DiverseBeamSearch(3, 3, 0.3), logits, eos=5)
    assert u.input_ids[:, -1].tolist() == [0, 0, 1]
    assert [s for _, s in u.beams[0]] == pytest.approx([float(logp[0]), float(logp[0]) - 0.3, float(logp[1])])
    # 2 groups of two beams, penalty 0.6: group 0 takes {0, 1}; group 1 sees 0 -> 2.4,
    # 1 -> 1.9, 2 -> 2.0 and takes {0, 2}; each group's rows come from its own first row
    u, logp = _fabricated_step(DiverseBeamSearch(4, 2, 0.6), logits, eos=5)
    assert u.input_ids[:, -1].tolist() == [0, 1, 0, 2]
    assert u.beam_idx.tolist() == [0, 0, 2, 2]
    assert [s for _, s in u.beams[0]] == pytest.approx(
        [float(logp[0]), float(logp[1]), float(logp[0]) - 0.6, float(logp[2])])
    # a second step: rows are reordered within their own group only
    probs = torch.softmax(torch.randn(4, 6, generator=torch.Generator().manual_seed(0)), dim=-1)
    u2 = DiverseBeamSearch(4, 2, 0.6)
    first = _fabricated_step(u2, logits, eos=5)[0]
    second = u2.update(first.input_ids, probs.log(), probs, probs)
    assert set(second.beam_idx[:2].tolist()) <= {0, 1} and set(second.beam_idx[2:].tolist()) <= {2, 3}
    # no penalty: every group repeats group 0
    u, _ = _fabricated_step(DiverseBeamSearch(4, 2, 0.0), logits, eos=5)
    assert u.input_ids[:, -1].tolist() == [0, 1, 0, 1]


def _same(ours: list, ref: list) -> None:
    """Same token ids; same numbers within float32 noise (the batches differ)."""
    assert [[x for x in item if isinstance(x, list)] for item in ours] == \
        [[x for x in item if isinstance(x, list)] for item in ref]
    assert [x for item in ours for x in item if not isinstance(x, list)] == \
        pytest.approx([x for item in ref for x in item if not isinstance(x, list)], rel=1e-4, abs=1e-4)


def _hyps(beam: BeamSearch) -> tuple[list, list]:
    """(running, finished with ranking score) of one BeamSearch."""
    running = [[list(h.tokens), h.log_prob] for h in beam.running]
    finished = [[ids, score, lp] for score, ids, lp in beam.ranked_finished()]
    return running, finished


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("num_beams,groups", [(4, 2), (6, 3), (4, 4)])
@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_diverse_beam_without_penalty_is_beam_search_per_group(monkeypatch, tiny_eos_models, kind, num_beams,
                                                               groups, length_penalty):
    """diversity_penalty 0: every group holds exactly the hypotheses and scores of
    ``BeamSearch(num_beams // groups)`` run alone, at every step and at the end."""
    tiny = tiny_eos_models[kind]
    size = num_beams // groups
    diverse = DiverseBeamSearch(num_beams, groups, 0.0, length_penalty)
    single = BeamSearch(size, length_penalty)
    ev_d = _run(monkeypatch, tiny, diverse, length_penalty=length_penalty)
    ev_s = _run(monkeypatch, tiny, single, length_penalty=length_penalty)
    assert ev_d[-1].token_ids == ev_s[-1].token_ids and ev_d[-1].reason == ev_s[-1].reason
    for beam in diverse.groups:
        running, finished = _hyps(beam)
        ref_running, ref_finished = _hyps(single)
        _same(running, ref_running)
        _same(finished, ref_finished)
    beams_d = [e for e in ev_d if isinstance(e, BeamEvent)]
    beams_s = [e for e in ev_s if isinstance(e, BeamEvent)]
    assert len(beams_d) == len(beams_s)
    for d, s in zip(beams_d, beams_s):
        _same([[h.token_ids, h.score] for h in d.beams], [[h.token_ids, h.score] for h in s.beams] * groups)
        # finished: best first over the groups, so each of the single search's appears `groups` times in a row
        _same([[h.token_ids, h.score] for h in d.finished],
              [[h.token_ids, h.score] for h in s.finished for _ in range(groups)])
    _same([[[e.token_id], e.prob, e.raw_prob] for e in _steps(ev_d)], [[[e.token_id], e.prob, e.raw_prob] for e in _steps(ev_s)])


@pytest.mark.parametrize("kind", KINDS)
def test_diversity_penalty_separates_the_groups_first_tokens(monkeypatch, tiny_models, kind):
    """Two groups of two beams: without a penalty group 1's first tokens are group 0's
    (the two best); with a large one they are the 3rd and 4th best of the first step."""
    tiny = tiny_models[kind]
    ref = reference_steps(tiny.model, tiny.inputs, tiny.prompt, [], DecodingOptions(strategy="beam"), with_eos=True)[0]
    ranked = torch.topk(ref.beam_logp, 4).indices.tolist()
    assert tiny.prompt.eos_token_id not in ranked  # all four run on
    first = {}
    for penalty in (0.0, 100.0):
        events = _run(monkeypatch, tiny, DiverseBeamSearch(4, 2, penalty), max_new_tokens=4)
        step0 = [e for e in events if isinstance(e, BeamEvent)][0]
        first[penalty] = [h.token_ids[0] for h in step0.beams]
    assert first[0.0] == ranked[:2] + ranked[:2]
    assert first[100.0] == ranked[:2] + ranked[2:4]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("num_beams,groups,penalty", [(6, 3, 1.0), (4, 4, 0.5)])
def test_every_group_follows_its_own_rows(monkeypatch, tiny_eos_models, kind, num_beams, groups, penalty):
    """With a penalty the groups differ; every hypothesis of every group (running and
    finished) has, token by token, the raw probabilities of a teacher-forced forward of
    its own sequence: each group's KV-cache rows were reordered within the group. A
    group that is done early waits (Whisper's groups end at different steps) and the run
    ends when every group is done."""
    tiny = tiny_eos_models[kind]
    diverse = DiverseBeamSearch(num_beams, groups, penalty)
    events = _run(monkeypatch, tiny, diverse)
    assert all(diverse.group_done)
    group_steps = [beam.t for beam in diverse.groups]
    assert sum(isinstance(e, BeamEvent) for e in events) == max(group_steps)
    if kind == "whisper":
        assert len(set(group_steps)) > 1, group_steps
    options = DecodingOptions(strategy="beam", num_beams=num_beams)
    eos = tiny.prompt.eos_token_id
    seen = set()
    for beam in diverse.groups:
        for h in list(beam.running) + [h for h, f in zip(beam.finished, beam.is_finished[0].tolist()) if f]:
            tokens = [r.token_id for r in h.records]
            ids = tokens[:-1] if tokens and tokens[-1] == eos else tokens
            refs = reference_steps(tiny.model, tiny.inputs, tiny.prompt, ids, options, with_eos=len(ids) < len(tokens))
            for rec, ref in zip(h.records, refs):
                assert close(rec.raw_prob, float(ref.raw[rec.token_id])), (tokens, rec)
            seen.add(tuple(tokens))
    assert len(seen) > num_beams // groups  # the groups did not all coincide


CROSS_GROUP_WINNERS = [  # (kind, num_beams, groups, penalty, length_penalty): the best is not group 0's
    ("whisper", 4, 4, 0.5, 0.0), ("whisper", 4, 4, 2.0, 1.0), ("marian", 4, 4, 0.5, 1.0), ("t5", 4, 2, 0.5, 1.0),
]


@pytest.mark.parametrize("kind,num_beams,groups,penalty,length_penalty",
                         CROSS_GROUP_WINNERS + [("marian", 6, 3, 0.5, 1.0), ("whisper", 6, 2, 2.0, 1.0)])
def test_best_finished_over_groups_is_returned(monkeypatch, tiny_eos_models, kind, num_beams, groups, penalty,
                                               length_penalty):
    """The result is the finished hypothesis of best length-penalised score over all the
    groups; the last BeamEvent lists it first; its StepEvents carry the distributions of
    its own rows (those of a teacher-forced forward of the result)."""
    tiny = tiny_eos_models[kind]
    diverse = DiverseBeamSearch(num_beams, groups, penalty, length_penalty)
    events = _run(monkeypatch, tiny, diverse, length_penalty=length_penalty)
    fin = events[-1]
    best = [beam.ranked_finished()[0] for beam in diverse.groups]
    winner = max(range(groups), key=lambda g: best[g][0])
    assert fin.token_ids == best[winner][1]
    assert best[winner][0] > max(s for g, (s, _, _) in enumerate(best) if g != winner)  # no tie
    if (kind, num_beams, groups, penalty, length_penalty) in CROSS_GROUP_WINNERS:
        assert winner > 0
    last = [e for e in events if isinstance(e, BeamEvent)][-1]
    assert last.finished[0].token_ids == fin.token_ids
    steps = _steps(events)
    assert [e.token_id for e in steps] == fin.token_ids
    refs = reference_steps(tiny.model, tiny.inputs, tiny.prompt, fin.token_ids,
                           DecodingOptions(strategy="beam", num_beams=num_beams))
    for e, ref in zip(steps, refs):
        assert close(e.raw_prob, float(ref.raw[e.token_id]))
        assert_same_topk(e.raw_topk, top_k_report(ref.raw, V), f"step {e.step} raw top-k")


# --------------------------------------------------------------------------- contrastive search


@pytest.mark.parametrize("args,match", [
    ((0, 0.5), "top_k"), ((-1, 0.5), "top_k"), ((4, -0.1), "penalty_alpha"), ((4, 1.5), "penalty_alpha"),
    ((4, float("nan")), "penalty_alpha"),
])
def test_contrastive_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        ContrastiveSearch(*args)


def test_contrastive_needs_hidden_states_and_k_within_the_vocabulary():
    probs = torch.full((4, 6), 1 / 6)
    s = ContrastiveSearch(4, 0.5)
    ids = s.start([1], 5, 8)
    with pytest.raises(ValueError, match="hidden states"):
        s.update(ids, probs.log(), probs, probs, hidden_states=None)
    s = ContrastiveSearch(8, 0.5)
    ids = s.start([1], 5, 8)
    with pytest.raises(ValueError, match="exceeds the vocabulary"):
        s.update(ids, torch.zeros(8, 6), torch.full((8, 6), 1 / 6), torch.full((8, 6), 1 / 6),
                 hidden_states=torch.ones(8, 1, 4))


def test_degeneration_penalty_is_max_cosine():
    g = torch.Generator().manual_seed(0)
    cand, ctx = torch.randn(3, 8, generator=g), torch.randn(5, 8, generator=g)
    expected = torch.tensor([max(float(F.cosine_similarity(c, h, dim=0)) for h in ctx) for c in cand])
    torch.testing.assert_close(degeneration_penalty(cand, ctx), expected)
    assert torch.isfinite(degeneration_penalty(torch.zeros(1, 8), ctx)).all()


def reference_contrastive(tiny, top_k: int, alpha: float, max_new_tokens: int) -> tuple[list[int], str]:
    """Contrastive search written from the paper, without a KV cache: at every step one
    full forward of the context gives p(. | x_<t) (the prompt's hard rules applied) and
    the last-layer hidden states h_j of every earlier position; one full forward of
    context + v per top-k candidate v gives h_v; the chosen v maximises
    (1 - alpha) p(v) - alpha max_j cos(h_v, h_j). Returns (tokens, "eos" | "max_tokens")."""
    model, prompt = tiny.model, tiny.prompt

    def forward(ids):
        with torch.no_grad():
            return model(**tiny.inputs, decoder_input_ids=torch.tensor([ids]), output_hidden_states=True,
                         use_cache=False)

    ids, out = list(prompt.prompt_ids), []
    for t in range(max_new_tokens):
        o = forward(ids)
        logits = o.logits[0, -1].clone()
        logits[list(prompt.suppress_tokens)] = float("-inf")
        if t == 0:
            logits[list(prompt.begin_suppress_tokens)] = float("-inf")
        probs = torch.softmax(logits, dim=-1)
        context = o.decoder_hidden_states[-1][0]  # (len(ids), d_model)
        best, best_score = None, float("-inf")
        top_p, top_v = torch.topk(probs, top_k)
        for p, v in zip(top_p.tolist(), top_v.tolist()):
            h_v = forward(ids + [v]).decoder_hidden_states[-1][0, -1]
            similarity = max(float(F.cosine_similarity(h_v, h_j, dim=0)) for h_j in context)
            score = (1 - alpha) * p - alpha * similarity
            if score > best_score:
                best, best_score = v, score
        if best == prompt.eos_token_id:
            return out, "eos"
        ids.append(best)
        out.append(best)
    return out, "max_tokens"


def _same_events(ours: list[StepEvent], ref: list[StepEvent]) -> None:
    assert [(e.step, e.token_id) for e in ours] == [(e.step, e.token_id) for e in ref]
    for a, b in zip(ours, ref):
        assert a.prob == pytest.approx(b.prob, rel=1e-4) and a.raw_prob == pytest.approx(b.raw_prob, rel=1e-4)
        assert a.entropy == pytest.approx(b.entropy, rel=1e-4, abs=1e-6)
        assert [t.id for t in a.topk[:5]] == [t.id for t in b.topk[:5]]
        assert [t.prob for t in a.topk] == pytest.approx([t.prob for t in b.topk], rel=1e-3, abs=1e-6)
        if b.cross_attention is not None:
            assert a.cross_attention.shape == b.cross_attention.shape
            np.testing.assert_allclose(a.cross_attention, b.cross_attention, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("eos_biased", [False, True])
def test_contrastive_alpha_zero_is_greedy(monkeypatch, tiny_models, tiny_eos_models, kind, eos_biased):
    """penalty_alpha 0: the same tokens, reason and StepEvents (step, probabilities, top-k,
    entropy, attention) as greedy search: each token is reported from the distribution
    (step and row) it was chosen from."""
    tiny = (tiny_eos_models if eos_biased else tiny_models)[kind]
    greedy = _run(monkeypatch, tiny, GreedySearch())
    contrastive = _run(monkeypatch, tiny, ContrastiveSearch(4, 0.0))
    assert (contrastive[-1].token_ids, contrastive[-1].reason) == (greedy[-1].token_ids, greedy[-1].reason)
    _same_events(_steps(contrastive), _steps(greedy))


CONTRASTIVE_CASES = [  # (kind, seed, EOS-biased, lean, top_k, alpha): each differs from greedy search
    ("whisper", 0, False, True, 4, 0.6),
    ("whisper", 1, False, False, 4, 0.3),
    ("whisper", 0, True, True, 4, 0.3),
    ("whisper", 2, False, True, 3, 0.6),
    ("marian", 0, False, False, 4, 0.6),
    ("marian", 1, False, False, 5, 0.3),
    ("marian", 0, True, False, 4, 0.6),
    ("t5", 2, False, False, 4, 0.6),
    ("t5", 1, True, False, 4, 0.6),
]


@pytest.mark.parametrize("kind,seed,eos_biased,lean,top_k,alpha", CONTRASTIVE_CASES)
def test_contrastive_matches_the_paper(monkeypatch, kind, seed, eos_biased, lean, top_k, alpha):
    """alpha > 0: token for token the reference's choice, and each StepEvent (step n) holds
    the distribution the token was chosen from: the teacher-forced distribution after the
    first n tokens (probability, raw probability, full top-k)."""
    tiny = _eos_model(kind, seed) if eos_biased else MAKERS[kind](seed)
    events = _run(monkeypatch, tiny, ContrastiveSearch(top_k, alpha), lean=lean)
    fin = events[-1]
    expected = reference_contrastive(tiny, top_k, alpha, 16)
    assert (fin.token_ids, fin.reason) == expected
    greedy = _run(monkeypatch, tiny, GreedySearch(), lean=lean)[-1]
    assert fin.token_ids != greedy.token_ids  # the degeneration penalty changed the text
    steps = _steps(events)
    assert [e.token_id for e in steps] == fin.token_ids and [e.step for e in steps] == list(range(len(steps)))
    refs = reference_steps(tiny.model, tiny.inputs, tiny.prompt, fin.token_ids, DecodingOptions(strategy="greedy"))
    for e, ref in zip(steps, refs):
        assert close(e.prob, float(ref.processed[e.token_id])) and close(e.raw_prob, float(ref.raw[e.token_id]))
        assert_same_topk(e.topk, top_k_report(ref.processed, V), f"step {e.step} top-k")


def test_contrastive_stops_at_max_new_tokens_within_the_decoder_length(monkeypatch, tiny_models):
    """The max_new_tokens-th token ends the run without feeding another position: with the
    prompt's limit at the decoder's 64 positions (Whisper's lean decoder raises beyond
    them), contrastive search gives exactly that many tokens."""
    tiny = tiny_models["whisper"]
    limit = tiny.model.config.max_target_positions - len(tiny.prompt.prompt_ids)
    prompt = dataclasses.replace(tiny.prompt, max_new_tokens=limit)
    fin = _run(monkeypatch, tiny, ContrastiveSearch(3, 0.5), max_new_tokens=200, prompt=prompt)[-1]
    assert (len(fin.token_ids), fin.reason) == (limit, "max_tokens")
    fin = _run(monkeypatch, tiny, ContrastiveSearch(3, 0.5), max_new_tokens=5)[-1]
    assert (len(fin.token_ids), fin.reason) == (5, "max_tokens")


def test_contrastive_never_picks_a_removed_token():
    """A candidate of probability 0 (a suppressed token that entered the top-k because
    fewer than k tokens remain) is not chosen, however dissimilar its hidden state."""
    s = ContrastiveSearch(3, 0.9)
    ids = s.start([1], 5, 8)
    probs = torch.tensor([[0.0, 0.7, 0.3, 0.0, 0.0, 0.0]] * 3)
    ctx = torch.tensor([[[1.0, 0.0]]] * 3)
    u = s.update(ids, probs.log(), probs, probs, hidden_states=ctx)
    candidates = u.input_ids[:, -1].tolist()
    assert candidates[:2] == [1, 2] and candidates[2] not in (1, 2)  # the third has probability 0
    zero_row = 2
    h = torch.tensor([[[1.0, 0.0]]] * 3)  # the candidates 1 and 2 repeat the context ...
    h[zero_row, 0] = torch.tensor([-1.0, 0.0])  # ... the removed one is its opposite
    u = s.update(u.input_ids, probs.log(), probs, probs, hidden_states=h)
    assert u.emitted.token_id == 1 and math.isclose(u.emitted.prob, 0.7, rel_tol=1e-6)


def test_make_strategy_builds_both_from_options(monkeypatch, tiny_eos_models):
    """The options' names and fields reach the strategies; a run by name equals the run
    of the instance."""
    from core.strategies import make_strategy

    d = make_strategy(DecodingOptions(strategy="diverse_beam", num_beams=6, num_beam_groups=3, diversity_penalty=0.7,
                                      length_penalty=2.0).validate())
    assert isinstance(d, DiverseBeamSearch)
    assert (d.batch_size, d.num_groups, d.diversity_penalty, d.length_penalty) == (6, 3, 0.7, 2.0)
    c = make_strategy(DecodingOptions(strategy="contrastive", top_k=5, penalty_alpha=0.4).validate())
    assert isinstance(c, ContrastiveSearch) and (c.batch_size, c.alpha) == (5, 0.4)
    tiny = tiny_eos_models["marian"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "marian")
    options = DecodingOptions(strategy="contrastive", top_k=4, penalty_alpha=0.6, max_new_tokens=16).validate()
    by_name = list(Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, options))[-1]
    assert by_name.token_ids == _run(monkeypatch, tiny, ContrastiveSearch(4, 0.6))[-1].token_ids
