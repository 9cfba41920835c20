"""The verdicts of a long-form run (core/tasks/longform.py): the measures of one attempt
(gzip compression ratio, token entropy, loudest 20 ms, no-speech probability, average
log-probability), the temperature-fallback decision on them (openai ``decode_with_fallback``,
whisper.cpp's entropy check, our loudness rule), the next attempt's options
(:func:`fallback_options`), and the lines that tell the user about
windows skipped as silence or kept although the model heard no speech.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from dataclasses import replace
from typing import Sequence

import numpy as np

from core.events import AttemptEvent
from core.options import DecodingOptions

__all__ = ["attempt_warning", "compression_ratio", "judge", "loudest_db", "no_speech_prob", "silence_note",
           "silence_rule", "token_entropy"]


def compression_ratio(text: str) -> float:
    """gzip compression ratio of ``text`` (UTF-8 bytes / zlib-compressed bytes), as
    openai/whisper ``utils.compression_ratio``; 0.0 for empty text."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def token_entropy(tokens: Sequence[int], last: int = 32) -> float:
    """Entropy in nats of the token counts of the last ``last`` tokens (whisper.cpp
    ``whisper_sequence_score``): low when a few tokens repeat; 0.0 for no tokens."""
    window = list(tokens)[-last:]
    if not window:
        return 0.0
    n = len(window)
    return float(-sum(c / n * math.log(c / n) for c in Counter(window).values()))


