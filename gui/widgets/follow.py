"""How a view of a run follows the run's model (``gui.run_state.RunState``), as napari's
views connect to their model's events in ``__init__``.

A view that shows the current branch's steps calls :func:`follow_run` in its constructor;
it then gets every step once per frame (``stepsAdded``, never one signal per token), the
segments between them, the selection, and is redrawn from the run's steps when another
branch becomes the current one or steps are taken back. Nobody feeds it by hand, and it
never reaches into another view.

The view provides ``append_steps(steps)``, ``select_step(step | None)``, ``clear()`` and,
with ``segments=True``, ``handle(segment_event)``.

Beyond the steps, a view subscribes to the run's other signals in its own ``__init__``:
``branchFinished`` (a branch's end: the token stream's final text, the beam tree's best
path), ``marksChanged`` (the what-ifs' marks), ``beamsAdded`` / ``roundsAdded`` (once per
frame). Marks drawn on the input's axis (timestamps, long-form windows) find their plots
through the tab's ``gui.widgets.column_axis.ColumnAxis`` (``follow_plots``). The per-token
``stepAdded`` is for bookkeeping that must see every branch (the branch tree's sums), never
for drawing (``tests/gui/test_views_follow_frames.py``).

A new view is then one file, and one line in the run tab that builds it with the run and
adds it to the inspector (``gui.inspector.InspectorTabs.add_view``).
"""

from __future__ import annotations

from typing import Any

from core.events import StepEvent


def follow_run(run: Any, view: Any, *, segments: bool = True, replay: bool = True) -> None:
    """Connect ``view`` to ``run``'s signals (module docstring). ``segments``: the view
    takes the SegmentEvents (``handle``); ``replay``: it is redrawn from the run's steps when
    the current branch changes or steps are taken back."""

    def added(_branch: int, steps: list[StepEvent]) -> None:
        view.append_steps(steps)
        sel = run.selected()
        if sel is not None and any(ev.step == sel for ev in steps):
            view.select_step(sel)  # the selected step arrived (the selection outlives a run)

    run.stepsAdded.connect(added)
    if segments:
        run.segmentAdded.connect(lambda _branch, ev: view.handle(ev))
    run.selectionChanged.connect(view.select_step)
    run.cleared.connect(view.clear)
    if not replay:
        return

    def rebuild(*_args: Any) -> None:
        view.clear()
        steps: list[StepEvent] = []
        for ev in run.replay():
            if isinstance(ev, StepEvent):
                steps.append(ev)
                continue
            if steps:
                view.append_steps(steps)
                steps = []
            if segments:
                view.handle(ev)
        if steps:
            view.append_steps(steps)
        sel = run.selected()
        view.select_step(sel if sel is not None and sel in run else None)

    run.currentBranchChanged.connect(rebuild)
    run.stepsRetracted.connect(lambda branch, _step: rebuild() if branch == run.current_branch() else None)
