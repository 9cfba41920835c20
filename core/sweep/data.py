"""The data a sweep reads: one :class:`Item` per input (a file, a TSV line, a data-set row).

Three kinds of DATA (:func:`read_items`):

- a folder of audio files (transcribe) or images (ocr), each with a same-stem ``.txt``
  reference beside it (``clip.wav`` + ``clip.txt``); sub-folders are searched too, and an
  input without a reference is still decoded (its metric is empty);
- a TSV file ``source<TAB>reference`` (translate; one sentence or text per line, a line
  without a tab has no reference; ``#`` lines and blank lines are skipped);
- a folder written by ``datasets``' ``save_to_disk`` (``dataset_info.json`` or
  ``state.json`` inside; a ``DatasetDict`` folder needs ``--split``), with ``--audio-column``
  (the input: an audio, an image or a text column) and ``--text-column`` (the reference);
- for users online, a hub data set id (``OWNER/NAME``, not an existing path) with ``--split``
  (``datasets.load_dataset``), read the same way.

Every item has an ``id`` (the file's path relative to DATA with ``/`` separators,
``FILE.tsv:LINE`` for a TSV line, ``SPLIT[INDEX]`` for a data-set row) and an
``input_hash`` (SHA-256 of the file's bytes, the source text, or the row's input), which with
the options hash says whether a row of results is already done (resumption).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

#: file suffixes each task reads from a folder
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".opus", ".mp3", ".m4a", ".aiff", ".aif")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")
#: the sweep's tasks (the CLI's command names)
TASKS = ("transcribe", "translate", "ocr")


class DataError(ValueError):
    """DATA cannot be read as the task's inputs (one line saying what to do)."""


@dataclass(frozen=True)
class Item:
    """One input of a sweep.

    Attributes:
        id: the input's name in the results (path relative to DATA, ``FILE.tsv:LINE`` or
            ``SPLIT[INDEX]``).
        input_hash: SHA-256 (64 hex digits) of what is decoded.
        path: the input file (absolute), None for a TSV line or a data-set row.
        text: the source text (translation), None otherwise.
        reference: the expected output, None when there is none.
        dataset: ``(folder, split, index, input column)`` of a data-set row, None otherwise.
    """

    id: str
    input_hash: str
    path: str | None = None
    text: str | None = None
    reference: str | None = None
    dataset: tuple[str, str | None, int, str] | None = None


