"""The beam tree of a run, grown from its ``BeamEvent``s (plain Python, no torch, no Qt).

Beam search records every candidate it considers as a ``core.events.BeamNode``; each
``BeamEvent`` carries the nodes created at its step plus re-sent nodes whose status
changed, the step's per-row reports and the current best node. ``BeamTree.add`` upserts
them, so a view (or the CLI's ``--json`` trace) has at every moment:

    nodes[(segment, id)]      the latest version of every node
    children(segment, id)     the nodes extending a node, in creation order
    path(segment, id)         root .. node (the hypothesis; its tokens are the non-EOS
                              tokens after the root)
    best[segment]             the node the search returns (after the segment's last event)
    row_report(segment, node) the top-k / attention of the distribution the node's token
                              was chosen from

Node ids are unique within one segment (one ``Engine.run``); the root of every segment
is node 0 (the prompt). ``to_dict`` numbers the nodes of all segments into one id space
for the JSON trace.
"""

from __future__ import annotations

import math
from collections import defaultdict

from core.events import BeamEvent, BeamNode, BeamRowReport


class BeamTree:
    """Beam-tree nodes of every segment of a run, built from BeamEvents.

    Attributes:
        nodes: (segment, node id) -> the node's latest version.
        best: segment -> id of its best node (the current one while the search runs).
        rows: (segment, step) -> that step's row reports, indexed by row.
    """

    def __init__(self) -> None:
        self.nodes: dict[tuple[int, int], BeamNode] = {}
        self.best: dict[int, int] = {}
        self.rows: dict[tuple[int, int], list[BeamRowReport]] = {}
        self._children: dict[tuple[int, int], list[int]] = defaultdict(list)

    def __len__(self) -> int:
        return len(self.nodes)

    def add(self, event: BeamEvent) -> list[BeamNode]:
        """Take one BeamEvent; returns its nodes (new ones and status changes)."""
        seg = event.segment
        for node in event.nodes:
            key = (seg, node.id)
            if key not in self.nodes and node.parent is not None:
                self._children[(seg, node.parent)].append(node.id)
            self.nodes[key] = node
        if event.best is not None:
            self.best[seg] = event.best
        if event.rows:
            self.rows[(seg, event.step)] = list(event.rows)
        return list(event.nodes)

    def children(self, segment: int, node_id: int) -> list[BeamNode]:
        """The nodes extending ``node_id``, in creation order."""
        return [self.nodes[(segment, i)] for i in self._children.get((segment, node_id), ())]

    def path(self, segment: int, node_id: int) -> list[BeamNode]:
        """The nodes from the root to ``node_id``, both included."""
        out = []
        current: int | None = node_id
        while current is not None:
            node = self.nodes[(segment, current)]
            out.append(node)
            current = node.parent
        return out[::-1]

    def token_ids(self, segment: int, node_id: int) -> list[int]:
        """The generated ids of the hypothesis ending at ``node_id`` (root and EOS left out)."""
        return [n.token for n in self.path(segment, node_id)[1:] if not n.eos]

    def best_path(self, segment: int = 0) -> list[BeamNode]:
        """Root .. the segment's best node; empty if the segment has no tree."""
        return self.path(segment, self.best[segment]) if segment in self.best else []

    def row_report(self, segment: int, node: BeamNode) -> BeamRowReport | None:
        """The top-k and attention of the distribution ``node``'s token was chosen from
        (None for the root)."""
        rows = self.rows.get((segment, node.step))
        return rows[node.row] if rows and node.parent is not None and node.row < len(rows) else None

    def to_dict(self, digits: int = 6) -> dict:
        """The JSON trace's ``"beam_tree"``: ``{"nodes": [{"id", "parent", "step", "token",
        "text", "logprob", "score", "normalized", "status", "best", "eos", "row", "group",
        "segment"}]}`` ordered by segment and id. Ids are renumbered into one space over the
        segments (segment s's ids are offset by the number of ids the earlier segments
        used; a single segment keeps its ids). One node per segment has ``best`` true:
        the tokens of the non-EOS nodes on the path from its root to it are the segment's
        output; the root (``parent`` null) holds the last prompt token. A score that is
        not finite (a token a processor forbade, considered only when fewer than
        2 * beams tokens are allowed) is null."""
        out: list[dict] = []
        offset = 0
        for seg in sorted({s for s, _ in self.nodes}):
            ids = sorted(i for s, i in self.nodes if s == seg)
            best = self.best.get(seg)
            for i in ids:
                n = self.nodes[(seg, i)]
                out.append({
                    "id": offset + n.id,
                    "parent": None if n.parent is None else offset + n.parent,
                    "step": n.step,
                    "token": n.token,
                    "text": n.text,
                    "logprob": _number(n.logprob, digits),
                    "score": _number(n.score, digits),
                    "normalized": _number(n.normalized, digits),
                    "status": n.status,
                    "best": n.id == best,
                    "eos": n.eos,
                    "row": n.row,
                    "group": n.group,
                    "segment": seg,
                })
            offset += ids[-1] + 1
        return {"nodes": out}


def _number(x: float, digits: int) -> float | None:
    """``x`` rounded, or None if it is not finite (JSON has no infinities)."""
    return round(x, digits) if math.isfinite(x) else None
