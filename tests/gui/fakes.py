"""A fake speech model that yields synthetic events (no torch), for widget and tab tests."""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np

from core.events import BeamEvent, Finished, Hypothesis, RunStats, SegmentEvent, StepEvent, TokenProb

WORDS = [" The", " quick", " brown", " fox", " jump", "s", " over", " the", " lazy", " dog", "."]
VOCAB = {w: i + 100 for i, w in enumerate(dict.fromkeys(WORDS + [" cat", " box", " red", "!"]))}


def make_step(step: int, text: str, n_frames: int = 50, layers: int = 2, heads: int = 3, offset: int = 0,
              prob: float = 0.8, seed: int = 0) -> StepEvent:
    """A StepEvent for ``text`` with a peaked cross-attention (layers, heads, n_frames)."""
    rng = np.random.default_rng(seed + step)
    att = rng.random((layers, heads, n_frames)).astype(np.float32) * 0.1
    att[:, :, min(n_frames - 1, step * 3)] += 1.0  # attention moves right as tokens come
    att /= att.sum(-1, keepdims=True)
    tid = VOCAB.get(text, 1)
    alts = [TokenProb(tid, text, prob)] + [
        TokenProb(VOCAB[w], w, (1 - prob) / 3) for w in (" cat", " box", " red") if w != text
    ][:3]
    raw = [TokenProb(tid, text, prob * 0.8)] + [TokenProb(VOCAB["!"], "!", 0.1)] + alts[1:]
    return StepEvent(step=step, token_id=tid, text=text, prob=prob, raw_prob=prob * 0.8, topk=alts, raw_topk=raw,
                     entropy=0.7, cross_attention=att, segment=0, source_offset=offset)


class FakeSpeechModel:
    """Implements the SpeechModel decode contract with synthetic events.

    Emits one SegmentEvent, one StepEvent per word of ``WORDS`` (probabilities drop with the
    temperature), BeamEvents for beam search, then Finished. ``encode_count`` counts distinct
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
            cached = key in self._seen
            if not cached:
                self._seen.add(key)
                self.encode_count += 1
        n = min(len(WORDS), options.max_new_tokens)
        n_frames = min(self.n_frames, int(np.ceil(len(audio) / 320)))
        yield SegmentEvent(segment=0, label=f"0.0–{len(audio) / 16000:.1f} s", source_offset=0, source_len=n_frames)
        prob = 0.9 / options.temperature if options.strategy == "sample" else 0.9
        ids: list[int] = []
        try:
            for i in range(n):
                if cancel is not None and cancel():
                    self.cancelled_runs += 1
                    yield Finished(text="", token_ids=ids, stats=RunStats(), cancelled=True, reason="cancelled")
                    return
                if self.delay_s:
                    time.sleep(self.delay_s)
                if options.strategy == "beam":
                    yield BeamEvent(step=i, beams=[Hypothesis(ids + [1], "".join(WORDS[: i + 1]), -0.1 * i),
                                                    Hypothesis(ids + [2], "".join(WORDS[:i]) + " cat", -0.2 * i - 1)])
                ev = make_step(i, WORDS[i], n_frames=n_frames, prob=float(np.clip(prob - 0.05 * i, 0.05, 1.0)))
                ids.append(ev.token_id)
                yield ev
        except GeneratorExit:  # the GUI worker closed the generator after a cancel
            self.cancelled_runs += 1
            raise
        stats = RunStats(encode_s=0.0 if cached else 0.01, decode_s=0.001 * n, n_tokens=n,
                         audio_s=len(audio) / 16000, encoder_cached=cached)
        yield Finished(text="".join(WORDS[:n]).strip(), token_ids=ids, stats=stats, reason="eos")


class FakeRecorder:
    """Stands in for ``core.microphone.Recorder`` in tab tests (no PortAudio).

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
