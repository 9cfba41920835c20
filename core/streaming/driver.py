"""The streaming driver: audio chunks in, streaming events out (whisper_streaming's
``OnlineASRProcessor.insert_audio_chunk / process_iter / finish`` around any policy).

    driver = StreamDriver(parse_policy("local-agreement:2", step_s=1.0), WhisperDecoder(model, options))
    for chunk in play(audio, speed=1.0):          # or the recorder's blocks
        for event in driver.feed(chunk):
            ...                                   # Tentative / Committed / Trimmed / Waited / FellBehind
    for event in driver.finish():                 # flush: the tail is committed, then StreamFinished
        ...

The driver owns the buffer (the audio the decoder sees, from ``start_s``), the committed tokens
and the prompt (committed text before the buffer); the policy decides. It calls the policy every
``step_s`` seconds of new audio. If the decoder falls behind real time, the audio that arrived
meanwhile is decoded in one update (a FellBehind event says so); if more than ``max_lag_s``
seconds are waiting, the tentative text is committed as it stands and the waiting audio but the
last step is skipped (FellBehind with ``skipped_s``; the Trimmed event carries the samples, so a
caller keeping the take loses nothing). The buffer never exceeds ``max_buffer_s`` (Whisper's 30 s
window): a policy that has not trimmed by then gets its tentative text committed and the buffer
trimmed after it ("too long").
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator

import numpy as np

from core.catalog import MIN_AUDIO_S, SAMPLE_RATE
from core.streaming.base import BufferView, Decoder, Policy, Update
from core.streaming.events import Committed, FellBehind, StreamFinished, StreamToken, Tentative, Trimmed, text_of

#: Whisper's window: the buffer is never longer (s)
MAX_BUFFER_S = 30.0


class StreamDriver:
    """Feeds a policy the buffer every ``policy.step_s`` seconds of audio.

    Args:
        policy: a ``core.streaming.base.Policy``.
        decoder: a ``core.streaming.base.Decoder`` (``WhisperDecoder`` for a loaded model).
        max_buffer_s: the buffer's longest length (s, <= 30 for Whisper).
        max_lag_s: skip ahead when more than this much audio waits undecoded (s); None never skips.
        clock: seconds (``time.perf_counter``), for ``wall_s`` and the real-time factor.
        realtime: the audio arrives live at this speed (1.0 = a microphone; a file played at
            2x: 2.0): a commit's ``audio_s`` is then the audio that had arrived by the moment of
            the commit (compute time counts in the latency), not only what had been fed; None
            (a file fed as fast as it is decoded): what had been fed.

    Raises:
        ValueError: ``max_buffer_s`` not above two steps, or ``max_lag_s`` below one step.
    """

    def __init__(self, policy: Policy, decoder: Decoder, *, max_buffer_s: float = MAX_BUFFER_S,
                 max_lag_s: float | None = 10.0, clock: Callable[[], float] = time.perf_counter,
                 realtime: float | None = None):
        if not max_buffer_s > 2 * policy.step_s:
            raise ValueError(f"max_buffer_s ({max_buffer_s}) must be longer than two steps ({policy.step_s} s)")
        if max_lag_s is not None and max_lag_s < policy.step_s:
            raise ValueError(f"max_lag_s ({max_lag_s}) must be at least one step ({policy.step_s} s)")
        self.policy, self.decoder, self.clock = policy, decoder, clock
        self.max_buffer_s, self.max_lag_s, self.realtime = max_buffer_s, max_lag_s, realtime
        self._first_s = 0.0  # audio in the first chunk (it had arrived when the clock started)
        self.audio = np.zeros(0, np.float32)  #: the buffer
        self.start_s = 0.0  #: where the buffer starts in the stream
        self.received_s = 0.0  #: audio fed so far
        self.decoded_s = 0.0  #: audio the last update saw
        self.committed: list[StreamToken] = []  #: every committed token, in order
        self.in_buffer = 0  #: how many of ``committed`` lie before the buffer (the prompt)
        self.tentative: tuple[StreamToken, ...] = ()
        self.compute_s, self.decodes, self.shown, self.revised = 0.0, 0, 0, 0
        self._t0: float | None = None
        self._finished = self._ended = False

    # ------------------------------------------------------------------ input
    def feed(self, chunk: np.ndarray) -> list:
        """Add ``chunk`` (float32 (n,), 16 kHz mono) and run the policy if a step of new audio
        has arrived. Returns the events of this call (possibly none).

        Raises:
            ValueError: a chunk that is not 1-D, or fed after :meth:`finish`.
        """
        if self._finished:
            raise ValueError("the stream has finished; start a new StreamDriver")
        chunk = np.asarray(chunk, dtype=np.float32)
        if chunk.ndim != 1:
            raise ValueError(f"audio chunks must be mono (n_samples,), got shape {chunk.shape}")
        if self._t0 is None:
            self._t0, self._first_s = self.clock(), len(chunk) / SAMPLE_RATE
        self.audio = np.concatenate([self.audio, chunk])
        self.received_s += len(chunk) / SAMPLE_RATE
        pending = self.received_s - self.decoded_s
        if pending + 1e-9 < self.policy.step_s:
            return []
        events: list = []
        if self.max_lag_s is not None and pending > self.max_lag_s:
            events += self._skip(pending)
        elif pending >= 2 * self.policy.step_s:
            events.append(FellBehind(pending, None, f"decoding fell behind real time by {pending:.1f} s; the "
                                     f"{pending:.1f} s that arrived meanwhile are decoded in one step"))
        return events + self._run(final=False)

    def finish(self) -> list:
        """The input ended: the policy commits the rest (flush); ends with StreamFinished."""
        if self._finished:
            return []
        if self._t0 is None:
            self._t0 = self.clock()
        self._ended = True  # the input ended: no audio arrives any more
        # a tail shorter than the models take (a trim can leave one) is not decoded: its tentative
        # tokens are committed below
        events = self._run(final=True) if len(self.audio) >= MIN_AUDIO_S * SAMPLE_RATE else []
        if self.tentative:  # a policy that left something tentative at the end: it is final now
            events += self._commit(self.tentative)
            self.tentative = ()
        self._finished = True
        wall = self.clock() - self._t0
        events.append(StreamFinished(text=text_of(self.committed).strip(), audio_s=self.received_s, wall_s=wall,
                                     decode_s=self.compute_s, rtf=self.compute_s / max(self.received_s, 1e-9),
                                     tentative_shown=self.shown, revised=self.revised, decodes=self.decodes))
        return events

    # ------------------------------------------------------------------ steps
    def view(self, final: bool = False) -> BufferView:
        """The buffer as the policy sees it now."""
        return BufferView(self.audio, self.start_s, tuple(t.id for t in self.committed[:self.in_buffer]),
                          tuple(self.committed[self.in_buffer:]), final)

    def _run(self, final: bool) -> list:
        self.decoded_s = self.received_s
        events: list = []
        if len(self.audio) > self.max_buffer_s * SAMPLE_RATE:  # a backlog: the decoder takes at most this
            events += self._cut_too_long(keep_s=self.max_buffer_s)
        t = self.clock()
        update: Update = self.policy.update(self.view(final), self.decoder)
        self.compute_s += self.clock() - t
        self.decodes += update.decodes
        if update.waited is not None:
            events.append(update.waited)
        self._count_revised(update)
        had = bool(self.tentative)
        if update.commit:
            events += self._commit(update.commit)
        self.tentative = tuple(update.tentative)
        if update.tentative or update.commit or had:
            self.shown += len(self.tentative)
            events.append(Tentative(self.tentative, self._arrived(), self._wall()))
        if update.trim_s is not None:
            events += self._trim(update.trim_s, update.trim_reason)
        if not final and len(self.audio) / SAMPLE_RATE > self.max_buffer_s - self.policy.step_s:
            events += self._cut_too_long()
        return events

    def _count_revised(self, update: Update) -> None:
        """Each token of the last Tentative whose place now holds another token (or none)."""
        if not self.tentative:
            return
        now = [t.id for t in list(update.commit) + list(update.tentative)]
        self.revised += sum(1 for i, t in enumerate(self.tentative) if i >= len(now) or now[i] != t.id)

    def _commit(self, tokens) -> list:
        tokens = tuple(tokens)
        self.committed.extend(tokens)
        words = [t.end_s for i, t in enumerate(tokens)
                 if i + 1 == len(tokens) or tokens[i + 1].text.startswith(" ")]  # each word's last token
        now = self._arrived()
        lat = tuple(max(0.0, now - e) for e in words)
        end = tokens[-1].end_s
        return [Committed(tokens, now, self._wall(), end, max(0.0, now - end), lat)]

    def _arrived(self) -> float:
        """Audio time now: what had arrived (live: by the clock, at least what was fed)."""
        if self.realtime is None or self._ended:
            return self.received_s
        return max(self.received_s, self._first_s + self._wall() * self.realtime)

    def _trim(self, at_s: float, reason: str) -> list:
        cut = int(round((at_s - self.start_s) * SAMPLE_RATE))
        cut = max(0, min(cut, len(self.audio)))
        if cut == 0:
            return []
        removed, self.audio = self.audio[:cut], self.audio[cut:]
        self.start_s += cut / SAMPLE_RATE
        while self.in_buffer < len(self.committed) and self.committed[self.in_buffer].end_s <= self.start_s + 1e-3:
            self.in_buffer += 1  # committed text before the buffer: now the prompt
        return [Trimmed(self.start_s, removed, reason)]

    def _cut_too_long(self, keep_s: float | None = None) -> list:
        """The buffer reached ``max_buffer_s``: commit the tentative text and trim after the last
        committed word, cutting at least half the buffer (``keep_s``: keeping at most this)."""
        events: list = []
        if self.tentative:
            events += self._commit(self.tentative)
            self.tentative = ()
            events.append(Tentative((), self.received_s, self._wall()))
        end = self.start_s + len(self.audio) / SAMPLE_RATE
        ends = [t.end_s for t in self.committed[self.in_buffer:] if t.end_s > self.start_s]
        # after the last committed word, and at least half the buffer: the next steps fit again
        at = max(max(ends, default=self.start_s), end - (self.max_buffer_s / 2 if keep_s is None else keep_s))
        events += self._trim(at, "too long")
        self.in_buffer = len(self.committed)  # whatever is committed is before the buffer now
        return events

    def _skip(self, pending: float) -> list:
        """More than ``max_lag_s`` waits: commit the tentative text and keep only the last step."""
        events: list = []
        if self.tentative:
            events += self._commit(self.tentative)
            self.tentative = ()
        to = self.received_s - self.policy.step_s
        frm = max(self.decoded_s, self.start_s)
        events.append(FellBehind(pending, (frm, to), f"decoding fell behind real time by {pending:.1f} s; skipped "
                                 f"{frm:.1f}–{to:.1f} s of audio to catch up (the recording keeps it)"))
        events += self._trim(to, "skipped")
        self.in_buffer = len(self.committed)
        return events

    def _wall(self) -> float:
        return self.clock() - (self._t0 if self._t0 is not None else self.clock())


def play(audio: np.ndarray, *, speed: float | None = 1.0, chunk_s: float = 0.1,
         clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep
         ) -> Iterator[np.ndarray]:
    """A file played as a microphone: yields ``audio`` (float32 (n,), 16 kHz) in chunks as it
    would arrive. ``speed`` 1.0 = real time (2.0 twice as fast): each call yields all the audio
    that has arrived since the last one (at least ``chunk_s`` s, waiting for it), so a consumer
    that was busy gets the backlog at once, as from a recorder's queue. ``speed=None``: as fast
    as it is consumed, ``chunk_s`` at a time.

    Raises:
        ValueError: ``speed`` <= 0 or ``chunk_s`` <= 0.
    """
    if speed is not None and not speed > 0:
        raise ValueError(f"speed must be > 0 (1 = real time) or None (as fast as possible), got {speed}")
    if not chunk_s > 0:
        raise ValueError(f"chunk_s must be > 0, got {chunk_s}")
    n, size = len(audio), max(1, int(round(chunk_s * SAMPLE_RATE)))
    if speed is None:
        for i in range(0, n, size):
            yield audio[i:i + size]
        return
    t0, sent = clock(), 0
    while sent < n:
        arrived = min(n, int((clock() - t0) * speed * SAMPLE_RATE))
        if arrived - sent < size and arrived < n:
            sleep((sent + size - arrived) / (speed * SAMPLE_RATE))
            continue
        yield audio[sent:arrived]
        sent = arrived


def stream(driver: StreamDriver, chunks: Iterable[np.ndarray]) -> Iterator:
    """Every event of feeding ``chunks`` to ``driver`` and finishing it."""
    for chunk in chunks:
        yield from driver.feed(chunk)
    yield from driver.finish()
