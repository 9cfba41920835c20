"""A fake speech model that yields synthetic events (no torch), for widget and tab tests."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
import threading
import time

import numpy as np

from core.events import (
    BeamEvent, BeamNode, BeamRowReport, Finished, Hypothesis, RunStats, SegmentEvent, StageReport, StepEvent, TokenProb,
)
from core.options import SAMPLING_STRATEGIES, WARPER_STAGES

WORDS = [" The", " quick", " brown", " fox", " jump", "s", " over", " the", " lazy", " dog", "."]
VOCAB = {w: i + 100 for i, w in enumerate(dict.fromkeys(WORDS + [" cat", " box", " red", "!"]))}


#: the raw rank of the chosen token at step i (cycled): mostly the model's favourite, sometimes not
RANKS = (1, 1, 2, 1, 12, 1, 1, 4, 130, 1, 1001)


#: the fake end-of-sequence token of beam runs
EOS_ID, EOS_TEXT = 2, "</s>"
#: the alternatives every beam row offers besides its own word (fixed processed log-probabilities)
BEAM_ALTERNATIVES = ((" cat", -1.0), (" box", -1.3), (" red", -1.6), ("!", -1.9))


def fake_beam_events(words: list[str], num_beams: int = 2, *, step_offset: int = 0, segment: int = 0,
                     n_frames: int = 50, early_eos_step: int | None = 3, length_penalty: float = 1.0
                     ) -> list[BeamEvent]:
    """A beam search over a made-up distribution whose output is ``words``, as the engine
    reports it: one BeamEvent per step with the step's 2 x beams candidate ``BeamNode``s
    (the root, node 0, first), one ``BeamRowReport`` per row (top-k, averaged attention
    peaked at column 3 x step + row) and the ``best`` node so far.

    Row 0 (the best beam) continues with the next word (log p -0.1) and finally EOS (-0.05);
    every row also offers ``BEAM_ALTERNATIVES`` (0.2 worse per row below the first). At
    ``early_eos_step`` the second row may end with EOS (log p -0.2): a finished node that
    is ``best`` until the output's EOS beats it. Candidates are ranked by cumulative score:
    the first ``num_beams`` non-EOS ones stay alive, an EOS among the first ``num_beams``
    finishes, the rest are pruned. The last event's ``best`` is the EOS after ``words``.
    """
    ids = itertools.count(1)
    root = BeamNode(0, None, step_offset - 1, 1, "", 0.0, 0.0, 0.0, "alive", 0)
    running = [root]  # row r extends running[r]
    finished: list[BeamNode] = []
    events = []
    n = len(words)
    for t in range(n + 1):
        step = step_offset + t
        cands, rows = [], []
        for r, parent in enumerate(running):
            offers = [(EOS_TEXT, EOS_ID, -0.05)] if (r == 0 and t == n) else []
            if r == 0 and t < n:
                offers.append((words[t], VOCAB.get(words[t], 1), -0.1))
            if r == 1 and t == early_eos_step:
                offers.append((EOS_TEXT, EOS_ID, -0.2))
            offers += [(w, VOCAB[w], lp - 0.2 * r) for w, lp in BEAM_ALTERNATIVES if w != (words[t] if t < n else "")]
            for text, tid, lp in offers:
                cands.append((parent.score + lp, r, parent, text, tid, lp))
            att = np.full(n_frames, 0.1 / n_frames, np.float32)
            att[min(n_frames - 1, 3 * t + r)] += 0.9
            top = sorted(offers, key=lambda o: -o[2])
            rows.append(BeamRowReport(row=r, topk=[TokenProb(tid, text, float(np.exp(lp))) for text, tid, lp in top],
                                      entropy=0.5 + 0.1 * r, attention=att))
        cands.sort(key=lambda c: -c[0])
        nodes = [root] if t == 0 else []
        alive = []
        for k, (score, r, parent, text, tid, lp) in enumerate(cands[: 2 * num_beams]):
            eos = tid == EOS_ID
            if eos and k < num_beams:
                status = "finished"
            elif not eos and len(alive) < num_beams:
                status = "alive"
            else:
                status = "pruned"
            norm = score / (t + 1) ** length_penalty
            node = BeamNode(next(ids), parent.id, step, tid, text, lp, score, norm, status, r, 0, eos)
            nodes.append(node)
            if status == "alive":
                alive.append(node)
            elif status == "finished":
                finished.append(node)
        best = max(finished, key=lambda nd: nd.normalized) if finished else alive[0]
        hyps = [Hypothesis([], "", nd.score) for nd in alive]
        events.append(BeamEvent(step=step, beams=hyps, segment=segment, nodes=nodes, rows=rows, best=best.id))
        running = alive
        if t == n or not running:
            break
    return events


def fake_chain(options) -> list[tuple[str, float]]:
    """The (stage, value) pairs the real chain would run for ``options``, in ``sampler_order``:
    the repetition penalty for every strategy, temperature / top-k / top-p / min-p when sampling
    (the stages the fake model knows; the others are left out)."""
    values = {
        "repetition_penalty": (options.repetition_penalty, 1.0),
        "temperature": (options.temperature, 1.0),
        "top_k": (options.top_k, 0),
        "top_p": (options.top_p, 1.0),
        "min_p": (options.min_p, 0.0),
    }
    chain = []
    for name in options.sampler_order:
        if name not in values or name in options.disabled_stages:
            continue
        if name in WARPER_STAGES and options.strategy not in SAMPLING_STRATEGIES:
            continue
        value, off = values[name]
        if value != off:
            chain.append((name, float(value)))
    return chain


def apply_stage(name: str, value: float, p: np.ndarray) -> np.ndarray:
    """One fake stage over a small distribution ``p`` (renormalised; removed tokens get 0).
    The repetition penalty hits the second candidate (a token "already said")."""
    q = p.copy()
    if name == "repetition_penalty":
        q[1] /= value ** 2
    elif name == "temperature":
        q = np.where(q > 0, q ** (1.0 / value), 0.0)
    elif name == "top_k":
        order = np.argsort(-q, kind="stable")
        q[order[int(value):]] = 0.0
    elif name == "top_p":
        order = np.argsort(-q / q.sum(), kind="stable")
        cum = np.cumsum(q[order] / q.sum())
        keep = int(np.searchsorted(cum, value - 1e-12)) + 1
        q[order[keep:]] = 0.0
    elif name == "min_p":
        q[q < value * q.max()] = 0.0
    return q / q.sum()


def chain_report(raw: np.ndarray, chain) -> tuple[tuple[StageReport, ...], np.ndarray]:
    """Run ``chain`` ((name, value) pairs) over ``raw``: the StageReports (kept, mass, probs of
    every candidate) and the final distribution."""
    reports = []
    p = raw
    for name, value in chain:
        q = apply_stage(name, value, p)
        kept = q > 0
        reports.append(StageReport(name=name, kept=int(kept.sum()), mass=float(p[kept].sum()),
                                   probs=q.astype(np.float32)))
        p = q
    return tuple(reports), p


def make_step(step: int, text: str, n_frames: int = 50, layers: int = 2, heads: int = 3, offset: int = 0,
              prob: float = 0.8, seed: int = 0, chain=(), rank: int | None = None,
              raw_entropy: float | None = None, raw_varentropy: float | None = None,
              mu: float | None = None) -> StepEvent:
    """A StepEvent for ``text`` with a peaked cross-attention (layers, heads, n_frames).

    Without ``chain`` the probabilities are the fixed fakes of old (``prob`` for the token).
    With a ``chain`` ((stage, value) pairs, see ``fake_chain``) the step has five candidates
    (the token, "!", " cat", " box", " red"; the token's raw probability ``prob`` * 0.8) and
    the chain runs over them: the top-k lists, probabilities and entropy come from the raw and
    the final distribution, ``stages`` and ``stage_candidates`` from each stage. ``rank``,
    ``raw_entropy`` and ``raw_varentropy`` default to values that vary with the step.
    """
    rng = np.random.default_rng(seed + step)
    att = rng.random((layers, heads, n_frames)).astype(np.float32) * 0.1
    att[:, :, min(n_frames - 1, step * 3)] += 1.0  # attention moves right as tokens come
    att /= att.sum(-1, keepdims=True)
    tid = VOCAB.get(text, 1)
    rank = RANKS[step % len(RANKS)] if rank is None else rank
    h = 0.3 + 0.45 * (step % 6) if raw_entropy is None else raw_entropy
    v = 0.4 * h + 0.3 * (step % 3) if raw_varentropy is None else raw_varentropy
    extra = dict(rank=rank, raw_entropy=h, raw_varentropy=v, mu=mu)
    if not chain:
        alts = [TokenProb(tid, text, prob)] + [
            TokenProb(VOCAB[w], w, (1 - prob) / 3) for w in (" cat", " box", " red") if w != text
        ][:3]
        raw = [TokenProb(tid, text, prob * 0.8)] + [TokenProb(VOCAB["!"], "!", 0.1)] + alts[1:]
        return StepEvent(step=step, token_id=tid, text=text, prob=prob, raw_prob=prob * 0.8, topk=alts,
                         raw_topk=raw, entropy=0.7, cross_attention=att, segment=0, source_offset=offset, **extra)
    others = [w for w in ("!", " cat", " box", " red") if w != text][:4]
    texts = [text] + others
    ids = [tid] + [VOCAB[w] for w in others]
    p0 = float(np.clip(prob * 0.8, 0.05, 0.95))
    rest = np.array([0.35, 0.3, 0.2, 0.15][: len(others)])
    raw_p = np.concatenate([[p0], (1 - p0) * rest / rest.sum()])
    stages, final = chain_report(raw_p, chain)

    def top(d):
        order = np.argsort(-d, kind="stable")
        return [TokenProb(ids[i], texts[i], float(d[i])) for i in order if d[i] > 0]

    nz = final[final > 0]
    return StepEvent(
        step=step, token_id=tid, text=text, prob=float(final[0]), raw_prob=float(raw_p[0]), topk=top(final),
        raw_topk=top(raw_p), entropy=float(-(nz * np.log(nz)).sum()), cross_attention=att, segment=0,
        source_offset=offset, stages=stages,
        stage_candidates=tuple(TokenProb(ids[i], texts[i], float(raw_p[i])) for i in range(len(ids))), **extra,
    )


#: decoder layers of the fake model's logit lens (the last is the output layer)
LENS_LAYERS = 4


def fake_lens(ev: StepEvent, n_layers: int = LENS_LAYERS) -> list:
    """A logit lens for ``ev`` (``core.events.LensEntry`` per layer): the early layers guess
    another word (" cat", then " box"), the emitted token is top-1 from layer n_layers // 2
    on, its probability grows with the layer (0.1 + 0.8 * layer / (n_layers - 1)); the last
    layer is ``ev``'s raw distribution, as the engine reports it."""
    from core.events import LensEntry

    out = []
    for layer in range(n_layers - 1):
        p_tok = 0.1 + 0.8 * layer / (n_layers - 1)
        if layer >= n_layers // 2:
            top = [TokenProb(ev.token_id, ev.text, p_tok), TokenProb(VOCAB[" cat"], " cat", (1 - p_tok) / 2)]
        else:
            other = " cat" if layer == 0 else " box"
            top = [TokenProb(VOCAB[other], other, 0.5 + 0.1 * layer), TokenProb(ev.token_id, ev.text, p_tok)]
        out.append(LensEntry(layer, top[0].id, top[0].text, top[0].prob, top, float(np.log(p_tok))))
    raw = ev.raw_topk
    out.append(LensEntry(n_layers - 1, raw[0].id, raw[0].text, raw[0].prob, list(raw), float(np.log(ev.raw_prob))))
    return out


def with_lens(ev: StepEvent, options) -> StepEvent:
    """``ev`` with a fake lens when ``options`` capture it (``DecodingOptions.capture_lens``)."""
    if not getattr(options, "capture_lens", False):
        return ev
    return dataclasses.replace(ev, lens=fake_lens(ev))


def forced_step(ev: StepEvent, token_id: int, text: str) -> StepEvent:
    """``ev`` (a step's distribution) with ``token_id`` forced as its token: the token's
    probabilities are the ones ``ev``'s top-k lists gave it (small if not listed); marked
    ``forced`` where the events know the field."""
    proc = {tp.id: tp.prob for tp in ev.topk}
    raw = {tp.id: tp.prob for tp in ev.raw_topk}
    extra = {"forced": True} if "forced" in StepEvent.__dataclass_fields__ else {}
    return dataclasses.replace(ev, token_id=token_id, text=text, prob=proc.get(token_id, 0.01),
                               raw_prob=raw.get(token_id, 0.008), rank=2, **extra)


def fake_continuation(forced: list[int], words: list[str] = WORDS) -> list[str]:
    """The fake decoder's words after the forced ids ``forced``: ``words`` on from there when
    ``forced`` is their own prefix, else one word shorter (it "skips" the next word)."""
    m = len(forced)
    own = [VOCAB.get(w, 1) for w in words[:m]]
    return list(words[m:]) if forced == own else list(words[m + 1:])


class FakeBackend:
    """What the tabs use of ``core.backends.base.Backend`` to force typed text: ``tokenize``
    (" ?word" pieces; unknown ones get new ids) and ``token_text``."""

    def __init__(self) -> None:
        self.vocab = dict(VOCAB)

    def tokenize(self, text: str) -> list[int]:
        ids = []
        for piece in re.findall(r" ?[^ ]+| +$", text):
            if piece not in self.vocab:
                self.vocab[piece] = 500 + len(self.vocab)
            ids.append(self.vocab[piece])
        return ids

    def token_text(self, token_id: int) -> str:
        return next((w for w, i in self.vocab.items() if i == token_id), f"<{token_id}>")


class FakeSpeechModel:
    """Implements the SpeechModel decode contract with synthetic events.

    Emits one SegmentEvent, one StepEvent per word of ``WORDS`` (probabilities drop with the
    temperature; the sampler chain of ``fake_chain(options)`` runs over five candidates and is
    reported per stage), BeamEvents for beam search, then Finished. ``encode_count`` counts distinct
    audio inputs, as the real model's encoder cache does. ``delay_s`` slows each step so tests
    can cancel mid-run.
    """

    name = "fake-whisper"
    multilingual = False
    languages = ["en"]
    load_s = 0.0

    def __init__(self, delay_s: float = 0.0, n_frames: int = 50):
        self.delay_s = delay_s
        self.n_frames = n_frames
        self.encode_count = 0
        self.decode_calls = 0
        #: the options of every decode call, in order
        self.decode_options: list = []
        self.backend = FakeBackend()
        #: (segment, forced ids, reuse_cache) of each fork call
        self.fork_calls: list[tuple[int, tuple[int, ...], bool]] = []
        self.cancelled_runs = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def decode(self, audio, options, *, language="auto", task="transcribe", cancel=None):
        options = options.validate()
        if len(audio) < 1600:
            raise ValueError("the audio is too short; give at least 0.1 s")
        key = hashlib.sha1(np.ascontiguousarray(audio).tobytes()).hexdigest()
        with self._lock:
            self.decode_calls += 1
            self.decode_options.append(options)
            cached = key in self._seen
            if not cached:
                self._seen.add(key)
                self.encode_count += 1
        n = min(len(WORDS), options.max_new_tokens)
        n_frames = min(self.n_frames, int(np.ceil(len(audio) / 320)))
        yield SegmentEvent(segment=0, label=f"0.0–{len(audio) / 16000:.1f} s", source_offset=0, source_len=n_frames)
        prob = 0.9 / options.temperature if options.strategy == "sample" else 0.9
        chain = fake_chain(options)
        ids: list[int] = []
        if options.strategy in ("beam", "diverse_beam"):  # the search runs first, its tokens come at the end
            for bev in fake_beam_events(WORDS[:n], options.num_beams, n_frames=n_frames,
                                        length_penalty=options.length_penalty):
                if cancel is not None and cancel():
                    self.cancelled_runs += 1
                    yield Finished(text="", token_ids=ids, stats=RunStats(), cancelled=True, reason="cancelled")
                    return
                if self.delay_s:
                    time.sleep(self.delay_s)
                yield bev
        try:
            for i in range(n):
                if cancel is not None and cancel():
                    self.cancelled_runs += 1
                    yield Finished(text="", token_ids=ids, stats=RunStats(), cancelled=True, reason="cancelled")
                    return
                if self.delay_s:
                    time.sleep(self.delay_s)
                mu = 2 * options.mirostat_tau - 0.4 * i if options.strategy == "mirostat" else None
                ev = make_step(i, WORDS[i], n_frames=n_frames, prob=float(np.clip(prob - 0.05 * i, 0.05, 1.0)),
                               chain=chain, mu=mu)
                ev = with_lens(ev, options)
                ids.append(ev.token_id)
                yield ev
        except GeneratorExit:  # the GUI worker closed the generator after a cancel
            self.cancelled_runs += 1
            raise
        stats = RunStats(encode_s=0.0 if cached else 0.01, decode_s=0.001 * n, n_tokens=n,
                         audio_s=len(audio) / 16000, encoder_cached=cached)
        yield Finished(text="".join(WORDS[:n]).strip(), token_ids=ids, stats=stats, reason="eos")


    def fork(self, audio, options, *, segment=0, forced_ids=(), step_offset=0, language="auto", task="transcribe",
             cancel=None, reuse_cache=True):
        """Re-decode window ``segment`` with ``forced_ids`` forced after the prompt (the
        ``SpeechModel`` fork contract): a SegmentEvent, the forced tokens from the first one
        that differs from the original run (with ``reuse_cache``; all of them without), the
        fake continuation (``fake_continuation``) and a Finished whose stats say how many
        tokens the cache reused and when the first new token came."""
        options = options.validate()
        forced = [int(t) for t in forced_ids]
        self.fork_calls.append((segment, tuple(forced), reuse_cache))
        t0 = time.perf_counter()
        n_frames = min(self.n_frames, int(np.ceil(len(audio) / 320)))
        yield SegmentEvent(segment=0, label=f"0.0–{len(audio) / 16000:.1f} s", source_offset=0, source_len=n_frames)
        own = [VOCAB[w] for w in WORDS]
        reused = 0
        while reuse_cache and reused < len(forced) - 1 and forced[reused] == own[reused]:
            reused += 1
        words = WORDS + ["."] * max(0, len(forced) - len(WORDS))
        first_s = None
        for i, tid in enumerate(forced):
            if i < reused:
                continue
            yield with_lens(forced_step(make_step(step_offset + i, words[i], n_frames=n_frames), tid,
                                        self.backend.token_text(tid)), options)
        rest = fake_continuation(forced)
        ids = list(forced)
        for k, w in enumerate(rest[: max(0, options.max_new_tokens - len(forced))]):
            if cancel is not None and cancel():
                yield Finished(text="", token_ids=ids, stats=RunStats(), cancelled=True, reason="cancelled")
                return
            if self.delay_s:
                time.sleep(self.delay_s)
            i = step_offset + len(forced) + k
            ev = with_lens(make_step(i, w, n_frames=n_frames, prob=float(np.clip(0.7 - 0.03 * k, 0.05, 1.0))), options)
            first_s = first_s if first_s is not None else time.perf_counter() - t0
            ids.append(ev.token_id)
            yield ev
        stats = RunStats(decode_s=time.perf_counter() - t0, n_tokens=len(ids) - reused, encoder_cached=True)
        stats.reused_tokens = reused
        stats.first_token_s = first_s
        yield Finished(text="".join(self.backend.token_text(t) for t in ids).strip(), token_ids=ids, stats=stats)


class FakeRecorder:
    """Stands in for ``core.inputs.microphone.Recorder`` in tab tests (no PortAudio).

    ``FakeRecorder.takes`` is a queue of the audio each new recorder "records" (float32 at
    16 kHz); ``FakeRecorder.made`` lists every recorder created, so a test can check the
    calls (``calls``: "start", "stop", "discard") a tab made on it.
    """

    takes: list[np.ndarray] = []
    made: list["FakeRecorder"] = []

    def __init__(self, device=None, on_level=None, **_kwargs):
        self.device = device
        self.on_level = on_level
        self.calls: list[str] = []
        self.is_recording = False
        self._audio = FakeRecorder.takes.pop(0) if FakeRecorder.takes else np.zeros(16000, np.float32)
        FakeRecorder.made.append(self)

    def start(self) -> None:
        self.calls.append("start")
        self.is_recording = True

    def audio(self) -> np.ndarray:
        return self._audio.copy()

    def stop(self) -> np.ndarray:
        self.calls.append("stop")
        self.is_recording = False
        return self._audio.copy()

    def discard(self) -> None:
        self.calls.append("discard")
        self.is_recording = False
        self._audio = np.zeros(0, np.float32)
