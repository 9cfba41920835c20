"""``decoding-explorer translate`` output: each sentence's translation printed as soon as it
is done (a 1 MB text of 19,000 sentences printed nothing for 300 s when the whole text was
translated before anything was printed), the model's notes about the text as warnings on
stderr (parts in a script it cannot read, sentences cut at the length cap, control
characters), and with ``--progress`` (or when stderr is a terminal) ``sentence i/n`` lines
on stderr. ``--json`` still prints one trace at the end (with ``--progress`` lines while it
decodes)."""

from __future__ import annotations

import argparse
import sys
from typing import Iterable, Iterator, TextIO

from core.events import Event, SegmentEvent
from core.cli.trace import say_speculative, stage_reports, vocab_size_of
from core.options import DecodingOptions


def add_progress_argument(p: argparse.ArgumentParser) -> None:
    """``--progress``: one ``sentence i/n`` line per sentence on stderr."""
    p.add_argument("--progress", action="store_true",
                   help="print 'sentence i/n' on stderr as each sentence is translated "
                        "(also when stderr is a terminal)")


def warn_notes(model, text: str, err: TextIO | None = None) -> None:
    """Print the model's notes about ``text`` (``TranslationModel.text_notes``) as warnings."""
    err = err or sys.stderr
    for note in model.text_notes(text):
        print(f"decoding-explorer: warning: {note}", file=err, flush=True)


def wants_progress(args) -> bool:
    """``--progress`` given, or stderr is a terminal."""
    return bool(getattr(args, "progress", False)) or sys.stderr.isatty()


def said_segments(events: Iterable[Event], total_of=None, err: TextIO | None = None) -> Iterator[Event]:
    """``events`` unchanged, with a ``sentence i/n`` line on stderr at each SegmentEvent."""
    err = err or sys.stderr
    for ev in events:
        if isinstance(ev, SegmentEvent):
            print(f"sentence {ev.segment + 1}/{ev.total or '?'}", file=err, flush=True)
        yield ev


def stream_translation(model, text: str, options: DecodingOptions, prefix: list[int], *, shortlist: bool,
                       progress: bool, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Print the translation of ``text`` sentence by sentence as each is done (flushed), the
    separators of the input kept; the same text :meth:`TranslationModel.decode` gives, then
    a newline. Returns the exit status (0)."""
    out, err = out or sys.stdout, err or sys.stderr
    pending, wrote, ids, speculative = "", False, [], None
    for res in model.sentences(text, options, shortlist=shortlist, prefix_ids=prefix):
        ids += res.finished.token_ids
        if res.finished.stats.speculative is not None:
            from core.speculative.summary import merge_summary

            speculative = merge_summary(speculative, res.finished.stats.speculative)
        if progress:
            print(f"sentence {res.index + 1}/{res.total}", file=err, flush=True)
        if res.text:
            out.write((pending if wrote else "") + res.text)
            out.flush()
            wrote, pending = True, res.chunk.separator
        else:
            pending += res.chunk.separator
    out.write("\n")
    out.flush()
    stage_reports(options, ids, vocab_size_of(model), err)  # the watermark's z-score, on stderr
    say_speculative(speculative, err)  # speculative decoding: α, tokens per target call
    return 0
