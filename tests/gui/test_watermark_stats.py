"""The window reports what the stages that shaped a run say about it (core.processors.stages
run_reports): the watermark's detector z-score after the run's statistics in the status bar."""

from __future__ import annotations

from types import SimpleNamespace

from core.events import Finished, RunStats
from core.options import DecodingOptions
from core.processors.watermark import watermark_note, watermark_z_score

IDS = [5, 9, 2, 7, 7, 3, 11, 4]


def _finish(tab, options, ids=IDS):
    tab.run.clear(options)
    tab.statsChanged.emit({"live": False, "encode_ms": 1.0, "ms_per_token": 1.0, "tokens_per_s": 1.0,
                           "n_tokens": len(ids), "model": "fake", "device": "CPU"})
    tab.decodeFinished.emit(Finished(text="x", token_ids=list(ids), stats=RunStats(n_tokens=len(ids))))


def test_the_status_bar_shows_the_watermark_z_score(qtbot, settings):
    from gui.main_window import MainWindow

    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    tab = w.current_tab()
    tab.model = SimpleNamespace(name="fake", device="cpu", backend=SimpleNamespace(vocab_size=96))
    _finish(tab, DecodingOptions(watermark_delta=2.0, watermark_gamma=0.5))
    note = watermark_note(watermark_z_score(IDS, 96, 0.5))
    assert note.split(" (")[0] in w.stats_label.text()  # "watermark: z = 0.38"
    assert note in w.stats_label.toolTip() and "decoder speed" in w.stats_label.toolTip()
    tab.statsChanged.emit({"live": True, "n_tokens": 1})  # the next run starts: the note goes
    assert "watermark" not in w.stats_label.text()
    _finish(tab, DecodingOptions())  # off: nothing to report
    assert "watermark" not in w.stats_label.text() and "watermark" not in w.stats_label.toolTip()
