"""Precision flips (issue 22): the steps of a half-precision (float16 / bfloat16) decode where the
float32 model would have chosen another token.

After the half decode, the float32 model reads the produced ids once, teacher-forced (one decoder
call over prompt + ids: ``Backend.forced_logits``), and each step's float32 argmax is compared
with the token the half model emitted. The same hard rules apply to both (the ids suppressed at
every step and at the first), so a flip is the arithmetic's doing, not a rule's. Meaningful for
greedy decoding (a sampled token differs from the argmax by design).

``find_flips`` works on logits alone (tested on synthetic ones); ``precision_flips`` runs the
float32 pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

__all__ = ["Flip", "find_flips", "flips_line", "precision_flips", "speech_flips"]


@dataclass(frozen=True)
class Flip:
    """One step where float32's argmax differs from the emitted token.

    Attributes:
        step: the generated token's index (0 = the first token after the prompt).
        token: the id the half-precision decode emitted.
        float32_token: float32's argmax at that step (same prefix: the emitted ids before it).
        margin: float32's log-probability of its own token minus that of the emitted one
            (nats, > 0): how far float32 is from agreeing; a small margin is a near tie.
    """

    step: int
    token: int
    float32_token: int
    margin: float

    def to_dict(self) -> dict:
        """``{"step", "token", "float32_token", "margin"}`` (the JSON trace's form)."""
        return asdict(self)


def find_flips(logits, emitted: Sequence[int], suppress: Sequence[int] = (),
               begin_suppress: Sequence[int] = ()) -> list[Flip]:
    """The steps where the argmax of ``logits`` differs from ``emitted``.

    Args:
        logits: float (steps, vocab) torch tensor or array: row i = float32 logits of step i
            (given the emitted ids before it); at least ``len(emitted)`` rows (extra rows ignored).
        emitted: the ids the half-precision decode emitted, one per step.
        suppress: ids never chosen (masked at every step before the argmax).
        begin_suppress: ids masked at step 0 only (Whisper's blank and end-of-text).

    Returns:
        the flips in step order (empty when float32 agrees everywhere).

    Raises:
        ValueError: fewer rows than emitted ids.
    """
    import torch

    x = torch.as_tensor(logits).float()
    n = len(emitted)
    if x.ndim != 2 or x.shape[0] < n:
        raise ValueError(f"logits must be (steps >= {n}, vocab), got {tuple(x.shape)}")
    x = x[:n].clone()
    if suppress:
        x[:, list(suppress)] = float("-inf")
    if begin_suppress and n:
        x[0, list(begin_suppress)] = float("-inf")
    logp = torch.log_softmax(x, dim=-1)
    best = logp.argmax(dim=-1)
    ids = torch.as_tensor(list(emitted), dtype=torch.long)
    flips = []
    for step in torch.nonzero(best != ids).flatten().tolist():
        own, got = int(best[step]), int(ids[step])
        flips.append(Flip(step=step, token=got, float32_token=own, margin=float(logp[step, own] - logp[step, got])))
    return flips


def precision_flips(reference: Any, model_inputs: dict, prompt_ids: Sequence[int], emitted: Sequence[int],
                    suppress: Sequence[int] = (), begin_suppress: Sequence[int] = ()) -> list[Flip]:
    """Run the float32 ``reference`` backend (``core.backends.hf.HFSeq2SeqBackend`` over the float32
    model) once over ``prompt_ids`` + ``emitted``, teacher-forced, and return ``find_flips``.

    Args:
        reference: a backend with ``encode`` and ``forced_logits`` whose model is float32.
        model_inputs: the encoder inputs (e.g. ``{"input_features": (1, n_mels, 3000)}``).
        prompt_ids: the decoder prompt the half decode started from.
        emitted: its generated ids (end-of-text included when it stopped there: that step can flip too).
        suppress, begin_suppress: see ``find_flips``.

    Raises:
        ValueError: no prompt, or more ids than the decoder holds (from ``forced_logits``).
    """
    if not prompt_ids:
        raise ValueError("precision_flips needs the decoder prompt")
    if not emitted:
        return []
    encoded = reference.encode(model_inputs)
    ids = list(prompt_ids) + list(emitted)
    logits = reference.forced_logits(encoded, ids[:-1])  # row i: the logits after ids[: i + 1]
    first = len(prompt_ids) - 1
    return find_flips(logits[first:first + len(emitted)], emitted, suppress, begin_suppress)


def speech_flips(model: Any, reference: Any, audio, finished: Any, language: str | None = None,
                 task: str = "transcribe") -> list[Flip]:
    """Precision flips of one Whisper window decoded by ``model`` (a half-precision
    ``core.tasks.speech.SpeechModel``), against ``reference`` (the same model in float32).

    Args:
        audio: float32 16 kHz samples, at most 30 s (one window).
        finished: the run's ``Finished`` event (its ``token_ids``; end-of-text is added when
            ``reason == "eos"``).
        language: the run's language (None: the one the model detected, else "en").

    Raises:
        ValueError: audio longer than one 30 s window.
    """
    import numpy as np

    samples = np.asarray(audio, dtype=np.float32)
    if len(samples) > 30 * 16_000:
        raise ValueError("precision flips are found for one window of at most 30 s")
    lw = reference._loaded
    language = language or getattr(model, "last_language", None) or "en"
    prompt = model.prompt(language if model.multilingual else "en", task).prompt_ids
    emitted = list(finished.token_ids) + ([lw.special.eot] if finished.reason == "eos" else [])
    return precision_flips(reference.backend, {"input_features": reference._features(samples)}, prompt, emitted,
                           lw.suppress_tokens, lw.begin_suppress_tokens)


def flips_line(name: str, dtype: str, flips: Sequence[Flip], steps: int) -> str:
    """The stderr summary: "decoding-explorer: whisper-tiny.en in bfloat16: 1 precision flip in 38 steps
    (step 12: 'a' -> float32 'the', margin 0.03 nats)"."""
    head = f"decoding-explorer: {name} in {dtype}: {len(flips)} precision flip{'s' if len(flips) != 1 else ''} " \
           f"in {steps} steps (float32 reads the same ids teacher-forced)"
    if flips:
        head += "; steps " + ", ".join(f"{f.step} ({f.token} -> float32 {f.float32_token}, margin {f.margin:.3f} "
                                       "nats)" for f in flips[:5]) + (" ..." if len(flips) > 5 else "")
    return head
