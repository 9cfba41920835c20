"""GUI latency bench (issue 22 "Interactivity"): after a finished decode, the time from a slider
move to the first new token shown, and the longest GUI-thread stall while the new run decodes.

One window, offscreen, torch on one thread (as the other benches). The Speech tab loads
whisper-base and decodes the bundled sample clip to the end; then, ``--moves`` times, the
Temperature slider moves one notch (up, then down, ...; a keyboard step, ``triggerAction``) and the
bench waits for that run to end.
Per move it records, on the GUI thread:
  - ``optionsChanged``: when the options panel emits the new options (a slider step emits at the
    next event-loop turn; before issue 22 it waited the panel's ``debounce_ms``, 250 ms);
  - ``cleared``: when the run view forgets the old run (the new run starts);
  - ``first token``: the first ``RunState.stepsAdded`` after the move (the frame that shows the
    new run's first token);
  - the longest gap between the ticks of a 10 ms QTimer from the move to the run's end (the
    stall probe of ``tests/bench/bench_gui_stall.py``, imported);
  - "turn CPU": the GUI thread's own CPU (``time.thread_time``) in its longest event-loop turn
    (one ``processEvents``): what a stall costs the app itself, whatever else loads the machine.
Prints each move and the medians: slider -> first token (the user's wait, debounce included),
optionsChanged -> first token (the decode side), and the longest stall, also less the GUI
thread's wait for a CPU (the kernel's schedstat: other processes' load, not the app). Then the
worst move's stalls over ``--stall-ms`` (50) with their cause: what the GUI thread ran, and the
other threads' frames around the gap (a GUI thread "blocked" waits for the GIL one of them holds).
Then model loads (``--no-switch`` skips them): the Speech tab switches to ``--switch-to`` (tiny.en)
and back, the Translation tab loads en-pt, then pt-en; each prints its longest stall and the
causes of the stalls over 100 ms (``bench_gui_stall.measure_load``). Figures only, no
pass/fail (goals: first token <= 100 ms after the move, no stall > 50 ms while decoding, no
stall > 100 ms while a model loads).

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_gui_latency.py [--moves N] [--model base]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QAbstractSlider, QApplication  # noqa: E402

from tests.bench import bench_gui_stall  # noqa: E402
from tests.bench.bench_gui_stall import StallMeter, measure_load, pump_until  # noqa: E402


class MoveTimes:
    """GUI-thread times (perf_counter seconds) of one slider move's consequences."""

    def __init__(self, tab) -> None:
        self.tab = tab
        self.moved = self.options = self.cleared = self.first = None
        tab.options_panel.optionsChanged.connect(self._options)
        tab.run.cleared.connect(self._cleared)
        tab.run.stepsAdded.connect(self._steps)

    def arm(self) -> None:
        self.moved, self.options, self.cleared, self.first = time.perf_counter(), None, None, None

    def _options(self, _opts) -> None:
        if self.moved is not None and self.options is None:
            self.options = time.perf_counter()

    def _cleared(self) -> None:
        if self.moved is not None and self.cleared is None:
            self.cleared = time.perf_counter()

    def _steps(self, _branch, steps) -> None:
        if self.moved is not None and self.first is None and steps:
            self.first = time.perf_counter()

    def ms(self, t: float | None) -> float:
        return float("nan") if t is None or self.moved is None else 1000.0 * (t - self.moved)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=5, help="slider moves after the first decode (default 5)")
    ap.add_argument("--model", default="base", help="Whisper model of the Speech tab (default base)")
    ap.add_argument("--slider", default="temperature", help="the options panel control to move (default temperature)")
    ap.add_argument("--stall-ms", type=float, default=50.0, help="explain the worst move's stalls over this (default 50)")
    ap.add_argument("--no-switch", action="store_true", help="skip the model switches after the moves")
    ap.add_argument("--switch-to", default="tiny.en", help="the Speech tab's other model for the switch (default tiny.en)")
    ap.add_argument("--profile-gui", type=int, default=0, metavar="N",
                    help="profile the GUI thread's CPU time over the moves (cProfile with time.thread_time) and "
                         "print the N costliest functions by total time")
    ap.add_argument("--gc-pauses", action="store_true",
                    help="time every garbage collection (gc.callbacks); the worst move's report says which long gaps hold one")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval(S) first (the app's own setting otherwise; Python's default 0.005 s)")
    args = ap.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    StallMeter.sampler_every = 0.005  # sample the GUI thread (and the others) to name a stall's cause
    StallMeter.gc_pauses = args.gc_pauses
    import torch

    torch.set_num_threads(1)
    app = QApplication.instance() or QApplication([])
    from gui.main_window import MainWindow

    settings = QSettings(str(ROOT / "runs" / "bench_gui_latency.ini"), QSettings.Format.IniFormat)
    settings.clear()
    win = MainWindow(settings=settings, autoload=False)
    win.resize(1280, 800)
    win.show()
    app.processEvents()
    from gui import gc_policy

    gc_policy.install(win)  # as gui/app.py does
    speech = win.speech_tab
    win.tabs.setCurrentWidget(speech)
    t0 = time.perf_counter()
    speech.load_model(args.model)
    if not pump_until(app, lambda: speech.model is not None and not speech.is_loading(), 300):
        print(f"whisper-{args.model} did not load in 300 s")
        return 1
    load_s = time.perf_counter() - t0
    speech.load_sample()
    t0 = time.perf_counter()
    pump_until(app, lambda: speech.stream.token_count() > 0 and not speech.is_decoding(), 300)
    first_s = time.perf_counter() - t0
    control = speech.options_panel.controls[args.slider]
    slider = control.slider
    print(f"whisper-{args.model}: load {load_s:.1f} s · sample decoded in {first_s:.1f} s "
          f"({speech.stream.token_count()} tokens) · options debounce {speech.options_panel.debounce_ms} ms · "
          f"switch interval {sys.getswitchinterval() * 1000:g} ms · "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    times = MoveTimes(speech)
    rows, meters = [], []
    print(f"{'move':>4} {args.slider:>12} {'options ms':>11} {'cleared ms':>11} {'1st token ms':>13} "
          f"{'opt->token':>11} {'longest stall':>14} {'less CPU wait':>14} {'turn CPU':>9} {'tokens':>7}",
          flush=True)
    profile = None
    if args.profile_gui:
        import cProfile

        profile = cProfile.Profile(time.thread_time)
    for i in range(args.moves):
        step = 1 if i % 2 == 0 else -1
        if not slider.minimum() <= slider.value() + step <= slider.maximum():
            step = -step
        pump_until(app, lambda: False, 0.3)  # a quiet moment between moves
        bench_gui_stall.TURN_CPU = turns = []
        if profile is not None:
            profile.enable()
        with StallMeter() as meter:
            times.arm()
            # the user's keyboard step (a value set by code waits the panel's debounce)
            slider.triggerAction(QAbstractSlider.SliderAction.SliderSingleStepAdd if step > 0
                                 else QAbstractSlider.SliderAction.SliderSingleStepSub)
            pump_until(app, lambda: times.first is not None, 60)
            pump_until(app, lambda: not speech.is_decoding() and speech.workers_idle(), 300)
        if profile is not None:
            profile.disable()
        bench_gui_stall.TURN_CPU = None
        gaps = np.diff(meter.ticks) * 1000.0
        sched = np.array(meter.sched) * 1000.0
        own = gaps - np.diff(sched[:, 1]) if len(sched) == len(meter.ticks) else gaps  # less the run-queue wait
        row = (times.ms(times.options), times.ms(times.cleared), times.ms(times.first),
               1000.0 * (times.first - times.options) if times.first and times.options else float("nan"),
               float(gaps.max()) if len(gaps) else float("nan"), float(own.max()) if len(own) else float("nan"),
               max((c for _t, c in turns), default=float("nan")))
        rows.append(row)
        meters.append(meter)
        print(f"{i + 1:>4} {control.value():>12.2f} {row[0]:>11.0f} {row[1]:>11.0f} {row[2]:>13.0f} {row[3]:>11.0f} "
              f"{row[4]:>14.0f} {row[5]:>14.0f} {row[6]:>9.0f} {speech.stream.token_count():>7}", flush=True)
    med = [statistics.median(r[i] for r in rows) for i in range(7)]
    print(f"median over {len(rows)} moves: slider -> first token shown {med[2]:.0f} ms (slider -> "
          f"optionsChanged {med[0]:.0f} ms included) · optionsChanged -> first token {med[3]:.0f} ms · "
          f"longest GUI stall while decoding {med[4]:.0f} ms (max {max(r[4] for r in rows):.0f} ms; less the GUI "
          f"thread's wait for a CPU: median {med[5]:.0f}, max {max(r[5] for r in rows):.0f} ms) · the GUI thread's "
          f"longest event-loop turn, its own CPU: median {med[6]:.0f}, max {max(r[6] for r in rows):.0f} ms · "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if profile is not None:
        import pstats

        stats = pstats.Stats(profile)
        print(f"GUI thread CPU over the {len(rows)} moves: {stats.total_tt * 1000:.0f} ms; costliest (total time):")
        stats.sort_stats("cumulative").print_stats(args.profile_gui)
    worst = max(range(len(rows)), key=lambda k: rows[k][5])
    StallMeter.stall_ms = args.stall_ms
    meters[worst].report(f"worst move ({worst + 1})", "while decoding; the stalls' causes:")
    if not args.no_switch:
        StallMeter.stall_ms = 100.0
        print("model loads (no stall > 100 ms is the goal):", flush=True)
        measure_load(app, speech, args.switch_to, "speech switch")
        measure_load(app, speech, args.model, "speech back")
        tr = win.translation_tab
        win.tabs.setCurrentWidget(tr)
        measure_load(app, tr, "en-pt", "transl 1st")
        measure_load(app, tr, "pt-en", "transl switch")
    for i in range(win.tabs.count()):
        win.tabs.widget(i).shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
