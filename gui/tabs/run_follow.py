"""How a run tab (``gui.tabs.run.RunTab``) itself follows its run (``gui.run_state.RunState``):
the views follow the run on their own (``gui.widgets.follow``); the tab adds one statistics
update per frame, keeps or drops the selection when another branch is shown, and titles the
token stream with the branch it shows.
"""

from __future__ import annotations

from typing import Any

from core.events import StepEvent


class RunFollower:
    """Connects ``tab``'s run's ``stepsAdded``, ``currentBranchChanged`` and ``cleared`` to the
    tab's statistics, selection, title and ``branch_replayed`` hook."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        tab.run.stepsAdded.connect(self._steps_added)
        tab.run.currentBranchChanged.connect(self._current_branch_changed)
        tab.run.cleared.connect(self.show_branch_title)  # a new run (or no input): the views start empty

    def _steps_added(self, _branch: int, steps: list[StepEvent]) -> None:
        """The current branch's steps of one frame: one statistics update."""
        self.tab.statsChanged.emit(self.tab.stats_dict(None))

    def _current_branch_changed(self, branch: int) -> None:
        """The views have shown the current branch's segments, steps and end again (they
        follow the run): the selection stays if the branch has that step, else the views
        follow the newest step."""
        tab = self.tab
        run = tab.run
        b = run.branch(branch)
        sel = run.selected()
        if sel is not None and sel in run:
            tab.select_step(sel)
        else:
            tab.follow_newest()
        if b.finished is not None:  # this branch's statistics are final
            tab.statsChanged.emit(tab.stats_dict(b.finished))
        self.show_branch_title()
        tabs = tab.inspector_tabs
        if not tabs.isTabVisible(tabs.indexOf(tab.speculation_view)) and run.rounds():
            tab.show_speculation(True)  # an opened exploration of a speculative run
        tab.branch_replayed(branch)

    def show_branch_title(self) -> None:
        """The token stream's title: which branch it shows."""
        run, stream = self.tab.run, self.tab.stream
        b = run.branch(run.current_branch())
        if b.is_root and not run.children(b.id):
            stream.title.setText("<b>Token stream</b> — click a token to inspect its step")
        else:
            what = "the original run" if b.is_root else f"branch {b.id} ({html_escape(b.label())})"
            stream.title.setText(f"<b>Token stream</b> — {what}")


def html_escape(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped for a rich-text label."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
