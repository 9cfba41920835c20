"""Reading a JSON file the user chose (a preset, a saved exploration): one place that tells
"cannot be read" from "not JSON", each with the caller's own message. No Qt, no torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable


def read_json(path: str | Path, *, unreadable: Callable[[str], Exception],
              not_json: Callable[[str], Exception]) -> Any:
    """The JSON value stored in ``path`` (UTF-8 text).

    Args:
        unreadable: the reason (e.g. "No such file or directory") -> the error to raise when
            the file cannot be read.
        not_json: the parser's message -> the error to raise when the file is not UTF-8 JSON.

    Raises:
        what ``unreadable`` or ``not_json`` return (the OSError / decoding error as its cause).
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise unreadable(str(exc.strerror or exc)) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise not_json(str(exc)) from exc
