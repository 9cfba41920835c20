"""Whisper's fixed 30 s windows: their sample ranges, each one's SegmentEvent, skipping digital
silence, joining the windows' texts, and the warnings about windows that hold no speech or loop.

Pure functions over numpy audio and events (``core.tasks.speech.SpeechModel.plan`` uses them);
the long-form rules they share (``no_speech_threshold``, ``silence_db``, the compression
ratio and token entropy) are ``core.tasks.longform``'s.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from core.catalog import FRAME_S, LANGUAGE_PROBS_KEPT, NO_SPEECH_WARN, SAMPLE_RATE, WINDOW_S
from core.events import SegmentEvent
from core.tasks.plan import Prepared

#: audio samples per encoder frame (320 at 16 kHz)
SAMPLES_PER_FRAME = int(SAMPLE_RATE * FRAME_S)
#: Whisper's fixed input window in samples / encoder frames
WINDOW_SAMPLES = int(SAMPLE_RATE * WINDOW_S)
WINDOW_FRAMES = WINDOW_SAMPLES // SAMPLES_PER_FRAME


def window_ranges(windows, longform: bool) -> list[tuple[int, int]]:
    """(first, end) sample of each window of a plan (``SpeechModel.plan``'s segments): fixed
    windows of ``WINDOW_SAMPLES``, or a long-form run's ``WindowPlan`` s."""
    if longform:
        from core.tasks.longform import window_samples

        return [window_samples(w) for w in windows]
    return [(i * WINDOW_SAMPLES, i * WINDOW_SAMPLES + len(w)) for i, w in enumerate(windows)]

#: what fixed-window warnings (no speech, repetition loops) point the user to
LONGFORM_HINT = "long-form mode (windows: long-form) re-decodes such windows with temperature fallback"
#: the end of a skipped window's SegmentEvent label
SKIPPED = "skipped as silence"


def window_event(i: int, n_windows: int, duration: float, source_len: int, detected: tuple[str, float] | None,
                 no_speech: float | None, language_probs: dict[str, float]) -> SegmentEvent:
    """The SegmentEvent of fixed window ``i`` of ``n_windows`` (``duration``: the audio's seconds):
    its label (the span, the language ``detected`` as (code, probability) when it was detected
    rather than given, the no-speech probability), the warning when that is above
    ``NO_SPEECH_WARN``, and the language distribution's top ``LANGUAGE_PROBS_KEPT``."""
    span = f"{i * WINDOW_S:.1f}–{min(duration, (i + 1) * WINDOW_S):.1f} s"
    label, warning = span, ""
    if detected is not None:
        label += f" · language {detected[0]} ({detected[1]:.0%})"
    if no_speech is not None:
        label += f" · no speech {no_speech:.0%}" + (" — likely no speech" if no_speech > NO_SPEECH_WARN else "")
        if no_speech > NO_SPEECH_WARN:
            warning = (f"{span}: the model's no-speech probability is {no_speech:.0%}, so this audio may "
                       f"hold no speech and the text decoded from it may be invented; {LONGFORM_HINT}.")
    return SegmentEvent(segment=i, label=label, source_offset=i * WINDOW_FRAMES, source_len=source_len,
                        total=n_windows, kind="window", no_speech_prob=no_speech, warning=warning,
                        language_probs=tuple(list(language_probs.items())[:LANGUAGE_PROBS_KEPT]))


def skip_silence(i: int, window: np.ndarray, ready: Prepared) -> SegmentEvent | None:
    """``decode_segments``' skip rule for fixed windows: a window whose no-speech probability is
    above the long-form ``no_speech_threshold`` while its loudest 20 ms is below ``silence_db``
    (defaults 0.6, -50 dBFS) gets its SegmentEvent marked skipped; None = decode it."""
    from dataclasses import replace

    from core.tasks.longform import LongFormOptions
    from core.tasks.longform_verdicts import loudest_db, silence_rule

    rule, ns = LongFormOptions(), ready.event.no_speech_prob
    if ns is None or rule.no_speech_threshold is None or rule.silence_db is None or ns <= rule.no_speech_threshold:
        return None
    level = loudest_db(window)
    if level >= rule.silence_db:
        return None
    span = ready.event.label.split(" · ")[0]
    # the loudness rule (ours): Whisper's own (low average log-probability) needs the decoded text
    return replace(ready.event, label=f"{ready.event.label} · {SKIPPED}", warning=(
        f"{span} {SKIPPED} by the {silence_rule(ns, None, level, rule)[0]} (Whisper writes \"you\" or "
        "\"Thank you.\" over silence; its own rule, a low average log-probability, needs the window decoded)"))


def window_warnings(events: Sequence, decode: Callable[[Sequence[int]], str], *,
                    compression_ratio_threshold: float = 2.4, entropy_threshold: float = 2.4) -> list[str]:
    """Warnings about the windows of a fixed-window run (``SpeechModel.decode``'s events): a
    window whose text repeats itself (gzip compression ratio above ``compression_ratio_threshold``,
    or more than 32 tokens whose last 32 have an entropy below ``entropy_threshold`` nats: the
    long-form fallback's own tests) is a repetition loop; each warning names the window and points
    to long-form mode. [] when nothing loops.

    Args:
        events: the run's events (StepEvents and SegmentEvents; others are ignored).
        decode: token ids -> text (``SpeechModel.backend.decode``).
    """
    from core.events import StepEvent
    from core.tasks.longform_verdicts import compression_ratio, token_entropy

    labels, tokens = {}, {}
    for ev in events:
        if isinstance(ev, SegmentEvent):
            labels[ev.segment] = ev.label.split(" · ")[0]
        elif isinstance(ev, StepEvent):
            tokens.setdefault(ev.segment, []).append(ev.token_id)
    out = []
    for seg, ids in sorted(tokens.items()):
        ratio, entropy = compression_ratio(decode(ids)), token_entropy(ids)
        why = []
        if ratio > compression_ratio_threshold:
            why.append(f"compression ratio {ratio:.2f} > {compression_ratio_threshold:g}")
        if len(ids) > 32 and entropy < entropy_threshold:
            why.append(f"token entropy {entropy:.2f} < {entropy_threshold:g} nats")
        if why:
            out.append(f"{labels.get(seg, f'window {seg + 1}')}: the text repeats itself ({'; '.join(why)}), a "
                       f"repetition loop; {LONGFORM_HINT}.")
    return out


def join_windows(done) -> str:
    """The windows' texts joined with spaces."""
    return " ".join(text for _, text in done if text)
