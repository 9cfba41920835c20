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
           "token_entropy"]


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
        said = f"no-speech probability {no_speech:.2f} > {lf.no_speech_threshold:g}"
        if lf.logprob_threshold is not None and avg_logprob < lf.logprob_threshold:
            verdict, reasons = "silence", [f"{said} and average log-probability {avg_logprob:.2f} < "
                                           f"{lf.logprob_threshold:g}"]
        elif lf.silence_db is not None and level < lf.silence_db:
            verdict, reasons = "silence", [f"{said} and the loudest 20 ms is {level:.0f} dBFS < {lf.silence_db:g}"]
    return {"avg_logprob": avg_logprob, "compression_ratio": ratio, "entropy": entropy, "verdict": verdict,
            "reasons": reasons, "end_attention": end_attention}


def _db(level: float) -> str:
    return "−inf dBFS" if level == float("-inf") else f"{level:.0f} dBFS".replace("-", "−")


def _range(values: Sequence[float], fmt) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def silence_note(skipped: Sequence[tuple[float | None, float]]) -> str:
    """What a run skipped as silence, for a status line: "1 window skipped as silence (no-speech
    0.95, −inf dBFS)", "3 windows skipped as silence (no-speech 0.81–0.95, −62–−inf dBFS)";
    "" for none.

    Args:
        skipped: (no-speech probability or None, loudest 20 ms in dBFS) per skipped window
            (``AttemptEvent.no_speech_prob`` / ``loudest_db`` of the attempts whose verdict is
            "silence", or of a fixed run's skipped windows).
    """
    if not skipped:
        return ""
    n = len(skipped)
    probs = [p for p, _ in skipped if p is not None]
    what = []
    if probs:
        what.append("no-speech " + _range(probs, lambda p: f"{p:.2f}"))
    levels = [lv for _, lv in skipped]
    what.append(_range(levels, lambda lv: _db(lv).replace(" dBFS", "")) + " dBFS")
    return f"{n} window{'s' if n != 1 else ''} skipped as silence ({', '.join(what)})"


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
