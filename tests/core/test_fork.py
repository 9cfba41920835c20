"""Forced tokens and forks (issue 12, core): ``Engine.run(forced_ids=...)``, KV-cache reuse
(``reuse_cache``, ``Backend.truncate_cache``) and the tasks' ``fork``.

Invariants: forcing a run's own greedy tokens reproduces it (ids and probabilities); a
run that reuses a cache equals the same run without reuse; forced tokens + a strategy
equals that strategy started from prompt + forced tokens (the forced tokens are prompt
for beam search's length penalty and contrastive search's context).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import BeamEvent, Finished, SegmentEvent, StepEvent
from core.options import DecodingOptions
from tests.core.conftest import V

pytestmark = pytest.mark.usefixtures("one_torch_thread")

KINDS = [("whisper", True), ("whisper", False), ("marian", False), ("t5", False)]

STRATEGIES = {
    "greedy": dict(strategy="greedy"),
    "sample": dict(strategy="sample", seed=3, temperature=1.5, top_k=20),
    "mirostat": dict(strategy="mirostat", seed=3, mirostat_tau=3.0),
    "beam": dict(strategy="beam", num_beams=3, length_penalty=1.0),
    "diverse_beam": dict(strategy="diverse_beam", num_beams=4, num_beam_groups=2, diversity_penalty=0.7),
    "contrastive": dict(strategy="contrastive", top_k=4, penalty_alpha=0.6),
}


def _options(max_new_tokens: int = 16, **kw) -> DecodingOptions:
    return DecodingOptions(max_new_tokens=max_new_tokens, top_k_report=V, **kw)


def _backend(tiny, lean: bool) -> HFSeq2SeqBackend:
    return HFSeq2SeqBackend(tiny.model, tiny.tokenizer, tiny.kind, lean=lean)


def _run(engine: Engine, encoded, prompt, options, **kw) -> tuple[list[StepEvent], list[BeamEvent], Finished]:
    events = list(engine.run(encoded, prompt, options, **kw))
    assert isinstance(events[-1], Finished) and sum(isinstance(e, Finished) for e in events) == 1
    steps = [e for e in events if isinstance(e, StepEvent)]
    beams = [e for e in events if isinstance(e, BeamEvent)]
    return steps, beams, events[-1]


def _same_step(a: StepEvent, b: StepEvent, *, forced: bool | None = None, tol: float = 1e-5) -> None:
    """Same token at the same step with the same distributions (to float tolerance)."""
    assert (a.step, a.token_id, a.segment) == (b.step, b.token_id, b.segment)
    assert a.prob == pytest.approx(b.prob, abs=tol) and a.raw_prob == pytest.approx(b.raw_prob, abs=tol)
    assert a.entropy == pytest.approx(b.entropy, abs=1e-4) and a.rank == b.rank
    assert [t.id for t in a.topk[:5]] == [t.id for t in b.topk[:5]]
    assert [t.prob for t in a.topk] == pytest.approx([t.prob for t in b.topk], abs=tol)
    assert [t.prob for t in a.raw_topk] == pytest.approx([t.prob for t in b.raw_topk], abs=tol)
    if forced is not None:
        assert b.forced is forced


def _same_beams(a: list[BeamEvent], b: list[BeamEvent]) -> None:
    assert [e.step for e in a] == [e.step for e in b]
    for x, y in zip(a, b):
        assert [h.token_ids for h in x.beams] == [h.token_ids for h in y.beams]
        assert [h.token_ids for h in x.finished] == [h.token_ids for h in y.finished]
        assert [h.score for h in x.beams] == pytest.approx([h.score for h in y.beams], abs=1e-4)


# --------------------------------------------------------------------------- own tokens


@pytest.mark.parametrize("kind,lean", KINDS)
@pytest.mark.parametrize("n_forced", [1, 2, 5, 16])
@pytest.mark.parametrize("reuse", [False, True])
def test_forcing_own_greedy_tokens_reproduces_greedy(tiny_models, kind, lean, n_forced, reuse):
    """Forced = the first n tokens greedy chose: the same StepEvents (those forced are
    marked), the same result; with reuse, the forced tokens the kept cache holds are not
    reported again and the rest is the same."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    engine = Engine(backend)
    encoded = backend.encode(tiny.inputs)
    options = _options()
    steps, _, fin = _run(engine, encoded, tiny.prompt, options)
    assert len(fin.token_ids) == 16  # the plain tiny models never choose EOS
    forced = fin.token_ids[:n_forced]
    f_steps, _, f_fin = _run(engine, encoded, tiny.prompt, options, forced_ids=forced, reuse_cache=reuse)
    assert f_fin.token_ids == fin.token_ids and f_fin.text == fin.text and f_fin.reason == fin.reason
    p = len(tiny.prompt.prompt_ids)
    held = p + len(fin.token_ids) - 1  # the kept cache: prompt + every token but the last (never fed)
    reused = min(p + n_forced, held) - 1 if reuse else 0
    assert f_fin.stats.reused_tokens == reused
    skipped = max(0, reused + 1 - p)  # forced tokens not reported again
    assert len(f_steps) == len(steps) - skipped
    for i, (a, b) in enumerate(zip(steps[skipped:], f_steps)):
        _same_step(a, b, forced=i + skipped < n_forced)
    assert 0 < f_fin.stats.first_token_s <= f_fin.stats.decode_s + 1.0