def sha256_text(text: str) -> str:
    """SHA-256 of ``text`` encoded as UTF-8, 64 hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (read in 1 MiB chunks), 64 hex digits. OSError if unreadable."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_items(task: str, data: str | os.PathLike, *, audio_column: str | None = None,
               text_column: str | None = None, split: str | None = None) -> list[Item]:
    """The inputs of ``data`` for ``task`` ("transcribe" | "translate" | "ocr"), in a stable
    order (sorted ids; TSV and data-set rows in file order).

    Raises:
        DataError: ``data`` is missing, empty, of a kind the task does not read, a data set
            without ``datasets`` installed or without the columns asked for.
    """
    if task not in TASKS:
        raise DataError(f"unknown task {task!r}; a sweep runs one of {', '.join(TASKS)}")
    root = Path(data)
    if not root.exists() and looks_like_hub_id(str(data)):
        return read_dataset(root, task, audio_column, text_column, split, hub_id=str(data))
    if not root.exists():
        raise DataError(f"{data}: no such file or folder; give a folder of inputs with .txt references, "
                        "a TSV (translate) or a data set saved with datasets' save_to_disk")
    if root.is_dir() and _is_dataset(root):
        return read_dataset(root, task, audio_column, text_column, split)
    if root.is_file():
        if task != "translate":
            raise DataError(f"{data} is a file; {task} sweeps a folder of "
                            f"{'audio files' if task == 'transcribe' else 'images'} (each with a same-stem .txt "
                            "reference) or a saved data set")
        return read_tsv(root)
    if task == "translate":
        raise DataError(f"{data} is a folder; translate sweeps a TSV file of source<TAB>reference lines "
                        "or a saved data set")
    return read_folder(root, AUDIO_SUFFIXES if task == "transcribe" else IMAGE_SUFFIXES)


def read_folder(root: Path, suffixes: tuple[str, ...]) -> list[Item]:
    """Every file under ``root`` whose suffix is in ``suffixes`` (case-insensitive), with the
    text of ``STEM.txt`` beside it as its reference (stripped; None when absent).

    Raises:
        DataError: no such file under ``root``; a reference that is not UTF-8.
    """
    items = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in suffixes):
        ref_path = path.with_suffix(".txt")
        reference = None
        if ref_path.is_file():
            try:
                reference = ref_path.read_text(encoding="utf-8-sig").strip()
            except UnicodeDecodeError:
                raise DataError(f"{ref_path} is not UTF-8 text; save the reference as UTF-8") from None
        items.append(Item(id=path.relative_to(root).as_posix(), input_hash=sha256_file(path),
                          path=str(path.resolve()), reference=reference))
    if not items:
        raise DataError(f"{root} holds no {' / '.join(s.lstrip('.') for s in suffixes[:4])} ... files; "
                        "give a folder of inputs, each with a same-stem .txt reference")
    return items


def read_tsv(path: Path) -> list[Item]:
    """One item per line ``source<TAB>reference`` of the TSV ``path`` (UTF-8; blank lines and
    lines starting with ``#`` skipped; a line without a tab has no reference).

    Raises:
        DataError: not UTF-8, or no line to translate.
    """
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text; save the TSV as UTF-8") from None
    items = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        source, tab, reference = line.partition("\t")
        if not source.strip():
            raise DataError(f"{path}:{n}: the source (before the tab) is empty")
        items.append(Item(id=f"{path.name}:{n}", input_hash=sha256_text(source), text=source,
                          reference=reference.strip() if tab and reference.strip() else None))
    if not items:
        raise DataError(f"{path} has no line to translate; write one source<TAB>reference per line")
    return items


def _is_dataset(root: Path) -> bool:
    return any((root / name).is_file() for name in ("dataset_info.json", "state.json", "dataset_dict.json"))


#: the prefix that marks a hub data set id where a folder would be (``Item.dataset[0]``)
HUB = "hub:"


def looks_like_hub_id(data: str) -> bool:
    """Whether ``data`` (not an existing path) reads as a hub data set id: ``NAME`` or
    ``OWNER/NAME`` of letters, digits, ``-``, ``_`` and ``.``."""
    import re

    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", data)) and not data.endswith(
        (".tsv", ".txt", ".wav", ".png"))


def load_dataset_split(root: str | os.PathLike, split: str | None):
    """The ``datasets.Dataset`` saved in ``root`` (``split`` of a DatasetDict), or, for
    ``root`` = ``"hub:ID"``, ``split`` of the hub data set ID (``datasets.load_dataset``:
    downloaded once into datasets' cache, so it needs the internet the first time).

    Raises:
        DataError: ``datasets`` is not installed; a DatasetDict without ``split`` or without
            that split; a hub data set that cannot be loaded (offline, unknown id, no split).
    """
    hub = str(root).startswith(HUB)
    try:
        import datasets
    except ImportError:
        what = f"{str(root)[len(HUB):]} is a hub data set id" if hub else f"{root} is a saved data set"
        raise DataError(f"{what} and reading it needs the datasets package: pip install datasets") from None
    if hub:
        name = str(root)[len(HUB):]
        if split is None:
            raise DataError(f"{name}: a hub data set needs --split (e.g. --split test)")
        try:
            return datasets.load_dataset(name, split=split)
        except Exception as e:  # noqa: BLE001 - offline, unknown id, gated, no such split: one line
            raise DataError(f"could not load the hub data set {name} (split {split}): "
                            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}. It needs the internet "
                            "the first time; or save it with save_to_disk and give that folder") from None
    ds = datasets.load_from_disk(str(root))
    if isinstance(ds, datasets.DatasetDict):
        if split is None or split not in ds:
            raise DataError(f"{root} holds the splits {', '.join(ds)}; choose one with --split")
        ds = ds[split]
    return ds


def read_dataset(root: Path, task: str, audio_column: str | None, text_column: str | None,
                 split: str | None, hub_id: str | None = None) -> list[Item]:
    """One item per row of the data set saved in ``root``: ``audio_column`` is the input
    (audio for transcribe, image for ocr, text for translate), ``text_column`` the reference.
    The input hash of a row is its input text's SHA-256 (translate) or the data set's
    fingerprint with the row's index.

    Raises:
        DataError: as :func:`load_dataset_split`; a column missing.
    """
    where = f"{HUB}{hub_id}" if hub_id else str(root.resolve())
    ds = load_dataset_split(where, split)
    if hub_id:
        root = Path(hub_id)  # (the messages below name it)
    source = audio_column or {"transcribe": "audio", "ocr": "image", "translate": "text"}[task]
    columns = list(ds.column_names)
    for flag, name in (("--audio-column", source), ("--text-column", text_column)):
        if name is not None and name not in columns:
            raise DataError(f"{root} has no column {name!r} ({flag}); its columns: {', '.join(columns)}")
    refs = ds[text_column] if text_column else [None] * len(ds)
    fingerprint = getattr(ds, "_fingerprint", None) or sha256_text(where)
    name = split or "train"
    items = []
    for i in range(len(ds)):
        ref = refs[i].strip() if isinstance(refs[i], str) else None
        if task == "translate":
            text = ds[i][source]
            items.append(Item(id=f"{name}[{i}]", input_hash=sha256_text(text), text=text, reference=ref))
        else:
            items.append(Item(id=f"{name}[{i}]", input_hash=sha256_text(f"{fingerprint}:{i}"), reference=ref,
                              dataset=(where, split, i, source)))
    return items
