"""File → Open sweep… (issue 24 §5): the results table (virtualised, sortable, filterable by
strategy, worst files first) with the plots, and a double-clicked row opening its file in its
tab with that row's strategy."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QTimer, Qt

pytest.importorskip("pyarrow")

from core.sweep.specs import expand  # noqa: E402
from gui.main_window import MainWindow  # noqa: E402
from gui.sweep_view import COLUMNS, SweepView  # noqa: E402
from gui.tabs.base import SAMPLES_DIR  # noqa: E402
from tests.helpers.sweep_synthetic import make_sweep  # noqa: E402

from .fakes import FakeSpeechModel  # noqa: E402

COL = {key: c for c, (key, _t, _k) in enumerate(COLUMNS)}


class GapMeter:
    """The longest gap between 5 ms timer ticks on the GUI thread (a stall), in ms."""

    def __init__(self):
        self.timer = QTimer()
        self.timer.setInterval(5)
        self.last = time.perf_counter()
        self.longest = 0.0
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def _tick(self):
        now = time.perf_counter()
        self.longest = max(self.longest, 1000 * (now - self.last))
        self.last = now

    def stop(self) -> float:
        self.timer.stop()
        return self.longest


@pytest.fixture
def window(qtbot, settings):
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    w.show()
    yield w
    for i in range(w.tabs.count()):
        w.tabs.widget(i).shutdown()


def _values(view: SweepView, key: str) -> list:
    col = view.table.columns[key]
    return [col[view.proxy.table_row(r)] for r in range(view.proxy.rowCount())]


def test_20000_rows_open_sort_and_filter(qtbot, tmp_path):
    inputs = [{"id": f"clips/c{i:04d}.wav"} for i in range(2000)]
    specs = ["greedy", "beam:2", "beam:5", "min-p:0.1", "top-p:0.9", "top-k:20", "sample:T=0.8,seed=0..3"]
    out = make_sweep(tmp_path / "big", inputs, specs, full_summary=False)
    view = SweepView()
    qtbot.addWidget(view)
    view.show()
    meter = GapMeter()
    t0 = time.perf_counter()
    with qtbot.waitSignal(view.loaded, timeout=30000):
        view.open_folder(out, draw_plots=False)
    opened_s = time.perf_counter() - t0
    longest = meter.stop()
    print(f"\n20,000 rows: opened in {1000 * opened_s:.0f} ms; longest GUI stall {longest:.0f} ms")
    assert view.model.rowCount() == 20000 == view.proxy.rowCount()

    # worst files first: the highest WER on top, in order
    vals = _values(view, "value")
    assert vals[0] == max(vals) and all(a >= b for a, b in zip(vals, vals[1:]))
    assert view.view.horizontalHeader().sortIndicatorSection() == COL["value"]

    # a header click sorts (through the proxy, vectorised)
    t0 = time.perf_counter()
    view.view.sortByColumn(COL["file"], Qt.SortOrder.AscendingOrder)
    print(f"sort by file: {1000 * (time.perf_counter() - t0):.0f} ms")
    files = _values(view, "file")
    assert files == sorted(files) and files[0] == "clips/c0000.wav"
    view.view.sortByColumn(COL["decode_s"], Qt.SortOrder.DescendingOrder)
    dec = _values(view, "decode_s")
    assert all(a >= b for a, b in zip(dec, dec[1:]))

    # filter by strategy
    t0 = time.perf_counter()
    view.strategy_box.setCurrentIndex(view.strategy_box.findData("sample:T=0.8,seed=0..3"))
    print(f"filter: {1000 * (time.perf_counter() - t0):.0f} ms")
    assert view.proxy.rowCount() == 2000 * 4
    assert set(_values(view, "spec")) == {"sample:T=0.8,seed=0..3"}
    dec = _values(view, "decode_s")
    assert all(a >= b for a, b in zip(dec, dec[1:]))  # still in the chosen order
    view.strategy_box.setCurrentIndex(0)
    assert view.proxy.rowCount() == 20000


def test_plots_are_shown_beside_the_table(qtbot, tmp_path):
    pytest.importorskip("matplotlib")
    out = make_sweep(tmp_path / "s", [{"id": f"c{i}.wav"} for i in range(8)], ["greedy", "beam:3"])
    view = SweepView()
    qtbot.addWidget(view)
    view.show()
    with qtbot.waitSignal(view.loaded, timeout=30000):
        view.open_folder(out)
    assert [t for t, _img in view.table.plots] and len(view._plot_labels) == 3
    assert (out / "plots" / "scatter.png").is_file()
    assert all(not label.pixmap().isNull() for label, _p in view._plot_labels)


def test_a_folder_that_is_no_sweep_says_so(qtbot, tmp_path):
    view = SweepView()
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.failed, timeout=10000) as sig:
        view.open_folder(tmp_path)
    assert "summary.json" in sig.args[0] and "summary.json" in view.title.text()


def _double_click(qtbot, view: SweepView, spec: str) -> int:
    row = next(r for r in range(view.proxy.rowCount()) if _values(view, "spec")[r] == spec)
    index = view.proxy.index(row, COL["file"])
    view.view.scrollTo(index)
    rect = view.view.visualRect(index)
    qtbot.mouseClick(view.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(view.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    return row


def test_double_click_opens_the_speech_row_in_its_tab(qtbot, window, tmp_path):
    clip = SAMPLES_DIR / "speech_en.wav"
    out = make_sweep(tmp_path / "speech", [{"id": clip.name, "path": str(clip), "reference": "hello"}],
                     ["greedy", "beam:3", "sample:T=0.7,seed=0..1"], model="tiny.en", data=str(SAMPLES_DIR))
    tab = window.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model_combo.setCurrentText(tab.model_label("tiny.en"))
    tab.model = FakeSpeechModel()  # the sweep's model is "loaded": no load starts
    window.tabs.setCurrentWidget(window.ocr_tab)
    view = window.open_sweep(str(out))
    qtbot.addWidget(view)
    qtbot.waitUntil(lambda: view.table is not None, timeout=30000)
    with qtbot.waitSignal(view.rowOpened, timeout=10000):
        _double_click(qtbot, view, "beam:3")
    qtbot.waitUntil(lambda: tab.source_name == clip.name and tab.has_input(), timeout=10000)
    assert window.current_tab() is tab
    assert tab.options_panel.options().to_dict() == expand(["beam:3"])[0].options.to_dict()
    assert not tab.is_loading()  # the tab had the sweep's model
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=10000)  # it decoded the file with those options
    assert tab.run.branch(0).options.to_dict() == expand(["beam:3"])[0].options.to_dict()

    # a seed of a seed range: that seed's options
    with qtbot.waitSignal(view.rowOpened, timeout=10000) as sig:
        row = next(r for r in range(view.proxy.rowCount())
                   if _values(view, "spec")[r] == "sample:T=0.7,seed=0..1" and _values(view, "seed")[r] == 1)
        view.open_row(row)
    seed1 = next(r.options for r in expand(["sample:T=0.7,seed=0..1"]) if r.seed == 1)
    assert sig.args[0].options == seed1
    qtbot.waitUntil(lambda: tab.options_panel.options().to_dict() == seed1.to_dict(), timeout=5000)


def test_double_click_opens_a_translation_sentence(qtbot, window, tmp_path):
    sentence = "The cat sleeps on the warm floor."
    out = make_sweep(tmp_path / "tr", [{"id": "sents.tsv:2", "text": sentence, "reference": "O gato dorme."}],
                     ["greedy", "beam:4"], task="translate", model="en-pt")
    tab = window.translation_tab
    view = window.open_sweep(str(out))
    qtbot.addWidget(view)
    qtbot.waitUntil(lambda: view.table is not None, timeout=30000)
    with qtbot.waitSignal(view.rowOpened, timeout=10000):
        _double_click(qtbot, view, "beam:4")
    assert window.current_tab() is tab
    assert tab.text() == sentence
    assert tab.options_panel.options().to_dict() == expand(["beam:4"])[0].options.to_dict()
    qtbot.waitUntil(lambda: bool(tab.model is not None and tab.model.name), timeout=120000)  # the sweep's model loaded
    assert tab.model_combo.currentText() == tab.model_label("en-pt")


def test_a_row_decoded_int8_loads_the_model_int8(qtbot, window, tmp_path):
    clip = SAMPLES_DIR / "speech_en.wav"
    out = make_sweep(tmp_path / "int8", [{"id": clip.name, "path": str(clip)}], ["greedy"], model="tiny.en",
                     dtype="int8")
    tab = window.speech_tab
    tab.model_combo.setCurrentText(tab.model_label("tiny.en"))
    tab.model = FakeSpeechModel()  # float32
    loads = []
    tab.load_model = loads.append  # no real load in this test
    view = window.open_sweep(str(out))
    qtbot.addWidget(view)
    qtbot.waitUntil(lambda: view.table is not None, timeout=30000)
    with qtbot.waitSignal(view.rowOpened, timeout=10000) as sig:
        view.open_row(0)
    assert sig.args[0].dtype == "int8"
    assert tab.dtype_combo.currentText() == "int8" and loads == ["tiny.en"]


def test_a_real_sweep_row_decodes_to_the_same_ids_in_its_tab(qtbot, window, tmp_path):
    """A sweep row of the bundled en-pt model (decoded by the sweep's own FileDecoder, no Ray),
    opened from the table, decodes in the Translation tab to the row's token ids."""
    from core.sweep.decode import FileDecoder, Settings
    from core.sweep.results import ResultStore
    from core.sweep.runner import SweepConfig, plan, write_summary

    tsv = tmp_path / "en-pt.tsv"
    tsv.write_text("The house is small.\tA casa é pequena.\nShe drinks water.\tEla bebe água.\n", encoding="utf-8")
    config = SweepConfig(task="translate", data=str(tsv), out=str(tmp_path / "out"), settings=Settings(model="en-pt"),
                         specs=["greedy", "sample:T=0.9,seed=3"], progress=False)
    store = ResultStore(config.out)
    work = plan(config, store)
    decoder = FileDecoder(config.task, config.settings)
    for item, runs in work.todo:
        store.append(decoder.decode(item, runs))
    store.compact()
    write_summary(config, work, store)

    tab = window.translation_tab
    tab._text_timer.setInterval(50)
    view = window.open_sweep(config.out)
    qtbot.addWidget(view)
    qtbot.waitUntil(lambda: view.table is not None, timeout=60000)
    row = next(r for r in store.rows() if r["file"] == "en-pt.tsv:2" and r["spec"] == "sample:T=0.9,seed=3")
    view.strategy_box.setCurrentIndex(view.strategy_box.findData("sample:T=0.9,seed=3"))
    shown = next(r for r in range(view.proxy.rowCount()) if _values(view, "file")[r] == "en-pt.tsv:2")
    finished = []
    tab.decodeFinished.connect(finished.append)
    view.open_row(shown)
    qtbot.waitUntil(lambda: any(not f.cancelled for f in finished) and not tab.is_busy(), timeout=120000)
    fin = [f for f in finished if not f.cancelled][-1]
    assert tab.text() == "She drinks water."
    assert list(fin.token_ids) == list(row["token_ids"]) and fin.text == row["text"]
