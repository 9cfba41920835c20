"""Where a sweep's rows go: ``results.parquet`` in the out folder, appended as rows arrive,
and one gzipped JSON trace per row under ``traces/``.

A Parquet file cannot be appended to in place, so each batch of rows that arrives is written
at once as its own small file ``results.parts/part-NNNNNN.parquet`` (written to a temporary
name and renamed: a part is whole or absent), its traces first. :meth:`ResultStore.compact`
folds the parts into ``results.parquet`` (at the end of a sweep, after Ctrl+C, and when a
sweep starts on a folder a killed sweep left). Rows read back are those of
``results.parquet`` and of every part, so nothing that arrived is lost whenever the sweep
stops.

Compaction writes the new results.parquet (to a temporary name, renamed) and only then
removes the parts: a crash between the two leaves the folded rows in both. No order of two
file-system steps avoids a window where a reader sees either too much or too little, and
too little would hide rows, so readers tell: a row is one run, keyed by (input hash,
options hash, seed) (``ROW_KEY``), and :func:`read_results` -- which :meth:`ResultStore.rows`,
:meth:`ResultStore.compact`, the plots and the window read through -- keeps the first row of
each key (results.parquet's, then the parts' in order). The next compaction folds them once
and removes the parts. Files that failed are listed in ``failures.jsonl`` (one JSON object per failed
file x strategy: file, spec, seed, hashes, error) and decoded again on the next run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from core.sweep.decode import ROW_FIELDS, Decoded

#: the columns that name one run: a row with the same values is the same run, read once
ROW_KEY = ("input_hash", "options_hash", "seed")


def _schema():
    import pyarrow as pa

    types = {
        "seed": pa.int64(), "value": pa.float64(), "logprob": pa.float64(), "raw_logprob": pa.float64(),
        "tokens": pa.int64(), "decode_s": pa.float64(), "encode_s": pa.float64(), "audio_s": pa.float64(),
        "rtf": pa.float64(), "segments": pa.int64(), "skipped": pa.int64(), "no_speech": pa.int64(), "fallbacks": pa.int64(),
        "repetitions": pa.int64(), "silent_reference": pa.bool_(), "token_ids": pa.list_(pa.int64()),
    }
    return pa.schema([(name, types.get(name, pa.string())) for name in ROW_FIELDS])


class ResultStore:
    """The results of a sweep in ``out`` (a folder, made if missing).

    Raises:
        OSError: ``out`` cannot be made or written.
    """

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.path = self.out / "results.parquet"
        self.parts = self.out / "results.parts"
        self.failures = self.out / "failures.jsonl"
        self._next = 0

    def rows(self) -> list[dict]:
        """Every row stored (results.parquet, then the parts in order), each run once
        (:func:`read_results`)."""
        table = read_results(self.out)
        return table.to_pylist() if table is not None else []

    def done(self) -> set[tuple[str, str]]:
        """The (input hash, options hash) of every row stored: the runs a resumed sweep skips."""
        import pyarrow.parquet as pq

        keys: set[tuple[str, str]] = set()
        for f in self._files():
            t = pq.read_table(f, columns=["input_hash", "options_hash"])
            keys.update(zip(t.column("input_hash").to_pylist(), t.column("options_hash").to_pylist()))
        return keys

    def append(self, results: list[Decoded]) -> int:
        """Store ``results`` as they arrive: each trace under ``traces/``, the rows as a new part,
        each failure as a line of failures.jsonl. Returns how many rows were stored."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [r.row for r in results if r.error is None]
        for r in results:
            if r.error is None and r.trace is not None:
                path = self.out / r.row["trace"]
                path.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(path, r.trace)
        failed = [r.row for r in results if r.error is not None]
        if failed:
            with open(self.failures, "a", encoding="utf-8") as f:
                for row in failed:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
        if not rows:
            return 0
        self.parts.mkdir(exist_ok=True)
        while True:
            part = self.parts / f"part-{self._next:06d}.parquet"
            self._next += 1
            if not part.exists():
                break
        table = pa.Table.from_pylist([{k: row.get(k) for k in ROW_FIELDS} for row in rows], schema=_schema())
        tmp = part.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, part)
        return len(rows)

    def compact(self) -> int:
        """Fold the parts into results.parquet (written to a temporary file and renamed, then
        the parts removed; rows of a run already there are folded once, module docstring).
        Returns the number of rows in results.parquet."""
        import pyarrow.parquet as pq

        parts = self._parts()
        if not parts:
            return pq.read_metadata(self.path).num_rows if self.path.exists() else 0
        table = read_results(self.out)  # each run once, also after a compaction cut short
        tmp = self.out / "results.parquet.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.path)
        for f in parts:
            f.unlink()
        try:
            self.parts.rmdir()
        except OSError:
            pass
        return table.num_rows

    def clear_failures(self) -> None:
        """Forget the failures of an earlier run (they are decoded again)."""
        if self.failures.exists():
            self.failures.unlink()

    def failed(self) -> list[dict]:
        """The failures of this run (failures.jsonl's lines)."""
        if not self.failures.exists():
            return []
        return [json.loads(line) for line in self.failures.read_text(encoding="utf-8").splitlines() if line.strip()]

    def _parts(self) -> list[Path]:
        return sorted(self.parts.glob("part-*.parquet")) if self.parts.is_dir() else []

    def _files(self) -> list[Path]:
        return result_files(self.out)


def result_files(out: str | os.PathLike) -> list[Path]:
    """The Parquet files holding a sweep's rows in ``out``: results.parquet (when there),
    then results.parts/part-*.parquet in order."""
    out = Path(out)
    parts = out / "results.parts"
    return (([out / "results.parquet"] if (out / "results.parquet").is_file() else [])
            + (sorted(parts.glob("part-*.parquet")) if parts.is_dir() else []))


def read_results(out: str | os.PathLike, columns: list[str] | tuple[str, ...] | None = None):
    """A sweep's rows in ``out`` as one ``pyarrow.Table`` (``columns``, default all), each run
    once: the first row of each (input hash, options hash, seed) (``ROW_KEY``; results.parquet
    first, then the parts in order), so rows a compaction cut short left in both are not read
    twice. None when ``out`` holds no results.

    Raises:
        ImportError: pyarrow is not installed.
        OSError / pyarrow.ArrowInvalid: a file cannot be read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = result_files(out)
    if not files:
        return None
    wanted = list(columns) if columns is not None else None
    read = None if wanted is None else list(dict.fromkeys(wanted + list(ROW_KEY)))
    tables = []
    for f in files:
        t = pq.read_table(f, columns=read)
        t = t if read is None else t.select(read)
        tables.append(t.cast(_schema()) if read is None else t.cast(pa.schema([_schema().field(c) for c in read])))
    table = pa.concat_tables(tables)
    seen: set[tuple] = set()
    keep = []
    for i, key in enumerate(zip(*(table.column(c).to_pylist() for c in ROW_KEY))):
        if key not in seen:
            seen.add(key)
            keep.append(i)
    if len(keep) < table.num_rows:
        table = table.take(pa.array(keep, type=pa.int64()))
    return table if wanted is None else table.select(wanted)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
