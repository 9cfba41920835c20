"""GUI-thread stalls on the real models (issue 9 §3): the longest gap between the ticks of
a 10 ms QTimer on the GUI thread while the window loads a model and decodes long inputs.

Cases (one window, offscreen, torch on one thread as in the other benches):
  - model load: the Speech tab loads whisper-base (the app's first start) and decodes the
    bundled sample;
  - long text: the Translation tab translates ~100 kB of English (the sample text and
    test sentences repeated, ~1,600 sentences) for ``--seconds`` of decoding, then Cancel;
  - long audio: the Speech tab decodes 10 minutes of espeak-ng speech with tiny.en for
    ``--seconds``, then Cancel.
Prints, per case: the longest gap (ms), the 99th percentile gap, the number of gaps over
100 ms, and the tokens shown. The goal is no gap over 100 ms. Not a pass/fail test.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_gui_stall.py [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PySide6.QtCore import QElapsedTimer, QSettings, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


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
        print(f"{name:<12} longest {gaps.max():7.0f} ms · p99 {np.percentile(gaps, 99):5.0f} ms · "
              f">100 ms: {int((gaps > 100).sum()):4d} of {len(gaps)} gaps · {extra}", flush=True)


def pump_until(app: QApplication, done, timeout_s: float) -> bool:
    t = QElapsedTimer()
    t.start()
    while not done():
        app.processEvents()
        time.sleep(0.001)
        if t.elapsed() > timeout_s * 1000:
            return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=45.0, help="decoding time per long input (default 45)")
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

    # 1. model load + first decode (whisper-base, the sample clip)
    speech = win.speech_tab
    with StallMeter() as m:
        speech.load_model("base")
        pump_until(app, lambda: speech.model is not None, 300)
        speech.load_sample()
        pump_until(app, lambda: speech.stream.token_count() > 0 and not speech.is_decoding(), 300)
    m.report("model load", f"whisper-base load + sample decode, {speech.stream.token_count()} tokens")

    # 2. long text
    tr = win.translation_tab
    win.tabs.setCurrentWidget(tr)
    from tests.core.test_marian_tiny import EN

    sample = (ROOT / "assets" / "samples" / "text_en.txt").read_text()
    unit = sample.strip() + "\n" + " ".join(EN) + "\n"
    text = unit * (100_000 // len(unit) + 1)
    tr.load_model("en-pt")
    pump_until(app, lambda: tr.model is not None, 120)
    with StallMeter() as m:
        tr.set_text(text)
        tr._text_timer.stop()
        tr.request_decode()
        pump_until(app, lambda: not tr.is_decoding(), args.seconds)
        n = tr.stream.token_count()
        tr.cancel()
        pump_until(app, tr.workers_idle, 30)
    m.report("long text", f"{len(text) / 1000:.0f} kB, {n} tokens in {args.seconds:.0f} s, then Cancel")

    # 3. long audio
    from tests.helpers.speech import synth_speech

    win.tabs.setCurrentWidget(speech)
    clip = synth_speech(" ".join(EN[:12]))
    audio = np.tile(clip, int(np.ceil(600 * 16000 / len(clip))))[: 600 * 16000]
    speech.load_model("tiny.en")
    pump_until(app, lambda: speech.model is not None, 120)
    with StallMeter() as m:
        speech.set_audio(audio, "10 minutes")
        pump_until(app, lambda: not speech.is_decoding(), args.seconds)
        n = speech.stream.token_count()
        speech.cancel()
        pump_until(app, speech.workers_idle, 60)
    m.report("long audio", f"10 min, tiny.en, {n} tokens in {args.seconds:.0f} s, then Cancel")
    for i in range(win.tabs.count()):
        win.tabs.widget(i).shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
