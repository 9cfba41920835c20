"""Progress and notes of ``decoding-explorer ocr`` on stderr (``core.cli.commands.cmd_ocr``).

With ``--progress`` (or when stderr is a terminal) one line per model-loading stage, per
detection step (``OCRProgress``: the inked parts and tiles CRAFT is given) and per line
read, so a huge image never looks stuck. The note that an image was downscaled on load
(``core.inputs.images.size_note``) is printed always: it says why small text may be lost.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Iterable, Iterator

from core.events import Event, SegmentEvent


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--progress`` on the ocr subcommand."""
    parser.add_argument("--progress", action="store_true",
                        help="print progress on stderr (model load, detection parts and tiles, each line read)")


def reporter(args: argparse.Namespace) -> Callable[[str], None]:
    """``say(text)``: one line on stderr when ``--progress`` is given or stderr is a
    terminal, else nothing."""
    if getattr(args, "progress", False) or sys.stderr.isatty():
        return lambda text: print(f"ocr: {text}", file=sys.stderr, flush=True)
    return lambda text: None


def note_size(image, path: str) -> None:
    """Print ``size_note`` (the image was downscaled on load) on stderr, if any."""
    from core.inputs.images import size_note

    note = size_note(image, Path(path).name)
    if note:
        print(f"ocr: note: {note}", file=sys.stderr, flush=True)


def detect_lines(model, image, region, say: Callable[[str], None]) -> list:
    """``model.detect(image, region)`` with each ``OCRProgress`` said (its text, once per change)."""
    steps = model.detect_steps(image, region)
    last = None
    while True:
        try:
            p = next(steps)
        except StopIteration as stop:
            return stop.value
        if p.text != last:
            say(p.text)
            last = p.text


def said_lines(events: Iterable[Event], say: Callable[[str], None]) -> Iterator[Event]:
    """``events`` unchanged, saying "reading line i of n" at each line's ``SegmentEvent``."""
    for ev in events:
        if isinstance(ev, SegmentEvent):
            say(f"reading line {ev.segment + 1} of {ev.total}" if ev.total else f"reading line {ev.segment + 1}")
        yield ev
