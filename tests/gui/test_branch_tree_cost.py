"""The Branches view on a long run (issue 19 §3, GUI stalls): refreshing a growing branch's row
reads only the steps added since the last refresh, not the whole branch (it re-joined the text
and re-summed the log-probability of every token every 120 ms: the top handler in the hour's
long gaps). The row still says what the run's own queries say."""

from __future__ import annotations

from core.events import StepEvent, TokenProb
from gui.run_state import RunState
from gui.widgets import branch_tree as bt
from gui.widgets.fork_diff import fmt_logprob

WORDS = [" The", " quick", "▁brown", " fox", " jump", "s", " over", " the", " lazy", " dog", "."]


def _step(i: int, segment: int | None = None) -> StepEvent:
    tp = [TokenProb(7, WORDS[i % len(WORDS)], 0.9)]
    p = 0.5 + 0.45 * ((i * 37) % 11) / 11
    return StepEvent(step=i, token_id=7, text=WORDS[i % len(WORDS)], prob=p, raw_prob=p * 0.9, topk=tp,
                     raw_topk=tp, entropy=0.2, segment=i // 50 if segment is None else segment)


class _Reads:
    """Counts the step events RunState.branch_steps hands out (text, logprob use it too)."""

    def __init__(self, run: RunState, monkeypatch) -> None:
        self.n = 0
        real = run.branch_steps

        def counted(branch: int):
            out = real(branch)
            self.n += len(out)
            return out

        monkeypatch.setattr(run, "branch_steps", counted)


def _grow(run: RunState, tree: bt.BranchTree, upto: int) -> None:
    start = run.branch_len(run.growing_branch())
    for i in range(start, upto):
        run.add(_step(i))
    tree.row_texts(run.growing_branch())


def _row_agrees(run: RunState, tree: bt.BranchTree, branch: int) -> None:
    row = tree.row_texts(branch)
    assert row[1] == fmt_logprob(run.logprob(branch)) and row[2] == str(run.branch_len(branch))
    shown = run.text(branch) if run.branch(branch).is_root else tree.shown_text(branch)
    if len(shown) <= bt.TEXT_CHARS:
        assert row[3] == shown
    else:
        assert row[3] == shown[:bt.TEXT_CHARS] + "…"
    text = run.text(branch)
    tail = text if len(text) <= bt.TIP_CHARS else "…" + text[-bt.TIP_CHARS:]
    assert tree.item(branch).toolTip(3).endswith("\n" + tail)


def test_a_refresh_reads_only_the_new_steps_however_long_the_run(qtbot, monkeypatch):
    run = RunState()
    tree = bt.BranchTree(run)
    qtbot.addWidget(tree)
    reads = _Reads(run, monkeypatch)
    per_refresh = {}
    for n in (100, 3000):
        _grow(run, tree, n)
        before = reads.n
        run.add(_step(n))
        tree.row_texts(0)
        per_refresh[n] = reads.n - before
    assert per_refresh[100] == per_refresh[3000] == 0, per_refresh
    _row_agrees(run, tree, 0)


def test_the_row_follows_retractions_replacements_and_forks(qtbot):
    run = RunState()
    tree = bt.BranchTree(run)
    qtbot.addWidget(tree)
    _grow(run, tree, 40)
    _row_agrees(run, tree, 0)  # short: the whole text
    _grow(run, tree, 1200)
    _row_agrees(run, tree, 0)  # long: the text column's start, the tooltip's end
    assert run.retract(23, 1150) == 50  # a long-form attempt taken back
    _row_agrees(run, tree, 0)
    _grow(run, tree, 1210)
    run.add(_step(1205, segment=24))  # a step replaced
    _row_agrees(run, tree, 0)
    run.fork(0, 30, [5], " cat")
    run.add(_step(30))
    for i in range(31, 700):
        run.add(_step(i))
    _row_agrees(run, tree, 1)
    run.set_current(1)
    _row_agrees(run, tree, 0)
    run.set_growing(0)
    _grow(run, tree, 1300)
    _row_agrees(run, tree, 0) or _row_agrees(run, tree, 1)
    run.clear()
    _grow(run, tree, 5)
    _row_agrees(run, tree, 0)
