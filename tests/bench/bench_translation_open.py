"""How long the GUI thread blocks when the Translation tab opens a 1 MB text on one line
(issue 19 §3): the longest gap between the ticks of a 10 ms QTimer from Open… (``read_file``)
until the first translated token is shown, and the number of gaps over 100 ms. Not a
pass/fail test.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/bench_translation_open.py [--kb 1000]
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

from PySide6.QtCore import QElapsedTimer, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def one_line_text(chars: int) -> str:
    """``chars`` characters of English on one line (the sample text and test sentences repeated)."""
    from tests.core.test_marian_tiny import EN

    sample = (ROOT / "assets" / "samples" / "text_en.txt").read_text()
    unit = " ".join((sample + " " + " ".join(EN)).split())
    return " ".join([unit] * (chars // (len(unit) + 1) + 1))[:chars]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=int, default=1000, help="text size in kB (default 1000)")
    ap.add_argument("--limit", type=float, default=120, help="give up after this many seconds")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    app = QApplication.instance() or QApplication([])
    from gui.tabs.translation import TranslationTab

    tab = TranslationTab()
    tab.resize(1280, 800)
    tab.show()
    tab.load_model("en-pt")
    t0 = time.perf_counter()
    while tab.model is None or tab.is_busy():
        app.processEvents()
        time.sleep(0.01)
        if time.perf_counter() - t0 > args.limit:
            raise SystemExit("the model did not load")
    path = pathlib.Path(tempfile.mkdtemp()) / "t1mb_oneline.txt"
    path.write_text(one_line_text(args.kb * 1000), encoding="utf-8")

    ticks: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(clock.elapsed()))
    timer.start()
    t0 = time.perf_counter()
    QTimer.singleShot(0, lambda: tab.read_file(path))
    while tab.stream.token_count() == 0 and time.perf_counter() - t0 < args.limit:
        app.processEvents()
        time.sleep(0.002)
    first = time.perf_counter() - t0
    for _ in range(50):  # a few more frames of decoding
        app.processEvents()
        time.sleep(0.01)
    timer.stop()
    tab.cancel()
    tab.shutdown()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])] or [0]
    print(f"{args.kb} kB on one line: longest GUI stall {max(gaps):.0f} ms, gaps > 100 ms: "
          f"{sum(g > 100 for g in gaps)} of {len(gaps)}, first token shown after {first:.1f} s; "
          f"info line: {tab.info_label.text().splitlines()[0]}")


if __name__ == "__main__":
    main()
