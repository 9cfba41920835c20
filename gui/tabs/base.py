"""What the three task tabs' input areas share: the model picker, the bundled samples,
the Open… dialog, drag and drop, and the tab's settings.

:class:`DecodeTab` builds on :class:`gui.tabs.run.RunTab` (the layout, the model load and
the decode run). A subclass says what it opens through class attributes (``file_kind``,
``file_suffixes``, ``sample_suffixes``, ``bundled_models``, ...) and two hooks:
:meth:`DecodeTab.read_file` (open one file as the input) and :meth:`DecodeTab.refusal`
(why a file, or any file, cannot be opened now; the reason is shown in the banner). In
its :meth:`~gui.tabs.run.RunTab.build_input` it calls :meth:`DecodeTab.make_model_picker`
and :meth:`DecodeTab.make_file_buttons` and places the widgets they make.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Union

from PySide6.QtCore import QByteArray, QDataStream, QIODevice, QSettings
from PySide6.QtWidgets import QComboBox, QFileDialog, QPushButton, QWidget

from core.inputs.types import ImageInput, SpeechInput, TextInput
from core.options import DecodingOptions
from core.tasks.base import Task

from ..widgets.options_panel import ENCODER_STAGES, NO_SOURCE_IDS
from .run import RunTab

#: what a tab gives the task model's runs: its input and that input's settings
TaskInput = Union[SpeechInput, ImageInput, TextInput]
#: the worker's generator: ``gen(cancel)`` runs in a worker thread and yields the model's events
RunFn = Callable[[Callable[[], bool]], Iterator[Any]]

#: the bundled sample inputs (audio, images, text) that the Sample buttons open
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "samples"


def first_file(suffixes: tuple[str, ...], directory: Path = SAMPLES_DIR) -> Path | None:
    """The first file (by name) in ``directory`` whose ending is one of ``suffixes``, or None."""
    if not directory.is_dir():
        return None
    files = sorted(p for p in directory.iterdir() if p.suffix.lower() in suffixes)
    return files[0] if files else None


def local_files(mime) -> list[str]:
    """The local files among the URLs of ``mime`` (dragged or pasted data), any kind."""
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]


class DecodeTab(RunTab):
    """Base class of the Speech / OCR / Translation tabs.

    Besides :class:`~gui.tabs.run.RunTab`'s hooks, subclasses implement :meth:`read_file`
    and :meth:`task_input` (the input and its settings; the decode, fork, lanes and what-if
    runs and the input's identity are written here once over it), and may override :meth:`refusal`, :meth:`model_name` / :meth:`model_label` (what the
    picker shows for a model) and extend :meth:`save_settings` / :meth:`restore_settings`.
    A tab whose models load in several compute types lists them in ``dtypes``: a dtype picker
    (``dtype_combo``) then sits beside the model picker, and :meth:`model_dtype` is its choice.
    """

    #: the Open… dialog's filter name and the file endings it offers; among dropped files,
    #: those with these endings come first
    file_kind = "Files"
    file_suffixes: tuple[str, ...] = ()
    open_title = "Open"
    #: the Sample button opens the first file (by name) in assets/samples/ with these endings;
    #: ``sample_missing`` is the banner when there is none ({folder}: that folder)
    sample_suffixes: tuple[str, ...] = ()
    sample_missing = "No sample found: put one into {folder}."
    #: the model picker's entries, the model loaded on first start, the banner for an empty name
    bundled_models: tuple[str, ...] = ()
    default_model = ""
    empty_model_message = "Enter a model name, a transformers model id or a local folder."
    #: what the encoder reads; None when the source has token ids (translation), which the
    #: encoder stages of the sampler chain need (elsewhere they are disabled, saying why)
    encoder_reads: str | None = "its input"
    #: the compute types the model picker offers beside the model (``core.dtypes.DTYPES``);
    #: empty: no dtype picker (the model loads in float32)
    dtypes: tuple[str, ...] = ()
    #: the dtype picker's tooltip
    dtype_tooltip = ""

    #: the loaded task model (``core.tasks.base.Task``), None before the first load
    model: Task | None
    #: the input's file or take name ("" for typed text)
    source_name = ""
    #: how the tab masks its input for a what-if (a ``gui.tabs.whatif_inputs`` object), or None
    mask: Any = None

    def __init__(self, parent: QWidget | None = None) -> None:
        self.model_combo: QComboBox | None = None
        #: the compute type picker beside the model picker (None where ``dtypes`` is empty)
        self.dtype_combo: QComboBox | None = None
        self.load_button: QPushButton | None = None
        self.open_button: QPushButton | None = None
        self.sample_button: QPushButton | None = None
        super().__init__(parent)
        self.setAcceptDrops(True)  # files dropped anywhere on the tab (dropEvent)
        if self.encoder_reads is not None:
            why = NO_SOURCE_IDS.format(what=self.encoder_reads)
            self.options_panel.setUnavailableStages({s: why for s in ENCODER_STAGES})

    # ------------------------------------------------------------ widgets
    def make_model_picker(self, tooltip: str, min_chars: int = 16, fit_contents: bool = False) -> None:
        """Make ``self.model_combo`` (editable: a bundled model, or a name typed in) and
        ``self.load_button``; picking an entry, Enter in the box and Load all load the
        model named in the box. ``fit_contents``: the box's width follows ``min_chars``
        instead of its longest entry."""
        combo = QComboBox()
        combo.setEditable(True)
        combo.addItems([self.model_label(n) for n in self.bundled_models])
        combo.setToolTip(tooltip)
        combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        if fit_contents:
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        combo.setMinimumContentsLength(min_chars)
        combo.activated.connect(lambda _i: self.load_picked_model())
        combo.lineEdit().returnPressed.connect(self.load_picked_model)
        self.model_combo = combo
        self.load_button = QPushButton("Load")
        self.load_button.setToolTip("Load the model named on the left")
        self.load_button.clicked.connect(self.load_picked_model)
        if self.dtypes:
            self.dtype_combo = QComboBox()
            self.dtype_combo.addItems(list(self.dtypes))
            self.dtype_combo.setToolTip(self.dtype_tooltip)
            self.dtype_combo.currentTextChanged.connect(lambda _t: self.dtype_changed())

    def make_file_buttons(self, open_tip: str, sample_tip: str) -> None:
        """Make ``self.open_button`` (Open…: :meth:`open_input`) and ``self.sample_button``
        (:meth:`load_sample`; disabled when assets/samples/ holds no sample for this tab)."""
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip(open_tip)
        self.open_button.clicked.connect(self.open_input)
        self.sample_button = QPushButton("Sample")
        self.sample_button.setToolTip(sample_tip)
        self.sample_button.clicked.connect(self.load_sample)
        self.sample_button.setEnabled(self.sample_path() is not None)

    # -------------------------------------------------------------- model
    def model_name(self, text: str) -> str:
        """The model name behind the picker's ``text`` (as typed, without surrounding spaces)."""
        return text.strip()

    def model_label(self, name: str) -> str:
        """What the picker shows for model ``name``."""
        return name

    def model_dtype(self) -> str:
        """The compute type picked for the model ("float32" where the tab has no dtype picker)."""
        return self.dtype_combo.currentText() if self.dtype_combo is not None else "float32"

    def dtype_changed(self) -> None:
        """The user picked another dtype: reload the model named in the picker with it (nothing
        while the box is empty, or when the loaded model already has that name and dtype)."""
        name = self.model_name(self.model_combo.currentText()) if self.model_combo is not None else ""
        model = self.model
        if not name or (model is not None and getattr(model, "dtype", "float32") == self.model_dtype()
                        and self.model_label(getattr(model, "name", "")) == self.model_label(name)):
            return
        self.load_model(name)

    def load_picked_model(self) -> None:
        """Load the model named in the picker."""
        self.load_model(self.model_combo.currentText())

    def load_model(self, name: str) -> None:
        """Show ``name`` in the picker and load it (an empty name: a banner says what to enter)."""
        name = self.model_name(name)
        label = self.model_label(name)
        if self.model_combo is not None and self.model_combo.currentText() != label:
            self.model_combo.setCurrentText(label)
        if not name:
            self.show_error(self.empty_model_message)
            return
        super().load_model(name)

    def initial_model(self) -> str:
        """The model to load on start: the last one used (restored into the picker), else
        ``default_model``."""
        text = self.model_combo.currentText() if self.model_combo is not None else ""
        return self.model_name(text) or self.default_model

    # -------------------------------------------------------------- files
    def read_file(self, path: Path) -> bool:
        """Open ``path`` as the input (errors go to the banner); True if it was taken (or
        is being read in a worker thread). :meth:`open_file` asks :meth:`refusal` first."""
        raise NotImplementedError

    def refusal(self, path: Path | None) -> str | None:
        """Why ``path`` cannot be opened now (None: any file, asked before the Open…
        dialog), as a sentence for the banner; None when it can."""
        return None

    def refused(self, path: Path | None) -> bool:
        """True, with the reason in the banner, when :meth:`refusal` refuses ``path``."""
        reason = self.refusal(path)
        if reason:
            self.show_error(reason)
        return bool(reason)

    def open_file(self, path: str | Path) -> bool:
        """Open ``path`` as the input, unless :meth:`refusal` says why not (a banner; False)."""
        path = Path(path)
        if self.refused(path):
            return False
        return self.read_file(path)

    def open_input(self) -> None:
        """Ctrl+O / Open…: pick a file, starting in the folder of the last one this tab opened."""
        if self.refused(None):
            return
        key = f"{self.settings_key}/last_dir"
        start = str(QSettings().value(key, str(Path.home())))
        pattern = " ".join(f"*{s}" for s in self.file_suffixes)
        path, _ = QFileDialog.getOpenFileName(self, self.open_title, start, f"{self.file_kind} ({pattern});;All files (*)")
        if path:
            QSettings().setValue(key, str(Path(path).parent))
            self.open_file(path)

    def sample_path(self) -> Path | None:
        """The bundled sample this tab opens, or None."""
        return first_file(self.sample_suffixes)

    def load_sample(self) -> None:
        """Sample: open :meth:`sample_path` (a banner when there is none)."""
        p = self.sample_path()
        if p is None:
            self.show_error(self.sample_missing.format(folder=SAMPLES_DIR))
            return
        self.open_file(p)

    # ------------------------------------------------------ drag and drop
    def can_drop(self, mime) -> bool:
        """Whether a drag of ``mime`` is taken: any local file (a wrong kind is explained on drop)."""
        return bool(local_files(mime))

    def drop(self, mime) -> bool:
        """Open what ``mime`` holds; False if it holds nothing this tab takes."""
        return self.open_dropped(local_files(mime))

    def open_dropped(self, paths: list[str]) -> bool:
        """Open the first of the dropped ``paths``, those with ``file_suffixes`` first."""
        if not paths:
            return False
        paths = sorted(paths, key=lambda p: not p.lower().endswith(self.file_suffixes))
        self.open_file(paths[0])
        return True

    def dragEnterEvent(self, e) -> None:  # noqa: N802
        if self.can_drop(e.mimeData()):
            e.acceptProposedAction()
        else:
            e.ignore()

    def dragMoveEvent(self, e) -> None:  # noqa: N802
        self.dragEnterEvent(e)

    def dropEvent(self, e) -> None:  # noqa: N802
        if self.drop(e.mimeData()):
            e.acceptProposedAction()

    # --------------------------------------------------------------- runs
    def task_input(self, purpose: str = "decode") -> TaskInput:
        """The current input and its settings as the task model's runs take them
        (``core.inputs.types``). ``purpose``: "decode", "fork", "lanes", "what_if" or
        "identity" (a re-run may need other settings: the OCR tab re-reads the lines read).

        Raises:
            ValueError: there is nothing to run on (shown in the banner).
        """
        raise NotImplementedError

    def decode_fn(self, options: DecodingOptions) -> RunFn:
        """The task model's ``decode`` of :meth:`task_input` with ``options``."""
        model, (source, settings) = self.model, self.task_input("decode").call_args(rerun=False)
        return lambda cancel: model.decode(source, options, cancel=cancel, **settings)

    def fork_fn(self, options: DecodingOptions, segment: int, forced_ids: tuple[int, ...], step_offset: int) -> RunFn:
        """The task model's ``fork`` of segment ``segment`` with ``forced_ids`` forced, its
        steps numbered from ``step_offset``, reusing the KV cache if :attr:`fork_reuse_cache`."""
        model, reuse = self.model, self.fork_reuse_cache
        source, settings = self.task_input("fork").call_args()
        return lambda cancel: model.fork(source, options, segment=segment, forced_ids=forced_ids,
                                         step_offset=step_offset, cancel=cancel, reuse_cache=reuse, **settings)

    def lanes_fn(self, lanes: list[DecodingOptions]) -> RunFn:
        """The task model's ``decode_lanes``: every lane's options on one encoder pass per segment."""
        model, (source, settings) = self.model, self.task_input("lanes").call_args(rerun=False)
        return lambda cancel: model.decode_lanes(source, lanes, cancel=cancel, **settings)

    def whatif_fn(self, options: DecodingOptions, kind: str, original: list) -> RunFn:
        """The task model's ``what_if`` with :attr:`whatif_mask` (``kind`` "mask") or its
        ``no_input`` ("prior") of the run whose StepEvents are ``original``.

        Raises:
            RuntimeError: the model cannot do what-ifs of ``kind``.
        """
        inp, model, mask = self.task_input("what_if"), self.model, self.whatif_mask
        if not hasattr(model, "what_if" if kind == "mask" else "no_input"):
            raise RuntimeError(f"{getattr(model, 'name', 'this model')} cannot do input what-ifs")
        source, settings = inp.call_args()
        if kind == "mask":
            settings = {inp.mask_keyword: mask, **settings}
            return lambda cancel: model.what_if(source, options, original, cancel=cancel, **settings)
        return lambda cancel: model.no_input(source, options, original, cancel=cancel, **settings)

    def mask_changed(self, mask: Any) -> None:
        """The what-if's mask changed (None: cleared): :attr:`mask` draws it."""
        if self.mask is not None:
            self.mask.mask_changed(mask)

    def input_identity(self) -> tuple[str, str]:
        """(a description of the current input for people, a SHA-256 of its content)."""
        return self.task_input("identity").identity(self.source_name)

    # ----------------------------------------------------------- settings
    def save_settings(self, s: QSettings) -> None:
        """Store the tab's choices (options, splitter sizes, the picked model); subclasses extend."""
        key = self.settings_key
        panel = self.options_panel
        try:
            s.setValue(f"{key}/options", panel.options().to_dict())
        except ValueError:  # an invalid combination on screen: keep the last valid one
            s.setValue(f"{key}/options", panel.last_valid_options().to_dict())
        s.setValue(f"{key}/preset", panel.presetName())
        s.setValue(f"{key}/option_sections", ",".join(panel.expandedSections()))
        for name, splitter in zip(("top_splitter", "bottom_splitter", "main_splitter"), self.splitters()):
            s.setValue(f"{key}/{name}", splitter.saveState())
        if self.model_combo is not None:
            s.setValue(f"{key}/model", self.model_name(self.model_combo.currentText()))
        if self.dtype_combo is not None:
            s.setValue(f"{key}/dtype", self.model_dtype())

    def restore_settings(self, s: QSettings) -> None:
        """Restore what :meth:`save_settings` stored; bad or old values are ignored, and so are
        main-splitter sizes that would make the token stream lower than its minimum height."""
        key = self.settings_key
        data = s.value(f"{key}/options")
        if isinstance(data, dict):
            try:
                self.options_panel.setOptions(DecodingOptions.from_dict(_coerce(data)))
            except (TypeError, ValueError):
                pass
        preset = s.value(f"{key}/preset")
        if isinstance(preset, str) and preset:
            self.options_panel.setPreset(preset, apply=False)  # compare with it; the options stay
        sections = s.value(f"{key}/option_sections")
        if isinstance(sections, str):
            self.options_panel.setExpandedSections(n for n in sections.split(",") if n)
        for name, splitter in zip(("top_splitter", "bottom_splitter", "main_splitter"), self.splitters()):
            state = s.value(f"{key}/{name}")
            if state is None:
                continue
            if splitter is self.main_splitter:
                sizes = splitter_state_sizes(state)
                if sizes is None or len(sizes) != 3 or sizes[1] < self.stream.minimumSizeHint().height():
                    continue  # keep the defaults (e.g. a state saved before the stream had a minimum)
            splitter.restoreState(state)
        model = s.value(f"{key}/model")
        if model and self.model_combo is not None:
            self.model_combo.setCurrentText(self.model_label(str(model)))
        dtype = s.value(f"{key}/dtype")
        if self.dtype_combo is not None and str(dtype) in self.dtypes:
            self.dtype_combo.blockSignals(True)  # restored, not picked: the first load takes it
            self.dtype_combo.setCurrentText(str(dtype))
            self.dtype_combo.blockSignals(False)


