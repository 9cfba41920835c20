"""Diverse (group) beam search: Vijayakumar et al. 2016, "Diverse Beam Search: Decoding
Diverse Solutions from Neural Sequence Models" (arXiv:1610.02424), with the Hamming
diversity term as transformers 4.x implemented it (``HammingDiversityLogitsProcessor``
and ``GenerationMixin._group_beam_search``, removed from transformers 5).

The ``num_beams`` rows are split into ``num_beam_groups`` groups of
``num_beams // num_beam_groups`` consecutive rows (group g holds rows
``g * size .. (g + 1) * size - 1``). Each group is an ordinary ``BeamSearch`` over its
rows. At every step the groups are decoded in order, and group g's processed
log-probabilities are lowered by

    diversity_penalty * (how many times each token was chosen at this step by groups < g)

(the tokens of the running beams the earlier groups just selected), so later groups are
pushed away from what earlier groups picked. With ``diversity_penalty == 0`` every group
is exactly ``BeamSearch(size)`` on its own rows (all groups then coincide).

Differences from transformers 4.x, on purpose:

* the penalty is applied after the engine's processors (repetition penalty,
  no-repeat-ngram, suppressed tokens); transformers applied it first. Only the
  repetition penalty is affected by the order (it rescales the penalised score);
* a finished group picks nothing, so it penalises nothing (transformers padded a
  finished group with pad tokens, which then penalised the pad token for later groups);
* each group's search (ranking, the finished slots, the stopping bound) is this
  project's ``BeamSearch``, i.e. transformers' vectorised beam search.

The reported probabilities (``TokenRecord.prob``, the StepEvents' top-k) are those of the
engine's processed distribution, without the diversity term: the term depends on what
other groups chose, not on the hypothesis. The hypotheses' cumulative scores include it,
as in transformers.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

import torch

from core.strategies.base import Result, Update
from core.strategies.beam import BeamSearch


class DiverseBeamSearch:
    """Group beam search with Hamming diversity (see the module docstring).

    Args:
        num_beams: rows decoded side by side (all groups together), >= 1.
        num_beam_groups: groups, >= 1, dividing ``num_beams``.
        diversity_penalty: >= 0; subtracted from a group's log-probability of a token
            once per selection of that token by an earlier group at the same step.
        length_penalty: each group's finished scores are divided by
            length ** length_penalty (as ``BeamSearch``); also ranks the groups' finished
            hypotheses against each other.

    Attributes:
        batch_size: ``num_beams``.
        group_size: ``num_beams // num_beam_groups``.
        groups: one ``BeamSearch(group_size, length_penalty)`` per group.

    Raises:
        ValueError: if ``num_beams`` or ``num_beam_groups`` < 1, ``num_beams`` is not a
            multiple of ``num_beam_groups``, or ``diversity_penalty`` is negative or not
            finite.
    """

    uses_log_probs = True

    def __init__(self, num_beams: int, num_beam_groups: int, diversity_penalty: float,
                 length_penalty: float = 1.0):
        if num_beams < 1:
            raise ValueError(f"num_beams must be >= 1, got {num_beams}")
        if num_beam_groups < 1:
            raise ValueError(f"num_beam_groups must be >= 1, got {num_beam_groups}")
        if num_beams % num_beam_groups:
            raise ValueError(
                f"num_beams ({num_beams}) must be a multiple of num_beam_groups ({num_beam_groups}): "
                "every group gets num_beams // num_beam_groups beams"
            )
        if not 0.0 <= float(diversity_penalty) < float("inf"):
            raise ValueError(f"diversity_penalty must be a finite number >= 0 (0 = off), got {diversity_penalty}")
        self.batch_size = int(num_beams)
        self.num_groups = int(num_beam_groups)
        self.group_size = self.batch_size // self.num_groups
        self.diversity_penalty = float(diversity_penalty)
        self.length_penalty = float(length_penalty)
        node_ids = itertools.count(1)  # one beam tree: node ids unique over the groups, one root
        self.groups = [
            BeamSearch(self.group_size, length_penalty, group=g, row_offset=g * self.group_size,
                       node_ids=node_ids, emit_root=g == 0)
            for g in range(self.num_groups)
        ]
        self.group_done = [False] * self.num_groups

    def _rows(self, g: int) -> slice:
        return slice(g * self.group_size, (g + 1) * self.group_size)

    def start(self, prompt_ids: Sequence[int], eos_token_id: int, max_new_tokens: int) -> torch.Tensor:
        """int64 (num_beams, prompt_len): the prompt in every row."""
        self.eos_token_id = eos_token_id
        return torch.cat([b.start(prompt_ids, eos_token_id, max_new_tokens) for b in self.groups], dim=0)

    def update(self, input_ids, scores, probs, raw_probs, hidden_states=None) -> Update:
        """One step of every unfinished group, in group order.

        Args:
            input_ids: int64 (num_beams, seq_len); scores: float32 (num_beams, vocab),
                processed log-probabilities; probs / raw_probs: float32 (num_beams,
                vocab), recorded with the tokens; hidden_states: unused.

        Returns:
            Update with input_ids int64 (num_beams, seq_len + 1) (a finished group's rows
            are carried on with an EOS appended, their outputs ignored), beam_idx int64
            (num_beams,) (each group's reordering, offset to its rows; identity for a
            finished group), beams = (the running beams of the groups decoded at this
            step (not those finished earlier), group by group, each group best first; every group's finished hypotheses, best
            length-penalised score first), done when every group is done; nodes: the
            beam-tree nodes of the groups decoded at this step, group by group (all
            groups share the root, node 0, and one id counter; ``BeamNode.group`` says
            which group); best_node: the node ``finalize`` would return now.
        """
        vocab = scores.shape[-1]
        chosen: list[int] = []  # tokens the earlier groups selected at this step
        next_ids, beam_idx, running, nodes = [], [], [], []
        for g, beam in enumerate(self.groups):
            rows = self._rows(g)
            offset = g * self.group_size
            if self.group_done[g]:
                eos = input_ids.new_full((self.group_size, 1), self.eos_token_id)
                next_ids.append(torch.cat([input_ids[rows], eos], dim=1))
                beam_idx.append(torch.arange(offset, offset + self.group_size))
                continue
            group_scores = scores[rows]
            if self.diversity_penalty > 0.0 and chosen:
                counts = torch.bincount(torch.tensor(chosen, dtype=torch.long), minlength=vocab)
                group_scores = group_scores - self.diversity_penalty * counts.to(group_scores.dtype)
            u = beam.update(input_ids[rows], group_scores, probs[rows], raw_probs[rows])
            self.group_done[g] = u.done
            next_ids.append(u.input_ids)
            local = u.beam_idx if u.beam_idx is not None else torch.arange(self.group_size)
            beam_idx.append(local + offset)
            chosen.extend(u.input_ids[:, -1].tolist())
            running.extend(u.beams[0])
            nodes.extend(u.nodes)
        done = all(self.group_done)
        finished = sorted(
            (h for b in self.groups for h in b.ranked_finished()), key=lambda h: h[0], reverse=True
        )
        beams = (running, [(ids, lp) for _, ids, lp in finished])
        return Update(torch.cat(next_ids, dim=0), beams=beams,
                      beam_idx=None if done else torch.cat(beam_idx), done=done,
                      nodes=nodes, best_node=self.groups[self._best_group()].best_hyp().node)

    def _best_group(self) -> int:
        """The group whose best hypothesis ``finalize`` returns (see there)."""
        best_g, best_score = None, float("-inf")
        for g, beam in enumerate(self.groups):
            ranked = beam.ranked_finished()
            if ranked and ranked[0][0] > best_score:
                best_g, best_score = g, ranked[0][0]
        if best_g is None:
            best_g = max(range(self.num_groups), key=lambda g: (self.groups[g].running[0].log_prob, -g))
        return best_g

    def finalize(self) -> Result:
        """The best finished hypothesis over all groups by length-penalised score (the
        first group wins a tie), as transformers' ``BeamSearchScorer.finalize`` chose
        over the groups; if no group finished (a cancel), the best running hypothesis
        by cumulative score. Its records' rows are rows of the whole batch."""
        best_g = self._best_group()
        result = self.groups[best_g].finalize()
        offset = best_g * self.group_size
        result.records = [dataclasses.replace(r, row=r.row + offset) for r in result.records]
        return result
