"""File → Open sweep…: a sweep's results in the window (issue 24 §5).

:func:`open_sweep` opens a ``decoding-explorer sweep`` out folder in a :class:`SweepView`
(a window of its own beside the main window): the results table on the left, the plots
(``core.sweep.plots``: the metric per strategy with its CI, the per-file scatter, the
speed/quality frontier) on the right.

- The table is virtualised: :class:`SweepTableModel` (a ``QAbstractTableModel``) holds the
  columns as arrays and formats a cell only when the view asks for it. It sorts itself with
  numpy (``argsort`` of the column, empty cells last); :class:`SweepProxy` (a
  ``QSortFilterProxyModel``, the view's model) filters by strategy and hands a header
  click's sort to the source model — Qt's own proxy sort would call ``data()`` in Python
  twice per comparison, some 600,000 calls for 20,000 rows. The first order is worst files
  first by the metric (highest WER/CER, lowest chrF).
- Nothing slow runs on the GUI thread: the parquet (and the plots, when the folder has none
  yet) are read in a worker of the view's own run controller (``gui.run_controller``, slot
  "sweep-read"), a row's trace in slot "sweep-row".
- Double-clicking a row opens that file (or translation source) in its tab with that row's
  strategy: the options of the row's trace (``"options"``), its model when the tab has
  another, its language / task or shortlist (the trace's ``"rerun"`` command line); the
  tab decodes it as it decodes any opened input (:func:`open_in_tab`), and every exploring
  view (fork, lanes, what-if) is at hand.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QImage, QPixmap
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QFileDialog, QHBoxLayout, QHeaderView, QLabel,
                               QScrollArea, QSplitter, QTableView, QVBoxLayout, QWidget)

from core.options import DecodingOptions

from .run_controller import Callbacks, RunController

#: (key, header, kind) of the table's columns; kind: "text" | "int" | "float" | "metric" | "delta"
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("file", "File", "text"), ("spec", "Strategy", "text"), ("seed", "Seed", "int"),
    ("value", "Metric", "metric"), ("delta", "Δ baseline", "delta"), ("tokens", "Tokens", "int"),
    ("decode_s", "Decode s", "float"), ("rtf", "RTF", "float"), ("no_speech", "No-speech", "int"),
    ("fallbacks", "Fallbacks", "int"), ("repetitions", "Repetitions", "int"), ("text", "Output", "text"),
    ("reference", "Reference", "text"),
)
#: the parquet columns read (the table's, and what a double-click needs)
READ_COLUMNS = ("file", "spec", "seed", "metric", "value", "tokens", "decode_s", "rtf", "no_speech", "fallbacks",
                "repetitions", "text", "reference", "trace")
#: the suffix of a text column's ranks in ``SweepTable.columns`` (``"file#rank"``)
RANK = "#rank"
#: the task of a sweep -> the main window's tab attribute
TAB_OF_TASK = {"transcribe": "speech_tab", "ocr": "ocr_tab", "translate": "translation_tab"}
#: pixels of the column widths (file, strategy, ..., reference)
COLUMN_WIDTHS = (200, 190, 44, 64, 84, 54, 70, 54, 76, 70, 86, 320, 320)
#: columns that only speech has (hidden for translation and OCR sweeps)
SPEECH_ONLY = ("rtf", "no_speech", "fallbacks")


# ---------------------------------------------------------------------------- data (worker side)
@dataclass
class SweepTable:
    """A sweep's rows as columns, read in a worker thread.

    Attributes:
        out: the sweep's out folder; summary: summary.json's dict.
        columns: key -> numpy array (numbers as float64 with NaN for empty cells, text as an
            object array of str or None), one entry per :data:`READ_COLUMNS` key plus "delta"
            (the row's metric minus the baseline's on the same file, seeds averaged).
        plots: (title, image) of each plot found (or drawn) in ``out/plots``.
        plot_note: why there are no plots, "" when there are.
    """

    out: Path
    summary: dict
    columns: dict[str, np.ndarray]
    plots: list[tuple[str, QImage]] = field(default_factory=list)
    plot_note: str = ""

    @property
    def n(self) -> int:
        """Number of rows."""
        return len(self.columns["file"])


def _parquet_files(out: Path) -> list[Path]:
    files = [out / "results.parquet"] if (out / "results.parquet").is_file() else []
    parts = out / "results.parts"
    return files + (sorted(parts.glob("part-*.parquet")) if parts.is_dir() else [])


def read_table(out_dir: str | Path) -> SweepTable:
    """Read a sweep's summary.json and rows into columns (no plots).

    Raises:
        FileNotFoundError: no summary.json or no results.parquet in ``out_dir`` (says what to do).
        ImportError: pyarrow is not installed.
    """
    out = Path(out_dir)
    if not (out / "summary.json").is_file():
        raise FileNotFoundError(f"{out} has no summary.json: choose the --out folder of a 'decoding-explorer sweep' "
                                "(the sweep writes summary.json when it ends)")
    files = _parquet_files(out)
    if not files:
        raise FileNotFoundError(f"{out} has no results.parquet: the sweep has not stored any row yet")
    import pyarrow as pa

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    from core.sweep.results import read_results  # each run once (a compaction cut short leaves rows twice)

    table = read_results(out, columns=list(READ_COLUMNS))
    cols: dict[str, np.ndarray] = {}
    for key in READ_COLUMNS:
        col = table.column(key)
        if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
            cols[key] = col.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls -> NaN
        elif pa.types.is_boolean(col.type):
            cols[key] = np.array(col.to_pylist(), dtype=object)
        else:
            cols[key] = np.array(col.to_pylist(), dtype=object)
    cols["delta"] = _deltas(cols, summary.get("baseline"))
    for key, _title, kind in COLUMNS:
        if kind == "text":
            cols[key + RANK] = _ranks(cols[key])
    return SweepTable(out, summary, cols)


def _ranks(values: np.ndarray) -> np.ndarray:
    """Each text's rank among the column's texts (case-folded; float64, NaN for None), so the
    GUI thread sorts a text column with one numeric argsort."""
    filled = np.array([v is not None for v in values], dtype=bool)
    out = np.full(len(values), np.nan)
    if filled.any():
        texts = np.array([str(v).casefold() for v in values[filled]], dtype=str)
        _uniq, inverse = np.unique(texts, return_inverse=True)
        out[filled] = inverse
    return out


def _deltas(cols: dict[str, np.ndarray], baseline: str | None) -> np.ndarray:
    """Each row's metric minus the baseline's mean metric (over its seeds) on the same file; NaN
    without either."""
    n = len(cols["file"])
    out = np.full(n, np.nan)
    if baseline is None or n == 0:
        return out
    value, spec, files = cols["value"], cols["spec"], cols["file"]
    sums: dict[str, list[float]] = {}
    for i in np.flatnonzero((spec == baseline) & ~np.isnan(value)):
        sums.setdefault(files[i], []).append(value[i])
    base = {f: sum(v) / len(v) for f, v in sums.items()}
    b = np.array([base.get(f, np.nan) for f in files], dtype=np.float64)
    return value - b


def read_plots(table: SweepTable, draw: bool = True) -> None:
    """Fill ``table.plots`` with the PNGs of ``out/plots`` (drawn first with
    ``core.sweep.plots.write_plots`` when there are none and ``draw``); a failure is kept in
    ``table.plot_note``, never raised."""
    folder = table.out / "plots"
    names = (("metric", "Metric per strategy (95% CI)"), ("scatter", "Per file"), ("frontier", "Speed / quality"))
    if draw and not all((folder / f"{n}.png").is_file() for n, _ in names):
        try:
            from core.sweep.plots import write_plots

            write_plots(table.out)
        except (ImportError, OSError, ValueError, KeyError) as exc:
            table.plot_note = f"No plots: {exc}"
    for name, title in names:
        img = QImage(str(folder / f"{name}.png"))
        if not img.isNull():
            table.plots.append((title, img))
    if not table.plots and not table.plot_note:
        table.plot_note = f"No plots in {folder}"


# ---------------------------------------------------------------------------- a row -> its tab
@dataclass
class RowTarget:
    """What a double-click opens: the input, in its tab, with the row's strategy.

    Attributes:
        task: "transcribe" | "translate" | "ocr".
        options: the row's decoding options (its trace's ``"options"``).
        path: the input file (speech, OCR), None for translation.
        text: translation's source text, None otherwise.
        model: the sweep's model (``--model`` / ``--direction``).
        settings: the tab's input settings the row was decoded with (language, task, shortlist).
        label: the row's file and strategy, for messages.
        dtype: the model's compute type (the trace's ``"dtype"``: float32 | int8).
    """

    task: str
    options: DecodingOptions
    path: Path | None = None
    text: str | None = None
    model: str | None = None
    settings: dict = field(default_factory=dict)
    label: str = ""
    dtype: str = "float32"


def _argv_value(argv: list[str] | None, flag: str) -> str | None:
    if not argv or flag not in argv:
        return None
    i = argv.index(flag)
    return argv[i + 1] if i + 1 < len(argv) else None


def row_target(table: SweepTable, i: int) -> RowTarget:
    """The :class:`RowTarget` of row ``i`` (reads its gzipped trace: call it in a worker).

    Raises:
        ValueError: the row's input cannot be found (a data-set row, a moved DATA folder) or
            its options cannot be read; the message says what to do.
    """
    summary, cols = table.summary, table.columns
    task = summary.get("task") or ""
    if task not in TAB_OF_TASK:
        raise ValueError(f"summary.json names no task the window has (task={task!r})")
    file, spec = str(cols["file"][i]), str(cols["spec"][i])
    seed = None if np.isnan(cols["seed"][i]) else int(cols["seed"][i])
    label = f"{file} · {spec}" + (f" (seed {seed})" if seed is not None and "seed=" in spec and ".." in spec else "")
    doc: dict[str, Any] = {}
    trace = cols["trace"][i]
    if trace:
        try:
            with gzip.open(table.out / trace, "rt", encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            doc = {}
    rerun = doc.get("rerun") or {}
    argv = rerun.get("argv")
    if "options" in doc:
        options = DecodingOptions.from_dict(doc["options"])
    else:  # no trace: the spec as the sweep parsed it (flags given beside --strategies are not known)
        from core.sweep.specs import expand

        runs = [r for r in expand([spec]) if r.seed == seed] or expand([spec])
        options = runs[0].options
    data = Path(str(summary.get("data", "")))
    model = summary.get("model")
    if task == "translate":
        text = argv[1] if argv and len(argv) > 1 and argv[0] == "translate" else _tsv_source(data, file)
        settings = {"shortlist": bool(argv and "--shortlist" in argv)} if argv else {}
        return RowTarget(task, options, text=text, model=model, settings=settings, label=label,
                         dtype=doc.get("dtype") or "float32")
    path = (rerun.get("input") or {}).get("path")
    candidates = [Path(path)] if path else []
    candidates.append(data / file)
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        where = " or ".join(str(p) for p in candidates)
        raise ValueError(f"{file}: the input is not at {where}; a data-set row cannot be opened in the window, and a "
                         "moved DATA folder must be put back where the sweep read it")
    settings = {}
    if task == "transcribe" and argv:
        settings = {k: v for k, v in (("language", _argv_value(argv, "--language")),
                                      ("task", _argv_value(argv, "--task"))) if v is not None}
    return RowTarget(task, options, path=found, model=model, settings=settings, label=label,
                     dtype=doc.get("dtype") or "float32")


def _tsv_source(data: Path, file: str) -> str:
    """Translation's source of the TSV row ``NAME.tsv:LINE`` (``core.sweep.data``'s ids)."""
    name, _, line = file.rpartition(":")
    tsv = data if data.is_file() else data / name
    try:
        lines = tsv.read_text(encoding="utf-8-sig").splitlines()
        return lines[int(line) - 1].split("\t")[0]
    except (OSError, ValueError, IndexError):
        raise ValueError(f"{file}: the source text is neither in the row's trace nor at line {line} of {tsv}; put "
                         "the TSV back where the sweep read it") from None


def open_in_tab(window, target: RowTarget) -> Any:
    """Show ``target``'s input in its tab of ``window`` (the main window) with its options and
    settings, loading the sweep's model (and compute type) when the tab has another; the tab comes to the front
    and decodes the input as any opened input. Returns the tab."""
    tab = getattr(window, TAB_OF_TASK[target.task])
    window.tabs.setCurrentWidget(tab)
    tab.clear_error()
    tab.stop_decode()
    try:
        tab.options_panel.setOptions(target.options)
    except ValueError as exc:
        tab.show_error(f"The row's options do not fit this tab ({exc}); the tab keeps its own.")
    if target.settings:
        tab.apply_input_settings({**tab.input_settings(), **target.settings})
    if target.model:
        shown = tab.model_combo.currentText() if tab.model_combo is not None else ""
        other = shown != tab.model_label(target.model)
        combo = tab.dtype_combo
        if combo is not None and combo.findText(target.dtype) >= 0 and combo.currentText() != target.dtype:
            combo.blockSignals(True)  # the load below takes it
            combo.setCurrentIndex(combo.findText(target.dtype))
            combo.blockSignals(False)
            other = True
        elif tab.model is not None and getattr(tab.model, "dtype", "float32") != tab.model_dtype():
            other = True
        if other or (tab.model is None and not tab.is_loading()):
            tab.load_model(target.model)
    if target.task == "translate":
        tab.set_text(target.text or "")
    else:
        tab.open_file(target.path)
    tab.statusMessage.emit(f"From the sweep: {target.label}")
    window.raise_()
    window.activateWindow()
    return tab


# ---------------------------------------------------------------------------- models
class SweepTableModel(QAbstractTableModel):
    """The rows of a :class:`SweepTable` in a sortable order, those of one strategy or all
    (module docstring). ``_order`` is every row in the sort order; ``_shown`` the rows of
    the chosen strategy in that order (the model's rows)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.table: SweepTable | None = None
        self._order = np.arange(0)
        self._shown = self._order
        self._spec: str | None = None
        self._pct = False
        self.sort_key: tuple[int, Qt.SortOrder] = (-1, Qt.SortOrder.AscendingOrder)

    def set_table(self, table: SweepTable) -> None:
        """Show ``table`` (in file order until :meth:`sort`, every strategy)."""
        self.beginResetModel()
        self.table = table
        self._order = self._shown = np.arange(table.n)
        self._spec = None
        self._pct = table.summary.get("metric") in ("wer", "cer")
        self.endResetModel()

    def row_index(self, row: int) -> int:
        """The table's row index shown at model row ``row``."""
        return int(self._shown[row])

    def strategy(self) -> str | None:
        """The strategy whose rows are shown (None: all)."""
        return self._spec

    def set_strategy(self, spec: str | None) -> None:
        """Show only the rows of ``spec`` (None: every strategy), in the current order (a
        model reset: the view keeps nothing of the old rows)."""
        self.beginResetModel()
        self._spec = spec
        self._shown = self._filtered(self._order)
        self.endResetModel()

    def _filtered(self, order: np.ndarray) -> np.ndarray:
        if self._spec is None or self.table is None:
            return order
        return order[self.table.columns["spec"][order] == self._spec]

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._shown)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        key, title, _kind = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:
            if key == "value" and self.table is not None:
                return {"wer": "WER", "cer": "CER", "chrf": "chrF"}.get(self.table.summary.get("metric"), title)
            return title
        if role == Qt.ItemDataRole.ToolTipRole:
            return {"delta": "The row's metric minus the baseline strategy's on the same file (its seeds averaged)",
                    "decode_s": "This strategy's own decoding seconds (the file's one encoder pass not counted)",
                    "no_speech": "Windows whose no-speech probability is above 0.6",
                    "fallbacks": "Windows openai/whisper's temperature fallback would redo",
                    "repetitions": "Segments whose text loops"}.get(key)
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if self.table is None or not index.isValid():
            return None
        key, _title, kind = COLUMNS[index.column()]
        i = self._shown[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._format(kind, self.table.columns[key][i])
        if role == Qt.ItemDataRole.ToolTipRole and kind == "text":
            v = self.table.columns[key][i]
            return None if v is None else str(v)
        if role == Qt.ItemDataRole.TextAlignmentRole and kind != "text":
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and kind == "delta":
            d = self.table.columns["delta"][i]
            if np.isnan(d) or d == 0:
                return None
            worse = d < 0 if self.table.summary.get("higher_is_better") else d > 0
            return QBrush(QColor("#c0392b") if worse else QColor("#1e8449"))
        if role == Qt.ItemDataRole.UserRole:
            return int(i)
        return None

    def _format(self, kind: str, v) -> str:
        if kind == "text":
            return "" if v is None else str(v).replace("\n", " ")
        if v is None or np.isnan(v):
            return "–"
        if kind == "int":
            return str(int(v))
        if kind == "metric":
            return f"{100 * v:.1f}%" if self._pct else f"{v:.1f}"
        if kind == "delta":
            return f"{100 * v:+.1f} pt" if self._pct else f"{v:+.1f}"
        return f"{v:.3f}"

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Order the rows by ``column`` (numpy's stable argsort of the numbers, or of the text
        columns' ranks computed when read; empty cells last in both orders)."""
        if self.table is None or not 0 <= column < len(COLUMNS):
            return
        self.sort_key = (column, order)
        key, _title, kind = COLUMNS[column]
        values = self.table.columns[key + RANK if kind == "text" else key]
        empty = np.isnan(values)
        filled = np.flatnonzero(~empty)
        ranked = filled[np.argsort(values[filled], kind="stable")]
        if order == Qt.SortOrder.DescendingOrder:
            ranked = ranked[::-1]
        new = np.concatenate([ranked, np.flatnonzero(empty)])
        self.layoutAboutToBeChanged.emit()
        old, self._order = self._shown, new
        self._shown = self._filtered(new)
        persistent = self.persistentIndexList()  # the selection: it stays on its rows
        if persistent:
            where = np.full(self.table.n, -1, dtype=np.int64)
            where[self._shown] = np.arange(len(self._shown))
            self.changePersistentIndexList(persistent, [self.index(int(where[old[p.row()]]), p.column())
                                                        for p in persistent])
        self.layoutChanged.emit()


class SweepProxy(QSortFilterProxyModel):
    """The table view's model. It hands a sort (a header click) and the strategy filter to
    the source model, which does both with numpy on whole columns (module docstring): Qt's
    own sort and filter call Python once or twice per row or comparison. So the proxy keeps
    its source's order and rows (no Python ``filterAcceptsRow``: Qt's own accepts all)."""

    def set_strategy(self, spec: str | None) -> None:
        """Show only the rows of ``spec`` (None: every strategy)."""
        self.sourceModel().set_strategy(spec)

    def strategy(self) -> str | None:
        return self.sourceModel().strategy()

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        self.sourceModel().sort(column, order)

    def table_row(self, row: int) -> int:
        """The table's row index shown at proxy row ``row``."""
        src: SweepTableModel = self.sourceModel()
        return src.row_index(self.mapToSource(self.index(row, 0)).row())


# ---------------------------------------------------------------------------- the view
class SweepView(QWidget):
    """A sweep's results table and plots (module docstring).

    Signals:
        loaded(int): the rows were read and shown (their number).
        failed(str): the folder could not be read (the message is also shown).
        rowOpened(object): a row was opened in its tab (the :class:`RowTarget`).
    """

    loaded = Signal(int)
    failed = Signal(str)
    rowOpened = Signal(object)

    def __init__(self, open_row: Callable[[RowTarget], Any] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Sweep")
        self._open_row = open_row
        self.table: SweepTable | None = None
        self.controller = RunController(self)
        self.model = SweepTableModel(self)
        self.proxy = SweepProxy(self)
        self.proxy.setSourceModel(self.model)

        self.title = QLabel("Opening…")
        self.title.setWordWrap(True)
        self.strategy_box = QComboBox()
        self.strategy_box.setToolTip("Show the rows of one strategy")
        self.strategy_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.strategy_box.currentIndexChanged.connect(self._strategy_picked)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(QLabel("Strategy:"))
        top.addWidget(self.strategy_box)

        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setWordWrap(False)
        self.view.setAlternatingRowColors(True)
        vh = self.view.verticalHeader()
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setDefaultSectionSize(self.fontMetrics().height() + 6)
        vh.hide()
        hh = self.view.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)
        for c, w in enumerate(COLUMN_WIDTHS):
            self.view.setColumnWidth(c, w)
        self.view.doubleClicked.connect(lambda index: self.open_row(index.row()))
        self.view.setToolTip("Double-click a row to open its file in its tab with that strategy's options")

        left = QWidget()
        col = QVBoxLayout(left)
        col.setContentsMargins(0, 0, 0, 0)
        col.addLayout(top)
        col.addWidget(self.view, 1)
        self.status = QLabel("Double-click a row: its file opens in its tab with that strategy's options")
        self.status.setWordWrap(True)
        col.addWidget(self.status)

        self.plots = QWidget()
        self._plots_col = QVBoxLayout(self.plots)
        self._plot_labels: list[tuple[QLabel, QPixmap]] = []
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.plots)
        self.plot_scroll = scroll

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(scroll)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.addWidget(self.splitter)
        self.resize(1500, 850)

    # ------------------------------------------------------------ reading
    def open_folder(self, path: str | Path, draw_plots: bool = True) -> None:
        """Read the sweep in ``path`` in a worker (slot "sweep-read"); the table and the plots
        appear when it is read (``loaded``), or the message says why not (``failed``)."""
        path = Path(path)
        self.setWindowTitle(f"Sweep — {path.name}")
        self.title.setText(f"Reading {path}…")

        def gen(cancel):
            table = read_table(path)
            if not cancel():
                read_plots(table, draw=draw_plots)
            yield table

        def error(message: str) -> None:
            self.title.setText(f"Cannot open {path}: {message}")
            self.failed.emit(message)

        self.controller.start("sweep-read", gen, Callbacks(self.show_table, error), name="sweep-read")

    def show_table(self, table: SweepTable) -> None:
        """Show ``table`` (GUI thread): worst files first by the metric, every strategy."""
        self.table = table
        s = table.summary
        self.model.set_table(table)
        self.strategy_box.blockSignals(True)
        self.strategy_box.clear()
        self.strategy_box.addItem("All strategies", None)
        for st in s.get("strategies", []):
            self.strategy_box.addItem(st["spec"], st["spec"])
        self.strategy_box.blockSignals(False)
        self.proxy.set_strategy(None)
        for c, (key, _t, _k) in enumerate(COLUMNS):
            self.view.setColumnHidden(c, key in SPEECH_ONLY and s.get("task") != "transcribe")
        worst = Qt.SortOrder.AscendingOrder if s.get("higher_is_better") else Qt.SortOrder.DescendingOrder
        metric_col = next(c for c, (k, _t, _k) in enumerate(COLUMNS) if k == "value")
        self.view.setSortingEnabled(False)
        self.view.horizontalHeader().setSortIndicator(metric_col, worst)
        self.view.setSortingEnabled(True)  # sorts by the indicator: worst first
        label = {"wer": "WER", "cer": "CER", "chrf": "chrF"}.get(s.get("metric"), s.get("metric") or "metric")
        self.title.setText(f"<b>{table.out.name}</b> · {s.get('task', '')} · {s.get('model', '')} · "
                           f"{s.get('files', '?')} files · {table.n} rows · {label} "
                           f"({'higher' if s.get('higher_is_better') else 'lower'} is better) · baseline "
                           f"<code>{s.get('baseline')}</code> · worst files first")
        self._show_plots(table)
        self.loaded.emit(table.n)

    def _show_plots(self, table: SweepTable) -> None:
        while self._plots_col.count():
            w = self._plots_col.takeAt(0).widget()
            if w is not None:
                w.deleteLater()
        self._plot_labels = []
        for title, img in table.plots:
            head = QLabel(f"<b>{title}</b>")
            self._plots_col.addWidget(head)
            label = QLabel()
            pix = QPixmap.fromImage(img)
            self._plot_labels.append((label, pix))
            self._plots_col.addWidget(label)
        if table.plot_note:
            note = QLabel(table.plot_note)
            note.setWordWrap(True)
            self._plots_col.addWidget(note)
        self._plots_col.addStretch(1)
        self._fit_plots()

    def _fit_plots(self) -> None:
        width = max(200, self.plot_scroll.viewport().width() - 24)
        for label, pix in self._plot_labels:
            label.setPixmap(pix if pix.width() <= width else pix.scaledToWidth(width, Qt.TransformationMode.SmoothTransformation))

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit_plots()

    def _strategy_picked(self, _i: int) -> None:
        self.proxy.set_strategy(self.strategy_box.currentData())

    # ------------------------------------------------------------ a row
    def open_row(self, row: int) -> None:
        """Open the row shown at ``row`` (a proxy row) in its tab: its trace is read in a worker
        (slot "sweep-row"), then the ``open_row`` callback gets the :class:`RowTarget`."""
        if self.table is None or not 0 <= row < self.proxy.rowCount():
            return
        i, table = self.proxy.table_row(row), self.table

        def done(target: RowTarget) -> None:
            if self._open_row is not None:
                self._open_row(target)
            self.status.setText(f"Opened {target.label} in its tab")
            self.rowOpened.emit(target)

        def error(message: str) -> None:
            self.status.setText(f"Cannot open the row: {message}")

        self.status.setText(f"Opening {table.columns['file'][i]}…")
        self.controller.start("sweep-row", lambda cancel: iter([row_target(table, i)]), Callbacks(done, error),
                              name="sweep-row")

    def closeEvent(self, event) -> None:  # noqa: N802
        """Cancel the workers. A worker still running (reading the folder, drawing the plots)
        keeps the run controller past the view (``WA_DeleteOnClose``), so its end is still taken
        and what it read is let go (it was kept for ever with the controller deleted)."""
        c = self.controller
        c.abort_all()
        if not c.idle():
            c.setParent(None)  # outlives the view until its workers have ended
            _CLOSING.add(c)
            c.add_frame_listener(lambda: _CLOSING.discard(c) if c.idle() else None)
        super().closeEvent(event)


#: run controllers of closed sweep views whose workers have not ended yet (``SweepView.closeEvent``)
_CLOSING: set[RunController] = set()


def ask_sweep_folder(parent: QWidget | None, start: str) -> str:
    """Ask for a sweep's out folder (``QFileDialog``); "" when cancelled. Tests replace it."""
    return QFileDialog.getExistingDirectory(parent, "Open sweep (its --out folder)", start)


def open_sweep(window, path: str | Path | None = None) -> SweepView | None:
    """File → Open sweep…: open the sweep folder ``path`` (None: ask for it) in a
    :class:`SweepView` window beside ``window`` (the main window); its rows open in
    ``window``'s tabs. Returns the view (its table appears when read), None when cancelled."""
    settings = getattr(window, "settings", None)
    if path is None:
        start = str(settings.value("sweep/dir", str(Path.home()))) if settings is not None else str(Path.home())
        path = ask_sweep_folder(window, start)
        if not path:
            return None
    if settings is not None:
        settings.setValue("sweep/dir", str(Path(path).parent))
    view = SweepView(open_row=lambda target: open_in_tab(window, target), parent=window)
    view.setWindowFlag(Qt.WindowType.Window, True)
    view.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
    view.show()
    view.open_folder(path)
    return view
