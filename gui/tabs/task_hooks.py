"""What a task tab supplies to the run tab (``gui.tabs.run.RunTab``): its input area, how to
load its model and decode its input, and the optional hooks (lanes, forks, what-ifs, its own
views). :class:`TaskHooks` holds each hook with its contract and its default; ``RunTab``
inherits it, and a task tab (``gui.tabs.speech``, ``gui.tabs.ocr``, ``gui.tabs.translation``)
overrides what it has.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from PySide6.QtWidgets import QWidget

from core.events import StepEvent
from core.options import DecodingOptions


class TaskHooks:
    """The hooks a task tab implements (``build_input``, ``load_model_object``,
    ``decode_fn``, ``has_input``) or may override (the rest); the defaults refuse or do
    nothing. ``title`` names the tab in the refusals."""

    title = "Task"

    def build_input(self) -> QWidget:
        """The input area (top left)."""
        raise NotImplementedError

    def has_input(self) -> bool:
        """True when there is something to decode."""
        raise NotImplementedError

    def load_model_object(self, name: str, progress: Callable[[str], None]) -> Any:
        """Load model ``name``; runs in a worker thread (import torch-using modules here).

        Raises:
            Exception: with a user message; shown in the banner.
        """
        raise NotImplementedError

    def decode_fn(self, options: DecodingOptions) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator for the current input and ``options``: called in the GUI
        thread, it captures the input/model state it needs (the GUI may change them) and
        returns ``gen(cancel)``, which runs in a worker thread and yields the model's events.

        Raises:
            ValueError, RuntimeError: the input cannot be decoded; shown in the banner.
        """
        raise NotImplementedError

    def lanes_fn(self, lanes: list[DecodingOptions]) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator that decodes the current input with each of ``lanes``'
        options side by side on one encoder pass per segment (the task model's
        ``decode_lanes``: ``LaneEvent`` s, then a ``LanesFinished``); called in the GUI
        thread, it captures what it needs (``gui.tabs.lanes``).

        Raises:
            ValueError, RuntimeError: the input cannot be decoded; shown in the banner.
        """
        raise RuntimeError(f"the {self.title} tab cannot run lanes")

    def configure_heatmap(self) -> None:
        """Set the heatmap's column axis (``self.heatmap.set_columns``)."""

    def model_loaded(self, model: Any) -> None:
        """Called in the GUI thread after a successful load (update pickers)."""

    def toggle_record(self) -> None:
        """Ctrl+R (tabs without recording ignore it)."""

    def rtf_applies(self) -> bool:
        """Whether RTF (processing time / audio duration) makes sense for this tab."""
        return False

    def exploring_refusal(self, what: str) -> str:
        """Why ``what`` ("Forks", "What-ifs", "Lanes") cannot run on the current run ("" if it
        can); a tab whose runs cannot be explored yet says why (the Speech tab's long-form)."""
        return ""

    def branch_replayed(self, branch: int) -> None:
        """Called after ``branch``'s events were shown again (refresh the tab's own views)."""

    def fork_fn(self, options: DecodingOptions, segment: int, forced_ids: tuple[int, ...],
                step_offset: int) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator that re-decodes segment ``segment`` of the current input
        with ``forced_ids`` forced after the task prompt, its steps numbered from
        ``step_offset`` (the segment's first step), asking to reuse the KV cache if
        :attr:`fork_reuse_cache` (called in the GUI thread; it captures what it needs). Its
        events: the segment's SegmentEvent, StepEvents, one Finished (the task model's
        ``fork``).

        Raises:
            ValueError, RuntimeError: the input cannot be forked (shown to the user).
        """
        raise RuntimeError(f"the {self.title} tab cannot fork yet")

    def whatif_fn(self, options: DecodingOptions, kind: str, original: list[StepEvent]
                  ) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator for a what-if of the current input (called in the GUI
        thread; it captures what it needs): ``kind`` "mask" runs the task model's
        ``what_if`` with :attr:`whatif_mask`, "prior" its ``no_input``; ``original`` is the
        scored branch's StepEvents.

        Raises:
            ValueError, RuntimeError: it cannot run (shown to the user).
        """
        raise RuntimeError(f"the {self.title} tab has no input what-ifs")

    def mask_changed(self, mask: Any) -> None:
        """The mask changed (None: cleared); the tab draws it on its input view."""

    def input_identity(self) -> tuple[str, str]:
        """(a description of the current input for people, a hash of its content)."""
        raise RuntimeError("no input")

    def input_settings(self) -> dict:
        """Task settings beside the options that shaped the run (language, region, ...), saved
        with an exploration for the record."""
        return {}

    def apply_input_settings(self, settings: dict) -> None:
        """Restore what :meth:`input_settings` saved (an exploration is opened); no decode."""
