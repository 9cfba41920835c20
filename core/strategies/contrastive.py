"""Contrastive search: Su et al. 2022, "A Contrastive Framework for Neural Text
Generation" (NeurIPS 2022, arXiv:2202.06417), as transformers' ``generate(penalty_alpha=,
top_k=)`` does it (``_contrastive_search``, ``_ranking_fast``).

At each step the candidates are the ``top_k`` most probable tokens v of the processed
distribution p(. | x_<t), and the one chosen maximises

    (1 - alpha) * p(v | x_<t)  -  alpha * max_j cos(h_v, h_j)

where h_v is the decoder's last-layer hidden state at v once v is fed, and h_j runs over
the hidden states of every earlier position (the forced prompt included). The second
term, the degeneration penalty, keeps the text away from what it already said; with
alpha = 0 the choice is the argmax of p: greedy search.

The strategy never calls the model, so the look-ahead is spread over two engine steps:
it decodes ``top_k`` rows side by side.

* engine step 0 feeds the prompt to all rows (identical); ``update`` keeps the prompt's
  hidden states as the context, takes the top-k of row 0's processed distribution and
  returns one row per candidate (prompt + candidate), cache rows ``[0] * k``;
* engine step t >= 1 has fed the k candidates: ``update`` scores them with their hidden
  states, emits the best one (its ``TokenRecord.step`` is t - 1, the step whose
  distribution it came from, and ``.row`` the row it came from there), appends its
  hidden state to the context, takes the new top-k from the chosen row's processed
  distribution (which already conditions on the chosen token) and returns k rows of
  context + chosen + candidate, cache rows ``[chosen] * k``.

A chosen EOS ends the run (it is not emitted); so does the ``max_new_tokens``-th token.
Each token costs one decoder step of k rows, so the candidates' forward pass of
transformers' implementation is the engine's next step and nothing is computed twice.
"""

from __future__ import annotations

from typing import Sequence

import torch

from core.report import TokenRecord
from core.strategies.base import Result, Update


def degeneration_penalty(candidates: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
    """max_j cos(candidates[i], context[j]) per candidate.

    Args:
        candidates: float32 (k, d_model): the candidates' hidden states.
        context: float32 (n, d_model): the earlier positions' hidden states, n >= 1.

    Returns:
        float32 (k,). A zero vector has cosine 0 with everything (no NaN).
    """
    c = candidates / candidates.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    h = context / context.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (c @ h.T).max(dim=-1).values


class ContrastiveSearch:
    """Contrastive search over ``top_k`` candidate rows (see the module docstring).

    Args:
        top_k: candidates per step (>= 1; 1 is greedy search whatever alpha).
        penalty_alpha: weight of the degeneration penalty, in [0, 1]; 0 = greedy search.

    Attributes:
        batch_size: ``top_k`` (rows of the KV cache).
        uses_log_probs: False: the processors see the logits, as in greedy search.

    Raises:
        ValueError: if ``top_k`` < 1 or ``penalty_alpha`` is outside [0, 1]; at the first
            ``update`` if ``top_k`` exceeds the vocabulary or the backend gives no
            hidden states (``StepOutput.hidden_states`` is None).
    """

    uses_log_probs = False

    def __init__(self, top_k: int, penalty_alpha: float):
        if int(top_k) != top_k or top_k < 1:
            raise ValueError(f"top_k must be an integer >= 1 for contrastive search, got {top_k}")
        if not 0.0 <= float(penalty_alpha) <= 1.0:
            raise ValueError(f"penalty_alpha must be in [0, 1] (0 = greedy search), got {penalty_alpha}")
        self.k = self.batch_size = int(top_k)
        self.alpha = float(penalty_alpha)
        self.tokens: list[int] = []
        self.reason = "max_tokens"
        self.context: torch.Tensor | None = None  # float32 (positions, d_model)
        self.t = 0

    def start(self, prompt_ids: Sequence[int], eos_token_id: int, max_new_tokens: int) -> torch.Tensor:
        """int64 (top_k, prompt_len): the prompt in every row."""
        self.eos_token_id, self.max_new_tokens = eos_token_id, max_new_tokens
        return torch.tensor([list(prompt_ids)] * self.k, dtype=torch.long)

    def update(self, input_ids, scores, probs, raw_probs, hidden_states=None) -> Update:
        """One engine step (see the module docstring).

        Args:
            input_ids: int64 (top_k, seq_len); scores: float32 (top_k, vocab), the
                processed logits (unused: the candidates are ranked by ``probs``);
                probs / raw_probs: float32 (top_k, vocab), softmax of the processed /
                raw scores; hidden_states: float32 (top_k, new_len, d_model).

        Returns:
            Update with input_ids int64 (top_k, seq_len + 1) (the chosen row's tokens
            plus one candidate per row), emitted = the token chosen from the previous
            step's distribution (None at step 0 and at EOS), beam_idx int64 (top_k,)
            = the chosen row everywhere.
        """
        t, self.t = self.t, self.t + 1
        if hidden_states is None:
            raise ValueError(
                "contrastive search needs the decoder's hidden states, and this backend gives "
                "none (StepOutput.hidden_states is None); use greedy or beam search with it"
            )
        if t == 0:
            if self.k > probs.shape[-1]:
                raise ValueError(f"top_k ({self.k}) exceeds the vocabulary ({probs.shape[-1]})")
            self.context = hidden_states[0].float()  # the prompt's positions, identical in every row
            if self.max_new_tokens < 1:
                return Update(input_ids, done=True)
            return self._candidates(input_ids, probs, raw_probs, 0)

        # the candidates were fed: their hidden states decide
        cand_h = hidden_states[:, -1].float()  # (k, d_model)
        penalty = degeneration_penalty(cand_h, self.context)
        score = (1.0 - self.alpha) * self.cand_probs - self.alpha * penalty
        # a candidate the processors removed (probability 0: suppressed, or fewer than k
        # tokens left) is never chosen, whatever its penalty
        score = score.masked_fill(self.cand_probs <= 0.0, float("-inf"))
        c = int(torch.argmax(score))  # ties: the more probable candidate (the lower row)
        token = int(self.cand_ids[c])
        if token == self.eos_token_id:  # EOS ends the run; it is not reported as a token
            self.reason = "eos"
            return Update(input_ids, done=True)
        record = TokenRecord(t - 1, self.parent_row, token, float(self.cand_probs[c]), float(self.cand_raw[c]))
        self.tokens.append(token)
        self.context = torch.cat([self.context, cand_h[c : c + 1]], dim=0)
        if len(self.tokens) >= self.max_new_tokens:
            return Update(input_ids[c : c + 1].expand(self.k, -1), emitted=record, done=True)
        update = self._candidates(input_ids, probs, raw_probs, c)
        update.emitted = record
        return update

    def _candidates(self, input_ids: torch.Tensor, probs: torch.Tensor, raw_probs: torch.Tensor, row: int) -> Update:
        """The top-k of row ``row``'s processed distribution, fed next in k copies of that row."""
        self.cand_probs, self.cand_ids = torch.topk(probs[row], self.k)
        self.cand_raw = raw_probs[row, self.cand_ids]
        self.parent_row = row
        context = input_ids[row : row + 1].expand(self.k, -1)
        next_ids = torch.cat([context, self.cand_ids[:, None].to(input_ids.dtype)], dim=1)
        return Update(next_ids, beam_idx=torch.full((self.k,), row, dtype=torch.long))

    def finalize(self) -> Result:
        """The emitted tokens (no prompt, no EOS) and why the run ended ("eos" or
        "max_tokens"); every token was already reported."""
        return Result(list(self.tokens), self.reason)
