"""The Speculation tab on a real input, as a person sees it (issue 21; for the README):

    .venv/bin/python tools/screenshot_speculation.py [--model base] [--draft early-exit:5] [--out PNG]

Opens the main window offscreen at 1280 x 800, loads ``--model`` in the Speech tab, decodes
the bundled sample with strategy speculative and ``--draft`` (greedy verification), waits for
the plain-greedy timing that gives the measured speed-up (pressing Measure after a long
run), selects the first token whose drafted token was rejected (its round in the table),
shows the Speculation tab and saves the window. Prints the run's figures.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from gui.main_window import MainWindow  # noqa: E402
from screenshot import _save, _settle, _wait  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="base")
    p.add_argument("--draft", default="early-exit:5")
    p.add_argument("--out", default=str(ROOT / "assets" / "screenshot_speculation.png"))
    args = p.parse_args()
    from core.options import DecodingOptions

    app = QApplication.instance() or QApplication(sys.argv)
    settings = QSettings(os.path.join(tempfile.mkdtemp(), "shot.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, autoload=False)
    win.resize(1280, 800)
    win.show()
    tab = win.speech_tab
    win.tabs.setCurrentWidget(tab)
    _wait(tab.modelReady, lambda: tab.load_model(args.model))
    options = DecodingOptions(strategy="speculative", draft=args.draft)
    fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(options, emit=True), tab.load_sample()))
    print("run:", fin[0].text if fin else "(no result)")
    while tab.is_busy():  # the plain-greedy timing of the measured speed-up (a short run)
        _settle(50)
    if tab.speculation_view.measured_speedup() is None and tab.baseline.start():  # a long one: Measure
        while tab.is_busy():
            _settle(50)
    print("summary:", tab.run.branch(0).finished.stats.speculative)
    print("status:", win.stats_label.text())
    rounds = tab.run.rounds()
    pick = next((r for r in rounds if any(t.judged and not t.accepted for t in r.drafted) and r.emitted_id is not None),
                rounds[0] if rounds else None)
    if pick is not None:
        tab.select_step(pick.step + pick.n_accepted)
    tab.inspector_tabs.setCurrentWidget(tab.speculation_view)
    _settle(500)
    print("window", win.width(), "x", win.height())
    _save(win, pathlib.Path(args.out))
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
