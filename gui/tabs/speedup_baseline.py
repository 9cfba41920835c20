"""Speculative decoding's measured speed-up (issue 21): ms per token of plain decoding on the
same input, in the same process, over the speculative run's.

The core leaves the measured speed-up to its caller (``SpeculationSummary.speedup_measured``
is None: it needs a plain run's time). :class:`SpeedupBaseline` keeps the ms per token of
every plain run the tab finished, by (input, settings, options), and, after a speculative run
that took at most :data:`AUTO_MAX_S` seconds with no plain time known, decodes the same input
once with the plain strategy its verification equals (greedy, or sampling with the same seed)
in the decode slot of the tab's run controller ("Measuring plain decoding for the speed-up…";
Esc stops it, any new run replaces it). Longer runs are measured on request
(:meth:`SpeedupBaseline.start`, the Speculation tab's Measure button).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.events import Finished
from core.options import DecodingOptions

#: a speculative run at most this long (decode seconds) is measured against plain decoding at once
AUTO_MAX_S = 10.0


def plain_options(options: DecodingOptions) -> DecodingOptions:
    """The plain decoding a speculative run's output equals: its verification's strategy
    (greedy, or sampling with the same seed), every other option the same."""
    return replace(options, strategy=options.chain_strategy)


class SpeedupBaseline:
    """Plain decoding's ms per token for a run tab's speculative runs (module docstring);
    a client of the tab's run controller while it measures."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self._ms: dict[tuple, float] = {}  # (input, settings, plain options) -> ms per token
        self._running: tuple | None = None  # the key being measured
        self.note = ""  # what the last measurement said (failed, cancelled), for the tab

    # ------------------------------------------------------------ keys and figures
    def _key(self, options: Any) -> tuple | None:
        if not isinstance(options, DecodingOptions):
            return None
        ident = self.tab.input_identity_or_none()
        if ident is None:
            return None
        settings = self.tab.input_settings() if hasattr(self.tab, "input_settings") else {}
        plain = plain_options(options) if options.strategy == "speculative" else options
        return ident, repr(sorted(settings.items())), plain

    def record(self, options: Any, fin: Finished) -> None:
        """Keep the ms per token of a finished plain run (a speculative or cancelled one, or
        one with no tokens, is not kept)."""
        if (isinstance(options, DecodingOptions) and options.strategy != "speculative" and not fin.cancelled
                and fin.stats.n_tokens):
            key = self._key(options)
            if key is not None:
                self._ms[key] = fin.stats.ms_per_token

    def plain_ms(self, options: Any) -> float | None:
        """Plain decoding's ms per token for a run with ``options`` on the current input, if measured."""
        key = self._key(options)
        return self._ms.get(key) if key is not None else None

    def speedup(self, options: Any, fin: Finished | None) -> float | None:
        """Plain ms per token / ``fin``'s (a speculative run with ``options``), or None."""
        if fin is None or fin.cancelled or not fin.stats.n_tokens or fin.stats.ms_per_token <= 0:
            return None
        base = self.plain_ms(options)
        return base / fin.stats.ms_per_token if base else None

    # ------------------------------------------------------------ measuring
    def running(self) -> bool:
        """A measurement runs."""
        return self._running is not None

    def wanted(self) -> bool:
        """The root run is a finished speculative run, short enough (and not long-form), with
        no plain time known."""
        run = self.tab.run
        root = run.branch(0)
        fin, options = root.finished, root.options
        lf = getattr(self.tab, "long_form", None)
        longform = lf is not None and lf.active()  # windows: on request only
        return (isinstance(options, DecodingOptions) and options.strategy == "speculative" and fin is not None
                and not fin.cancelled and fin.stats.n_tokens > 0 and fin.stats.decode_s <= AUTO_MAX_S
                and not longform and self.plain_ms(options) is None)

    def start(self) -> bool:
        """Decode the current input with the root run's plain options (decode slot). False
        when it cannot start now (no speculative run, the tab is busy, no input)."""
        tab = self.tab
        options = tab.run.branch(0).options
        key = self._key(options)
        if key is None or self.running() or tab.is_busy() or tab.controller.decoding_alive() or tab.model is None:
            return False
        try:
            fn = tab.decode_fn(plain_options(options))
        except (ValueError, RuntimeError) as exc:
            self.note = f"plain decoding could not start: {exc}"
            return False
        self._running = key
        self.note = ""
        tab.controller.start("decode", fn, self, name="speedup-baseline")
        tab.busyChanged.emit(True, f"Measuring plain {plain_options(options).strategy} decoding for the speed-up…")
        return True

    def cancel(self) -> bool:
        """Stop a measurement (Esc): the run shown keeps its end. True if one ran."""
        if not self.running():
            return False
        self.tab.controller.abort("decode")
        self._running = None
        self.note = "speed-up not measured (cancelled)"
        return True

    # the run controller's client
    def on_event(self, ev: Any) -> None:
        """A Finished of the plain run is kept; its steps are not shown."""
        if isinstance(ev, Finished) and self._running is not None and not ev.cancelled and ev.stats.n_tokens:
            self._ms[self._running] = ev.stats.ms_per_token

    def on_error(self, message: str) -> None:
        self.note = "speed-up not measured: " + message.splitlines()[0]

    def on_end(self, _handle: Any) -> None:
        self._running = None
        self.tab.speedup_measured()
