"""The distributions of one decoder step, and the source ids the chain's encoder stages read.

``Scorer`` is the logit-filter role of openai/whisper's loop: the hard rules give the raw
distribution, the processor chain the processed one (traced stage by stage for the
sampler-chain view), with the logit lens when asked. ``Engine.run`` and the speculative loop
(``core.speculative.loop``, one row of a verify call at a time) score every step with it.
"""

from __future__ import annotations

import torch

from core.backends.base import DecoderPrompt, EncoderOutput, StepOutput
from core.report import StepTensors


class Scorer:
    """The distributions of one step (the logit-filter role of openai/whisper's loop).

    Args:
        rules: the hard rules (suppressed tokens): the raw distribution has only these.
        processors: the rest of the chain (``core.processors``), traced stage by stage.
        uses_log_probs: the chain sees log-probabilities (beam search, as transformers').
        capture_lens: also score the logit lens (each layer's logits, with the hard rules).
        backend_name: named in the error when the backend gives no lens.
    """

    def __init__(self, rules, processors, uses_log_probs: bool, capture_lens: bool, backend_name: str):
        self.rules, self.processors = rules, processors
        self.uses_log_probs, self.capture_lens, self.backend_name = uses_log_probs, capture_lens, backend_name

    def score(self, input_ids: torch.Tensor, out: StepOutput) -> tuple[torch.Tensor, StepTensors]:
        """(the processed scores float32 (batch, vocab) the strategy chooses from, the step's
        ``StepTensors``: processed and raw probabilities, attention, stage outputs, lens).

        Raises:
            RuntimeError: the lens was asked for and the backend gives none.
        """
        # the raw distribution: logits with the hard rules alone
        raw_scores = self.rules(input_ids, out.logits)
        raw_probs = torch.softmax(raw_scores, dim=-1)
        # the processed scores (beam search works on log-probabilities), keeping each stage's
        # output for the sampler-chain view
        chain_input = (self.rules(input_ids, torch.log_softmax(out.logits, dim=-1)) if self.uses_log_probs
                       else raw_scores)
        self.processors.see_step(out)  # what a stage reads beyond the scores (DoLa: the lens)
        scores, stages = self.processors.trace(input_ids, chain_input)
        probs = torch.softmax(scores, dim=-1) if self.processors or self.uses_log_probs else raw_probs
        lens = self._lens_logp(input_ids, out.lens_logits) if self.capture_lens else None
        if self.capture_lens and lens is None:
            raise RuntimeError(f"{self.backend_name} gives no logit lens; turn capture_lens off")
        return scores, StepTensors(probs, raw_probs, out.cross_attention, stages, lens, self.processors.extras())

    def _lens_logp(self, input_ids: torch.Tensor, lens_logits: torch.Tensor | None) -> torch.Tensor | None:
        """The logit lens as log-probabilities, float32 (batch, layers, vocab): each layer's
        logits with the hard rules (as the raw distribution), log_softmax; None without a lens."""
        if lens_logits is None:
            return None
        b, n_layers, vocab = lens_logits.shape
        scores = self.rules(input_ids.repeat_interleave(n_layers, dim=0), lens_logits.reshape(b * n_layers, vocab))
        return torch.log_softmax(scores, dim=-1).reshape(b, n_layers, vocab)


def source_ids(encoded: EncoderOutput, prompt: DecoderPrompt) -> torch.Tensor | None:
    """The source token ids for the encoder stages of the chain, int64 (1, n), or None.

    The EOS id is left out: with it, the encoder no-repeat n-gram of size 1 would forbid
    ending (the source ends with EOS) and the encoder repetition penalty would push EOS.
    """
    ids = encoded.extras.get("source_ids")
    if ids is None:
        return None
    ids = torch.as_tensor(ids).reshape(1, -1)
    return ids[ids != prompt.eos_token_id].reshape(1, -1)
