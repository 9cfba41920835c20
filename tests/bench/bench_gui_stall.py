"""GUI-thread stalls on the real models (issue 9 §3, issue 19 §3): the longest gap between
the ticks of a 10 ms QTimer on the GUI thread while the window loads a model and decodes
long inputs, and the memory a 1-hour recording takes.

Cases (one window, offscreen, torch on one thread as in the other benches; ``--case`` runs
some of them alone):
  - ``load``: the Speech tab loads whisper-base (the app's first start) and decodes the
    bundled sample;
  - ``text``: the Translation tab translates ~100 kB of English (the sample text and test
    sentences repeated, ~1,600 sentences) for ``--seconds`` of decoding, then Cancel;
  - ``text1mb``: the Translation tab is given 1 MB of English on ONE line (~19,000
    sentences, no newline) and translates it for ``--seconds``, then Cancel (issue 19 §3);
  - ``audio``: the Speech tab decodes 10 minutes of espeak-ng speech with tiny.en for
    ``--seconds``, then Cancel;
  - ``hour``: the Speech tab opens ``--audio-minutes`` (default 60) of espeak-ng speech and
    decodes it long-form with whisper-base to the end (or ``--hour-seconds`` of decoding,
    then Cancel). Prints the memory curve: resident memory (RSS) every ``--rss-every``
    seconds of audio decoded, the memory the open added, and MB per second of audio;
  - ``image``: the OCR tab opens a 12000×12000 PNG with one 64 px line of DejaVu Sans and
    reads it (up to ``--image-seconds``), then Cancel.
Prints, per case: the longest gap (ms), the 99th percentile gap, the number of gaps over
100 ms, and what was decoded. The goal is no gap over 100 ms, and at most 1.5 GB for the
1-hour recording with base. Not a pass/fail test.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_gui_stall.py \
        [--case hour --audio-minutes 10] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PySide6.QtCore import QElapsedTimer, QSettings, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

CASES = ("load", "text", "text1mb", "audio", "hour", "image")


def rss_mb() -> float:
    """This process's resident memory (VmRSS), MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def anon_mb() -> float:
    """The anonymous part of the resident memory (RssAnon: the heap, arrays, tensors), MB;
    the rest is mapped files (shared libraries: torch's CUDA build maps ~400 MB of them)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1000
    return float("nan")


class StallMeter:
    """Records the ticks of a 10 ms QTimer on the GUI thread; gaps between them are stalls."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))

    def __enter__(self):
        self.ticks = [time.perf_counter()]
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.stop()
        self.ticks.append(time.perf_counter())

    def report(self, name: str, extra: str = "") -> None:
        gaps = np.diff(self.ticks) * 1000.0
        at = self.ticks[int(np.argmax(gaps))] - self.ticks[0]
        print(f"{name:<12} longest {gaps.max():7.0f} ms (at {at:.1f} s) · p99 {np.percentile(gaps, 99):5.0f} ms · "
              f">100 ms: {int((gaps > 100).sum()):4d} of {len(gaps)} gaps · {extra}", flush=True)


def pump_until(app: QApplication, done, timeout_s: float, tick=None) -> bool:
    t = QElapsedTimer()
    t.start()
    while not done():
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
    base = rss_mb()
    audio = speech_audio(minutes * 60)
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
        speech.set_audio(audio, f"{minutes:g} minutes")
        del audio
        opened = rss_mb()
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
    late = [c for c in curve if c[0] >= 240] or curve
    first = late[0]
    slope = (end - first[1]) / (s_end - first[0]) if s_end > first[0] + 30 else float("nan")
    per_token = (end - first[1]) / max(1, curve[-1][2] - first[2]) * 1000
    m.report(f"{name} audio", f"{minutes:g} min, base, {len(speech.run)} tokens, {s_end:.0f} s of audio decoded in "
                              f"{took:.0f} s{' then Cancel' if cancelled else ''}")
    extra = "" if s_end >= minutes * 60 - 30 else f" · extrapolated to 60 min: {end + slope * (3600 - s_end):.0f} MB"
    print(f"  memory: before the recording {base:.0f} MB · after open {opened:.0f} MB (+{opened - base:.0f}) · "
          f"end {end:.0f} MB (peak {peak:.0f}) · after 240 s: {slope:.3f} MB per s of audio "
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
    args = ap.parse_args()
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
    print(f"window open · RSS {rss_mb():.0f} MB", flush=True)
    run = {"load": case_load, "text": case_text, "text1mb": case_text1mb, "audio": case_audio,
           "hour": case_hour, "image": case_image}
    for name in args.case or CASES:
        run[name](app, win, args)
    for i in range(win.tabs.count()):
        win.tabs.widget(i).shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
