"""Beam search with length penalty, as transformers' ``generate(num_beams=N)`` does it.

Follows transformers' vectorised beam search (``GenerationMixin._beam_search``,
defaults ``early_stopping=False``, ``do_sample=False``) step for step, so the chosen
sequence is identical:

1. scores = processors(log_softmax(logits)) + running beam log-probability
   (all beams but the first start at -1e9 so the first step does not pick duplicates);
2. take the 2 * num_beams best (beam, token) continuations over all beams;
3. the best ``num_beams`` unfinished continuations become the running beams (the KV
   cache is reordered by their parent beam);
4. continuations that end (EOS, or the max length) compete for the ``num_beams``
   finished slots with score ``sum log p / generated_len ** length_penalty``; only
   those among the top ``num_beams`` candidates may enter;
5. stop when no running beam can beat the worst finished one (the heuristic bound
   ``best running score / current_len ** length_penalty``), or at the max length.

Each hypothesis keeps a record per token (step, row, probabilities); the engine keeps
each step's per-row report (top-k, entropy, attention), so the best finished
hypothesis's StepEvents are built at the end.

The beam tree (``core.events.BeamNode``): every step records its 2 * num_beams
candidates as nodes (parent = the node of the beam they extend, root = the prompt, id 0)
with status "alive" (chosen in 3.), "finished" (entered the finished set in 4.) or
"pruned"; a finished node pushed out of the finished set later is re-sent as "pruned".
Recording costs one ``BeamNode`` per candidate (Python floats from three ``tolist``
calls per step), no tensors. Reference: Wu et al. 2016 (GNMT) for the
length penalty idea; transformers' exact formula divides by length ** length_penalty.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from core.events import BeamNode
from core.report import TokenRecord
from core.strategies.base import Result, Update

_NEG = -1.0e9  # transformers' "impossible" score


@dataclass(frozen=True)
class _Hyp:
    tokens: tuple[int, ...]
    records: tuple[TokenRecord, ...]
    log_prob: float  # cumulative processed log-probability
    node: int = 0  # its beam-tree node id (0 = the root, the prompt)


class BeamSearch:
    """Beam search over ``num_beams`` hypotheses (see the module docstring).

    Args:
        num_beams: beam width (>= 1).
        length_penalty: finished scores are divided by length ** length_penalty.
        group, row_offset: written into the beam-tree nodes (``BeamNode.group``, and
            ``row_offset`` added to ``BeamNode.row``), for diverse beam search's groups.
        node_ids: where node ids come from (shared by the groups of diverse beam
            search); default ``itertools.count(1)``.
        emit_root: send the root node (id 0) with the first step's nodes.

    Raises:
        ValueError: if ``num_beams`` < 1.
    """

    uses_log_probs = True

    def __init__(self, num_beams: int, length_penalty: float = 1.0, *, group: int = 0, row_offset: int = 0,
                 node_ids: Iterator[int] | None = None, emit_root: bool = True):
        if num_beams < 1:
            raise ValueError(f"num_beams must be >= 1, got {num_beams}")
        self.n = self.batch_size = int(num_beams)
        self.length_penalty = float(length_penalty)
        self.keep = 2 * self.n  # candidates kept per step: enough for n unfinished after 1 EOS each
        self.top_n_mask = torch.arange(self.keep) < self.n
        self.running_scores = torch.full((1, self.n), _NEG)
        self.running_scores[:, 0] = 0.0
        self.finished_scores = torch.full((1, self.n), _NEG)
        self.is_finished = torch.zeros((1, self.n), dtype=torch.bool)
        self.improvable = torch.ones((1, 1), dtype=torch.bool)
        self.running: list[_Hyp] = [_Hyp((), (), 0.0)] * self.n
        self.finished: list[_Hyp | None] = [None] * self.n
        self.t = 0
        self.group, self.row_offset = int(group), int(row_offset)
        self.node_ids = node_ids if node_ids is not None else itertools.count(1)
        self.emit_root = emit_root
        self.finished_nodes: dict[int, BeamNode] = {}  # the finished set's nodes, by id

    def start(self, prompt_ids: Sequence[int], eos_token_id: int, max_new_tokens: int) -> torch.Tensor:
        self.prompt_len = len(prompt_ids)
        self.eos_token_id, self.max_new_tokens = eos_token_id, max_new_tokens
        self.root = BeamNode(0, None, -1, int(prompt_ids[-1]), "", 0.0, 0.0, 0.0, "alive", self.row_offset, self.group)
        return torch.tensor([list(prompt_ids)] * self.n, dtype=torch.long)

    def update(self, input_ids, scores, probs, raw_probs, hidden_states=None) -> Update:
        n, t = self.n, self.t
        cur_len = self.prompt_len + t
        max_length = self.prompt_len + self.max_new_tokens
        vocab = scores.shape[-1]

        # 1. processed log-probabilities, accumulated over each beam
        total = (scores + self.running_scores[0, :, None]).reshape(1, -1)  # (1, n * vocab)

        # 2. the best 2n continuations over all beams
        cand_scores, cand_flat = torch.topk(total, k=self.keep)
        parents = (cand_flat // vocab)[0].tolist()
        tokens = (cand_flat % vocab)[0].tolist()
        cand_probs = probs.reshape(-1)[cand_flat[0]].tolist()
        cand_raw = raw_probs.reshape(-1)[cand_flat[0]].tolist()
        cand_total = cand_scores[0].tolist()
        ids = [next(self.node_ids) for _ in range(self.keep)]
        parent_ids = [self.running[p].node for p in parents]
        candidates = []
        for c, (p, tok) in enumerate(zip(parents, tokens)):
            parent = self.running[p]
            candidates.append(
                _Hyp(
                    parent.tokens + (tok,),
                    parent.records + (TokenRecord(t, p, tok, cand_probs[c], cand_raw[c]),),
                    cand_total[c],
                    ids[c],
                )
            )
        ended = [tok == self.eos_token_id or cur_len + 1 >= max_length for tok in tokens]
        ends = torch.tensor([ended])

        # 3. the best n unfinished continuations keep running
        running_scores = cand_scores + ends.to(torch.float32) * _NEG
        next_idx = torch.topk(running_scores, k=n)[1]
        self.running_scores = torch.take_along_dim(running_scores, next_idx, dim=1)
        self.running = [candidates[i] for i in next_idx[0].tolist()]
        beam_idx = torch.tensor([parents[i] for i in next_idx[0].tolist()], dtype=torch.long)

        # 4. finished continuations among the top n compete for the finished slots
        just_finished = ends & self.top_n_mask[None, :]
        normalized = cand_scores / ((cur_len + 1 - self.prompt_len) ** self.length_penalty)
        scored = normalized + (~self.improvable).to(torch.float32) * _NEG
        scored = scored + (~just_finished) * _NEG
        merged_scores = torch.cat((self.finished_scores, scored), dim=1)
        merged_hyps = self.finished + candidates
        merged_finished = torch.cat((self.is_finished, just_finished), dim=1)
        before = self._finished_ids()
        best = torch.topk(merged_scores, k=n)[1]
        self.finished_scores = torch.take_along_dim(merged_scores, best, dim=1)
        self.is_finished = torch.take_along_dim(merged_finished, best, dim=1)
        self.finished = [merged_hyps[i] for i in best[0].tolist()]

        # 5. stop when no running beam can still beat the worst finished one
        self.t = t + 1
        best_possible = self.running_scores[:, :1] / ((cur_len + 1 - self.prompt_len) ** self.length_penalty)
        worst_finished = torch.where(
            self.is_finished, torch.min(self.finished_scores, dim=1, keepdim=True)[0], _NEG
        )
        self.improvable = self.improvable & torch.any(best_possible > worst_finished, dim=-1, keepdim=True)
        done = not bool(self.improvable.any()) or bool(ends.all())

        nodes = self._nodes(t, scores, cand_flat, parents, parent_ids, tokens, cand_total, normalized, ids,
                            alive=[i for i in next_idx[0].tolist() if not ended[i]], before=before)
        next_ids = torch.cat([input_ids[beam_idx], torch.tensor([[h.tokens[-1]] for h in self.running])], dim=1)
        return Update(next_ids, beams=self._beams(), beam_idx=None if done else beam_idx, done=done,
                      nodes=nodes, best_node=self.best_hyp().node)

    def _finished_ids(self) -> set[int]:
        """Node ids of the hypotheses in the finished set now."""
        return {h.node for h, f in zip(self.finished, self.is_finished[0].tolist()) if f and h is not None}

    def _nodes(self, t, scores, cand_flat, parents, parent_ids, tokens, cand_total, normalized, ids, alive,
               before) -> list[BeamNode]:
        """This step's beam-tree nodes, best cumulative score first (the root before them
        at the first step), then the finished nodes pushed out of the finished set, re-sent
        as "pruned".

        Args:
            scores: float32 (n, vocab) the processed log-probabilities ranked (``logprob``);
            cand_flat: int64 (1, 2n) the candidates' flat (row * vocab + token) indices;
            parents / parent_ids: each candidate's beam row and that beam's node id;
            normalized: float32 (1, 2n) their length-normalised scores; alive: candidate
            indices that became running beams; before: the finished set's ids before.
        """
        after = self._finished_ids()
        logp = scores.reshape(-1)[cand_flat[0]].tolist()
        norm = normalized[0].tolist()
        alive_set = set(alive)
        nodes = [self.root] if self.emit_root and t == 0 else []
        for c, node_id in enumerate(ids):
            if c in alive_set:
                status = "alive"
            elif node_id in after:
                status = "finished"
            else:
                status = "pruned"
            nodes.append(BeamNode(node_id, parent_ids[c], t, tokens[c], "", logp[c], cand_total[c], norm[c], status,
                                  parents[c] + self.row_offset, self.group, tokens[c] == self.eos_token_id))
            if status == "finished":
                self.finished_nodes[node_id] = nodes[-1]
        for node_id in sorted(before - after):
            nodes.append(dataclasses.replace(self.finished_nodes.pop(node_id), status="pruned"))
        return nodes

    def _ids(self, h: _Hyp) -> list[int]:
        return [tok for tok in h.tokens if tok != self.eos_token_id]

    def _beams(self) -> tuple[list[tuple[list[int], float]], list[tuple[list[int], float]]]:
        running = [(self._ids(h), h.log_prob) for h in self.running]
        finished = [
            (self._ids(h), h.log_prob)
            for h, f in zip(self.finished, self.is_finished[0].tolist())
            if f and h is not None
        ]
        return running, finished

    def ranked_finished(self) -> list[tuple[float, list[int], float]]:
        """The finished hypotheses, best first: (length-penalised score
        ``log_prob / generated_len ** length_penalty``, the ranking key; generated ids
        without EOS; cumulative log-probability), as ``_beams`` lists them."""
        scores = self.finished_scores[0][self.is_finished[0]].tolist()
        return [(score, ids, lp) for score, (ids, lp) in zip(scores, self._beams()[1])]

    def best_hyp(self) -> _Hyp:
        """The hypothesis ``finalize`` returns if the search ends now: the best finished
        one, or the best running one if none finished (e.g. after a cancel)."""
        if bool(self.is_finished[0, 0]) and self.finished[0] is not None:
            return self.finished[0]
        return self.running[0]

    def finalize(self) -> Result:
        """The best finished hypothesis (or the best running one if none finished,
        e.g. after a cancel) and the records of its tokens up to EOS."""
        best = self.best_hyp()
        records: list[TokenRecord] = []
        reason = "max_tokens"
        for rec in best.records:
            if rec.token_id == self.eos_token_id:
                reason = "eos"
                break
            records.append(rec)
        return Result([r.token_id for r in records], reason, records)