def loudest_db(samples: np.ndarray, frame: int = 320) -> float:
    """Level in dBFS of the loudest ``frame``-sample frame (RMS; 320 samples = 20 ms at
    16 kHz) of float32 audio in [-1, 1]; -inf for all-zero or empty audio."""
    from core.inputs.pcm16 import to_float32

    samples = to_float32(samples)  # int16 samples (a long clip kept compact) as float32 in [-1, 1]
    if samples.size == 0:
        return float("-inf")
    n = max(1, samples.size // frame)
    frames = samples[: n * frame].reshape(n, -1) if samples.size >= frame else samples.reshape(1, -1)
    rms = float(np.sqrt(np.max(np.mean(np.square(frames, dtype=np.float64), axis=1))))
    return 20 * math.log10(rms) if rms > 0 else float("-inf")


def no_speech_prob(model, encoded, prompt_ids: Sequence[int]) -> float | None:
    """The no-speech token's probability at ``<|startoftranscript|>`` in the full prompt
    (previous text included), as openai ``DecodingTask`` (``probs_at_sot``) and transformers
    ``WhisperNoSpeechDetection``: softmax over the whole vocabulary, no rule applied."""
    import torch

    sp = model._loaded.special
    if sp.no_speech is None:
        return None
    upto = list(prompt_ids).index(sp.sot) + 1
    out = model.backend.step(torch.tensor([list(prompt_ids)[:upto]]), model.backend.init_cache(encoded, 1), False)
    return float(torch.softmax(out.logits[0].float(), dim=-1)[sp.no_speech])


def judge(model, encoded, prompt, tokens, steps, finished, no_speech, level, lf) -> dict:
    """The fallback decision of one attempt (openai ``decode_with_fallback``).

    The average log-probability is openai's ``sum_logprobs / (len(tokens) + 1)``: the
    tokens' log-probabilities under the rule-filtered distribution at temperature 1 plus
    that of end-of-text, got by feeding prompt + tokens once more (that call's
    cross-attention is the end-of-text row word timing needs)."""
    import torch

    from core.processors import ChainContext, build_processors, split_hard_rules

    eot = model._loaded.special.eot
    ids = list(prompt.prompt_ids) + list(tokens)
    out = model.backend.step(torch.tensor([ids]), model.backend.init_cache(encoded, 1), True)
    end_attention = out.cross_attention[0, :, :, : encoded.source_len].float().numpy().copy()
    sum_logprob = float(sum(math.log(max(s.raw_prob, 1e-45)) for s in steps))
    reasons, verdict = [], "accepted"
    if finished.reason == "eos":
        rules, _ = split_hard_rules(build_processors(DecodingOptions(), prompt, len(prompt.prompt_ids),
                                                     ChainContext(tokenize=model.backend.tokenize)))
        scores = rules(torch.tensor([ids]), out.logits.float())
        sum_logprob += float(torch.log_softmax(scores, dim=-1)[0, eot])
    avg_logprob = sum_logprob / (len(tokens) + 1)
    text = model.backend.decode([t for t in tokens if t < eot])
    ratio = compression_ratio(text)
    entropy = token_entropy(tokens)
    if lf.compression_ratio_threshold is not None and ratio > lf.compression_ratio_threshold:
        reasons.append(f"compression ratio {ratio:.2f} > {lf.compression_ratio_threshold:g} (repetition)")
    if lf.logprob_threshold is not None and avg_logprob < lf.logprob_threshold:
        reasons.append(f"average log-probability {avg_logprob:.2f} < {lf.logprob_threshold:g}")
    if lf.entropy_threshold is not None and len(tokens) > 32 and entropy < lf.entropy_threshold:
        reasons.append(f"token entropy {entropy:.2f} < {lf.entropy_threshold:g} nats (repetition)")
    if reasons:
        verdict = "fallback"
    if lf.no_speech_threshold is not None and no_speech is not None and no_speech > lf.no_speech_threshold:
        if (lf.logprob_threshold is not None and avg_logprob < lf.logprob_threshold) or \
                (lf.silence_db is not None and level < lf.silence_db):
            verdict, reasons = "silence", [silence_rule(no_speech, avg_logprob, level, lf)[0]]
    return {"avg_logprob": avg_logprob, "compression_ratio": ratio, "entropy": entropy, "verdict": verdict,
            "reasons": reasons, "end_attention": end_attention}


def _db(level: float) -> str:
    return "−inf dBFS" if level == float("-inf") else f"{level:.0f} dBFS".replace("-", "−")


#: what the level beside a skipped window is (it is not Whisper's: openai's rule has no level)
LEVEL_MEANS = "the RMS level of the window's loudest 20 ms frame, in dB relative to full scale"


def whispers_rule(no_speech: float | None, avg_logprob: float | None, lf) -> bool:
    """Whether openai/whisper ``transcribe()``'s own rule skips the window: no-speech probability
    above ``lf.no_speech_threshold`` AND average log-probability below ``lf.logprob_threshold``
    (:func:`judge` tries it before our loudness rule)."""
    return (no_speech is not None and avg_logprob is not None and lf.no_speech_threshold is not None
            and lf.logprob_threshold is not None and no_speech > lf.no_speech_threshold
            and avg_logprob < lf.logprob_threshold)


def silence_rule(no_speech: float | None, avg_logprob: float | None, level: float, lf) -> tuple[str, str]:
    """(short, full): the rule that skipped a window as silence, with the thresholds of ``lf``
    (the run's ``LongFormOptions``) and the window's numbers. Whisper's (openai ``transcribe()``:
    ``no_speech_prob > no_speech_threshold and avg_logprob < logprob_threshold``) when it holds,
    else ours (the no-speech probability above the threshold while the loudest 20 ms is below
    ``silence_db``). ``avg_logprob`` None: a fixed window, skipped before it was decoded, so
    only the loudness rule can have skipped it.

    short: one line for a list or a status bar ("Whisper's rule: no-speech probability 0.81 >
    0.6 and average log-probability -1.42 < -1"); full: the rule in words, for a tooltip."""
    ns = "–" if no_speech is None else f"{no_speech:.2f}"
    said = f"no-speech probability {ns} > {lf.no_speech_threshold:g}"
    level_said = f"its loudest 20 ms is {_db(level)} ({LEVEL_MEANS})"
    if whispers_rule(no_speech, avg_logprob, lf):
        short = f"Whisper's rule: {said} and average log-probability {avg_logprob:.2f} < {lf.logprob_threshold:g}"
        full = (f"Skipped by Whisper's own rule (openai/whisper transcribe()): a window is skipped when its no-speech "
                f"probability is above no_speech_threshold ({lf.no_speech_threshold:g}) AND its average "
                f"log-probability is below logprob_threshold ({lf.logprob_threshold:g}). This window: no-speech "
                f"probability {ns}, average log-probability {avg_logprob:.2f}. The rule does not look at the "
                f"loudness: {level_said}.")
        return short, full
    silence_db = "off" if lf.silence_db is None else _db(lf.silence_db)
    short = f"loudness rule: {said} and the loudest 20 ms is {_db(level)} < {silence_db}"
    if lf.logprob_threshold is None:
        whisper = "Whisper's own rule is off (no log-probability threshold)"
    elif avg_logprob is None:
        whisper = ("Whisper's own rule (no-speech probability above the threshold AND average log-probability below "
                   f"{lf.logprob_threshold:g}) needs the window's text: a fixed window is skipped before it is "
                   "decoded, so only this rule applies (long-form mode applies both)")
    else:
        whisper = (f"Whisper's own rule did not skip it: its average log-probability {avg_logprob:.2f} is not below "
                   f"logprob_threshold ({lf.logprob_threshold:g})")
    full = (f"Skipped by this app's loudness rule (not Whisper's; after stable-ts): a window is skipped when its "
            f"no-speech probability is above no_speech_threshold ({lf.no_speech_threshold:g}) AND the RMS level of "
            f"its loudest 20 ms frame is below silence_db ({silence_db}), as on digital silence, where Whisper "
            f"writes \"you\" or \"Thank you.\". This window: no-speech probability {ns}, {level_said}. {whisper}.")
    return short, full


def _range(values: Sequence[float], fmt) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def silence_note(skipped: Sequence[tuple], lf=None) -> str:
    """What a run skipped as silence, for a status line: "1 window skipped as silence (no-speech
    0.95, −inf dBFS)", "3 windows skipped as silence (no-speech 0.81–0.95, −62–−inf dBFS)";
    "" for none. With ``lf`` (the run's ``LongFormOptions``) the note names the rule that
    skipped them, with its thresholds, instead of the level: "1 window skipped as silence
    (Whisper's rule: no-speech 0.81 > 0.6 and avg log-prob −1.42 < −1)", "2 windows skipped as
    silence (loudness rule: no-speech 0.95 > 0.6 and loudest 20 ms −inf < −50 dBFS)", and
    "3 windows …" with "2 by Whisper's rule: …; 1 by the loudness rule: …" when both did.

    Args:
        skipped: (no-speech probability or None, loudest 20 ms in dBFS[, average log-probability
            or None]) per skipped window (``AttemptEvent.no_speech_prob`` / ``loudest_db`` /
            ``avg_logprob`` of the attempts whose verdict is "silence", or of a fixed run's
            skipped windows, which have no average log-probability).
        lf: the rule's thresholds; None: the numbers only (no rule named).
    """
    if not skipped:
        return ""
    n = len(skipped)
    head = f"{n} window{'s' if n != 1 else ''} skipped as silence"
    if lf is None:
        probs = [p for p, _lv, *_ in skipped if p is not None]
        what = []
        if probs:
            what.append("no-speech " + _range(probs, lambda p: f"{p:.2f}"))
        levels = [lv for _, lv, *_ in skipped]
        what.append(_range(levels, lambda lv: _db(lv).replace(" dBFS", "")) + " dBFS")
        return f"{head} ({', '.join(what)})"
    whisper, loud = [], []
    for p, lv, *rest in skipped:
        (whisper if whispers_rule(p, rest[0] if rest else None, lf) else loud).append((p, lv, *rest))
    parts = []
    for rows, name in ((whisper, "Whisper's rule"), (loud, "loudness rule")):
        if not rows:
            continue
        probs = [p for p, *_ in rows if p is not None]
        said = f"no-speech {_range(probs, lambda p: f'{p:.2f}')} > {lf.no_speech_threshold:g}" if probs else \
            f"no-speech > {lf.no_speech_threshold:g}"
        if rows is whisper:
            said += (f" and avg log-prob {_range([r[2] for r in rows], lambda v: f'{v:.2f}')} < "
                     f"{lf.logprob_threshold:g}")
        else:
            said += (f" and loudest 20 ms {_range([r[1] for r in rows], lambda lv: _db(lv).replace(' dBFS', ''))} < "
                     + ("off" if lf.silence_db is None else _db(lf.silence_db)))
        both = whisper and loud
        if both and rows is loud:
            name = "the " + name
        parts.append(f"{len(rows)} by {name}: {said}" if both else f"{name}: {said}")
    return f"{head} ({'; '.join(parts)})"


def attempt_warning(ev: AttemptEvent, no_speech_threshold: float | None = 0.6) -> str:
    """A warning for a kept attempt whose window the model thinks holds no speech (no-speech
    probability above ``no_speech_threshold``) but that openai's rule kept (its average
    log-probability was not low enough, nor its audio quiet): its text may be invented (40 s
    of tones: "." at no-speech 0.94). "" otherwise."""
    if (not ev.kept_in_transcript or ev.verdict == "silence" or ev.no_speech_prob is None
            or no_speech_threshold is None or ev.no_speech_prob <= no_speech_threshold):
        return ""
    return (f"{ev.start:.2f}–{ev.end:.2f} s: kept {ev.text!r} although the no-speech probability is "
            f"{ev.no_speech_prob:.2f} > {no_speech_threshold:g} (average log-probability {ev.avg_logprob:.2f} is not "
            "below the threshold and the audio is not quiet): the text may be invented")


def fallback_options(options: DecodingOptions, temperature: float, window: int, attempt: int,
                     prompt, failed: Sequence[int] | None):
    """The options (and speculative decoding's draft) of one attempt at ``temperature``.

    Temperature 0 keeps ``options``. Above it, attempts sample (``strategy="sample"``, the
    seed moved per window and attempt); under speculative decoding they stay speculative with
    sampling verification, and the failed attempt's tokens (``failed``: its ids + EOS when it
    ended so) draft the next attempt (a ``BranchDraft``): where the new attempt repeats the old
    one the target accepts whole stretches per call; the output is still distributed as sampling.

    Returns:
        (run options, draft for ``Engine.run`` or None).
    """
    if temperature == 0:
        return options, None
    seed = None if options.seed is None else options.seed + 1000 * window + attempt
    if options.strategy != "speculative":
        return replace(options, strategy="sample", temperature=temperature, seed=seed), None
    draft = None
    if failed:
        from core.speculative.branch import BranchDraft

        draft = BranchDraft(list(prompt.prompt_ids) + list(failed))
    return replace(options, verification="sample", temperature=temperature, seed=seed,
                   draft="branch" if draft is not None else options.draft), draft
