"""GUI-thread stalls on the real models (issue 9 §3, issue 19 §3): the longest gap between
the ticks of a 10 ms QTimer on the GUI thread while the window loads a model and decodes
long inputs, and the memory a 1-hour recording takes.

Cases (one window, offscreen, torch on one thread as in the other benches; ``--case`` runs
some of them alone):
  - ``load``: the Speech tab loads whisper-base (the app's first start) and decodes the
    bundled sample;
  - ``switch``: model switches: the Speech tab loads tiny.en, then base; the Translation tab
    en-pt, then pt-en (each load with the stall meter on; the first load of a tab imports
    torch and the backend, the switch is what a user does later);
  - ``text``: the Translation tab translates ~100 kB of English (the sample text and test
    sentences repeated, ~1,600 sentences) for ``--seconds`` of decoding, then Cancel;
  - ``text1mb``: the Translation tab is given 1 MB of English on ONE line (~19,000
    sentences, no newline) and translates it for ``--seconds``, then Cancel (issue 19 §3);
  - ``audio``: the Speech tab decodes 10 minutes of espeak-ng speech with tiny.en for
    ``--seconds``, then Cancel;
  - ``hour``: the Speech tab opens ``--audio-minutes`` (default 60) of espeak-ng speech (a
    16-bit wav file, through the tab's open path as a user opens one: read and kept as int16
    on the "open" worker) and decodes it long-form with whisper-base to the end (or
    ``--hour-seconds`` of decoding, then Cancel). Prints the memory curve: resident memory (RSS) every ``--rss-every``
    seconds of audio decoded, then one line: before the recording, after the open (what it
    added, the audio kept and its dtype, the peak while opening), the end, the peaks while
    decoding (sampled, and the process's VmHWM, reset after the open) and the slope in MB
    per second of audio and kB per token;
  - ``image``: the OCR tab opens a 12000×12000 PNG with one 64 px line of DejaVu Sans and
    reads it (up to ``--image-seconds``), then Cancel.
Prints, per case: the longest gap (ms), the 99th percentile gap, the number of gaps over
100 ms, and what was decoded. With ``--stall-stacks`` a thread samples the GUI thread's
Python stack every 5 ms and, per case, names what the GUI thread was doing during the gaps
over ``--stall-ms``: the handler (the first frame under the event loop) and the innermost
frame of the app's own code, with the milliseconds sampled in each (what takes the time,
even on a machine whose other load inflates the gaps), and for the longest gaps the other
threads' CPU time in the gap and where they were (a GUI thread "blocked" in a gap waits for
the GIL that one of them holds: a loader thread's import or parser names the cause). ``--profile-gui N`` profiles the GUI
thread's CPU time (``time.thread_time``: neither waits for the GIL nor other processes'
load count) and prints the N costliest functions. The goal is no gap over 100 ms, and at most 1.5 GB for the
1-hour recording with base. Not a pass/fail test.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_gui_stall.py \
        [--case hour --audio-minutes 10] [--seconds S] [--stall-stacks] [--profile-gui 30]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import threading
import time
from collections import Counter

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PySide6.QtCore import QElapsedTimer, QSettings, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

CASES = ("load", "switch", "text", "text1mb", "audio", "hour", "image")


def rss_mb() -> float:
    """This process's resident memory (VmRSS), MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def hwm_mb() -> float:
    """The peak resident memory of this process so far (VmHWM), MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1000
    return float("nan")


def reset_hwm() -> bool:
    """Start the process's peak resident memory (VmHWM) again from now (Linux: ``clear_refs``
    5); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def anon_mb() -> float:
    """The anonymous part of the resident memory (RssAnon: the heap, arrays, tensors), MB;
    the rest is mapped files (shared libraries: torch's CUDA build maps ~400 MB of them)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1000
    return float("nan")


def _where(code, line: int) -> str:
    path = pathlib.Path(code.co_filename)
    try:
        path = path.relative_to(ROOT)
    except ValueError:
        path = pathlib.Path(path.name)
    return f"{path}:{line} {code.co_name}"


def _own(filename: str) -> bool:
    """A frame of the app's own code (gui/, core/), not the bench's."""
    return filename.startswith((str(ROOT / "gui"), str(ROOT / "core")))


class StackSampler:
    """Samples the GUI (main) thread's Python stack every ``every`` seconds on a daemon
    thread: ``samples`` holds (time, handler, innermost own frame, innermost frame) with
    "handler" the first frame called from the bench's event loop (``app.processEvents``),
    "own" the innermost frame in gui/ or core/ and "innermost" the deepest Python frame
    (a Qt or numpy call there holds the time, or waits for the GIL)."""

    def __init__(self, every: float = 0.005) -> None:
        self.every = every
        self.samples: list[tuple[float, str, str, str]] = []
        # the other threads at each sample: (time, [(thread name, CPU s so far, innermost own frame,
        # innermost frame, outermost own frame)]); a thread holding the GIL in one long C call shows
        # the call's line in the samples around the gap and the CPU it took
        self.others: list[tuple[float, list[tuple[str, float, str, str, str]]]] = []
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-sampler", daemon=True)

    def start(self) -> "StackSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        bench = __file__
        while not self._stop.wait(self.every):
            frame = sys._current_frames().get(self._main)
            t = time.perf_counter()
            if frame is None:
                continue
            chain = []
            while frame is not None:
                chain.append(frame)
                frame = frame.f_back
            chain.reverse()  # outermost first
            handler = own = ""
            for i, f in enumerate(chain):
                if f.f_code.co_filename == bench and i + 1 < len(chain) and chain[i + 1].f_code.co_filename != bench:
                    handler = _where(chain[i + 1].f_code, chain[i + 1].f_lineno)
                if _own(f.f_code.co_filename):
                    own = _where(f.f_code, f.f_lineno)
            inner = _where(chain[-1].f_code, chain[-1].f_lineno)
            self.samples.append((t, handler, own, inner))
            self.others.append((t, self._others()))
            # hold no frame until the next sample: a frame keeps its locals alive (a replaced
            # model among them, which the window's gc policy would then collect in full)
            frame = chain = f = None

    def _others(self) -> list[tuple[str, float, str, str, str]]:
        """Every other live thread (not the GUI thread, not this one): its name, CPU seconds so
        far (the kernel's schedstat), innermost app frame, innermost frame, outermost app frame."""
        frames = sys._current_frames()
        known = {th.ident: th for th in threading.enumerate()}
        out = []
        for ident, f in frames.items():  # a QThread running Python is here, not always in threading
            if ident in (self._main, threading.get_ident()):
                continue
            th = known.get(ident)
            native = th.native_id if th is not None else None  # (a _DummyThread's is its own thread's)
            name = th.name if native is not None else f"thread {ident % 100000}"
            cpu = thread_cpu_s(native) if native is not None else float("nan")
            inner = _where(f.f_code, f.f_lineno)
            own = outer = ""
            while f is not None:
                if _own(f.f_code.co_filename):
                    outer = _where(f.f_code, f.f_lineno)
                    own = own or outer
                f = f.f_back
            out.append((name, cpu, own, inner, outer))
        frames = f = None
        # every other thread's CPU together (a QThread's own figure is unknown where Python
        # names it by a stale ident); where in Python is unknown for threads running no Python
        skip = {threading.main_thread().native_id, threading.get_native_id()}
        try:
            tids = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:
            tids = []
        out.append(("(all other threads)", {t: thread_sched_s(t) for t in tids if t not in skip}, "", "", ""))
        return out

    def during(self, t0: float, t1: float) -> list[tuple[float, str, str, str]]:
        return [s for s in self.samples if t0 <= s[0] <= t1]

    def others_during(self, t0: float, t1: float) -> list[tuple[float, list]]:
        """The other threads' samples from the last one at or before ``t0`` to the first at or
        after ``t1`` (a thread that held the GIL for the whole gap is seen only at its ends)."""
        ts = [o[0] for o in self.others]
        import bisect

        i = max(0, bisect.bisect_right(ts, t0) - 1)
        j = min(len(ts), bisect.bisect_left(ts, t1) + 1)
        return self.others[i:j]


def thread_sched_s(native_id: int | None) -> tuple[float, float]:
    """A thread's (seconds on a CPU, seconds waiting on the run queue for one) so far
    (/proc/self/task/<tid>/schedstat), NaNs where unknown."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as f:
            run, wait, _n = f.read().split()
        return int(run) / 1e9, int(wait) / 1e9
    except (OSError, ValueError, TypeError):
        return float("nan"), float("nan")


def thread_cpu_s(native_id: int | None) -> float:
    """A thread's CPU seconds so far (/proc/self/task/<tid>/schedstat), NaN where unknown."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, TypeError):
        return float("nan")


class GcPauses:
    """Times Python's garbage collections (``gc.callbacks``): (start, milliseconds, generation,
    objects collected) for each one, on whatever thread ran it (with the GIL held, every
    thread waits for a collection, the GUI thread too)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int, int]] = []
        self.cpu: list[float] = []  # the collecting thread's CPU ms per collection (wall ms less other load)
        self._t0 = self._c0 = 0.0

    def start(self) -> "GcPauses":
        import gc

        gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        import gc

        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0, self._c0 = time.perf_counter(), time.thread_time()
        else:
            self.cpu.append((time.thread_time() - self._c0) * 1000)
            self.pauses.append((self._t0, (time.perf_counter() - self._t0) * 1000, info["generation"],
                                info.get("collected", 0)))

    def during(self, t0: float, t1: float) -> list[tuple[float, float, int, int]]:
        return [p for p in self.pauses if t0 - p[1] / 1000 <= p[0] <= t1]

    def report(self) -> None:
        if not self.pauses:
            print("  gc: no collections", flush=True)
            return
        by_gen = {g: [p[1] for p in self.pauses if p[2] == g] for g in (0, 1, 2)}
        cpu_gen = {g: [c for p, c in zip(self.pauses, self.cpu) if p[2] == g] for g in (0, 1, 2)}
        print("  gc pauses: " + " · ".join(
            f"gen {g}: {len(ms)} collections, longest {max(ms, default=0):.0f} ms "
            f"(CPU {max(cpu_gen[g], default=0):.0f}), {sum(ms):.0f} ms in all"
            for g, ms in by_gen.items()), flush=True)


def gui_schedstat() -> tuple[float, float]:
    """The calling thread's (seconds on a CPU, seconds waiting on the run queue for one) from
    /proc/thread-self/schedstat: a gap's wall time minus both is time the thread slept or was
    blocked (waiting for the GIL, or the event loop's own waits)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            run, wait, _n = f.read().split()
        return int(run) / 1e9, int(wait) / 1e9
    except (OSError, ValueError):
        return float("nan"), float("nan")


class StallMeter:
    """Records the ticks of a 10 ms QTimer on the GUI thread; gaps between them are stalls.
    With a :class:`StackSampler` it also says what the GUI thread did during the stalls."""

    sampler_every: float | None = None  # set by --stall-stacks
    stall_ms: float = 100.0
    gc_pauses: bool = False  # set by --gc-pauses

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self.sched: list[tuple[float, float]] = []  # the GUI thread's (on CPU, on the run queue) s at each tick
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        self.sampler: StackSampler | None = None
        self.gc: GcPauses | None = None

    def _tick(self) -> None:
        self.ticks.append(time.perf_counter())
        self.sched.append(gui_schedstat())

    def __enter__(self):
        self.ticks = [time.perf_counter()]
        self.sched = [gui_schedstat()]
        self.timer.start()
        if self.sampler_every:
            self.sampler = StackSampler(self.sampler_every).start()
        if self.gc_pauses:
            self.gc = GcPauses().start()
        return self

    def __exit__(self, *exc):
        self.timer.stop()
        self._tick()
        if self.sampler is not None:
            self.sampler.stop()
        if self.gc is not None:
            self.gc.stop()

    def report(self, name: str, extra: str = "") -> None:
        gaps = np.diff(self.ticks) * 1000.0
        at = self.ticks[int(np.argmax(gaps))] - self.ticks[0]
        print(f"{name:<12} longest {gaps.max():7.0f} ms (at {at:.1f} s) · p99 {np.percentile(gaps, 99):5.0f} ms · "
              f">100 ms: {int((gaps > 100).sum()):4d} of {len(gaps)} gaps · {extra}", flush=True)
        self.report_sched(gaps)
        if self.sampler is not None:
            self.report_stacks(gaps)
        if self.gc is not None:
            self.gc.report()
            for rank, i in enumerate([i for i in np.argsort(-gaps) if gaps[i] > self.stall_ms][:5]):
                inside = self.gc.during(self.ticks[i], self.ticks[i + 1])
                what = ", ".join(f"gen {g} {ms:.0f} ms" for _t, ms, g, _n in inside) or "no collection"
                print(f"   gap #{rank + 1} ({gaps[i]:.0f} ms at {self.ticks[i] - self.ticks[0]:.1f} s): {what}", flush=True)

    def report_sched(self, gaps: np.ndarray) -> None:
        """Where the GUI thread's time went in the gaps over ``stall_ms`` (from the kernel's
        schedstat): on a CPU (the app's work), on the run queue (other processes had the CPUs:
        the machine's load), or neither (blocked: the GIL held by another thread, or idle)."""
        if len(self.sched) != len(self.ticks) or np.isnan(self.sched[0][0]):
            return
        sched = np.array(self.sched) * 1000.0
        # each gap less its wait for a CPU: the gap on a machine with no other load
        own = gaps - np.diff(sched[:, 1])
        print(f"  less the GUI thread's wait for a CPU (other load): longest {own.max():.0f} ms · "
              f"p99 {np.percentile(own, 99):.0f} ms · >100 ms: {int((own > 100).sum())} of {len(own)} gaps", flush=True)
        long_ = [i for i in np.argsort(-gaps) if gaps[i] > self.stall_ms]
        if not long_:
            return
        run = np.array([sched[i + 1, 0] - sched[i, 0] for i in long_])
        wait = np.array([sched[i + 1, 1] - sched[i, 1] for i in long_])
        wall = gaps[long_]
        print(f"  GUI thread in the {len(long_)} gaps over {self.stall_ms:.0f} ms ({wall.sum():.0f} ms): on a CPU "
              f"{run.sum():.0f} ms · waiting for a CPU (machine load) {wait.sum():.0f} ms · blocked (GIL, waits) "
              f"{(wall - run - wait).sum():.0f} ms", flush=True)
        for rank in range(min(5, len(long_))):
            print(f"   gap #{rank + 1} {wall[rank]:.0f} ms: on CPU {run[rank]:.0f} · run queue {wait[rank]:.0f} · "
                  f"blocked {wall[rank] - run[rank] - wait[rank]:.0f}", flush=True)

    def report_stacks(self, gaps: np.ndarray, top: int = 12) -> None:
        """What the GUI thread did during the gaps over ``stall_ms``: sampled milliseconds per
        handler, per innermost own frame, and the longest gap's samples."""
        every = self.sampler.every * 1000
        long_ = [i for i in np.argsort(-gaps) if gaps[i] > self.stall_ms]
        by_handler, by_own, by_inner = Counter(), Counter(), Counter()
        for i in long_:
            for _t, handler, own, inner in self.sampler.during(self.ticks[i], self.ticks[i + 1]):
                by_handler[handler or "(event loop: Qt's own work, no Python handler)"] += every
                by_own[own or "-"] += every
                by_inner[inner] += every
        print(f"  stalls over {self.stall_ms:.0f} ms: {len(long_)}, {gaps[long_].sum():.0f} ms in all; "
              f"GUI-thread samples every {every:.0f} ms in them:", flush=True)
        for title, counts in (("handler", by_handler), ("innermost app frame", by_own), ("innermost frame", by_inner)):
            print(f"   by {title}:")
            for key, ms in counts.most_common(top):
                print(f"     {ms:7.0f} ms  {key}")
        for rank, i in enumerate(long_[:3]):
            seen = Counter((h, o) for _t, h, o, _i in self.sampler.during(self.ticks[i], self.ticks[i + 1]))
            parts = "; ".join(f"{h or '(Qt)'} > {o or '-'} ×{n}" for (h, o), n in seen.most_common(4))
            print(f"   gap #{rank + 1}: {gaps[i]:.0f} ms at {self.ticks[i] - self.ticks[0]:.1f} s: {parts}", flush=True)
            for line in self.gap_cause(i):
                print(f"      {line}", flush=True)

    def gap_cause(self, i: int) -> list[str]:
        """The other threads during gap ``i`` (the GUI thread blocked there waits for the GIL one
        of them holds): per thread, the CPU milliseconds it ran in the gap and where it was (the
        samples at the gap's ends and inside it: innermost frame < innermost app frame < its
        outermost app frame), busiest thread first."""
        t0, t1 = self.ticks[i], self.ticks[i + 1]
        samples = self.sampler.others_during(t0, t1)
        if len(samples) < 2:
            return ["(no samples of the other threads)"]
        first = {name: cpu for name, cpu, *_ in samples[0][1]}
        last = {name: cpu for name, cpu, *_ in samples[-1][1]}
        where: dict[str, Counter] = {}
        for _t, threads in samples:
            for name, _cpu, own, inner, outer in threads:
                where.setdefault(name, Counter())[(inner, own, outer)] += 1
        every = "(all other threads)"
        if every in first and every in last:  # per thread id: only the threads alive at both ends
            a, b = first.pop(every), last.pop(every)
            cpu = {every: 1000 * sum(b[t][0] - a[t][0] for t in b if t in a)}
            # their wait for a CPU: a GUI thread "blocked" on the GIL while its holder waits for a
            # CPU is the machine's load, not the holder's work
            queued = 1000 * sum(b[t][1] - a[t][1] for t in b if t in a)
        else:
            cpu, queued = {}, float("nan")
        cpu.update({n: 1000 * (last[n] - first[n]) for n in last if n in first})
        lines = []
        for name in sorted(where, key=lambda n: -np.nan_to_num(cpu.get(n, 0.0)))[:4]:
            (inner, own, outer), n = where[name].most_common(1)[0]
            if name == "(all other threads)":
                lines.append(f"all other threads: CPU {cpu.get(name, float('nan')):.0f} ms · waiting for a CPU "
                             f"{queued:.0f} ms (from {1000 * (samples[0][0] - t0):+.0f} to "
                             f"{1000 * (samples[-1][0] - t1):+.0f} ms around the gap)")
                continue
            lines.append(f"{name}: CPU {cpu.get(name, float('nan')):.0f} ms in [{1000 * (samples[0][0] - t0):+.0f}, "
                         f"{1000 * (samples[-1][0] - t1):+.0f} ms] around the gap; at {inner} < {own or '-'} < {outer or '-'} "
                         f"({n} of {len(samples)} samples)")
        return lines


#: the GUI thread's CPU milliseconds per event-loop turn (``app.processEvents`` in
#: :func:`pump_until`), with the turn's start (perf_counter s), while a list is set here
TURN_CPU: list[tuple[float, float]] | None = None


def pump_until(app: QApplication, done, timeout_s: float, tick=None) -> bool:
    t = QElapsedTimer()
    t.start()
    while not done():
        if TURN_CPU is not None:  # the turn's own CPU: neither other load's CPU waits nor GIL waits count
            t0, c0 = time.perf_counter(), time.thread_time()
            app.processEvents()
            TURN_CPU.append((t0, 1000.0 * (time.thread_time() - c0)))
        else:
            app.processEvents()
        if tick is not None:
            tick()
        time.sleep(0.001)
        if t.elapsed() > timeout_s * 1000:
            return False
    return True


def english_unit() -> str:
    from tests.core.test_marian_tiny import EN

    sample = (ROOT / "assets" / "samples" / "text_en.txt").read_text()
    return sample.strip() + "\n" + " ".join(EN) + "\n"


def case_load(app, win, args) -> None:
    speech = win.speech_tab
    with StallMeter() as m:
        speech.load_model("base")
        pump_until(app, lambda: speech.model is not None, 300)
        speech.load_sample()
        pump_until(app, lambda: speech.stream.token_count() > 0 and not speech.is_decoding(), 300)
    m.report("model load", f"whisper-base load + sample decode, {speech.stream.token_count()} tokens")


def measure_load(app, tab, model: str, label: str, settle_s: float = 0.5) -> float:
    """Load ``model`` in ``tab`` (``tab.load_model``, as the model picker does) with the stall
    meter on, until the model is the tab's and ``settle_s`` more (what the window does once a
    model is ready: the views, the garbage-collection policy); print the stalls and their
    causes. Returns the longest gap, ms."""
    app.processEvents()
    with StallMeter() as m:
        t0 = time.perf_counter()
        tab.load_model(model)
        pump_until(app, lambda: tab.model is not None and not tab.is_loading(), 300)
        took = time.perf_counter() - t0
        pump_until(app, lambda: False, settle_s)
    m.report(label, f"{getattr(tab.model, 'name', model)} loaded in {took:.1f} s")
    return float(np.diff(m.ticks).max() * 1000.0)


def case_switch(app, win, args) -> None:
    """A model switch in the Speech tab (tiny.en, then base) and the Translation tab (en-pt,
    then pt-en); the first load of each tab is printed too (it imports torch / the backend)."""
    speech = win.speech_tab
    win.tabs.setCurrentWidget(speech)
    if speech.model is None:
        measure_load(app, speech, "tiny.en", "speech 1st")
    measure_load(app, speech, "base" if speech.model.name != "whisper-base" else "tiny.en", "speech switch")
    tr = win.translation_tab
    win.tabs.setCurrentWidget(tr)
    if tr.model is None:
        measure_load(app, tr, "en-pt", "transl 1st")
    measure_load(app, tr, "pt-en" if tr.model.name != "pt-en" else "en-pt", "transl switch")


def _translate(app, win, args, name: str, text: str, what: str) -> None:
    tr = win.translation_tab
    win.tabs.setCurrentWidget(tr)
    if tr.model is None:
        tr.load_model("en-pt")
        pump_until(app, lambda: tr.model is not None, 120)
    before = rss_mb()
    with StallMeter() as m:
        t0 = time.perf_counter()
        tr.set_text(text)
        tr._text_timer.stop()
        tr.request_decode()
        pump_until(app, lambda: not tr.is_decoding(), args.seconds)
        n = tr.stream.token_count()
        tr.cancel()
        pump_until(app, tr.workers_idle, 30)
        took = time.perf_counter() - t0
    m.report(name, f"{what}, {n} tokens in {took:.0f} s, then Cancel · RSS {before:.0f} -> {rss_mb():.0f} MB")


def case_text(app, win, args) -> None:
    unit = english_unit()
    text = unit * (100_000 // len(unit) + 1)
    _translate(app, win, args, "long text", text, f"{len(text) / 1000:.0f} kB")


def case_text1mb(app, win, args) -> None:
    unit = " ".join(english_unit().split())  # one line: every newline a space
    text = " ".join([unit] * (1_000_000 // (len(unit) + 1) + 1))[:1_000_000]
    _translate(app, win, args, "1 MB line", text, f"{len(text) / 1e6:.1f} MB on one line")


def speech_audio(seconds: float) -> np.ndarray:
    """``seconds`` of espeak-ng speech (the test sentences, repeated), float32 16 kHz."""
    from tests.core.test_marian_tiny import EN
    from tests.helpers.speech import synth_speech

    clip = synth_speech(" ".join(EN[:12]))
    n = int(seconds * 16000)
    return np.tile(clip, int(np.ceil(n / len(clip))))[:n]


def case_audio(app, win, args) -> None:
    speech = win.speech_tab
    win.tabs.setCurrentWidget(speech)
    audio = speech_audio(600)
    speech.load_model("tiny.en")
    pump_until(app, lambda: speech.model is not None, 120)
    with StallMeter() as m:
        speech.set_audio(audio, "10 minutes")
        pump_until(app, lambda: not speech.is_decoding(), args.seconds)
        n = speech.stream.token_count()
        speech.cancel()
        pump_until(app, speech.workers_idle, 60)
    m.report("long audio", f"10 min, tiny.en, {n} tokens in {args.seconds:.0f} s, then Cancel")


def decoded_seconds(speech) -> float:
    """How far the run has got in the audio: the end of the newest step's window, seconds
    (30 s windows in long-form; the last window ends at the audio's end)."""
    run = speech.run
    step = run.latest()
    ev = run.step(step) if step is not None else None
    if ev is None:
        return 0.0
    seg = {s.segment: s for s in run.segments()}.get(ev.segment)
    frames = ev.source_offset + (seg.source_len if seg is not None and seg.source_len else 0)
    return min(frames * 0.02, len(speech.audio) / 16000)


def case_hour(app, win, args) -> None:
    speech = win.speech_tab
    win.tabs.setCurrentWidget(speech)
    minutes = args.audio_minutes
    if speech.model is None or speech.model_combo.currentText().strip() != "base":
        speech.load_model("base")
        pump_until(app, lambda: speech.model is not None and not speech.is_loading(), 300)
    # the hour reaches the tab the way a user's file does: a 16 kHz 16-bit wav opened through the
    # tab's open path (read, resampled and kept as int16 on the "open" worker, not the GUI thread)
    import soundfile as sf

    path = pathlib.Path(tempfile.mkdtemp()) / f"{minutes:g}min.wav"
    sf.write(path, speech_audio(minutes * 60), 16000, subtype="PCM_16")
    base = rss_mb()
    reset_hwm()  # the peaks from here on are the recording's (not the model load's)
    curve: list[tuple[float, float, int, float]] = []  # (audio s decoded, RSS MB, tokens, RssAnon MB)
    next_mark = [0.0]

    def sample() -> None:
        s = decoded_seconds(speech)
        if s >= next_mark[0]:
            curve.append((s, rss_mb(), len(speech.run), anon_mb()))
            print(f"  {name}: {s:6.0f} s of audio decoded · RSS {curve[-1][1]:6.0f} MB (anon {curve[-1][3]:6.0f}) · "
                  f"{curve[-1][2]:5d} tokens · {time.perf_counter() - t0:5.0f} s", flush=True)
            next_mark[0] = s + args.rss_every

    name = "hour" if minutes == 60 else f"{minutes:g} min"
    with StallMeter() as m:
        t0 = time.perf_counter()
        speech.read_file(path)
        pump_until(app, lambda: speech.source_name == path.name and speech.has_input(), 300)
        opened = rss_mb()
        kept = speech.audio
        kept = f"{'int16' if getattr(kept, 'pcm', None) is not None else kept.dtype} {kept.nbytes / 1e6:.0f} MB"
        open_peak = hwm_mb()  # (with the file's samples and their float32 copy while it is read)
        reset_hwm()
        pump_until(app, lambda: not speech.is_decoding() and speech.workers_idle(), args.hour_seconds, tick=sample)
        cancelled = speech.is_decoding()
        if cancelled:
            speech.cancel()
            pump_until(app, speech.workers_idle, 120)
        took = time.perf_counter() - t0
    s_end = decoded_seconds(speech)
    curve.append((s_end, rss_mb(), len(speech.run), anon_mb()))
    end, peak = curve[-1][1], max(c[1] for c in curve)
    # the slope after the first 8 windows (240 s): the encoder-output and KV-cache LRUs are full by then
    # (after 60 s when the run got less far: a short --hour-seconds on a loaded machine)
    after_s = 240 if s_end >= 270 else 60
    late = [c for c in curve if c[0] >= after_s] or curve
    # least-squares slopes over the samples after that (RSS swings ~100 MB between windows: two
    # end points alone gave slopes of -1.5 to +0.8 MB/s on the same build)
    xs, ys, ts = (np.array([c[i] for c in late], float) for i in (0, 1, 2))
    fits = len(late) >= 3 and xs[-1] > xs[0] + 30
    slope = float(np.polyfit(xs, ys, 1)[0]) if fits else float("nan")
    per_token = float(np.polyfit(ts, ys, 1)[0]) * 1000 if fits and ts[-1] > ts[0] else float("nan")
    path.unlink()
    m.report(f"{name} audio", f"{minutes:g} min, base, {len(speech.run)} tokens, {s_end:.0f} s of audio decoded in "
                              f"{took:.0f} s{' then Cancel' if cancelled else ''}")
    extra = "" if s_end >= minutes * 60 - 30 else f" · extrapolated to 60 min: {end + slope * (3600 - s_end):.0f} MB"
    print(f"  memory: before the recording {base:.0f} MB · after open {opened:.0f} MB (+{opened - base:.0f}; "
          f"the audio kept: {kept}; peak while opening {open_peak:.0f}) · "
          f"end {end:.0f} MB (peak {peak:.0f} sampled, {hwm_mb():.0f} process peak while decoding) · after {after_s} s (fit): {slope:.3f} MB per s of audio "
          f"({per_token:.0f} kB per token){extra}", flush=True)


def case_image(app, win, args) -> None:
    from PIL import Image, ImageDraw, ImageFont

    ocr = win.ocr_tab
    win.tabs.setCurrentWidget(ocr)
    path = pathlib.Path(tempfile.mkdtemp()) / "huge.png"
    img = Image.new("L", (12000, 12000), 255)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 64)
    except OSError:
        font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 64)
    ImageDraw.Draw(img).text((400, 5000), "The quick brown fox jumps over the lazy dog.", fill=0, font=font)
    img.save(path)
    del img
    if ocr.model is None:
        ocr.load_model(ocr.default_model)
        pump_until(app, lambda: ocr.model is not None, 300)
    before = rss_mb()
    with StallMeter() as m:
        t0 = time.perf_counter()
        ocr.read_file(path)
        pump_until(app, lambda: ocr.has_input(), 120)
        pump_until(app, lambda: ocr.workers_idle() and not ocr.is_decoding(), args.image_seconds)
        done = ocr.workers_idle() and not ocr.is_decoding()
        if not done:
            ocr.cancel()
            pump_until(app, ocr.workers_idle, 60)
        took = time.perf_counter() - t0
    text = ocr.run.text(ocr.run.current_branch())
    m.report("huge image", f"12000×12000 PNG, {'read' if done else 'cancelled'} in {took:.0f} s: {text[:60]!r} · "
                           f"RSS {before:.0f} -> {rss_mb():.0f} MB")
    path.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", choices=CASES,
                    help="run only this case (repeatable; default: all, in the order listed)")
    ap.add_argument("--seconds", type=float, default=45.0, help="decoding time per long text/10-min input (default 45)")
    ap.add_argument("--audio-minutes", type=float, default=60.0, help="length of the 'hour' recording (default 60)")
    ap.add_argument("--hour-seconds", type=float, default=3600.0,
                    help="at most this much decoding on the 'hour' recording, then Cancel (default 3600)")
    ap.add_argument("--rss-every", type=float, default=60.0,
                    help="memory curve: one RSS sample per this many seconds of audio decoded (default 60)")
    ap.add_argument("--image-seconds", type=float, default=300.0, help="at most this long on the huge image (default 300)")
    ap.add_argument("--stall-stacks", action="store_true",
                    help="sample the GUI thread's stack every 5 ms and name what it did in the long gaps")
    ap.add_argument("--stall-ms", type=float, default=100.0, help="gaps longer than this are explained (default 100)")
    ap.add_argument("--profile-gui", type=int, default=0, metavar="N",
                    help="profile the GUI thread's CPU time (cProfile with time.thread_time: GIL waits and other "
                         "processes' load not counted) and print the N costliest functions by own and total time")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval(S) before the cases (Python's default 0.005 s): how long a thread "
                         "that wants the GIL waits for the one holding it")
    ap.add_argument("--cold", action="store_true",
                    help="do not import torch before the window (OMP_NUM_THREADS=1 instead of torch.set_num_threads): "
                         "the first model load imports it in the loader thread, as the app's first start does")
    ap.add_argument("--gc-pauses", action="store_true",
                    help="time every garbage collection (gc.callbacks) and say which long gaps hold one")
    ap.add_argument("--no-gc-policy", action="store_true",
                    help="leave Python's garbage collection as it is (the app freezes what is alive after the window "
                         "opens and after each model load, and the survivors of each full collection: "
                         "gui/gc_policy.py)")
    ap.add_argument("--no-memory-policy", action="store_true",
                    help="leave glibc's malloc as it is (the app fixes the mmap threshold at 1 MB and uses 2 "
                         "arenas: gui/memory_policy.py)")
    ap.add_argument("--gc-threshold", type=str, default=None, metavar="T0,T1,T2",
                    help="experiment: gc.set_threshold(T0, T1, T2) before the cases (Python's default 700,10,10)")
    args = ap.parse_args()
    StallMeter.gc_pauses = args.gc_pauses
    if args.gc_threshold:
        import gc

        gc.set_threshold(*(int(x) for x in args.gc_threshold.split(",")))
    if args.stall_stacks:
        StallMeter.sampler_every, StallMeter.stall_ms = 0.005, args.stall_ms
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    memory = {}
    if not args.no_memory_policy:
        from gui import memory_policy

        memory = memory_policy.install()  # as gui/app.py does, before any thread
    if args.cold:
        os.environ["OMP_NUM_THREADS"] = "1"  # torch reads it at its import, in the loader thread
    else:
        import torch

        torch.set_num_threads(1)
    app = QApplication.instance() or QApplication([])
    from gui.main_window import MainWindow

    settings = QSettings(str(ROOT / "runs" / "bench_gui_stall.ini"), QSettings.Format.IniFormat)
    settings.clear()
    win = MainWindow(settings=settings, autoload=False)
    win.resize(1280, 800)
    win.show()
    app.processEvents()
    if not args.no_gc_policy:
        from gui import gc_policy

        gc_policy.install(win)  # as gui/app.py does
    import gc

    print(f"gc: {'Python default' if args.no_gc_policy else 'the app policy'} · frozen objects "
          f"{gc.get_freeze_count()} · malloc: "
          f"{'the app policy ' + str(memory) if memory else 'glibc default'}"
          f"{''.join(f' · {k}={v}' for k, v in os.environ.items() if k.startswith('MALLOC_'))}",
          flush=True)
    print(f"window open · RSS {rss_mb():.0f} MB", flush=True)
    run = {"load": case_load, "switch": case_switch, "text": case_text, "text1mb": case_text1mb, "audio": case_audio,
           "hour": case_hour, "image": case_image}
    profile = None
    if args.profile_gui:
        import cProfile

        profile = cProfile.Profile(time.thread_time)
        profile.enable()
    for name in args.case or CASES:
        run[name](app, win, args)
    if profile is not None:
        import pstats

        profile.disable()
        stats = pstats.Stats(profile)
        print(f"GUI thread CPU time: {stats.total_tt:.1f} s; costliest functions (own time, then total time):")
        stats.sort_stats("tottime").print_stats(args.profile_gui)
        stats.sort_stats("cumulative").print_stats(r"gui/", args.profile_gui)
    for i in range(win.tabs.count()):
        win.tabs.widget(i).shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
