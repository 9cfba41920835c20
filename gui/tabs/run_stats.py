"""The run tab's statistics for the status bar (``gui.tabs.run.RunTab.statsChanged``): the
live count of the running decode's tokens, the dictionary the window shows, and
:class:`StatusBarState`, what the tab last told the status bar (the window shows it again when
the tab becomes the current one) and the measured speculative speed-up.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from core.events import Finished


class LiveCount:
    """The running decode's tokens so far and when it started (``time.perf_counter`` s)."""

    def __init__(self) -> None:
        #: when the running (or last) decode started, or None before any
        self.t_first: float | None = None
        #: tokens of the running (or last) decode so far
        self.n = 0

    def start(self, t0: float | None = None) -> None:
        """A run starts at ``t0`` (None keeps the last start): count from 0."""
        if t0 is not None:
            self.t_first = t0
        self.n = 0

    def reset(self) -> None:
        """No run (the input changed): nothing counted, no start."""
        self.t_first = None
        self.n = 0

    def elapsed(self) -> float:
        """Seconds since the start (0.0 before any)."""
        return time.perf_counter() - self.t_first if self.t_first is not None else 0.0


def stats_dict(model: Any, fin: Finished | None, live: LiveCount, rtf_applies: Callable[[], bool]) -> dict:
    """The statistics for the status bar: ``fin``'s (a finished run), or live ones (``fin``
    None: ms per token and tokens per second of ``live`` so far). Keys ``model``, ``dtype`` (the
    model's compute type, "float32" or "int8", None for a model without one), ``device``,
    ``live``, ``encode_ms``, ``ms_per_token``, ``tokens_per_s``, ``rtf`` (None unless
    ``rtf_applies()``, asked of a finished run only), ``n_tokens`` and, of a finished run,
    ``encoder_cached`` and ``speculative`` (``SpeculationSummary.to_dict()`` of a speculative
    run, else None)."""
    d: dict[str, Any] = {
        "model": getattr(model, "name", None) if model is not None else None,
        "dtype": getattr(model, "dtype", None) if model is not None else None,
        "device": str(getattr(model, "device", "cpu")).upper(),
        "live": fin is None,
        "encode_ms": None,
        "ms_per_token": None,
        "tokens_per_s": None,
        "rtf": None,
        "n_tokens": live.n,
    }
    if fin is not None:
        st = fin.stats
        d.update(
            encode_ms=1000.0 * st.encode_s,
            ms_per_token=st.ms_per_token,
            tokens_per_s=st.tokens_per_s,
            rtf=st.rtf if rtf_applies() else None,
            n_tokens=st.n_tokens,
            encoder_cached=st.encoder_cached,
        )
        spec = getattr(st, "speculative", None)
        d["speculative"] = spec.to_dict() if spec is not None else None
    elif live.t_first is not None and live.n:
        dt = time.perf_counter() - live.t_first
        d.update(ms_per_token=1000.0 * dt / live.n, tokens_per_s=live.n / dt if dt > 0 else None)
    return d


class StatusBarState:
    """What a run tab (``gui.tabs.run.RunTab``) last told the status bar: it keeps the tab's
    ``last_stats``, ``busy_message`` and ``progress`` up to date from the tab's
    ``statsChanged``, ``busyChanged`` and ``progressChanged``, and adds the measured
    speculative speed-up (the tab's ``baseline``, ``gui.tabs.speedup_baseline``) to the
    statistics."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        tab.statsChanged.connect(self._remember_stats)
        tab.busyChanged.connect(self._remember_busy)
        tab.progressChanged.connect(self._remember_progress)

    def _remember_stats(self, d: dict) -> None:
        self.tab.last_stats = dict(d)

    def _remember_busy(self, busy: bool, message: str) -> None:
        self.tab.busy_message = message if busy else ""
        if not busy:
            self.tab.progress = None

    def _remember_progress(self, done: int, total: int) -> None:
        self.tab.progress = (done, total)

    def stats(self, fin: Finished | None) -> dict:
        """The tab's statistics (:func:`stats_dict`: ``fin``'s, or live ones), with the
        measured speed-up of a speculative root run when it was measured."""
        tab = self.tab
        d = stats_dict(tab.model, fin, tab.live, tab.rtf_applies)
        spec = d.get("speculative")
        measured = self.measured_speedup(fin)
        if spec and spec.get("speedup_measured") is None and measured is not None:
            d["speculative"] = {**spec, "speedup_measured": measured}
        return d

    def measured_speedup(self, fin: Finished | None) -> float | None:
        """The root run's speculative speed-up over plain decoding of this input, if measured
        (None for another run's ``fin``, or None)."""
        root = self.tab.run.branch(0)
        return self.tab.baseline.speedup(root.options, fin) if fin is not None and fin is root.finished else None

    def speedup_measured(self) -> None:
        """The plain run timing a speculative run ended: the status bar and the Speculation
        tab show the measured speed-up."""
        tab = self.tab
        fin = tab.run.branch(0).finished
        if fin is not None and tab.run.current_branch() == 0:
            tab.statsChanged.emit(tab.stats_dict(fin))
        if tab.baseline.note:
            tab.statusMessage.emit(tab.baseline.note)
        tab.speculation_view.refresh()
        if not tab.is_busy():
            tab.busyChanged.emit(False, "")