@pytest.mark.parametrize("kind,lean", KINDS)
def test_forcing_every_own_token_ends_where_greedy_ended(tiny_eos_models, kind, lean):
    """On the EOS-biased models greedy ends by EOS: forcing all its tokens, the model
    chooses EOS next, as it did."""
    tiny = tiny_eos_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    options = _options(min_new_tokens=3)  # counts the forced tokens as generated, as the original run's
    steps, _, fin = _run(Engine(backend), encoded, tiny.prompt, options)
    assert fin.reason == "eos" and fin.token_ids
    f_steps, _, f_fin = _run(Engine(backend), encoded, tiny.prompt, options, forced_ids=fin.token_ids)
    assert f_fin.token_ids == fin.token_ids and f_fin.reason == fin.reason
    assert all(e.forced for e in f_steps) and len(f_steps) == len(steps)
    for a, b in zip(steps, f_steps):
        _same_step(a, b)


# --------------------------------------------------------------------------- another token


@pytest.mark.parametrize("kind,lean", KINDS)
@pytest.mark.parametrize("at", [0, 4])
def test_forcing_another_token_changes_the_continuation(tiny_models, kind, lean, at):
    """At step ``at`` the runner-up is forced: the tokens before it are the original's,
    its StepEvent has the probabilities the original step gave it, and the continuation
    is greedy's from the new context (checked against a run whose prompt holds it, for
    the models without begin-suppressed tokens) and not the original's."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    engine = Engine(backend)
    encoded = backend.encode(tiny.inputs)
    options = _options()
    steps, _, fin = _run(engine, encoded, tiny.prompt, options)
    alt = steps[at].topk[1]
    forced = fin.token_ids[:at] + [alt.id]
    f_steps, _, f_fin = _run(engine, encoded, tiny.prompt, options, forced_ids=forced)
    first = f_steps[0]
    assert first.step == at and first.forced and first.token_id == alt.id
    assert first.prob == pytest.approx(alt.prob, abs=1e-5)
    assert f_fin.token_ids[: at + 1] == forced and f_fin.token_ids != fin.token_ids
    assert not any(e.forced for e in f_steps[1:])
    assert f_fin.token_ids[at + 1:] != fin.token_ids[at + 1:]
    if not tiny.prompt.begin_suppress_tokens:
        longer = dataclasses.replace(tiny.prompt, prompt_ids=tiny.prompt.prompt_ids + tuple(forced))
        ref = _run(Engine(backend), encoded, longer, _options(16 - len(forced)))[2]
        assert f_fin.token_ids[len(forced):] == ref.token_ids


# --------------------------------------------------------------------------- every strategy


@pytest.mark.parametrize("kind,lean", KINDS)
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_reuse_equals_no_reuse(tiny_eos_models, kind, lean, name):
    """A fork (original tokens up to step 3, then the runner-up) with any strategy: with
    the kept cache of the greedy run it forks, the events after the reused part equal
    those of the same fork without reuse (another engine), BeamEvents included."""
    tiny = tiny_eos_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    engine = Engine(backend)
    steps, _, fin = _run(engine, encoded, tiny.prompt, _options(strategy="greedy", min_new_tokens=6))
    at = 3
    forced = fin.token_ids[:at] + [steps[at].topk[1].id]
    options = _options(**STRATEGIES[name])
    r_steps, r_beams, r_fin = _run(engine, encoded, tiny.prompt, options, forced_ids=forced)
    n_steps, n_beams, n_fin = _run(Engine(backend), encoded, tiny.prompt, options, forced_ids=forced)
    p = len(tiny.prompt.prompt_ids)
    assert r_fin.stats.reused_tokens == p + at - 1 and n_fin.stats.reused_tokens == 0
    assert r_fin.token_ids == n_fin.token_ids and r_fin.reason == n_fin.reason
    assert r_fin.token_ids[: at + 1] == forced
    assert len(n_steps) == len(r_steps) + at  # the forced tokens the cache held are not repeated
    for a, b in zip(n_steps[at:], r_steps):
        _same_step(a, b)
    assert [e.forced for e in n_steps] == [True] * (at + 1) + [False] * (len(n_steps) - at - 1)
    assert [e.step for e in n_steps] == list(range(len(n_steps)))
    _same_beams(n_beams, r_beams)


@pytest.mark.parametrize("kind", ["marian", "t5"])
@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("n_forced", [1, 3])
def test_forced_then_strategy_equals_strategy_on_the_longer_prompt(tiny_eos_models, kind, name, n_forced):
    """Forced tokens count as prompt for the strategy (beam search's length penalty,
    contrastive search's context, the samplers' streams): its tokens, probabilities and
    beam scores equal a run whose prompt holds the forced tokens (on models without
    position-dependent hard rules, and with no processor that counts generated tokens)."""
    tiny = tiny_eos_models[kind]
    backend = _backend(tiny, False)
    encoded = backend.encode(tiny.inputs)
    forced = [17, 29, 41][:n_forced]
    options = _options(**STRATEGIES[name])
    f_steps, f_beams, f_fin = _run(Engine(backend), encoded, tiny.prompt, options, forced_ids=forced)
    longer = dataclasses.replace(tiny.prompt, prompt_ids=tiny.prompt.prompt_ids + tuple(forced))
    l_steps, l_beams, l_fin = _run(Engine(backend), encoded, longer, _options(16 - n_forced, **STRATEGIES[name]))
    assert f_fin.token_ids == forced + l_fin.token_ids and f_fin.reason == l_fin.reason
    assert [e.token_id for e in f_steps[:n_forced]] == forced and all(e.forced for e in f_steps[:n_forced])
    for a, b in zip(l_steps, f_steps[n_forced:]):
        # the longer prompt is fed at once, the forced tokens one by one: float rounding differs
        _same_step(dataclasses.replace(a, step=a.step + n_forced), b, forced=False, tol=2e-4)
    assert len(f_beams) == len(l_beams)
    for a, b in zip(l_beams, f_beams):
        assert b.step == a.step + n_forced
        assert [forced + h.token_ids for h in a.beams] == [h.token_ids for h in b.beams]
        assert [forced + h.token_ids for h in a.finished] == [h.token_ids for h in b.finished]
        assert [h.score for h in a.beams] == pytest.approx([h.score for h in b.beams], abs=1e-4)


def test_forced_tokens_count_against_max_new_tokens(tiny_models):
    tiny = tiny_models["marian"]
    backend = _backend(tiny, False)
    encoded = backend.encode(tiny.inputs)
    forced = [11, 12, 13, 14, 15]
    for max_new, expect in [(3, forced[:3]), (5, forced)]:
        for name in ("greedy", "beam", "contrastive"):
            steps, beams, fin = _run(Engine(backend), encoded, tiny.prompt, _options(max_new, **STRATEGIES[name]),
                                     forced_ids=forced)
            assert fin.token_ids == expect and fin.reason == "max_tokens" and not beams
            assert [e.token_id for e in steps] == expect and all(e.forced for e in steps)
    _, _, fin = _run(Engine(backend), encoded, tiny.prompt, _options(7), forced_ids=forced)
    assert fin.token_ids[:5] == forced and len(fin.token_ids) == 7


def test_a_forced_token_the_rules_remove_keeps_its_zero_probability(tiny_models):
    """Whisper's suppressed token 7 forced: raw and processed probability 0, and the run
    goes on from it."""
    tiny = tiny_models["whisper"]
    backend = _backend(tiny, True)
    steps, _, fin = _run(Engine(backend), backend.encode(tiny.inputs), tiny.prompt, _options(6), forced_ids=[7])
    assert steps[0].token_id == 7 and steps[0].forced and steps[0].prob == 0.0 and steps[0].raw_prob == 0.0
    assert fin.token_ids[0] == 7 and len(fin.token_ids) == 6


@pytest.mark.parametrize("bad,match", [
    ([3, 0], "end-of-sequence"),  # marian's EOS is 0
    ([-1], "outside the vocabulary"),
    ([V], "outside the vocabulary"),
    ([2.5], "integer"),
    ([True], "integer"),
])
def test_bad_forced_ids_raise(tiny_models, bad, match):
    tiny = tiny_models["marian"]
    backend = _backend(tiny, False)
    with pytest.raises(ValueError, match=match):
        list(Engine(backend).run(backend.encode(tiny.inputs), tiny.prompt, _options(), forced_ids=bad))


# --------------------------------------------------------------------------- when reuse happens


def test_reuse_needs_the_same_encoder_output_prompt_and_flag(tiny_models):
    tiny = tiny_models["whisper"]
    backend = _backend(tiny, True)
    engine = Engine(backend)
    encoded = backend.encode(tiny.inputs)
    _, _, fin = _run(engine, encoded, tiny.prompt, _options())
    forced = fin.token_ids[:6]
    # another encoder output object (same numbers): no reuse
    other = backend.encode(tiny.inputs)
    assert _run(engine, other, tiny.prompt, _options(), forced_ids=forced)[2].stats.reused_tokens == 0
    # reuse_cache=False: no reuse, and the kept cache is left for later
    assert _run(engine, encoded, tiny.prompt, _options(), forced_ids=forced, reuse_cache=False)[2].stats.reused_tokens == 0
    # another prompt (a different task token): no reuse
    changed = dataclasses.replace(tiny.prompt, prompt_ids=tiny.prompt.prompt_ids[:2] + (11,))
    assert _run(engine, encoded, changed, _options(), forced_ids=forced)[2].stats.reused_tokens == 0
    # beam search without forced tokens starts at batch 3: no reuse, and it keeps nothing
    _, _, fin = _run(engine, encoded, tiny.prompt, _options())  # kept: prompt + fin.token_ids
    assert _run(engine, encoded, tiny.prompt, _options(num_beams=3, strategy="beam"))[2].stats.reused_tokens == 0
    again = _run(engine, encoded, tiny.prompt, _options(), forced_ids=fin.token_ids[:6])[2]
    assert again.stats.reused_tokens == 3 + 6 - 1 and again.token_ids == fin.token_ids
    # a run that took the cache and went on to beams keeps none: the next one re-runs everything
    _run(engine, encoded, tiny.prompt, _options(num_beams=3, strategy="beam"), forced_ids=fin.token_ids[:2])
    assert _run(engine, encoded, tiny.prompt, _options(), forced_ids=forced)[2].stats.reused_tokens == 0


def test_each_encoder_output_keeps_its_own_cache(tiny_models):
    """Segments: the engine keeps one cache per encoder output (up to ``kept_caches``)."""
    tiny = tiny_models["whisper"]
    backend = _backend(tiny, True)
    engine = Engine(backend, kept_caches=2)
    encs = [backend.encode(tiny.inputs) for _ in range(3)]
    ids = [_run(engine, e, tiny.prompt, _options())[2].token_ids for e in encs]
    assert len(engine.kept) == 2 and id(encs[0]) not in engine.kept
    assert _run(engine, encs[1], tiny.prompt, _options(), forced_ids=ids[1][:4])[2].stats.reused_tokens == 6
    assert _run(engine, encs[2], tiny.prompt, _options(), forced_ids=ids[2][:4])[2].stats.reused_tokens == 6
    assert _run(engine, encs[0], tiny.prompt, _options(), forced_ids=ids[0][:4])[2].stats.reused_tokens == 0
    assert list(engine.kept) == [id(encs[2]), id(encs[0])]
    assert Engine(backend, kept_caches=0).kept_caches == 0


def test_a_backend_without_truncate_cache_re_runs_the_prefix(tiny_models):
    class NoTruncate:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            if name == "truncate_cache":
                raise AttributeError(name)
            return getattr(self.inner, name)

    tiny = tiny_models["t5"]
    backend = NoTruncate(_backend(tiny, False))
    engine = Engine(backend)
    encoded = backend.encode(tiny.inputs)
    steps, _, fin = _run(engine, encoded, tiny.prompt, _options())
    assert not engine.kept
    f_steps, _, f_fin = _run(engine, encoded, tiny.prompt, _options(), forced_ids=fin.token_ids[:5])
    assert f_fin.stats.reused_tokens == 0 and f_fin.token_ids == fin.token_ids and len(f_steps) == len(steps)


@pytest.mark.parametrize("kind,lean", KINDS)
def test_a_cancelled_run_keeps_a_cache_that_reuses_exactly(tiny_models, kind, lean):
    """A run cancelled after 5 steps keeps what it fed; a fork continuing from it equals
    the uncancelled run."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    encoded = backend.encode(tiny.inputs)
    steps, _, fin = _run(Engine(backend), encoded, tiny.prompt, _options())
    engine = Engine(backend)
    polls = iter([False] * 5 + [True])
    _, _, cut = _run(engine, encoded, tiny.prompt, _options(), cancel=lambda: next(polls))
    assert cut.cancelled and cut.token_ids == fin.token_ids[:5]
    f_steps, _, f_fin = _run(engine, encoded, tiny.prompt, _options(), forced_ids=fin.token_ids[:8])
    p = len(tiny.prompt.prompt_ids)
    # 5 steps fed the prompt and tokens 0-3 (token 4 was chosen, never fed): all but the
    # last of them are reused, and the first event is forced token 4
    assert f_fin.stats.reused_tokens == p + 3
    assert f_fin.token_ids == fin.token_ids and f_steps[0].step == 4 and len(f_steps) == len(steps) - 4
    for a, b in zip(steps[4:], f_steps):
        _same_step(a, b)


