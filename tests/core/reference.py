"""Reference numbers for one decoded sequence, computed without our engine.

The model is run once on the whole sequence (teacher forcing, no KV cache, transformers'
own forward), and each step's logits go through transformers' own processors and warpers
(``transformers.generation.logits_process``) in the order ``generate()`` applies them:
repetition penalty, no-repeat-n-gram, suppress tokens, begin-suppress tokens, then, for
sampling only, temperature, top-k, top-p. Greedy and beam search apply no warpers
(``generate(do_sample=False)``); beam search applies the processors to
``log_softmax(logits)``, as transformers' beam search does.

``raw``: softmax of the logits with only the model's hard rules (suppress tokens).
``processed``: softmax of the processed scores (the distribution a token is chosen from).
``beam_logp``: the processed log-probabilities beam search adds to a hypothesis's score
(transformers' convention: not renormalised after suppression).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from transformers.generation import logits_process as tlp

from core.backends.base import DecoderPrompt
from core.events import TokenProb
from core.options import DecodingOptions


@dataclass
class RefStep:
    """Reference distributions (vocab,) for one free decoder step."""

    raw: torch.Tensor
    processed: torch.Tensor
    beam_logp: torch.Tensor


def teacher_forced_logits(model: Any, inputs: dict, decoder_ids: Sequence[int]) -> torch.Tensor:
    """float32 (len(decoder_ids), vocab): the logits after each decoder position, from one
    forward of ``model`` over the whole sequence."""
    inputs = {k: v for k, v in inputs.items() if k != "source_len"}
    with torch.no_grad():
        out = model(**inputs, decoder_input_ids=torch.tensor([list(decoder_ids)]), return_dict=True)
    return out.logits[0].float()


def _processors(options: DecodingOptions, prompt: DecoderPrompt) -> tuple[list, list, list]:
    """(penalties, hard rules, warpers) as transformers builds them."""
    penalties, rules, warpers = [], [], []
    if options.repetition_penalty != 1.0:
        penalties.append(tlp.RepetitionPenaltyLogitsProcessor(options.repetition_penalty))
    if options.no_repeat_ngram_size > 0:
        penalties.append(tlp.NoRepeatNGramLogitsProcessor(options.no_repeat_ngram_size))
    if prompt.suppress_tokens:
        rules.append(tlp.SuppressTokensLogitsProcessor(list(prompt.suppress_tokens)))
    if prompt.begin_suppress_tokens:
        rules.append(tlp.SuppressTokensAtBeginLogitsProcessor(list(prompt.begin_suppress_tokens),
                                                               len(prompt.prompt_ids)))
    if options.strategy == "sample":
        if options.temperature != 1.0:
            warpers.append(tlp.TemperatureLogitsWarper(options.temperature))
        if options.top_k > 0:
            warpers.append(tlp.TopKLogitsWarper(options.top_k))
        if options.top_p < 1.0:
            warpers.append(tlp.TopPLogitsWarper(options.top_p))
    return penalties, rules, warpers


def _apply(processors: list, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    for p in processors:
        scores = p(input_ids, scores.clone())
    return scores


def reference_steps(
    model: Any, inputs: dict, prompt: DecoderPrompt, token_ids: Sequence[int], options: DecodingOptions,
    with_eos: bool = False,
) -> list[RefStep]:
    """One ``RefStep`` per generated token (plus one for the EOS step if ``with_eos``)."""
    ids = list(prompt.prompt_ids) + list(token_ids)
    logits = teacher_forced_logits(model, inputs, ids)
    penalties, rules, warpers = _processors(options, prompt)
    n_prompt = len(prompt.prompt_ids)
    steps = []
    for t in range(len(token_ids) + int(with_eos)):
        input_ids = torch.tensor([ids[: n_prompt + t]])
        row = logits[n_prompt + t - 1][None]
        raw = torch.softmax(_apply(rules, input_ids, row), dim=-1)[0]
        beam_logp = _apply(penalties + rules, input_ids, torch.log_softmax(row, dim=-1))[0]
        if options.strategy == "beam" and options.num_beams > 1:
            processed = torch.softmax(beam_logp, dim=-1)
        else:  # greedy (beam width 1 included) and sampling process the logits themselves
            processed = torch.softmax(_apply(penalties + rules + warpers, input_ids, row)[0], dim=-1)
        steps.append(RefStep(raw, processed, beam_logp))
    return steps


def top_k_report(probs: torch.Tensor, k: int) -> list[tuple[int, float]]:
    """The k most probable (id, prob) of a (vocab,) distribution, probability-0 tokens left out."""
    values, ids = torch.topk(probs, min(k, probs.shape[-1]))
    return [(i, p) for i, p in zip(ids.tolist(), values.tolist()) if p > 0.0]


RTOL, ATOL = 1e-2, 1e-5
"""Tolerance of probabilities: the reference runs without a KV cache, and the tiny T5's
logits are ~100 in size, so float32 rounding moves its probabilities by ~0.1 %."""


def close(p: float, ref: float) -> bool:
    return math.isclose(p, ref, rel_tol=RTOL, abs_tol=ATOL)


def assert_same_topk(ours: list[TokenProb], ref: list[tuple[int, float]], what: str) -> None:
    """Same ids in the same order and the same probabilities (ids of near-ties may swap)."""
    assert len(ours) == len(ref), f"{what}: {len(ours)} tokens reported, reference keeps {len(ref)}"
    got = [(t.id, t.prob) for t in ours]
    for (i, p), (ri, rp) in zip(got, ref):
        assert close(p, rp), f"{what}: {got} != reference {ref}"
        if i != ri:  # only allowed for (almost) equal probabilities
            assert ri in [j for j, _ in got] and close(p, rp), f"{what}: {got} != {ref}"


def entropy(probs: torch.Tensor) -> float:
    return float(torch.special.entr(probs).sum())