def splitter_state_sizes(state: Any) -> list[int] | None:
    """The pane sizes (pixels) stored in a ``QSplitter.saveState()`` blob, or None if it is not one.

    The blob is Qt's ``QDataStream`` (version Qt_5_0): int32 marker 0xff, int32 version,
    then the sizes as a ``QList<int>`` (uint32 count, int32 each); see ``qsplitter.cpp``.
    """
    if not isinstance(state, (QByteArray, bytes, bytearray)):
        return None
    data = QByteArray(state)  # kept alive while the stream reads it
    stream = QDataStream(data, QIODevice.OpenModeFlag.ReadOnly)
    stream.setVersion(QDataStream.Version.Qt_5_0)
    if stream.readInt32() != 0xFF:
        return None
    stream.readInt32()  # version
    n = stream.readUInt32()
    if stream.status() != QDataStream.Status.Ok or n > 64:
        return None
    sizes = [stream.readInt32() for _ in range(n)]
    return sizes if stream.status() == QDataStream.Status.Ok else None


def _coerce(data: dict) -> dict:
    """QSettings (INI) may return numbers as strings; convert to the dataclass field types."""
    out = {}
    defaults = DecodingOptions()
    for k, v in data.items():
        if not hasattr(defaults, k):
            continue
        ref = getattr(defaults, k)
        try:
            if isinstance(ref, bool):
                out[k] = v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")
            elif isinstance(ref, int) and not isinstance(ref, bool):
                out[k] = int(v) if v not in (None, "") else ref
            elif isinstance(ref, float):
                out[k] = float(v)
            else:
                out[k] = v
        except (TypeError, ValueError):
            continue
    return out
