"""End to end: the ``--json`` trace's ``"beam_tree"`` of beam runs on the real bundled
Bergamot en-pt model (issue 12: exactly one node per segment is ``best`` and the path to
it is the output)."""

import json
from collections import defaultdict

import pytest

from core.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("cli_reuses_models")]  # the session's en-pt, loaded once

FIELDS = {"id", "parent", "step", "token", "text", "logprob", "score", "status", "best"}


def _trace(capsys, argv) -> dict:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _check(trace: dict, beams_per_step: int, length_penalty: float = 1.0) -> None:
    """The tree invariants on a JSON trace (several segments allowed)."""
    nodes = trace["beam_tree"]["nodes"]
    by_id = {n["id"]: n for n in nodes}
    assert len(by_id) == len(nodes) and all(set(n) >= FIELDS for n in nodes)
    tokens_by_segment = defaultdict(list)
    for tok in trace["tokens"]:
        tokens_by_segment[tok["segment"]].append(tok["id"])
    segments = sorted({n["segment"] for n in nodes})
    assert segments == sorted(tokens_by_segment)
    for seg in segments:
        seg_nodes = [n for n in nodes if n["segment"] == seg]
        roots = [n for n in seg_nodes if n["parent"] is None]
        assert len(roots) == 1 and roots[0]["text"] == "" and roots[0]["status"] == "alive"
        # 2 x beams candidates per step
        per_step = defaultdict(list)
        for n in seg_nodes:
            if n["parent"] is not None:
                per_step[n["step"]].append(n)
        assert all(len(v) == 2 * beams_per_step for v in per_step.values())
        steps = sorted(per_step)
        assert steps == list(range(steps[0], steps[0] + len(steps))) and steps[0] == roots[0]["step"] + 1
        # every candidate extends a node alive at the previous step; scores add up
        for n in seg_nodes:
            if n["parent"] is None:
                continue
            parent = by_id[n["parent"]]
            assert parent["status"] == "alive" and parent["step"] == n["step"] - 1 and parent["segment"] == seg
            assert n["score"] == pytest.approx(parent["score"] + n["logprob"], abs=1e-4)
            generated = n["step"] - steps[0] + 1
            assert n["normalized"] == pytest.approx(n["score"] / generated ** length_penalty, rel=1e-4, abs=1e-5)
            assert n["status"] in ("alive", "pruned", "finished")
        # the finished set holds at most beams hypotheses (a finished node pushed out of it is "pruned")
        assert 1 <= sum(n["status"] == "finished" for n in seg_nodes) <= beams_per_step
        # exactly one best node; the non-EOS tokens on its path are the segment's output
        best = [n for n in seg_nodes if n["best"]]
        assert len(best) == 1
        node, path = best[0], []
        assert node["status"] == "finished"
        while node["parent"] is not None:
            path.append(node)
            node = by_id[node["parent"]]
        path.reverse()
        assert [n["token"] for n in path if not n["eos"]] == tokens_by_segment[seg]
        assert all(not n["eos"] for n in path[:-1])
        # the best path's nodes are the trace's tokens
        for n, tok in zip(path, (t for t in trace["tokens"] if t["segment"] == seg)):
            assert tok["id"] == n["token"] and tok["text"] == n["text"]


def test_beam_tree_of_one_sentence(capsys):
    trace = _trace(capsys, ["translate", "The weather is nice today.", "--strategy", "beam", "--beams", "4", "--json"])
    assert trace["text"].strip()
    assert sum(n["best"] for n in trace["beam_tree"]["nodes"]) == 1
    _check(trace, beams_per_step=4)
    statuses = {n["status"] for n in trace["beam_tree"]["nodes"]}
    assert statuses == {"alive", "pruned", "finished"}


def test_beam_tree_per_sentence(capsys):
    """Two sentences are two segments: one tree each, ids unique over the trace."""
    trace = _trace(capsys, ["translate", "Where is the train station? I bought 3 apples for $2.50.",
                            "--strategy", "beam", "--beams", "3", "--length-penalty", "0.6", "--json"])
    assert sum(n["best"] for n in trace["beam_tree"]["nodes"]) == 2
    _check(trace, beams_per_step=3, length_penalty=0.6)


def test_diverse_beam_tree_has_every_group(capsys):
    trace = _trace(capsys, ["translate", "The weather is nice today.", "--strategy", "diverse-beam", "--beams", "4",
                            "--beam-groups", "2", "--diversity-penalty", "1.0", "--json"])
    nodes = trace["beam_tree"]["nodes"]
    assert {n["group"] for n in nodes if n["parent"] is not None} == {0, 1}
    assert sum(n["best"] for n in nodes) == 1
    # groups may finish at different steps: check the counts of the first step only
    first = [n for n in nodes if n["parent"] == 0]
    assert len(first) == 2 * 4
    best = next(n for n in nodes if n["best"])
    by_id = {n["id"]: n for n in nodes}
    path = []
    while best["parent"] is not None:
        path.append(best)
        parent = by_id[best["parent"]]
        assert parent["parent"] is None or parent["group"] == best["group"]
        best = by_id[best["parent"]]
    assert [n["token"] for n in reversed(path) if not n["eos"]] == [t["id"] for t in trace["tokens"]]


def test_no_beam_tree_for_greedy(capsys):
    trace = _trace(capsys, ["translate", "The weather is nice today.", "--strategy", "greedy", "--json"])
    assert "beam_tree" not in trace
