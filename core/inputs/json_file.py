"""Reading a JSON file the user chose (a preset, a saved exploration, a trace): one place that
tells "cannot be read" from "not JSON", each with the caller's own message. A gzipped file
(a sweep's ``traces/*.json.gz``) is read as it is, told by gzip's magic bytes, whatever its
name. No Qt, no torch.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any, Callable


def read_json(path: str | Path, *, unreadable: Callable[[str], Exception],
              not_json: Callable[[str], Exception]) -> Any:
    """The JSON value stored in ``path`` (UTF-8 text, or gzipped UTF-8 text: the file starts
    with gzip's magic bytes ``1f 8b``).

    Args:
        unreadable: the reason (e.g. "No such file or directory") -> the error to raise when
            the file cannot be read.
        not_json: the parser's message -> the error to raise when the file is not UTF-8 JSON.

    Raises:
        what ``unreadable`` or ``not_json`` return (the OSError / decoding error as its cause).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise unreadable(str(exc.strerror or exc)) from exc
    try:
        if data[:2] == GZIP_MAGIC:
            data = gzip.decompress(data)
        return json.loads(data.decode("utf-8"))
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise not_json(f"a damaged gzip file: {exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise not_json(str(exc)) from exc


#: the first two bytes of every gzip file (RFC 1952)
GZIP_MAGIC = b"\x1f\x8b"