# --------------------------------------------------------------------------- backends


def _fresh_vs_truncated(backend, encoded, ids: list[int], keep: int, junk: list[int]) -> None:
    """Feed ``ids`` one by one; truncate to ``keep`` positions and feed ``junk`` (a
    branch that overwrites those positions); truncate to ``keep`` again and feed the rest
    of ``ids``: the logits, cross-attention and hidden states equal the first pass's."""
    fresh, cache = [], backend.init_cache(encoded, 1)
    for tok in ids:
        out = backend.step(torch.tensor([[tok]]), cache, True)
        fresh.append(out)
        cache = out.cache
    cache = backend.truncate_cache(cache, keep)
    for tok in junk:
        cache = backend.step(torch.tensor([[tok]]), cache, True).cache
    cache = backend.truncate_cache(cache, keep)
    for j in range(keep, len(ids)):
        out = backend.step(torch.tensor([[ids[j]]]), cache, True)
        torch.testing.assert_close(out.logits, fresh[j].logits, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(out.cross_attention, fresh[j].cross_attention, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(out.hidden_states[:, -1], fresh[j].hidden_states[:, -1], rtol=1e-4, atol=1e-4)
        cache = out.cache
    with pytest.raises(ValueError, match="truncate"):
        backend.truncate_cache(cache, len(ids) + 1)


def _ocr_tiny():
    from core.backends.ocr_attn import OCRAttnConfig, OCRAttnModel, OCRVocab
    from core.backends.ocr_backend import OCRAttnBackend

    torch.manual_seed(0)
    cfg = OCRAttnConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)
    backend = OCRAttnBackend(OCRAttnModel(cfg).eval(), OCRVocab(cfg.characters), "tiny")
    encoded = backend.encode({"pixel_values": torch.randn(1, 1, 64, 80, generator=torch.Generator().manual_seed(0))})
    return backend, encoded, [OCRVocab.BOS, 5, 6, 7, 8, 9, 10]


def _bergamot():
    from core.backends.marian_tiny import START_ID, load_bergamot

    backend = load_bergamot("en-pt")
    encoded = backend.encode({"input_ids": torch.tensor([backend.source_ids("The cat sat on the mat.")])})
    return backend, encoded, [START_ID, 50, 60, 70, 80, 90, 100]


@pytest.mark.parametrize("which", ["whisper-lean", "whisper", "marian", "t5", "bergamot", "ocr"])
@pytest.mark.parametrize("keep", [0, 1, 4])
def test_truncate_cache_goes_back_exactly(tiny_models, which, keep):
    if which == "bergamot":
        backend, encoded, ids = _bergamot()
    elif which == "ocr":
        backend, encoded, ids = _ocr_tiny()
    else:
        kind = which.split("-")[0]
        tiny = tiny_models[kind]
        backend = _backend(tiny, which.endswith("lean"))
        encoded = backend.encode(tiny.inputs)
        ids = [tiny.prompt.prompt_ids[0], 20, 21, 22, 23, 24, 25]
    _fresh_vs_truncated(backend, encoded, ids, keep, junk=[30, 31, 32])


def test_bergamot_reordered_cache_cannot_be_truncated():
    backend, encoded, ids = _bergamot()
    out = backend.step(torch.tensor([ids[:3]]), backend.init_cache(encoded, 1), False)
    assert len(out.cache.history) == out.cache.position == 3
    with pytest.raises(ValueError, match="reordered"):
        backend.truncate_cache(backend.reorder_cache(out.cache, torch.tensor([0, 0])), 2)


@pytest.mark.parametrize("kind,lean", KINDS)
def test_the_kept_cache_holds_every_fed_position(tiny_models, kind, lean):
    """After a greedy run the kept ids are prompt + every token fed, and the kept hidden
    states (what a contrastive fork's context starts from) are those of a teacher-forced
    pass over them."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    engine = Engine(backend)
    encoded = backend.encode(tiny.inputs)
    fin = _run(engine, encoded, tiny.prompt, _options(8))[2]
    kept = engine.kept[id(encoded)]
    assert kept.ids.tolist() == list(tiny.prompt.prompt_ids) + fin.token_ids[:-1]
    hidden = torch.cat(kept.hidden, dim=0)
    ref = backend.step(kept.ids[None], backend.init_cache(encoded, 1), False).hidden_states[0]
    assert hidden.shape == ref.shape == (len(kept.ids), tiny.model.config.d_model)
    torch.testing.assert_close(hidden, ref, rtol=1e-3, atol=1e-3)  # one pass vs step by step


@pytest.mark.parametrize("kind,lean", KINDS)
@pytest.mark.parametrize("name", ["beam", "contrastive"])
def test_a_run_cancelled_after_its_cache_was_reordered_keeps_nothing(tiny_models, kind, lean, name):
    """Forced tokens then beams: cancelled right after the hand-over step (the cache was
    just expanded to the beams), the run keeps no cache, so the next fork re-runs."""
    tiny = tiny_models[kind]
    backend = _backend(tiny, lean)
    engine = Engine(backend)
    encoded = backend.encode(tiny.inputs)
    fin = _run(engine, encoded, tiny.prompt, _options())[2]
    polls = iter([False, True])  # the kept cache holds both forced tokens: the first step is the hand-over
    cut = _run(engine, encoded, tiny.prompt, _options(**STRATEGIES[name]), forced_ids=fin.token_ids[:2],
               cancel=lambda: next(polls))[2]
    assert cut.cancelled and cut.stats.reused_tokens == len(tiny.prompt.prompt_ids) + 1
    assert id(encoded) not in engine.kept
    again = _run(engine, encoded, tiny.prompt, _options(), forced_ids=fin.token_ids[:3])[2]
    assert again.stats.reused_tokens == 0 and again.token_ids == fin.token_ids


# --------------------------------------------------------------------------- tasks


def _check_task_fork(events: list, fork) -> None:
    """For every segment of a decoded task run: forking it with its own tokens up to the
    middle reproduces its StepEvents (numbered as in the run, those the kept cache held
    not repeated) and its tokens; forcing the runner-up in the middle changes them."""
    steps = [e for e in events if isinstance(e, StepEvent)]
    segments = [e for e in events if isinstance(e, SegmentEvent)]
    assert len(segments) >= 2
    for seg in segments:
        own = [e for e in steps if e.segment == seg.segment]
        assert len(own) >= 3, "a segment too short to fork in the middle"
        ids, offset, at = [e.token_id for e in own], own[0].step, len(own) // 2
        out = list(fork(segment=seg.segment, forced_ids=ids[: at + 1], step_offset=offset))
        assert out[0] == seg and isinstance(out[-1], Finished)
        f_steps = [e for e in out if isinstance(e, StepEvent)]
        fin = out[-1]
        assert fin.token_ids == ids and fin.stats.reused_tokens > 0 and fin.stats.first_token_s > 0
        assert f_steps and f_steps[-1].step == own[-1].step
        for a, b in zip(own[len(own) - len(f_steps):], f_steps):
            _same_step(a, b)
        alt = own[at].topk[1].id
        out = list(fork(segment=seg.segment, forced_ids=ids[:at] + [alt], step_offset=offset))
        first = next(e for e in out if isinstance(e, StepEvent))
        assert first.step == offset + at and first.token_id == alt and first.forced
        assert out[-1].token_ids[: at + 1] == ids[:at] + [alt] and out[-1].token_ids != ids


@pytest.fixture(scope="module")
def bergamot_model(translation_en_pt):
    return translation_en_pt  # loaded once per session


def test_translation_fork_reproduces_each_sentence(bergamot_model):
    text = "The weather is nice today. Where is the train station? I bought three apples."
    options = DecodingOptions(max_new_tokens=40, top_k_report=5)
    events = list(bergamot_model.decode(text, options))
    _check_task_fork(events, lambda **kw: bergamot_model.fork(text, options, **kw))
    with pytest.raises(ValueError, match="segment 3 does not exist"):
        list(bergamot_model.fork(text, options, segment=3, forced_ids=[5], step_offset=0))


def test_translation_prefix_forces_the_first_sentence(bergamot_model):
    text = "The weather is nice today. Where is the train station?"
    options = DecodingOptions(max_new_tokens=40, top_k_report=5)
    fin = list(bergamot_model.decode(text, options))[-1]
    prefix = bergamot_model.prefix_ids("O tempo")
    events = list(bergamot_model.decode(text, options, prefix_ids=prefix))
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.token_id for e in steps[: len(prefix)]] == prefix and all(e.forced for e in steps[: len(prefix)])
    assert not any(e.forced for e in steps[len(prefix):])
    assert events[-1].text.startswith("O tempo")
    # the second sentence is decoded as before
    assert events[-1].text.split("? ")[0].split(". ")[-1] == fin.text.split("? ")[0].split(". ")[-1]


def test_ocr_fork_reproduces_each_line():
    from PIL import Image, ImageDraw

    from core.backends.ocr_attn import OCRAttnConfig, OCRAttnModel, OCRVocab
    from core.backends.ocr_backend import OCRAttnBackend
    from core.tasks.ocr import OCRModel
    from core.tasks.ocr_readers import BundledReader

    torch.manual_seed(0)
    cfg = OCRAttnConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)
    net = OCRAttnModel(cfg)
    for p in net.parameters():  # larger weights: a random decoder then varies its output
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.3)
    model = OCRModel(BundledReader(OCRAttnBackend(net.eval(), OCRVocab(cfg.characters), "tiny")), None, 0.0)
    img = Image.new("RGB", (400, 200), "white")
    d = ImageDraw.Draw(img)
    for x in range(50, 280, 14):
        d.rectangle([x, 40, x + 6, 66], fill=(x * 7) % 80)
        d.rectangle([x + 10, 125, x + 15, 148], fill=(x * 3) % 80)
    lines = [model._line(0, (50, 30, 290, 70)), model._line(1, (60, 120, 240, 150))]
    options = DecodingOptions(max_new_tokens=12, top_k_report=5)
    events = list(model.decode(img, options, lines=lines))
    _check_task_fork(events, lambda **kw: model.fork(img, options, lines=lines, **kw))
